"""Reductions: sum, mean, prod, amax/amin, max/min, argmax/argmin, var/std, norm, logsumexp, cumsum.

Each takes ``dim`` (None, an int or a tuple) and ``keepdim``. Forward kernels are in
kernels/reduce.py; backward formulas re-expand the gradient with ``_unreduce``.
"""
import math

import numpy as np

from .. import _dtype as D
from .._op import Op, dispatch
from .._tensor import Tensor
from ..kernels import reduce as R
from ._table import export, register, unary_samples
from .elementwise import where


def normalize_dims(t, dim):
    """Sorted tuple of non-negative dims; None means all."""
    nd = t.ndim
    if dim is None:
        return tuple(range(nd))
    dims = (dim,) if isinstance(dim, (int, np.integer)) else tuple(dim)
    out = sorted({t._wrap_dim(d) for d in dims}) if nd else []
    if nd and len(out) != len(dims):
        raise RuntimeError("dim %d appears multiple times in the list of dims" % dims[0])
    return tuple(out) if nd else ()


def _keep_shape(shape, dims):
    return tuple(1 if d in dims else s for d, s in enumerate(shape))


def _restore(arr, shape, dims, keepdim):
    return arr.reshape(_keep_shape(shape, dims)) if keepdim else arr


def _unreduce(g, s):
    """Broadcast a reduced gradient back to the input's shape."""
    shape = s.self_shape
    if not s.keepdim:
        g = g.reshape(_keep_shape(shape, s.dims))
    return g.expand(shape)


def _kept(t, s):
    """A reduced tensor (result or gradient) reshaped to broadcast against the input."""
    return t if s.keepdim else t.reshape(_keep_shape(s.self_shape, s.dims))


def _count(s):
    return math.prod(s.self_shape[d] for d in s.dims) if s.dims else 1


def _reduce_forward(kind):
    def forward(dt, x, dims, keepdim):
        if not dims:
            out = x.copy()
        else:
            out = R.reduce(kind, x, dims)
        return _restore(out, x.shape, dims, keepdim)
    return forward


def _mean_forward(dt, x, dims, keepdim):
    out = R.reduce("sum", x, dims) if dims else x.copy()
    n = math.prod(x.shape[d] for d in dims) if dims else 1
    return _restore(np.divide(out, n, dtype=dt) if n else np.full(out.shape, np.nan, dt), x.shape, dims, keepdim)


def _prod_grad(g, s):
    x, dims = s.self, s.dims
    zeros = x == 0
    nz = zeros.sum(dims, keepdim=True)
    safe = x.masked_fill(zeros, 1.0)
    p_nz = safe.prod(dims, keepdim=True)
    grad = where(nz == 0, p_nz / safe, where(zeros & (nz == 1), p_nz, 0.0))
    return _unreduce(g, s) * grad


def _extreme_grad(g, s):
    mask = (s.self == _kept(s.result, s)).to(g.dtype)
    return _kept(g, s) * mask / mask.sum(s.dims, keepdim=True)


def _var_forward(dt, x, dims, keepdim, correction):
    n = math.prod(x.shape[d] for d in dims) if dims else 1
    mean = R.reduce("sum", x, dims).reshape(_keep_shape(x.shape, dims)) / n if dims else x
    d = x - mean.astype(dt)
    ss = R.reduce("sum", d * d, dims) if dims else d * d
    out = np.divide(ss, max(n - correction, 0), dtype=dt) if n - correction > 0 else np.full(np.shape(ss), np.nan, dt)
    return _restore(np.asarray(out, dt), x.shape, dims, keepdim)


def _var_grad(g, s):
    x = s.self
    mean = x.mean(s.dims, keepdim=True) if s.dims else x
    return _kept(g, s) * 2 * (x - mean) / (_count(s) - s.correction)


def _std_grad(g, s):
    x = s.self
    mean = x.mean(s.dims, keepdim=True) if s.dims else x
    return _kept(g, s) * (x - mean) / ((_count(s) - s.correction) * _kept(s.result, s))


