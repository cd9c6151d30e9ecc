"""Layer normalization over the last dim of (M, N) rows: the statistics and the result in one kernel, the
input's gradient in another, the weight's and bias's as column sums over blocks of rows.

Each row's math is written once, as the ``*_row`` functions below; the CPU loops here and the CUDA kernels
(kernels/cuda/norm.py, same names and signatures) apply them, one row per iteration or thread. Sums run in
float64 whatever the storage dtype (a float32 row of 4,096 values keeps its mean to float32 precision).
"""
import math

import numpy as np
from numba import njit, prange  # noqa: F401  (prange: used by the loops)

from . import config
from ._jit import twins


# ---------------------------------------------------------------- one row (shared with CUDA)
def layer_norm_row(x, w, b, eps, y, mean, rstd, i):
    """Row i: mean[i], rstd[i] = 1 / sqrt(var + eps) (biased variance, two passes) and y = (x - mean) rstd w + b."""
    N = x.shape[1]
    s = 0.0
    for j in range(N):
        s += x[i, j]
    mu = s / N
    v = 0.0
    for j in range(N):
        d = x[i, j] - mu
        v += d * d
    r = 1.0 / math.sqrt(v / N + eps)
    for j in range(N):
        y[i, j] = (x[i, j] - mu) * r * w[j] + b[j]
    mean[i] = mu
    rstd[i] = r


def layer_norm_row_vjp(g, x, w, mean, rstd, dx, i):
    """Row i of the input's gradient: rstd (g w - mean(g w) - xhat mean(g w xhat)), xhat = (x - mean) rstd."""
    N = x.shape[1]
    mu, r = mean[i], rstd[i]
    a = 0.0
    c = 0.0
    for j in range(N):
        gw = g[i, j] * w[j]
        a += gw
        c += gw * (x[i, j] - mu) * r
    a /= N
    c /= N
    for j in range(N):
        dx[i, j] = r * (g[i, j] * w[j] - a - (x[i, j] - mu) * r * c)


def layer_norm_rows_wb(g, x, mean, rstd, dw, db, lo, hi):
    """Rows lo:hi's part of the weight's gradient sum(g xhat) and the bias's sum(g), added into dw, db (float64)."""
    N = x.shape[1]
    for i in range(lo, hi):
        mu, r = mean[i], rstd[i]
        for j in range(N):
            dw[j] += g[i, j] * (x[i, j] - mu) * r
            db[j] += g[i, j]


_row = njit(error_model="numpy", fastmath=config.FOLD_FASTMATH, inline="always")  # (rows fold: see config)
_layer_norm_row, _layer_norm_row_vjp, _layer_norm_rows_wb = (
    _row(f) for f in (layer_norm_row, layer_norm_row_vjp, layer_norm_rows_wb))


# ---------------------------------------------------------------- CPU loops
def _layer_norm(x, w, b, eps, y, mean, rstd):
    for i in prange(x.shape[0]):
        _layer_norm_row(x, w, b, eps, y, mean, rstd, i)


def _layer_norm_vjp(g, x, w, mean, rstd, dx):
    for i in prange(x.shape[0]):
        _layer_norm_row_vjp(g, x, w, mean, rstd, dx, i)


def _layer_norm_wb(g, x, mean, rstd, dw, db):
    """dw[p], db[p]: block p of the rows' part (the caller sums the blocks)."""
    P, M = dw.shape[0], x.shape[0]
    for p in prange(P):
        _layer_norm_rows_wb(g, x, mean, rstd, dw[p], db[p], p * M // P, (p + 1) * M // P)


BLOCKS = 16  # row blocks of the weight's and bias's sums, each summed apart

_KERNELS = {f.__name__[1:]: twins(f, fastmath=config.FOLD_FASTMATH) for f in (_layer_norm, _layer_norm_vjp,
                                                                             _layer_norm_wb)}


def _kernel(name, size):
    return _KERNELS[name][size >= config.PARALLEL_THRESHOLD]


def layer_norm(x, w, b, eps):
    """(y, mean, rstd) of (M, N) rows ``x`` (C-contiguous), weight ``w`` and bias ``b`` (N,)."""
    M = x.shape[0]
    y = np.empty(x.shape, x.dtype)
    mean, rstd = np.empty(M, x.dtype), np.empty(M, x.dtype)
    _kernel("layer_norm", x.size)(x, w, b, x.dtype.type(eps), y, mean, rstd)
    return y, mean, rstd


def layer_norm_vjp(g, x, w, mean, rstd, weights):
    """(dx, dw, db) of layer_norm given the result's gradient ``g`` (M, N); dw and db None unless ``weights``."""
    dx = np.empty(x.shape, x.dtype)
    _kernel("layer_norm_vjp", x.size)(g, x, w, mean, rstd, dx)
    if not weights:
        return dx, None, None
    M, N = x.shape
    P = max(1, min(BLOCKS, M // 64)) if x.size >= config.PARALLEL_THRESHOLD else 1  # (not the thread count: values
    # that do not depend on it)
    dw, db = np.zeros((P, N)), np.zeros((P, N))
    _kernel("layer_norm_wb", x.size)(g, x, mean, rstd, dw, db)
    return dx, dw.sum(0).astype(x.dtype), db.sum(0).astype(x.dtype)
