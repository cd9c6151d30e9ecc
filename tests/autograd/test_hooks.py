"""Hooks and graph nodes: tensor hooks, node pre/post hooks, retain_grad, post-accumulate-grad hooks,
their order and removable handles; autograd.graph.Node; saved-tensor pack/unpack hooks (thread-local,
version-checked) and save_on_cpu."""
import threading

import numpy as np
import pytest

import jitgrad as jg
from jitgrad.autograd.graph import Node, save_on_cpu, saved_tensors_hooks

FREED = "^Trying to backward through the graph a second time \\(or directly access saved tensors after they have " \
        "already been freed\\)"


def test_hooks_run_in_pytorch_order():
    log = []
    x = jg.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    z = y.exp()
    y.register_hook(lambda g: log.append(("tensor hook", g.tolist())))
    y.retain_grad()
    y.grad_fn.register_prehook(lambda go: log.append(("node pre-hook", len(go))))
    y.grad_fn.register_hook(lambda gi, go: log.append(("node post-hook", len(gi), len(go))))
    y.register_hook(lambda g: log.append(("tensor hook 2", g.tolist())))
    x.register_hook(lambda g: log.append(("leaf hook", g.tolist())))
    x.register_post_accumulate_grad_hook(lambda t: log.append(("post accumulate", t.grad.tolist())))
    z.sum().backward()
    e = y.exp().tolist()
    assert log == [("tensor hook", e), ("tensor hook 2", e), ("node pre-hook", 1), ("node post-hook", 2, 1),
                   ("leaf hook", [2 * v for v in e]), ("post accumulate", [2 * v for v in e])]
    assert y.grad.tolist() == e


def test_retain_grad_sees_the_value_after_tensor_hooks():
    x = jg.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    y.retain_grad()
    y.register_hook(lambda g: g * 10)  # registered after retain_grad, still runs before it
    (y * 1).sum().backward()
    assert y.grad.tolist() == [10.0, 10.0] and x.grad.tolist() == [20.0, 20.0]


def test_leaf_tensor_hook_changes_what_is_accumulated():
    x = jg.tensor([1.0, 2.0], requires_grad=True)
    x.register_hook(lambda g: g * 10)
    (x * 1).sum().backward()
    assert x.grad.tolist() == [10.0, 10.0]


def test_node_hooks_can_replace_gradients():
    x = jg.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    y.grad_fn.register_prehook(lambda go: (go[0] * 10,))
    y.sum().backward()
    assert x.grad.tolist() == [20.0, 20.0]
    x.grad = None
    y = x * 2
    y.grad_fn.register_hook(lambda gi, go: (gi[0] * 3, gi[1]))
    y.sum().backward()
    assert x.grad.tolist() == [6.0, 6.0]


def test_hook_arguments_are_tuples():
    seen = []
    x = jg.tensor([1.0], requires_grad=True)
    y = x.exp()
    y.grad_fn.register_prehook(lambda go: seen.append(type(go)))
    y.grad_fn.register_hook(lambda gi, go: seen.append((type(gi), type(go))))
    y.sum().backward()
    assert seen == [tuple, (tuple, tuple)]


def test_removable_handles():
    x = jg.tensor([1.0, 2.0], requires_grad=True)
    y = x.exp()
    h1 = y.register_hook(lambda g: g * 2)
    y.register_hook(lambda g: g * 3)
    h1.remove()
    h1.remove()  # removing twice is harmless
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 3 * np.exp([1.0, 2.0]), rtol=1e-6)
    x.grad = None
    with x.register_hook(lambda g: g * 100):
        pass  # the context manager removes it
    y = x * 1
    pre = y.grad_fn.register_prehook(lambda go: (go[0] * 5,))
    post = y.grad_fn.register_hook(lambda gi, go: (gi[0] * 7, None))
    acc = x.register_post_accumulate_grad_hook(lambda t: t.grad.mul_(0))
    pre.remove()
    post.remove()
    acc.remove()
    y.sum().backward()
    assert x.grad.tolist() == [1.0, 1.0]


