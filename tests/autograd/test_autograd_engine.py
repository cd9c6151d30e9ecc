"""The backward engine against PyTorch's documented behaviour: argument errors and their messages,
retain_graph, deep graphs without recursion, each node run once with its summed gradient, .grad
accumulation, the non-leaf .grad warning, the order nodes run in."""
import gc
import warnings

import numpy as np
import pytest

import jitgrad as jg
from jitgrad.autograd import backward, grad

FREED = ("Trying to backward through the graph a second time (or directly access saved tensors after they have already "
         "been freed). Saved intermediate values of the graph are freed when you call .backward() or autograd.grad(). "
         "Specify retain_graph=True if you need to backward through the graph a second time or if you need to access "
         "saved tensors after calling backward.")
NON_LEAF = "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed."


def leaf(values, dtype=jg.float32):
    return jg.tensor(values, dtype=dtype, requires_grad=True)


# ------------------------------------------------------------------ argument errors
def test_non_scalar_output_needs_a_gradient():
    with pytest.raises(RuntimeError, match="^grad can be implicitly created only for scalar outputs$"):
        (leaf([1.0, 2.0]) * 2).backward()


def test_output_must_require_grad():
    with pytest.raises(RuntimeError, match="^element 0 of tensors does not require grad and does not have a grad_fn$"):
        (jg.tensor([1.0, 2.0]) * 2).sum().backward()
    x = leaf([1.0])
    with pytest.raises(RuntimeError, match="^element 1 of tensors does not require grad and does not have a grad_fn$"):
        backward([x.sum(), jg.tensor(1.0)])
    with jg.no_grad():
        y = x * 2
    with pytest.raises(RuntimeError, match="^element 0 of tensors does not require grad"):
        y.sum().backward()


def test_gradient_argument_checks():
    x = leaf([1.0, 2.0])
    with pytest.raises(RuntimeError, match=r"^Mismatch in shape: grad_output\[0\] has a shape of jitgrad.Size\(\[3\]\) "
                                           r"and output\[0\] has a shape of jitgrad.Size\(\[2\]\).$"):
        (x * 2).backward(jg.ones(3))
    with pytest.raises(TypeError, match="^gradients can be either Tensors or None, but got str$"):
        (x * 2).backward("a")
    with pytest.raises(RuntimeError, match="^got 2 tensors and 1 gradients$"):
        backward([x * 2, x * 3], [jg.ones(2)])


def test_second_backward_without_retain_graph():
    x = leaf([1.0, 2.0])
    y = (x.exp() * x).sum()
    y.backward()
    with pytest.raises(RuntimeError) as info:
        y.backward()
    assert str(info.value) == FREED


