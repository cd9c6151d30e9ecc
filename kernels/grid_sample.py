"""grid_sample kernels (PyTorch's GridSampler.h, 2-D): sample x[N, C, H, W] at grid[N, Ho, Wo, 2] (x, y in
[-1, 1]) by bilinear or nearest interpolation, with zeros, border or reflection padding, and the gradients
in x and in the grid, and the derivative in the grid along a direction (forward mode, and the backward's
own derivative in its output gradient).

Modes and paddings are integers: MODE_BILINEAR/MODE_NEAREST, PAD_ZEROS/PAD_BORDER/PAD_REFLECTION. The
forward runs in parallel over (n, output row); the backward over n (its scatter into the input gradient
writes anywhere in the sample's planes).
"""
import math

import numpy as np
from numba import njit, prange

from . import config
from ._jit import twins

MODE_BILINEAR, MODE_NEAREST = 0, 1
PAD_ZEROS, PAD_BORDER, PAD_REFLECTION = 0, 1, 2
MODES = {"bilinear": MODE_BILINEAR, "nearest": MODE_NEAREST}
PADDINGS = {"zeros": PAD_ZEROS, "border": PAD_BORDER, "reflection": PAD_REFLECTION}


@njit(error_model="numpy")
def _reflect(v, twice_low, twice_high):
    """(v reflected into [twice_low/2, twice_high/2], d reflected / d v)."""
    if twice_low == twice_high:
        return 0.0, 0.0
    lo = twice_low / 2.0
    span = (twice_high - twice_low) / 2.0
    d = v - lo
    mult = 1.0
    if d < 0:
        mult = -1.0
        d = -d
    flips = math.floor(d / span)
    extra = d - flips * span  # fmod(d, span): d >= 0
    if flips % 2 == 0:
        return extra + lo, mult
    return span - extra + lo, -mult


@njit(error_model="numpy")
def _clip(v, size):
    """(v clipped to [0, size - 1], d clipped / d v)."""
    if v <= 0:
        return 0.0, 0.0
    if v >= size - 1:
        return size - 1.0, 0.0
    return v, 1.0


@njit(error_model="numpy")
def source_index(coord, size, padding, align_corners):
    """(the input position of normalized ``coord`` along a dim of ``size``, d position / d coord), in float64."""
    coord = float(coord)
    if align_corners:
        v, mult = (coord + 1) / 2.0 * (size - 1), (size - 1) / 2.0
    else:
        v, mult = ((coord + 1) * size - 1) / 2.0, size / 2.0
    if padding == PAD_BORDER:
        v, d = _clip(v, size)
        mult *= d
    elif padding == PAD_REFLECTION:
        if align_corners:
            v, d = _reflect(v, 0.0, 2.0 * (size - 1))
        else:
            v, d = _reflect(v, -1.0, 2.0 * size - 1)
        mult *= d
        v, d = _clip(v, size)
        mult *= d
    return v, mult


@njit(error_model="numpy")
def _inside(h, w, H, W):
    return 0 <= h < H and 0 <= w < W


def _grid_sample(x, grid, mode, padding, align_corners, out):
    N, C, H, W = x.shape
    Ho, Wo = grid.shape[1], grid.shape[2]
    for t in prange(N * Ho):
        n, i = t // Ho, t % Ho
        for j in range(Wo):
            ix, _ = source_index(grid[n, i, j, 0], W, padding, align_corners)
            iy, _ = source_index(grid[n, i, j, 1], H, padding, align_corners)
            if mode == MODE_NEAREST:
                xn, yn = np.rint(ix), np.rint(iy)  # round half to even, as nearbyint
                ok = ix == ix and iy == iy and _inside(yn, xn, H, W)
                for c in range(C):
                    out[n, c, i, j] = x[n, c, int(yn), int(xn)] if ok else 0.0
                continue
            if ix != ix or iy != iy:  # a NaN coordinate samples nothing
                for c in range(C):
                    out[n, c, i, j] = 0.0
                continue
            x0, y0 = math.floor(ix), math.floor(iy)
            wx1, wy1 = ix - x0, iy - y0
            wx0, wy0 = 1.0 - wx1, 1.0 - wy1
            x0, y0 = int(x0), int(y0)
            for c in range(C):
                acc = 0.0
                if _inside(y0, x0, H, W):
                    acc += x[n, c, y0, x0] * wx0 * wy0
                if _inside(y0, x0 + 1, H, W):
                    acc += x[n, c, y0, x0 + 1] * wx1 * wy0
                if _inside(y0 + 1, x0, H, W):
                    acc += x[n, c, y0 + 1, x0] * wx0 * wy1
                if _inside(y0 + 1, x0 + 1, H, W):
                    acc += x[n, c, y0 + 1, x0 + 1] * wx1 * wy1
                out[n, c, i, j] = acc


