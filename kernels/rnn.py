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
import numba
from numba import njit, prange  # noqa: F401  (prange: used by the kernels)

from . import blas, config
from ._jit import twins
from .vmath import like, vexp


# ---------------------------------------------------------------- one hidden unit (shared with CUDA)
_point = njit(error_model="numpy", fastmath=config.FOLD_FASTMATH, inline="always")
POINTS = {}  # name -> the Python function, which kernels/cuda/rnn.py compiles as a device function


def point(fn):
    POINTS[fn.__name__] = fn
    return _point(fn)


@point
def sigmoid(x):
    one = like(x, 1.0)  # (in x's float type: a float64 literal would make float32 math float64)
    return one / (one + vexp(-x))


@point
def ftanh(x):
    """tanh as 2 sigmoid(2x) - 1: within 4e-16 of tanh (absolute), and the loops that use it vectorize
    (vtanh's branch for small |x| keeps them scalar). In x's float type, as sigmoid."""
    one, two = like(x, 1.0), like(x, 2.0)
    return two / (one + vexp(-two * x)) - one


@point
def lstm_point(zi, zf, zg, zo, c):
    """(i, f, g, o, c', h') of an LSTM unit from its gate pre-activations and cell state."""
    i = sigmoid(zi)
    f = sigmoid(zf)
    g = ftanh(zg)
    o = sigmoid(zo)
    cy = f * c + i * g
    return i, f, g, o, cy, o * ftanh(cy)


@point
def lstm_point_vjp(i, f, g, o, c, ghy, gcy):
    """Pre-activation gradients (di, df, dg, do) and the cell-state gradient dc of an LSTM unit."""
    one = like(i, 1.0)  # (in i's float type, as sigmoid)
    tc = ftanh(f * c + i * g)
    dcy = gcy + ghy * o * (one - tc * tc)
    return dcy * g * i * (one - i), dcy * c * f * (one - f), dcy * i * (one - g * g), ghy * tc * o * (one - o), dcy * f


@point
def gru_point(ir, iz, in_, hr, hz, hn, h):
    """(r, z, n, h') of a GRU unit: n = tanh(x_n + r * h_n), h' = (1 - z) n + z h."""
    r = sigmoid(ir + hr)
    z = sigmoid(iz + hz)
    n = ftanh(in_ + r * hn)
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
    return ftanh(x)


@point
def rnn_point_vjp(y, g, relu):
    if relu:
        return 0.0 if y <= 0 else g
    return g * (1.0 - y * y)


# ---------------------------------------------------------------- CPU loops over (batch, hidden)
# Each batch row is taken as 1-D views first (one per gate block), so that the inner loop over the hidden
# units reads and writes unit-stride streams and LLVM vectorizes it. The bias is always an array (zeros when absent)
# and no output aliases an input: both would keep the loop scalar.
@_point
def _gates(row, H):
    """A row of four gate blocks (i, f, g, o) as four 1-D views: a loop over the hidden units reads and writes
    each as a stream of its own, and LLVM vectorizes it (indexed as row[j], row[H + j], ... it stays scalar)."""
    return row[:H], row[H:2 * H], row[2 * H:3 * H], row[3 * H:4 * H]


def _lstm_cell(ig, hg, bias, cx, ws, hy, cy):
    B, H = cx.shape
    bi, bf, bg, bo = _gates(bias, H)
    for b in prange(B):
        xi, xf, xg, xo = _gates(ig[b], H)
        hi, hf, hg_, ho = _gates(hg[b], H)
        wi, wf, wg, wo = _gates(ws[b], H)
        cxr, hyr, cyr = cx[b], hy[b], cy[b]
        for j in range(H):
            wi[j], wf[j], wg[j], wo[j], cyr[j], hyr[j] = lstm_point(
                xi[j] + hi[j] + bi[j], xf[j] + hf[j] + bf[j], xg[j] + hg_[j] + bg[j], xo[j] + ho[j] + bo[j], cxr[j])


