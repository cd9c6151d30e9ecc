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
    return ((1 - z) * n + z * hx,)  # the public call's one output


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
                        outputs=("workspace", "hy", "cy"), vjp=[_lstm_vjp(k) for k in range(5)],
                        fused=[_lstm_fused(k) for k in range(5)], node="ThnnFusedLstmCellBackward0",
                        call=lstm_cell_step, ref=_np_lstm, samples=_cell_samples(4, with_c=True)))
GRU_CELL = register(Op("gru_cell_step", _gru_forward, inputs=_CELL_INPUTS, n_outputs=2,
                       outputs=("workspace", "result"), vjp=[_gru_vjp(k) for k in range(4)],
                       fused=[_gru_fused(k) for k in range(4)], node="ThnnFusedGruCellBackward0",
                       call=gru_cell_step, ref=_np_gru, samples=_cell_samples(3)))
RNN_TANH_CELL = register(Op("rnn_tanh_cell_step", _rnn_forward, inputs=_CELL_INPUTS,
                            vjp=[_rnn_vjp(k) for k in range(4)], fused=[_rnn_fused(k) for k in range(4)],
                            node="TanhBackward0", call=rnn_tanh_cell_step,
                            ref=lambda ig, hx, w, b: np.tanh(ig + _np_hidden(hx, w, b)), samples=_cell_samples(1)))
RNN_RELU_CELL = register(Op("rnn_relu_cell_step", _rnn_forward, inputs=_CELL_INPUTS,
                            vjp=[_rnn_vjp(k) for k in range(4)], fused=[_rnn_fused(k) for k in range(4)],
                            node="ReluBackward0", call=rnn_relu_cell_step,
                            ref=lambda ig, hx, w, b: np.maximum(ig + _np_hidden(hx, w, b), 0), samples=_cell_samples(1)))
