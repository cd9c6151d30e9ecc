"""Recurrent cell steps: the gate math after the two GEMMs, one fused loop forward and one backward.

A step of a cell receives ``ig`` (input gates x @ W_ih^T + b_ih, from BLAS), ``hg`` (hidden gates
h @ W_hh^T, from BLAS) and the hidden-gate bias (an empty array when there is none). The math of
one hidden unit is written once, as the ``*_point`` functions below; the CPU loops here and the
CUDA kernels (kernels/cuda/rnn.py, same names and signatures) apply them over (batch, hidden).
Gates are laid out as PyTorch's weights are: LSTM (i, f, g, o), GRU (r, z, n).

The forward writes a workspace that the backward reads instead of recomputing the GEMMs: the
activated LSTM gates (i, f, g, o), or for GRU (r, z, n, h_n) with h_n = W_hn h + b_hn.
"""
from types import SimpleNamespace

import numpy as np
from numba import njit, prange  # noqa: F401  (prange: used by the kernels)

from . import config
from ._jit import twins
from .elementwise import vexp, vtanh


# ---------------------------------------------------------------- one hidden unit (shared with CUDA)
_point = njit(error_model="numpy", fastmath=config.FASTMATH)
POINTS = {}  # name -> the Python function, which kernels/cuda/rnn.py compiles as a device function


def point(fn):
    POINTS[fn.__name__] = fn
    return _point(fn)


@point
def sigmoid(x):
    return 1.0 / (1.0 + vexp(-x))


@point
def lstm_point(zi, zf, zg, zo, c):
    """(i, f, g, o, c', h') of an LSTM unit from its gate pre-activations and cell state."""
    i = sigmoid(zi)
    f = sigmoid(zf)
    g = vtanh(zg)
    o = sigmoid(zo)
    cy = f * c + i * g
    return i, f, g, o, cy, o * vtanh(cy)


@point
def lstm_point_vjp(i, f, g, o, c, ghy, gcy):
    """Pre-activation gradients (di, df, dg, do) and the cell-state gradient dc of an LSTM unit."""
    tc = vtanh(f * c + i * g)
    dcy = gcy + ghy * o * (1.0 - tc * tc)
    return dcy * g * i * (1.0 - i), dcy * c * f * (1.0 - f), dcy * i * (1.0 - g * g), ghy * tc * o * (1.0 - o), dcy * f


@point
def gru_point(ir, iz, in_, hr, hz, hn, h):
    """(r, z, n, h') of a GRU unit: n = tanh(x_n + r * h_n), h' = (1 - z) n + z h."""
    r = sigmoid(ir + hr)
    z = sigmoid(iz + hz)
    n = vtanh(in_ + r * hn)
    return r, z, n, (1.0 - z) * n + z * h


@point
def gru_point_vjp(r, z, n, hn, h, g):
    """(dr, dz, dn) pre-activation gradients, the h_n gradient and the direct h gradient of a GRU unit."""
    dn = g * (1.0 - z) * (1.0 - n * n)
    dz = g * (h - n) * z * (1.0 - z)
    dr = dn * hn * r * (1.0 - r)
    return dr, dz, dn, dn * r, g * z


@point
def rnn_point(x, relu):
    if relu:
        return x if x > 0 or x != x else 0.0
    return vtanh(x)


@point
def rnn_point_vjp(y, g, relu):
    if relu:
        return 0.0 if y <= 0 else g
    return g * (1.0 - y * y)


# ---------------------------------------------------------------- CPU loops over (batch, hidden)
def _lstm_cell(ig, hg, bias, cx, ws, hy, cy):
    B, H = cx.shape
    has_bias = bias.shape[0] != 0
    for b in prange(B):
        for j in range(H):
            zi, zf, zg, zo = ig[b, j] + hg[b, j], ig[b, H + j] + hg[b, H + j], \
                ig[b, 2 * H + j] + hg[b, 2 * H + j], ig[b, 3 * H + j] + hg[b, 3 * H + j]
            if has_bias:
                zi, zf, zg, zo = zi + bias[j], zf + bias[H + j], zg + bias[2 * H + j], zo + bias[3 * H + j]
            i, f, g, o, c, h = lstm_point(zi, zf, zg, zo, cx[b, j])
            ws[b, j], ws[b, H + j], ws[b, 2 * H + j], ws[b, 3 * H + j] = i, f, g, o
            cy[b, j] = c
            hy[b, j] = h


