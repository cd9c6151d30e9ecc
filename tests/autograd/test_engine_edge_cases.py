"""Edge cases of the backward engine: gradient accumulation is atomic per leaf; gradients returned by
custom Functions and hooks are validated as PyTorch validates them; an expanded ``.grad`` is never written
through; ``next_functions`` holds ``(None, 0)`` for inputs that need no gradient. Expected messages are
PyTorch's.
"""
import functools
import sys
import threading

import numpy as np
import pytest

import jitgrad as jg
from jitgrad.autograd.function import once_differentiable

from helpers import OVERLAP


# ------------------------------------------------------------------ 1. concurrent accumulation into one leaf
def test_concurrent_backward_into_a_shared_leaf_loses_no_update():
    n, threads, calls = 1 << 15, 4, 150
    w = jg.zeros(n, requires_grad=True)
    x = jg.ones(n)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads often: the read-modify-write of .grad interleaves

    def work():
        for _ in range(calls):
            (w * x).sum().backward()
    try:
        ts = [threading.Thread(target=work) for _ in range(threads)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    assert np.all(w.grad.numpy() == threads * calls)


# ------------------------------------------------------------------ 2. gradients returned by Functions and hooks
def _function_returning(value):
    class F(jg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            return value(g) if callable(value) else value
    return F


@pytest.mark.parametrize("shape, grad_shape", [((3,), (2,)), ((3,), (1,)), ((3,), ()), ((3,), (3, 1)),
                                               ((1, 3), (1,)), ((1, 3), (3,)), ((1,), ())])
def test_function_gradient_of_an_incompatible_shape(shape, grad_shape):
    F = _function_returning(lambda g: jg.ones(grad_shape))
    x = jg.ones(shape, requires_grad=True)
    msg = ("Function FBackward returned an invalid gradient at index 0 - got [%s] but expected shape compatible "
           "with [%s]" % (", ".join(map(str, grad_shape)), ", ".join(map(str, shape))))
    with pytest.raises(RuntimeError) as e:
        F.apply(x).sum().backward()
    assert str(e.value) == msg
    assert x.grad is None


@pytest.mark.parametrize("shape, grad_shape, expected", [((3,), (1, 3), [1.0] * 3), ((3,), (2, 3), [2.0] * 3),
                                                         ((), (1,), 1.0), ((), (2,), 2.0), ((), (1, 1), 1.0)])
def test_function_gradient_that_sums_to_the_input_shape(shape, grad_shape, expected):
    F = _function_returning(lambda g: jg.ones(grad_shape))
    x = jg.ones(shape, requires_grad=True)
    F.apply(x).sum().backward()
    assert x.grad.shape == x.shape
    assert x.grad.tolist() == expected


@pytest.mark.parametrize("value, name", [(2.0, "float"), (2, "int"), (np.ones(3), "numpy.ndarray"),
                                         ([1.0, 2.0, 3.0], "list"), ("a", "str")])
def test_function_gradient_that_is_not_a_tensor(value, name):
    F = _function_returning(value)
    x = jg.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError) as e:
        F.apply(x).sum().backward()
    assert str(e.value) == "expected Variable or None (got %s)" % name


def test_function_gradient_for_an_input_that_is_not_a_tensor():
    class F(jg.autograd.Function):
        @staticmethod
        def forward(ctx, x, n):
            return x * n

        @staticmethod
        def backward(ctx, g):
            return g, jg.ones(1)
    x = jg.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError) as e:
        F.apply(x, 2).sum().backward()
    assert str(e.value) == ("function FBackward returned a gradient different than None at position 2, but the "
                            "corresponding forward input was not a Variable")


@pytest.mark.parametrize("leaf", [True, False])
@pytest.mark.parametrize("value, error, msg", [
    (lambda g: jg.ones(2), RuntimeError, "hook '<lambda>' has changed the size of value"),
    (lambda g: jg.ones(1), RuntimeError, "hook '<lambda>' has changed the size of value"),
    (lambda g: jg.tensor(2.0), RuntimeError, "hook '<lambda>' has changed the size of value"),
    (lambda g: jg.ones(1, 3), RuntimeError, "hook '<lambda>' has changed the size of value"),
    (lambda g: 2.0, TypeError, "expected Variable, but hook returned 'float'"),
    (lambda g: np.ones(3, np.float32), TypeError, "expected Variable, but hook returned 'numpy.ndarray'"),
    (lambda g: jg.ones(2, dtype=jg.float64), RuntimeError,
     "hook '<lambda>' has changed the type of value (was jitgrad.FloatTensor got jitgrad.DoubleTensor)"),
])
def test_tensor_hook_returning_an_invalid_gradient(leaf, value, error, msg):
    x = jg.ones(3, requires_grad=True)
    y = x * 2
    (x if leaf else y).register_hook(value)
    with pytest.raises(error) as e:
        y.sum().backward()
    assert str(e.value) == msg
    assert x.grad is None


