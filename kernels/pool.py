"""Pooling kernels over NCHW arrays: max pooling (general and 2x2) and window averages, with their gradients.

Every kernel loops directly over the (N*C) planes. Average pooling (plain and adaptive) runs over
explicit windows (avg_pool_windows, adaptive_windows); max pooling saves the flat h*W+w index of
each window's maximum, which its backward scatters into.
"""
import math

import numpy as np
from numba import njit, prange

from . import config
from ._jit import twins
from .conv import _ix


@njit(error_model="numpy", fastmath=config.FOLD_FASTMATH)
def max_pool_step(best, bi, v, i):
    """A window's (max, flat index) after its element v at i (bi < 0: none yet). A NaN wins, the
    last one met, as in PyTorch. kernels/cuda/pool.py compiles the same function."""
    if bi < 0 or v > best or v != v:
        return v, i
    return best, bi


def _max_pool(x, kh, kw, sh, sw, ph, pw, dh, dw, out, idx):
    """Max over each window (NaN wins, as in PyTorch); idx is the flat h*W+w of the max."""
    N, C, H, W = x.shape
    oh, ow = out.shape[2], out.shape[3]
    for t in prange(N * C):
        n, c = t // C, t % C
        for i in range(oh):
            h0 = i * sh - ph
            for j in range(ow):
                w0 = j * sw - pw
                best = -math.inf
                bi = -1
                for ki in range(kh):
                    h = h0 + ki * dh
                    if h < 0 or h >= H:
                        continue
                    for kj in range(kw):
                        w = w0 + kj * dw
                        if w < 0 or w >= W:
                            continue
                        best, bi = max_pool_step(best, bi, x[n, c, h, w], h * W + w)
                out[n, c, i, j] = best
                idx[n, c, i, j] = bi


def _max_pool_2x2(x, out, idx):
    """_max_pool for 2x2 windows at stride 2 without padding or dilation (the common pooling layer),
    written so that it vectorizes: the four elements a, b, c, d of a window are taken in the same
    order with the same rule as max_pool_step, its choices kept as 0/1 integers (a select on the
    loaded values compiles to branches, which mispredict half the time on real data), and the max
    is np.maximum's (NaN-propagating; a tie keeps the earlier element, as the step does; of two
    NaNs it keeps the earlier where the step takes the later: NaN either way)."""
    N, C, H, W = x.shape
    oh, ow = out.shape[2], out.shape[3]
    for t in prange(N * C):
        n, c = t // C, t % C
        xs, os, ids = x[n, c], out[n, c], idx[n, c]
        for i in range(oh):
            top, bottom, orow, irow = xs[2 * i], xs[2 * i + 1], os[i], ids[i]
            base = 2 * i * W
            for j in range(ow):
                w = _ix(2 * j)
                a, b, u, v = top[w], top[w + _ix(1)], bottom[w], bottom[w + _ix(1)]
                take_b = (b > a) | (b != b)
                m = np.maximum(a, b)
                take_u = (u > m) | (u != u)
                m = np.maximum(m, u)
                take_v = (v > m) | (v != v)
                orow[_ix(j)] = np.maximum(m, v)
                k = take_b * 1  # the offset of the max in the window: 0, 1, W or W + 1
                k += take_u * (W - k)
                k += take_v * (W + 1 - k)
                irow[_ix(j)] = base + 2 * j + k


def _max_pool_2x2_backward(g, idx, gx):
    """The gradient of _max_pool_2x2: windows do not overlap, so each plane is zeroed and g stored
    at the maxima (no read-modify-write)."""
    N, C, oh, ow = g.shape
    H, W = gx.shape[2], gx.shape[3]
    for t in prange(N * C):
        n, c = t // C, t % C
        gs, ids, plane = g[n, c], idx[n, c], gx[n, c].reshape(H * W)
        for p in range(H * W):
            plane[_ix(p)] = 0
        for i in range(oh):
            grow, irow = gs[i], ids[i]
            for j in range(ow):
                plane[_ix(irow[_ix(j)])] = grow[_ix(j)]


def _max_pool_backward(g, idx, gx):
    """gx[n, c, idx] += g (gx is (N, C, H*W), zero on entry)."""
    N, C, L = g.shape
    for t in prange(N * C):
        n, c = t // C, t % C
        gs, ids, plane = g[n, c], idx[n, c], gx[n, c]
        for k in range(L):
            plane[_ix(ids[_ix(k)])] += gs[_ix(k)]


def _window_avg(x, hs, he, ws, we, div, out):
    """out[n, c, i, j] = sum of x[n, c, hs[i]:he[i], ws[j]:we[j]] / div[i, j]."""
    N, C = x.shape[0], x.shape[1]
    oh, ow = out.shape[2], out.shape[3]
    for t in prange(N * C):
        n, c = t // C, t % C
        for i in range(oh):
            for j in range(ow):
                s = 0.0
                for h in range(hs[i], he[i]):
                    for w in range(ws[j], we[j]):
                        s += x[n, c, h, w]
                out[n, c, i, j] = s / div[i, j]


