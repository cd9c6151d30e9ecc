"""Sorting and order statistics: sort, argsort, topk, kthvalue, median, unique. NumPy sorts (a stable
sort on the host: ties keep their order, NaN sorts above every number, as in PyTorch; a CUDA tensor's
rows are sorted on the host and the results copied back); the values' gradient goes back to the
picked positions through scatter_add, so double backward works."""
import numpy as np

from .._op import Op, dispatch
from .._tensor import Tensor
from ._table import COMPLEX, _arr, _noncontig, export, no_complex, no_kernel, register, rejects
from .extrema import _evenly_grad, _ValuesIndices
from .indexing import scatter_into_zeros


def _named(name, values, indices):
    out = _ValuesIndices((values, indices))
    out.name = name
    return out


def _host(xp, x):
    return np.asarray(xp.to_host(x))


def stable_order(h, dim, descending):
    """Indices that sort host array ``h`` along ``dim``, ties in their original order either way."""
    if not descending:
        return np.argsort(h, axis=dim, kind="stable")
    # descending and stable: sort the reversed array ascending, then reverse the order and the indices
    idx = np.argsort(np.flip(h, dim), axis=dim, kind="stable")
    return h.shape[dim] - 1 - np.flip(idx, dim)


def sorted_rows(h, dim, descending):
    """``stable_order(h, dim, descending)`` and the values in that order. NumPy's default sort (a SIMD
    quicksort where the CPU has one: 5x faster than its stable sort on float32 rows) gives the same order
    in a row where no two elements are equal (two NaNs count as equal), and then a descending order is the
    ascending one reversed; the rows with a tie are sorted again stably."""
    if h.dtype == np.bool_ or h.shape[dim] < 2:  # (booleans always tie)
        order = stable_order(h, dim, descending)
        return order, np.take_along_axis(h, order, dim)
    rows = np.moveaxis(h, dim, -1)
    order = np.argsort(rows, axis=-1)
    vals = np.take_along_axis(rows, order, -1)
    a, b = vals[..., 1:], vals[..., :-1]
    tied = ((a == b) | (a != a) & (b != b)).any(axis=-1)
    if descending:
        order, vals = order[..., ::-1], vals[..., ::-1]
    if tied.any():
        order, vals = np.array(order), np.array(vals)
        order[tied] = stable_order(rows[tied], 1, descending)
        vals[tied] = np.take_along_axis(rows[tied], order[tied], 1)
    return np.moveaxis(order, -1, dim), np.moveaxis(vals, -1, dim)


def _picked(xp, x, dim, positions, descending=False):
    """(values, indices) at ``positions`` (a slice or an index array per row) of each sorted row along ``dim``."""
    h = _host(xp, x)
    if h.ndim == 0:
        return xp.copy(x), xp.from_host(np.zeros((), np.int64))
    order, vals = sorted_rows(h, dim, descending)
    if isinstance(positions, slice):
        at = (slice(None),) * dim + (positions,)
        idx, vals = order[at], vals[at]
    else:
        idx, vals = np.take_along_axis(order, positions, dim), np.take_along_axis(vals, positions, dim)
    return xp.from_host(np.ascontiguousarray(vals)), xp.from_host(np.ascontiguousarray(idx.astype(np.int64)))


def _sort_forward(xp, dt, x, dim, descending, keepdim):
    return _picked(xp, x, dim, slice(None), descending)


def _topk_forward(xp, dt, x, k, dim, largest, keepdim):
    return _picked(xp, x, dim, slice(0, k), largest)


def _row_pick(xp, x, dim, keepdim, position):
    """(values, indices) of the element at sorted ``position(row counts)`` of each row, keepdim or not."""
    h = _host(xp, x)
    if h.ndim == 0:
        return xp.copy(x), xp.from_host(np.zeros((), np.int64))
    nans = np.isnan(h).sum(axis=dim, keepdims=True) if h.dtype.kind == "f" else np.zeros(
        h.shape[:dim] + (1,) + h.shape[dim + 1:], np.int64)
    pos = position(h.shape[dim], nans)
    vals, idx = _picked(xp, x, dim, pos)
    if not keepdim:
        shape = vals.shape[:dim] + vals.shape[dim + 1:]
        vals, idx = xp.reshape(vals, shape), xp.reshape(idx, shape)
    return vals, idx


def _kthvalue_forward(xp, dt, x, k, dim, keepdim):
    return _row_pick(xp, x, dim, keepdim, lambda n, nans: np.full(nans.shape, k - 1, np.int64))