def _lstm_cell_vjp(ws, cx, ghy, gcy, dz, dcx):
    B, H = cx.shape
    for b in prange(B):
        wi, wf, wg, wo = _gates(ws[b], H)
        di, df, dg, do = _gates(dz[b], H)
        cxr, ghr, gcr, dcr = cx[b], ghy[b], gcy[b], dcx[b]
        for j in range(H):
            di[j], df[j], dg[j], do[j], dcr[j] = lstm_point_vjp(wi[j], wf[j], wg[j], wo[j], cxr[j], ghr[j], gcr[j])


def _gru_cell(ig, hg, bias, hx, ws, hy):
    B, H = hx.shape
    for b in prange(B):
        igr, hgr, hxr, wsr, hyr = ig[b], hg[b], hx[b], ws[b], hy[b]
        for j in range(H):
            hn = hgr[2 * H + j] + bias[2 * H + j]
            r, z, n, h = gru_point(igr[j], igr[H + j], igr[2 * H + j], hgr[j] + bias[j], hgr[H + j] + bias[H + j],
                                   hn, hxr[j])
            wsr[j] = r
            wsr[H + j] = z
            wsr[2 * H + j] = n
            wsr[3 * H + j] = hn
            hyr[j] = h


def _gru_cell_vjp(ws, hx, ghy, dig, dhg, dhx):
    B, H = hx.shape
    for b in prange(B):
        wsr, hxr, ghr, digr, dhgr, dhr = ws[b], hx[b], ghy[b], dig[b], dhg[b], dhx[b]
        for j in range(H):
            dr, dz, dn, dhn, dh = gru_point_vjp(wsr[j], wsr[H + j], wsr[2 * H + j], wsr[3 * H + j], hxr[j], ghr[j])
            digr[j] = dr
            digr[H + j] = dz
            digr[2 * H + j] = dn
            dhgr[j] = dr
            dhgr[H + j] = dz
            dhgr[2 * H + j] = dhn
            dhr[j] = dh


def _rnn_cell(ig, hg, bias, hy, relu):
    B, H = hy.shape
    for b in prange(B):
        igr, hgr, hyr = ig[b], hg[b], hy[b]
        for j in range(H):
            hyr[j] = rnn_point(igr[j] + hgr[j] + bias[j], relu)


def _rnn_cell_vjp(hy, ghy, dz, relu):
    B, H = hy.shape
    for b in prange(B):
        hyr, ghr, dzr = hy[b], ghy[b], dz[b]
        for j in range(H):
            dzr[j] = rnn_point_vjp(hyr[j], ghr[j], relu)


_KERNELS = {f.__name__[1:]: twins(f, fastmath=config.FOLD_FASTMATH)
            for f in (_lstm_cell, _lstm_cell_vjp, _gru_cell, _gru_cell_vjp, _rnn_cell, _rnn_cell_vjp)}


def kernel(name, size):
    """The serial or parallel build of kernel ``name`` for ``size`` elements."""
    return _KERNELS[name][size >= config.PARALLEL_THRESHOLD]


# ---------------------------------------------------------------- entry points (the backend's names)
def _c(a):
    return np.ascontiguousarray(a)


def _bias(bias, n, dtype):
    return np.zeros(n, dtype) if bias is None else _c(bias)


def lstm_cell(ig, hg, bias, cx):
    """(workspace, h', c') of an LSTM step."""
    B, H = cx.shape
    ws, hy, cy = np.empty((B, 4 * H), cx.dtype), np.empty((B, H), cx.dtype), np.empty((B, H), cx.dtype)
    kernel("lstm_cell", ws.size)(_c(ig), _c(hg), _bias(bias, 4 * H, cx.dtype), _c(cx), ws, hy, cy)
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
    kernel("gru_cell", ws.size)(_c(ig), _c(hg), _bias(bias, 3 * H, hx.dtype), _c(hx), ws, hy)
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
    kernel("rnn_cell", hy.size)(_c(ig), _c(hg), _bias(bias, hg.shape[1], hg.dtype), hy, relu)
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
# from h0 when its sequence begins. The workspace (one flat array) holds, per row, what the
# backward reads, as blocks of rows: LSTM gates i f g o, c before, h before, h before the projection;
# GRU r z n h_n, h before; RNN h after, h before. Its backward runs the steps in the opposite order,
# one fused VJP kernel and one GEMM per step, then one GEMM for the whole W_hh gradient.
# ``K`` is the backend: matmul, empty, zeros, reshape, copy_into(dst, src), add_into(dst, src),
# sum0, swapaxes and step (a step kernel by name).
def _steps(batch_sizes, reverse):
    """(row offset, batch size) of each step in the order the layer runs them."""
    out, off = [], 0
    for bs in batch_sizes:
        out.append((off, bs))
        off += bs
    return out[::-1] if reverse else out


