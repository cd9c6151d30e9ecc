"""One step of a recurrent cell as one entry: the hidden GEMM h @ W_hh^T (BLAS), then the gate math
as one fused kernel (kernels/rnn.py); its backward is one fused kernel and the GEMMs of the VJP.

The input gates x @ W_ih^T + b_ih come in precomputed (``igates``), so that a layer computes them for
a whole sequence with one GEMM. The VJP formulas recompute the gates from the inputs over table ops
(create_graph records them, so higher-order gradients follow); the fused path reads the workspace
the forward kernel wrote (an output of the node that the public call does not return). The fused
VJPs of one node share one kernel run: the first input's call computes every gradient part, the
last input's call drops them.
"""
import numpy as np

from .._device import backend
from .._op import Op, dispatch
from .._tensor import Tensor
from ._table import _arr, register
from .join import cat

_CELL_INPUTS = ("igates", "hx", "weight_hh", "bias_hh")


def _hidden_gates(xp, hx, w):
    return xp.matmul(hx, xp.swapaxes(w, 0, 1))


def _gates_of(s):
    """hx @ W_hh^T + b_hh over table ops (the formulas' recomputation)."""
    hg = s.hx.matmul(s.weight_hh.t())
    return hg if s.bias_hh is None else hg + s.bias_hh


# ---------------------------------------------------------------------- shared fused parts
def _parts(g, s, compute):
    """The fused backward's arrays of node ``s``, computed once per backward pass."""
    d = s.__dict__
    parts = d.get("_fused_parts")
    if parts is None:
        parts = d["_fused_parts"] = compute(g, s)
    return parts


def _done(s, k, grad):
    """Input ``k``'s fused gradient; the shared parts are dropped after the last input that takes one."""
    if all(nf[0] is None for nf in s.next_functions[k + 1:]):
        s.__dict__.pop("_fused_parts", None)
    return Tensor._wrap(grad)


def _gemm_grads(s, dz, k):
    """Gradient of input ``k`` of (igates, hx, weight_hh, bias_hh) from the pre-activation gradient dz
    (hx's gets any direct term added by the caller)."""
    xp = backend(dz)
    if k == 0:
        return dz
    if k == 1:
        return xp.matmul(dz, s.weight_hh._data)
    if k == 2:
        return xp.matmul(xp.swapaxes(dz, 0, 1), s.hx._data)
    return xp.reduce("sum", dz, (0,))


# ---------------------------------------------------------------------- LSTM
def _lstm_forward(xp, dt, ig, hx, w, b, cx):
    return xp.lstm_cell(ig, _hidden_gates(xp, hx, w), b, cx)


def _lstm_formula(g, s):
    """(dz, dc) over table ops, from the inputs: gates z = igates + hx W_hh^T + b_hh, i f g o = chunks."""
    z = s.igates + _gates_of(s)
    zi, zf, zg, zo = z.chunk(4, 1)
    i, f, c, o = zi.sigmoid(), zf.sigmoid(), zg.tanh(), zo.sigmoid()
    tc = (f * s.cx + i * c).tanh()
    ghy, gcy = g[1], g[2]
    dcy = gcy + ghy * o * (1 - tc * tc)
    dz = cat([dcy * c * i * (1 - i), dcy * s.cx * f * (1 - f), dcy * i * (1 - c * c), ghy * tc * o * (1 - o)], 1)
    return dz, dcy * f


def _lstm_vjp(k):
    def vjp(g, s):
        dz, dc = _lstm_formula(g, s)
        if k == 0:
            return dz
        if k == 1:
            return dz.matmul(s.weight_hh)
        if k == 2:
            return dz.t().matmul(s.hx)
        return dz.sum(0) if k == 3 else dc
    return vjp


def _lstm_parts(g, s):
    return backend(g[1]._data).lstm_cell_vjp(s.workspace._data, s.cx._data, g[1]._data, g[2]._data)


def _lstm_fused(k):
    def fused(g, s):
        dz, dc = _parts(g, s, _lstm_parts)
        return _done(s, k, dc if k == 4 else _gemm_grads(s, dz, k))
    return fused


