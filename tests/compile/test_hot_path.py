"""The per-op fast paths keep every behaviour: flat loops on 1-D operands (strided ones included),
rare grad modes seen across threads, add/sub's alpha, lazily made node locks, the chain path of the
engine next to branching graphs."""
import threading

import numpy as np
import pytest

import jitgrad as jg
from jitgrad import _grad_mode


def _np(t):
    return t.detach().numpy()


def test_flat_loops_on_1d_operands_match_numpy():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(16).astype(np.float32), rng.standard_normal(16).astype(np.float32)
    x, y = jg.tensor(a), jg.tensor(b)
    np.testing.assert_allclose(_np(x * y), a * b, rtol=1e-6)
    np.testing.assert_allclose(_np(x + 2), a + 2, rtol=1e-6)
    np.testing.assert_allclose(_np(3.0 - x), 3 - a, rtol=1e-6)
    np.testing.assert_allclose(_np(x.tanh()), np.tanh(a), rtol=1e-6)
    assert (x < y).dtype is jg.bool and (_np(x < y) == (a < b)).all()
    big = jg.tensor(np.arange(32, dtype=np.float64))
    strided = big[::2]  # a 1-D view with a step: the loop reads it through its strides
    np.testing.assert_array_equal(_np(strided * strided), np.arange(0, 32, 2.0) ** 2)
    np.testing.assert_array_equal(_np(strided + jg.ones(16, dtype=jg.float64)), np.arange(0, 32, 2.0) + 1)
    assert _np(jg.ones(0) * jg.ones(0)).shape == (0,)


def test_zero_dim_operands_take_the_scalar_loop_and_keep_their_types():
    """0-d operands go to the loop as scalars (the path of a graph of scalar ops): results are 0-d arrays
    of the promoted dtype, numbers included, and their gradients too."""
    a, b = jg.tensor(np.float32(1.5), requires_grad=True), jg.tensor(np.float32(-0.25), requires_grad=True)
    for _ in range(2):  # the first call compiles the loop through the general path, the second takes it directly
        y = a * b
        assert y.shape == () and y.dtype is jg.float32 and y.item() == np.float32(1.5) * np.float32(-0.25)
        e = a.exp()
        assert e.shape == () and e.item() == pytest.approx(np.exp(1.5), rel=1e-6)
    assert (a * 2).dtype is jg.float32 and (jg.tensor(3) * 2).dtype is jg.int64 and (jg.tensor(3) * 2).item() == 6
    assert (jg.tensor(2.0, dtype=jg.float64) * a).dtype is jg.float64  # two 0-d tensors: promoted
    assert (jg.tensor(True) & jg.tensor(False)).item() is False
    (a * b).exp().backward()
    assert a.grad.shape == () and a.grad.item() == pytest.approx(-0.25 * np.exp(-0.375), rel=1e-6)
    assert b.grad.item() == pytest.approx(1.5 * np.exp(-0.375), rel=1e-6)


def test_mixed_dtypes_and_broadcasting_still_checked():
    i = jg.tensor([1, 2, 3])
    f = jg.tensor([0.5, 0.5, 0.5])
    assert (i * f).dtype is jg.float32 and (i * f).tolist() == [0.5, 1.0, 1.5]
    assert (i * 2).dtype is jg.int64
    with pytest.raises(RuntimeError, match="The size of tensor a \\(3\\) must match the size of tensor b \\(2\\)"):
        jg.ones(3) * jg.ones(2)
    assert (jg.ones(2, 3) + jg.ones(3)).shape == (2, 3)


def test_fused_backward_on_1d_and_broadcast_operands():
    x = jg.tensor([0.5, -1.0, 2.0], requires_grad=True)
    w = jg.tensor(1.5, requires_grad=True)  # 0-d: the gradient is reduced back
    y = ((x * w).tanh() * x).sigmoid().sum()
    y.backward()
    xv, wv = np.array([0.5, -1.0, 2.0]), 1.5
    t = np.tanh(xv * wv)
    s = 1 / (1 + np.exp(-(t * xv)))
    gs = s * (1 - s)
    np.testing.assert_allclose(_np(x.grad), gs * ((1 - t * t) * wv * xv + t), rtol=1e-5)
    np.testing.assert_allclose(_np(w.grad), (gs * (1 - t * t) * xv * xv).sum(), rtol=1e-5)


