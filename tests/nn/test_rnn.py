"""Recurrent layers, cells and packed sequences: against NumPy references and finite differences
(float64, tiny sizes), and side by side with PyTorch (weights copied) where it is installed."""
import importlib.util
import warnings

import numpy as np
import pytest

import jitgrad as jg
from jitgrad import nn
from jitgrad.autograd import gradcheck, gradgradcheck
from jitgrad.nn.utils import rnn as R
from jitgrad.ops import rnn as ops_rnn

HAS_TORCH = importlib.util.find_spec("torch") is not None
needs_torch = pytest.mark.skipif(not HAS_TORCH, reason="PyTorch is not installed")


def _sig(x):
    return 1 / (1 + np.exp(-x))


def np_lstm(x, h, c, w_ih, w_hh, b_ih, b_hh, w_hr=None):
    """A one-direction LSTM layer over x (T, B, I), step by step."""
    out = []
    for xt in x:
        i, f, g, o = np.split(xt @ w_ih.T + b_ih + h @ w_hh.T + b_hh, 4, axis=1)
        c = _sig(f) * c + _sig(i) * np.tanh(g)
        h = _sig(o) * np.tanh(c)
        if w_hr is not None:
            h = h @ w_hr.T
        out.append(h)
    return np.stack(out), h, c


def np_gru(x, h, w_ih, w_hh, b_ih, b_hh):
    out = []
    for xt in x:
        ir, iz, in_ = np.split(xt @ w_ih.T + b_ih, 3, axis=1)
        hr, hz, hn = np.split(h @ w_hh.T + b_hh, 3, axis=1)
        r, z = _sig(ir + hr), _sig(iz + hz)
        n = np.tanh(in_ + r * hn)
        h = (1 - z) * n + z * h
        out.append(h)
    return np.stack(out), h


def params(m, *names):
    return [getattr(m, n).detach().numpy() for n in names]


