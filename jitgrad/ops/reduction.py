"""Reductions that combine elements: sum, mean, prod, var/std, norm, logsumexp, all/any, cumsum
(amax, max, argmax and the like are in extrema.py).

Each takes ``dim`` (None, an int or a tuple) and ``keepdim``. Forward kernels are in
kernels/reduce.py; backward formulas re-expand the gradient with ``_unreduce``.
"""
import math
import warnings

import numpy as np

from .. import _dtype as D
from .._grad_mode import STATE
from .._op import Op, dispatch
from .._tensor import Tensor
from ._table import CUDA_FP32, FP32, INTS, OPS, _arr, _noncontig, autocasts, export, register, rejects
from .elementwise import where


def normalize_dims(t, dim):
    """Sorted tuple of non-negative dims; None or an empty tuple means all (as in PyTorch)."""
    nd = t.ndim
    if dim is None or (isinstance(dim, (tuple, list)) and not dim):
        return tuple(range(nd))
    dims = (dim,) if isinstance(dim, (int, np.integer)) else tuple(dim) if isinstance(dim, (tuple, list)) else None
    if dims is None:
        raise TypeError("argument 'dim' must be int or tuple of ints, not " + type(dim).__name__)
    out = sorted({t._wrap_dim(d) for d in dims})  # checks the range, also of a 0-d tensor's dims
    if nd and len(out) != len(dims):
        raise RuntimeError("dim %d appears multiple times in the list of dims" % dims[0])
    return tuple(out) if nd else ()


def _keep_shape(shape, dims):
    return tuple(1 if d in dims else s for d, s in enumerate(shape))


def _restore(xp, arr, shape, dims, keepdim):
    return xp.reshape(arr, _keep_shape(shape, dims)) if keepdim else arr


def _unreduce(g, s):
    """Broadcast a reduced gradient back to the input's shape."""
    shape = s.self_shape
    d = g._data
    if not STATE.grad_enabled and d.__class__ is np.ndarray:  # no graph of the backward: a view of the array
        return Tensor._wrap(np.broadcast_to(d if s.keepdim else d.reshape(_keep_shape(shape, s.dims)), shape))
    if not s.keepdim:
        g = g.reshape(_keep_shape(shape, s.dims))
    return g.expand(shape)


def _kept(t, s):
    """A reduced tensor (result or gradient) reshaped to broadcast against the input."""
    return t if s.keepdim else t.reshape(_keep_shape(s.self_shape, s.dims))


def _count(s):
    return math.prod(s.self_shape[d] for d in s.dims) if s.dims else 1


def _reduce_arr(xp, kind, x, dims):
    """Reduce over dims (none: a copy, as PyTorch's reductions of 0-d tensors)."""
    return xp.reduce(kind, x, dims) if dims else xp.copy(x)


def _reduce_forward(kind):
    def forward(xp, dt, x, dims, keepdim):
        return _restore(xp, _reduce_arr(xp, kind, x, dims), x.shape, dims, keepdim)
    return forward


def _mean_forward(xp, dt, x, dims, keepdim):
    n = math.prod(x.shape[d] for d in dims) if dims else 1
    out = xp.run("div", dt, _reduce_arr(xp, "sum", x, dims), dt.type(n)) if n else \
        xp.full(tuple(s for d, s in enumerate(x.shape) if d not in dims), np.nan, dt)
    return _restore(xp, out, x.shape, dims, keepdim)


def _prod_grad(g, s):
    x, dims = s.self, s.dims
    zeros = x == 0
    nz = zeros.sum(dims, keepdim=True)
    safe = x.masked_fill(zeros, 1.0)
    p_nz = _reduce(PROD, PROD, safe, dims, True)  # the table op: the public prod() takes one int dim only
    grad = where(nz == 0, p_nz / safe, where(zeros & (nz == 1), p_nz, 0.0))
    return _unreduce(g, s) * grad.conj()


def _var_forward(xp, dt, x, dims, keepdim, correction):
    """Two passes (mean, then squared deviations): stable where E[x^2] - E[x]^2 is not."""
    n = math.prod(x.shape[d] for d in dims) if dims else 1
    mean = xp.reshape(xp.run("div", dt, _reduce_arr(xp, "sum", x, dims), dt.type(n)), _keep_shape(x.shape, dims))
    ss = _reduce_arr(xp, "sum", xp.run("square", dt, xp.run("sub", dt, x, mean)), dims)
    out = xp.run("div", dt, ss, dt.type(n - correction if n - correction > 0 else np.nan))
    return _restore(xp, out, x.shape, dims, keepdim)


