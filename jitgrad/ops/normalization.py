"""Layer normalization as one entry (PyTorch's native_layer_norm): the statistics and the result in one kernel
(kernels/norm.py), and a fused backward; the mean and 1/std are workspace outputs the fused backward reads.

The VJP formulas recompute the statistics from the input with table ops, so create_graph records them and
higher-order gradients (and forward mode, which transposes them) follow the input through the statistics.
"""
import math

import numpy as np

from .._device import backend
from .._op import Op, dispatch
from .._tensor import Tensor
from ._table import COMPLEX, INTS, _arr, autocasts, no_kernel, register


def _rows(xp, x, k):
    """``x`` as C-contiguous (M, N) rows, N the product of its last ``k`` dims."""
    n = math.prod(x.shape[x.ndim - k:])
    rows = xp.reshape(x, (x.size // n if n else math.prod(x.shape[:x.ndim - k]), n))
    return rows if xp.is_contiguous(rows) else xp.copy(rows)


def _row(xp, a, k, n, fill, dt):
    """Weight or bias ``a`` as one row of ``n`` (``fill`` everywhere where it is absent)."""
    return xp.full((n,), fill, dt) if a is None else _rows(xp, a, k).reshape(n)


def _forward(xp, dt, x, weight, bias, normalized_ndim, eps):
    k = normalized_ndim
    x2 = _rows(xp, x, k)
    n = x2.shape[1]
    y, mean, rstd = xp.layer_norm(x2, _row(xp, weight, k, n, 1, dt), _row(xp, bias, k, n, 0, dt), eps)
    stats = tuple(x.shape[:x.ndim - k]) + (1,) * k
    return xp.reshape(y, x.shape), xp.reshape(mean, stats), xp.reshape(rstd, stats)


# ---------------------------------------------------------------------- VJP formulas (over table ops)
def _normalized(s):
    """(xhat, rstd, the normalized dims), recomputed from the input (differentiable in it)."""
    x = s.self
    dims = tuple(range(x.ndim - s.normalized_ndim, x.ndim))
    xc = x - x.mean(dims, keepdim=True)
    rstd = ((xc * xc).mean(dims, keepdim=True) + s.eps).rsqrt()
    return xc * rstd, rstd, dims


def _input_grad(g, s):
    xhat, rstd, dims = _normalized(s)
    gw = g[0] if s.weight is None else g[0] * s.weight
    return rstd * (gw - gw.mean(dims, keepdim=True) - xhat * (gw * xhat).mean(dims, keepdim=True))


_VJP = [_input_grad,
        lambda g, s: (g[0] * _normalized(s)[0]).sum_to_size(s.weight.shape),
        lambda g, s: g[0].sum_to_size(s.bias_shape)]


# ---------------------------------------------------------------------- the fused backward
def _parts(g, s):
    """(dx, dw, db) from the kernels, computed once per node and backward pass."""
    d = s.__dict__
    parts = d.get("_fused_parts")
    if parts is None:
        x = s.self._data
        xp = backend(x)
        k = s.normalized_ndim
        x2 = _rows(xp, x, k)
        n = x2.shape[1]
        w = _row(xp, None if s.weight is None else s.weight._data, k, n, 1, x.dtype)
        weights = s.next_functions[1][0] is not None or s.next_functions[2][0] is not None
        dx, dw, db = xp.layer_norm_vjp(_rows(xp, g[0]._data, k), x2, w, s.mean._data.reshape(-1),
                                       s.rstd._data.reshape(-1), weights)
        parts = d["_fused_parts"] = (xp.reshape(dx, x.shape), dw, db)
    return parts


def _fused(k):
    def fused(g, s):
        grad = _parts(g, s)[k]
        if all(nf[0] is None for nf in s.next_functions[k + 1:]):
            s.__dict__.pop("_fused_parts", None)
        if k:
            grad = backend(grad).reshape(grad, s.weight_shape if k == 1 else s.bias_shape)
        return Tensor._wrap(grad)
    return fused


# ---------------------------------------------------------------------- the API
def _shape_text(shape):
    return ", ".join(map(str, shape))


@autocasts("native_layer_norm")
def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Normalise over the last len(normalized_shape) dims (PyTorch's F.layer_norm)."""
    ns = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    k = len(ns)
    if input.ndim < k or tuple(input.shape[input.ndim - k:]) != ns:
        raise RuntimeError("Given normalized_shape=[%s], expected input with shape [*, %s], but got input of size[%s]"
                           % (_shape_text(ns), _shape_text(ns), _shape_text(input.shape)))
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and tuple(t.shape) != ns:
            raise RuntimeError("Expected %s to be of same shape as normalized_shape, but got %s of shape [%s] and "
                               "normalized_shape = [%s]" % (name, name, _shape_text(t.shape), _shape_text(ns)))
    return dispatch(NATIVE_LAYER_NORM, (input, weight, bias), {"normalized_ndim": k, "eps": float(eps)})[0]


def _np_layer_norm(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    k = 1 if isinstance(normalized_shape, int) else len(normalized_shape)
    dims = tuple(range(x.ndim - k, x.ndim))
    xc = x - x.mean(dims, keepdims=True)
    y = xc / np.sqrt((xc * xc).mean(dims, keepdims=True) + eps)
    return y * (1 if weight is None else weight) + (0 if bias is None else bias)


def _samples(rng, dtype):
    if np.dtype(dtype).kind != "f":
        return []
    A = lambda *s: _arr(rng, s, -2.0, 2.0, dtype)  # noqa: E731
    return [((A(4, 5), (5,), A(5), A(5)), {}), ((A(2, 3, 4), (3, 4), A(3, 4), None), {"eps": 1e-3}),
            ((A(3, 6), 6, None, A(6)), {}), ((A(2, 2, 3), [3]), {}), ((A(3, 4)[:, ::2], (2,), A(2), A(2)), {})]


NATIVE_LAYER_NORM = register(Op(
    "native_layer_norm", _forward, inputs=("self", "weight", "bias"), vjp=_VJP, fused=[_fused(0), _fused(1), _fused(2)],
    n_outputs=3, outputs=("result", "mean", "rstd"), workspace=("mean", "rstd"), dtype="promote",
    unsupported=no_kernel("LayerNormKernelImpl", "bool", *INTS, *COMPLEX), call=layer_norm, ref=_np_layer_norm,
    samples=_samples, api=("layer_norm",), method=False, autocast={"cuda": "fp32"}))