# ---------------------------------------------------------------------- against NumPy (no PyTorch needed)
def test_lstm_matches_numpy_reference(rng):
    jg.manual_seed(0)
    m = nn.LSTM(3, 4, proj_size=2).double()
    x = rng.standard_normal((5, 2, 3))
    h0, c0 = rng.standard_normal((1, 2, 2)), rng.standard_normal((1, 2, 4))
    out, (h, c) = m(jg.tensor(x), (jg.tensor(h0), jg.tensor(c0)))
    ref = np_lstm(x, h0[0], c0[0], *params(m, "weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0",
                                          "weight_hr_l0"))
    np.testing.assert_allclose(out.detach().numpy(), ref[0], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(h.detach().numpy()[0], ref[1], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(c.detach().numpy()[0], ref[2], rtol=1e-12, atol=1e-12)


def test_bidirectional_gru_reverse_direction_runs_backwards(rng):
    jg.manual_seed(0)
    m = nn.GRU(3, 4, bidirectional=True, batch_first=True).double()
    x = rng.standard_normal((2, 5, 3))
    out, h = m(jg.tensor(x))
    xt = x.transpose(1, 0, 2)
    h0 = np.zeros((2, 4))
    fwd = np_gru(xt, h0, *params(m, "weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"))
    bwd = np_gru(xt[::-1], h0, *params(m, "weight_ih_l0_reverse", "weight_hh_l0_reverse", "bias_ih_l0_reverse",
                                       "bias_hh_l0_reverse"))
    expected = np.concatenate([fwd[0], bwd[0][::-1]], -1).transpose(1, 0, 2)
    assert out.shape == (2, 5, 8) and h.shape == (2, 2, 4)
    np.testing.assert_allclose(out.detach().numpy(), expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(h.detach().numpy(), np.stack([fwd[1], bwd[1]]), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("cls,kw", [("LSTM", dict(num_layers=2, bidirectional=True, proj_size=2)),
                                    ("GRU", dict(num_layers=2)), ("RNN", dict(nonlinearity="relu", bias=False)),
                                    ("RNN", dict(bidirectional=True))])
def test_layer_gradcheck_inputs_and_weights(cls, kw, rng):
    jg.manual_seed(0)
    m = getattr(nn, cls)(2, 3, **kw).double()
    names = [n for n, _ in m.named_parameters()]
    x = jg.tensor(rng.standard_normal((3, 2, 2)), requires_grad=True)
    weights = [p.detach().clone().requires_grad_() for p in m.parameters()]

    def fn(x, *ws):
        for n, w in zip(names, ws):
            m._parameters[n] = w
        out, state = m(x)
        return out, (state[0] + state[1].sum()) if cls == "LSTM" else state
    assert gradcheck(fn, [x] + weights)


def test_layer_gradgradcheck(rng):
    jg.manual_seed(0)
    m = nn.LSTM(2, 2).double()
    x = jg.tensor(rng.standard_normal((2, 2, 2)), requires_grad=True)
    h0 = jg.tensor(rng.standard_normal((1, 2, 2)), requires_grad=True)
    c0 = jg.tensor(rng.standard_normal((1, 2, 2)), requires_grad=True)
    assert gradgradcheck(lambda x, h, c: m(x, (h, c))[0], [x, h0, c0])
    g = nn.GRU(2, 2).double()
    assert gradgradcheck(lambda x, h: g(x, h)[1], [x, h0])


@pytest.mark.parametrize("step", ["lstm", "gru", "rnn_tanh", "rnn_relu"])
def test_cell_step_gradgradcheck(step, rng):
    G = {"lstm": 4, "gru": 3}.get(step, 1)
    A = lambda *s: jg.tensor(rng.uniform(-1, 1, s), requires_grad=True)  # noqa: E731
    args = [A(2, 3 * G), A(2, 3), A(3 * G, 3), A(3 * G)] + ([A(2, 3)] if step == "lstm" else [])
    fn = getattr(ops_rnn, step + "_cell_step")
    assert gradgradcheck(fn, args)


def test_one_node_per_layer_direction_and_fused_backward_equals_formula(rng):
    jg.manual_seed(0)
    m = nn.LSTM(3, 4, num_layers=2).double()
    x = jg.tensor(rng.standard_normal((6, 2, 3)), requires_grad=True)
    out, (h, c) = m(x)
    layer = out.grad_fn.next_functions[0][0]  # the (T*B, H) rows viewed as (T, B, H)
    assert type(layer).__name__ == "MkldnnRnnLayerBackward0"
    assert type(layer.next_functions[0][0]).__name__ == "AddmmBackward0"  # the input gates: one GEMM per layer
    assert type(h.grad_fn).__name__ == "StackBackward0"
    gs = [jg.tensor(rng.standard_normal(t.shape)) for t in (out, h, c)]
    fused = jg.autograd.grad([out, h, c], [x] + list(m.parameters()), gs, retain_graph=True)
    formula = jg.autograd.grad([out, h, c], [x] + list(m.parameters()), gs, create_graph=True)
    for a, b in zip(fused, formula):
        np.testing.assert_allclose(a.numpy(), b.detach().numpy(), rtol=1e-10, atol=1e-12)


def test_cells_match_numpy(rng):
    jg.manual_seed(0)
    cell = nn.LSTMCell(3, 4).double()
    x, h, c = rng.standard_normal((2, 3)), rng.standard_normal((2, 4)), rng.standard_normal((2, 4))
    hy, cy = cell(jg.tensor(x), (jg.tensor(h), jg.tensor(c)))
    ref = np_lstm(x[None], h, c, *params(cell, "weight_ih", "weight_hh", "bias_ih", "bias_hh"))
    np.testing.assert_allclose(hy.detach().numpy(), ref[1], rtol=1e-12)
    np.testing.assert_allclose(cy.detach().numpy(), ref[2], rtol=1e-12)
    gru = nn.GRUCell(3, 4).double()
    np.testing.assert_allclose(gru(jg.tensor(x), jg.tensor(h)).detach().numpy(),
                               np_gru(x[None], h, *params(gru, "weight_ih", "weight_hh", "bias_ih", "bias_hh"))[1],
                               rtol=1e-12)
    r = nn.RNNCell(3, 4, bias=False, nonlinearity="relu").double()
    np.testing.assert_allclose(r(jg.tensor(x)).detach().numpy(),
                               np.maximum(x @ r.weight_ih.detach().numpy().T, 0), rtol=1e-12)
    assert type(hy.grad_fn).__name__ == "ThnnFusedLstmCellBackward0"
    # unbatched input: 1-D in, 1-D out
    assert cell(jg.tensor(x[0])) [0].shape == (4,)


def test_parameters_names_shapes_and_init():
    jg.manual_seed(0)
    m = nn.LSTM(3, 8, num_layers=2, bidirectional=True, proj_size=2)
    shapes = {n: tuple(p.shape) for n, p in m.named_parameters()}
    assert list(shapes)[:5] == ["weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0", "weight_hr_l0"]
    assert shapes["weight_ih_l1_reverse"] == (32, 4) and shapes["weight_hh_l1"] == (32, 2)
    assert shapes["weight_hr_l0_reverse"] == (2, 8) and len(shapes) == 20
    bound = 1 / np.sqrt(8)
    for p in m.parameters():
        a = p.detach().numpy()
        assert a.min() >= -bound and a.max() <= bound and a.std() > bound / 4
    assert len(m.all_weights) == 4 and m.all_weights[1][0] is m.weight_ih_l0_reverse
    assert m.flatten_parameters() is None
    g = nn.GRU(3, 5, bias=False)
    assert [n for n, _ in g.named_parameters()] == ["weight_ih_l0", "weight_hh_l0"]
    assert tuple(g.weight_ih_l0.shape) == (15, 3)


def test_reprs():
    assert repr(nn.LSTM(3, 4, proj_size=2, num_layers=2, batch_first=True, dropout=0.5, bidirectional=True)) == \
        "LSTM(3, 4, proj_size=2, num_layers=2, batch_first=True, dropout=0.5, bidirectional=True)"
    assert repr(nn.RNN(3, 4, nonlinearity="relu", bias=False)) == "RNN(3, 4, bias=False)"
    assert repr(nn.RNNCell(3, 4, nonlinearity="relu")) == "RNNCell(3, 4, nonlinearity=relu)"
    assert repr(nn.GRUCell(3, 4, bias=False)) == "GRUCell(3, 4, bias=False)"


def test_unbatched_input_and_hidden(rng):
    m = nn.GRU(3, 4, num_layers=2).double()
    x = jg.tensor(rng.standard_normal((5, 3)))
    out, h = m(x)
    assert out.shape == (5, 4) and h.shape == (2, 4)
    out_b, h_b = m(x.unsqueeze(1))
    np.testing.assert_allclose(out.detach().numpy(), out_b.squeeze(1).detach().numpy())
    lstm = nn.LSTM(3, 4).double()
    o, (h, c) = lstm(x, (jg.zeros(1, 4, dtype=jg.float64), jg.zeros(1, 4, dtype=jg.float64)))
    assert o.shape == (5, 4) and h.shape == (1, 4) and c.shape == (1, 4)


def test_dropout_between_layers_only_in_training(rng):
    m = nn.LSTM(3, 4, num_layers=2, dropout=0.5).double()
    x = jg.tensor(rng.standard_normal((5, 2, 3)))
    m.eval()
    a, b = m(x)[0], m(x)[0]
    np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
    m.train()
    jg.manual_seed(1)
    c = m(x)[0]
    assert not np.allclose(c.detach().numpy(), a.detach().numpy())
    with pytest.warns(UserWarning, match="non-zero dropout expects num_layers greater than 1"):
        nn.GRU(3, 4, dropout=0.2)


ERRORS = [
    (lambda: nn.LSTM(3, 4)(jg.randn(5, 2, 6)), RuntimeError,
     "input.size(-1) must be equal to input_size. Expected 3, got 6"),
    (lambda: nn.LSTM(3, 4)(jg.randn(5, 2, 3), (jg.randn(1, 3, 4), jg.randn(1, 2, 4))), RuntimeError,
     "Expected hidden[0] size (1, 2, 4), got [1, 3, 4]"),
    (lambda: nn.LSTM(3, 4)(jg.randn(5, 2, 3), (jg.randn(1, 2, 4), jg.randn(1, 2, 5))), RuntimeError,
     "Expected hidden[1] size (1, 2, 4), got [1, 2, 5]"),
    (lambda: nn.GRU(3, 4, num_layers=2)(jg.randn(5, 2, 3), jg.randn(1, 2, 4)), RuntimeError,
     "Expected hidden size (2, 2, 4), got [1, 2, 4]"),
    (lambda: nn.LSTM(3, 4)(jg.randn(5, 2, 3, dtype=jg.float64)), ValueError,
     "RNN input dtype (jitgrad.float64) does not match weight dtype (jitgrad.float32)"),
    (lambda: nn.RNN(3, 4)(jg.randn(2, 5, 2, 3)), ValueError,
     "RNN: Expected input to be 2D or 3D, got 4D tensor instead"),
    (lambda: nn.LSTM(3, 4)(jg.randn(3)), ValueError, "LSTM: Expected input to be 2D or 3D, got 1D instead"),
    (lambda: nn.GRU(3, 4)(jg.randn(5, 2, 3), jg.randn(2, 4)), RuntimeError,
     "For batched 3-D input, hx should also be 3-D but got 2-D tensor"),
    (lambda: nn.GRU(3, 4)(jg.randn(5, 3), jg.randn(1, 1, 4)), RuntimeError,
     "For unbatched 2-D input, hx should also be 2-D but got 3-D tensor"),
    (lambda: nn.LSTMCell(3, 4)(jg.randn(2, 5)), RuntimeError, "input has inconsistent input_size: got 5 expected 3"),
    (lambda: nn.LSTMCell(3, 4)(jg.randn(2, 3), (jg.randn(2, 5), jg.randn(2, 4))), RuntimeError,
     "hidden0 has inconsistent hidden_size: got 5, expected 4"),
    (lambda: nn.GRUCell(3, 4)(jg.randn(2, 3), jg.randn(3, 4)), RuntimeError,
     "Input batch size 2 doesn't match hidden0 batch size 3"),
    (lambda: nn.RNNCell(3, 4)(jg.randn(2, 2, 3)), ValueError, "RNNCell: Expected input to be 1D or 2D, got 3D instead"),
    (lambda: nn.LSTM(3, 4, proj_size=4), ValueError, "proj_size has to be smaller than hidden_size"),
    (lambda: nn.GRU(3, 4, proj_size=2), ValueError, "proj_size argument is only supported for LSTM, not RNN or GRU"),
    (lambda: nn.RNN(3, 4, nonlinearity="gelu"), ValueError,
     "Unknown nonlinearity 'gelu'. Select from 'tanh' or 'relu'."),
    (lambda: nn.LSTM(3, 0), ValueError, "hidden_size must be greater than zero"),
    (lambda: nn.LSTM(3, 4, dropout=1.5), ValueError, "dropout should be a number in range [0, 1]"),
]


@pytest.mark.parametrize("k", range(len(ERRORS)))
def test_errors_have_pytorchs_messages(k):
    fn, exc, msg = ERRORS[k]
    with pytest.raises(exc) as info:
        fn()
    assert str(info.value).startswith(msg), str(info.value)


@needs_torch
@pytest.mark.parametrize("k", range(len(ERRORS)))
def test_error_messages_are_pytorchs(k):
    import torch
    fn, exc, msg = ERRORS[k]
    # the same call with torch in jitgrad's place raises the same message
    code = fn.__code__
    namespace = dict(fn.__globals__, jg=torch, nn=torch.nn)
    torch_fn = type(fn)(code, namespace)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(exc) as info:
            torch_fn()
    assert str(info.value).startswith(msg.replace("jitgrad.", "torch.")), str(info.value)


# ---------------------------------------------------------------------- packed sequences
def test_pack_and_pad_round_trip(rng):
    x = rng.standard_normal((4, 3, 2))
    lengths = [2, 4, 3]
    t = jg.tensor(x, requires_grad=True)
    packed = R.pack_padded_sequence(t, lengths, enforce_sorted=False)
    assert packed.batch_sizes.tolist() == [3, 3, 2, 1]
    assert packed.sorted_indices.tolist() == [1, 2, 0] and packed.unsorted_indices.tolist() == [2, 0, 1]
    np.testing.assert_array_equal(packed.data.detach().numpy()[:3], x[0, [1, 2, 0]])
    padded, out_lengths = R.pad_packed_sequence(packed, batch_first=True, padding_value=-1.0, total_length=5)
    assert out_lengths.tolist() == lengths and padded.shape == (3, 5, 2)
    expected = np.full((3, 5, 2), -1.0)
    for b, n in enumerate(lengths):
        expected[b, :n] = x[:n, b]
    np.testing.assert_array_equal(padded.detach().numpy(), expected)
    padded.sum().backward()
    mask = np.arange(4)[:, None] < np.array(lengths)[None, :]
    np.testing.assert_array_equal(t.grad.numpy(), np.broadcast_to(mask[..., None], x.shape).astype(float))


def test_packed_lstm_equals_each_sequence_alone(rng):
    jg.manual_seed(0)
    m = nn.LSTM(2, 3, bidirectional=True).double()
    seqs = [rng.standard_normal((n, 2)) for n in (2, 4, 3)]
    packed = R.pack_sequence([jg.tensor(s) for s in seqs], enforce_sorted=False)
    out, (h, c) = m(packed)
    padded, lengths = R.pad_packed_sequence(out)
    for b, s in enumerate(seqs):
        alone, (hb, cb) = m(jg.tensor(s))
        np.testing.assert_allclose(padded[:len(s), b].detach().numpy(), alone.detach().numpy(), rtol=1e-12)
        np.testing.assert_allclose(h[:, b].detach().numpy(), hb.detach().numpy(), rtol=1e-12)
        assert not padded[len(s):, b].detach().numpy().any()


def test_pad_sequence_sides_and_errors():
    seqs = [jg.ones(2, 1), jg.ones(3, 1) * 2]
    right = R.pad_sequence(seqs, batch_first=True, padding_value=-1).squeeze(-1)
    left = R.pad_sequence(seqs, batch_first=True, padding_side="left").squeeze(-1)
    assert right.tolist() == [[1, 1, -1], [2, 2, 2]] and left.tolist() == [[0, 1, 1], [2, 2, 2]]
    with pytest.raises(RuntimeError, match="must be sorted in decreasing order when `enforce_sorted` is True"):
        R.pack_padded_sequence(jg.randn(3, 2, 1), [1, 3])
    with pytest.raises(RuntimeError, match="Length of all samples has to be greater than 0"):
        R.pack_padded_sequence(jg.randn(3, 2, 1), [0, 3], enforce_sorted=False)
    with pytest.raises(RuntimeError, match=r"Expected `len\(lengths\)` to be equal to batch_size, but got 3"):
        R.pack_padded_sequence(jg.randn(3, 2, 1), [3, 2, 1])
    packed = R.pack_padded_sequence(jg.randn(3, 2, 1), [3, 2])
    with pytest.raises(ValueError, match="Expected total_length to be at least the length of the longest"):
        R.pad_packed_sequence(packed, total_length=2)


# ---------------------------------------------------------------------- side by side with PyTorch
def _copy_weights(tm, jm):
    assert [n for n, _ in tm.named_parameters()] == [n for n, _ in jm.named_parameters()]
    for n, p in tm.named_parameters():
        getattr(jm, n).data = jg.tensor(p.detach().numpy().copy())


def _flat(o):
    return [o] if not isinstance(o, tuple) else [y for z in o for y in _flat(z)]


@needs_torch
@pytest.mark.parametrize("cls,kw,shape", [
    ("LSTM", dict(num_layers=2, bidirectional=True, batch_first=True), (2, 5, 3)),
    ("LSTM", dict(proj_size=2, num_layers=2, bidirectional=True), (5, 2, 3)),
    ("GRU", dict(num_layers=2, bidirectional=True), (5, 2, 3)),
    ("RNN", dict(num_layers=2, nonlinearity="relu", bias=False), (5, 2, 3)),
    ("RNN", dict(), (5, 3)),
    ("LSTMCell", dict(), (2, 3)), ("GRUCell", dict(), (2, 3)), ("RNNCell", dict(nonlinearity="relu"), (3,))])
def test_matches_pytorch_with_copied_weights(cls, kw, shape, rng):
    import torch
    tm = getattr(torch.nn, cls)(3, 4, **kw).double()
    jm = getattr(nn, cls)(3, 4, **kw).double()
    _copy_weights(tm, jm)
    assert repr(jm) == repr(tm)
    _same_as_pytorch(torch, tm, jm, rng.standard_normal(shape), (1e-10, 1e-12), (1e-10, 1e-12))


def _same_as_pytorch(torch, tm, jm, x, tol, grad_tol):
    """Module ``jm`` and PyTorch's ``tm`` (same weights) on input ``x``: outputs within ``tol`` (rtol, atol), and
    the gradients of the input and every parameter within ``grad_tol``."""
    tx, jx = torch.tensor(x, requires_grad=True), jg.tensor(x, requires_grad=True)
    to, jo = _flat(tm(tx)), _flat(jm(jx))
    for a, b in zip(to, jo):
        assert b.dtype == jg.tensor(a.detach().numpy()).dtype
        np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=tol[0], atol=tol[1])
    sum((t * (i + 1)).sum() for i, t in enumerate(to)).backward()
    sum((t * (i + 1)).sum() for i, t in enumerate(jo)).backward()
    np.testing.assert_allclose(jx.grad.numpy(), tx.grad.numpy(), rtol=grad_tol[0], atol=grad_tol[1])
    for n, p in tm.named_parameters():
        np.testing.assert_allclose(getattr(jm, n).grad.numpy(), p.grad.numpy(), rtol=grad_tol[0], atol=grad_tol[1],
                                   err_msg=n)


@needs_torch
@pytest.mark.parametrize("cls", ["LSTM", "GRU"])
def test_float32_layers_match_pytorchs_float32_layers(cls, rng):
    """The float32 cell loops compute their gates in float32, as PyTorch's do: outputs and gradients agree with
    PyTorch's float32 ones to float32 precision over 20 steps of two layers."""
    import torch
    tm, jm = getattr(torch.nn, cls)(8, 16, num_layers=2), getattr(nn, cls)(8, 16, num_layers=2)
    _copy_weights(tm, jm)
    _same_as_pytorch(torch, tm, jm, rng.standard_normal((20, 3, 8)).astype(np.float32), (2e-5, 2e-6), (1e-4, 2e-5))


@needs_torch
@pytest.mark.parametrize("cls", ["LSTM", "GRU", "RNN"])
def test_packed_sequences_match_pytorch(cls, rng):
    import torch
    from torch.nn.utils import rnn as TR
    kw = dict(proj_size=2, num_layers=2, bidirectional=True) if cls == "LSTM" else dict(bidirectional=True)
    tm, jm = getattr(torch.nn, cls)(2, 3, **kw).double(), getattr(nn, cls)(2, 3, **kw).double()
    _copy_weights(tm, jm)
    x = rng.standard_normal((4, 3, 2))
    tx, jx = torch.tensor(x, requires_grad=True), jg.tensor(x, requires_grad=True)
    tp = TR.pack_padded_sequence(tx, [2, 4, 3], enforce_sorted=False)
    jp = R.pack_padded_sequence(jx, [2, 4, 3], enforce_sorted=False)
    to, ts = tm(tp)
    jo, js = jm(jp)
    tpad = TR.pad_packed_sequence(to, batch_first=True, total_length=5)[0]
    jpad = R.pad_packed_sequence(jo, batch_first=True, total_length=5)[0]
    np.testing.assert_allclose(jpad.detach().numpy(), tpad.detach().numpy(), rtol=1e-10, atol=1e-12)
    for a, b in zip(_flat(ts), _flat(js)):
        np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=1e-10, atol=1e-12)
    ((tpad * tpad).sum() + sum(t.sum() for t in _flat(ts))).backward()
    ((jpad * jpad).sum() + sum(t.sum() for t in _flat(js))).backward()
    np.testing.assert_allclose(jx.grad.numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-12), (np.float32, 2e-5)])