def _var_grad(g, s):
    x = s.self
    mean = x.mean(s.dims, keepdim=True) if s.dims else x
    return _kept(g, s) * 2 * (x - mean) / (_count(s) - s.correction)


def _std_grad(g, s):
    x = s.self
    mean = x.mean(s.dims, keepdim=True) if s.dims else x
    r = _kept(s.result, s)
    return (_kept(g, s) * (x - mean) / ((_count(s) - s.correction) * r)).masked_fill(r == 0, 0.0)  # 0 where std is 0


def _norm_forward(xp, dt, x, dims, keepdim, p):
    a = xp.run("abs", dt, x)
    if p == 2:
        out = xp.run("sqrt", dt, _reduce_arr(xp, "sum", xp.run("square", dt, x), dims))
    elif p == 1:
        out = _reduce_arr(xp, "sum", a, dims)
    elif p == math.inf:
        out = _reduce_arr(xp, "amax", a, dims)
    elif p == -math.inf:
        out = _reduce_arr(xp, "amin", a, dims)
    elif p == 0:
        out = _reduce_arr(xp, "sum", xp.run("ne", dt, x, dt.type(0)), dims)
    else:
        out = xp.run("pow", dt, _reduce_arr(xp, "sum", xp.run("pow", dt, a, dt.type(p)), dims), dt.type(1.0 / p))
    return _restore(xp, out, x.shape, dims, keepdim)


def _norm_grad(g, s):
    x, p, r = s.self, s.p, _kept(s.result, s)
    g = _kept(g, s)
    if p == 0:
        return x.new_zeros(x.shape)  # PyTorch: no gradient (g * 0 would be NaN for an infinite g)
    if p == 1:
        return g * x.sign()
    if p in (math.inf, -math.inf):
        mask = (x.abs() == r).to(g.dtype)
        return g * x.sign() * mask / mask.sum(s.dims, keepdim=True)
    if p == 2:
        return (g * x / r).masked_fill(r == 0, 0.0)
    return (g * x * x.abs() ** (p - 2) / r ** (p - 1)).masked_fill(r == 0, 0.0)


def _std_forward(xp, dt, x, dims, keepdim, correction):
    return xp.run("sqrt", dt, _var_forward(xp, dt, x, dims, keepdim, correction))


def _logsumexp_forward(xp, dt, x, dims, keepdim):
    return _restore(xp, _reduce_arr(xp, "logsumexp", x, dims), x.shape, dims, keepdim)


def _all_any_forward(kind):
    # all: no element equals 0; any: some element differs from 0 (counted, so an empty reduction gives
    # True for all and False for any, as PyTorch's identities)
    test = "eq" if kind == "all" else "ne"

    def forward(xp, dt, x, dims, keepdim):
        n = _reduce_arr(xp, "sum", xp.run(test, np.bool_, x, dt.type(0)), dims)
        return _restore(xp, xp.run(test, np.bool_, n, n.dtype.type(0)), x.shape, dims, keepdim)
    return forward


def _cumsum_forward(xp, dt, x, dim):
    return xp.scan("cumsum", x, dim) if x.ndim else xp.copy(x)


# ---------------------------------------------------------------------- API
def _cast_for(input, dtype):
    if dtype is not None:
        return input.to(dtype)
    if input.dtype.category < 2:  # bool and integers sum in int64; floating and complex in their own dtype
        return input.to(D.int64)
    return input


def _reduce(op_dim, op_all, input, dim, keepdim, extra=None):
    dims = normalize_dims(input, dim)
    params = {"dims": dims, "keepdim": keepdim}
    if extra:
        params.update(extra)
    return dispatch(op_all if dim is None and op_all is not None else op_dim, (input,), params)


@autocasts("sum")
def sum(input, dim=None, keepdim=False, *, dtype=None):
    return _reduce(SUM, SUM_ALL, _cast_for(input, dtype), dim, keepdim)


def mean(input, dim=None, keepdim=False, *, dtype=None):
    if dtype is not None:
        input = input.to(dtype)
    return _reduce(MEAN, MEAN_ALL, input, dim, keepdim)


