"""Pooling ops (kernels in kernels/pool.py): average pooling (plain and adaptive) is a sum over
explicit windows, and its backward is the adjoint op; max pooling saves the argmax indices and
its backward scatters into them."""
import math

import numpy as np

from .._op import Op, dispatch
from .._tensor import Tensor
from ..kernels import pool as KP
from ._table import _arr, register
from .conv import _dims, _float_only, _no_kernel


def _max_pool_forward(xp, dt, x, kernel_size, stride, padding, dilation, out_hw):
    return xp.pool.max_pool2d(x, kernel_size, stride, padding, dilation, out_hw)


def _max_pool_grad(g, s):
    return dispatch(MAX_POOL_BWD, (g[0],), {"indices": s.indices, "in_hw": s.self_shape[2:],
                                            "two_by_two": KP.is_2x2(s.kernel_size, s.stride, s.padding, s.dilation)})


def _max_pool_bwd_forward(xp, dt, g, indices, in_hw, two_by_two=False):
    return xp.pool.max_pool2d_backward(g, indices._data, in_hw, two_by_two)


def _avg_forward(xp, dt, x, windows, in_hw):
    return xp.pool.window_avg(x, windows)


def _avg_backward_forward(xp, dt, g, windows, in_hw):
    return xp.pool.window_avg_backward(g, windows, in_hw)


def _pool_tuple(v, name, what, allow_none=False):
    if allow_none and (v is None or (isinstance(v, (tuple, list)) and len(v) == 0)):
        return None
    t = tuple(v) if isinstance(v, (tuple, list)) else (v,)
    if len(t) not in (1, 2):
        raise RuntimeError("%s: %s" % (name, what))
    return tuple(int(x) for x in (t * 2 if len(t) == 1 else t))


