"""Fused loss kernels: the pointwise losses and nll_loss, forward (reduced or not) and VJP in one pass.

A pointwise loss is one scalar function of (input x, target t, weight w, pos_weight pw, beta) chosen
by ``kind`` (the KINDS below), and its derivative in x or t. One loop per task serves every kind:
``_loss_map`` (reduction='none'), ``_loss_sum`` (mean and sum: the sum, accumulated in float64) and
``_loss_vjp``. nll_loss works on the (N, C, D) layout of its input (D: the dims after the class dim)
and the (N, D) target. kernels/cuda/loss.py holds the CUDA twins with the same entry points.

Arrays reach the loops flat and C-contiguous; a weight that is absent is an empty array.
"""
import math

import numpy as np
from numba import njit, prange  # noqa: F401  (prange: used by the loops)

from . import config
from ._jit import twins

KINDS = {"mse_loss": 0, "smooth_l1_loss": 1, "huber_loss": 2, "binary_cross_entropy": 3,
         "binary_cross_entropy_with_logits": 4}


# ---------------------------------------------------------------- one element (shared with CUDA)
def softplus_neg(x):
    """log(1 + exp(-x)), stable for every x."""
    return math.log1p(math.exp(-abs(x))) + max(-x, 0.0)


def pointwise(kind, x, t, w, pw, beta):
    """The loss of one element: w * f(x, t) (beta: smooth_l1's beta, huber's delta)."""
    if kind == 0:
        d = x - t
        return w * d * d
    if kind == 1:
        d = abs(x - t)
        return w * (0.5 * d * d / beta if d < beta else d - 0.5 * beta)
    if kind == 2:
        d = abs(x - t)
        return w * (0.5 * d * d if d < beta else beta * (d - 0.5 * beta))
    if kind == 3:  # each log clamped at -100, as PyTorch does
        return w * ((t - 1) * max(math.log1p(-x), -100.0) - t * max(math.log(x), -100.0))
    return w * ((1 - t) * x + (1 + (pw - 1) * t) * _softplus_neg(x))


def pointwise_vjp(kind, x, t, w, pw, beta, wrt_target):
    """d loss / d x of one element, or d loss / d t when ``wrt_target``."""
    if kind <= 2:
        d = x - t
        if kind == 0:
            r = 2 * d
        elif kind == 1:
            r = -1.0 if d < -beta else 1.0 if d > beta else d / beta
        else:
            r = -beta if d < -beta else beta if d > beta else d
        return -w * r if wrt_target else w * r
    if kind == 3:
        if wrt_target:
            return w * (math.log1p(-x) - math.log(x))
        return w * (x - t) / max((1 - x) * x, 1e-12)
    if wrt_target:
        return w * ((pw - 1) * _softplus_neg(x) - x)
    sig = 1 / (1 + math.exp(-x)) if x >= 0 else math.exp(x) / (1 + math.exp(x))
    return w * ((pw * t + 1 - t) * sig - pw * t)


# CPU builds, inlined into the loops (pointwise finds its helper as _softplus_neg; CUDA swaps in its own).
_softplus_neg = njit(inline="always")(softplus_neg)
_pointwise = njit(inline="always")(pointwise)
_pointwise_vjp = njit(inline="always")(pointwise_vjp)


# ---------------------------------------------------------------- CPU loops
def _loss_map(kind, x, t, w, pw, beta, out):
    hw, hp = w.shape[0] != 0, pw.shape[0] != 0
    for i in prange(x.shape[0]):
        out[i] = _pointwise(kind, x[i], t[i], w[i] if hw else 1.0, pw[i] if hp else 1.0, beta)


def _loss_sum(kind, x, t, w, pw, beta):
    hw, hp = w.shape[0] != 0, pw.shape[0] != 0
    s = 0.0
    for i in prange(x.shape[0]):
        s += _pointwise(kind, x[i], t[i], w[i] if hw else 1.0, pw[i] if hp else 1.0, beta)
    return s