def _median_position(n, nans):
    """The lower median, or the first NaN where a row has one (NaN propagates, as in PyTorch)."""
    return np.where(nans > 0, n - nans, (n - 1) // 2).astype(np.int64)


def _median_dim_forward(xp, dt, x, dim, keepdim):
    return _row_pick(xp, x, dim, keepdim, _median_position)


def _median_all_forward(xp, dt, x):
    flat = xp.reshape(x, (-1,))
    return xp.reshape(_row_pick(xp, flat, 0, False, _median_position)[0], ())


def _gather_back(g, s):
    """The values' gradient, scattered back to the positions the indices name along ``s.dim``."""
    gv = g[0]
    if not s.self_shape:
        return gv
    idx = s.indices
    if not s.keepdim:
        idx, gv = idx.unsqueeze(s.dim), gv.unsqueeze(s.dim)
    return scatter_into_zeros(s.self_shape, s.dim, idx, gv)


def _unique_forward(xp, dt, x, dim):
    h = _host(xp, x)
    if dim is None:
        vals, inv, counts = np.unique(h.reshape(-1), return_inverse=True, return_counts=True)
        inv = inv.reshape(h.shape)
    else:
        vals, inv, counts = np.unique(h, return_inverse=True, return_counts=True, axis=dim)
        inv = inv.reshape(-1)
    return (xp.from_host(np.ascontiguousarray(vals)), xp.from_host(inv.astype(np.int64)),
            xp.from_host(counts.astype(np.int64)))


# ---------------------------------------------------------------------- API
def _dim(input, dim):
    return input._wrap_dim(dim) if input.ndim else 0


def sort(input, dim=-1, descending=False, stable=False):
    values, indices = dispatch(SORT, (input,), {"dim": _dim(input, dim), "descending": bool(descending),
                                                "keepdim": True})
    return _named("sort", values, indices)


def argsort(input, dim=-1, descending=False, stable=False):
    return sort(input, dim, descending, stable)[1]


def msort(input):
    return sort(input, 0)[0]


def topk(input, k, dim=-1, largest=True, sorted=True):
    d = _dim(input, dim)
    n = input.shape[d] if input.ndim else 1
    if not 0 <= k <= n:
        raise RuntimeError("selected index k out of range")
    values, indices = dispatch(TOPK, (input,), {"k": int(k), "dim": d, "largest": bool(largest), "keepdim": True})
    return _named("topk", values, indices)


def kthvalue(input, k, dim=-1, keepdim=False):
    d = _dim(input, dim)
    n = input.shape[d] if input.ndim else 1
    if not 1 <= k <= n:
        raise RuntimeError("kthvalue(): selected number k out of range for dimension %d" % d)
    values, indices = dispatch(KTHVALUE, (input,), {"k": int(k), "dim": d, "keepdim": keepdim})
    return _named("kthvalue", values, indices)


def median(input, dim=None, keepdim=False):
    if dim is None:
        if input.numel() == 0:
            return Tensor._wrap(np.full((), np.nan, input.dtype.np if input.dtype.is_floating_point else np.float32))
        return dispatch(MEDIAN_ALL, (input,))
    d = _dim(input, dim)
    if input.ndim and input.shape[d] == 0:
        raise IndexError("median(): Expected reduction dim %d to have non-zero size." % d)
    values, indices = dispatch(MEDIAN_DIM, (input,), {"dim": d, "keepdim": keepdim})
    return _named("median", values, indices)


def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):
    d = None if dim is None else input._wrap_dim(dim)
    if d is None and input.ndim == 0:
        values, inverse, counts = dispatch(UNIQUE, (input.reshape(1),), {"dim": None})
        inverse = inverse.reshape(())
    else:
        values, inverse, counts = dispatch(UNIQUE, (input,), {"dim": d})
    out = (values,) + ((inverse,) if return_inverse else ()) + ((counts,) if return_counts else ())
    return out[0] if len(out) == 1 else out


export("argsort")(argsort)
export("msort")(msort)


# ---------------------------------------------------------------------- references and samples (see _table.py)
def _np_order(x, dim, descending):
    if x.ndim == 0:
        return np.zeros((), np.int64)
    return stable_order(x, dim % x.ndim, descending)


def _np_sort(x, dim=-1, descending=False, stable=False):
    idx = _np_order(x, dim, descending)
    return (x.copy(), idx) if x.ndim == 0 else (np.take_along_axis(x, idx, dim), idx)


def _np_topk(x, k, dim=-1, largest=True, sorted=True):
    v, i = _np_sort(x, dim, largest)
    if x.ndim == 0:
        return v, i
    key = (slice(None),) * (dim % x.ndim) + (slice(0, k),)
    return v[key], i[key]


def _np_kthvalue(x, k, dim=-1, keepdim=False):
    v, i = _np_sort(x, dim)
    if x.ndim == 0:
        return v, i
    d = dim % x.ndim
    key = (slice(None),) * d + (slice(k - 1, k),)
    v, i = v[key], i[key]
    return (v, i) if keepdim else (v.squeeze(d), i.squeeze(d))


