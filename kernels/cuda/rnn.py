"""CUDA twins of kernels/rnn.py: the recurrent cell steps as grid-stride kernels over (batch, hidden).

The math of one hidden unit is kernels/rnn.py's ``*_point`` functions, compiled unchanged as device
functions (native exp and tanh in place of the CPU's vectorizable ones); the kernels and entry
points have the CPU's names and signatures, and whole layers run the same step loop
(kernels/rnn.py ``layer``) over this backend.
"""
import math
from types import SimpleNamespace

import numpy as np
from numba import cuda

from .. import rnn as cpu
from . import _launch as L
from .array import copy_into, reshape, swapaxes, zeros
from .elementwise import run
from .matmul import matmul
from .reduce import reduce

_MATH = {"vexp": math.exp, "ftanh": math.tanh}
_sigmoid = L.device_jit(L.function_with_globals(cpu.POINTS["sigmoid"], **_MATH))
_POINTS = {name: L.device_jit(L.function_with_globals(fn, sigmoid=_sigmoid, **_MATH))
           for name, fn in cpu.POINTS.items() if name not in ("sigmoid", "ftanh")}
_lstm_point, _lstm_point_vjp = _POINTS["lstm_point"], _POINTS["lstm_point_vjp"]
_gru_point, _gru_point_vjp = _POINTS["gru_point"], _POINTS["gru_point_vjp"]
_rnn_point, _rnn_point_vjp = _POINTS["rnn_point"], _POINTS["rnn_point_vjp"]


@L.jit
def _lstm_cell(ig, hg, bias, cx, ws, hy, cy):
    B, H = cx.shape
    has_bias = bias.shape[0] != 0
    for t in range(cuda.grid(1), B * H, cuda.gridsize(1)):
        b, j = t // H, t % H
        zi, zf = ig[b, j] + hg[b, j], ig[b, H + j] + hg[b, H + j]
        zg, zo = ig[b, 2 * H + j] + hg[b, 2 * H + j], ig[b, 3 * H + j] + hg[b, 3 * H + j]
        if has_bias:
            zi, zf, zg, zo = zi + bias[j], zf + bias[H + j], zg + bias[2 * H + j], zo + bias[3 * H + j]
        i, f, g, o, c, h = _lstm_point(zi, zf, zg, zo, cx[b, j])
        ws[b, j], ws[b, H + j], ws[b, 2 * H + j], ws[b, 3 * H + j] = i, f, g, o
        cy[b, j] = c
        hy[b, j] = h


@L.jit
def _lstm_cell_vjp(ws, cx, ghy, gcy, dz, dcx):
    B, H = cx.shape
    for t in range(cuda.grid(1), B * H, cuda.gridsize(1)):
        b, j = t // H, t % H
        di, df, dg, do, dc = _lstm_point_vjp(ws[b, j], ws[b, H + j], ws[b, 2 * H + j], ws[b, 3 * H + j], cx[b, j],
                                             ghy[b, j], gcy[b, j])
        dz[b, j], dz[b, H + j], dz[b, 2 * H + j], dz[b, 3 * H + j] = di, df, dg, do
        dcx[b, j] = dc


@L.jit
def _gru_cell(ig, hg, bias, hx, ws, hy):
    B, H = hx.shape
    has_bias = bias.shape[0] != 0
    for t in range(cuda.grid(1), B * H, cuda.gridsize(1)):
        b, j = t // H, t % H
        hr, hz, hn = hg[b, j], hg[b, H + j], hg[b, 2 * H + j]
        if has_bias:
            hr, hz, hn = hr + bias[j], hz + bias[H + j], hn + bias[2 * H + j]
        r, z, n, h = _gru_point(ig[b, j], ig[b, H + j], ig[b, 2 * H + j], hr, hz, hn, hx[b, j])
        ws[b, j], ws[b, H + j], ws[b, 2 * H + j], ws[b, 3 * H + j] = r, z, n, hn
        hy[b, j] = h


@L.jit
def _gru_cell_vjp(ws, hx, ghy, dig, dhg, dhx):
    B, H = hx.shape
    for t in range(cuda.grid(1), B * H, cuda.gridsize(1)):
        b, j = t // H, t % H
        dr, dz, dn, dhn, dh = _gru_point_vjp(ws[b, j], ws[b, H + j], ws[b, 2 * H + j], ws[b, 3 * H + j], hx[b, j],
                                             ghy[b, j])
        dig[b, j], dig[b, H + j], dig[b, 2 * H + j] = dr, dz, dn
        dhg[b, j], dhg[b, H + j], dhg[b, 2 * H + j] = dr, dz, dhn
        dhx[b, j] = dh


