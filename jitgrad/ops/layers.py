"""Layer primitives with their own entries: linear (one GEMM + bias, one node), embedding (a row
gather whose backward accumulates repeated rows and skips padding_idx) and constant padding."""
import math

import numpy as np

from .._grad_mode import no_grad
from .._op import Op, dispatch
from .._tensor import Tensor
from ._table import LOWER, _arr, autocasts, register
from .indexing import check_rows, index_put_zeros
from .shape import _unsafe_view
from .unary import _c


# ---------------------------------------------------------------------- linear
def _rows(t):
    """t (a tensor or an array) as a matrix of its last dim; the row count is explicit, since -1 cannot
    be inferred when the last dim is 0."""
    shape = tuple(t.shape)  # (a plain tuple: the CUDA simulator's shapes take no negative index)
    return math.prod(shape[:-1]), shape[-1]


# PyTorch's F.linear is addmm(bias, input, weight.t()) (mm without a bias): the entries take those operands in
# that order, the weight as its transposed view (a TBackward0 node), so grad_fn.next_functions reads as PyTorch's
def _linear_forward(xp, dt, b, x, wt):
    shape = tuple(x.shape)
    out = xp.matmul(xp.reshape(x, _rows(x)), wt)  # K = 0: BLAS gives zeros
    if b is not None:
        out = xp.run("add", dt, out, b, out=out)
    return xp.reshape(out, shape[:-1] + (wt.shape[1],))


def _linear_mm_forward(xp, dt, x, wt):
    return _linear_forward(xp, dt, None, x, wt)


def _linear_weight_grad(g, x):
    """The gradient of the transposed weight (in, out), as the transpose of an (out, in) product: TBackward0's
    transpose then hands the weight a C-contiguous gradient that .grad takes over without a copy."""
    return g.reshape(_rows(g)).t().mm(_c(x.reshape(_rows(x)))).t()


@autocasts("linear")
def linear(input, weight, bias=None):
    """input @ weight.T + bias, over any leading dims of input."""
    if weight.ndim != 2:
        out = input.matmul(weight.t())
        return out if bias is None else out + bias
    n = input.shape[-1] if input.ndim else 1
    if input.ndim == 0 or n != weight.shape[1]:
        rows = math.prod(input.shape[:-1]) if input.ndim > 1 else 1
        raise RuntimeError("mat1 and mat2 shapes cannot be multiplied (%dx%d and %dx%d)"
                           % (rows, n, weight.shape[1], weight.shape[0]))
    if input.dtype.name == "bool":
        raise NotImplementedError("\"addmm_impl_cpu_\" not implemented for 'Bool'")
    if input.dtype is not weight.dtype:
        raise RuntimeError("expected m1 and m2 to have the same dtype, but got: %s != %s"
                           % (_scalar_name(input), _scalar_name(weight)))
    if bias is not None:
        if bias.dtype is not input.dtype:
            raise RuntimeError("expected bias and input to have the same dtype, but got: %s != %s"
                               % (_scalar_name(bias), _scalar_name(input)))
        if tuple(bias.shape) != (weight.shape[0],):
            bias = bias.expand(weight.shape[0])  # a broadcastable bias, or expand's error
    if bias is None:  # PyTorch's matmul(input, weight.t()): MmBackward0, a view around it for other ranks
        if input.ndim == 2:
            return dispatch(LINEAR_MM, (input, weight.t()))
        if input.ndim == 1:
            return dispatch(LINEAR_MM, (input.unsqueeze(0), weight.t())).squeeze(0)
        return _unsafe_view(dispatch(LINEAR_MM, (input.reshape(_rows(input)), weight.t())),
                            tuple(input.shape[:-1]) + (weight.shape[0],))
    if input.ndim == 2:
        return dispatch(LINEAR, (bias, input, weight.t()))
    # other ranks, as PyTorch records them: a view to rows, one GEMM node, a view back
    out = dispatch(LINEAR, (bias, input.reshape(_rows(input)), weight.t()))
    return out.reshape(tuple(input.shape[:-1]) + (weight.shape[0],))


