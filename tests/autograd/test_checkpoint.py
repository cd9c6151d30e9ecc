"""Activation checkpointing (jitgrad.utils.checkpoint): no activations kept by the checkpointed
segment, the forward recomputed in backward, and the same gradients as without it."""
import numpy as np
import pytest

import jitgrad as jg
import jitgrad.utils
from jitgrad.autograd import grad
from jitgrad.utils.checkpoint import CheckpointError, checkpoint, checkpoint_sequential
from jitgrad.viz import saved_tensors


def saved_bytes(*roots):
    """Bytes of the arrays held by the tensors saved for backward in the graph below ``roots`` (each array
    counted once; a value packed by saved-tensor hooks counts if it is a tensor)."""
    arrays, seen, stack = {}, set(), [r.grad_fn for r in roots]
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        for _, st in saved_tensors(node):
            value = st._data if st._data is not None else st._packed
            arr = getattr(value, "_data", value)
            if isinstance(arr, np.ndarray):
                arrays[id(arr)] = arr.nbytes
        stack.extend(nf[0] for nf in node.next_functions if nf is not None)
    return sum(arrays.values())


RNG = np.random.default_rng(0)
X0, W0, V0 = RNG.standard_normal((8, 16)), RNG.standard_normal((16, 16)) / 4, RNG.standard_normal((16, 4)) / 4


def block(x, w):
    h = (x @ w).tanh()
    return (h * h).sigmoid() * h


def run(use_checkpoint):
    x, w, v = (jg.tensor(a, requires_grad=True) for a in (X0, W0, V0))
    h = checkpoint(block, x, w, use_reentrant=False) if use_checkpoint else block(x, w)
    loss = (h @ v).exp().mean()
    held = saved_bytes(loss)
    loss.backward()
    return held, loss.item(), x.grad.numpy(), w.grad.numpy(), v.grad.numpy()


def test_saves_memory_and_gives_identical_gradients():
    plain, ckpt = run(False), run(True)
    # with checkpointing only what lies outside the block is held: h (its output) for the matmul, v, exp's result
    assert ckpt[0] == (8 * 16 + 16 * 4 + 8 * 4) * 8
    # without, the block also keeps x and w (for the matmul), tanh's output (for tanh, both sides of h * h and
    # the last mul) and sigmoid's output (for sigmoid and the last mul): float64 arrays, each counted once
    assert plain[0] - ckpt[0] == (8 * 16 + 16 * 16 + 8 * 16 + 8 * 16) * 8
    assert plain[1] == ckpt[1]
    for a, b in zip(plain[2:], ckpt[2:]):
        np.testing.assert_array_equal(a, b)


def test_forward_runs_again_in_backward_only_once():
    calls = []

    def f(x):
        calls.append(1)
        return x.sin().exp()
    x = jg.tensor([0.5, 1.0], requires_grad=True)
    y = checkpoint(f, x, use_reentrant=False)
    assert len(calls) == 1
    y.sum().backward()
    assert len(calls) == 2
    np.testing.assert_allclose(x.grad.numpy(), np.cos([0.5, 1.0]) * np.exp(np.sin([0.5, 1.0])), rtol=1e-6)


def test_module_is_callable_and_default_is_non_reentrant():
    x = jg.tensor([0.5, 1.0], requires_grad=True)
    y = jitgrad.utils.checkpoint(lambda a: a * a, x)
    y.sum().backward()
    assert x.grad.tolist() == [1.0, 2.0]
    with pytest.raises(ValueError, match="use_reentrant=False only"):
        checkpoint(lambda a: a, x, use_reentrant=True)


def test_keyword_arguments_grad_and_backward_inputs():
    x = jg.tensor([0.5, 1.0], dtype=jg.float64, requires_grad=True)
    w = jg.tensor([2.0, 3.0], dtype=jg.float64, requires_grad=True)
    y = checkpoint(lambda a, scale: (a * scale).tanh(), x, scale=w, use_reentrant=False)
    gx, = grad(y.sum(), x, retain_graph=True)
    t = np.tanh(np.array([0.5, 1.0]) * [2.0, 3.0])
    np.testing.assert_allclose(gx.numpy(), (1 - t ** 2) * [2.0, 3.0])
    y.sum().backward(inputs=[w])
    np.testing.assert_allclose(w.grad.numpy(), (1 - t ** 2) * [0.5, 1.0])
    assert x.grad is None