def _np_median(x, dim=None, keepdim=False):
    if dim is None:
        flat = np.sort(x.reshape(-1), kind="stable")
        return np.asarray(np.nan if np.isnan(flat).any() else flat[(flat.size - 1) // 2], dtype=x.dtype)
    return _np_kthvalue(x, (x.shape[dim % x.ndim] + 1) // 2 if x.ndim else 1, dim, keepdim)


def _np_unique(x, sorted=True, return_inverse=False, return_counts=False, dim=None):
    v, inv, c = np.unique(x.reshape(-1) if dim is None else x, return_inverse=True, return_counts=True, axis=dim)
    out = (v,) + ((inv.reshape(x.shape) if dim is None else inv.reshape(-1),) if return_inverse else ()) + \
        ((c,) if return_counts else ())
    return out[0] if len(out) == 1 else out


def _ties(rng, shape, dtype):
    """Values with repeats (ties exercise stability; gradients still check: a tie's gradient goes to the
    element whose position the indices name)."""
    return _arr(rng, shape, -2.0, 2.0, dtype) if np.dtype(dtype).kind == "f" else _arr(rng, shape, -1.0, 1.0, dtype)


def _cases(*cases):
    def samples(rng, dtype):
        return [(((_noncontig if isinstance(s, list) else _ties)(rng, tuple(s), *(
            (-2.0, 2.0, dtype) if isinstance(s, list) else (dtype,))),) + extra, dict(kw)) for s, extra, kw in cases]
    return samples


_SORT = _cases(((2, 3), (), {}), ((2, 3), (), {"dim": 0, "descending": True}), ((), (), {}), ((5,), (), {"descending": True}),
               ([3, 2], (), {"dim": 0}))
_TOPK = _cases(((2, 4), (2,), {}), ((2, 4), (1,), {"dim": 0, "largest": False}), ((), (1,), {}), ((5,), (3,), {}),
               ([3, 2], (2,), {"dim": 0}), ((3,), (0,), {}))
_KTH = _cases(((2, 4), (2,), {}), ((3, 4), (3,), {"dim": 0, "keepdim": True}), ((), (1,), {}), ([3, 2], (1,), {"dim": 0}))
_MEDIAN_DIM = _cases(((2, 4), (), {"dim": 1}), ((3, 4), (), {"dim": 0, "keepdim": True}), ((), (), {"dim": 0}),
                     ([3, 2], (), {"dim": -1}))
_MEDIAN_ALL = _cases(((2, 4), (), {}), ((5,), (), {}), ((), (), {}), ([3, 2], (), {}))
_ALL3 = {"return_inverse": True, "return_counts": True}  # (the other combinations: tests/ops/test_ops_against_torch.py)
_UNIQUE = _cases(((2, 4), (), _ALL3), ((5,), (), _ALL3), ((), (), _ALL3), ((3, 2), (), dict(_ALL3, dim=0)),
                 ([3, 2], (), _ALL3))


# ---------------------------------------------------------------------- the entries
def _order_op(name, forward, ref, samples, call, node=None, vjp=_gather_back, **kw):
    return register(Op(name, forward, vjp=[vjp], n_outputs=2, outputs=("result", "indices"), dtype="keep",
                       node=node, ref=ref, samples=samples, call=call, api=(name,),
                       bench={"sizes": [(16, 16), (1024, 1024)]}, **kw))


# (complex numbers have no order: PyTorch refuses them, in these words; its messages of sort and topk begin
# with a space)
SORT = _order_op("sort", _sort_forward, _np_sort, _SORT, sort,
                 unsupported=no_complex(RuntimeError, " Sort does not support complex dtypes on CPU"))
TOPK = _order_op("topk", _topk_forward, _np_topk, _TOPK, topk,
                 unsupported=rejects(RuntimeError, "topk does not support bool dtypes on CPU", "bool")
                 | no_complex(RuntimeError, " topk does not support complex dtypes on CPU"))
KTHVALUE = _order_op("kthvalue", _kthvalue_forward, _np_kthvalue, _KTH, kthvalue,
                     unsupported=rejects(NotImplementedError, "\"kthvalue_cpu\" not implemented for '%(type)s'", "bool",
                                         *COMPLEX))
MEDIAN_DIM = _order_op("median_dim", _median_dim_forward, _np_median, _MEDIAN_DIM, median, node="MedianBackward1",
                       unsupported=rejects(NotImplementedError, "\"median_cpu\" not implemented for '%(type)s'", "bool")
                       | no_kernel("median_out", *COMPLEX))
MEDIAN_ALL = register(Op("median", _median_all_forward, vjp=[_evenly_grad], dtype="keep", node="MedianBackward0",
                         ref=_np_median, samples=_MEDIAN_ALL, call=median, api=("median",),
                         unsupported=rejects(NotImplementedError, "\"median_cpu\" not implemented for '%(type)s'", "bool",
                                             *COMPLEX)))
UNIQUE = register(Op("unique", _unique_forward, n_outputs=3, dtype="keep", differentiable=False, ref=_np_unique,
                     samples=_UNIQUE, call=unique, api=("unique",), value_shaped=lambda params: True,
                     unsupported=no_kernel("unique", *COMPLEX)))