def _scalar_name(t):
    return {"float32": "float", "float64": "double", "int64": "long", "int32": "int", "bool": "bool",
            "float16": "c10::Half", "bfloat16": "c10::BFloat16"}[t.dtype.name]


# ---------------------------------------------------------------------- embedding
def _embedding_grad(g, s):
    idx = s.indices
    if s.padding_idx is not None:
        g = g.masked_fill((idx == s.padding_idx).unsqueeze(-1), 0.0)
    if s.scale_grad_by_freq:  # each row's gradient divided by how often its index occurs (counted where idx lives)
        flat = idx.reshape(-1)
        counts = index_put_zeros(g.new_ones(flat.shape), (s.weight_shape[0],), (flat._data,), True)
        g = g / counts.index_select(0, flat).reshape(idx.shape).unsqueeze(-1)
    # (the flat indices as a table op's result: a compiled backward reads them from each call's indices)
    return index_put_zeros(g.reshape(-1, s.weight_shape[1]), s.weight_shape, (idx.reshape(-1)._data,), True)


def _renorm_rows(weight, idx, max_norm, norm_type):
    """embedding's max_norm: rows looked up with a larger norm are scaled down in place (no grad)."""
    rows = Tensor._wrap(np.unique(idx._data))
    with no_grad():
        w = weight[rows]
        norms = w.norm(norm_type, dim=1, keepdim=True)
        scale = (max_norm / (norms + 1e-7)).clamp(max=1.0)
        weight[rows] = w * scale


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False, sparse=False):
    if not isinstance(input, Tensor) or input.dtype.name not in ("int64", "int32"):
        raise RuntimeError("Expected tensor for argument #1 'indices' to have one of the following scalar types: "
                           "Long, Int; but got %s instead (while checking arguments for embedding)"
                           % (input.type() if isinstance(input, Tensor) else type(input).__name__))
    if sparse:
        raise NotImplementedError("sparse gradients are not supported: use sparse=False")
    n = weight.shape[0]
    check_rows(input, n)
    if padding_idx is not None:
        if not -n <= padding_idx < n:
            raise AssertionError("Padding_idx must be within num_embeddings")
        padding_idx = padding_idx + n if padding_idx < 0 else padding_idx
    if max_norm is not None:
        _renorm_rows(weight, input, max_norm, norm_type)
    return dispatch(EMBEDDING, (weight, input.long()), {"padding_idx": padding_idx,
                                                       "scale_grad_by_freq": scale_grad_by_freq})


# ---------------------------------------------------------------------- constant padding
def _pad_forward(xp, dt, x, shape, src, dst, value):
    out = xp.full(shape, value, x.dtype)
    xp.setitem(out, dst, xp.getitem(x, src))
    return out


def _pad_grad(g, s):
    inner = g[s.dst]
    if inner.shape == s.self_shape:
        return inner
    return index_put_zeros(inner, s.self_shape, s.src, False)  # negative pads cropped the input


