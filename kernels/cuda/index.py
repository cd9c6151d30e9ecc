"""CUDA twins of kernels/index.py: scatter kernels. Repeated indices add up, through atomics.

``out`` is always written in place and must be C-contiguous for ``index_add``; the atomic adds
support float32/float64/int32/int64 (and their unsigned kinds), the dtypes gradients and counts
take.
"""
import math

import numpy as np
from numba import cuda

from . import _launch as L
from . import elementwise as E

_ATOMIC_KINDS = ("float32", "float64", "int32", "int64", "uint32", "uint64")


@L.jit
def _along_add(out, idx, src):
    """out[a, idx[i], b] += src[a, i, b] over (A, N, B) and (A, M, B): an index along the middle dim (idx may
    repeat or be negative)."""
    count, n, cols = out.shape
    m = idx.shape[0]
    for e in range(cuda.grid(1), count * m * cols, cuda.gridsize(1)):
        a = e // (m * cols)
        i = e // cols % m
        j = e % cols
        r = idx[i]
        if r < 0:
            r += n
        if 0 <= r < n:  # an index the forward recorded as out of range (kernels.cuda.asserts) is skipped
            cuda.atomic.add(out, (a, r, j), src[a, i, j])


@L.jit
def _flat_add(out, pos, src):
    """out[pos[i]] += src[i] over flat arrays."""
    for i in range(cuda.grid(1), pos.shape[0], cuda.gridsize(1)):
        cuda.atomic.add(out, pos[i], src[i])


@L.jit
def _one_hot(x, out):
    for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        out[i, x[i]] = 1


# out[..., index[c], ...] += src[c] at every coordinate c of index (index no larger than src and
# out; along ``dim`` the value of index replaces the coordinate). Generated per (ndim, dim).
_SCATTER = """
def {name}(out, index, src, shape):
    for i in range(cuda.grid(1), index.size, cuda.gridsize(1)):
{coords}        cuda.atomic.add(out, ({target}), src[{source}])
"""

_scatter_kernels = {}


def _scatter_kernel(ndim, dim):
    k = _scatter_kernels.get((ndim, dim))
    if k is None:
        coords = ["c%d" % d for d in range(ndim)]
        target = ["index[%s]" % ", ".join(coords) if d == dim else c for d, c in enumerate(coords)]
        k = _scatter_kernels[(ndim, dim)] = L.generate(
            _SCATTER, "_scatter_add_n%d_d%d" % (ndim, dim), globals(), __file__, coords=E.coords_source(ndim),
            target=", ".join(target), source=", ".join(coords))
    return k


def _check_atomic(dtype, what):
    if np.dtype(dtype).name not in _ATOMIC_KINDS:
        raise TypeError("%s on a CUDA device supports %s, not %s" % (what, ", ".join(_ATOMIC_KINDS), dtype))


def _on_device(a):
    return a if L.is_device_array(a) else L.to_device(np.ascontiguousarray(a))


def _dense(values, shape, dtype):
    """``values`` (an array broadcasting to ``shape``, or a scalar) as a C-contiguous device array."""
    if L.is_array(values) and tuple(values.shape) == shape and L.is_c_contiguous(values):
        return values
    return E.run("identity", dtype, values, out=L.empty(shape, dtype))


def _positions(shape, key):
    """Flat (C-order) offsets of ``x[key]`` for an array ``x`` of ``shape``: NumPy's own indexing
    rules (ints, slices, None, Ellipsis, integer and boolean arrays) applied to one broadcast
    coordinate grid per dim, so the work and memory are those of the indexed result."""
    key = tuple(k.copy_to_host() if L.is_device_array(k) else k for k in key)
    pos, stride = np.broadcast_to(np.int64(0), shape)[key], 1
    for d in range(len(shape) - 1, -1, -1):
        grid = np.arange(shape[d], dtype=np.int64).reshape((-1,) + (1,) * (len(shape) - 1 - d))
        pos = pos + np.broadcast_to(grid, shape)[key] * stride
        stride *= shape[d]
    return pos


def index_add(out, key, values):
    """out[key] += values, accumulating repeated indices.

    A key of full slices then one 1-D integer array (on the device or the host) runs as one scatter kernel
    along that dim with no host work. Any other NumPy-style key (ints, slices, None, Ellipsis, integer and
    boolean arrays) is resolved on the host into flat offsets, then scattered on the device; its
    device-resident index arrays are copied to the host for that.
    """
    _check_atomic(out.dtype, "index_add")
    if not L.is_c_contiguous(out):
        raise ValueError("index_add needs a C-contiguous output array")
    last = key[-1] if key else None
    if (getattr(last, "ndim", 0) == 1 and last.dtype.kind in "iu" and len(key) <= out.ndim
            and all(k.__class__ is slice and k == slice(None) for k in key[:-1])):
        d = len(key) - 1
        lead, rest, m = tuple(out.shape[:d]), tuple(out.shape[d + 1:]), last.shape[0]
        count, cols = math.prod(lead), math.prod(rest)
        if count and m and cols:
            vals = _dense(values, lead + (m,) + rest, out.dtype).reshape(count, m, cols)
            L.launch(_along_add, L.blocks_for(count * m * cols), L.THREADS, out.reshape(count, out.shape[d], cols),
                     _on_device(last), vals)
        return
    pos = _positions(tuple(out.shape), key)
    if pos.size:
        vals = _dense(values, pos.shape, out.dtype).reshape(pos.size)
        L.launch(_flat_add, L.blocks_for(pos.size), L.THREADS, out.reshape(out.size), _on_device(pos.reshape(-1)), vals)


def scatter_add(out, dim, index, src):
    """out.scatter_add_(dim, index, src): ``index`` no larger than ``src`` and ``out`` (any strides)."""
    _check_atomic(out.dtype, "scatter_add")
    if index.size:
        L.launch(_scatter_kernel(index.ndim, dim), L.blocks_for(index.size), L.THREADS, out, index, src,
                 tuple(index.shape))


def one_hot(x, out):
    """out[i, x[i]] = 1 for a 1-D ``x`` of class indices and a zero-filled ``out``."""
    if x.shape[0]:
        L.launch(_one_hot, L.blocks_for(x.shape[0]), L.THREADS, x, out)
