"""CUDA twins of kernels/conv.py: the same functions and signatures, over numba device arrays.

Convolution is the CPU's im2col + GEMM with the same column layout, ``cols[C*kh*kw, N*oh*ow]``,
and its GEMMs go to matmul.py's tiled kernel (batched over groups). im2col writes one column
entry per thread. col2im is a gather: one thread per image element sums the column entries
that fold onto it, so overlapping windows need no atomics and the sum does not depend on
thread timing. Max pooling saves the flat h*W+w argmax of each window, and its backward
scatters with atomic adds (windows may overlap). The window average's adjoint is a gather too,
over host-computed ranges of the windows that cover each image row and column.

Every kernel is a grid-stride loop over its output and indexes 4-D arrays of any strides.
Geometry arrays of the window averages are copied to the device once per distinct geometry.
"""
import hashlib
import inspect

import numpy as np
from numba import cuda

from . import _launch as L
from .. import conv as KC
from .array import reshape, transpose
from .elementwise import run
from .matmul import matmul


# ---------------------------------------------------------------- kernels
@L.device_jit
def _unravel_nchw(e, C, H, W):
    """The (n, c, h, w) of flat index ``e`` into a C-ordered (N, C, H, W) array."""
    return e // (W * H * C), (e // (W * H)) % C, (e // W) % H, e % W


@L.jit
def _im2col(x, k, stride, pad, dil, out_hw, cols):
    """cols[(c*kh + ki)*kw + kj, (n*oh + i)*ow + j] = x[n, c, i*sh - ph + ki*dh, j*sw - pw + kj*dw], 0 off the image."""
    H, W = x.shape[2], x.shape[3]
    kh, kw = k
    oh, ow = out_hw
    width = cols.shape[1]
    for e in range(cuda.grid(1), cols.size, cuda.gridsize(1)):
        row = e // width
        col = e % width
        c = row // (kh * kw)
        ki = (row // kw) % kh
        kj = row % kw
        n = col // (oh * ow)
        i = (col // ow) % oh
        j = col % ow
        h = i * stride[0] - pad[0] + ki * dil[0]
        w = j * stride[1] - pad[1] + kj * dil[1]
        if 0 <= h < H and 0 <= w < W:
            cols[row, col] = x[n, c, h, w]
        else:
            cols[row, col] = 0


@L.jit
def _col2im(cols, k, stride, pad, dil, out_hw, zero, x):
    """x[n, c, h, w] = the sum of the column entries that im2col would have read from (h, w)."""
    C, H, W = x.shape[1], x.shape[2], x.shape[3]
    kh, kw = k
    oh, ow = out_hw
    for e in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        n, c, h, w = _unravel_nchw(e, C, H, W)
        s = zero
        for ki in range(kh):
            t = h + pad[0] - ki * dil[0]  # = i * stride for the output row i that reads h
            if t < 0:
                break  # t only decreases with ki
            i = t // stride[0]
            if t % stride[0] != 0 or i >= oh:
                continue
            for kj in range(kw):
                u = w + pad[1] - kj * dil[1]
                if u < 0:
                    break
                j = u // stride[1]
                if u % stride[1] == 0 and j < ow:
                    s += cols[(c * kh + ki) * kw + kj, (n * oh + i) * ow + j]
        x[n, c, h, w] = s


_max_pool_step = L.device_jit(KC.max_pool_step.py_func)


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
_max_pool = L.jit(_max_pool, tag=hashlib.sha1(inspect.getsource(KC.max_pool_step.py_func).encode()).hexdigest()[:10])


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
def _pair(t):
    return int(t[0]), int(t[1])


def _launch(kernel, n, *args):
    if n:
        L.launch(kernel, L.blocks_for(n), L.THREADS, *args)


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


# ---------------------------------------------------------------- convolution
def im2col(x, k, stride, padding, dilation, out_hw):
    N, C = x.shape[:2]
    k, out_hw = _pair(k), _pair(out_hw)
    cols = L.empty((C * k[0] * k[1], N * out_hw[0] * out_hw[1]), x.dtype)
    _launch(_im2col, cols.size, x, k, _pair(stride), _pair(padding), _pair(dilation), out_hw, cols)
    return cols


def col2im(cols, shape, k, stride, padding, dilation, out_hw):
    x = L.empty(tuple(shape), cols.dtype)
    _launch(_col2im, x.size, cols, _pair(k), _pair(stride), _pair(padding), _pair(dilation), _pair(out_hw),
            cols.dtype.type(0), x)
    return x


def _grouped(a, groups):
    """(rows, cols) -> (groups, rows // groups, cols)."""
    return reshape(a, (groups, a.shape[0] // groups, a.shape[1]))


def _channels_first(g):
    """(N, O, oh, ow) -> contiguous (O, N*oh*ow), the GEMM layout of an output gradient."""
    N, O, oh, ow = g.shape
    return reshape(transpose(g, (1, 0, 2, 3)), (O, N * oh * ow))


def conv2d(x, w, b, stride, padding, dilation, groups, out_hw, keep=None):
    """out[N, O, oh, ow] of a convolution of x[N, C, H, W] with w[O, C/groups, kh, kw] (+ b[O]);
    ``keep`` (a kernels.conv.KeptColumns) receives x's columns for the weight gradient."""
    N = x.shape[0]
    O = w.shape[0]
    k = tuple(w.shape[2:])
    cols = im2col(x, k, stride, padding, dilation, out_hw)
    if keep is not None:
        keep.keep(x, cols)
    out = matmul(_grouped(reshape(w, (O, w.size // O)), groups), _grouped(cols, groups))
    out = transpose(reshape(out, (O, N) + tuple(out_hw)), (1, 0, 2, 3))
    # the copy into NCHW order, adding the bias on the way
    if b is None:
        return run("identity", x.dtype, out)
    return run("add", x.dtype, out, reshape(b, (1, O, 1, 1)))


def conv2d_input_grad(g, w, b, stride, padding, dilation, groups, in_hw):
    """The adjoint of conv2d in its input (= conv_transpose2d): g[N, O, oh, ow] -> [N, C, H, W] (+ b[C])."""
    N, O = g.shape[:2]
    C = w.shape[1] * groups
    k = tuple(w.shape[2:])
    wt = transpose(_grouped(reshape(w, (O, w.size // O)), groups), (0, 2, 1))
    cols = matmul(wt, _grouped(_channels_first(g), groups))
    cols = reshape(cols, (C * k[0] * k[1], cols.size // (C * k[0] * k[1])))
    out = col2im(cols, (N, C) + tuple(in_hw), k, stride, padding, dilation, tuple(g.shape[2:]))
    if b is not None:
        run("add", out.dtype, out, reshape(b, (1, C, 1, 1)), out=out)
    return out


def conv2d_weight_grad(x, g, stride, padding, dilation, groups, k, kept=None):
    """The adjoint of conv2d in its weight: x[N, C, H, W], g[N, O, oh, ow] -> [O, C/groups, kh, kw]
    (with x's columns from ``kept`` where conv2d kept them)."""
    C = x.shape[1]
    O = g.shape[1]
    cols = kept.take(x) if kept is not None else None
    if cols is None:
        cols = im2col(x, k, stride, padding, dilation, tuple(g.shape[2:]))
    gw = matmul(_grouped(_channels_first(g), groups), transpose(_grouped(cols, groups), (0, 2, 1)))
    return reshape(gw, (O, C // groups, k[0], k[1]))


# ---------------------------------------------------------------- pooling
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
