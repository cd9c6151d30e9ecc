"""Array plumbing for device arrays: views, contiguous copies, gathers, concatenation.

numba's device arrays carry (shape, strides, data pointer) but few NumPy operations, so view
functions work on a *shadow*: a NumPy array with the same shape and strides over a one-element
buffer, never read. NumPy computes the view (swapaxes, broadcast_to, basic indexing...), and the
result's shape, strides and pointer offset are applied to the device memory. Anything that
NumPy could only do by copying becomes a strided-copy kernel on the device. Works the same under
numba's CUDA simulator, where device arrays wrap host arrays.
"""
import math
import sys

import numpy as np
from numba import config, cuda

from . import _launch as L, asserts
from .asserts import INDEX_OUT_OF_RANGE, record
from .elementwise import run
from .memory import PoolMemory

SIM = bool(config.ENABLE_CUDASIM)
THREADS = 256
if SIM:
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray
else:
    from .memory import DeviceArray


def is_device_array(x):
    return hasattr(x, "copy_to_host")


# ------------------------------------------------------------------ raw views
_SHADOWS = {}  # (shape, strides, dtype) -> (shadow, its address): never written, so one serves every such array


def _shadow_at(x):
    """A NumPy array with x's shape and strides over a dummy buffer, for computing views only, and its address."""
    key = (x.shape, x.strides, x.dtype)
    found = _SHADOWS.get(key)
    if found is None:
        if len(_SHADOWS) >= 4096:
            _SHADOWS.clear()
        shadow = np.lib.stride_tricks.as_strided(np.empty(1, x.dtype), shape=x.shape, strides=x.strides)
        found = _SHADOWS[key] = (shadow, _pointer(shadow))
    return found


def _shadow(x):
    return _shadow_at(x)[0]


def _pointer(a):
    return a.__array_interface__["data"][0]


def _rebuild(x, view, offset):
    """The device view of ``x`` with ``view``'s shape and strides, ``offset`` bytes (>= 0) into x."""
    if SIM:
        host, k = x._ary, offset // x.dtype.itemsize
        start = np.lib.stride_tricks.as_strided(host, shape=(k + 1,), strides=(host.itemsize,))[k:]
        return FakeCUDAArray(np.lib.stride_tricks.as_strided(start, shape=view.shape, strides=view.strides))
    return DeviceArray(view.shape, view.strides, x.dtype, gpu_data=x.gpu_data.view(offset) if offset else x.gpu_data)


def _contiguous(x, shape):
    """C-contiguous device array ``x`` (on a GPU) seen with ``shape`` of the same size."""
    shape = tuple(map(int, shape))
    return DeviceArray(shape, L.c_strides(shape, x.dtype.itemsize), x.dtype, gpu_data=x.gpu_data)


def _view(x, fn):
    """Apply a NumPy view function to device array ``x``; None if NumPy would have to copy.

    Views with negative strides are refused too (their first element lies before x's): flip copies.
    """
    if not L.is_device_array(x):  # a NumPy array standing in for a device array (the PTX sweeps)
        return fn(x)
    shadow, start = _shadow_at(x)
    v = fn(shadow)
    if v.size and not np.may_share_memory(v, shadow):
        return None
    offset = _pointer(v) - start
    if any(s < 0 for s in v.strides) or (v.size and offset < 0):
        return None
    return _rebuild(x, v, offset)


# ------------------------------------------------------------------ copy kernels
MAX_DIMS = 8


@cuda.jit
def _copy_strided(src, src_start, src_strides, dst, dst_start, dst_strides, shape, ndim, n):
    """dst[index] = src[index] for every index of ``shape``; arrays are flat, strides in elements."""
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < n:
        rest = i
        s = src_start
        d = dst_start
        for k in range(ndim - 1, -1, -1):
            c = rest % shape[k]
            rest //= shape[k]
            s += c * src_strides[k]
            d += c * dst_strides[k]
        dst[d] = src[s]
        i += stride