def lstm_cell_step(igates, hx, weight_hh, bias_hh, cx):
    """(h', c') of one LSTM step from the input gates (B, 4H), h (B, P), W_hh (4H, P), b_hh (4H,) or None, c (B, H)."""
    _, hy, cy = dispatch(LSTM_CELL, (igates, hx, weight_hh, bias_hh, cx))
    return hy, cy


# ---------------------------------------------------------------------- GRU
def _gru_forward(xp, dt, ig, hx, w, b):
    return xp.gru_cell(ig, _hidden_gates(xp, hx, w), b, hx)


def _gru_formula(g, s):
    """(input-gate gradient, hidden-gate gradient, direct h gradient) over table ops."""
    ir, iz, in_ = s.igates.chunk(3, 1)
    hr, hz, hn = _gates_of(s).chunk(3, 1)
    r, z = (ir + hr).sigmoid(), (iz + hz).sigmoid()
    n = (in_ + r * hn).tanh()
    gh = g[1]
    dn = gh * (1 - z) * (1 - n * n)
    dz = gh * (s.hx - n) * z * (1 - z)
    dr = dn * hn * r * (1 - r)
    return cat([dr, dz, dn], 1), cat([dr, dz, dn * r], 1), gh * z


def _gru_vjp(k):
    def vjp(g, s):
        dig, dhg, dh = _gru_formula(g, s)
        if k == 0:
            return dig
        if k == 1:
            return dh + dhg.matmul(s.weight_hh)
        return dhg.t().matmul(s.hx) if k == 2 else dhg.sum(0)
    return vjp


def _gru_parts(g, s):
    return backend(g[1]._data).gru_cell_vjp(s.workspace._data, s.hx._data, g[1]._data)


def _gru_fused(k):
    def fused(g, s):
        dig, dhg, dh = _parts(g, s, _gru_parts)
        if k == 0:
            return _done(s, k, dig)
        grad = _gemm_grads(s, dhg, k)
        if k == 1:
            grad = backend(grad).run("add", grad.dtype, grad, dh, out=grad)
        return _done(s, k, grad)
    return fused


def gru_cell_step(igates, hx, weight_hh, bias_hh):
    """h' of one GRU step from the input gates (B, 3H) with b_ih, h (B, H), W_hh (3H, H), b_hh (3H,) or None."""
    return dispatch(GRU_CELL, (igates, hx, weight_hh, bias_hh))[1]


# ---------------------------------------------------------------------- Elman RNN (tanh, relu)
def _rnn_forward(xp, dt, ig, hx, w, b, relu):
    return xp.rnn_cell(ig, _hidden_gates(xp, hx, w), b, relu)


def _rnn_vjp(k):
    def vjp(g, s):
        dz = g * (s.result > 0) if s.relu else g * (1 - s.result * s.result)
        if k == 0:
            return dz
        if k == 1:
            return dz.matmul(s.weight_hh)
        return dz.t().matmul(s.hx) if k == 2 else dz.sum(0)
    return vjp


def _rnn_parts(g, s):
    return backend(g._data).rnn_cell_vjp(s.result._data, g._data, s.relu)


def _rnn_fused(k):
    def fused(g, s):
        return _done(s, k, _gemm_grads(s, _parts(g, s, _rnn_parts), k))
    return fused


def rnn_tanh_cell_step(igates, hx, weight_hh, bias_hh):
    """tanh(igates + hx W_hh^T + b_hh): one step of an Elman RNN."""
    return dispatch(RNN_TANH_CELL, (igates, hx, weight_hh, bias_hh), _TANH)


def rnn_relu_cell_step(igates, hx, weight_hh, bias_hh):
    """relu(igates + hx W_hh^T + b_hh): one step of an Elman RNN."""
    return dispatch(RNN_RELU_CELL, (igates, hx, weight_hh, bias_hh), _RELU)


_TANH, _RELU = {"relu": False}, {"relu": True}


# ---------------------------------------------------------------------- references and samples
def _sig(x):
    return 1 / (1 + np.exp(-x))


def _np_hidden(hx, w, b):
    return hx @ w.T + (0 if b is None else b)


def _np_lstm(ig, hx, w, b, cx):
    i, f, g, o = np.split(ig + _np_hidden(hx, w, b), 4, axis=1)
    c = _sig(f) * cx + _sig(i) * np.tanh(g)
    return _sig(o) * np.tanh(c), c