def _blocks(mode, H, P, proj):
    """The workspace's blocks: (name, columns per row)."""
    if mode == "LSTM":
        return [("gates", 4 * H), ("c", H), ("h", P)] + ([("raw", H)] if proj else [])
    if mode == "GRU":
        return [("gates", 4 * H), ("h", H)]
    return [("y", H), ("h", H)]


def workspace_size(mode, N, H, P, proj):
    return N * sum(w for _, w in _blocks(mode, H, P, proj))


def _views(K, ws, mode, N, H, P, proj):
    """The workspace's blocks as C-contiguous (N, columns) views."""
    out, off = {}, 0
    for name, width in _blocks(mode, H, P, proj):
        out[name] = K.reshape(ws[off:off + N * width], (N, width))
        off += N * width
    return out


def layer(K, mode, ig, h0, c0, w_hh, b_hh, w_hr, batch_sizes, reverse):
    """Run one direction of a layer: (workspace, output rows, h_n, c_n or None)."""
    N, B, P = ig.shape[0], h0.shape[0], h0.shape[1]
    proj = w_hr is not None
    H = w_hr.shape[1] if proj else P
    dt = ig.dtype
    ws = K.empty((workspace_size(mode, N, H, P, proj),), dt)
    v = _views(K, ws, mode, N, H, P, proj)
    out = K.empty((N, P), dt)
    h = K.empty((B, P), dt)
    K.copy_into(h, h0)
    c = None
    if mode == "LSTM":
        c = K.empty((B, H), dt)
        K.copy_into(c, c0)
    w_t = K.swapaxes(w_hh, 0, 1)
    w_hr_t = K.swapaxes(w_hr, 0, 1) if proj else None
    bias = K.zeros((w_hh.shape[0],), dt) if b_hh is None else b_hh
    relu = mode == "RNN_RELU"
    for off, bs in _steps(batch_sizes, reverse):
        rows = slice(off, off + bs)
        hb = h[:bs]
        hg = K.matmul(hb, w_t)
        K.copy_into(v["h"][rows], hb)
        if mode == "LSTM":
            cb = c[:bs]
            K.copy_into(v["c"][rows], cb)
            new_c = K.empty((bs, H), dt)
            if proj:
                raw = v["raw"][rows]
                K.step("lstm_cell", ig[rows], hg, bias, cb, v["gates"][rows], raw, new_c)
                K.copy_into(hb, K.matmul(raw, w_hr_t))
            else:
                K.step("lstm_cell", ig[rows], hg, bias, cb, v["gates"][rows], hb, new_c)
            K.copy_into(cb, new_c)
        elif mode == "GRU":
            K.step("gru_cell", ig[rows], hg, bias, v["h"][rows], v["gates"][rows], hb)
        else:
            K.step("rnn_cell", ig[rows], hg, bias, v["y"][rows], relu)
            K.copy_into(hb, v["y"][rows])
        K.copy_into(out[rows], hb)
    return ws, out, h, c


def layer_vjp(K, mode, ws, w_hh, w_hr, g_out, g_hn, g_cn, batch_sizes, reverse, has_bias):
    """Gradients (input gates, h0, c0 or None, W_hh, b_hh or None, W_hr or None) of one direction of a layer."""
    N, P = g_out.shape
    proj = w_hr is not None
    H = w_hr.shape[1] if proj else P
    B = batch_sizes[0]
    dt = g_out.dtype
    v = _views(K, ws, mode, N, H, P, proj)
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
            new_dc = K.empty((bs, H), dt)
            K.step("lstm_cell_vjp", v["gates"][rows], v["c"][rows], draw, cb, dz[rows], new_dc)
            K.copy_into(cb, new_dc)
            K.copy_into(hb, K.matmul(dz[rows], w_hh))
        elif mode == "GRU":
            direct = K.empty((bs, H), dt)
            K.step("gru_cell_vjp", v["gates"][rows], v["h"][rows], hb, dz[rows], dhg[rows], direct)
            K.copy_into(hb, K.matmul(dhg[rows], w_hh))
            K.add_into(hb, direct)
        else:
            K.step("rnn_cell_vjp", v["y"][rows], hb, dz[rows], relu)
            K.copy_into(hb, K.matmul(dz[rows], w_hh))
    return (dz, dh, dc) + _weight_grads(K, v, dhg, dproj, has_bias)