def test_hook_without_a_name_and_node_hooks():
    x = jg.ones(3, requires_grad=True)
    x.register_hook(functools.partial(lambda g: jg.ones(2)))
    with pytest.raises(RuntimeError) as e:
        (x * 2).sum().backward()
    assert str(e.value) == "hook '<unknown>' has changed the size of value"

    y = x * 2
    y.grad_fn.register_prehook(lambda go: (2.0,))
    with pytest.raises(TypeError) as e:
        y.sum().backward()
    assert str(e.value) == "expected Variable, but hook returned 'float'"

    y = x * jg.ones(3)
    y.grad_fn.register_hook(lambda gi, go: (gi[0], jg.ones(3)))  # the second input needs no gradient
    with pytest.raises(RuntimeError) as e:
        y.sum().backward()
    assert str(e.value) == "can't replace a None gradient with a non-None value"


# ------------------------------------------------------------------ 3. accumulating into an expanded .grad
def test_accumulating_into_an_expanded_grad_raises_as_pytorch_does():
    w = jg.ones(3, requires_grad=True)
    base = jg.zeros(1)
    w.grad = base.expand(3)
    with pytest.raises(RuntimeError) as e:
        (w * jg.tensor([1.0, 2.0, 3.0])).sum().backward()
    assert str(e.value) == OVERLAP
    assert base.tolist() == [0.0]


def test_accumulating_into_an_expanded_grad_while_building_a_graph():
    w = jg.ones(3, requires_grad=True)
    w.grad = jg.zeros(1).expand(3)
    with pytest.warns(UserWarning, match="reference cycle"):
        (w * jg.tensor([1.0, 2.0, 3.0])).sum().backward(create_graph=True)
    assert w.grad.tolist() == [1.0, 2.0, 3.0]


def test_accumulating_into_a_transposed_grad_writes_it_in_place():
    w = jg.ones(2, 3, requires_grad=True)
    base = jg.zeros(3, 2)
    w.grad = base.t()
    (w * 2).sum().backward()
    assert w.grad.tolist() == [[2.0] * 3] * 2
    assert base.tolist() == [[2.0] * 2] * 3  # PyTorch keeps the strided grad and adds into it


def test_accumulating_into_a_read_only_grad_goes_out_of_place():
    w = jg.ones(3, requires_grad=True)
    arr = np.zeros(3, np.float32)
    arr.flags.writeable = False
    with pytest.warns(UserWarning, match="not writable"):
        w.grad = jg.from_numpy(arr)
    (w * 2).sum().backward()
    assert w.grad.tolist() == [2.0] * 3
    assert arr.tolist() == [0.0] * 3


# ------------------------------------------------------------------ 4. next_functions
def _names(node):
    return [(None if fn is None else type(fn).__name__, k) for fn, k in node.next_functions]


def test_next_functions_pairs_for_inputs_without_grad():
    x = jg.ones(3, requires_grad=True)
    w = jg.ones(3)
    assert _names((x * 2).grad_fn) == [("AccumulateGrad", 0), (None, 0)]
    assert _names((w * x).grad_fn) == [(None, 0), ("AccumulateGrad", 0)]
    assert _names(jg.cat([x, w]).grad_fn) == [("AccumulateGrad", 0), (None, 0)]
    z = x.clone()
    z[0] = w[1]
    assert _names(z.grad_fn) == [("CloneBackward0", 0), (None, 0)]

    class F(jg.autograd.Function):
        @staticmethod
        def forward(ctx, a, n, b):
            return a * n * b

        @staticmethod
        @once_differentiable
        def backward(ctx, g):
            return g * 2, None, None
    y = F.apply(x, 2, w)
    assert _names(y.grad_fn) == [("AccumulateGrad", 0), (None, 0)]  # PyTorch lists tensor inputs only
    y.sum().backward()
    assert x.grad.tolist() == [2.0] * 3

    (w * x * 3).sum().backward()  # the engine still skips the entries without a node
    assert x.grad.tolist() == [5.0] * 3