def _np_gru(ig, hx, w, b):
    ir, iz, in_ = np.split(ig, 3, axis=1)
    hr, hz, hn = np.split(_np_hidden(hx, w, b), 3, axis=1)
    r, z = _sig(ir + hr), _sig(iz + hz)
    n = np.tanh(in_ + r * hn)
    return (1 - z) * n + z * hx


def _cell_samples(gates, with_c=False):
    """Batch 2, hidden 3 (projected state size 2 for the LSTM's second sample), with and without b_hh."""
    def samples(rng, dtype):
        if np.dtype(dtype).kind != "f":
            return []
        A = lambda *s: _arr(rng, s, -1.0, 1.0, dtype)  # noqa: E731
        out = []
        for P, bias in ((3, True), (2 if with_c else 3, False)):
            args = (A(2, gates * 3), A(2, P), A(gates * 3, P), A(gates * 3) if bias else None)
            out.append((args + ((A(2, 3),) if with_c else ()), {}))
        return out
    return samples


# ---------------------------------------------------------------------- the entries
LSTM_CELL = register(Op("lstm_cell_step", _lstm_forward, inputs=_CELL_INPUTS + ("cx",), n_outputs=3,
                        outputs=("workspace", "hy", "cy"), workspace=("workspace",),
                        vjp=[_lstm_vjp(k) for k in range(5)],
                        fused=[_lstm_fused(k) for k in range(5)], node="ThnnFusedLstmCellBackward0",
                        call=lstm_cell_step, ref=_np_lstm, samples=_cell_samples(4, with_c=True)))
GRU_CELL = register(Op("gru_cell_step", _gru_forward, inputs=_CELL_INPUTS, n_outputs=2,
                       outputs=("workspace", "result"), workspace=("workspace",),
                       vjp=[_gru_vjp(k) for k in range(4)],
                       fused=[_gru_fused(k) for k in range(4)], node="ThnnFusedGruCellBackward0",
                       call=gru_cell_step, ref=_np_gru, samples=_cell_samples(3)))
RNN_TANH_CELL = register(Op("rnn_tanh_cell_step", _rnn_forward, inputs=_CELL_INPUTS,
                            vjp=[_rnn_vjp(k) for k in range(4)], fused=[_rnn_fused(k) for k in range(4)],
                            node="TanhBackward0", call=rnn_tanh_cell_step,
                            ref=lambda ig, hx, w, b: np.tanh(ig + _np_hidden(hx, w, b)), samples=_cell_samples(1)))
RNN_RELU_CELL = register(Op("rnn_relu_cell_step", _rnn_forward, inputs=_CELL_INPUTS,
                            vjp=[_rnn_vjp(k) for k in range(4)], fused=[_rnn_fused(k) for k in range(4)],
                            node="ReluBackward0", call=rnn_relu_cell_step,
                            ref=lambda ig, hx, w, b: np.maximum(ig + _np_hidden(hx, w, b), 0),
                            samples=_cell_samples(1)))


# ---------------------------------------------------------------------- whole layers (one direction)
# A layer's entry runs every step of one direction of one layer (kernels/rnn.py ``layer``): the input
# gates of all steps come in from one GEMM, and the node's fused backward walks the steps back. The
# formulas unroll the same recurrence over table ops (the cell-step entries' formulas), so
# create_graph records it.
class _Step:
    """The attributes a cell-step formula reads (s.igates, s.hx, ...), for one step of a layer."""

    def __init__(self, igates, hx, weight_hh, bias_hh, cx=None):
        self.igates, self.hx, self.weight_hh, self.bias_hh, self.cx = igates, hx, weight_hh, bias_hh, cx


def _layer_steps(s):
    out, off = [], 0
    for bs in s.batch_sizes:
        out.append((off, bs))
        off += bs
    return out[::-1] if s.reverse else out


def _rows_cat(head, full):
    """The first rows of a state replaced by ``head`` (the rest of ``full`` kept)."""
    return head if head.shape[0] == full.shape[0] else cat([head, full[head.shape[0]:]], 0)


