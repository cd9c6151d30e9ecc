"""The walker a compiled-autograd plan generates (jitgrad/compiler/graph_walk.py ``make_walker``): it accepts a graph
exactly when ``walk`` gives that graph the plan's full key, and then collects the same arrays in the same order.

Pairs of graphs are built from one program and from programs that differ in one fact the full key holds (an
entry, a scalar's type or sign, a stride, a dtype, a shape, sharing in the DAG, aliasing of saved arrays, the
targets of autograd.grad); hooks and in-place changes make both refuse. Then the walker on real training
steps: new values every step, the walker's hits counted, versions still checked.
"""
import numpy as np
import pytest

import jitgrad as jg
from jitgrad.compiler import compiled_autograd as ca
from jitgrad.compiler.graph_walk import MISSES, Eager, make_walker, walk

import helpers


@pytest.fixture
def compiled():
    """Compiled autograd on, plans built on a graph's second backward; the previous switches restored after."""
    yield from helpers.compiled_autograd_on()


def _roots(loss):
    return [((loss.grad_fn, 0), jg.ones_like(loss))]


def _leaves(seed, dtype=jg.float64, n=4):
    rng = np.random.default_rng(seed)
    return [jg.tensor(rng.standard_normal(n), dtype=dtype, requires_grad=True) for _ in range(3)]


def _base(x, w, b, scalar=2.0):
    return ((x * w + b).tanh() * scalar).sigmoid().sum()


def _shared(x, w, b):
    y = (x * w).tanh()
    return (y * y + b).sum()


def _unshared(x, w, b):
    return ((x * w).tanh() * (x * w).tanh() + b).sum()


def _agree(first, second, targets=(None, None)):
    """Build the walker from graph ``first`` and read graph ``second``: it must accept iff the full keys are
    equal, and then return walk's arrays (the same objects, in order)."""
    roots = _roots(first)
    key, arrays, nodes, _ = walk(roots, targets[0])
    walker = make_walker(roots, targets[0], nodes, arrays, list(range(len(nodes))))
    assert walker is not None
    roots2 = _roots(second)
    try:
        got = walker(roots2, targets[1])
    except MISSES:  # (as compiled autograd reads them: a miss)
        got = None
    try:
        key2, arrays2, nodes2, leaves2 = walk(roots2, targets[1])
    except Eager:
        assert got is None
        return None
    assert (got is not None) == (key2 == key)
    if got is not None:
        assert len(got[0]) == len(arrays2) and all(a is b for a, b in zip(got[0], arrays2))
        assert got[1] == [nodes2[i] for i in leaves2]
    return got is not None


def test_same_structure_new_values_is_accepted():
    assert _agree(_base(*_leaves(0)), _base(*_leaves(1)))
    assert _agree(_shared(*_leaves(0)), _shared(*_leaves(1)))


def test_each_fact_of_the_full_key_is_checked():
    a = _leaves(0)
    assert not _agree(_base(*a), _base(*a, scalar=3.0))  # a saved scalar
    assert not _agree(_base(*a), _base(*a, scalar=2))  # 2.0 and 2 hash alike
    assert not _agree(_base(*a, scalar=0.0), _base(*a, scalar=-0.0))  # and so do 0.0 and -0.0
    assert not _agree(_base(*a), ((a[0] * a[1] + a[2]).sin() * 2.0).sigmoid().sum())  # an entry
    assert not _agree(_base(*a), _base(*_leaves(0, jg.float32)))  # a dtype
    assert not _agree(_base(*a), _base(*_leaves(0, n=5)))  # a shape
    assert not _agree(_shared(*a), _unshared(*a))  # sharing in the DAG (one node against two)
    assert not _agree(_unshared(*a), _shared(*a))
    z = (a[0] + a[1]).neg()  # (nodes that save nothing: only the nodes' identities tell the two apart)
    assert not _agree(((a[0] + a[1]).neg() + (a[0] + a[1]).neg()).sum(), (z + z).sum())
    x = jg.tensor(np.random.default_rng(2).standard_normal((4, 4)), requires_grad=True)
    xt = jg.tensor(np.random.default_rng(3).standard_normal((4, 4)).T, requires_grad=True)  # (a strided leaf)
    w = jg.tensor(np.ones((4, 4)), requires_grad=True)
    assert not _agree((x * w).sum(), (xt * w).sum())  # a saved array's strides


def test_facts_the_node_class_and_edges_imply_are_still_told_apart():
    """The walker checks a node's class and its edges only, not its entry, its saved names or which of them are
    outputs (the class is its entry's own): graphs that differ there still differ in what it checks."""
    x, w, b = _leaves(0)
    c = jg.tensor(w.detach().numpy().copy())  # (no grad: no edge, as a number has none)
    assert not _agree((x * w).sum(), (x * c).sum())  # an input without a gradient this time
    assert not _agree((x * c).sum(), (x * w).sum())
    assert not _agree((x * c).sum(), (x * 2.0).sum())  # a number where a tensor was saved
    assert not _agree((x * 2.0).sum(), (x * c).sum())
    assert not _agree((x - w).sum(), (x + w).sum())  # entries alike in their saved values (none) and edges
    m = jg.tensor(np.random.default_rng(4).standard_normal((2, 4)), requires_grad=True)
    assert _agree((m.unbind()[0] * w).sum(), (m.unbind()[0] * x).sum())
    assert not _agree((m.unbind()[0] * w).sum(), (m.unbind()[1] * w).sum())  # which output of a node an edge names