def _weight_grads(K, v, dhg, dproj, has_bias):
    """(W_hh, b_hh or None, W_hr or None) gradients of a layer: one GEMM each over all its steps."""
    g_w = K.matmul(K.swapaxes(dhg, 0, 1), v["h"])
    g_b = K.sum0(dhg) if has_bias else None
    g_whr = K.matmul(K.swapaxes(dproj, 0, 1), v["raw"]) if dproj is not None else None
    return g_w, g_b, g_whr


def _step(name, *args):
    """A step kernel on (possibly strided) views; serial or parallel by size."""
    kernel(name, args[0].size)(*args)


def _add_into(dst, src):
    np.add(dst, src, out=dst)


def _sum0(x):
    return x.sum(0)


CPU = SimpleNamespace(matmul=np.matmul, empty=np.empty, zeros=np.zeros, reshape=np.reshape, swapaxes=np.swapaxes,
                      copy_into=np.copyto, add_into=_add_into, sum0=_sum0, step=_step)


# ---------------------------------------------------------------- the CPU's layers: blocks of rows, one kernel each
# Batch rows never mix in a recurrence, so the CPU runs a layer's direction as blocks of rows, one per thread, each
# block's whole recurrence in one nogil kernel whose step GEMMs call OpenBLAS (on one thread) in place: no Python
# between steps (the loop above spends ~80 us a step there) and no synchronisation between the threads until the
# end (an OpenBLAS GEMM of a few rows split over the threads waits for them at every step). The gradients of the
# weights then come from one GEMM each over all steps, on all threads. One kernel serves the three cells (the mode
# a run-time number): ``layer``'s loop, step for step.
MIN_BLOCK_ROWS = 8  # fewer rows per block make the step GEMMs too thin to be worth a thread
MODES = {"LSTM": 0, "GRU": 1, "RNN_TANH": 2, "RNN_RELU": 3}
# (the cell loops above, compiled as functions the row kernels call: the same flags as their twins)
_rows_njit = njit(error_model="numpy", fastmath=config.FOLD_FASTMATH)
_lstm_cell_rows, _lstm_cell_vjp_rows = _rows_njit(_lstm_cell), _rows_njit(_lstm_cell_vjp)
_gru_cell_rows, _gru_cell_vjp_rows = _rows_njit(_gru_cell), _rows_njit(_gru_cell_vjp)
_rnn_cell_rows, _rnn_cell_vjp_rows = _rows_njit(_rnn_cell), _rows_njit(_rnn_cell_vjp)


@njit(error_model="numpy", fastmath=config.FASTMATH)
def _copy_rows(dst, src, add):
    """dst = src (dst += src where ``add``), both (rows, columns) arrays with unit-stride rows. (A loop compiles in
    a fraction of the time numba's slice assignment takes.)"""
    for i in range(src.shape[0]):
        d, s = dst[i], src[i]
        if add:
            for j in range(s.size):
                d[j] += s[j]
        else:
            for j in range(s.size):
                d[j] = s[j]


