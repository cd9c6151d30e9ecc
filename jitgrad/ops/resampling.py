"""F.interpolate's nearest, nearest-exact, (bi/tri)linear and area (4-D: adaptive average pooling) modes.
All but area are separable: nearest is a gather along each spatial dim, linear a weighted sum of two
gathers per dim; PyTorch's source-index rules give the indices and weights (computed on the host),
and the VJPs add the gradient back along the same indices with table ops, so they record for double
backward."""
import math

import numpy as np

from .._op import Op, dispatch
from ._table import _arr, _noncontig, register, rejects
from .join import cat
from .pool import adaptive_avg_pool2d
from .padding import BENCH_SIZES, _gather_forward, _gather_grad, add_back

_MODES = "nearest | linear | bilinear | bicubic | trilinear | lanczos | area | nearest-exact"
_LINEAR = {"linear": 1, "bilinear": 2, "trilinear": 3}


def _scale(n_in, n_out, scale, align_corners):
    """PyTorch's area_pixel_compute_scale: the input step per output step."""
    if align_corners:
        return (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
    return 1.0 / scale if scale is not None and scale > 0 else n_in / n_out


def nearest_index(n_in, n_out, scale, exact=False):
    """PyTorch's nearest_idx: floor(i * scale) computed in float32, clipped to the input; nearest-exact
    samples pixel centres, floor((i + 0.5) * scale)."""
    if exact:
        s = np.float32(_scale(n_in, n_out, scale, False))
        centres = np.arange(n_out, dtype=np.float32) + np.float32(0.5)
        return np.minimum(np.floor(centres * s).astype(np.int64), n_in - 1)
    if n_out == n_in:
        return np.arange(n_out, dtype=np.int64)
    if n_out == 2 * n_in:
        return np.arange(n_out, dtype=np.int64) >> 1
    s = np.float32(_scale(n_in, n_out, scale, False))
    return np.minimum(np.floor(np.arange(n_out, dtype=np.float32) * s).astype(np.int64), n_in - 1)


def linear_index(n_in, n_out, scale, align_corners):
    """(i0, i1, weight of i1) per output position: PyTorch's area_pixel_compute_source_index."""
    s = _scale(n_in, n_out, scale, align_corners)
    dst = np.arange(n_out, dtype=np.float64)
    src = s * dst if align_corners else np.maximum(s * (dst + 0.5) - 0.5, 0.0)
    i0 = np.minimum(np.floor(src).astype(np.int64), n_in - 1)
    i1 = np.minimum(i0 + 1, n_in - 1)
    return i0, i1, src - i0


def _linear_forward(xp, dt, x, steps):
    for d, i0, i1, w in steps:
        shape = (len(w),) + (1,) * (x.ndim - 1 - d)
        w1 = xp.from_host(w.astype(dt).reshape(shape))
        a, b = xp.take(x, i0, axis=d), xp.take(x, i1, axis=d)
        x = xp.run("add", dt, a, xp.run("mul", dt, xp.run("sub", dt, b, a), w1))  # a + (b - a) w
    return x


def _linear_grad(g, s):
    shape = list(s.self_shape)
    before = []
    for d, i0, i1, w in s.steps:
        before.append(tuple(shape))
        shape[d] = len(w)
    for (d, i0, i1, w), prev in zip(reversed(s.steps), reversed(before)):
        w1 = g.new_tensor(w.reshape((len(w),) + (1,) * (len(shape) - 1 - d)), device=g.device)
        g = add_back(cat([g * (1 - w1), g * w1], d), d, np.concatenate([i0, i1]), prev)
    return g


# ---------------------------------------------------------------------- API
def _tuple(v, k):
    return tuple(v) if isinstance(v, (tuple, list)) else (v,) * k


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None, recompute_scale_factor=None,
                antialias=False):
    k = input.ndim - 2
    if mode not in ("nearest", "nearest-exact", "area") + tuple(_LINEAR):
        if mode in _MODES.split(" | "):
            raise NotImplementedError("interpolate: mode=%r is not implemented (nearest, linear, bilinear, trilinear "
                                      "are)" % mode)
        raise NotImplementedError("Input Error: Only 3D, 4D and 5D input Tensors supported (got %dD) for the modes: %s "
                                  "(got %s)" % (input.ndim, _MODES, mode))
    if mode in ("nearest", "nearest-exact", "area") and align_corners is not None:
        raise ValueError("align_corners option can only be set with the interpolating modes: linear | bilinear | "
                         "bicubic | trilinear")
    if mode in _LINEAR and input.ndim != _LINEAR[mode] + 2:
        raise NotImplementedError("Got %dD input, but %s mode needs %dD input" % (input.ndim, mode, _LINEAR[mode] + 2))
    if k not in (1, 2, 3):
        raise NotImplementedError("Input Error: Only 3D, 4D and 5D input Tensors supported (got %dD) for the modes: %s "
                                  "(got %s)" % (input.ndim, _MODES, mode))
    if size is not None and scale_factor is not None:
        raise ValueError("only one of size or scale_factor should be defined")
    if size is None and scale_factor is None:
        raise ValueError("either size or scale_factor should be defined")
    spatial = tuple(input.shape[2:])
    if size is not None:
        out = _tuple(size, k)
        if len(out) != k:
            raise ValueError("Input and output must have the same number of spatial dimensions, but got input with "
                             "spatial dimensions of [%s] and output size of %s. Please provide input tensor in (N, C, "
                             "d1, d2, ...,dK) format and output size in (o1, o2, ...,oK) format."
                             % (", ".join(map(str, spatial)), tuple(size)))
        scales = (None,) * k
    else:
        scales = tuple(float(s) for s in _tuple(scale_factor, k))
        out = tuple(int(math.floor(n * s)) for n, s in zip(spatial, scales))
        if recompute_scale_factor:
            scales = (None,) * k
    if mode == "area":
        if k != 2:
            raise NotImplementedError("interpolate: mode='area' is implemented for 4-D input (adaptive average "
                                      "pooling), got %dD" % input.ndim)
        return adaptive_avg_pool2d(input, out)
    if mode in ("nearest", "nearest-exact"):
        exact = mode == "nearest-exact"
        index = tuple((2 + j, nearest_index(n, m, sc, exact)) for j, (n, m, sc) in enumerate(zip(spatial, out, scales)))
        return dispatch((_NEAREST_EXACT if exact else _NEAREST)[k], (input,), {"index": index})
    steps = tuple((2 + j,) + linear_index(n, m, sc, bool(align_corners))
                  for j, (n, m, sc) in enumerate(zip(spatial, out, scales)))
    return dispatch(_LINEAR_OPS[k], (input,), {"steps": steps})