def _pool_out(size, k, s, p, d, ceil_mode):
    """PyTorch's pooling_output_shape."""
    out = (size + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= size + p:
        out -= 1
    return out


def _pool_args(name, input, kernel_size, stride, padding, dilation, ceil_mode):
    if not isinstance(input, Tensor):
        raise TypeError("%s(): argument 'input' must be Tensor, not %s" % (name, type(input).__name__))
    k = _pool_tuple(kernel_size, name, "kernel_size must either be a single int, or a tuple of two ints")
    s = _pool_tuple(stride, name, "stride must either be omitted, a single int, or a tuple of two ints",
                    allow_none=True) or k
    p = _pool_tuple(padding, name, "padding must either be a single int, or a tuple of two ints")
    d = _pool_tuple(dilation, name, "dilation must be either a single int, or a tuple of two ints")
    if input.ndim not in (3, 4) or any(n == 0 for n in input.shape[-3:]):
        raise RuntimeError("non-empty 3D or 4D (batch mode) tensor expected for input")
    if any(x == 0 for x in s):
        raise RuntimeError("stride should not be zero")
    if any(x <= 0 for x in k):
        raise RuntimeError("kernel size should be greater than zero, but got kH: %d kW: %d" % k)
    if any(x <= 0 for x in d):
        raise RuntimeError("dilation should be greater than zero, but got dilationH: %d dilationW: %d" % d)
    for i in range(2):
        if p[i] > ((k[i] - 1) * d[i] + 1) // 2:
            raise RuntimeError("pad should be at most half of effective kernel size, but got pad=%d, kernel_size=%d "
                               "and dilation=%d" % (p[i], k[i], d[i]))
    hw = tuple(input.shape[-2:])
    out = tuple(_pool_out(hw[i], k[i], s[i], p[i], d[i], ceil_mode) for i in range(2))
    if any(o < 1 for o in out):
        c = input.shape[-3]
        raise RuntimeError("Given input size: (%dx%dx%d). Calculated output size: (%dx%dx%d). Output size is too small"
                           % ((c,) + hw + (c,) + out))
    return k, s, p, d, out


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    k, s, p, d, out = _pool_args("max_pool2d", input, kernel_size, stride, padding, dilation, ceil_mode)
    _no_kernel(input, "max_pool2d")
    unbatched = input.ndim == 3
    x = input.unsqueeze(0) if unbatched else input
    values, indices = dispatch(MAX_POOL, (x,), {"kernel_size": k, "stride": s, "padding": p, "dilation": d,
                                                "out_hw": out})
    if unbatched:
        values, indices = values.squeeze(0), indices.squeeze(0)
    return (values, indices) if return_indices else values


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    k, s, p, _, out = _pool_args("avg_pool2d", input, kernel_size, stride, padding, 1, ceil_mode)
    _no_kernel(input, "avg_pool2d")
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError("divisor must be not zero")
    unbatched = input.ndim == 3
    x = input.unsqueeze(0) if unbatched else input
    hw = tuple(x.shape[2:])
    windows = KP.avg_pool_windows(hw, k, s, p, out, count_include_pad, divisor_override)
    y = dispatch(AVG_POOL, (x,), {"windows": windows, "in_hw": hw})
    return y.squeeze(0) if unbatched else y


def adaptive_avg_pool2d(input, output_size):
    if not isinstance(input, Tensor):
        raise TypeError("adaptive_avg_pool2d(): argument 'input' must be Tensor, not %s" % type(input).__name__)
    if input.ndim not in (3, 4):
        raise RuntimeError("adaptive_avg_pool2d(): Expected 3D or 4D tensor, but got [%s]" % _dims(input.shape))
    size = tuple(output_size) if isinstance(output_size, (tuple, list)) else (output_size, output_size)
    if len(size) != 2:
        raise RuntimeError("adaptive_avg_pool2d: output_size must be 2")
    _no_kernel(input, "adaptive_avg_pool2d", "biu")
    hw = tuple(input.shape[-2:])
    out = tuple(hw[i] if size[i] is None else int(size[i]) for i in range(2))
    if any(o < 0 for o in out):
        raise RuntimeError("adaptive_avg_pool2d: elements of output_size must be greater than or equal to 0 but "
                           "received {%d, %d}" % out)
    unbatched = input.ndim == 3
    x = input.unsqueeze(0) if unbatched else input
    y = dispatch(ADAPTIVE_AVG_POOL, (x,), {"windows": KP.adaptive_windows(hw, out), "in_hw": hw})
    return y.squeeze(0) if unbatched else y


# ---------------------------------------------------------------------- references and samples (see _table.py)
def _np_max_pool2d(x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """Window by window: the max and the flat h*W+w index of its first occurrence."""
    k = _pool_tuple(kernel_size, "", "")
    s = _pool_tuple(stride, "", "", allow_none=True) or k
    p, d = _pool_tuple(padding, "", ""), _pool_tuple(dilation, "", "")
    N, C, H, W = x.shape
    out = [_pool_out((H, W)[i], k[i], s[i], p[i], d[i], ceil_mode) for i in range(2)]
    big = [max((H, W)[i] + 2 * p[i], (out[i] - 1) * s[i] + d[i] * (k[i] - 1) + 1) for i in range(2)]
    xp = np.full((N, C) + tuple(big), -np.inf, x.dtype)
    xp[:, :, p[0]:p[0] + H, p[1]:p[1] + W] = x
    pos = np.full(big, -1, np.int64)
    pos[p[0]:p[0] + H, p[1]:p[1] + W] = np.arange(H * W).reshape(H, W)
    vals = np.empty((N, C) + tuple(out), x.dtype)
    idx = np.empty((N, C) + tuple(out), np.int64)
    for i in range(out[0]):
        for j in range(out[1]):
            rows = slice(i * s[0], i * s[0] + d[0] * (k[0] - 1) + 1, d[0])
            cols = slice(j * s[1], j * s[1] + d[1] * (k[1] - 1) + 1, d[1])
            win = xp[:, :, rows, cols].reshape(N, C, -1)
            a = win.argmax(axis=2)
            vals[:, :, i, j] = np.take_along_axis(win, a[..., None], 2)[..., 0]
            idx[:, :, i, j] = pos[rows, cols].reshape(-1)[a]
    return (vals, idx) if return_indices else vals


def _np_avg_pool2d(x, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
                   divisor_override=None):
    k = _pool_tuple(kernel_size, "", "")
    s = _pool_tuple(stride, "", "", allow_none=True) or k
    p = _pool_tuple(padding, "", "")
    H, W = x.shape[2:]
    out = [_pool_out(n, k[i], s[i], p[i], 1, ceil_mode) for i, n in enumerate((H, W))]
    res = np.zeros(x.shape[:2] + tuple(out), x.dtype)
    for i in range(out[0]):
        for j in range(out[1]):
            h0, w0 = i * s[0] - p[0], j * s[1] - p[1]
            h1, w1 = min(h0 + k[0], H + p[0]), min(w0 + k[1], W + p[1])
            area = (h1 - h0) * (w1 - w0)
            h0, w0, h1, w1 = max(h0, 0), max(w0, 0), min(h1, H), min(w1, W)
            div = divisor_override or (area if count_include_pad else (h1 - h0) * (w1 - w0))
            res[:, :, i, j] = x[:, :, h0:h1, w0:w1].sum(axis=(2, 3)) / div
    return res


def _np_adaptive_avg_pool2d(x, output_size):
    size = tuple(output_size) if isinstance(output_size, (tuple, list)) else (output_size,) * 2
    H, W = x.shape[2:]
    size = tuple(n if o is None else o for n, o in zip((H, W), size))
    res = np.zeros(x.shape[:2] + size, x.dtype)
    for i in range(size[0]):
        for j in range(size[1]):
            h0, h1 = i * H // size[0], math.ceil((i + 1) * H / size[0])
            w0, w1 = j * W // size[1], math.ceil((j + 1) * W / size[1])
            res[:, :, i, j] = x[:, :, h0:h1, w0:w1].mean(axis=(2, 3))
    return res


def _pool_samples(extra, **common):
    def samples(rng, dtype):
        A = lambda *s: _arr(rng, s, -1.0, 1.0, dtype)  # noqa: E731
        out = [((A(2, 3, 4, 4), 2), {}), ((A(1, 2, 5, 5), 3), dict({"stride": 2, "padding": 1}, **extra)),
               ((A(1, 1, 5, 4), (2, 3)), {"stride": (1, 2), "ceil_mode": True}), ((A(2, 4, 4), 2), {})]
        return [(args, dict(kw, **common)) for args, kw in out]
    return samples


def _max_pool_bwd_call(g, x, kernel_size):
    """max_pool2d_backward applied to g for the argmax positions of max_pool2d(x, kernel_size)."""
    _, idx = max_pool2d(x.detach(), kernel_size, return_indices=True)
    return dispatch(MAX_POOL_BWD, (g,), {"indices": idx, "in_hw": tuple(x.shape[2:])})


def _np_max_pool_bwd(g, x, kernel_size):
    k = kernel_size
    N, C, H, W = x.shape
    out = np.zeros_like(x)
    for n, c, i, j in np.ndindex(*g.shape):
        win = x[n, c, i * k:i * k + k, j * k:j * k + k]
        a, b = np.unravel_index(np.argmax(win), win.shape)
        out[n, c, i * k + a, j * k + b] += g[n, c, i, j]
    return out


def _avg_pool_bwd_call(g, in_hw, kernel_size):
    windows = KP.avg_pool_windows(in_hw, (kernel_size,) * 2, (kernel_size,) * 2, (0, 0),
                                  tuple(n // kernel_size for n in in_hw), True, None)
    return dispatch(AVG_POOL_BWD, (g,), {"windows": windows, "in_hw": in_hw})


def _np_avg_pool_bwd(g, in_hw, kernel_size):
    return np.repeat(np.repeat(g, kernel_size, 2), kernel_size, 3) / kernel_size ** 2


def _unbatched_ok(ref):
    """A pooling reference that also takes an unbatched (C, H, W) input."""
    def fn(x, *args, **kwargs):
        if x.ndim == 4:
            return ref(x, *args, **kwargs)
        out = ref(x[None], *args, **kwargs)
        return tuple(o[0] for o in out) if isinstance(out, tuple) else out[0]
    return fn


# ---------------------------------------------------------------------- the entries
_BENCH = {"sizes": [(2, 3, 8, 8), (64, 16, 28, 28)]}
# (values, indices): the formula reads the indices output, saved with the node
MAX_POOL = register(Op("max_pool2d", _max_pool_forward, vjp=[_max_pool_grad], n_outputs=2, outputs=("result", "indices"),
                       dtype="keep", node="MaxPool2DWithIndicesBackward0", bench=_BENCH, call=max_pool2d,
                       ref=_unbatched_ok(_np_max_pool2d), api=("max_pool2d",), method=False,
                       samples=_float_only(_pool_samples({"dilation": 1}, return_indices=True))))  # two outputs
MAX_POOL_BWD = register(Op("max_pool2d_backward", _max_pool_bwd_forward,
                           vjp=[lambda g, s: g.flatten(2).gather(2, s.indices.flatten(2)).reshape(s.indices.shape)],
                           dtype="keep", node="MaxPool2DWithIndicesBackwardBackward0", call=_max_pool_bwd_call,
                           ref=_np_max_pool_bwd, samples=_float_only(lambda rng, dtype: [(
                               (_arr(rng, (2, 3, 2, 2), -1.0, 1.0, dtype),
                                rng.permutation(2 * 3 * 4 * 4).reshape(2, 3, 4, 4).astype(dtype), 2), {})])))
AVG_POOL = register(Op("avg_pool2d", _avg_forward, vjp=[lambda g, s: dispatch(AVG_POOL_BWD, (g,), s.params)],
                       dtype="keep", node="AvgPool2DBackward0", bench=_BENCH, call=avg_pool2d,
                       ref=_unbatched_ok(_np_avg_pool2d), samples=_float_only(_pool_samples({"count_include_pad": False}))))
ADAPTIVE_AVG_POOL = register(Op("adaptive_avg_pool2d", _avg_forward,
                                vjp=[lambda g, s: dispatch(AVG_POOL_BWD, (g,), s.params)], dtype="keep",
                                node="AdaptiveAvgPool2DBackward0", call=adaptive_avg_pool2d,
                                ref=_unbatched_ok(_np_adaptive_avg_pool2d), samples=_float_only(
                                    lambda rng, dtype: [((_arr(rng, s, -1.0, 1.0, dtype), o), {}) for s, o in [
                                        ((2, 3, 5, 5), 2), ((1, 2, 5, 7), (3, 2)), ((2, 4, 4), 1),
                                        ((1, 1, 3, 4), (None, 3))]])))
AVG_POOL_BWD = register(Op("avg_pool2d_backward", _avg_backward_forward,
                           vjp=[lambda g, s: dispatch(AVG_POOL, (g,), s.params)], dtype="keep",
                           node="AvgPool2DBackwardBackward0", call=_avg_pool_bwd_call, ref=_np_avg_pool_bwd,
                           samples=_float_only(lambda rng, dtype: [((_arr(rng, (2, 3, 2, 2), -1.0, 1.0, dtype), (4, 4), 2),
                                                                    {})])))