def test_retain_graph_and_second_backward():
    x = jg.tensor([0.5, 1.0], requires_grad=True)
    y = checkpoint(lambda a: a.exp() * a, x, use_reentrant=False).sum()
    y.backward(retain_graph=True)
    first = x.grad.numpy().copy()
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * first)
    with pytest.raises(RuntimeError, match="^Trying to backward through the graph a second time"):
        y.backward()


def test_double_backward_through_checkpoint():
    x = jg.tensor([0.5, 1.0], dtype=jg.float64, requires_grad=True)
    y = checkpoint(lambda a: (a ** 3).sin(), x, use_reentrant=False).sum()
    g, = grad(y, x, create_graph=True)
    h, = grad(g.sum(), x)
    a = np.array([0.5, 1.0])
    expected = 6 * a * np.cos(a ** 3) - 9 * a ** 4 * np.sin(a ** 3)
    np.testing.assert_allclose(h.numpy(), expected, rtol=1e-10)


def test_random_state_is_replayed():
    def noisy(a):
        return a * jg.rand(a.shape)
    x = jg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    jg.manual_seed(0)
    y = checkpoint(lambda a: noisy(a) * a, x, use_reentrant=False)
    y.sum().backward()  # the recomputation draws the same mask...
    after_backward = jg.rand(2).tolist()
    jg.manual_seed(0)
    mask = jg.rand(3)
    np.testing.assert_allclose(x.grad.numpy(), 2 * mask.numpy() * x.detach().numpy(), rtol=1e-6)
    assert jg.rand(2).tolist() == after_backward  # ...and leaves the user's random stream where it was


def test_inplace_on_an_input_after_checkpoint_is_caught():
    x = jg.tensor([0.5, 1.0], requires_grad=True)
    a = x * 1
    y = checkpoint(lambda t: t.sin(), a, use_reentrant=False)
    a.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_nondeterministic_function_is_caught():
    shapes = iter([(2,), (3,)])

    def f(a):
        n = next(shapes)[0]
        return (a[:n] * a[:n]).sum()
    x = jg.tensor([0.5, 1.0, 2.0], requires_grad=True)
    y = checkpoint(f, x, use_reentrant=False)
    with pytest.raises(CheckpointError, match="^jitgrad.utils.checkpoint: Recomputed values for the following tensors "
                                              "have different metadata than during the forward pass.\ntensor at "
                                              "position 0:"):
        y.backward()


def test_checkpoint_sequential():
    fns = [lambda a: a.sin(), lambda a: a * 2, lambda a: a.exp(), lambda a: a.tanh()]
    x = jg.tensor([0.1, 0.2], dtype=jg.float64, requires_grad=True)
    y = checkpoint_sequential(fns, 2, x, use_reentrant=False).sum()
    y.backward()
    ref = jg.tensor([0.1, 0.2], dtype=jg.float64, requires_grad=True)
    h = ref
    for f in fns:
        h = f(h)
    h.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), ref.grad.numpy(), rtol=1e-12)


def test_context_fn_wraps_forward_and_recomputation():
    log = []

    class Ctx:
        def __init__(self, name):
            self.name = name

        def __enter__(self):
            log.append(self.name)

        def __exit__(self, *exc):
            pass
    x = jg.tensor([1.0], requires_grad=True)
    y = checkpoint(lambda a: a.exp(), x, use_reentrant=False, context_fn=lambda: (Ctx("forward"), Ctx("recompute")))
    y.sum().backward()
    assert log == ["forward", "recompute"]


def test_nested_checkpoints():
    calls = []

    def inner(a):
        calls.append("inner")
        return a.sin() * a

    def outer(a):
        calls.append("outer")
        return checkpoint(inner, a.exp(), use_reentrant=False).tanh()
    x = jg.tensor([0.3, 0.7], dtype=jg.float64, requires_grad=True)
    checkpoint(outer, x, use_reentrant=False).sum().backward()
    # forward: outer, inner; backward: outer again (its recomputation runs inner's forward too), then inner's own
    assert calls == ["outer", "inner", "outer", "inner", "inner"]
    ref = jg.tensor([0.3, 0.7], dtype=jg.float64, requires_grad=True)
    e = ref.exp()
    (e.sin() * e).tanh().sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), ref.grad.numpy(), rtol=1e-12)
