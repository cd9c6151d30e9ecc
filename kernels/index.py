"""Scatter kernels: the backward of indexing adds repeated indices up instead of overwriting."""
import numpy as np
from numba import prange

from . import config
from ._jit import compiled, twins


def _along_add(out, idx, src):
    """out[a, idx[i], b] += src[a, i, b] over (A, N, B) and (A, M, B): an index along the middle dim (idx may
    repeat). Each a is a slab of its own, so the threads of the parallel build write apart."""
    n = out.shape[1]
    for a in prange(out.shape[0]):
        for i in range(idx.shape[0]):
            r = idx[i]
            if r < 0:
                r += n
            for b in range(out.shape[2]):
                out[a, r, b] += src[a, i, b]


def _one_hot(x, out):
    for i in range(x.shape[0]):
        out[i, x[i]] = 1


def _scatter_add3(out, idx, src):
    """out[a, idx[a, r, b], b] += src[a, r, b] over the (A, R, B) layout of a scatter along R."""
    A, R, B = idx.shape
    for a in range(A):
        for r in range(R):
            for b in range(B):
                out[a, idx[a, r, b], b] += src[a, r, b]


along_add = twins(_along_add)
one_hot = compiled(_one_hot)
scatter_add3 = compiled(_scatter_add3)


def index_add(out, key, values):
    """out[key] += values, accumulating repeated indices. A key of full slices then one index array (the
    backward of index_select, of a gather along one dim) adds along that dim in one loop, with no copy of
    ``values`` (which may be strided or broadcast) and no permute."""
    last = key[-1] if key else None
    if (last.__class__ is np.ndarray and last.dtype != bool and last.ndim == 1 and out.flags.c_contiguous
            and len(key) <= out.ndim and all(k.__class__ is slice and k == slice(None) for k in key[:-1])):
        d = len(key) - 1
        n = out.shape[d]
        # the loop does not check its indices, so one out of range (an index array changed in place since the
        # forward) would write outside ``out``: refused here with NumPy's add.at error
        if last.size and not -n <= last.min() <= last.max() < n:
            bad = last[(last < -n) | (last >= n)][0]
            raise IndexError("index %d is out of bounds for axis %d with size %d" % (bad, d, n))
        lead, rest = out.shape[:d], out.shape[d + 1:]
        A, B = int(np.prod(lead)), int(np.prod(rest))
        src = np.broadcast_to(values, lead + (last.shape[0],) + rest)
        src = src.reshape(A, last.shape[0], B)  # (a view unless the strides can't be merged)
        serial, parallel = along_add
        (parallel if A > 1 and out.size >= config.PARALLEL_THRESHOLD else serial)(
            out.reshape(A, out.shape[d], B), last.astype(np.int64, copy=False), src)
        return
    np.add.at(out, key, values)


def scatter_add(out, dim, index, src):
    """out.scatter_add_(dim, index, src) for C-contiguous ``out``; index no larger than src and out."""
    src = src[tuple(slice(0, n) for n in index.shape)]
    if all(index.shape[k] == out.shape[k] for k in range(out.ndim) if k != dim):
        A = int(np.prod(out.shape[:dim]))
        B = int(np.prod(out.shape[dim + 1:]))
        scatter_add3(out.reshape(A, out.shape[dim], B), np.ascontiguousarray(index).reshape(A, index.shape[dim], B),
                     np.ascontiguousarray(src).reshape(A, index.shape[dim], B))
        return
    grid = list(np.ix_(*[np.arange(n) for n in index.shape]))
    grid[dim] = index
    np.add.at(out, tuple(grid), src)
