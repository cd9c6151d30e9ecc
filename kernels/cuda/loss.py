"""CUDA twins of kernels/loss.py: the fused loss kernels as grid-stride kernels, same entry points.

The per-element math is kernels/loss.py's ``pointwise`` and ``pointwise_vjp``, compiled unchanged as
device functions. The reduced forms map each element's loss on the device, then sum it with the
block-parallel reduction of reduce.py.
"""
import math

import numpy as np
from numba import cuda

from .. import loss as cpu
from . import _launch as L, asserts
from .asserts import TARGET_OUT_OF_BOUNDS, record
from .array import ascontiguous, astype, broadcast_to, copy, empty, reshape, to_host, zeros
from .elementwise import run
from .reduce import reduce

_softplus_neg = L.device_jit(cpu.softplus_neg)
_pointwise = L.device_jit(L.function_with_globals(cpu.pointwise, _softplus_neg=_softplus_neg))
_pointwise_vjp = L.device_jit(L.function_with_globals(cpu.pointwise_vjp, _softplus_neg=_softplus_neg))


@L.jit
def _loss_map(kind, x, t, w, pw, beta, out):
    hw, hp = w.shape[0] != 0, pw.shape[0] != 0
    for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        out[i] = _pointwise(kind, x[i], t[i], w[i] if hw else 1.0, pw[i] if hp else 1.0, beta)


@L.jit
def _loss_vjp(kind, g, x, t, w, pw, beta, scale, wrt_target, out):
    hw, hp, hg = w.shape[0] != 0, pw.shape[0] != 0, g.shape[0] != 1
    for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        gi = g[i] if hg else g[0]
        out[i] = gi * scale * _pointwise_vjp(kind, x[i], t[i], w[i] if hw else 1.0, pw[i] if hp else 1.0, beta,
                                             wrt_target)


@L.jit
def _nll_map(x, t, w, ignore_index, out, flag):
    N, C, D = x.shape
    hw = w.shape[0] != 0
    for k in range(cuda.grid(1), N * D, cuda.gridsize(1)):
        n, d = k // D, k % D
        c = t[n, d]
        if c == ignore_index:
            out[n, d] = 0.0
        elif c < 0 or c >= C:  # raised by the host at its next wait (kernels.cuda.asserts)
            record(flag, TARGET_OUT_OF_BOUNDS, c)
            out[n, d] = 0.0
        else:
            out[n, d] = -(w[c] if hw else 1.0) * x[n, c, d]


@L.jit
def _nll_vjp(g, t, w, ignore_index, scale, out):
    N, C, D = out.shape
    hw, hg = w.shape[0] != 0, g.shape[0] != 1
    for k in range(cuda.grid(1), N * D, cuda.gridsize(1)):
        n, d = k // D, k % D
        c = t[n, d]
        if c != ignore_index and 0 <= c < C:
            out[n, c, d] = -(w[c] if hw else 1.0) * (g[k] if hg else g[0]) * scale


class _Backend:
    """The array functions flat_operands needs, for device arrays."""
    empty = staticmethod(empty)
    broadcast_to = staticmethod(broadcast_to)
    reshape = staticmethod(reshape)
    copy = staticmethod(copy)
    astype = staticmethod(astype)


def _launch(kernel, n, *args):
    if n:
        L.launch(kernel, L.blocks_for(n), L.THREADS, *args)


def _scaled_sum(values, scale):
    """sum(values) * scale as a 0-d device array."""
    s = reduce("sum", values, (0,))
    return run("mul", np.dtype(values.dtype), s, np.dtype(values.dtype).type(scale))


def pointwise_loss(kind, x, t, w, pw, beta, reduction):
    shape, x, t, w, pw = cpu.flat_operands(x, t, w, pw, _Backend)
    n = x.shape[0]
    out = empty((n,), x.dtype)
    _launch(_loss_map, n, kind, x, t, w, pw, float(beta), out)
    if reduction == "none":
        return reshape(out, shape)
    return _scaled_sum(out, cpu.reduction_scale(reduction, n))


def pointwise_loss_vjp(kind, g, x, t, w, pw, beta, reduction, wrt_target):
    shape, x, t, w, pw = cpu.flat_operands(x, t, w, pw, _Backend)
    n = x.shape[0]
    g = reshape(ascontiguous(g), (n if reduction == "none" else 1,))
    out = empty((n,), x.dtype)
    _launch(_loss_vjp, n, kind, g, x, t, w, pw, float(beta), cpu.reduction_scale(reduction, n), wrt_target, out)
    return reshape(out, shape)


def _nll_layout(x, t):
    if x.ndim == 1:
        return reshape(ascontiguous(x), (1, x.shape[0], 1)), reshape(ascontiguous(t), (1, 1))
    N, C, D = x.shape[0], x.shape[1], math.prod(x.shape[2:])
    return reshape(ascontiguous(x), (N, C, D)), reshape(ascontiguous(t), (N, D))


def _weight(w, dtype):
    return empty((0,), dtype) if w is None else ascontiguous(w if w.dtype == dtype else astype(w, dtype))


def _nll_scale(t, w, ignore_index, C, reduction):
    """cpu.nll_scale of targets on the device. 'sum' and 'none' need no total: the nll kernel checks the
    targets on the device, as PyTorch's device-side asserts do, without a wait here; 'mean' reads them on the
    host (a target equal to ignore_index counts for nothing, whatever its value; one out of range is left to
    the kernel's check, which raises at the next wait)."""
    if reduction != "mean":
        return 1.0
    return cpu.nll_scale(to_host(t), None if w is None else to_host(w), ignore_index, C, reduction, check=False)


def nll_loss(x, t, w, ignore_index, reduction):
    x3, t2 = _nll_layout(x, t)
    scale = _nll_scale(t2, w, ignore_index, x3.shape[1], reduction)
    out = empty(t2.shape, x.dtype)
    _launch(_nll_map, out.size, x3, t2, _weight(w, x.dtype), ignore_index, out, asserts.flag())
    asserts.launched()
    if reduction == "none":
        return reshape(out, tuple(t.shape))
    return _scaled_sum(reshape(out, (out.size,)), scale)


def nll_loss_vjp(g, x_shape, t, w, ignore_index, reduction):
    x_shape = tuple(x_shape)
    N = 1 if len(x_shape) == 1 else x_shape[0]
    C = x_shape[0] if len(x_shape) == 1 else x_shape[1]
    D = math.prod(x_shape[2:])
    t2 = reshape(ascontiguous(t), (N, D))
    g = reshape(ascontiguous(g), (N * D if reduction == "none" else 1,))
    out = zeros((N, C, D), g.dtype)
    _launch(_nll_vjp, N * D, g, t2, _weight(w, g.dtype), ignore_index, _nll_scale(t2, w, ignore_index, C, reduction),
            out)
    return reshape(out, x_shape)