def _layer_formula_parts(g, s):
    """Every input gradient of a layer node over table ops: the recurrence rerun, then walked back."""
    mode = s.mode
    lstm = mode == "LSTM"
    w, b, whr = s.weight_hh, s.bias_hh, s.weight_hr if lstm else None
    h, c = s.hx, s.cx if lstm else None
    steps = _layer_steps(s)
    saved = {}
    for off, bs in steps:  # forward, keeping what each step's formula reads
        st = _Step(s.igates[off:off + bs], h[:bs], w, b, c[:bs] if c is not None else None)
        if mode == "LSTM":
            hy, cy = lstm_cell_step(st.igates, st.hx, w, b, st.cx)
            raw = hy
            if whr is not None:
                hy = hy.matmul(whr.t())
            c = _rows_cat(cy, c)
            saved[off] = (st, raw)
        elif mode == "GRU":
            hy = gru_cell_step(st.igates, st.hx, w, b)
            saved[off] = (st, None)
        else:
            hy = (rnn_relu_cell_step if mode == "RNN_RELU" else rnn_tanh_cell_step)(st.igates, st.hx, w, b)
            saved[off] = (st, hy)
        h = _rows_cat(hy, h)
    g_out, dh, dc = g[1], g[2], g[3] if mode == "LSTM" else None
    dz, dhg, hprev, dproj, raws = {}, {}, {}, {}, {}
    for off, bs in steps[::-1]:  # backward
        st, extra = saved[off]
        ghy = dh[:bs] + g_out[off:off + bs]
        if mode == "LSTM":
            draw = ghy
            if whr is not None:
                dproj[off], raws[off] = ghy, extra
                draw = ghy.matmul(whr)
            dz[off], dcx = _lstm_formula((None, draw, dc[:bs]), st)
            dhg[off] = dz[off]
            dc = _rows_cat(dcx, dc)
            dhx = dz[off].matmul(w)
        elif mode == "GRU":
            dz[off], dhg[off], direct = _gru_formula((None, ghy), st)
            dhx = direct + dhg[off].matmul(w)
        else:
            dz[off] = ghy * (extra > 0) if mode == "RNN_RELU" else ghy * (1 - extra * extra)
            dhg[off] = dz[off]
            dhx = dz[off].matmul(w)
        hprev[off] = st.hx
        dh = _rows_cat(dhx, dh)
    order = sorted(dz)
    g_hg = cat([dhg[o] for o in order], 0)
    grads = {"igates": cat([dz[o] for o in order], 0), "hx": dh, "cx": dc,
             "weight_hh": g_hg.t().matmul(cat([hprev[o] for o in order], 0)),
             "bias_hh": g_hg.sum(0) if b is not None else None}
    if dproj:
        grads["weight_hr"] = cat([dproj[o] for o in order], 0).t().matmul(cat([raws[o] for o in order], 0))
    return grads


def _layer_vjp(name):
    def vjp(g, s):
        grads = _parts(g, s, _layer_formula_parts)
        grad = grads[name]
        if all(nf[0] is None for nf in s.next_functions[s.op.inputs.index(name) + 1:]):
            s.__dict__.pop("_fused_parts", None)
        return grad
    return vjp


def _layer_parts(g, s):
    xp = backend(g[1]._data)
    whr = s.weight_hr if s.mode == "LSTM" else None
    dz, dh, dc, g_w, g_b, g_whr = xp.rnn_layer_vjp(
        s.mode, s.workspace._data, s.weight_hh._data, None if whr is None else whr._data, g[1]._data, g[2]._data,
        g[3]._data if s.mode == "LSTM" else None, s.batch_sizes, s.reverse, s.bias_hh is not None)
    return {"igates": dz, "hx": dh, "cx": dc, "weight_hh": g_w, "bias_hh": g_b, "weight_hr": g_whr}


def _layer_fused(name):
    def fused(g, s):
        grads = _parts(g, s, _layer_parts)
        return _done(s, s.op.inputs.index(name), grads[name])
    return fused


def _lstm_layer_forward(xp, dt, ig, hx, cx, w, b, whr, mode, batch_sizes, reverse):
    return xp.rnn_layer(mode, ig, hx, cx, w, b, whr, batch_sizes, reverse)


def _layer_forward(xp, dt, ig, hx, w, b, mode, batch_sizes, reverse):
    return xp.rnn_layer(mode, ig, hx, None, w, b, None, batch_sizes, reverse)[:3]