def _grid_sample_backward(g, x, grid, mode, padding, align_corners, gx, ggrid):
    """gx[N, C, H, W] += the forward's adjoint of g; ggrid[N, Ho, Wo, 2] = d <g, out> / d grid (zero for nearest)."""
    N, C, H, W = x.shape
    Ho, Wo = grid.shape[1], grid.shape[2]
    for n in prange(N):
        for i in range(Ho):
            for j in range(Wo):
                ix, mx = source_index(grid[n, i, j, 0], W, padding, align_corners)
                iy, my = source_index(grid[n, i, j, 1], H, padding, align_corners)
                ggrid[n, i, j, 0] = 0.0
                ggrid[n, i, j, 1] = 0.0
                if ix != ix or iy != iy:
                    continue
                if mode == MODE_NEAREST:
                    xn, yn = int(np.rint(ix)), int(np.rint(iy))
                    if _inside(yn, xn, H, W):
                        for c in range(C):
                            gx[n, c, yn, xn] += g[n, c, i, j]
                    continue
                x0, y0 = math.floor(ix), math.floor(iy)
                wx1, wy1 = ix - x0, iy - y0
                wx0, wy0 = 1.0 - wx1, 1.0 - wy1
                x0, y0 = int(x0), int(y0)
                dx = 0.0
                dy = 0.0
                for c in range(C):
                    go = g[n, c, i, j]
                    if _inside(y0, x0, H, W):
                        v = x[n, c, y0, x0]
                        gx[n, c, y0, x0] += wx0 * wy0 * go
                        dx -= v * wy0 * go
                        dy -= v * wx0 * go
                    if _inside(y0, x0 + 1, H, W):
                        v = x[n, c, y0, x0 + 1]
                        gx[n, c, y0, x0 + 1] += wx1 * wy0 * go
                        dx += v * wy0 * go
                        dy -= v * wx1 * go
                    if _inside(y0 + 1, x0, H, W):
                        v = x[n, c, y0 + 1, x0]
                        gx[n, c, y0 + 1, x0] += wx0 * wy1 * go
                        dx -= v * wy1 * go
                        dy += v * wx0 * go
                    if _inside(y0 + 1, x0 + 1, H, W):
                        v = x[n, c, y0 + 1, x0 + 1]
                        gx[n, c, y0 + 1, x0 + 1] += wx1 * wy1 * go
                        dx += v * wy1 * go
                        dy += v * wx1 * go
                ggrid[n, i, j, 0] = dx * mx
                ggrid[n, i, j, 1] = dy * my


def _grid_sample_grid_jvp(x, grid, t, mode, padding, align_corners, out):
    """out[N, C, Ho, Wo] = d grid_sample(x, grid) / d grid in the direction t[N, Ho, Wo, 2] (zero for nearest)."""
    N, C, H, W = x.shape
    Ho, Wo = grid.shape[1], grid.shape[2]
    for u in prange(N * Ho):
        n, i = u // Ho, u % Ho
        for j in range(Wo):
            ix, mx = source_index(grid[n, i, j, 0], W, padding, align_corners)
            iy, my = source_index(grid[n, i, j, 1], H, padding, align_corners)
            if mode == MODE_NEAREST or ix != ix or iy != iy:
                for c in range(C):
                    out[n, c, i, j] = 0.0
                continue
            x0, y0 = math.floor(ix), math.floor(iy)
            wx1, wy1 = ix - x0, iy - y0
            wx0, wy0 = 1.0 - wx1, 1.0 - wy1
            x0, y0 = int(x0), int(y0)
            tx, ty = t[n, i, j, 0] * mx, t[n, i, j, 1] * my
            for c in range(C):
                v00 = x[n, c, y0, x0] if _inside(y0, x0, H, W) else 0.0
                v01 = x[n, c, y0, x0 + 1] if _inside(y0, x0 + 1, H, W) else 0.0
                v10 = x[n, c, y0 + 1, x0] if _inside(y0 + 1, x0, H, W) else 0.0
                v11 = x[n, c, y0 + 1, x0 + 1] if _inside(y0 + 1, x0 + 1, H, W) else 0.0
                out[n, c, i, j] = (((v01 - v00) * wy0 + (v11 - v10) * wy1) * tx
                                   + ((v10 - v00) * wx0 + (v11 - v01) * wx1) * ty)


_KERNELS = {f.__name__[1:]: twins(f) for f in (_grid_sample, _grid_sample_backward, _grid_sample_grid_jvp)}


def _kernel(name, size):
    return _KERNELS[name][size >= config.PARALLEL_THRESHOLD]


# ---------------------------------------------------------------- wrappers
def grid_sample(x, grid, mode, padding, align_corners):
    """x[N, C, H, W] sampled at grid[N, Ho, Wo, 2]: [N, C, Ho, Wo]."""
    N, C = x.shape[:2]
    out = np.empty((N, C, grid.shape[1], grid.shape[2]), x.dtype)
    _kernel("grid_sample", out.size)(np.ascontiguousarray(x), np.ascontiguousarray(grid), mode, padding,
                                     bool(align_corners), out)
    return out


def grid_sample_backward(g, x, grid, mode, padding, align_corners):
    """(gradient in x, gradient in grid) of grid_sample for the output gradient g."""
    gx = np.zeros(x.shape, x.dtype)
    ggrid = np.empty(grid.shape, grid.dtype)
    _kernel("grid_sample_backward", g.size + x.size)(
        np.ascontiguousarray(g), np.ascontiguousarray(x), np.ascontiguousarray(grid), mode, padding,
        bool(align_corners), gx, ggrid)
    return gx, ggrid


def grid_sample_grid_jvp(x, grid, t, mode, padding, align_corners):
    """The derivative of grid_sample in the grid, in the direction t: [N, C, Ho, Wo]."""
    N, C = x.shape[:2]
    out = np.empty((N, C, grid.shape[1], grid.shape[2]), x.dtype)
    _kernel("grid_sample_grid_jvp", out.size)(np.ascontiguousarray(x), np.ascontiguousarray(grid),
                                              np.ascontiguousarray(t), mode, padding, bool(align_corners), out)
    return out
