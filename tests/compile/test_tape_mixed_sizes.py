"""The tape interpreter with values of several sizes (compiler/tape.py): 0-d values, small vectors and the values
stacked from them, with softmax, sums over dims and indexing between them.

Each compiled function is called several times with new values of every input, and once with a new shape, and
compared with the same function run eagerly: outputs and gradients. The graphs must run as tapes (forward and
backward); one the tape cannot express must still give eager's numbers through the fused loops.
"""
import numpy as np
import pytest

import jitgrad as jg
import jitgrad.nn.functional as F
from jitgrad.compiler.tape import tape_plan


def _variants(cf):
    return list(cf._jitgrad_compiled.variants.values())


def _plans(cf):
    """(forward, backward) plans of every variant of compiled function ``cf``."""
    return [(v.plan, v.bplan) for v in _variants(cf)]


def _check(f, make_inputs, calls=4, new_shape=None, tape=True, rtol=1e-5, atol=1e-6, int_inputs=0):
    """``f`` compiled against eager: ``calls`` calls with new values of every input, then one with the inputs
    of ``new_shape`` (a make_inputs argument). The first ``int_inputs`` inputs take no gradient."""
    cf = jg.compile(f)
    rng = np.random.default_rng(0)
    shapes = [None] * calls + ([new_shape] if new_shape is not None else [])
    for shape in shapes:
        arrays = make_inputs(rng) if shape is None else make_inputs(rng, shape)
        got, want = [], []
        for fn, out in ((cf, got), (f, want)):
            xs = [jg.tensor(a, requires_grad=k >= int_inputs and a.dtype.kind == "f") for k, a in enumerate(arrays)]
            y = fn(*xs)
            leaves = [x for x in xs if x.requires_grad]
            weight = jg.tensor(np.linspace(0.5, 1.5, y.numel()).reshape(y.shape).astype(y.dtype.np if hasattr(y.dtype, "np") else np.float32))
            grads = jg.autograd.grad(y, leaves, weight, allow_unused=True)
            out.append(y.detach().numpy().copy())
            out += [None if g is None else g.numpy().copy() for g in grads]
        assert len(got) == len(want)
        for a, b in zip(got, want):
            assert (a is None) == (b is None)
            if a is not None:
                assert a.dtype == b.dtype and a.shape == b.shape
                np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)
    if tape:
        for fwd, bwd in _plans(cf):
            assert fwd.instructions > 0, fwd.source
            assert bwd is None or bwd.instructions > 0, bwd.source
    return cf


def _scalars(n, dtype=np.float32):
    return lambda rng, shape=(): [rng.standard_normal(shape).astype(dtype) for _ in range(n)]


def scalar_softmax_graph(a, b, c, d):
    """0-d values stacked into 4-way softmaxes, selected back, summed and multiplied: the mixed-size scalar graph."""
    v = [a, b, c, d]
    for k in range(6):
        s = jg.stack([v[-1].exp(), v[-2] * v[-3], F.softplus(v[-4]), v[-1] + v[-2] + v[-3] + v[-4]]).softmax(0)
        v += [s[0] * s[1], s[2:].sum(0), s[3]]
    ls = F.log_softmax(jg.stack(v[-4:]), 0)
    return ls[1] + v[-1] * v[-5]


def test_stacked_softmax_of_scalars():
    cf = _check(scalar_softmax_graph, _scalars(4), new_shape=(3,))
    fwd, bwd = _plans(cf)[0]
    assert bwd is None  # (one tape computes the value and the gradients)
    assert "softmax" in fwd.source and "stack" in fwd.source and "index_put_zeros" in fwd.source


def vectors_graph(x, w, s):
    """Small 1-d values, a 0-d scale, broadcasting into a matrix, softmax and sums over either dim, indexing."""
    h = (x[:, None] * w[None, :] + s).tanh()  # (n, m)
    p = F.softmax(h, dim=1)
    q = F.log_softmax(h.t(), dim=1)
    r = p.sum(0) + q.mean(1, keepdim=True).t().sum(0)[: p.shape[1]] * 0 + h[1] - h[-1].flip(0)
    z = jg.cat([r, x, s.reshape(1)]) ** 2
    return z[[0, 2, 2]].sum() * s + z.sum() + q[0, 1:].sum() + jg.stack(h.unbind(0), 1).mean()


def test_vectors_matrix_softmax_sums_indexing():
    def inputs(rng, n=3):
        return [rng.standard_normal(n).astype(np.float32), rng.standard_normal(n + 2).astype(np.float32),
                np.float32(rng.standard_normal())]
    _check(vectors_graph, inputs, new_shape=4)


def test_float64_and_gradcheck():
    def inputs(rng, n=4):
        return [rng.standard_normal(n), np.float64(rng.standard_normal())]
    _check(_fd_graph, inputs, new_shape=5, rtol=1e-12, atol=1e-12)
    x = jg.tensor(np.random.default_rng(1).standard_normal(4), requires_grad=True)
    s = jg.tensor(0.7, dtype=jg.float64, requires_grad=True)
    assert jg.autograd.gradcheck(jg.compile(_fd_graph), (x, s))


def _fd_graph(x, s):
    y = jg.stack([x.sum(), s * x[0], x[1:3].mean()]).softmax(0)
    return (y * y[0]).sum() + F.log_softmax(x * s, 0)[1:].sum() + jg.cat([x[::2], s[None]]).sum(0) ** 2