@njit(error_model="numpy", fastmath=config.FASTMATH)
def _layer_rows(fn, mode, ig, h, c, w_hh, bias, w_hr, gates, cs, hs, raws, out, offs, sizes, lo, hi):
    """Rows lo:hi of a layer (``layer``'s loop): steps offs/sizes (in running order), state h (and c); ``gates``
    is the workspace's gates block (an RNN's y), and ``c``, ``cs``, ``raws`` have no rows where unused."""
    hg = np.empty((hi - lo, w_hh.shape[0]), ig.dtype)
    proj = raws.shape[0] > 0
    for t in range(offs.size):
        n = min(sizes[t], hi) - lo
        if n <= 0:
            continue
        r0, r1 = offs[t] + lo, offs[t] + lo + n
        hb = h[lo:lo + n]
        blas.gemm(fn, hb, w_hh, hg[:n], True)
        _copy_rows(hs[r0:r1], hb, False)
        if mode == 0:
            cb = c[lo:lo + n]
            _copy_rows(cs[r0:r1], cb, False)
            _lstm_cell_rows(ig[r0:r1], hg[:n], bias, cs[r0:r1], gates[r0:r1], raws[r0:r1] if proj else hb, cb)
            if proj:  # h = raw @ W_hr^T
                blas.gemm(fn, raws[r0:r1], w_hr, hb, True)
        elif mode == 1:
            _gru_cell_rows(ig[r0:r1], hg[:n], bias, hs[r0:r1], gates[r0:r1], hb)
        else:
            _rnn_cell_rows(ig[r0:r1], hg[:n], bias, gates[r0:r1], mode == 3)
            _copy_rows(hb, gates[r0:r1], False)
        _copy_rows(out[r0:r1], hb, False)


@njit(error_model="numpy", fastmath=config.FASTMATH)
def _layer_rows_vjp(fn, mode, gates, cs, hs, w_hh, w_hr, g_out, dh, dc, dz, dhg, dproj, offs, sizes, lo, hi):
    """Rows lo:hi of a layer's backward (``layer_vjp``'s loop): steps offs/sizes in backward order; ``dhg`` is
    the hidden gates' gradient where it differs from ``dz`` (GRU's)."""
    H = hs.shape[1] if mode else dc.shape[1]
    draws, new_dc = np.empty((hi - lo, H), dz.dtype), np.empty((hi - lo, H), dz.dtype)
    proj = dproj.shape[0] > 0
    for t in range(offs.size):
        n = min(sizes[t], hi) - lo
        if n <= 0:
            continue
        r0, r1 = offs[t] + lo, offs[t] + lo + n
        hb = dh[lo:lo + n]
        _copy_rows(hb, g_out[r0:r1], True)
        if mode == 0:
            cb = dc[lo:lo + n]
            if proj:
                _copy_rows(dproj[r0:r1], hb, False)
                blas.gemm(fn, hb, w_hr, draws[:n], False)
            _lstm_cell_vjp_rows(gates[r0:r1], cs[r0:r1], draws[:n] if proj else hb, cb, dz[r0:r1], new_dc[:n])
            _copy_rows(cb, new_dc[:n], False)
            blas.gemm(fn, dz[r0:r1], w_hh, hb, False)
        elif mode == 1:  # (draws: the direct gradient of h)
            _gru_cell_vjp_rows(gates[r0:r1], hs[r0:r1], hb, dz[r0:r1], dhg[r0:r1], draws[:n])
            blas.gemm(fn, dhg[r0:r1], w_hh, hb, False)
            _copy_rows(hb, draws[:n], True)
        else:
            _rnn_cell_vjp_rows(gates[r0:r1], hb, dz[r0:r1], mode == 3)
            blas.gemm(fn, dz[r0:r1], w_hh, hb, False)


def _layer_blocks(fn, mode, ig, h, c, w_hh, bias, w_hr, gates, cs, hs, raws, out, offs, sizes, bounds):
    for p in prange(bounds.size - 1):
        _layer_rows(fn, mode, ig, h, c, w_hh, bias, w_hr, gates, cs, hs, raws, out, offs, sizes, bounds[p],
                    bounds[p + 1])


def _layer_blocks_vjp(fn, mode, gates, cs, hs, w_hh, w_hr, g_out, dh, dc, dz, dhg, dproj, offs, sizes, bounds):
    for p in prange(bounds.size - 1):
        _layer_rows_vjp(fn, mode, gates, cs, hs, w_hh, w_hr, g_out, dh, dc, dz, dhg, dproj, offs, sizes, bounds[p],
                        bounds[p + 1])


_BLOCKS = {f.__name__[1:]: twins(f) for f in (_layer_blocks, _layer_blocks_vjp)}
_BLAS_THREADS = config._openblas_threads()


def _blocked(dtype):
    """Whether a layer of ``dtype`` runs as blocks of rows (needs NumPy's OpenBLAS, float32/64)."""
    return blas.GEMM is not None and dtype in blas.GEMM and _BLAS_THREADS is not None


