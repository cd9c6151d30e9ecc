"""Spatial transformers: F.affine_grid (a grid of sample points from affine matrices) and F.grid_sample
(an input sampled at a grid's points), PyTorch's GridSampler2D and AffineGridGenerator.

grid_sample is one entry (kernels/grid_sample.py, CPU) whose VJPs, in the input and in the grid, run the
backward kernel as an entry of its own. That backward is differentiable in its output gradient only (it is
linear in it: grid_sample itself, and the derivative in the grid along a direction, a third kernel), which
forward mode's transposed VJPs need; in x and the grid it has no derivative, as in PyTorch (no double
backward). affine_grid is linear in theta: a GEMM with the base grid, its VJP the transposed GEMM.
"""
import warnings

import numpy as np

from .._op import Op, dispatch
from .._tensor import Tensor
from ..kernels import cpu as CPU_BACKEND
from ..kernels import grid_sample as KG
from ._table import _arr, register
from .conv import _dims, _float_only


# ---------------------------------------------------------------------- grid_sample
def _host_only(xp, what):
    if xp is not CPU_BACKEND:
        raise NotImplementedError("%s: the kernel runs on the CPU only; there is no CUDA kernel yet (move the "
                                  "tensors to the CPU)" % what)


def _grid_sample_forward(xp, dt, x, grid, mode, padding, align_corners):
    _host_only(xp, "grid_sample")
    return KG.grid_sample(x, grid, mode, padding, align_corners)


def _grid_sample_backward_forward(xp, dt, g, x, grid, mode, padding, align_corners):
    _host_only(xp, "grid_sample backward")
    return KG.grid_sample_backward(g, x, grid, mode, padding, align_corners)


def _params(s):
    return {"mode": s.mode, "padding": s.padding, "align_corners": s.align_corners}


def _backward(g, s):
    return dispatch(GRID_SAMPLE_BWD, (g, s.self, s.grid), _params(s))


def _grid_sample_grid_jvp_forward(xp, dt, x, grid, t, mode, padding, align_corners):
    _host_only(xp, "grid_sample")
    return KG.grid_sample_grid_jvp(x, grid, t, mode, padding, align_corners)


def _backward_grad_grad(h, s):
    """The backward's VJP in its output gradient: A h for the input part, d out / d grid . h for the grid part."""
    out = None
    if h[0] is not None:
        out = dispatch(GRID_SAMPLE, (h[0], s.grid), _params(s))
    if h[1] is not None:
        jvp = dispatch(GRID_SAMPLE_JVP, (s.self, s.grid, h[1]), _params(s))
        out = jvp if out is None else out + jvp
    return out


def _input_grad(g, s):
    return _backward(g, s)[0]


def _grid_grad(g, s):
    return _backward(g, s)[1]


_MODES = "'bilinear', 'nearest' or 'bicubic'"


