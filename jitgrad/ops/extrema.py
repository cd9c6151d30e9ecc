"""Reductions that pick elements: amax/amin, max/min (of all elements, or values and indices along a
dim) and argmax/argmin. Their gradients go to the picked elements (split among ties)."""
import numpy as np

from .._op import Op, dispatch
from .._tensor import Tensor
from ._table import COMPLEX, no_complex, no_kernel, register, rejects
from .reduction import _ALL, _cases, _kept, _np_reduce, _red, _reduce, _reduce_forward, _restore, normalize_dims
from .elementwise import maximum, minimum
from .indexing import scatter_into_zeros


def _extreme_grad(g, s):
    mask = (s.self == _kept(s.result, s)).to(g.dtype)
    return _kept(g, s) * mask / mask.sum(s.dims, keepdim=True)


def _evenly_grad(g, s):
    """max()/min() of all elements: split among the elements equal to the result, or among the
    NaNs where the result is NaN (PyTorch's evenly_distribute_backward)."""
    mask = ((s.self == s.result) | s.self.isnan()).to(g.dtype)  # a NaN anywhere makes the result NaN
    return g * mask / mask.sum()


def _max_dim_forward(kind):
    arg = "argmax" if kind == "amax" else "argmin"

    def forward(xp, dt, x, dims, keepdim):
        if not dims:
            return xp.copy(x), xp.zeros(x.shape, np.int64)
        idx = xp.reduce(arg, x, dims)
        vals = xp.reshape(xp.take_along_axis(x, xp.expand_dims(idx, dims[0]), dims[0]), idx.shape)
        return _restore(xp, vals, x.shape, dims, keepdim), _restore(xp, idx, x.shape, dims, keepdim)
    return forward


def _max_dim_grad(g, s):
    gv = g[0]
    if not s.dims:
        return gv
    dim = s.dims[0]
    idx = _kept(s.indices, s)
    return scatter_into_zeros(s.self_shape, dim, idx, _kept(gv, s))


# ---------------------------------------------------------------------- API
def _check_nonempty(input, dims, name):
    """max-like reductions have no identity: reducing a dim of size 0 is an error."""
    for d in dims:
        if input.shape[d] == 0:
            raise IndexError("%s(): Expected reduction dim %d to have non-zero size." % (name, d))


def _amax_like(op, name, input, dim, keepdim):
    if dim == () and input.numel() == 0:
        raise RuntimeError("%s(): Expected reduction dim to be specified for input.numel() == 0. Specify the "
                           "reduction dim with the 'dim' argument." % name)
    dims = normalize_dims(input, None if dim == () else dim)
    _check_nonempty(input, dims, name)
    return dispatch(op, (input,), {"dims": dims, "keepdim": keepdim})


def amax(input, dim=(), keepdim=False):
    return _amax_like(AMAX, "amax", input, dim, keepdim)


def amin(input, dim=(), keepdim=False):
    return _amax_like(AMIN, "amin", input, dim, keepdim)


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
        return (maximum if name == "max" else minimum)(input, other)
    if dim is None:
        if input.numel() == 0:
            raise RuntimeError("%s(): Expected reduction dim to be specified for input.numel() == 0. Specify the "
                               "reduction dim with the 'dim' argument." % name)
        return dispatch(op_all, (input,), {"dims": tuple(range(input.ndim)), "keepdim": False})
    d = (input._wrap_dim(dim),) if input.ndim else ()
    _check_nonempty(input, d, name)
    values, indices = dispatch(op_dim, (input,), {"dims": d, "keepdim": keepdim})
    out = _ValuesIndices((values, indices))
    out.name = name
    return out


def max(input, dim=None, keepdim=False, *, other=None):
    return _extreme(MAX_ALL, MAX_DIM, "max", input, dim, keepdim, other)


def min(input, dim=None, keepdim=False, *, other=None):
    return _extreme(MIN_ALL, MIN_DIM, "min", input, dim, keepdim, other)


def argmax(input, dim=None, keepdim=False):
    if dim is None:
        return dispatch(ARGMAX, (input.reshape(-1),), {"dims": (0,), "keepdim": False}) if input.numel() else \
            _empty_arg_error("argmax")
    _check_nonempty(input, normalize_dims(input, dim), "argmax")
    return _reduce(ARGMAX, None, input, dim, keepdim)