def _run_blocks(name, batch, *args):
    """Run kernel ``name`` over blocks of the batch's rows: one per thread, OpenBLAS on one thread meanwhile."""
    blocks = max(1, min(numba.get_num_threads(), batch // MIN_BLOCK_ROWS))
    bounds = np.arange(blocks + 1, dtype=np.int64) * batch // blocks
    if blocks == 1:
        return _BLOCKS[name][0](*args, bounds)
    config.on_one_thread(_BLAS_THREADS, _BLOCKS[name][1], *args, bounds)


def _step_arrays(batch_sizes, reverse):
    steps = np.array(_steps(batch_sizes, reverse), np.int64).reshape(-1, 2)
    return np.ascontiguousarray(steps[:, 0]), np.ascontiguousarray(steps[:, 1])


def _blocked_layer(mode, ig, h0, c0, w_hh, b_hh, w_hr, batch_sizes, reverse):
    N, B, P = ig.shape[0], h0.shape[0], h0.shape[1]
    proj = w_hr is not None
    H = w_hr.shape[1] if proj else P
    dt = ig.dtype
    ws = np.empty((workspace_size(mode, N, H, P, proj),), dt)
    v = _views(CPU, ws, mode, N, H, P, proj)
    out = np.empty((N, P), dt)
    h = np.array(h0, dt, order="C")
    none = np.empty((0, H), dt)
    c = np.array(c0, dt, order="C") if mode == "LSTM" else none
    _run_blocks("layer_blocks", B, blas.GEMM[dt], MODES[mode], _c(ig), h, c, _c(w_hh),
                _bias(b_hh, w_hh.shape[0], dt), _c(w_hr) if proj else none, v["y" if mode[:3] == "RNN" else "gates"],
                v.get("c", none), v["h"], v.get("raw", none), out, *_step_arrays(batch_sizes, reverse))
    return ws, out, h, c if mode == "LSTM" else None


def _blocked_layer_vjp(mode, ws, w_hh, w_hr, g_out, g_hn, g_cn, batch_sizes, reverse, has_bias):
    N, P = g_out.shape
    proj = w_hr is not None
    H = w_hr.shape[1] if proj else P
    dt = g_out.dtype
    v = _views(CPU, ws, mode, N, H, P, proj)
    none = np.empty((0, H), dt)
    dh = np.array(g_hn, dt, order="C")
    dc = np.array(g_cn, dt, order="C") if mode == "LSTM" else none
    dz = np.empty((N, w_hh.shape[0]), dt)  # gradient of the input gates (and, but for GRU, of the hidden gates)
    dhg = np.empty((N, w_hh.shape[0]), dt) if mode == "GRU" else dz
    dproj = np.empty((N, P), dt) if proj else None
    _run_blocks("layer_blocks_vjp", batch_sizes[0], blas.GEMM[dt], MODES[mode], v["y" if mode[:3] == "RNN" else "gates"],
                v.get("c", none), v["h"], _c(w_hh), _c(w_hr) if proj else none, _c(g_out), dh, dc, dz, dhg,
                np.empty((0, P), dt) if dproj is None else dproj, *_step_arrays(batch_sizes, not reverse))
    return (dz, dh, dc if mode == "LSTM" else None) + _weight_grads(CPU, v, dhg, dproj, has_bias)


def rnn_layer(mode, ig, h0, c0, w_hh, b_hh, w_hr, batch_sizes, reverse):
    if _blocked(ig.dtype):
        return _blocked_layer(mode, ig, h0, c0, w_hh, b_hh, w_hr, batch_sizes, reverse)
    return layer(CPU, mode, ig, h0, c0, w_hh, b_hh, w_hr, batch_sizes, reverse)


def rnn_layer_vjp(mode, ws, w_hh, w_hr, g_out, g_hn, g_cn, batch_sizes, reverse, has_bias):
    if _blocked(g_out.dtype):
        return _blocked_layer_vjp(mode, ws, w_hh, w_hr, g_out, g_hn, g_cn, batch_sizes, reverse, has_bias)
    return layer_vjp(CPU, mode, ws, w_hh, w_hr, g_out, g_hn, g_cn, batch_sizes, reverse, has_bias)