def grid_sample(input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):
    """Sample ``input`` [N, C, H, W] at ``grid`` [N, Ho, Wo, 2] (x, y normalized to [-1, 1]): [N, C, Ho, Wo]."""
    if mode not in ("bilinear", "nearest", "bicubic"):
        raise ValueError("nn.functional.grid_sample(): expected mode to be %s, but got: '%s'" % (_MODES, mode))
    if padding_mode not in ("zeros", "border", "reflection"):
        raise ValueError("nn.functional.grid_sample(): expected padding_mode to be 'zeros', 'border', or "
                         "'reflection', but got: '%s'" % padding_mode)
    if align_corners is None:
        warnings.warn("Default grid_sample and affine_grid behavior has changed to align_corners=False since 1.3.0. "
                      "Please specify align_corners=True if the old behavior is desired. See the documentation of "
                      "grid_sample for details.", UserWarning, stacklevel=2)
        align_corners = False
    if input.dtype != grid.dtype:
        raise RuntimeError("grid_sampler(): expected input and grid to have same dtype, but input has %s and grid has "
                           "%s" % (_c_name(input), _c_name(grid)))
    if input.ndim not in (4, 5) or input.ndim != grid.ndim:
        raise RuntimeError("grid_sampler(): expected 4D or 5D input and grid with same number of dimensions, but got "
                           "input with sizes [%s] and grid with sizes [%s]" % (_dims(input.shape), _dims(grid.shape)))
    if input.shape[0] != grid.shape[0]:
        raise RuntimeError("grid_sampler(): expected grid and input to have same batch size, but got input with sizes "
                           "[%s] and grid with sizes [%s]" % (_dims(input.shape), _dims(grid.shape)))
    if grid.shape[-1] != input.ndim - 2:
        raise RuntimeError("grid_sampler(): expected grid to have size %d in last dimension, but got grid with sizes "
                           "[%s]" % (input.ndim - 2, _dims(grid.shape)))
    if input.ndim == 5 or mode == "bicubic":
        raise NotImplementedError("grid_sample: %s is not implemented in jitgrad (2-D bilinear and nearest are)"
                                  % ("5-D (volumetric) input" if input.ndim == 5 else "mode='bicubic'"))
    if not input.dtype.is_floating_point:
        raise NotImplementedError("\"grid_sampler_2d_cpu\" not implemented for '%s'" % input.dtype.scalar_type)
    return dispatch(GRID_SAMPLE, (input, grid), {"mode": KG.MODES[mode], "padding": KG.PADDINGS[padding_mode],
                                                 "align_corners": bool(align_corners)})


def _c_name(t):
    return {"float32": "float", "float64": "double", "float16": "c10::Half", "bfloat16": "c10::BFloat16"}.get(
        t.dtype.name, t.dtype.name)


# ---------------------------------------------------------------------- affine_grid
def _base_grid(size, align_corners):
    """[prod(spatial), nd + 1]: the normalized (x, y[, z], 1) of every output point, x fastest."""
    spatial = size[2:]
    axes = []
    for n in reversed(spatial):  # x (the last dim) first
        a = np.linspace(-1.0, 1.0, n) if n > 1 else np.zeros(1)
        axes.append(a if align_corners else a * (n - 1) / n)
    mesh = np.meshgrid(*axes[::-1], indexing="ij")  # in the spatial order (.., y, x)
    cols = [m.reshape(-1) for m in mesh[::-1]] + [np.ones(int(np.prod(spatial)))]
    return np.stack(cols, -1)


def _affine_grid_forward(xp, dt, theta, size, align_corners):
    base = xp.from_host(np.ascontiguousarray(_base_grid(size, align_corners).astype(dt)))
    out = xp.matmul(base, xp.swapaxes(theta, 1, 2))  # [N, points, nd]
    return xp.reshape(out, (theta.shape[0],) + tuple(size[2:]) + (len(size) - 2,))  # (vmap folds into N)


def _affine_grid_grad(g, s):
    base = _base_grid(s.size, s.align_corners).astype(g.dtype.np)
    base = Tensor._wrap(base).to(g.device)
    return g.reshape(g.shape[0], -1, len(s.size) - 2).mT.matmul(base)