def argmin(input, dim=None, keepdim=False):
    if dim is None:
        return dispatch(ARGMIN, (input.reshape(-1),), {"dims": (0,), "keepdim": False}) if input.numel() else \
            _empty_arg_error("argmin")
    _check_nonempty(input, normalize_dims(input, dim), "argmin")
    return _reduce(ARGMIN, None, input, dim, keepdim)


def _empty_arg_error(name):
    raise IndexError("%s(): Expected reduction dim to be specified for input.numel() == 0." % name)


# ---------------------------------------------------------------------- references and samples (see _table.py)
def _np_max_dim(fn, arg):
    def ref(x, dim, keepdim=False):
        if x.ndim == 0:
            return x.copy(), np.zeros((), np.int64)
        return fn(x, axis=dim, keepdims=keepdim), arg(x, axis=dim, keepdims=keepdim)
    return ref

_EXTREME_DIM = _cases(((2, 3), {"dim": 1}), ((2, 3), {"dim": 0, "keepdim": True}), ((), {"dim": 0}), ([3, 2], {"dim": -1}))

_AMAX = _cases(((2, 3), {}), ((2, 3), {"dim": 1}), ((2, 3), {"dim": (0, 1), "keepdim": True}), ((), {}), ([3, 2], {"dim": -1}))

_ARG = _cases(((2, 3), {}), ((2, 3), {"dim": 1}), ((2, 3), {"dim": 0, "keepdim": True}), ([3, 2], {"dim": -1}), ((), {}))


# ---------------------------------------------------------------------- the entries
# (complex numbers have no order: PyTorch refuses them in each of these)
AMAX = _red("amax", _reduce_forward("amax"), _extreme_grad, ref=_np_reduce(np.amax), samples=_AMAX, call=amax,
            api=("amax",), unsupported=no_kernel("max_values_cpu", *COMPLEX))
AMIN = _red("amin", _reduce_forward("amin"), _extreme_grad, ref=_np_reduce(np.amin), samples=_AMAX, call=amin,
            api=("amin",), unsupported=no_kernel("min_values_cpu", *COMPLEX))
MAX_ALL = _red("max_all", _reduce_forward("amax"), _evenly_grad, node="MaxBackward1", ref=_np_reduce(np.amax),
               samples=_ALL, call=max, api=("max",), unsupported=no_kernel("max_all", *COMPLEX))
MIN_ALL = _red("min_all", _reduce_forward("amin"), _evenly_grad, node="MinBackward1", ref=_np_reduce(np.amin),
               samples=_ALL, call=min, api=("min",), unsupported=no_kernel("min_all", *COMPLEX))
ARGMAX = _red("argmax", lambda xp, dt, x, dims, keepdim: _restore(xp, xp.reduce("argmax", x, dims), x.shape, dims, keepdim),
              None, dtype="int64", differentiable=False, ref=_np_reduce(np.argmax), samples=_ARG,
              unsupported=rejects(RuntimeError, "argmax(): does not support bool input", "bool")
              | no_complex(RuntimeError, "argmax(): does not support complex input"), call=argmax,
              api=("argmax",))
ARGMIN = _red("argmin", lambda xp, dt, x, dims, keepdim: _restore(xp, xp.reduce("argmin", x, dims), x.shape, dims, keepdim),
              None, dtype="int64", differentiable=False, ref=_np_reduce(np.argmin), samples=_ARG,
              unsupported=rejects(RuntimeError, "argmin(): does not support bool input", "bool")
              | no_complex(RuntimeError, "argmin(): does not support complex input"), call=argmin,
              api=("argmin",))
# (values, indices): the formula reads the indices output, saved with the node
MAX_DIM = register(Op("max_dim", _max_dim_forward("amax"), vjp=[_max_dim_grad], n_outputs=2, outputs=("result", "indices"),
                      node="MaxBackward0", ref=_np_max_dim(np.amax, np.argmax), samples=_EXTREME_DIM, call=max,
                      unsupported=no_complex(RuntimeError, "max(): does not support complex input")))
MIN_DIM = register(Op("min_dim", _max_dim_forward("amin"), vjp=[_max_dim_grad], n_outputs=2, outputs=("result", "indices"),
                      node="MinBackward0", ref=_np_max_dim(np.amin, np.argmin), samples=_EXTREME_DIM, call=min,
                      unsupported=no_complex(RuntimeError, "min(): does not support complex input")))
