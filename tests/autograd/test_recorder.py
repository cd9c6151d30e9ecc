"""The recorders generated per entry and operand pattern (jitgrad/_op_node.py): the node each makes."""
import numpy as np
import pytest

import jitgrad as jg
from jitgrad._graph import COMPILED_AUTOGRAD, NO_EDGE


def _leaf(*shape, dtype=jg.float64):
    return jg.randn(*shape, dtype=dtype, requires_grad=True)


def test_one_recorder_per_entry_and_pattern():
    from jitgrad.ops.elementwise import MUL
    a, b = _leaf(3), _leaf(3)
    a * b, a * 2.0, 2.0 * a, a * b.detach()
    assert {(True, True), (True, False)} <= set(MUL._recorders)
    rec = MUL._recorders[(True, True)]
    a * b
    assert MUL._recorders[(True, True)] is rec


def test_edges_metadata_and_saved_values_per_pattern():
    a, b = _leaf(3), _leaf(3)
    y = a * b
    assert y.grad_fn.next_functions[0][0].variable is a and y.grad_fn.next_functions[1][0].variable is b
    assert y.grad_fn._saved_self is a and y.grad_fn._saved_other is b
    z = a * b.detach()  # the input without a gradient: no edge, and only what the other input's VJP reads is saved
    assert z.grad_fn.next_functions[1] == NO_EDGE
    assert z.grad_fn._saved_self is None and z.grad_fn._saved_other is not None
    w = (a * 3).exp()  # a number operand; the result saved for exp's VJP
    assert w.grad_fn.name() == "ExpBackward0" and w.grad_fn.next_functions[0][0].name() == "MulBackward0"
    assert w.grad_fn._saved_result.equal(w)
    s = jg.cat([a, b.detach(), b])  # a variadic entry: an edge per tensor
    assert [nf[0] is None for nf in s.grad_fn.next_functions] == [False, True, False]
    values, indices = jg.randn(4, 5, dtype=jg.float64).requires_grad_().max(1)  # two outputs, indices not differentiable
    assert values.grad_fn is not None and values.requires_grad
    assert indices.grad_fn is None and not indices.requires_grad
    parts = jg.unbind(_leaf(3, 2))  # as many outputs as the call makes
    assert [p._output_nr for p in parts] == [0, 1, 2] and parts[2].grad_fn is parts[0].grad_fn
    (sum(p.sum() * (k + 1) for k, p in enumerate(parts))).backward()


def test_node_keys_follow_structure_not_values(monkeypatch):
    monkeypatch.setitem(COMPILED_AUTOGRAD, "enabled", True)  # (keys are made only where compiled autograd reads them)
    a, b = _leaf(4), _leaf(4)

    def key(fn):
        return fn(a, b).grad_fn._key

    assert key(lambda x, y: (x * y).sum(0)) == key(lambda x, y: (x * y).sum(0))
    assert key(lambda x, y: (x * y).sum(0)) != key(lambda x, y: (x * y).sum(0, keepdim=True))
    assert key(lambda x, y: x * y) != key(lambda x, y: x * y.detach())
    assert key(lambda x, y: x * y) != key(lambda x, y: y * x.detach() * x)
    c = _leaf(5)
    assert (a * b).grad_fn._key != (c * _leaf(5)).grad_fn._key  # (the leaves' shapes)
    with jg.no_grad():
        a.mul_(2.0)
    assert key(lambda x, y: x + y) == key(lambda x, y: x + y)  # new values, the same key


@pytest.mark.parametrize("make", [lambda a, b: (a * b + a).tanh().sum(), lambda a, b: jg.stack([a, b * a]).max(0)[0].sum(),
                                  lambda a, b: (a.unsqueeze(0) * b.unsqueeze(1)).logsumexp(1).sum()])
def test_gradients_through_recorded_nodes(make, rng):
    a = jg.tensor(rng.standard_normal(5), requires_grad=True)
    b = jg.tensor(rng.standard_normal(5), requires_grad=True)
    assert jg.autograd.gradcheck(make, (a, b))


@pytest.fixture
def rng():
    return np.random.default_rng(0)