def _norm_forward(dt, x, dims, keepdim, p):
    a = np.abs(x)
    if p == 2:
        out = np.sqrt(R.reduce("sum", x * x, dims)) if dims else a
    elif p == 1:
        out = R.reduce("sum", a, dims) if dims else a
    elif p == math.inf:
        out = R.reduce("amax", a, dims) if dims else a
    elif p == -math.inf:
        out = R.reduce("amin", a, dims) if dims else a
    elif p == 0:
        out = R.reduce("sum", (x != 0).astype(dt), dims) if dims else (x != 0).astype(dt)
    else:
        out = R.reduce("sum", a ** p, dims) ** (1.0 / p) if dims else a
    return _restore(np.asarray(out, dt), x.shape, dims, keepdim)


def _norm_grad(g, s):
    x, p, r = s.self, s.p, _kept(s.result, s)
    g = _kept(g, s)
    if p == 0:
        return g * 0 * x
    if p == 1:
        return g * x.sign()
    if p in (math.inf, -math.inf):
        mask = (x.abs() == r).to(g.dtype)
        return g * x.sign() * mask / mask.sum(s.dims, keepdim=True)
    if p == 2:
        return (g * x / r).masked_fill(r == 0, 0.0)
    return (g * x * x.abs() ** (p - 2) / r ** (p - 1)).masked_fill(r == 0, 0.0)


def _logsumexp_forward(dt, x, dims, keepdim):
    if not dims:
        return x.copy()
    return _restore(R.reduce("logsumexp", np.ascontiguousarray(x), dims), x.shape, dims, keepdim)


def _red(name, forward, vjp, needs, dtype="same", node=None, domain=(-2.0, 2.0), **kw):
    return register(Op(name, forward, vjp=[(vjp, needs)] if vjp else [], dtype=dtype, node=node,
                       samples=unary_samples(*domain), bench={"sizes": [(16,), (4096, 4096)]},
                       method=False, function=False, **kw))


SUM = _red("sum", _reduce_forward("sum"), lambda g, s: _unreduce(g, s), (), node="SumBackward1", ref=np.sum)
SUM_ALL = _red("sum_all", _reduce_forward("sum"), lambda g, s: _unreduce(g, s), (), node="SumBackward0", ref=np.sum)
MEAN = _red("mean", _mean_forward, lambda g, s: _unreduce(g, s) / _count(s), (), node="MeanBackward1", ref=np.mean)
MEAN_ALL = _red("mean_all", _mean_forward, lambda g, s: _unreduce(g, s) / _count(s), (), node="MeanBackward0",
                ref=np.mean)
PROD = _red("prod", _reduce_forward("prod"), _prod_grad, ("self",), node="ProdBackward1", ref=np.prod,
            domain=(0.5, 1.5))
AMAX = _red("amax", _reduce_forward("amax"), _extreme_grad, ("self", "result"), ref=np.amax)
AMIN = _red("amin", _reduce_forward("amin"), _extreme_grad, ("self", "result"), ref=np.amin)
MAX_ALL = _red("max_all", _reduce_forward("amax"), _extreme_grad, ("self", "result"), node="MaxBackward1", ref=np.max)
MIN_ALL = _red("min_all", _reduce_forward("amin"), _extreme_grad, ("self", "result"), node="MinBackward1", ref=np.min)
VAR = _red("var", _var_forward, _var_grad, ("self",), node="VarBackward0", ref=lambda x, ddof=1, axis=None: np.var(x, ddof=ddof, axis=axis))
STD = _red("std", _var_forward, _std_grad, ("self", "result"), node="StdBackward0", ref=np.std)
STD.forward = lambda dt, x, dims, keepdim, correction: np.sqrt(_var_forward(dt, x, dims, keepdim, correction))
NORM = _red("norm", _norm_forward, _norm_grad, ("self", "result"), node="LinalgVectorNormBackward0",
            ref=np.linalg.norm)
LOGSUMEXP = _red("logsumexp", _logsumexp_forward, lambda g, s: _kept(g, s) * (s.self - _kept(s.result, s)).exp(),
                 ("self", "result"), ref=None)
ARGMAX = _red("argmax", lambda dt, x, dims, keepdim: _restore(R.reduce("argmax", x, dims), x.shape, dims, keepdim),
              None, (), dtype="int64", differentiable=False, ref=np.argmax)
ARGMIN = _red("argmin", lambda dt, x, dims, keepdim: _restore(R.reduce("argmin", x, dims), x.shape, dims, keepdim),
              None, (), dtype="int64", differentiable=False, ref=np.argmin)