def test_retain_graph_allows_a_second_backward_that_accumulates():
    x = leaf([1.0, 2.0])
    y = (x * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    assert x.grad.tolist() == [4.0, 8.0]


def test_graph_without_saved_tensors_can_run_twice():
    x = leaf([1.0, 2.0])
    y = x.sum()
    y.backward()
    y.backward()
    assert x.grad.tolist() == [2.0, 2.0]


# ------------------------------------------------------------------ what backward computes
def test_backward_of_a_leaf_and_explicit_gradients():
    x = leaf([1.0, 2.0])
    x.backward(jg.tensor([3.0, 4.0]))
    assert x.grad.tolist() == [3.0, 4.0]
    y = leaf([1.0, 2.0])
    backward([(y * 2).sum(), y * 3], [jg.tensor(2.0), jg.tensor([1.0, 0.0])])
    assert y.grad.tolist() == [7.0, 4.0]


def test_diamond_runs_each_node_once_with_the_summed_gradient():
    x = leaf([1.0, 2.0])
    a = x * 3
    calls = []
    a.grad_fn.register_prehook(lambda go: calls.append(go[0].tolist()))
    b, c = a.sin(), a * a
    d = b + c + a
    d.sum().backward()
    av = np.array([3.0, 6.0], dtype=np.float32)
    assert len(calls) == 1
    np.testing.assert_allclose(calls[0], np.cos(av) + 2 * av + 1, rtol=1e-6)
    np.testing.assert_allclose(x.grad.numpy(), 3 * (np.cos(av) + 2 * av + 1), rtol=1e-6)


def test_nodes_run_latest_created_first():
    x = leaf([1.0, 2.0])
    a = x * 2
    b = a.sin()
    c = a.cos()
    d = b + c
    order = []
    for name, t in [("a", a), ("b", b), ("c", c), ("d", d)]:
        t.grad_fn.register_prehook(lambda go, name=name: order.append(name))
    d.sum().backward()
    assert order == ["d", "c", "b", "a"]


def test_deep_chain_without_recursion_errors():
    x = leaf([1.0])
    h = x
    for _ in range(100_000):
        h = h * 1.0
    h.sum().backward()
    assert x.grad.tolist() == [1.0]
    del h
    gc.collect()


def test_deep_chain_with_create_graph():
    x = leaf([2.0], dtype=jg.float64)
    h = x
    for _ in range(2000):
        h = h * 1.0
    g, = grad((h * h).sum(), x, create_graph=True)
    g2, = grad(g.sum(), x)
    assert g.tolist() == [4.0] and g2.tolist() == [2.0]


def test_grad_accumulates_in_place_across_backwards():
    x = leaf([1.0, 2.0])
    (x * 2).sum().backward()
    g = x.grad
    (x * 3).sum().backward()
    assert x.grad is g and x.grad.tolist() == [5.0, 5.0]  # += into the same tensor
    x.grad.zero_()
    (x * 3).sum().backward()
    assert x.grad.tolist() == [3.0, 3.0]
    x.grad = None
    (x * 3).sum().backward()
    assert x.grad.tolist() == [3.0, 3.0]


def test_grad_is_not_the_callers_gradient_tensor():
    x = leaf([1.0, 2.0])
    g = jg.tensor([1.0, 1.0])
    (x * 1).backward(g)
    (x * 1).backward(g)
    assert x.grad.tolist() == [2.0, 2.0]
    assert g.tolist() == [1.0, 1.0]  # accumulating into .grad never writes into the gradient passed in


def test_detach_and_no_grad_stop_gradients():
    x = leaf([1.0, 2.0])
    y = x.detach() * 2 + x
    y.sum().backward()
    assert x.grad.tolist() == [1.0, 1.0]
    with jg.no_grad():
        z = x * 2
    assert not z.requires_grad and z.grad_fn is None


def test_backward_under_no_grad_still_computes():
    x = leaf([1.0, 2.0])
    w = (x * x).sum()
    with jg.no_grad():
        w.backward()
    assert x.grad.tolist() == [2.0, 4.0] and not x.grad.requires_grad


def test_integer_outputs_do_not_require_grad():
    x = leaf([1.0, 2.0])
    assert not x.argmax().requires_grad and not (x > 1).requires_grad
    assert (x * 2).requires_grad


# ------------------------------------------------------------------ .grad of non-leaves
def test_non_leaf_grad_warning():
    x = leaf([1.0, 2.0])
    y = x * 2
    with pytest.warns(UserWarning, match=NON_LEAF):
        assert y.grad is None
    y.retain_grad()
    (y * y).sum().backward()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert y.grad.tolist() == [4.0, 8.0]  # retained: no warning
        assert x.grad.tolist() == [8.0, 16.0]


def test_non_leaf_grad_filled_by_backward_inputs_does_not_warn():
    x = leaf([1.0, 2.0])
    h = x * 2
    (h ** 2).sum().backward(inputs=[h])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert h.grad.tolist() == [4.0, 8.0]
    assert x.grad is None


def test_retain_grad_accumulates_and_is_idempotent():
    x = leaf([1.0, 2.0])
    y = x * 2
    y.retain_grad()
    y.retain_grad()
    z = (y * y).sum()
    z.backward(retain_graph=True)
    z.backward()
    assert y.grad.tolist() == [8.0, 16.0] and x.grad.tolist() == [16.0, 32.0]
    assert y.retains_grad and not y.is_leaf
    with pytest.raises(RuntimeError, match="^can't retain_grad on Tensor that has requires_grad=False$"):
        jg.tensor([1.0]).retain_grad()


def test_engine_restores_grad_mode_after_an_error():
    class Fails(jg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            raise ValueError("boom")
    x = leaf([1.0])
    with pytest.raises(ValueError, match="boom"):
        Fails.apply(x).sum().backward(create_graph=False)
    assert jg.is_grad_enabled()
    with pytest.raises(ValueError, match="boom"), pytest.warns(UserWarning, match="reference cycle"):
        Fails.apply(x).sum().backward(create_graph=True)
    assert jg.is_grad_enabled()


def test_inputs_that_the_graph_does_not_reach_are_not_run():
    ran = []
    x, w = leaf([1.0]), leaf([2.0])
    a = x * 3
    b = w * 4
    b.grad_fn.register_prehook(lambda go: ran.append("b"))
    (a + b).sum().backward(inputs=[x])
    assert ran == [] and w.grad is None and x.grad.tolist() == [3.0]


def _shares(p, q):
    return np.shares_memory(p.detach().numpy(), q.detach().numpy())


def test_grad_takes_over_no_buffer_that_something_else_holds():
    """.grad may take over a fresh gradient buffer, but never one that another tensor, another
    .grad, a retained gradient or the caller's gradient argument also holds."""
    b = jg.randn(3, requires_grad=True)
    c = jg.randn(3, requires_grad=True)
    ((b + c) * 3).sum().backward()  # add hands one gradient tensor to both leaves
    assert not _shares(b.grad, c.grad)
    b.grad.add_(1)
    np.testing.assert_allclose(c.grad.numpy(), [3.0, 3.0, 3.0])
    t = jg.ones(3)
    b.grad = c.grad = None
    (b + c).backward(t)
    assert not _shares(b.grad, t) and not _shares(c.grad, t)
    b.grad = None
    b.backward(t)
    assert not _shares(b.grad, t)
    b.grad.mul_(5)
    np.testing.assert_allclose(t.numpy(), [1.0, 1.0, 1.0])
    a = jg.randn(3, requires_grad=True)
    z = a * 2
    z.retain_grad()
    (z * z).sum().backward()
    assert not _shares(a.grad, z.grad)
    np.testing.assert_allclose(a.grad.numpy(), 8 * a.detach().numpy(), rtol=1e-6)


def test_grad_takes_over_the_buffer_a_tensor_hook_saw_and_let_go():
    """As PyTorch's AccumulateGrad: a leaf's tensor hook that returns nothing leaves the gradient free to
    become .grad itself (no copy); one that keeps the gradient gets a copy."""
    x = jg.randn(3, 4, requires_grad=True)
    seen = []
    x.register_hook(lambda g: seen.append(g.data_ptr()))
    (x * 2).sum().backward()
    assert x.grad.data_ptr() == seen[0]
    y = jg.randn(3, requires_grad=True)
    kept = []
    y.register_hook(lambda g: kept.append(g))
    (y * 2).sum().backward()
    assert not _shares(y.grad, kept[0])
    y.grad.add_(1)
    np.testing.assert_array_equal(kept[0].numpy(), [2.0, 2.0, 2.0])


def test_grad_of_a_product_keeps_the_inputs_intact():
    x = jg.randn(4, requires_grad=True)
    w = jg.randn(4, requires_grad=True)
    xs, ws = x.detach().numpy().copy(), w.detach().numpy().copy()
    (x * w).sum().backward()
    x.grad.add_(100)
    w.grad.add_(100)
    np.testing.assert_array_equal(x.detach().numpy(), xs)
    np.testing.assert_array_equal(w.detach().numpy(), ws)
    np.testing.assert_allclose(x.grad.numpy(), ws + 100, rtol=1e-6)