def test_add_sub_alpha_default_and_given():
    a = jg.tensor([1.0, 2.0], requires_grad=True)
    b = jg.tensor([3.0, 4.0], requires_grad=True)
    y = jg.add(a, b)
    assert y.grad_fn._saved_alpha == 1
    z = jg.sub(a, b, alpha=2)
    assert z.grad_fn._saved_alpha == 2 and z.tolist() == [-5.0, -6.0]
    (y.sum() + z.sum()).backward()
    assert a.grad.tolist() == [2.0, 2.0] and b.grad.tolist() == [-1.0, -1.0]
    c = jg.add(a, b, alpha=0.5)
    g, = jg.autograd.grad(c.sum(), b)
    assert g.tolist() == [0.5, 0.5]
    gg = jg.autograd.grad((a - b).sum(), b, create_graph=True)[0]
    assert gg.tolist() == [-1.0, -1.0]


def test_rare_modes_are_seen_in_their_thread_only():
    assert _grad_mode.SPECIAL[0] == 0
    inside, outside = {}, {}
    entered, release = threading.Event(), threading.Event()

    def worker():
        with jg.inference_mode():
            entered.set()
            release.wait(10)
            inside["t"] = jg.ones(2) * 2
    th = threading.Thread(target=worker)
    th.start()
    entered.wait(10)
    assert _grad_mode.SPECIAL[0] == 1
    outside["t"] = jg.ones(2) * 2  # this thread is not in inference mode
    release.set()
    th.join()
    assert inside["t"].is_inference() and not outside["t"].is_inference()
    assert _grad_mode.SPECIAL[0] == 0


def test_saved_tensor_hooks_and_anomaly_on_the_fast_path():
    packed = []

    def pack(t):
        packed.append(t.shape)
        return t
    x = jg.tensor([1.0, 2.0], dtype=jg.float64, requires_grad=True)
    with jg.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        y = (x * x).tanh()
    assert packed == [(2,), (2,), (2,)]  # x twice for mul, the result of tanh
    y.sum().backward()
    np.testing.assert_allclose(_np(x.grad), (1 - np.tanh([1.0, 4.0]) ** 2) * 2 * np.array([1.0, 2.0]), rtol=1e-5)
    with pytest.warns(UserWarning, match="Anomaly Detection has been enabled"), jg.autograd.detect_anomaly():
        z = x * 2
    assert z.grad_fn._anomaly_trace is not None
    assert (x * 2).grad_fn._anomaly_trace is None and _grad_mode.SPECIAL[0] == 0


def test_version_check_on_the_fused_path():
    x = jg.tensor([1.0, 2.0], requires_grad=True)
    y = x.tanh()
    z = y * 2
    y.add_(1)  # y is saved by tanh (its result) and by nothing else here: tanh's backward must refuse
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        (z.sum() + y.sum()).backward()


def test_accumulate_grad_lock_made_once_across_threads():
    w = jg.ones(4, requires_grad=True)
    errors = []

    def worker():
        try:
            for _ in range(20):
                (w * 2).sum().backward()
        except Exception as e:  # noqa: BLE001
            errors.append(e)
    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and w.grad.tolist() == [160.0] * 4


def test_chain_and_branching_graphs_give_the_same_gradients():
    x = jg.tensor([0.3, -0.7], dtype=jg.float64, requires_grad=True)
    assert jg.autograd.gradcheck(lambda t: (t * t).tanh().sigmoid(), (x,))
    assert jg.autograd.gradcheck(lambda t: t.tanh() * t.sigmoid() + t.exp(), (x,))
    assert jg.autograd.gradgradcheck(lambda t: (t * t).tanh() * t, (x,))
