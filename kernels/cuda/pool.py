"""CUDA twins of kernels/pool.py: max pooling and window averages, with their gradients, over numba device arrays.

Max pooling saves the flat h*W+w argmax of each window, and its backward scatters with atomic adds
(windows may overlap). The window average's adjoint is a gather, over host-computed ranges of the
windows that cover each image row and column. Every kernel is a grid-stride loop over its output
and indexes 4-D arrays of any strides. Geometry arrays of the window averages are copied to the
device once per distinct geometry.
"""
import hashlib
import inspect

import numpy as np
from numba import cuda

from . import _launch as L
from .. import pool as KP
from .conv import _launch, _pair, _unravel_nchw
from .elementwise import run


# ---------------------------------------------------------------- kernels
_max_pool_step = L.device_jit(KP.max_pool_step.py_func)


def _max_pool(x, k, stride, pad, dil, out, idx):
    """Max over each window (NaN wins, as in PyTorch); idx is the flat h*W+w of the max."""
    H, W = x.shape[2], x.shape[3]
    C, oh, ow = out.shape[1], out.shape[2], out.shape[3]
    for e in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        n, c, i, j = _unravel_nchw(e, C, oh, ow)
        best = x[n, c, 0, 0]  # typed like x; replaced by the window's first element (bi < 0)
        bi = -1
        for ki in range(k[0]):
            h = i * stride[0] - pad[0] + ki * dil[0]
            if h < 0 or h >= H:
                continue
            for kj in range(k[1]):
                w = j * stride[1] - pad[1] + kj * dil[1]
                if w < 0 or w >= W:
                    continue
                best, bi = _max_pool_step(best, bi, x[n, c, h, w], h * W + w)
        out[n, c, i, j] = best
        idx[n, c, i, j] = bi


# the step is compiled into the cached kernel: its source names the cache entry
_max_pool = L.jit(_max_pool, tag=hashlib.sha1(inspect.getsource(KP.max_pool_step.py_func).encode()).hexdigest()[:10])


@L.jit
def _max_pool_backward(g, idx, gx):
    """gx[n, c, idx // W, idx % W] += g (gx is zero on entry; windows may share a maximum)."""
    W = gx.shape[3]
    C, oh, ow = g.shape[1], g.shape[2], g.shape[3]
    for e in range(cuda.grid(1), g.size, cuda.gridsize(1)):
        n, c, i, j = _unravel_nchw(e, C, oh, ow)
        p = idx[n, c, i, j]
        cuda.atomic.add(gx, (n, c, p // W, p % W), g[n, c, i, j])


@L.jit
def _window_avg(x, spans, div, zero, out):
    """out[n, c, i, j] = sum of x[n, c, hs[i]:he[i], ws[j]:we[j]] / div[i, j]; spans = hs|he|ws|we."""
    C, oh, ow = out.shape[1], out.shape[2], out.shape[3]
    for e in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        n, c, i, j = _unravel_nchw(e, C, oh, ow)
        s = zero
        for h in range(spans[i], spans[oh + i]):
            for w in range(spans[2 * oh + j], spans[2 * oh + ow + j]):
                s += x[n, c, h, w]
        out[n, c, i, j] = s / div[i, j]


@L.jit
def _window_avg_backward(g, cover, div, zero, gx):
    """The adjoint of _window_avg: gx[n, c, h, w] = sum of g[n, c, i, j] / div[i, j] over the
    windows that hold (h, w): rows i in [i0[h], i1[h]), columns j in [j0[w], j1[w]); cover = i0|i1|j0|j1."""
    C, H, W = gx.shape[1], gx.shape[2], gx.shape[3]
    for e in range(cuda.grid(1), gx.size, cuda.gridsize(1)):
        n, c, h, w = _unravel_nchw(e, C, H, W)
        s = zero
        for i in range(cover[h], cover[H + h]):
            for j in range(cover[2 * H + w], cover[2 * H + W + w]):
                s += g[n, c, i, j] / div[i, j]
        gx[n, c, h, w] = s


# ---------------------------------------------------------------- helpers
def _zeros(shape, dtype):
    dtype = np.dtype(dtype)
    return run("identity", dtype, dtype.type(0), out=L.empty(shape, dtype))


_GEOMETRY = {}  # host geometry array -> its device copy, by content (training loops repeat a few)


def _geometry(host):
    key = (host.dtype.str, host.shape, host.tobytes())
    d = _GEOMETRY.get(key)
    if d is None:
        if len(_GEOMETRY) >= 256:
            _GEOMETRY.clear()
        d = _GEOMETRY[key] = L.to_device(np.ascontiguousarray(host))
    return d


def _window_arrays(windows, dtype):
    """(hs|he|ws|we, div in ``dtype``) on the device."""
    hs, he, ws, we, div = windows
    return _geometry(np.concatenate([hs, he, ws, we]).astype(np.int64)), _geometry(div.astype(dtype))


def _cover(starts, ends, size):
    """For each image position p: the range of windows [first, end) with start <= p < end (both
    bounds are non-decreasing in the window index, so the covering windows are consecutive)."""
    p = np.arange(size)
    return np.searchsorted(ends, p, side="right"), np.searchsorted(starts, p, side="right")


def max_pool2d(x, k, stride, padding, dilation, out_hw):
    """(values, flat h*W+w indices of the maxima) of x[N, C, H, W]."""
    shape = tuple(x.shape[:2]) + _pair(out_hw)
    out = L.empty(shape, x.dtype)
    idx = L.empty(shape, np.int64)
    _launch(_max_pool, out.size, x, _pair(k), _pair(stride), _pair(padding), _pair(dilation), out, idx)
    return out, idx


def max_pool2d_backward(g, idx, in_hw, two_by_two=False):
    """Gradient of max_pool2d: g[N, C, oh, ow] sent to the positions ``idx`` of the maxima (one thread
    per gradient element whatever the windows: ``two_by_two`` changes nothing here)."""
    gx = _zeros(tuple(g.shape[:2]) + _pair(in_hw), g.dtype)
    _launch(_max_pool_backward, g.size, g, idx, gx)
    return gx


def window_avg(x, windows):
    """Average pooling over explicit windows: ``windows`` = (hs, he, ws, we, div) (see avg_pool_windows)."""
    spans, div = _window_arrays(windows, x.dtype)
    out = L.empty(tuple(x.shape[:2]) + div.shape, x.dtype)
    _launch(_window_avg, out.size, x, spans, div, x.dtype.type(0), out)
    return out


def window_avg_backward(g, windows, in_hw):
    hs, he, ws, we, div = windows
    H, W = _pair(in_hw)
    cover = _geometry(np.concatenate(_cover(hs, he, H) + _cover(ws, we, W)).astype(np.int64))
    gx = L.empty(tuple(g.shape[:2]) + (H, W), g.dtype)
    _launch(_window_avg_backward, gx.size, g, cover, _geometry(div.astype(g.dtype)), g.dtype.type(0), gx)
    return gx