def affine_grid(theta, size, align_corners=None):
    """The sampling grid [N, H, W, 2] (or [N, D, H, W, 3]) of the affine matrices ``theta`` [N, 2, 3] ([N, 3, 4])
    for an output of ``size`` [N, C, H, W] ([N, C, D, H, W])."""
    if align_corners is None:
        warnings.warn("Default grid_sample and affine_grid behavior has changed to align_corners=False since 1.3.0. "
                      "Please specify align_corners=True if the old behavior is desired. See the documentation of "
                      "grid_sample for details.", UserWarning, stacklevel=2)
        align_corners = False
    if not theta.dtype.is_floating_point:
        raise ValueError("Expected theta to have floating point type, but got %s" % theta.dtype)
    size = tuple(int(n) for n in size)
    if len(size) == 4:
        if theta.ndim != 3 or tuple(theta.shape[-2:]) != (2, 3):
            raise ValueError("Expected a batch of 2D affine matrices of shape Nx2x3 for size %s. Got %s."
                             % (list(size), list(theta.shape)))
        spatial = size[-2:]
    elif len(size) == 5:
        if theta.ndim != 3 or tuple(theta.shape[-2:]) != (3, 4):
            raise ValueError("Expected a batch of 3D affine matrices of shape Nx3x4 for size %s. Got %s."
                             % (list(size), list(theta.shape)))
        spatial = size[-3:]
    else:
        raise NotImplementedError("affine_grid only supports 4D and 5D sizes, for 2D and 3D affine transforms, "
                                  "respectively. Got size %s." % (list(size),))
    if align_corners and min(spatial) == 1:
        warnings.warn("Since version 1.3.0, affine_grid behavior has changed for unit-size grids when "
                      "align_corners=True. This is not an issue for standard usage.", UserWarning, stacklevel=2)
    if min(size) <= 0:
        raise ValueError("Expected non-zero, positive output size. Got %s" % (list(size),))
    if theta.shape[0] != size[0]:
        raise RuntimeError("Expected theta and size to have the same batch size, got %d and %d"
                           % (theta.shape[0], size[0]))
    return dispatch(AFFINE_GRID, (theta,), {"size": size, "align_corners": bool(align_corners)})


# ---------------------------------------------------------------------- references and samples (see _table.py)
def _np_reflect(v, twice_low, twice_high):
    """(v reflected into [twice_low/2, twice_high/2], its derivative)."""
    if twice_low == twice_high:
        return np.zeros_like(v), np.zeros_like(v)
    lo, span = twice_low / 2, (twice_high - twice_low) / 2
    sign = np.where(v - lo < 0, -1.0, 1.0)
    d = np.abs(v - lo)
    extra, flips = np.fmod(d, span), np.floor(d / span)
    even = flips % 2 == 0
    return np.where(even, extra + lo, span - extra + lo), np.where(even, sign, -sign)


def _np_source(coord, size, padding_mode, align_corners):
    """(the input positions of normalized coordinates, their derivatives)."""
    v = (coord + 1) / 2 * (size - 1) if align_corners else ((coord + 1) * size - 1) / 2
    mult = np.full(v.shape, (size - 1) / 2 if align_corners else size / 2)
    if padding_mode == "reflection":
        v, d = _np_reflect(v, 0, 2 * (size - 1)) if align_corners else _np_reflect(v, -1, 2 * size - 1)
        mult = mult * d
    if padding_mode in ("border", "reflection"):
        mult = mult * ((v > 0) & (v < size - 1))
        v = np.clip(v, 0, size - 1)
    return v, mult


def _np_corners(x, grid, padding_mode, align_corners):
    """The four corner values [N, Ho, Wo, C] of each bilinear sample, the weights and the coordinates' derivatives."""
    N, C, H, W = x.shape
    ix, mx = _np_source(grid[..., 0], W, padding_mode, bool(align_corners))  # [N, Ho, Wo]
    iy, my = _np_source(grid[..., 1], H, padding_mode, bool(align_corners))
    n = np.arange(N)[:, None, None]

    def at(yy, xx):  # x[n, :, yy, xx] or 0 outside
        ok = (yy >= 0) & (yy < H) & (xx >= 0) & (xx < W)
        v = x[n, :, np.clip(yy, 0, H - 1), np.clip(xx, 0, W - 1)]
        return np.where(ok[..., None], v, 0)
    x0, y0 = np.floor(ix).astype(np.int64), np.floor(iy).astype(np.int64)
    wx, wy = (ix - x0)[..., None], (iy - y0)[..., None]
    return (at(y0, x0), at(y0, x0 + 1), at(y0 + 1, x0), at(y0 + 1, x0 + 1)), wx, wy, mx, my, (ix, iy, at)


