"""Indexing: basic slicing (views), integer and boolean advanced indexing, index_select, gather,
scatter_add, one_hot. Backward of an advanced index accumulates repeated indices."""
import numpy as np

from .. import _dtype as D
from .._device import backend, value_range
from .._factories import zeros
from .._index_key import _is_basic, normalize_key
from .._grad_mode import SPECIAL, STATE
from .._op import Op, dispatch
from .._tensor import Tensor
from ._table import _arr, _noncontig, c_order, export, register


def _idx_samples(rng, dtype):
    """Advanced indexing (the key's arrays become index tensors; repeated indices accumulate in backward)."""
    x = _arr(rng, (4, 3), -1.0, 1.0, dtype)
    i = lambda *v: np.array(v, dtype=np.int64)  # noqa: E731
    return [((x, (i(0, 2, 0),)), {}), ((x, (x > 0,)), {}), ((x, (np.array([[0, 1], [3, 3]]),)), {}),
            ((x, (slice(None), i(2, 0, 2))), {}), ((x, (i(0, 1), i(2, 2))), {}), ((x, (i(-1, 0), 1)), {}),
            ((_noncontig(rng, (4, 3), -1.0, 1.0, dtype), (i(3, 3),)), {}), ((x, np.array([True, False, True, True])), {})]


def _put_forward(xp, dt, g, shape, key, accumulate):
    out = xp.zeros(shape, g.dtype)
    if accumulate:
        xp.index_add(out, key, g)
    else:
        xp.setitem(out, key, g)
    return out


def _index_forward(xp, dt, x, key):
    r = xp.getitem(x, key)
    return _torch_layout(x, key, r) if r.__class__ is np.ndarray and r.ndim > 1 and r.size else r


def _torch_layout(x, key, r):
    """``r = x[key]`` (an advanced index) in the memory layout PyTorch's index kernel gives it, so that
    view() accepts and rejects the same shapes. NumPy may lay the result out otherwise (``x[:, idx]``
    comes out transposed). PyTorch's TensorIterator orders the output's dims by the strides of its
    operands: x with the indexed dims at stride 0, then each index tensor at stride 0 elsewhere."""
    if x.flags.c_contiguous and all(k.flags.c_contiguous for k in key if isinstance(k, np.ndarray)):
        return r if r.flags.c_contiguous else np.ascontiguousarray(r)  # then every operand agrees on C order
    operands = _index_operands(x, key, r.shape)
    if operands is None:
        return r
    nd = r.ndim
    perm = list(range(nd - 1, -1, -1))  # fastest dim first; TensorIteratorBase::reorder_dimensions
    for i in range(1, nd):
        d1 = i
        for d0 in range(i - 1, -1, -1):
            c = _should_swap(operands, r.shape, perm[d0], perm[d1])
            if c > 0:
                perm[d0], perm[d1] = perm[d1], perm[d0]
                d1 = d0
            elif c < 0:
                break
    strides, step = [0] * nd, r.itemsize
    for d in perm:
        strides[d] = step
        step *= r.shape[d]
    if all(a == b for a, b, n in zip(r.strides, strides, r.shape) if n > 1):
        return r
    order = perm[::-1]
    out = np.empty([r.shape[d] for d in order], r.dtype).transpose(np.argsort(order))
    out[...] = r
    return out


def _should_swap(operands, shape, d0, d1):
    """1 if dim d0 goes after d1 in memory, -1 if before, 0 if no operand tells (PyTorch's rule)."""
    for st in operands:
        s0, s1 = st[d0], st[d1]
        if s0 == 0 or s1 == 0:
            continue
        if s0 != s1:
            return -1 if s0 < s1 else 1
        if shape[d0] > shape[d1]:
            return 1
    return 0