def _loss_vjp(kind, g, x, t, w, pw, beta, scale, wrt_target, out):
    """out = g * scale * d loss / d (x or t); g has one element per element, or one in all."""
    hw, hp, hg = w.shape[0] != 0, pw.shape[0] != 0, g.shape[0] != 1
    for i in prange(x.shape[0]):
        gi = g[i] if hg else g[0]
        out[i] = gi * scale * _pointwise_vjp(kind, x[i], t[i], w[i] if hw else 1.0, pw[i] if hp else 1.0, beta,
                                             wrt_target)


def _nll_map(x, t, w, ignore_index, out):
    N, C, D = x.shape
    hw = w.shape[0] != 0
    for k in prange(N * D):
        n, d = k // D, k % D
        c = t[n, d]
        out[n, d] = 0.0 if c == ignore_index else -(w[c] if hw else 1.0) * x[n, c, d]


def _nll_sum(x, t, w, ignore_index):
    N, C, D = x.shape
    hw = w.shape[0] != 0
    s = 0.0
    for k in prange(N * D):
        n, d = k // D, k % D
        c = t[n, d]
        if c != ignore_index:
            s -= (w[c] if hw else 1.0) * x[n, c, d]
    return s


def _nll_vjp(g, t, w, ignore_index, scale, out):
    """out (N, C, D), zero on entry: -w[t] * g * scale at each target class."""
    N, C, D = out.shape
    hw, hg = w.shape[0] != 0, g.shape[0] != 1
    for k in prange(N * D):
        n, d = k // D, k % D
        c = t[n, d]
        if c != ignore_index:
            out[n, c, d] = -(w[c] if hw else 1.0) * (g[k] if hg else g[0]) * scale


# (the sums' threads add up parts of the sum: their serial and parallel builds round differently)
_KERNELS = {f.__name__[1:]: twins(f, same_values=f not in (_loss_sum, _nll_sum),
                                   fastmath=config.FOLD_FASTMATH if f in (_loss_sum, _nll_sum) else None)
            for f in (_loss_map, _loss_sum, _loss_vjp, _nll_map, _nll_sum, _nll_vjp)}


def kernel(name, size):
    """The serial or parallel build of loop ``name`` for ``size`` elements."""
    return _KERNELS[name][size >= config.PARALLEL_THRESHOLD]


# ---------------------------------------------------------------- entry points (shared with kernels/cuda/loss.py)
def flat_operands(x, t, w, pw, xp):
    """(shape, flat x, t, w, pw): the operands broadcast to one shape, flat and C-contiguous (in x's
    dtype); an absent weight is an empty array."""
    shapes = [tuple(a.shape) for a in (x, t, w, pw) if a is not None]
    shape = tuple(np.broadcast_shapes(*shapes))
    n = math.prod(shape)

    def flat(a):
        if a is None:
            return xp.empty((0,), x.dtype)
        if tuple(a.shape) != shape:
            a = xp.broadcast_to(a, shape)
        a = xp.reshape(a if _contiguous(a) else xp.copy(a), (n,))
        return a if a.dtype == x.dtype else xp.astype(a, x.dtype)
    return shape, flat(x), flat(t), flat(w), flat(pw)


def _contiguous(a):
    return a.flags.c_contiguous if a.__class__ is np.ndarray else a.is_c_contiguous()


def reduction_scale(reduction, n):
    """The factor a reduction puts on each element's loss: 1/n for 'mean', else 1."""
    if reduction != "mean":
        return 1.0
    return 1.0 / n if n else math.nan


def pointwise_loss(kind, x, t, w, pw, beta, reduction):
    """Loss ``kind`` of x against t (w, pw: weight and pos_weight, or None), reduced as asked ('none':
    the broadcast shape; 'mean', 'sum': a 0-d array)."""
    shape, x, t, w, pw = flat_operands(x, t, w, pw, np)
    n = x.shape[0]
    if reduction == "none":
        out = np.empty(n, x.dtype)
        kernel("loss_map", n)(kind, x, t, w, pw, float(beta), out)
        return out.reshape(shape)
    s = kernel("loss_sum", n)(kind, x, t, w, pw, float(beta))
    return np.asarray(s * reduction_scale(reduction, n), x.dtype)


