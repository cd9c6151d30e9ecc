"""Attention's softmax(scale * Q K^T + mask) and its VJP, each one pass over the score rows.

The GEMMs (Q K^T, P V and those of the backward) run in BLAS; these kernels take the scores
``s`` as (N, L, S) rows. The mask is additive (a boolean mask is turned into 0 / -inf before it
gets here) and is (1, L, S) or (N, L, S), or absent; ``causal`` masks key s > query l (PyTorch's
top-left alignment). A row with every key masked gives zeros, as PyTorch's CPU kernel does.
The CUDA twins (kernels/cuda/attention.py) have the same names and signatures and run the same row
functions.
"""
import math

import numpy as np
from numba import njit, prange  # noqa: F401  (prange: used by the loops)

from . import config
from ._jit import twins
from .vmath import vexp


# ---------------------------------------------------------------- one score row (shared with CUDA)
def softmax_row(s, mask, scale, causal, p, n, l):
    """Row (n, l) of p = softmax(scale * s + mask), the keys after l masked where ``causal``."""
    S = s.shape[2]
    has_mask = mask.shape[1] != 0
    mn = n if mask.shape[0] > 1 else 0
    end = min(l + 1, S) if causal else S
    m = -math.inf
    for j in range(end):
        x = s[n, l, j] * scale
        if has_mask:
            x += mask[mn, l, j]
        p[n, l, j] = x
        m = max(m, x)
    if m == -math.inf:  # every key masked: zeros
        for j in range(S):
            p[n, l, j] = 0.0
        return
    total = 0.0
    for j in range(end):
        e = vexp(p[n, l, j] - m)
        p[n, l, j] = e
        total += e
    inv = 1.0 / total
    for j in range(end):
        p[n, l, j] *= inv
    for j in range(end, S):
        p[n, l, j] = 0.0


def softmax_row_vjp(dp, p, scale, ds, n, l):
    """Row (n, l) of ds = scale * p * (dp - sum(dp * p)): the gradient of the scores."""
    total = 0.0
    for j in range(p.shape[2]):
        total += dp[n, l, j] * p[n, l, j]
    for j in range(p.shape[2]):
        ds[n, l, j] = scale * p[n, l, j] * (dp[n, l, j] - total)


# CPU builds, inlined into the loops (CUDA compiles the same functions as device functions)
_softmax_row = njit(inline="always")(softmax_row)
_softmax_row_vjp = njit(inline="always")(softmax_row_vjp)


# ---------------------------------------------------------------- CPU loops: one row each
def _attention_softmax(s, mask, scale, causal, p):
    N, L = s.shape[0], s.shape[1]
    for t in prange(N * L):
        _softmax_row(s, mask, scale, causal, p, t // L, t % L)


def _attention_softmax_vjp(dp, p, scale, ds):
    N, L = p.shape[0], p.shape[1]
    for t in prange(N * L):
        _softmax_row_vjp(dp, p, scale, ds, t // L, t % L)


_KERNELS = {f.__name__[1:]: twins(f, fastmath=config.FOLD_FASTMATH)
            for f in (_attention_softmax, _attention_softmax_vjp)}


def kernel(name, size):
    return _KERNELS[name][size >= config.PARALLEL_THRESHOLD]


def rows(a):
    """``a`` (..., L, S) as C-contiguous (N, L, S)."""
    L, S = a.shape[-2:]
    return np.ascontiguousarray(a).reshape(-1, L, S)


def mask_rows(mask, shape):
    """An additive mask that broadcasts to scores of ``shape`` as (1, L, S) or (N, L, S) rows."""
    if tuple(mask.shape) == tuple(shape):
        return rows(mask)
    if mask.shape[-2:] == shape[-2:] and math.prod(mask.shape[:-2]) == 1:
        return rows(mask)
    return rows(np.broadcast_to(mask, shape))


def attention_softmax(s, mask, scale, causal):
    """softmax(scale * s + mask) over the last axis of scores ``s``; ``mask`` None or broadcasting to ``s``."""
    s3 = rows(s)
    m3 = np.empty((1, 0, 0), s.dtype) if mask is None else mask_rows(mask, s.shape)
    p = np.empty(s3.shape, s.dtype)
    kernel("attention_softmax", p.size)(s3, m3, scale, causal, p)
    return p.reshape(s.shape)


def attention_softmax_vjp(dp, p, scale):
    ds = np.empty(rows(p).shape, p.dtype)
    kernel("attention_softmax_vjp", ds.size)(rows(dp), rows(p), scale, ds)
    return ds.reshape(p.shape)