def _index_operands(x, key, shape):
    """Per operand of PyTorch's index kernel (x, then each index array), its stride along each result dim;
    None where the key is beyond this (then NumPy's layout stays)."""
    n_in = sum(k.ndim if isinstance(k, np.ndarray) and k.dtype == bool else 1
               for k in key if k is not None and k is not Ellipsis)
    basic, adv, positions, d = [], [], [], 0  # basic: x's stride per kept dim, in order
    for pos, k in enumerate(key):
        if k is None:
            basic.append((len(positions), 0))
        elif k is Ellipsis:
            for _ in range(x.ndim - n_in):
                basic.append((len(positions), x.strides[d]))
                d += 1
        elif isinstance(k, slice):
            basic.append((len(positions), x.strides[d] * (k.step or 1)))
            d += 1
        elif isinstance(k, np.ndarray) and k.dtype == bool:
            if k.ndim == 0:
                return None
            adv.extend(np.nonzero(k))  # PyTorch's mask: its nonzero() indices, one per masked dim
            positions.append(pos)
            d += k.ndim
        else:  # an integer array, or an int among arrays (both advanced in NumPy's reading)
            if isinstance(k, np.ndarray):
                adv.append(k)
            positions.append(pos)
            d += 1
    basic += [(len(positions), x.strides[i]) for i in range(d, x.ndim)]
    bshape = np.broadcast_shapes(*[a.shape for a in adv]) if adv else ()
    adjacent = positions[-1] - positions[0] == len(positions) - 1
    before = [st for n, st in basic if n == 0] if adjacent else []  # basic dims ahead of the index dims
    after = [st for n, st in basic if n != 0] if adjacent else [st for n, st in basic]
    if len(before) + len(bshape) + len(after) != len(shape):
        return None
    zeros = [0] * len(bshape)
    ops = [before + zeros + after]
    for a in adv:
        ops.append([0] * len(before) + list(np.broadcast_to(a, bshape).strides) + [0] * len(after))
    return ops


def _masked(params):
    """Whether an index key holds a boolean mask (the result has as many elements as the mask has true values)."""
    return any(getattr(k, "dtype", None) == np.bool_ and k.ndim > 0 for k in params["key"])


def index_put_zeros(g, shape, key, accumulate):
    """zeros(shape) with ``g`` written (or added, for repeated indices) at ``key``."""
    return dispatch(INDEX_PUT_ZEROS, (g,), {"shape": shape, "key": key, "accumulate": accumulate})


@export("__getitem__", function=False)
def getitem(self, key):
    if SPECIAL[0] and STATE.vmap is not None:  # inside jitgrad.vmap: a key may hold batched index tensors
        out = STATE.vmap.getitem(self, key)
        if out is not None:
            return out
    key = normalize_key(self, key)
    if all(_is_basic(k) for k in key):
        op = SELECT if any(isinstance(k, (int, np.integer)) for k in key) else SLICE
        if all(k is None or k is Ellipsis for k in key) and any(k is None for k in key):
            op = SLICE
        return dispatch(op, (self,), {"key": key})
    return dispatch(INDEX, (self,), {"key": key})


# ---------------------------------------------------------------------- index_select, gather, scatter
def _index_select_forward(xp, dt, x, index, dim):
    return xp.take(x, index, axis=dim)


def _gather_forward(xp, dt, x, index, dim):
    return c_order(xp.take_along_axis(x, index, axis=dim))


def _scatter_add_forward(xp, dt, x, index, src, dim):
    out = xp.copy(x)
    xp.scatter_add(out, dim, index, src)
    return out


_INDEX_DTYPE_ERRORS = {"index_select": "index_select(): Expected dtype int32 or int64 for index",
                       "gather": "gather(): Expected dtype int32/int64 for index",
                       "scatter_add": "scatter(): Expected dtype int32/int64 for index"}


def _check_index(index, name):
    if not isinstance(index, Tensor):
        raise TypeError("%s(): argument 'index' (position 3) must be Tensor, not %s" % (name, type(index).__name__))
    if index.dtype.name not in ("int64", "int32"):
        raise RuntimeError(_INDEX_DTYPE_ERRORS[name])


def check_rows(index, n):
    """PyTorch's error for a row index outside [0, n) (index_select, embedding), raised before any kernel runs
    on the CPU; the CUDA gather kernel checks its indices itself (kernels/cuda/asserts.py), without a wait."""
    if index.numel() and index._data.__class__ is np.ndarray:
        lo, hi = value_range(index._data)
        if lo < 0 or hi >= n:
            raise IndexError("index out of range in self")


def index_select(input, dim, index):
    _check_index(index, "index_select")
    if index.ndim > 1:
        raise IndexError("index_select(): Index is supposed to be a vector")
    d = input._wrap_dim(dim) if input.ndim else 0
    n = input.shape[d] if input.ndim else 1
    check_rows(index, n)
    return dispatch(INDEX_SELECT, (input, index.reshape(-1).long()), {"dim": d})


def _check_gather(input, dim, index, name):
    _check_index(index, name)
    if index.ndim != input.ndim:
        raise RuntimeError("Index tensor must have the same number of dimensions as input tensor")
    d = input._wrap_dim(dim)
    for k in range(input.ndim):
        if k != d and index.shape[k] > input.shape[k]:
            raise RuntimeError("Size does not match at dimension %d expected index [%s] to be no larger than self [%s] "
                               "apart from dimension %d" % (k, ", ".join(map(str, index.shape)),
                                                            ", ".join(map(str, input.shape)), d))
    n = input.shape[d]
    lo, hi = value_range(index._data) if index.numel() else (0, 0)
    if hi >= n or lo < 0:
        raise RuntimeError("index %d is out of bounds for dimension %d with size %d" % (hi if hi >= n else lo, d, n))
    return d