def _max_dim_forward(kind):
    arg = "argmax" if kind == "amax" else "argmin"

    def forward(dt, x, dims, keepdim):
        if not dims:
            return x.copy(), np.zeros(x.shape, np.int64)
        idx = R.reduce(arg, x, dims)
        vals = np.take_along_axis(x, np.expand_dims(idx, dims[0]), dims[0]).reshape(idx.shape)
        return _restore(vals, x.shape, dims, keepdim), _restore(idx, x.shape, dims, keepdim)
    return forward


def _max_dim_grad(g, s):
    gv = g[0]
    if not s.dims:
        return gv
    dim = s.dims[0]
    idx = _kept(s.indices, s)
    from .indexing import scatter_into_zeros
    return scatter_into_zeros(s.self_shape, dim, idx, _kept(gv, s))


MAX_DIM = register(Op("max_dim", _max_dim_forward("amax"), vjp=[(_max_dim_grad, ("indices",))], n_outputs=2,
                      node="MaxBackward0", samples=unary_samples(), method=False, function=False, ref=None))
MIN_DIM = register(Op("min_dim", _max_dim_forward("amin"), vjp=[(_max_dim_grad, ("indices",))], n_outputs=2,
                      node="MinBackward0", samples=unary_samples(), method=False, function=False, ref=None))


def _cumsum_forward(dt, x, dim):
    if x.ndim == 0:
        return x.copy()
    return R.scan("cumsum", x, dim)


CUMSUM = register(Op("cumsum", _cumsum_forward, vjp=[(lambda g, s: g.flip(s.dim).cumsum(s.dim).flip(s.dim)
                                                      if s.self_shape else g, ())],
                     samples=unary_samples(), method=False, function=False, ref=np.cumsum))


# ---------------------------------------------------------------------- API
def _cast_for(input, dtype):
    if dtype is not None:
        return input.to(dtype)
    if not input.dtype.is_floating_point:
        return input.to(D.int64)
    return input


def _reduce(op_dim, op_all, input, dim, keepdim, extra=None):
    dims = normalize_dims(input, dim)
    params = {"dims": dims, "keepdim": keepdim}
    if extra:
        params.update(extra)
    return dispatch(op_all if dim is None and op_all is not None else op_dim, (input,), params)


@export()
def sum(input, dim=None, keepdim=False, *, dtype=None):
    return _reduce(SUM, SUM_ALL, _cast_for(input, dtype), dim, keepdim)


@export()
def mean(input, dim=None, keepdim=False, *, dtype=None):
    if dtype is not None:
        input = input.to(dtype)
    if not input.dtype.is_floating_point:
        raise RuntimeError("mean(): could not infer output dtype. Input dtype must be either a floating point or "
                           "complex dtype. Got: " + input.dtype.tensor_type[:-6])
    return _reduce(MEAN, MEAN_ALL, input, dim, keepdim)


@export()
def prod(input, dim=None, keepdim=False, *, dtype=None):
    if dim is not None and not isinstance(dim, (int, np.integer)):
        raise TypeError("prod(): argument 'dim' must be int, not " + type(dim).__name__)
    return _reduce(PROD, PROD, _cast_for(input, dtype), dim, keepdim)


def _check_nonempty(input, dims, name):
    if input.numel() == 0:
        raise IndexError("%s(): Expected reduction dim to be specified for input.numel() == 0. Specify the reduction "
                         "dim with the 'dim' argument." % name)


@export()
def amax(input, dim=(), keepdim=False):
    _check_nonempty(input, dim, "amax")
    return _reduce(AMAX, None, input, None if dim == () else dim, keepdim)


@export()
def amin(input, dim=(), keepdim=False):
    _check_nonempty(input, dim, "amin")
    return _reduce(AMIN, None, input, None if dim == () else dim, keepdim)


class _ValuesIndices(tuple):
    """(values, indices), with the names PyTorch's torch.return_types give them."""

    @property
    def values(self):
        return self[0]

    @property
    def indices(self):
        return self[1]

    def __repr__(self):
        return "jitgrad.return_types.%s(\nvalues=%r,\nindices=%r)" % (self.name, self[0], self[1])