@autocasts("prod")
def prod(input, dim=None, keepdim=False, *, dtype=None):
    if dim is not None and not isinstance(dim, (int, np.integer)):
        raise TypeError("prod(): argument 'dim' must be int, not " + type(dim).__name__)
    return _reduce(PROD, PROD, _cast_for(input, dtype), dim, keepdim)


def _all(input, dim=None, keepdim=False):
    """Whether every element (along ``dim``) is nonzero: a bool tensor, whatever the input's dtype."""
    return _reduce(ALL, None, input, dim, keepdim)


def _any(input, dim=None, keepdim=False):
    """Whether some element (along ``dim``) is nonzero."""
    return _reduce(ANY, None, input, dim, keepdim)


_all.__name__, _any.__name__ = "all", "any"  # (not defined as all/any: this module uses the builtins)


def _correction(unbiased, correction):
    if correction is not None:
        return correction
    return 1 if unbiased is None or unbiased else 0


def var(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    if isinstance(unbiased, bool) is False and unbiased is not None and dim is None:
        dim, unbiased = unbiased, None
    correction = _correction(unbiased, correction)
    _check_dof("var", input, dim, correction)
    if input.dtype.is_complex:  # E|z - mean|^2, real: the variances of the two parts, added
        return var(input.real, dim, keepdim=keepdim, correction=correction) + \
            var(input.imag, dim, keepdim=keepdim, correction=correction)
    return _reduce(VAR, None, input, dim, keepdim, {"correction": correction})


def std(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    if isinstance(unbiased, bool) is False and unbiased is not None and dim is None:
        dim, unbiased = unbiased, None
    correction = _correction(unbiased, correction)
    _check_dof("std", input, dim, correction)
    if input.dtype.is_complex:
        return var(input, dim, keepdim=keepdim, correction=correction).sqrt()
    return _reduce(STD, None, input, dim, keepdim, {"correction": correction})


def _check_dof(name, input, dim, correction):
    n = math.prod(input.shape[d] for d in normalize_dims(input, dim))
    if n - correction <= 0:
        warnings.warn("%s(): degrees of freedom is <= 0. Correction should be strictly less than the reduction factor "
                      "(input numel divided by output numel)." % name, UserWarning, stacklevel=3)


@autocasts("norm")
def norm(input, p="fro", dim=None, keepdim=False, dtype=None):
    if p == "fro" or p is None:
        p = 2
    if isinstance(p, str):
        raise RuntimeError("norm: p=%r is not supported; use a number, inf or 'fro'" % p)
    if dtype is not None:
        input = input.to(dtype)
    if input.dtype.is_complex:  # the norm of the moduli (real)
        input = input.abs()
    return _reduce(NORM, None, input, dim, keepdim, {"p": float(p)})


def logsumexp(input, dim, keepdim=False):
    if input.dtype.is_complex:  # PyTorch's: shifted by the largest real part (a constant: no gradient)
        dims = normalize_dims(input, dim)
        m = _real_max(input, dims)
        out = (input - m).exp().sum(dims, keepdim=True).log() + m
        return out if keepdim or not dims else out.squeeze(dims)
    return _reduce(LOGSUMEXP, None, input.float() if not input.dtype.is_floating_point else input, dim, keepdim)


def _real_max(input, dims):
    """The largest real part over ``dims`` (kept), detached; 0 where it is infinite (exp(x - inf) is NaN)."""
    m = input.detach().real
    m = m.amax(dims, keepdim=True) if dims else m
    return m.masked_fill(m.isinf(), 0.0)


@autocasts("cumsum")
def cumsum(input, dim, *, dtype=None):
    input = _cast_for(input, dtype)
    if input.dtype.is_complex:  # each part's running sum (the scan kernels are real)
        return dispatch(OPS["complex"], (cumsum(input.real, dim), cumsum(input.imag, dim)))
    return dispatch(CUMSUM, (input,), {"dim": input._wrap_dim(dim) if input.ndim else 0})


@export(function=False)
def sum_to_size(self, *size):
    """Sum ``self`` down to ``size`` (the inverse of broadcasting)."""
    shape = tuple(size[0]) if len(size) == 1 and isinstance(size[0], (tuple, list)) else tuple(size)
    if tuple(self.shape) == shape:
        return self
    lead = self.ndim - len(shape)
    if lead < 0 or any(n not in (1, m) for n, m in zip(shape, self.shape[lead:])):
        raise RuntimeError("size {[%s]} is not expandable to size {[%s]}." % (", ".join(map(str, shape)),
                                                                            ", ".join(map(str, self.shape))))
    dims = tuple(range(lead)) + tuple(lead + i for i, n in enumerate(shape) if n == 1 and self.shape[lead + i] != 1)
    out = sum(self, dims, keepdim=True) if dims else self
    return out.reshape(shape) if lead else out


# ---------------------------------------------------------------------- references and samples (see _table.py)
def _cases(*cases, lo=-2.0, hi=2.0):
    """Samples from (shape, keywords) pairs; a shape given as a list makes a non-contiguous input."""
    def samples(rng, dtype):
        return [(((_noncontig if isinstance(shape, list) else _arr)(rng, tuple(shape), lo, hi, dtype),), dict(kw))
                for shape, kw in cases]
    return samples


def _axis(x, dim):
    return None if dim is None or x.ndim == 0 else dim


def _np_reduce(fn):
    """A NumPy reference taking jitgrad's (dim, keepdim) keywords."""
    return lambda x, dim=None, keepdim=False: np.asarray(fn(x, axis=_axis(x, dim), keepdims=keepdim))


def _np_var(x, dim=None, unbiased=None, keepdim=False, *, correction=None):
    return np.var(x, axis=_axis(x, dim), ddof=_correction(unbiased, correction), keepdims=keepdim)


def _np_norm(x, p="fro", dim=None, keepdim=False):
    a, axis = np.abs(x), _axis(x, dim)
    p = 2 if p == "fro" else p
    if p == math.inf:
        return np.amax(a, axis=axis, keepdims=keepdim)
    if p == -math.inf:
        return np.amin(a, axis=axis, keepdims=keepdim)
    if p == 0:
        return np.sum(a != 0, axis=axis, keepdims=keepdim).astype(x.dtype)
    return np.sum(a ** p, axis=axis, keepdims=keepdim) ** (1.0 / p)


def _np_logsumexp(x, dim, keepdim=False):
    axis = _axis(x, dim)
    m = np.amax(x, axis=axis, keepdims=True)
    out = np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) + m
    return out if keepdim or axis is None else np.squeeze(out, axis=axis)


_ALL = _cases(((), {}), ((5,), {}), ((2, 3), {}), ([3, 2], {}))
_DIMS = _cases(((2, 3), {"dim": 1}), ((2, 3), {"dim": (0, 1)}), ((2, 3), {"dim": -1, "keepdim": True}),
               ((), {"dim": 0}), ([3, 2], {"dim": 0}), ((2, 3, 2), {"dim": (0, 2)}))
_VAR = _cases(((2, 3), {}), ((2, 3), {"dim": 1}), ((2, 3), {"dim": 1, "correction": 0}),
              ((2, 3), {"dim": (0, 1), "keepdim": True}), ((2, 3), {"dim": 0, "unbiased": False}), ([3, 2], {"dim": 0}))
_ALL_ANY = _cases(((2, 3), {}), ((2, 3), {"dim": 1}), ((2, 3), {"dim": (0, 1), "keepdim": True}), ((), {}),
                  ((), {"dim": 0}), ([3, 2], {"dim": -1}), ((0, 3), {"dim": 0}),
                  lo=-1.0, hi=1.0)  # integers -1, 0, 1: zeros among them
_FLOAT_ONLY = ("bool",) + INTS
_MEAN_REJECTS = rejects(RuntimeError, "mean(): could not infer output dtype. Input dtype must be either a floating point "
                        "or complex dtype. Got: %(type)s", *_FLOAT_ONLY)
_VAR_REJECTS = rejects(RuntimeError, "std and var only support floating point and complex dtypes", *_FLOAT_ONLY)


# ---------------------------------------------------------------------- the entries
def _red(name, forward, vjp, dtype="same", node=None, **kw):
    return register(Op(name, forward, vjp=[vjp], dtype=dtype, node=node, bench={"sizes": [(16,), (4096, 4096)]}, **kw))


SUM = _red("sum", _reduce_forward("sum"), lambda g, s: _unreduce(g, s), node="SumBackward1", ref=_np_reduce(np.sum),
           samples=_DIMS, call=sum, api=("sum",), autocast=CUDA_FP32, complex=True, linear=(0,))
SUM_ALL = _red("sum_all", _reduce_forward("sum"), lambda g, s: _unreduce(g, s), node="SumBackward0",
               ref=_np_reduce(np.sum), samples=_ALL, call=sum, autocast=CUDA_FP32, complex=True, linear=(0,))
MEAN = _red("mean", _mean_forward, lambda g, s: _unreduce(g / _count(s), s), node="MeanBackward1",
            ref=_np_reduce(np.mean), samples=_DIMS, unsupported=_MEAN_REJECTS, call=mean, api=("mean",), complex=True,
            linear=(0,))
MEAN_ALL = _red("mean_all", _mean_forward, lambda g, s: _unreduce(g / _count(s), s), node="MeanBackward0",
                ref=_np_reduce(np.mean), samples=_ALL, unsupported=_MEAN_REJECTS, call=mean, complex=True, linear=(0,))
PROD = _red("prod", _reduce_forward("prod"), _prod_grad, node="ProdBackward1", ref=_np_reduce(np.prod),
            samples=_cases(((2, 3), {}), ((2, 3), {"dim": 1}), ((2, 3), {"dim": -1, "keepdim": True}), ((), {}),
                           ([3, 2], {"dim": 0}), lo=-1.5, hi=1.5), call=prod, api=("prod",), autocast=FP32,
            complex=True)
VAR = _red("var", _var_forward, _var_grad, node="VarBackward0", ref=_np_var, samples=_VAR, unsupported=_VAR_REJECTS,
           call=var, api=("var",))
STD = _red("std", _std_forward, _std_grad, node="StdBackward0", ref=lambda *args, **kwargs: np.sqrt(_np_var(*args, **kwargs)),
           samples=_VAR, unsupported=_VAR_REJECTS, call=std, api=("std",))
NORM = _red("norm", _norm_forward, _norm_grad, node="LinalgVectorNormBackward0", ref=_np_norm,
            samples=_cases(((2, 3), {}), ((5,), {"p": 1}), ((2, 3), {"p": math.inf, "dim": 1}),
                           ((2, 3), {"p": 3, "dim": -1, "keepdim": True}), ((2, 3), {"p": -math.inf}),
                           ((2, 3), {"p": 0, "dim": 1}), ([3, 2], {"p": 2, "dim": 0}), ((), {})),
            unsupported=rejects(RuntimeError, "linalg.vector_norm: Expected a floating point or complex tensor as "
                                "input. Got %(type)s", *_FLOAT_ONLY), call=norm, api=("norm",), autocast=CUDA_FP32)
LOGSUMEXP = _red("logsumexp", _logsumexp_forward, lambda g, s: _kept(g, s) * (s.self - _kept(s.result, s)).exp(),
                 ref=_np_logsumexp, call=logsumexp, api=("logsumexp",),
                 samples=_cases(((2, 3), {"dim": 1}), ((2, 3), {"dim": (0, 1)}), ((2, 3), {"dim": -1, "keepdim": True}),
                                ((), {"dim": 0}), ([3, 2], {"dim": 0})))
ALL = _red("all", _all_any_forward("all"), None, dtype="bool", differentiable=False, ref=_np_reduce(np.all),
           samples=_ALL_ANY, call=_all, api=("all",), complex=True)
ANY = _red("any", _all_any_forward("any"), None, dtype="bool", differentiable=False, ref=_np_reduce(np.any),
           samples=_ALL_ANY, call=_any, api=("any",), complex=True)
CUMSUM = register(Op("cumsum", _cumsum_forward, vjp=[lambda g, s: g.flip(s.dim).cumsum(s.dim).flip(s.dim)
                                                     if s.self_shape else g],
                     ref=lambda x, dim: np.cumsum(x, axis=_axis(x, dim)).reshape(x.shape), call=cumsum, api=("cumsum",),
                     autocast=CUDA_FP32,
                     samples=_cases(((2, 3), {"dim": 1}), ((2, 3), {"dim": 0}), ((5,), {"dim": -1}), ((), {"dim": 0}),
                                    ([3, 2], {"dim": 0}))))