def gather(input, dim, index):
    d = _check_gather(input, dim, index, "gather")
    if any(index.shape[k] != input.shape[k] for k in range(input.ndim) if k != d):
        input = input[tuple(slice(None) if k == d else slice(0, index.shape[k]) for k in range(input.ndim))]
    return dispatch(GATHER, (input, index.long()), {"dim": d})


def scatter_add(input, dim, index, src):
    d = _check_gather(input, dim, index, "scatter_add")
    return dispatch(SCATTER_ADD, (input, index.long(), src), {"dim": d})


def scatter_into_zeros(shape, dim, index, src):
    return scatter_add(zeros(shape, dtype=src.dtype, device=src.device), dim, index, src)


@export()
def nonzero(input, *, as_tuple=False):
    """Indices of the nonzero elements: an (n, ndim) int64 tensor, or a tuple of one index tensor per dim."""
    idx = np.nonzero(input._host().reshape(-1) if input.ndim == 0 else input._host())
    to = backend(input._data).from_host
    if as_tuple:
        return tuple(Tensor._wrap(to(i.astype(np.int64))) for i in idx)
    return Tensor._wrap(to(np.stack(idx, 1).astype(np.int64) if input.ndim else np.zeros((len(idx[0]), 0), np.int64)))


@export(method=False)
def one_hot(tensor, num_classes=-1):
    """One row per value, 1 at the value's column (num_classes=-1: one more than the largest value). A table
    op: a compiled function reads each call's classes (with num_classes=-1 its shape depends on them)."""
    if not isinstance(tensor, Tensor) or tensor.dtype is not D.int64:
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    return dispatch(ONE_HOT, (tensor,), {"num_classes": int(num_classes)})


def _one_hot_forward(xp, dt, x, num_classes):
    size = x.size
    lo, hi = value_range(x) if size else (0, -1)
    if lo < 0:
        raise RuntimeError("Class values must be non-negative.")
    if num_classes == -1:
        num_classes = int(hi) + 1
    elif hi >= num_classes:
        raise RuntimeError("Class values must be smaller than num_classes.")
    out = xp.zeros(tuple(x.shape) + (num_classes,), np.int64)
    if size:
        xp.one_hot(xp.reshape(x if _contiguous(x) else xp.copy(x), (-1,)), xp.reshape(out, (-1, num_classes)))
    return out


def _contiguous(a):
    return a.flags.c_contiguous if a.__class__ is np.ndarray else a.is_c_contiguous()


def _np_one_hot(x, num_classes=-1):
    n = int(x.max()) + 1 if num_classes == -1 else num_classes
    return (np.asarray(x)[..., None] == np.arange(n)).astype(np.int64)


def _one_hot_samples(rng, dtype):
    if np.dtype(dtype) != np.int64:
        return []
    return [((rng.integers(0, 4, 5),), {}), ((rng.integers(0, 3, (2, 3)),), {"num_classes": 5}),
            ((np.array(2),), {"num_classes": 3})]


# ---------------------------------------------------------------------- references and samples (see _table.py)
def _np_index_put_zeros(g, shape, key, accumulate):
    out = np.zeros(shape, g.dtype)
    if accumulate:
        np.add.at(out, key, g)
    else:
        out[key] = g
    return out


def _np_gather(x, dim, index):
    dim %= x.ndim
    return np.take_along_axis(x[tuple(slice(0, n) if k != dim else slice(None) for k, n in enumerate(index.shape))],
                              index, axis=dim)


def _np_scatter_add(x, dim, index, src):
    out = x.copy()
    grid = list(np.ix_(*[np.arange(n) for n in index.shape]))
    grid[dim] = index
    np.add.at(out, tuple(grid), src[tuple(slice(0, n) for n in index.shape)])
    return out


def _basic_samples(*keys):
    def samples(rng, dtype):
        x = _arr(rng, (4, 3), -1.0, 1.0, dtype)
        return [((x, k), {}) for k in keys] + [((_noncontig(rng, (4, 3), -1.0, 1.0, dtype), keys[0]), {})]
    return samples


def _put_samples(rng, dtype):
    g = lambda *s: _arr(rng, s, -1.0, 1.0, dtype)  # noqa: E731
    return [((g(3, 3),), {"shape": (4, 3), "key": (np.array([0, 2, 0]),), "accumulate": True}),
            ((g(2, 3),), {"shape": (4, 3), "key": (slice(1, 3),), "accumulate": False}),
            ((g(3),), {"shape": (4, 3), "key": (1,), "accumulate": False})]