def _extreme(op_all, op_dim, name, input, dim, keepdim, other):
    if isinstance(dim, Tensor):
        other, dim = dim, None
    if other is not None:
        from .elementwise import maximum, minimum
        return (maximum if name == "max" else minimum)(input, other)
    if dim is None:
        if input.numel() == 0:
            raise RuntimeError("%s(): Expected reduction dim to be specified for input.numel() == 0. Specify the "
                               "reduction dim with the 'dim' argument." % name)
        return dispatch(op_all, (input,), {"dims": tuple(range(input.ndim)), "keepdim": False})
    d = (input._wrap_dim(dim),) if input.ndim else ()
    values, indices = dispatch(op_dim, (input,), {"dims": d, "keepdim": keepdim})
    if op_dim.name in ("max_dim", "min_dim") and values.grad_fn is not None:
        values.grad_fn.saved["indices"] = indices
    out = _ValuesIndices((values, indices))
    out.name = name
    return out


@export()
def max(input, dim=None, keepdim=False, *, other=None):
    return _extreme(MAX_ALL, MAX_DIM, "max", input, dim, keepdim, other)


@export()
def min(input, dim=None, keepdim=False, *, other=None):
    return _extreme(MIN_ALL, MIN_DIM, "min", input, dim, keepdim, other)


@export()
def argmax(input, dim=None, keepdim=False):
    if dim is None:
        return dispatch(ARGMAX, (input.reshape(-1),), {"dims": (0,), "keepdim": False}) if input.numel() else \
            _empty_arg_error("argmax")
    return _reduce(ARGMAX, None, input, dim, keepdim)


@export()
def argmin(input, dim=None, keepdim=False):
    if dim is None:
        return dispatch(ARGMIN, (input.reshape(-1),), {"dims": (0,), "keepdim": False}) if input.numel() else \
            _empty_arg_error("argmin")
    return _reduce(ARGMIN, None, input, dim, keepdim)


def _empty_arg_error(name):
    raise RuntimeError("%s(): Expected reduction dim to be specified for input.numel() == 0." % name)


def _correction(unbiased, correction):
    if correction is not None:
        return correction
    return 1 if unbiased is None or unbiased else 0


@export()
def var(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    if isinstance(unbiased, bool) is False and unbiased is not None and dim is None:
        dim, unbiased = unbiased, None
    return _reduce(VAR, None, input, dim, keepdim, {"correction": _correction(unbiased, correction)})


@export()
def std(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    if isinstance(unbiased, bool) is False and unbiased is not None and dim is None:
        dim, unbiased = unbiased, None
    return _reduce(STD, None, input, dim, keepdim, {"correction": _correction(unbiased, correction)})


@export()
def norm(input, p="fro", dim=None, keepdim=False, dtype=None):
    if p == "fro" or p is None:
        p = 2
    if isinstance(p, str):
        raise RuntimeError("norm: p=%r is not supported; use a number, inf or 'fro'" % p)
    if dtype is not None:
        input = input.to(dtype)
    return _reduce(NORM, None, input, dim, keepdim, {"p": float(p)})


@export()
def logsumexp(input, dim, keepdim=False):
    return _reduce(LOGSUMEXP, None, input.float() if not input.dtype.is_floating_point else input, dim, keepdim)


@export()
def cumsum(input, dim, *, dtype=None):
    input = _cast_for(input, dtype)
    return dispatch(CUMSUM, (input,), {"dim": input._wrap_dim(dim) if input.ndim else 0})


@export(function=False)
def sum_to_size(self, *size):
    """Sum ``self`` down to ``size`` (the inverse of broadcasting)."""
    shape = tuple(size[0]) if len(size) == 1 and isinstance(size[0], (tuple, list)) else tuple(size)
    if tuple(self.shape) == shape:
        return self
    lead = self.ndim - len(shape)
    if lead < 0:
        raise RuntimeError("size {%s} is not expandable to size {%s}." % (", ".join(map(str, shape)),
                                                                        ", ".join(map(str, self.shape))))
    dims = tuple(range(lead)) + tuple(lead + i for i, n in enumerate(shape) if n == 1 and self.shape[lead + i] != 1)
    out = sum(self, dims, keepdim=True) if dims else self
    return out.reshape(shape) if lead else out