def _np_grid_sample(x, grid, mode="bilinear", padding_mode="zeros", align_corners=None):
    (v00, v01, v10, v11), wx, wy, _, _, (ix, iy, at) = _np_corners(x, grid, padding_mode, align_corners)
    if mode == "nearest":
        out = at(np.rint(iy).astype(np.int64), np.rint(ix).astype(np.int64))
    else:
        out = v00 * (1 - wx) * (1 - wy) + v01 * wx * (1 - wy) + v10 * (1 - wx) * wy + v11 * wx * wy
    return np.moveaxis(out, -1, 1).astype(x.dtype)


def _np_affine_grid(theta, size, align_corners=None):
    base = _base_grid(tuple(size), bool(align_corners))
    out = np.einsum("pk,njk->npj", base, theta)
    return out.reshape((size[0],) + tuple(size[2:]) + (len(size) - 2,)).astype(theta.dtype)


def _grid_sample_samples(rng, dtype):
    A = lambda *s: _arr(rng, s, -1.0, 1.0, dtype)  # noqa: E731
    G = lambda *s: _arr(rng, s, -1.3, 1.3, dtype)  # noqa: E731  (some points outside: padding matters)
    out = [((A(2, 3, 4, 5), G(2, 3, 2, 2)), {"align_corners": False}),
           ((A(1, 2, 3, 3), G(1, 4, 3, 2)), {"align_corners": True}),
           ((A(1, 2, 4, 3), G(1, 2, 3, 2)), {"padding_mode": "border", "align_corners": False}),
           ((A(2, 1, 3, 4), G(2, 3, 2, 2) * 2), {"padding_mode": "reflection", "align_corners": False}),
           ((A(1, 2, 3, 4), G(1, 2, 2, 2) * 2), {"padding_mode": "reflection", "align_corners": True}),
           ((A(1, 2, 4, 4), G(1, 3, 3, 2)), {"mode": "nearest", "align_corners": False}),
           ((A(1, 1, 3, 3), G(1, 2, 2, 2)), {"mode": "nearest", "padding_mode": "border", "align_corners": True})]
    return out


def _fixed_operands(seed, dtype):
    """The x [1, 2, 3, 3] and grid [1, 2, 3, 2] of the backward's samples, made from a seed: the backward is
    differentiable in its output gradient only, so its samples hold the others constant."""
    rng = np.random.default_rng(seed)  # (multiples of 1/64: the same values in every floating dtype)
    return (rng.integers(-64, 65, (1, 2, 3, 3)) / 64).astype(dtype), (rng.integers(-77, 78, (1, 2, 3, 2)) / 64).astype(dtype)


def _grid_sample_bwd_call(g, seed, padding_mode="zeros", align_corners=False):
    x, grid = (Tensor._wrap(a) for a in _fixed_operands(seed, g.dtype.np))
    return dispatch(GRID_SAMPLE_BWD, (g, x, grid), {"mode": KG.MODE_BILINEAR, "padding": KG.PADDINGS[padding_mode],
                                                   "align_corners": align_corners})


def _np_grid_sample_bwd(g, seed, padding_mode="zeros", align_corners=False):
    """The adjoint in x by linearity (columns of the sampling matrix); in the grid, the bilinear derivative."""
    x, grid = _fixed_operands(seed, g.dtype)
    gx = np.zeros_like(x)
    for idx in np.ndindex(*x.shape):
        e = np.zeros_like(x)
        e[idx] = 1
        gx[idx] = (g * _np_grid_sample(e, grid, "bilinear", padding_mode, align_corners)).sum()
    (v00, v01, v10, v11), wx, wy, mx, my, _ = _np_corners(x, grid, padding_mode, align_corners)
    gt = np.moveaxis(g, 1, -1)  # [N, Ho, Wo, C]
    dx = (gt * ((v01 - v00) * (1 - wy) + (v11 - v10) * wy)).sum(-1) * mx
    dy = (gt * ((v10 - v00) * (1 - wx) + (v11 - v01) * wx)).sum(-1) * my
    return gx, np.stack([dx, dy], -1).astype(grid.dtype)