def _lstm_cell_vjp(ws, cx, ghy, gcy, dz, dcx):
    B, H = cx.shape
    for b in prange(B):
        for j in range(H):
            di, df, dg, do, dc = lstm_point_vjp(ws[b, j], ws[b, H + j], ws[b, 2 * H + j], ws[b, 3 * H + j],
                                                cx[b, j], ghy[b, j], gcy[b, j])
            dz[b, j], dz[b, H + j], dz[b, 2 * H + j], dz[b, 3 * H + j] = di, df, dg, do
            dcx[b, j] = dc


def _gru_cell(ig, hg, bias, hx, ws, hy):
    B, H = hx.shape
    has_bias = bias.shape[0] != 0
    for b in prange(B):
        for j in range(H):
            hr, hz, hn = hg[b, j], hg[b, H + j], hg[b, 2 * H + j]
            if has_bias:
                hr, hz, hn = hr + bias[j], hz + bias[H + j], hn + bias[2 * H + j]
            r, z, n, h = gru_point(ig[b, j], ig[b, H + j], ig[b, 2 * H + j], hr, hz, hn, hx[b, j])
            ws[b, j], ws[b, H + j], ws[b, 2 * H + j], ws[b, 3 * H + j] = r, z, n, hn
            hy[b, j] = h


def _gru_cell_vjp(ws, hx, ghy, dig, dhg, dhx):
    B, H = hx.shape
    for b in prange(B):
        for j in range(H):
            dr, dz, dn, dhn, dh = gru_point_vjp(ws[b, j], ws[b, H + j], ws[b, 2 * H + j], ws[b, 3 * H + j],
                                                hx[b, j], ghy[b, j])
            dig[b, j], dig[b, H + j], dig[b, 2 * H + j] = dr, dz, dn
            dhg[b, j], dhg[b, H + j], dhg[b, 2 * H + j] = dr, dz, dhn
            dhx[b, j] = dh


def _rnn_cell(ig, hg, bias, hy, relu):
    B, H = hy.shape
    has_bias = bias.shape[0] != 0
    for b in prange(B):
        for j in range(H):
            x = ig[b, j] + hg[b, j]
            if has_bias:
                x += bias[j]
            hy[b, j] = rnn_point(x, relu)


def _rnn_cell_vjp(hy, ghy, dz, relu):
    B, H = hy.shape
    for b in prange(B):
        for j in range(H):
            dz[b, j] = rnn_point_vjp(hy[b, j], ghy[b, j], relu)


_KERNELS = {f.__name__[1:]: twins(f) for f in (_lstm_cell, _lstm_cell_vjp, _gru_cell, _gru_cell_vjp, _rnn_cell,
                                                _rnn_cell_vjp)}


def kernel(name, size):
    """The serial or parallel build of kernel ``name`` for ``size`` elements."""
    return _KERNELS[name][size >= config.PARALLEL_THRESHOLD]


# ---------------------------------------------------------------- entry points (the backend's names)
def _c(a):
    return np.ascontiguousarray(a)


def _bias(bias, dtype):
    return np.empty(0, dtype) if bias is None else _c(bias)


def lstm_cell(ig, hg, bias, cx):
    """(workspace, h', c') of an LSTM step."""
    B, H = cx.shape
    ws, hy, cy = np.empty((B, 4 * H), cx.dtype), np.empty((B, H), cx.dtype), np.empty((B, H), cx.dtype)
    kernel("lstm_cell", ws.size)(_c(ig), _c(hg), _bias(bias, cx.dtype), _c(cx), ws, hy, cy)
    return ws, hy, cy


def lstm_cell_vjp(ws, cx, ghy, gcy):
    """(gradient of the gate pre-activations, gradient of c) of an LSTM step."""
    dz, dcx = np.empty(ws.shape, ws.dtype), np.empty(cx.shape, cx.dtype)
    kernel("lstm_cell_vjp", ws.size)(_c(ws), _c(cx), _c(ghy), _c(gcy), dz, dcx)
    return dz, dcx