@pytest.mark.parametrize("mode,sizes,reverse,proj", [
    ("LSTM", (19,) * 3, False, False), ("LSTM", (19, 14, 9, 2), True, True), ("LSTM", (17, 17, 8, 1), False, True),
    ("GRU", (19,) * 3, False, False), ("GRU", (19, 14, 9, 2), True, False), ("RNN_TANH", (17, 17, 8, 1), False, False),
    ("RNN_RELU", (19, 14, 9, 2), True, False)])
def test_layer_in_row_blocks_matches_the_reference_and_the_step_loop(mode, sizes, reverse, proj, dtype, tol, rng,
                                                                     monkeypatch):
    """The CPU runs a layer as blocks of batch rows, one kernel each (kernels/rnn.py); three blocks here,
    packed sequences ending inside and across them."""
    from jitgrad.kernels import rnn as kr
    if not kr._blocked(np.dtype(dtype)):
        pytest.skip("NumPy's BLAS is not a 64-bit-integer OpenBLAS")
    monkeypatch.setattr(kr.numba, "get_num_threads", lambda: 3)
    B, H, N = sizes[0], 5, sum(sizes)
    G = {"LSTM": 4, "GRU": 3}.get(mode, 1) * H
    P = 3 if proj else H
    A = lambda *s: rng.uniform(-1, 1, s).astype(dtype)  # noqa: E731
    ig, h0, w, b, whr = A(N, G), A(B, P), A(G, P), A(G), A(P, H) if proj else None
    c0 = A(B, H) if mode == "LSTM" else None
    ws, out, hn, cn = kr.rnn_layer(mode, ig, h0, c0, w, b, whr, sizes, reverse)
    assert (cn is None) == (mode != "LSTM")
    for got, want in zip((out, hn, cn), ops_rnn._np_layer(mode, ig, h0, c0, w, b, whr, sizes, reverse)):
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    loop_ws = kr.layer(kr.CPU, mode, ig, h0, c0, w, b, whr, sizes, reverse)[0]
    np.testing.assert_allclose(ws, loop_ws, rtol=tol, atol=tol)
    g = (A(N, P), A(B, P), A(B, H) if mode == "LSTM" else None, sizes, reverse, True)
    for got, want in zip(kr.rnn_layer_vjp(mode, ws, w, whr, *g), kr.layer_vjp(kr.CPU, mode, ws, w, whr, *g)):
        assert (got is None) == (want is None)
        if got is not None:
            np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


@pytest.mark.parametrize("mode", ["LSTM", "GRU", "RNN_TANH"])
def test_layer_in_row_blocks_gradcheck(mode, rng, monkeypatch):
    from jitgrad.kernels import rnn as kr
    monkeypatch.setattr(kr.numba, "get_num_threads", lambda: 2)
    sizes = (17, 16, 9)
    G = {"LSTM": 4, "GRU": 3}.get(mode, 1) * 2
    A = lambda *s: jg.tensor(rng.uniform(-1, 1, s), requires_grad=True)  # noqa: E731
    if mode == "LSTM":
        args, fn = [A(sum(sizes), G), A(17, 2), A(17, 2), A(G, 2), A(G)], lambda ig, h, c, w, b: ops_rnn.rnn_layer(
            mode, ig, h, c, w, b, None, sizes, True)
    else:
        args, fn = [A(sum(sizes), G), A(17, 2), A(G, 2), A(G)], lambda ig, h, w, b: ops_rnn.rnn_layer(
            mode, ig, h, None, w, b, None, sizes, True)
    assert gradcheck(lambda *a: tuple(t for t in fn(*a) if t is not None), args)
