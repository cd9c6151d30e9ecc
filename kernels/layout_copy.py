"""Copies of transposed matrices, in tiles.

NumPy copies a transposed array element by element in the destination's order, reading the source a row
apart each time: a matrix of order 256 (float64) takes 150 us, a third of a tiled copy's speed, and one of
order 1024 3.4 ms. Gradients arrive transposed wherever a graph used ``.mT`` or a matmul's operand was a
transpose, so adding them, making them contiguous or handing them to LAPACK goes through here.
"""
import numpy as np
from numba import prange

from ._jit import twins

TRANSPOSABLE = frozenset(map(np.dtype, ("float32", "float64", "complex64", "complex128")))
TILE = 8  # (8 x 8 doubles: one cache line a row of a tile)
SMALLEST = 64 * 64  # matrices of fewer elements: NumPy's copy (all in cache)
PARALLEL = 1 << 18  # elements from which the copy runs on numba's threads (order 256: 57 us on one, 66 on two)


def _transpose_copy(a, out):
    """out[b] = a[b]^T in tiles of TILE x TILE, a prange over the batch's bands of TILE rows."""
    m, n = a.shape[1], a.shape[2]
    bands = -(-m // TILE)
    for q in prange(a.shape[0] * bands):
        b, i0 = q // bands, q % bands * TILE
        i1 = min(i0 + TILE, m)
        for j0 in range(0, n, TILE):
            for j in range(j0, min(j0 + TILE, n)):
                for i in range(i0, i1):
                    out[b, j, i] = a[b, i, j]


_TRANSPOSE_COPY = twins(_transpose_copy)


def transposed(a):
    """Whether ``a`` is a batch of transposed C-contiguous matrices large enough for ``into``: its last two dims
    swapped are C-contiguous (and it is not C-contiguous itself)."""
    return a.ndim >= 2 and not a.flags.c_contiguous and a.swapaxes(-1, -2).flags.c_contiguous and \
        a.shape[-1] * a.shape[-2] >= SMALLEST and a.dtype in TRANSPOSABLE


def into(a, out):
    """out[..., i, j] = a[..., j, i] for C-contiguous ``a`` (..., m, n) and ``out`` (..., n, m) of one batch."""
    m, n = a.shape[-2:]
    count = a.size // max(m * n, 1)
    _TRANSPOSE_COPY[a.size >= PARALLEL](a.reshape((count, m, n)), out.reshape((count, n, m)))
    return out


def copy(a):
    """A C-contiguous copy of ``a``: tiled where it is a batch of transposed matrices (``transposed``)."""
    if transposed(a):
        return into(a.swapaxes(-1, -2), np.empty(a.shape, a.dtype))
    return a.copy()


def flat(a):
    """``a`` as a flat C-order array: a view where it is C-contiguous, else a copy (``copy``)."""
    return a.reshape(-1) if a.flags.c_contiguous else copy(a).reshape(-1)
