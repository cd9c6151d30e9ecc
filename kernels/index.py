"""Scatter kernels: the backward of indexing adds repeated indices up instead of overwriting."""
import numpy as np

from ._jit import compiled


def _rows_add(out, idx, src):
    """out[idx[i], :] += src[i, :] (rows of a 2-D array; idx may repeat)."""
    n = out.shape[0]
    for i in range(idx.shape[0]):
        r = idx[i]
        if r < 0:
            r += n
        for j in range(out.shape[1]):
            out[r, j] += src[i, j]


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


rows_add = compiled(_rows_add)
one_hot = compiled(_one_hot)
scatter_add3 = compiled(_scatter_add3)


def index_add(out, key, values):
    """out[key] += values, accumulating repeated indices."""
    if len(key) == 1 and isinstance(key[0], np.ndarray) and key[0].dtype != bool and key[0].ndim == 1 \
            and out.ndim >= 1 and out.flags.c_contiguous:
        out2 = out.reshape(out.shape[0], -1)
        rows_add(out2, key[0].astype(np.int64, copy=False),
                 np.ascontiguousarray(np.broadcast_to(values, (key[0].shape[0],) + out.shape[1:])).reshape(key[0].shape[0], -1))
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