@pytest.mark.parametrize("hook,kind,message", [
    (lambda go: (go[0], go[0]), "pre", r"^hook '<lambda>' has returned an incorrect number of values \(got 2, but "
                                       r"expected 1\)$"),
    (lambda go: go[0], "pre", r"^expected tuple, but hook returned 'Tensor'$"),
    (lambda gi, go: [gi[0]], "post", r"^expected tuple, but hook returned 'list'$"),
    (lambda gi, go: (jg.ones(3),), "post", r"^hook '<lambda>' has changed the size of value$"),
    (lambda g: jg.ones(3), "tensor", r"^hook '<lambda>' has changed the size of value$"),
    (lambda g: g.double(), "tensor", r"^hook '<lambda>' has changed the type of value \(was jitgrad.FloatTensor got "
                                     r"jitgrad.DoubleTensor\)$"),
])
def test_hook_results_are_checked(hook, kind, message):
    x = jg.tensor([1.0, 2.0], requires_grad=True)
    y = x.exp()
    {"pre": y.grad_fn.register_prehook, "post": y.grad_fn.register_hook, "tensor": y.register_hook}[kind](hook)
    with pytest.raises((RuntimeError, TypeError), match=message):
        y.sum().backward()


def test_post_accumulate_grad_hook_optimizer_in_backward():
    """The pattern the hook exists for: update each parameter as soon as its gradient is ready."""
    w = jg.tensor([1.0, 2.0], requires_grad=True)

    def sgd_step(p):
        with jg.no_grad():
            p.sub_(0.1 * p.grad)
        p.grad = None
    w.register_post_accumulate_grad_hook(sgd_step)
    (w * w).sum().backward()
    assert w.grad is None
    np.testing.assert_allclose(w.detach().numpy(), [0.8, 1.6], rtol=1e-6)