# ---------------------------------------------------------------------- references and samples (see _table.py)
def _np_interpolate(x, size=None, scale_factor=None, mode="nearest", align_corners=None):
    """Direct per-output-point evaluation (not separable passes): the corners' weighted sum."""
    k = x.ndim - 2
    spatial = x.shape[2:]
    out = _tuple(size, k) if size is not None else tuple(int(math.floor(n * s)) for n, s in
                                                          zip(spatial, _tuple(scale_factor, k)))
    scales = (None,) * k if size is not None else _tuple(scale_factor, k)
    if mode in ("nearest", "nearest-exact"):
        return x[(Ellipsis,) + tuple(np.ix_(*[nearest_index(n, m, s, mode == "nearest-exact")
                                              for n, m, s in zip(spatial, out, scales)]))]
    res = np.zeros(x.shape[:2] + out, dtype=np.float64)
    axes = [linear_index(n, m, s, bool(align_corners)) for n, m, s in zip(spatial, out, scales)]
    for corner in np.ndindex(*(2,) * k):
        idx = np.ix_(*[ax[c] for ax, c in zip(axes, corner)])
        w = np.ones(out)
        for j, (ax, c) in enumerate(zip(axes, corner)):
            wj = ax[2] if c else 1 - ax[2]
            w = w * wj.reshape((-1,) + (1,) * (k - 1 - j))
        res += w * x[(Ellipsis,) + idx]
    return res.astype(x.dtype)


def _samples(k, mode):
    shapes = {1: (2, 2, 4), 2: (1, 2, 3, 4), 3: (1, 1, 2, 3, 2)}
    cases = [{"size": (5, 7, 3)[:k] if k > 1 else 7}, {"scale_factor": 2}, {"scale_factor": (1.5, 0.5, 2.5)[:k]}]
    if mode not in ("nearest", "nearest-exact"):
        cases += [{"size": (5, 2, 4)[:k], "align_corners": True}, {"scale_factor": 1.7, "align_corners": False}]

    def samples(rng, dtype):
        if np.dtype(dtype).kind != "f":
            return []  # (rejected: tests/ops/test_ops_against_torch.py)
        out = [((_arr(rng, shapes[k], -2.0, 2.0, dtype),), dict(kw, mode=mode)) for kw in cases]
        out.append(((_noncontig(rng, shapes[k], -2.0, 2.0, dtype),), dict(cases[0], mode=mode)))
        return out
    return samples


# ---------------------------------------------------------------------- the entries: one per mode and rank
_NEAREST = {k: register(Op("upsample_nearest%dd" % k, _gather_forward, vjp=[_gather_grad], dtype="keep",
                           node="UpsampleNearest%dDBackward0" % k, call=interpolate, ref=_np_interpolate,
                           samples=_samples(k, "nearest"), bench={"sizes": BENCH_SIZES[k]},
                           unsupported=rejects(NotImplementedError, "\"compute_indices_weights_nearest\" not "
                                               "implemented for '%(type)s'", "bool", "int32", "int64")))
            for k in (1, 2, 3)}
_NEAREST_EXACT = {k: register(Op("upsample_nearest_exact%dd" % k, _gather_forward, vjp=[_gather_grad], dtype="keep",
                                 node="UpsampleNearestExact%dDBackward0" % k, call=interpolate, ref=_np_interpolate,
                                 samples=_samples(k, "nearest-exact"), bench={"sizes": BENCH_SIZES[k]},
                                 unsupported=_NEAREST[k].types.unsupported))
                  for k in (1, 2, 3)}
_LINEAR_OPS = {k: register(Op("upsample_%s%dd" % (m, k), _linear_forward, vjp=[_linear_grad], dtype="keep",
                              node="Upsample%s%dDBackward0" % (m.capitalize(), k), call=interpolate,
                              ref=_np_interpolate, samples=_samples(k, m),
                              bench={"sizes": BENCH_SIZES[k]},
                              unsupported=rejects(NotImplementedError, "\"compute_indices_weights_linear\" not "
                                                  "implemented for '%(type)s'", "bool", "int32", "int64")))
               for m, k in _LINEAR.items()}