def pad(input, pad, mode="constant", value=None):
    """Pad the last len(pad)//2 dims: pad = (left, right) of the last dim, then of the one before..."""
    if len(pad) % 2:
        raise RuntimeError("Padding length must be divisible by 2")
    if len(pad) // 2 > input.ndim:
        raise RuntimeError("Padding length should be less than or equal to two times the input dimension but got "
                           "padding length %d and input of dimension %d" % (len(pad), input.ndim))
    if mode != "constant":
        raise NotImplementedError("pad: only mode='constant' is implemented, got mode='%s'" % mode)
    shape, src, dst = list(input.shape), [slice(None)] * input.ndim, [slice(None)] * input.ndim
    for k in range(len(pad) // 2):
        d = input.ndim - 1 - k
        lo, hi = int(pad[2 * k]), int(pad[2 * k + 1])
        n = shape[d] + lo + hi
        if n < 0:
            raise RuntimeError("The input size %d, plus negative padding %d and %d resulted in a negative output size, "
                               "which is invalid. Check dimension %d of your input." % (shape[d], lo, hi, d))
        src[d] = slice(max(-lo, 0), shape[d] - max(-hi, 0))
        dst[d] = slice(max(lo, 0), n - max(hi, 0))
        shape[d] = n
    value = 0 if value is None else value
    if input.dtype.category < 2:  # (a complex value stays complex)
        value = int(value)
    return dispatch(PAD, (input,), {"shape": tuple(shape), "src": tuple(src), "dst": tuple(dst), "value": value})


# ---------------------------------------------------------------------- references and samples (see _table.py)
def _np_pad(x, pad, mode="constant", value=None):
    widths = [(0, 0)] * x.ndim
    for k in range(len(pad) // 2):
        widths[x.ndim - 1 - k] = (pad[2 * k], pad[2 * k + 1])
    crop = tuple(slice(max(-a, 0), x.shape[d] - max(-b, 0)) for d, (a, b) in enumerate(widths))
    return np.pad(x[crop], [(max(a, 0), max(b, 0)) for a, b in widths], constant_values=value or 0)


def _linear_samples(rng, dtype):
    A = lambda *s: _arr(rng, s, -1.0, 1.0, dtype)  # noqa: E731
    return [((A(4, 3), A(2, 3), A(2)), {}), ((A(2, 2, 3), A(5, 3), None), {}), ((A(3), A(2, 3), A(2)), {}),
            ((A(3, 4).T, A(2, 3), A(2)), {})]


# ---------------------------------------------------------------------- the entries
LINEAR = register(Op("linear", _linear_forward, inputs=("self", "mat1", "mat2"),
                     vjp=[lambda g, s: g.reshape(_rows(g)).sum(0), lambda g, s: g.matmul(_c(s.mat2).t()),
                          lambda g, s: _linear_weight_grad(g, s.mat1)],
                     dtype="promote", complex=True, node="AddmmBackward0", call=linear, api=("linear",), method=False,
                     autocast=LOWER,
                     ref=lambda x, w, b=None: x @ w.T + (0 if b is None else b),
                     samples=lambda rng, dtype: _linear_samples(rng, dtype) if np.dtype(dtype).kind in "fc" else []))
# without a bias PyTorch records F.linear as mm (MmBackward0)
LINEAR_MM = register(Op("linear_mm", _linear_mm_forward, inputs=("self", "mat2"),
                        vjp=[lambda g, s: g.matmul(_c(s.mat2).t()), lambda g, s: _linear_weight_grad(g, s.self)],
                        dtype="promote", complex=True, node="MmBackward0",
                        call=linear, ref=lambda x, w, b=None: x @ w.T,
                        samples=lambda rng, dtype: [((x, w), {}) for (x, w, b), _ in _linear_samples(rng, dtype)]
                        if np.dtype(dtype).kind in "fc" else []))
# (padding_idx is left out of the samples: its row's gradient is zero by definition, which finite differences
# don't see; tests/nn/test_nn_layers.py covers it)
EMBEDDING = register(Op("embedding", lambda xp, dt, w, idx, padding_idx, scale_grad_by_freq: xp.take(w, idx, axis=0),
                        inputs=("weight", "indices"), vjp=[_embedding_grad], dtype="keep", keep_inputs=(1,),
                        reduced_precision="native",
                        call=embedding, api=("embedding",), method=False,
                        ref=lambda input, weight, padding_idx=None, **kw: weight[input],
                        samples=lambda rng, dtype: [
                            ((np.array([[0, 2], [3, 2]]), _arr(rng, (4, 3), -1.0, 1.0, dtype)), {}),
                            ((np.array([1, 0, 1]), _arr(rng, (3, 2), -1.0, 1.0, dtype)), {"scale_grad_by_freq": False})]))
PAD = register(Op("constant_pad_nd", _pad_forward, vjp=[_pad_grad], dtype="keep", node="ConstantPadNdBackward0",
                  reduced_precision="native",
                  call=pad, ref=_np_pad, samples=lambda rng, dtype: [
                      ((_arr(rng, s, -1.0, 1.0, dtype), p), kw) for s, p, kw in [
                          ((2, 3), (1, 2), {}), ((2, 3, 4), (1, 0, 2, 1), {"value": 1.5}), ((3, 4), (-1, 2, 1, -1), {}),
                          ((4,), (0, 0), {})]]))