def gru_cell(ig, hg, bias, hx):
    """(workspace, h') of a GRU step."""
    B, H = hx.shape
    ws, hy = np.empty((B, 4 * H), hx.dtype), np.empty((B, H), hx.dtype)
    kernel("gru_cell", ws.size)(_c(ig), _c(hg), _bias(bias, hx.dtype), _c(hx), ws, hy)
    return ws, hy


def gru_cell_vjp(ws, hx, ghy):
    """(input-gate gradient, hidden-gate gradient, direct h gradient) of a GRU step."""
    B, H = hx.shape
    dig, dhg, dhx = np.empty((B, 3 * H), hx.dtype), np.empty((B, 3 * H), hx.dtype), np.empty((B, H), hx.dtype)
    kernel("gru_cell_vjp", ws.size)(_c(ws), _c(hx), _c(ghy), dig, dhg, dhx)
    return dig, dhg, dhx


def rnn_cell(ig, hg, bias, relu):
    """h' = tanh or relu of the summed gates (plus bias)."""
    hy = np.empty(hg.shape, hg.dtype)
    kernel("rnn_cell", hy.size)(_c(ig), _c(hg), _bias(bias, hg.dtype), hy, relu)
    return hy


def rnn_cell_vjp(hy, ghy, relu):
    dz = np.empty(hy.shape, hy.dtype)
    kernel("rnn_cell_vjp", hy.size)(_c(hy), _c(ghy), dz, relu)
    return dz


# ---------------------------------------------------------------- whole layers (one direction)
# A layer runs its steps over a packed sequence: ``ig`` holds the input gates of every step's rows,
# step t's ``batch_sizes[t]`` rows after those of the steps before it (a dense (T, B) sequence has
# every batch size B). Rows finish in order (batch sizes never grow), so a state row keeps its last
# value once its sequence has ended; a reverse layer walks the steps backwards, and a row starts
# from h0 when its sequence begins. The workspace holds, per row, what the backward reads:
# LSTM [gates i f g o | c before | h before | h before the projection], GRU [r z n h_n | h before],
# RNN [h after | h before]; its backward runs the steps in the opposite order, one fused VJP kernel
# and one GEMM per step, then one GEMM for the whole W_hh gradient. ``K`` is the backend:
# matmul, empty, zeros, copy_into(dst, src), add_into(dst, src), sum0, and the step kernels.
def _steps(batch_sizes, reverse):
    """(row offset, batch size) of each step in the order the layer runs them."""
    out, off = [], 0
    for bs in batch_sizes:
        out.append((off, bs))
        off += bs
    return out[::-1] if reverse else out


def _ws_width(mode, H, P, proj):
    return {"LSTM": 5 * H + P + (H if proj else 0), "GRU": 5 * H, "RNN_TANH": 2 * H, "RNN_RELU": 2 * H}[mode]


def layer(K, mode, ig, h0, c0, w_hh, b_hh, w_hr, batch_sizes, reverse):
    """Run one direction of a layer: (workspace, output rows, h_n, c_n or None)."""
    N, B, P = ig.shape[0], h0.shape[0], h0.shape[1]
    proj = w_hr is not None
    H = w_hr.shape[1] if proj else P
    dt = ig.dtype
    ws = K.empty((N, _ws_width(mode, H, P, proj)), dt)
    out = K.empty((N, P), dt)
    h = K.empty((B, P), dt)
    K.copy_into(h, h0)
    c = None
    if mode == "LSTM":
        c = K.empty((B, H), dt)
        K.copy_into(c, c0)
    w_t = K.swapaxes(w_hh, 0, 1)
    bias = K.empty((0,), dt) if b_hh is None else b_hh
    relu = mode == "RNN_RELU"
    for off, bs in _steps(batch_sizes, reverse):
        rows = slice(off, off + bs)
        hb = h[:bs]
        hg = K.matmul(hb, w_t)
        if mode == "LSTM":
            cb = c[:bs]
            K.copy_into(ws[rows, 4 * H:5 * H], cb)
            K.copy_into(ws[rows, 5 * H:5 * H + P], hb)
            if proj:
                hraw = ws[rows, 5 * H + P:]
                K.step("lstm_cell", ig[rows], hg, bias, cb, ws[rows, :4 * H], hraw, cb)
                K.copy_into(hb, K.matmul(hraw, K.swapaxes(w_hr, 0, 1)))
            else:
                K.step("lstm_cell", ig[rows], hg, bias, cb, ws[rows, :4 * H], hb, cb)
        elif mode == "GRU":
            K.copy_into(ws[rows, 4 * H:], hb)
            K.step("gru_cell", ig[rows], hg, bias, hb, ws[rows, :4 * H], hb)
        else:
            K.copy_into(ws[rows, H:], hb)
            K.step("rnn_cell", ig[rows], hg, bias, hb, relu)
            K.copy_into(ws[rows, :H], hb)
        K.copy_into(out[rows], hb)
    return ws, out, h, c


