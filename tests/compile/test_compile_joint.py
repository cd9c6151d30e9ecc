"""A compiled scalar of elementwise math computes its gradients in the forward plan's loop (at an output
gradient of one); its backward node only scales them. PyTorch's semantics stay: values and gradients equal
eager's, a gradient other than one, retained graphs, in-place changes of inputs, create_graph, hooks."""
import numpy as np
import pytest

import jitgrad as jg
from jitgrad.compiler import explain, variant


@pytest.fixture(autouse=True)
def joint_for_small_arrays(monkeypatch):
    """The tests' arrays are small; the joint plan is kept for large ones (JOINT_MIN_SIZE)."""
    monkeypatch.setattr(variant, "JOINT_MIN_SIZE", 1)


def loss(x, w, b):
    return ((x * w + b).tanh() ** 2 * x.sigmoid()).sum()


def _leaves(n, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    return [jg.tensor(rng.standard_normal(n).astype(dtype), requires_grad=True) for _ in range(3)]


def _eager_grads(fn, n, dtype, gradient=None):
    leaves = _leaves(n, dtype)
    out = fn(*leaves)
    out.backward(gradient)
    return out.item(), [t.grad.numpy() for t in leaves]


@pytest.mark.parametrize("n", [5, 3000, 100_003])  # one loop, and (above the parallel threshold) blocks of it
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_values_and_gradients_equal_eager(n, dtype):
    ref, ref_grads = _eager_grads(loss, n, dtype)
    leaves = _leaves(n, dtype)
    out = jg.compile(loss)(*leaves)
    assert out.grad_fn.name() == "CompiledFunctionBackward"
    out.backward()
    tol = dict(rtol=2e-5, atol=1e-5) if dtype == np.float32 else dict(rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(out.item(), ref, **tol)
    for t, g in zip(leaves, ref_grads):
        np.testing.assert_allclose(t.grad.numpy(), g, **tol)


def test_the_plan_computes_the_gradients_in_the_forward_loop(monkeypatch):
    x, w, b = _leaves(5000)  # (over the size a tape serves)
    report = str(explain(loss, x, w, b))
    assert "Forward and gradients in one plan" in report and "fused groups: 1" in report
    assert "Backward graph" not in report  # no backward plan: nothing saved, nothing run but a scale
    monkeypatch.setattr(variant, "JOINT_MIN_SIZE", 5001)
    report = str(explain(loss, x, w, b))
    assert "Forward and gradients in one plan" not in report and "Backward graph" in report


def test_a_gradient_other_than_one_scales_them():
    ref, ref_grads = _eager_grads(loss, 300, np.float64, jg.tensor(-2.5, dtype=jg.float64))
    leaves = _leaves(300, np.float64)
    jg.compile(loss)(*leaves).backward(jg.tensor(-2.5, dtype=jg.float64))
    for t, g in zip(leaves, ref_grads):
        np.testing.assert_allclose(t.grad.numpy(), g, rtol=1e-10, atol=1e-15)


def test_a_retained_graph_gives_the_gradients_again():
    _, ref_grads = _eager_grads(loss, 200, np.float64)
    leaves = _leaves(200, np.float64)
    out = jg.compile(loss)(*leaves)
    out.backward(retain_graph=True)
    leaves[0].grad.mul_(0)  # the first .grad took over the plan's array: changing it changes nothing else
    out.backward(retain_graph=True)
    out.backward()
    np.testing.assert_allclose(leaves[0].grad.numpy(), 2 * ref_grads[0], rtol=1e-10, atol=1e-15)
    for t, g in zip(leaves[1:], ref_grads[1:]):
        np.testing.assert_allclose(t.grad.numpy(), 3 * g, rtol=1e-10, atol=1e-15)
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        out.backward()


def test_an_input_changed_in_place_before_backward_is_an_error():
    leaves = _leaves(50, np.float64)
    out = jg.compile(loss)(*leaves)
    with jg.no_grad():
        leaves[0].add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.backward()


def test_scalar_parameters_get_full_sums_and_create_graph_differentiates_again():
    rng = np.random.default_rng(3)
    x = jg.tensor(rng.standard_normal(500), requires_grad=True)
    w = jg.tensor(0.7, dtype=jg.float64, requires_grad=True)

    def f(x, w):
        return (x * w).sin().sum()
    out = jg.compile(f)(x, w)
    (gx, gw) = jg.autograd.grad(out, (x, w), create_graph=True)
    np.testing.assert_allclose(gw.item(), (x.detach().numpy() * np.cos(0.7 * x.detach().numpy())).sum(), rtol=1e-10, atol=1e-15)
    np.testing.assert_allclose(gx.detach().numpy(), 0.7 * np.cos(0.7 * x.detach().numpy()), rtol=1e-10, atol=1e-15)
    gw.backward()  # d/dw of sum(x cos(w x)) = -sum(x^2 sin(w x))
    xs = x.detach().numpy()
    np.testing.assert_allclose(w.grad.item(), -(xs ** 2 * np.sin(0.7 * xs)).sum(), rtol=1e-10)


def test_hooks_see_the_scaled_gradients():
    leaves = _leaves(40, np.float64)
    _, ref_grads = _eager_grads(loss, 40, np.float64, jg.tensor(3.0, dtype=jg.float64))
    seen = []
    leaves[1].register_hook(lambda g: seen.append(g.numpy().copy()))
    jg.compile(loss)(*leaves).backward(jg.tensor(3.0, dtype=jg.float64))
    np.testing.assert_allclose(seen[0], ref_grads[1], rtol=1e-10, atol=1e-15)


def test_a_small_scalar_is_one_tape_of_its_value_and_gradients(monkeypatch):
    """Values of a tape's size (variant.JOINT_MAX_SIZE) make one tape too: a call pays one interpreter
    call, and the backward recomputes nothing. A 0-d input's gradient, scaled, is an array of its own."""
    monkeypatch.setattr(variant, "JOINT_MIN_SIZE", 1 << 30)  # (the fixture's setting off: by size alone)
    x, w, b = _leaves(16)
    s = jg.tensor(np.float32(0.5), requires_grad=True)
    f = jg.compile(lambda x, w, b, s: loss(x, w, b) * s)
    out = f(x, w, b, s)
    var = next(iter(f._jitgrad_compiled.variants.values()))
    assert var.joint is not None and var.bplan is None and "a tape of" in var.plan.source
    out.backward(jg.tensor(np.float32(-2.0)))
    ex, ew, eb = _leaves(16)
    es = jg.tensor(np.float32(0.5), requires_grad=True)
    (loss(ex, ew, eb) * es).backward(jg.tensor(np.float32(-2.0)))
    for t, e in zip((x, w, b, s), (ex, ew, eb, es)):
        assert isinstance(t.grad._data, np.ndarray) and t.grad.shape == e.grad.shape
        np.testing.assert_allclose(t.grad.numpy(), e.grad.numpy(), rtol=2e-5, atol=1e-6)
    monkeypatch.setattr(variant, "JOINT_MAX_SIZE", 15)  # above it (and below JOINT_MIN_SIZE): a backward plan
    f = jg.compile(lambda x, w, b, s: loss(x, w, b) * s)
    f(x, w, b, s)
    var = next(iter(f._jitgrad_compiled.variants.values()))
    assert var.joint is None and "a tape of" in var.bplan.source