def _index_select_samples(rng, dtype):
    x = _arr(rng, (4, 3), -1.0, 1.0, dtype)
    return [((x, 0, np.array([0, 2, 0])), {}), ((x, 1, np.array([2])), {}), ((x, -1, np.array([1, 2])), {}),
            ((x, 0, np.array(3)), {}), ((_noncontig(rng, (4, 3), -1.0, 1.0, dtype), 1, np.array([0, 0])), {})]


def _gather_samples(rng, dtype):
    x = _arr(rng, (3, 4), -1.0, 1.0, dtype)
    idx = lambda hi, *s: rng.integers(0, hi, s)  # noqa: E731
    return [((x, 1, idx(4, 3, 2)), {}), ((x, 0, idx(3, 2, 4)), {}), ((x, -1, idx(4, 2, 5)), {}),
            ((_noncontig(rng, (3, 4), -1.0, 1.0, dtype), 1, idx(4, 3, 4)), {})]


def _scatter_add_samples(rng, dtype):
    A = lambda *s: _arr(rng, s, -1.0, 1.0, dtype)  # noqa: E731
    idx = lambda hi, *s: rng.integers(0, hi, s)  # noqa: E731
    return [((A(3, 4), 1, idx(4, 3, 2), A(3, 2)), {}), ((A(3, 4), 0, idx(3, 2, 4), A(2, 4)), {}),
            ((A(3, 4), 1, idx(4, 2, 3), A(2, 3)), {}), ((_noncontig(rng, (3, 4), -1.0, 1.0, dtype), 0, idx(3, 3, 4), A(3, 4)), {})]


def _np_getitem(x, key):
    return np.asarray(x[key])


# ---------------------------------------------------------------------- the entries
SELECT = register(Op("select", lambda xp, dt, x, key: xp.getitem(x, key),
                     vjp=[lambda g, s: index_put_zeros(g, s.self_shape, s.key, False)], dtype="keep", view=True,
                     ref=_np_getitem, samples=_basic_samples(1, (1, -1), (Ellipsis, 0), (None, 2, slice(0, 2))),
                     node="SelectBackward0", call=getitem))
SLICE = register(Op("slice", lambda xp, dt, x, key: xp.getitem(x, key),
                    vjp=[lambda g, s: index_put_zeros(g, s.self_shape, s.key, False)], dtype="keep", view=True,
                    ref=_np_getitem, node="SliceBackward0", call=getitem,
                    samples=_basic_samples((slice(1, 3),), (slice(None), slice(None, None, 2)), (None, slice(0, 1)),
                                           Ellipsis, (slice(-2, None), None))))
INDEX = register(Op("index", _index_forward, vjp=[lambda g, s: index_put_zeros(g, s.self_shape, s.key, True)],
                    dtype="keep", reduced_precision="native", ref=_np_getitem, samples=_idx_samples, node="IndexBackward0",
                    call=getitem, value_shaped=_masked))
INDEX_PUT_ZEROS = register(Op("index_put_zeros", _put_forward, vjp=[lambda g, s: g[s.key]], dtype="keep",
                              ref=_np_index_put_zeros, samples=_put_samples, node="IndexPutBackward0",
                              call=index_put_zeros, complex=True))
ONE_HOT = register(Op("one_hot", _one_hot_forward, dtype="keep", keep_inputs=(0,), differentiable=False,
                      call=one_hot, ref=_np_one_hot, samples=_one_hot_samples, method=False, function=False,
                      value_shaped=lambda params: params["num_classes"] == -1))
INDEX_SELECT = register(Op("index_select", _index_select_forward, inputs=("self", "index"),
                           vjp=[lambda g, s: index_put_zeros(g, s.self_shape, (slice(None),) * s.dim + (s.index._data,),
                                                             True)], dtype="keep", keep_inputs=(1,),
                           reduced_precision="native",
                           ref=lambda x, dim, index: np.take(x, index.reshape(-1), axis=dim),
                           samples=_index_select_samples, call=index_select, api=("index_select",)))
GATHER = register(Op("gather", _gather_forward, inputs=("self", "index"),
                     vjp=[lambda g, s: scatter_into_zeros(s.self_shape, s.dim, s.index, g)],
                     dtype="keep", keep_inputs=(1,), reduced_precision="native", ref=_np_gather, samples=_gather_samples, call=gather,
                     api=("gather",)))
SCATTER_ADD = register(Op("scatter_add", _scatter_add_forward, inputs=("self", "index", "src"),
                          vjp=[lambda g, s: g, None, lambda g, s: g.gather(s.dim, s.index)],
                          dtype="keep", keep_inputs=(1,), ref=_np_scatter_add, samples=_scatter_add_samples,
                          call=scatter_add, api=("scatter_add",), inplace=True, complex=True))