def layer_vjp(K, mode, ws, w_hh, w_hr, g_out, g_hn, g_cn, batch_sizes, reverse, has_bias):
    """Gradients (input gates, h0, c0 or None, W_hh, b_hh or None, W_hr or None) of one direction of a layer."""
    N, P = g_out.shape
    proj = w_hr is not None
    H = w_hr.shape[1] if proj else P
    B = batch_sizes[0]
    dt = g_out.dtype
    G = {"LSTM": 4 * H, "GRU": 3 * H}.get(mode, H)
    dh = K.empty((B, P), dt)
    K.copy_into(dh, g_hn)
    dc = None
    if mode == "LSTM":
        dc = K.empty((B, H), dt)
        K.copy_into(dc, g_cn)
    dz = K.empty((N, G), dt)  # gradient of the input gates (and, but for GRU, of the hidden gates)
    dhg = K.empty((N, G), dt) if mode == "GRU" else dz
    dproj = K.empty((N, P), dt) if proj else None
    relu = mode == "RNN_RELU"
    for off, bs in _steps(batch_sizes, not reverse):
        rows = slice(off, off + bs)
        hb = dh[:bs]
        K.add_into(hb, g_out[rows])
        if mode == "LSTM":
            cb = dc[:bs]
            draw = hb
            if proj:
                K.copy_into(dproj[rows], hb)
                draw = K.matmul(hb, w_hr)
            K.step("lstm_cell_vjp", ws[rows, :4 * H], ws[rows, 4 * H:5 * H], draw, cb, dz[rows], cb)
            K.copy_into(hb, K.matmul(dz[rows], w_hh))
        elif mode == "GRU":
            direct = K.empty((bs, H), dt)
            K.step("gru_cell_vjp", ws[rows, :4 * H], ws[rows, 4 * H:], hb, dz[rows], dhg[rows], direct)
            K.copy_into(hb, K.matmul(dhg[rows], w_hh))
            K.add_into(hb, direct)
        else:
            K.step("rnn_cell_vjp", ws[rows, :H], hb, dz[rows], relu)
            K.copy_into(hb, K.matmul(dz[rows], w_hh))
    h_prev = ws[:, 5 * H:5 * H + P] if mode == "LSTM" else ws[:, 4 * H:] if mode == "GRU" else ws[:, H:]
    g_w = K.matmul(K.swapaxes(dhg, 0, 1), h_prev)
    g_b = K.sum0(dhg) if has_bias else None
    g_whr = K.matmul(K.swapaxes(dproj, 0, 1), ws[:, 5 * H + P:]) if proj else None
    return dz, dh, dc, g_w, g_b, g_whr


def _step(name, *args):
    """A step kernel on (possibly strided) views; serial or parallel by size."""
    kernel(name, args[0].size)(*args)


def _add_into(dst, src):
    np.add(dst, src, out=dst)


def _sum0(x):
    return x.sum(0)


CPU = SimpleNamespace(matmul=np.matmul, empty=np.empty, swapaxes=np.swapaxes, copy_into=np.copyto,
                      add_into=_add_into, sum0=_sum0, step=_step)


def rnn_layer(mode, ig, h0, c0, w_hh, b_hh, w_hr, batch_sizes, reverse):
    return layer(CPU, mode, ig, h0, c0, w_hh, b_hh, w_hr, batch_sizes, reverse)


def rnn_layer_vjp(mode, ws, w_hh, w_hr, g_out, g_hn, g_cn, batch_sizes, reverse, has_bias):
    return layer_vjp(CPU, mode, ws, w_hh, w_hr, g_out, g_hn, g_cn, batch_sizes, reverse, has_bias)