def test_post_accumulate_grad_hook_errors():
    x = jg.tensor([1.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="^post accumulate grad hooks cannot be registered on non-leaf tensors$"):
        (x * 2).register_post_accumulate_grad_hook(lambda t: None)
    with pytest.raises(RuntimeError, match="^cannot register a hook on a tensor that doesn't require gradient$"):
        jg.tensor([1.0]).register_post_accumulate_grad_hook(lambda t: None)
    with pytest.raises(RuntimeError, match="^cannot register a hook on a tensor that doesn't require gradient$"):
        jg.tensor([1.0]).register_hook(lambda g: None)


# ------------------------------------------------------------------ graph nodes
def test_node_type_name_and_next_functions():
    x = jg.tensor([1.0, 2.0], requires_grad=True)
    y = x.exp()
    z = (y * x).sum()
    assert isinstance(z.grad_fn, Node) and isinstance(jg.autograd.graph.Node, type)
    assert not isinstance(x.grad_fn, Node)  # a leaf has no grad_fn
    assert z.grad_fn.name() == "SumBackward0"
    (mul, k), = z.grad_fn.next_functions
    assert mul.name() == "MulBackward0" and k == 0
    (exp, _), (acc, _) = mul.next_functions
    assert exp is y.grad_fn and exp.name() == "ExpBackward0"
    assert acc.name() == "AccumulateGrad" and acc.variable is x and acc.next_functions == ()
    assert isinstance(acc, Node)
    assert exp.next_functions[0][0] is acc  # one AccumulateGrad per leaf
    assert repr(z.grad_fn).startswith("<SumBackward0 object at 0x")


def test_node_metadata_is_a_persistent_dict():
    y = jg.tensor([1.0], requires_grad=True) * 2
    assert y.grad_fn.metadata == {}
    y.grad_fn.metadata["tag"] = "mine"
    assert y.grad_fn.metadata == {"tag": "mine"}


def test_node_of_custom_function_and_copyslices_are_nodes():
    class Double(jg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2
    x = jg.tensor([1.0, 2.0], requires_grad=True)
    y = Double.apply(x)
    assert isinstance(y.grad_fn, Node) and y.grad_fn.name() == "DoubleBackward"
    z = x * 1
    z[0] = 5.0
    assert isinstance(z.grad_fn, Node) and z.grad_fn.name() == "CopySlices"


def test_saved_tensor_attributes():
    x = jg.tensor([1.0, 2.0], requires_grad=True)
    y = x * x
    assert y.grad_fn._saved_self is x and y.grad_fn._saved_other is x
    e = x.exp()
    assert e.grad_fn._saved_result is not e and e.grad_fn._saved_result.tolist() == e.tolist()
    assert e.grad_fn._saved_result.grad_fn is e.grad_fn
    y.sum().backward()
    with pytest.raises(RuntimeError, match=FREED):
        y.grad_fn._saved_self
    z = x * x
    z.sum().backward(retain_graph=True)
    assert z.grad_fn._saved_self is x  # retained
    w = x * jg.tensor([1.0, 3.0])  # the constant needs no gradient, so x (its factor) is not saved
    assert w.grad_fn._saved_self is None and w.grad_fn._saved_other.tolist() == [1.0, 3.0]
    with pytest.raises(AttributeError, match="'MulBackward0' object has no attribute '_saved_result'"):
        w.grad_fn._saved_result


def test_raw_saved_tensor_register_hooks():
    x = jg.tensor([1.0, 2.0], requires_grad=True)
    y = x * x
    raw = y.grad_fn._raw_saved_self
    raw.register_hooks(lambda t: t, lambda t: t * 0)
    y.sum().backward()
    assert x.grad.tolist() == [1.0, 2.0]  # the self-side gradient used the unpacked zeros
    y = x * x
    raw = y.grad_fn._raw_saved_self
    raw.register_hooks(lambda t: t, lambda t: t)
    with pytest.raises(RuntimeError, match="^Calling register_hooks on a saved tensor whose hooks have already been "
                                           "set. Hint: only one pair of hooks is allowed at a time.$"):
        raw.register_hooks(lambda t: t, lambda t: t)


# ------------------------------------------------------------------ saved tensor hooks
def test_saved_tensors_hooks_pack_and_unpack():
    log = []

    def pack(t):
        log.append(("pack", tuple(t.shape)))
        return t.detach().clone()

    def unpack(t):
        log.append(("unpack", tuple(t.shape)))
        return t
    x = jg.tensor([1.0, 2.0], requires_grad=True)
    with saved_tensors_hooks(pack, unpack):
        y = x.exp()  # saves its result
        z = (y * x).sum()  # saves both inputs
    assert log == [("pack", (2,))] * 3
    z.backward()
    assert log[3:] == [("unpack", (2,))] * 3
    np.testing.assert_allclose(x.grad.numpy(), np.exp([1.0, 2.0]) * (1 + np.array([1.0, 2.0])), rtol=1e-6)


def test_innermost_hooks_win_and_outer_ones_come_back():
    seen = []
    x = jg.tensor([1.0], requires_grad=True)
    with saved_tensors_hooks(lambda t: seen.append("outer") or t, lambda t: t):
        with saved_tensors_hooks(lambda t: seen.append("inner") or t, lambda t: t):
            x.sin()
        x.cos()
    x.tan()
    assert seen == ["inner", "outer"]


def test_unpack_must_return_a_tensor():
    x = jg.tensor([1.0, 2.0], requires_grad=True)
    with saved_tensors_hooks(lambda t: 5, lambda p: p):
        y = (x * x).sum()
    with pytest.raises(TypeError, match="^Output of saved tensor unpack_hook expected to be a Tensor but got result of "
                                        "type int$"):
        y.backward()


def test_version_check_holds_with_pack_unpack_hooks():
    """Beyond PyTorch (which skips the check when hooks are set): an in-place change after saving is still
    caught, with the saved tensor described by its shape and dtype."""
    x = jg.tensor([1.0, 2.0], requires_grad=True)
    with saved_tensors_hooks(lambda t: t.detach().clone(), lambda t: t):
        a = x * 1
        y = (a * a).sum()
    a.add_(1)
    with pytest.raises(RuntimeError, match=r"^one of the variables needed for gradient computation has been modified "
                                           r"by an inplace operation: \[jitgrad.FloatTensor \[2\]\], which is output 0 "
                                           r"of MulBackward0, is at version 1; expected version 0 instead."):
        y.backward()


def test_saved_tensors_hooks_are_thread_local():
    packed_here = []
    packed_there = []
    x = jg.tensor([1.0, 2.0], requires_grad=True)

    def other_thread():
        packed_there.append(x.sin() is not None)  # saves x, with no hooks in this thread

    with saved_tensors_hooks(lambda t: packed_here.append(1) or t, lambda t: t):
        th = threading.Thread(target=other_thread)
        th.start()
        th.join()
        x.cos()
    assert packed_here == [1] and packed_there == [True]


def test_save_on_cpu():
    x = jg.tensor([1.0, 2.0], requires_grad=True)
    with save_on_cpu(pin_memory=False):
        y = (x * x.exp()).sum()
        a = x * 1
        z = (a * a).sum()
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), np.exp([1.0, 2.0]) * (1 + np.array([1.0, 2.0])), rtol=1e-6)
    a.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.backward()


def test_save_on_cpu_keeps_double_backward():
    x = jg.tensor([0.5, 1.5], dtype=jg.float64, requires_grad=True)
    with save_on_cpu():
        g, = jg.autograd.grad((x ** 3).sum(), x, create_graph=True)
    h, = jg.autograd.grad(g.sum(), x)
    np.testing.assert_allclose(h.numpy(), 6 * np.array([0.5, 1.5]))