def _grid_sample_jvp_call(x, grid, t, padding_mode="zeros", align_corners=False):
    return dispatch(GRID_SAMPLE_JVP, (x, grid, t), {"mode": KG.MODE_BILINEAR, "padding": KG.PADDINGS[padding_mode],
                                                    "align_corners": align_corners})


def _np_grid_sample_jvp(x, grid, t, padding_mode="zeros", align_corners=False):
    (v00, v01, v10, v11), wx, wy, mx, my, _ = _np_corners(x, grid, padding_mode, align_corners)
    d = (((v01 - v00) * (1 - wy) + (v11 - v10) * wy) * (t[..., 0] * mx)[..., None]
         + ((v10 - v00) * (1 - wx) + (v11 - v01) * wx) * (t[..., 1] * my)[..., None])
    return np.moveaxis(d, -1, 1).astype(x.dtype)


def _affine_grid_samples(rng, dtype):
    T = lambda *s: _arr(rng, s, -1.0, 1.0, dtype)  # noqa: E731
    return [((T(2, 2, 3), (2, 3, 4, 5)), {"align_corners": False}), ((T(1, 2, 3), (1, 1, 3, 2)), {"align_corners": True}),
            ((T(2, 3, 4), (2, 1, 2, 3, 4)), {"align_corners": False})]


# ---------------------------------------------------------------------- the entries
GRID_SAMPLE = register(Op("grid_sampler_2d", _grid_sample_forward, inputs=("self", "grid"),
                          vjp=[_input_grad, _grid_grad], fused=[_input_grad, _grid_grad], double_backward=False,
                          dtype="promote", node="GridSampler2DBackward0", call=grid_sample, ref=_np_grid_sample,
                          samples=_float_only(_grid_sample_samples),
                          bench={"sizes": [(2, 3, 8, 8), (16, 32, 64, 64)]}))
GRID_SAMPLE_BWD = register(Op("grid_sampler_2d_backward", _grid_sample_backward_forward, inputs=("grad", "self", "grid"),
                              vjp=[_backward_grad_grad], fused=[_backward_grad_grad], double_backward=False,
                              n_outputs=2, outputs=("grad_input", "grad_grid"), dtype="promote",
                              call=_grid_sample_bwd_call, ref=_np_grid_sample_bwd, samples=_float_only(
                                  lambda rng, dtype: [((_arr(rng, (1, 2, 2, 3), -1.0, 1.0, dtype), seed), kw)
                                                      for seed, kw in enumerate(
                                                          ({}, {"padding_mode": "reflection"},
                                                           {"padding_mode": "border", "align_corners": True}))])))
GRID_SAMPLE_JVP = register(Op("grid_sampler_2d_grid_jvp", _grid_sample_grid_jvp_forward, inputs=("self", "grid", "tangent"),
                              dtype="promote", call=_grid_sample_jvp_call, ref=_np_grid_sample_jvp, samples=_float_only(
                                  lambda rng, dtype: [((_arr(rng, (1, 2, 3, 3), -1.0, 1.0, dtype),
                                                        _arr(rng, (1, 2, 3, 2), -1.2, 1.2, dtype),
                                                        _arr(rng, (1, 2, 3, 2), -1.0, 1.0, dtype)), kw)
                                                      for kw in ({}, {"padding_mode": "reflection"},
                                                                 {"padding_mode": "border", "align_corners": True})])))
AFFINE_GRID = register(Op("affine_grid_generator", _affine_grid_forward, inputs=("theta",), vjp=[_affine_grid_grad],
                          dtype="keep", node="AffineGridGeneratorBackward0", call=affine_grid, ref=_np_affine_grid,
                          samples=_float_only(_affine_grid_samples)))