def test_shares_slots_for_views():
    """A reshape (or a select of a whole row) costs no instruction: it reads its operand's slot."""
    def f(a, b):
        return (jg.stack([a.exp(), b.exp()]).reshape(2, -1) * 3).sum()
    cf = _check(f, _scalars(2), new_shape=(2,))
    fwd, _ = _plans(cf)[0]
    assert fwd.source.count("shares its operand's slot") >= 3, fwd.source
    assert fwd.instructions == len(fwd.source.splitlines()) - 2 - fwd.source.count("shares"), fwd.source


def test_fixed_index_and_scatter_accumulate():
    """x[[0, 2, 0]] (a fixed advanced index, twice the same row): its VJP accumulates."""
    def f(x):
        return (x[[0, 2, 0]] * jg.tensor([[1.0], [2.0], [3.0]])).pow(2).sum() + x[1, :2].sum()

    def inputs(rng, shape=(3, 2)):
        return [rng.standard_normal(shape).astype(np.float32)]
    _check(f, inputs, new_shape=(4, 3))


def test_bool_where_and_integer_cast():
    def f(x, m):
        return jg.where(m, x, -x).softmax(0)[0] + (x > 0).float().sum()

    def inputs(rng, n=5):
        return [rng.standard_normal(n).astype(np.float32), rng.random(n) < 0.5]
    _check(f, inputs, new_shape=6)


def test_index_tensor_input_falls_back():
    """An index read from an input (a value the tape does not hold) sends the graph to the fused loops, which
    read each call's indices."""
    def f(i, x):
        return (jg.stack([x[0], x[1] * 2]).softmax(0)[0] * x[i]).sum()

    def inputs(rng, n=5):
        return [rng.integers(0, n, 3), rng.standard_normal(n).astype(np.float32)]
    cf = _check(f, inputs, new_shape=6, tape=False, int_inputs=1)
    assert all(fwd.instructions == 0 for fwd, _ in _plans(cf))


def test_boolean_mask_input_falls_back():
    def f(m, x):
        return jg.stack([x.sum(), x[m].sum()]).softmax(0)[1]

    def inputs(rng, n=5):
        m = rng.random(n) < 0.5
        m[0] = True
        return [m, rng.standard_normal(n).astype(np.float32)]
    _check(f, inputs, new_shape=6, tape=False, int_inputs=1)


def test_matmul_falls_back():
    def f(x, w):
        return (x @ w).softmax(1).sum(0)[0]

    def inputs(rng, n=3):
        return [rng.standard_normal((n, 2)).astype(np.float32), rng.standard_normal((2, 4)).astype(np.float32)]
    cf = _check(f, inputs, new_shape=5, tape=False)
    assert all(fwd.instructions == 0 for fwd, _ in _plans(cf))


def test_tape_plan_declines_large_values():
    from jitgrad.compiler.capture import trace
    x = jg.tensor(np.ones(5000, np.float32), requires_grad=False)
    tracer, out = trace(lambda x: x.softmax(0), (x,), {}, True, [x])
    assert tape_plan(tracer.graph, [tracer.graph.value(out)]) is None


def stacked_graph(a, b, c, d):
    """0-d values stacked, normalised through sums (no softmax: compiled autograd records softmax's fused VJP as a
    call of the engine's kernel, which no tape instruction runs; nor an index list: compiled autograd reads index
    arrays from each graph), selected, sliced and flipped back."""
    v = [a, b, c, d]
    for k in range(4):
        e = jg.stack([v[-1], v[-2] * v[-3], F.softplus(v[-4])]).exp()
        p = e / e.sum(0, keepdim=True)
        v += [p[0] * p[1], p[1:].mean(0), p.flip(0)[0]]
    return v[-1] * v[-2] + v[-3]


def test_compiled_autograd_runs_mixed_tape(monkeypatch):
    """Eager code whose backward is a mixed-size graph: compiled autograd's plan is a tape, with eager's numbers
    (to the last bit: each instruction does what the eager kernel does)."""
    from jitgrad.autograd import engine
    from jitgrad.compiler import compiled_autograd
    built = []

    def recording(*args, **kwargs):
        plan = tape_plan(*args, **kwargs)
        built.append(plan)
        return plan
    monkeypatch.setattr(compiled_autograd, "tape_plan", recording)
    results = {}
    for enabled in (False, True):
        rng = np.random.default_rng(3)
        threshold = engine.SETTINGS["threshold"]
        prev = jg.autograd.set_compiled_autograd(enabled, threshold=1)
        try:
            out = []
            for step in range(4):
                xs = [jg.tensor(rng.standard_normal(()).astype(np.float32), requires_grad=True) for _ in range(4)]
                stacked_graph(*xs).backward()
                out.append([x.grad.numpy().copy() for x in xs])
            results[enabled] = out
        finally:
            jg.autograd.set_compiled_autograd(prev, threshold=threshold)
    for a, b in zip(results[False], results[True]):
        for u, v in zip(a, b):
            np.testing.assert_array_equal(u, v)
    assert built and all(p is not None and p.instructions > 0 for p in built)


def test_stacked_graph_compiled():
    _check(stacked_graph, _scalars(4), new_shape=(2,))