def _window_avg_backward(g, hs, he, ws, we, div, gx):
    """The adjoint of _window_avg: each window gets g / div added (gx is zero on entry)."""
    N, C = g.shape[0], g.shape[1]
    oh, ow = g.shape[2], g.shape[3]
    for t in prange(N * C):
        n, c = t // C, t % C
        for i in range(oh):
            for j in range(ow):
                v = g[n, c, i, j] / div[i, j]
                for h in range(hs[i], he[i]):
                    for w in range(ws[j], we[j]):
                        gx[n, c, h, w] += v


_KERNELS = {f.__name__[1:]: twins(f, fastmath=config.FOLD_FASTMATH)
            for f in (_max_pool, _max_pool_backward, _max_pool_2x2, _max_pool_2x2_backward, _window_avg,
                      _window_avg_backward)}


def kernel(name, size):
    """The serial or parallel build of kernel ``name`` for work on ``size`` elements."""
    return _KERNELS[name][size >= config.PARALLEL_THRESHOLD]


# ---------------------------------------------------------------- wrappers
def max_pool2d(x, k, stride, padding, dilation, out_hw):
    """(values, flat h*W+w indices of the maxima) of x[N, C, H, W]."""
    N, C = x.shape[:2]
    out = np.empty((N, C) + tuple(out_hw), x.dtype)
    idx = np.empty((N, C) + tuple(out_hw), np.int64)
    x = np.ascontiguousarray(x)
    if is_2x2(k, stride, padding, dilation):
        kernel("max_pool_2x2", x.size)(x, out, idx)
        return out, idx
    kernel("max_pool", x.size)(x, k[0], k[1], stride[0], stride[1], padding[0], padding[1], dilation[0], dilation[1],
                               out, idx)
    return out, idx


def is_2x2(k, stride, padding, dilation):
    """Whether a max pooling has 2x2 windows at stride 2, without padding or dilation."""
    return tuple(k) == (2, 2) and tuple(stride) == (2, 2) and not any(padding) and tuple(dilation) == (1, 1)


def max_pool2d_backward(g, idx, in_hw, two_by_two=False):
    """Gradient of max_pool2d: g[N, C, oh, ow] sent to the positions ``idx`` of the maxima;
    ``two_by_two``: idx comes from 2x2 windows at stride 2 (see is_2x2), each window written once."""
    N, C = g.shape[:2]
    if two_by_two:
        gx = np.empty((N, C) + tuple(in_hw), g.dtype)
        kernel("max_pool_2x2_backward", gx.size)(np.ascontiguousarray(g), np.ascontiguousarray(idx), gx)
        return gx
    gx = np.zeros((N, C, in_hw[0] * in_hw[1]), g.dtype)
    kernel("max_pool_backward", g.size)(np.ascontiguousarray(g).reshape(N, C, -1),
                                        np.ascontiguousarray(idx).reshape(N, C, -1), gx)
    return gx.reshape(N, C, in_hw[0], in_hw[1])


def window_avg(x, windows):
    """Average pooling over explicit windows: ``windows`` = (hs, he, ws, we, div) (see pool_windows)."""
    hs, he, ws, we, div = windows
    N, C = x.shape[:2]
    out = np.empty((N, C, len(hs), len(ws)), x.dtype)
    kernel("window_avg", x.size)(np.ascontiguousarray(x), hs, he, ws, we, div.astype(x.dtype), out)
    return out


def window_avg_backward(g, windows, in_hw):
    hs, he, ws, we, div = windows
    N, C = g.shape[:2]
    gx = np.zeros((N, C) + tuple(in_hw), g.dtype)
    kernel("window_avg_backward", gx.size)(np.ascontiguousarray(g), hs, he, ws, we, div.astype(g.dtype), gx)
    return gx


def avg_pool_windows(in_hw, k, stride, padding, out_hw, count_include_pad, divisor_override):
    """Windows of avg_pool2d: clipped to the input, divisor per PyTorch's rule."""
    spans = []
    for d in range(2):
        start = np.arange(out_hw[d], dtype=np.int64) * stride[d] - padding[d]
        end = np.minimum(start + k[d], in_hw[d] + padding[d])
        size = end - start  # window within the padded input
        spans.append((np.maximum(start, 0), np.minimum(end, in_hw[d]), size))
    (hs, he, ph), (ws, we, pw) = spans
    if divisor_override:
        div = np.full((len(hs), len(ws)), float(divisor_override))
    elif count_include_pad:
        div = np.outer(ph, pw).astype(np.float64)
    else:
        div = np.outer(he - hs, we - ws).astype(np.float64)
    return hs, he, ws, we, div


def adaptive_windows(in_hw, out_hw):
    """Windows of adaptive_avg_pool2d: [floor(i*H/oh), ceil((i+1)*H/oh))."""
    spans = []
    for d in range(2):
        i = np.arange(out_hw[d], dtype=np.int64)
        spans.append(((i * in_hw[d]) // out_hw[d], -((-(i + 1) * in_hw[d]) // out_hw[d])))
    (hs, he), (ws, we) = spans
    return hs, he, ws, we, np.outer(he - hs, we - ws).astype(np.float64)