def _flat_extent(x):
    """A 1-D device array over the memory that view ``x`` spans (strides are never negative)."""
    item = x.dtype.itemsize
    length = 1 + sum((n - 1) * st for n, st in zip(x.shape, x.strides)) // item
    return _rebuild(x, np.lib.stride_tricks.as_strided(_shadow(x), shape=(length,), strides=(item,)), 0)


def copy_into(dst, src):
    """dst[...] = src (same shape after broadcasting src; any strides on either side)."""
    shape = tuple(dst.shape)
    if tuple(src.shape) != shape:
        src = broadcast_to(src, shape)
    n = math.prod(shape)
    if n == 0:
        return dst
    if src.dtype != dst.dtype:
        src = astype(src, dst.dtype)
    sflat, sstart = _flat_extent(src), 0
    dflat, dstart = _flat_extent(dst), 0
    item = dst.dtype.itemsize
    nd = max(len(shape), 1)
    pad = lambda t: tuple(t) + (1,) * (MAX_DIMS - len(t))  # noqa: E731
    sstr = pad([s // src.dtype.itemsize for s in src.strides]) if shape else pad([0])
    dstr = pad([s // item for s in dst.strides]) if shape else pad([0])
    blocks = min((n + THREADS - 1) // THREADS, 4096)
    L.launch(_copy_strided, blocks, THREADS, sflat, sstart, sstr, dflat, dstart, dstr, pad(shape or (1,)), nd, n)
    return dst


# ------------------------------------------------------------------ allocation
def empty(shape, dtype):
    return L.empty(tuple(shape), np.dtype(dtype))


def full(shape, value, dtype):
    out = empty(shape, dtype)
    return run("identity", np.dtype(dtype), np.dtype(dtype).type(value), out=out) if out.size else out


def zeros(shape, dtype):
    return full(shape, 0, dtype)


def from_host(a):
    a = np.asarray(a)
    if a.dtype.kind == "V":  # bfloat16 (ml_dtypes): numba's device arrays and kernels have no such type
        raise RuntimeError("CUDA tensors of dtype %s are not supported (numba's CUDA arrays have no such type): "
                           "keep them on the CPU, or use float16" % a.dtype)
    return cuda.to_device(a if a.flags.c_contiguous else a.copy())  # (ascontiguousarray makes 0-d 1-d)


def to_host(x):
    """A host copy of ``x``; raises an index error a kernel recorded before it (kernels.cuda.asserts)."""
    if not is_device_array(x):
        return np.asarray(x)
    h = x.copy_to_host()
    asserts.raise_pending()
    return h


# ------------------------------------------------------------------ views and copies
def is_contiguous(x):
    return x.is_c_contiguous()


def address(x):
    """The device address of ``x``'s first element (Tensor.data_ptr); 0 for an empty array."""
    return x._ary.__array_interface__["data"][0] if SIM else x.device_ctypes_pointer.value or 0


def ascontiguous(x):
    if not L.is_device_array(x):  # a NumPy array standing in for a device array (the PTX sweeps)
        return np.ascontiguousarray(x)
    if x.is_c_contiguous():
        return x
    return copy_into(empty(x.shape, x.dtype), x)


def copy(x):
    if not L.is_device_array(x):  # (the PTX sweeps)
        return np.array(x, order="C")
    return copy_into(empty(x.shape, x.dtype), x)


def astype(x, dtype):
    return run("identity", np.dtype(dtype), x)  # run reads strided inputs in place


def reshape(x, shape):
    shape = tuple(shape)
    if not L.is_device_array(x):  # a NumPy array standing in for a device array (the PTX sweeps)
        return x.reshape(shape)
    if not SIM and -1 not in shape and math.prod(shape) == x.size and x.is_c_contiguous():
        return _contiguous(x, shape)  # the common case, without the shadow array's host time
    v = _view(x, lambda a: a.reshape(shape))
    return v if v is not None else _view(ascontiguous(x), lambda a: a.reshape(shape))


def view(x, shape):
    """x with ``shape`` sharing its memory, or None where the strides don't allow it."""
    shape = tuple(shape)
    probe = _shadow(x).view()
    try:
        probe.shape = shape  # NumPy refuses exactly when no view exists
    except AttributeError:
        return None
    return _view(x, lambda a: a.reshape(shape)) if math.prod(shape) else reshape(x, shape)


def diagonal(x, offset, dim1, dim2):
    return _view(x, lambda s: np.diagonal(s, offset, dim1, dim2))


def swapaxes(x, a, b):
    return _view(x, lambda s: np.swapaxes(s, a, b))


def transpose(x, axes=None):
    return _view(x, lambda s: np.transpose(s, axes))


def broadcast_to(x, shape):
    return _view(x, lambda s: np.broadcast_to(s, tuple(shape)))


def expand_dims(x, axis):
    return _view(x, lambda s: np.expand_dims(s, axis))


def flip(x, dims):
    """A copy with ``dims`` reversed: one gather per flipped dim."""
    for d in dims:
        x = take(x, np.arange(x.shape[d] - 1, -1, -1, dtype=np.int64), axis=d)
    return copy(x) if not dims else x


def tile(x, reps):
    reps = tuple(reps)
    nd = max(len(reps), x.ndim)
    shape = (1,) * (nd - x.ndim) + tuple(x.shape)
    reps = (1,) * (nd - len(reps)) + reps
    inter = []
    for r, n in zip(reps, shape):
        inter += [r, n]
    src = reshape(x, sum(([1, n] for n in shape), []))
    out = empty(inter, x.dtype)
    copy_into(out, src)
    return reshape(out, [r * n for r, n in zip(reps, shape)])


def concatenate(arrays, axis=0):
    shape = list(arrays[0].shape)
    shape[axis] = sum(a.shape[axis] for a in arrays)
    out = empty(shape, np.result_type(*[a.dtype for a in arrays]))
    start = 0
    for a in arrays:
        n = a.shape[axis]
        key = (slice(None),) * axis + (slice(start, start + n),)
        copy_into(_view(out, lambda s, key=key: s[key]), a)
        start += n
    return out


def stack(arrays, axis=0):
    return concatenate([expand_dims(a, axis) for a in arrays], axis)


def _is_basic(key):
    return all(k is None or k is Ellipsis or isinstance(k, (slice, int, np.integer)) for k in key)


def _flat_indices(shape, key):
    """Element indices (into a C-ordered array of ``shape``) that an advanced ``key`` selects."""
    host_key = tuple(to_host(k) if is_device_array(k) else k for k in key)
    return np.ascontiguousarray(np.arange(math.prod(shape), dtype=np.int64).reshape(shape)[host_key])


@cuda.jit
def _gather(src, idx, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = src[idx[i]]


@cuda.jit
def _scatter(dst, idx, src):
    i = cuda.grid(1)
    if i < idx.size:
        dst[idx[i]] = src[i]


def getitem(x, key):
    if _is_basic(key):
        if Ellipsis not in key:
            key = key + (Ellipsis,)  # all-integer keys give a 0-d view, not a scalar
        return _view(x, lambda s: s[key])
    idx = _flat_indices(x.shape, key)
    src = ascontiguous(x)
    out = empty(idx.shape, x.dtype)
    if idx.size:
        flat_out = reshape(out, (idx.size,))
        _gather[(idx.size + THREADS - 1) // THREADS, THREADS](reshape(src, (src.size,)), from_host(idx.reshape(-1)),
                                                             flat_out)
    return out


def setitem(x, key, value):
    if not is_device_array(value):
        value = from_host(np.asarray(value, dtype=x.dtype))
    if _is_basic(key):
        if Ellipsis not in key:
            key = key + (Ellipsis,)
        copy_into(_view(x, lambda s: s[key]), value)
        return
    if not x.is_c_contiguous():
        raise RuntimeError("advanced-index assignment needs a contiguous device tensor")
    idx = _flat_indices(x.shape, key)
    vals = ascontiguous(broadcast_to(value, idx.shape) if tuple(value.shape) != idx.shape else value)
    if idx.size:
        _scatter[(idx.size + THREADS - 1) // THREADS, THREADS](reshape(x, (x.size,)), from_host(idx.reshape(-1)),
                                                              reshape(astype(vals, x.dtype), (idx.size,)))


@cuda.jit
def _take3(src, idx, out, flag):
    """out[a, j, b] = src[a, idx[j], b]; an index outside [0, R) is skipped and recorded (kernels.cuda.asserts)."""
    a, j, b = cuda.grid(3)
    if a < out.shape[0] and j < out.shape[1] and b < out.shape[2]:
        r = idx[j]
        if 0 <= r < src.shape[1]:
            out[a, j, b] = src[a, r, b]
        else:
            record(flag, INDEX_OUT_OF_RANGE, r)


@cuda.jit
def _take_along3(src, idx, out):
    """out[a, j, b] = src[a, idx[a, j, b], b]."""
    a, j, b = cuda.grid(3)
    if a < out.shape[0] and j < out.shape[1] and b < out.shape[2]:
        out[a, j, b] = src[a, idx[a, j, b], b]


def _grid3(shape):
    t = (4, 8, 8)
    return tuple(max(1, (n + k - 1) // k) for n, k in zip(shape, t)), t


def _abr(shape, axis):
    return math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1:])


def take(x, index, axis=0):
    """``np.take`` along ``axis``, except that an index outside [0, n) is an error (raised at the host's next
    wait): a negative index is one for every caller (embedding, index_select, the resampling ops)."""
    A, R, B = _abr(x.shape, axis)
    index = ascontiguous(index) if is_device_array(index) else from_host(np.asarray(index, np.int64))
    n = index.size
    out = empty(tuple(x.shape[:axis]) + tuple(index.shape) + tuple(x.shape[axis + 1:]), x.dtype)
    if out.size:
        blocks, threads = _grid3((A, n, B))
        L.launch(_take3, blocks, threads, reshape(ascontiguous(x), (A, R, B)), reshape(index, (n,)),
                 reshape(out, (A, n, B)), asserts.flag())
        asserts.launched()
    return out


def take_along_axis(x, index, axis):
    A, R, B = _abr(x.shape, axis)
    J = index.shape[axis]
    out = empty(index.shape, x.dtype)
    if out.size:
        blocks, threads = _grid3((A, J, B))
        _take_along3[blocks, threads](reshape(ascontiguous(x), (A, R, B)), reshape(ascontiguous(index), (A, J, B)),
                                      reshape(out, (A, J, B)))
    return out


def holds_its_memory_alone(x):
    """Whether device array ``x`` is C-contiguous and the one holder of its memory: no view of it and no
    other array on it is alive (what lets ``.grad`` take a gradient over instead of copying it, as
    PyTorch's AccumulateGrad steals a gradient that nothing else holds). The caller's references to ``x``
    are its own to check. On a GPU the memory is a pool block; in the simulator, the host array."""
    if SIM:
        memory = x._ary
        return memory.base is None and sys.getrefcount(memory) <= 3 and memory.flags.c_contiguous
    memory = x.gpu_data
    return memory.__class__ is PoolMemory and memory._block is None and sys.getrefcount(memory) <= 3 and \
        x.is_c_contiguous()


def may_share_memory(a, b):
    if SIM:
        return np.may_share_memory(a._ary, b._ary)
    pa, pb = a.device_ctypes_pointer.value, b.device_ctypes_pointer.value
    return pa is not None and pb is not None and (pa < pb + max(b.nbytes, 1) and pb < pa + max(a.nbytes, 1))