def test_saved_tensor_hooks_are_refused():
    a, b = _leaves(0), _leaves(1)
    lb = (b[0].exp() * b[1]).sum()
    lb.grad_fn.next_functions[0][0]._raw_saved_self.register_hooks(lambda t: t, lambda t: t)
    assert _agree((a[0].exp() * a[1]).sum(), lb) is None


def test_aliasing_of_saved_arrays_is_checked():
    x, w, b = _leaves(0)
    c = jg.tensor(w.detach().numpy().copy(), requires_grad=True)
    assert not _agree((x * w * w).sum(), (x * w * c).sum())  # one array saved twice, against two arrays
    assert not _agree((x * w * c).sum(), (x * w * w).sum())


def test_targets_of_autograd_grad_are_checked():
    a, b = _leaves(0), _leaves(1)
    la, lb = _base(*a), _base(*b)
    assert _agree(la, lb, ([a[0], a[1]], [b[0], b[1]]))
    la, lb = _base(*a), _base(*b)
    assert not _agree(la, lb, ([a[0], a[1]], [b[1], b[0]]))
    la, lb = _base(*a), _base(*b)
    assert not _agree(la, lb, ([a[0]], None))


def test_hooks_and_in_place_changes_are_refused():
    a, b = _leaves(0), _leaves(1)
    b[1].register_hook(lambda g: g)
    assert _agree(_base(*a), _base(*b)) is None  # (walk raises Eager: both refuse)
    a, b = _leaves(0), _leaves(1)
    lb = _base(*b)
    lb.grad_fn.next_functions[0][0].register_hook(lambda gi, go: None)
    assert _agree(_base(*a), lb) is None
    a, b = _leaves(0), _leaves(1)
    t = b[0].tanh()
    lb = (t * b[1]).sum()
    with jg.no_grad():
        t.add_(1)  # (saved by tanh and by the product)
    assert _agree((a[0].tanh() * a[1]).sum(), lb) is None


def _step(x, w, b, target):
    h = (x @ w + b).relu()
    return jg.nn.functional.cross_entropy(h, target)


def test_training_steps_run_on_the_walker_with_new_values(compiled):
    """A step's graph, rebuilt every step with new inputs (floats, integer targets): from the third step on the
    walker reads it (no full walk), and the gradients equal the engine's each step; a new shape walks again."""
    rng = np.random.default_rng(0)
    w = jg.tensor(rng.standard_normal((5, 3)), requires_grad=True)
    b = jg.tensor(rng.standard_normal(3), requires_grad=True)
    walks = []
    real = ca.walk
    ca.walk = lambda *a: walks.append(1) or real(*a)
    try:
        for step in range(6):
            rows = 8 if step < 5 else 6
            x = jg.tensor(rng.standard_normal((rows, 5)))
            target = jg.tensor(rng.integers(0, 3, rows))
            hits = jg.jit_stats()["compiled_autograd"]["hits"]
            w.grad = b.grad = None
            _step(x, w, b, target).backward()
            got = (w.grad.numpy().copy(), b.grad.numpy().copy())
            w.grad = b.grad = None
            with _off():
                _step(x, w, b, target).backward()
            np.testing.assert_array_equal(got[0], w.grad.numpy())
            np.testing.assert_array_equal(got[1], b.grad.numpy())
            if 2 <= step < 5:
                assert jg.jit_stats()["compiled_autograd"]["hits"] == hits + 1
        assert len(walks) == 1  # the second step's (it built the plan); the new shape is a new key, not walked
    finally:
        ca.walk = real


class _off:
    def __enter__(self):
        self.prev = ca.SETTINGS["enabled"]
        ca.SETTINGS["enabled"] = False

    def __exit__(self, *exc):
        ca.SETTINGS["enabled"] = self.prev


def test_a_saved_tensor_changed_in_place_still_raises(compiled):
    """With a walker in place, a graph whose saved tensor was changed in place raises PyTorch's error."""
    w = jg.tensor([0.5, -1.0, 2.0], requires_grad=True)
    for _ in range(4):
        (w.exp() * w).sum().backward()
    y = w.exp()
    loss = (y * w).sum()
    with jg.no_grad():
        y.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


def test_saved_tensors_are_freed_unless_retain_graph(compiled):
    w = jg.tensor([0.5, -1.0, 2.0], requires_grad=True)
    for _ in range(4):
        (w.exp() * w).sum().backward()
    loss = (w.exp() * w).sum()
    loss.backward(retain_graph=True)
    loss.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        loss.backward()
