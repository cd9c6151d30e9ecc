"""CUDA twins of kernels/attention.py: attention's masked, scaled softmax and its VJP, one thread per
score row (the GEMMs around them are kernels/cuda/matmul.py's)."""
import math

from numba import cuda

from . import _launch as L
from .array import ascontiguous, broadcast_to


@L.jit
def _attention_softmax(s, mask, scale, causal, p):
    N, Lq, S = s.shape
    has_mask = mask.shape[1] != 0
    per_row = mask.shape[0] > 1
    for t in range(cuda.grid(1), N * Lq, cuda.gridsize(1)):
        n, l = t // Lq, t % Lq
        mn = n if per_row else 0
        end = min(l + 1, S) if causal else S
        m = -math.inf
        for j in range(end):
            x = s[n, l, j] * scale
            if has_mask:
                x += mask[mn, l, j]
            p[n, l, j] = x
            m = max(m, x)
        if m == -math.inf:
            for j in range(S):
                p[n, l, j] = 0.0
            continue
        total = 0.0
        for j in range(end):
            e = math.exp(p[n, l, j] - m)
            p[n, l, j] = e
            total += e
        inv = 1.0 / total
        for j in range(end):
            p[n, l, j] *= inv
        for j in range(end, S):
            p[n, l, j] = 0.0


@L.jit
def _attention_softmax_vjp(dp, p, scale, ds):
    N, Lq, S = p.shape
    for t in range(cuda.grid(1), N * Lq, cuda.gridsize(1)):
        n, l = t // Lq, t % Lq
        total = 0.0
        for j in range(S):
            total += dp[n, l, j] * p[n, l, j]
        for j in range(S):
            ds[n, l, j] = scale * p[n, l, j] * (dp[n, l, j] - total)


def rows(a):
    """``a`` (..., L, S) as C-contiguous (N, L, S)."""
    shape = tuple(a.shape)
    a = a if L.is_c_contiguous(a) else ascontiguous(a)
    return a.reshape(math.prod(shape[:-2]), shape[-2], shape[-1])


def mask_rows(mask, shape):
    if tuple(mask.shape) == tuple(shape) or (tuple(mask.shape[-2:]) == tuple(shape[-2:])
                                             and math.prod(mask.shape[:-2]) == 1):
        return rows(mask)
    return rows(broadcast_to(mask, tuple(shape)))


def _launch_rows(kernel, n_rows, *args):
    if n_rows:
        L.launch(kernel, L.blocks_for(n_rows), L.THREADS, *args)


def attention_softmax(s, mask, scale, causal):
    s3 = rows(s)
    m3 = L.empty((1, 0, 0), s.dtype) if mask is None else mask_rows(mask, tuple(s.shape))
    p = L.empty(tuple(s3.shape), s.dtype)
    _launch_rows(_attention_softmax, s3.shape[0] * s3.shape[1], s3, m3, s.dtype.type(scale), causal, p)
    return p.reshape(tuple(s.shape))


def attention_softmax_vjp(dp, p, scale):
    p3 = rows(p)
    ds = L.empty(tuple(p3.shape), p.dtype)
    _launch_rows(_attention_softmax_vjp, p3.shape[0] * p3.shape[1], rows(dp), p3, p.dtype.type(scale), ds)
    return ds.reshape(tuple(p.shape))