@L.jit
def _rnn_cell(ig, hg, bias, hy, relu):
    B, H = hy.shape
    has_bias = bias.shape[0] != 0
    for t in range(cuda.grid(1), B * H, cuda.gridsize(1)):
        b, j = t // H, t % H
        x = ig[b, j] + hg[b, j]
        if has_bias:
            x += bias[j]
        hy[b, j] = _rnn_point(x, relu)


@L.jit
def _rnn_cell_vjp(hy, ghy, dz, relu):
    B, H = hy.shape
    for t in range(cuda.grid(1), B * H, cuda.gridsize(1)):
        b, j = t // H, t % H
        dz[b, j] = _rnn_point_vjp(hy[b, j], ghy[b, j], relu)


KERNELS = {"lstm_cell": _lstm_cell, "lstm_cell_vjp": _lstm_cell_vjp, "gru_cell": _gru_cell,
           "gru_cell_vjp": _gru_cell_vjp, "rnn_cell": _rnn_cell, "rnn_cell_vjp": _rnn_cell_vjp}


def step(name, *args):
    """Launch step kernel ``name`` over the (batch, hidden) units of its arguments (views are fine); the grid
    is sized by the first argument, which has at least as many elements as there are units."""
    n = args[0].size
    if n:
        L.launch(KERNELS[name], L.blocks_for(n), L.THREADS, *args)


def _bias(bias, dtype):
    return L.empty((0,), dtype) if bias is None else bias


def lstm_cell(ig, hg, bias, cx):
    B, H = cx.shape
    ws, hy, cy = L.empty((B, 4 * H), cx.dtype), L.empty((B, H), cx.dtype), L.empty((B, H), cx.dtype)
    step("lstm_cell", ig, hg, _bias(bias, cx.dtype), cx, ws, hy, cy)
    return ws, hy, cy


def lstm_cell_vjp(ws, cx, ghy, gcy):
    dz, dcx = L.empty(tuple(ws.shape), ws.dtype), L.empty(tuple(cx.shape), cx.dtype)
    step("lstm_cell_vjp", ws, cx, ghy, gcy, dz, dcx)
    return dz, dcx


def gru_cell(ig, hg, bias, hx):
    B, H = hx.shape
    ws, hy = L.empty((B, 4 * H), hx.dtype), L.empty((B, H), hx.dtype)
    step("gru_cell", ig, hg, _bias(bias, hx.dtype), hx, ws, hy)
    return ws, hy


def gru_cell_vjp(ws, hx, ghy):
    B, H = hx.shape
    dig, dhg, dhx = L.empty((B, 3 * H), hx.dtype), L.empty((B, 3 * H), hx.dtype), L.empty((B, H), hx.dtype)
    step("gru_cell_vjp", ws, hx, ghy, dig, dhg, dhx)
    return dig, dhg, dhx


def rnn_cell(ig, hg, bias, relu):
    hy = L.empty(tuple(hg.shape), hg.dtype)
    step("rnn_cell", ig, hg, _bias(bias, hg.dtype), hy, relu)
    return hy


def rnn_cell_vjp(hy, ghy, relu):
    dz = L.empty(tuple(hy.shape), hy.dtype)
    step("rnn_cell_vjp", hy, ghy, dz, relu)
    return dz


def _add_into(dst, src):
    run("add", dst.dtype, dst, src, out=dst)


def _sum0(x):
    return reduce("sum", x, (0,))


def _empty(shape, dtype):
    return L.empty(shape, np.dtype(dtype))


def _zeros(shape, dtype):
    return zeros(shape, np.dtype(dtype))


GPU = SimpleNamespace(matmul=matmul, empty=_empty, zeros=_zeros, reshape=reshape, swapaxes=swapaxes,
                      copy_into=copy_into, add_into=_add_into, sum0=_sum0, step=step)


def rnn_layer(mode, ig, h0, c0, w_hh, b_hh, w_hr, batch_sizes, reverse):
    return cpu.layer(GPU, mode, ig, h0, c0, w_hh, b_hh, w_hr, batch_sizes, reverse)


def rnn_layer_vjp(mode, ws, w_hh, w_hr, g_out, g_hn, g_cn, batch_sizes, reverse, has_bias):
    return cpu.layer_vjp(GPU, mode, ws, w_hh, w_hr, g_out, g_hn, g_cn, batch_sizes, reverse, has_bias)