def pointwise_loss_vjp(kind, g, x, t, w, pw, beta, reduction, wrt_target):
    """The gradient of ``pointwise_loss`` in x (or t) for output gradient g, in the broadcast shape."""
    shape, x, t, w, pw = flat_operands(x, t, w, pw, np)
    n = x.shape[0]
    g = np.ascontiguousarray(g, x.dtype).reshape(-1) if reduction == "none" else np.asarray(g, x.dtype).reshape(1)
    out = np.empty(n, x.dtype)
    kernel("loss_vjp", n)(kind, g, x, t, w, pw, float(beta), reduction_scale(reduction, n), wrt_target, out)
    return out.reshape(shape)


def nll_layout(x, t):
    """x as (N, C, D) and t as (N, D), C-contiguous (a 1-D input is one sample)."""
    if x.ndim == 1:
        return np.ascontiguousarray(x).reshape(1, x.shape[0], 1), np.ascontiguousarray(t).reshape(1, 1)
    N, C = x.shape[0], x.shape[1]
    D = math.prod(x.shape[2:])
    return np.ascontiguousarray(x).reshape(N, C, D), np.ascontiguousarray(t).reshape(N, D)


def nll_loss(x, t, w, ignore_index, reduction):
    """-w[t] x[t] along the class dim (dim 1, or 0 for a 1-D input); 'mean' divides by the summed weight of
    the targets not ignored. A target out of range raises PyTorch's IndexError."""
    x3, t2 = nll_layout(x, t)
    scale = nll_scale(t2, w, ignore_index, x3.shape[1], reduction)
    w = np.empty(0, x.dtype) if w is None else np.ascontiguousarray(w, x.dtype)
    if reduction == "none":
        out = np.empty(t2.shape, x.dtype)
        kernel("nll_map", out.size)(x3, t2, w, ignore_index, out)
        return out.reshape(t.shape)
    s = kernel("nll_sum", t2.size)(x3, t2, w, ignore_index)
    return np.asarray(s * scale, x.dtype)


def nll_total_weight(t, w, ignore_index, C, check=True):
    """The summed weight of the targets that are not ignored (what 'mean' divides by); checks each is a
    class index (PyTorch's IndexError), or with ``check=False`` leaves out those that are not."""
    t = np.asarray(t)
    if t.size and not 0 <= ignore_index < C and 0 <= t.min() and t.max() < C:  # the common case: all valid
        return float(t.size) if w is None else float(np.asarray(w).reshape(-1)[t].sum())
    valid = t != ignore_index
    bad = valid & ((t < 0) | (t >= C))
    if bad.any():
        if check:
            raise IndexError("Target %d is out of bounds." % t[bad].reshape(-1)[0])
        valid &= ~bad
    if w is None:
        return float(np.count_nonzero(valid))
    return float(np.asarray(w).reshape(-1)[t[valid]].sum())


def nll_scale(t, w, ignore_index, C, reduction, check=True):
    """The factor on each picked term: 1/total weight for 'mean' (NaN when every target is ignored), else 1;
    the targets checked either way (unless ``check`` is False)."""
    total = nll_total_weight(t, w, ignore_index, C, check)
    if reduction != "mean":
        return 1.0
    return 1.0 / total if total else math.nan


def nll_loss_vjp(g, x_shape, t, w, ignore_index, reduction):
    """The gradient of ``nll_loss`` in its input for output gradient g."""
    N = 1 if len(x_shape) == 1 else x_shape[0]
    C = x_shape[0] if len(x_shape) == 1 else x_shape[1]
    D = math.prod(x_shape[2:])
    t2 = np.ascontiguousarray(t).reshape(N, D)
    scale = nll_scale(t2, w, ignore_index, C, reduction)
    w = np.empty(0, g.dtype) if w is None else np.ascontiguousarray(w, g.dtype)
    g = np.ascontiguousarray(g).reshape(-1) if reduction == "none" else np.asarray(g).reshape(1)
    out = np.zeros((N, C, D), g.dtype)
    kernel("nll_vjp", t2.size)(g, t2, w, ignore_index, scale, out)
    return out.reshape(x_shape)