def rnn_layer(mode, igates, hx, cx, weight_hh, bias_hh, weight_hr, batch_sizes, reverse):
    """One direction of one recurrent layer over a packed sequence of input gates (N, G):
    (output rows (N, P), h_n (B, P), c_n (B, H) or None)."""
    op = _LAYERS[mode]
    params = {"mode": mode, "batch_sizes": tuple(int(b) for b in batch_sizes), "reverse": bool(reverse)}
    if mode == "LSTM":
        _, out, hn, cn = dispatch(op, (igates, hx, cx, weight_hh, bias_hh, weight_hr), params)
        return out, hn, cn
    _, out, hn = dispatch(op, (igates, hx, weight_hh, bias_hh), params)
    return out, hn, None


def _np_layer(mode, ig, hx, cx, w, b, whr, batch_sizes, reverse):
    """The layer as a loop of the NumPy cell references."""
    h, c = hx.copy(), None if cx is None else cx.copy()
    out = np.empty((ig.shape[0], hx.shape[1]), ig.dtype)
    offs = np.cumsum((0,) + tuple(batch_sizes))[:-1]
    order = list(zip(offs, batch_sizes))
    for off, bs in order[::-1] if reverse else order:
        igs = ig[off:off + bs]
        if mode == "LSTM":
            hy, c[:bs] = _np_lstm(igs, h[:bs], w, b, c[:bs])
            h[:bs] = hy if whr is None else hy @ whr.T
        elif mode == "GRU":
            h[:bs] = _np_gru(igs, h[:bs], w, b)
        else:
            z = igs + _np_hidden(h[:bs], w, b)
            h[:bs] = np.maximum(z, 0) if mode == "RNN_RELU" else np.tanh(z)
        out[off:off + bs] = h[:bs]
    return (out, h, c) if mode == "LSTM" else (out, h)


def _layer_samples(mode):
    G = {"LSTM": 4, "GRU": 3}.get(mode, 1)

    def samples(rng, dtype):
        if np.dtype(dtype).kind != "f":
            return []
        A = lambda *s: _arr(rng, s, -1.0, 1.0, dtype)  # noqa: E731
        out = []
        for sizes, reverse, bias, proj in (((2, 2, 2), False, True, False), ((3, 2, 1), True, False, mode == "LSTM")):
            P = 2 if proj else 3
            args = [A(sum(sizes), 3 * G), A(sizes[0], P), A(sizes[0], 3) if mode == "LSTM" else None,
                    A(3 * G, P), A(3 * G) if bias else None, A(P, 3) if proj else None]
            out.append(((mode,) + tuple(args) + (sizes, reverse), {}))
        return out
    return samples


def _layer_call(mode, igates, hx, cx, weight_hh, bias_hh, weight_hr, batch_sizes, reverse):
    out = rnn_layer(mode, igates, hx, cx, weight_hh, bias_hh, weight_hr, batch_sizes, reverse)
    return out if mode == "LSTM" else out[:2]


_LSTM_LAYER_INPUTS = ("igates", "hx", "cx", "weight_hh", "bias_hh", "weight_hr")
_LAYER_INPUTS = ("igates", "hx", "weight_hh", "bias_hh")


def _layer_entry(name, mode, node):
    inputs = _LSTM_LAYER_INPUTS if mode == "LSTM" else _LAYER_INPUTS
    outputs = ("workspace", "output", "h_n") + (("c_n",) if mode == "LSTM" else ())
    forward = _lstm_layer_forward if mode == "LSTM" else _layer_forward
    return register(Op(name, forward, inputs=inputs, n_outputs=len(outputs), outputs=outputs,
                       workspace=("workspace",), vjp=[_layer_vjp(n) for n in inputs],
                       fused=[_layer_fused(n) for n in inputs], node=node,
                       call=_layer_call, ref=_np_layer, samples=_layer_samples(mode)))


_LAYERS = {"LSTM": _layer_entry("lstm_layer", "LSTM", "MkldnnRnnLayerBackward0"),
           "GRU": _layer_entry("gru_layer", "GRU", "GruLayerBackward0"),
           "RNN_TANH": _layer_entry("rnn_tanh_layer", "RNN_TANH", "RnnTanhLayerBackward0"),
           "RNN_RELU": _layer_entry("rnn_relu_layer", "RNN_RELU", "RnnReluLayerBackward0")}
