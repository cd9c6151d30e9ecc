"""jitgrad.compile's behaviour: guards and re-tracing, graph breaks, fullgraph errors, explain, the
CompiledFunctionBackward node's autograd semantics, modules, the disk cache and jit_stats."""
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

import jitgrad as jg
from jitgrad.compiler import Unsupported, explain


def _t(a, rg=True):
    return jg.tensor(np.asarray(a, dtype=np.float64), requires_grad=rg)


def f(x, w):
    return ((x * w).tanh() + x.sigmoid() * 2).sum()


def test_decorator_forms_and_result():
    @jg.compile
    def g(x):
        return (x * 3).exp()

    @jg.compile(fullgraph=True, backend="jitgrad")
    def h(x):
        return (x * 3).exp()
    x = _t([0.1, 0.2], rg=False)
    np.testing.assert_allclose(g(x).numpy(), np.exp(3 * x.numpy()))
    np.testing.assert_allclose(h(x).numpy(), np.exp(3 * x.numpy()))
    assert jg.compile(g, disable=True) is g
    with pytest.raises(RuntimeError, match="invalid backend"):
        jg.compile(f, backend="nope")


def test_gradients_and_single_node():
    x, w = _t([0.5, -1.0, 2.0]), _t([1.5, 0.3, -0.7])
    x2, w2 = _t(x.detach().numpy()), _t(w.detach().numpy())
    y = jg.compile(f)(x, w)
    assert type(y.grad_fn).__name__ == "CompiledFunctionBackward"
    assert {e[0].__class__.__name__ for e in y.grad_fn.next_functions} == {"AccumulateGrad"}
    y.backward()
    f(x2, w2).backward()
    np.testing.assert_allclose(x.grad.numpy(), x2.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(w.grad.numpy(), w2.grad.numpy(), rtol=1e-12)


def test_guards_retrace_on_shape_dtype_requires_grad_and_grad_mode():
    cf = jg.compile(f)
    inner = cf._jitgrad_compiled
    cf(_t([1.0, 2.0]), _t([3.0, 4.0]))
    cf(_t([5.0, 6.0]), _t([7.0, 8.0]))
    assert len(inner.variants) == 1
    cf(_t([1.0, 2.0, 3.0]), _t([1.0, 2.0, 3.0]))  # shape
    cf(jg.tensor([1.0, 2.0]), jg.tensor([1.0, 2.0]))  # float32, no grad
    assert len(inner.variants) == 3
    with jg.no_grad():
        y = cf(_t([1.0, 2.0]), _t([3.0, 4.0]))
    assert not y.requires_grad and y.grad_fn is None
    assert len(inner.variants) == 4
    x = _t([1.0, 2.0])
    y = cf(x, _t([3.0, 4.0], rg=False))  # w no longer requires grad
    y.backward()
    assert x.grad is not None
    assert len(inner.variants) == 5


def test_too_many_variants_warn_once_then_eager():
    """dynamic=False: each shape is a variant of its own; the ninth runs eagerly, with one warning."""
    cf = jg.compile(lambda x: (x * 2).sum(), dynamic=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in range(1, 12):
            assert cf(_t(np.ones(n))).item() == 2 * n
    assert len([w for w in caught if "traced 8 times" in str(w.message)]) == 1


@pytest.mark.parametrize("dynamic", [None, True])
def test_shapes_alone_do_not_use_up_the_variants(dynamic):
    """As under PyTorch's dynamic shapes, a new shape is no new family of variants: 40 lengths all run compiled
    (a family keeps its MAX_SHAPES newest shapes), while other changes (ranks here) still count towards 8."""
    from jitgrad.compiler import driver
    cf = jg.compile(lambda x: (x * 2).sum(), dynamic=dynamic)
    inner = cf._jitgrad_compiled
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for n in range(1, 41):
            assert cf(_t(np.ones(n))).item() == 2 * n
            assert not inner.variants[inner.key((_t(np.ones(n)),), {})[0]].eager
    assert len(inner.variants) == driver.MAX_SHAPES and len(inner.families) == 1
    assert inner.key((_t(np.ones(1)),), {})[0] not in inner.variants  # the oldest shapes went
    assert cf(_t(np.ones(1))).item() == 2  # and trace again
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for rank in range(2, 10):
            assert cf(_t(np.ones((1,) * rank))).item() == 2
    assert len([w for w in caught if "traced 8 times" in str(w.message)]) == 1
    assert len(inner.families) == driver.MAX_VARIANTS


def test_python_scalars_are_guarded():
    cf = jg.compile(lambda x, k: (x * k).sum())
    assert cf(_t([1.0, 2.0]), 2).item() == 6
    assert cf(_t([1.0, 2.0]), 3).item() == 9


def test_graph_break_runs_eagerly_and_is_explained():
    def g(x):
        y = (x * 2).sum()
        if y.item() > 0:  # needs the value in Python
            return y * 3
        return y - 1
    cf = jg.compile(g)
    assert cf(_t([1.0, 2.0])).item() == 18
    assert cf(_t([-1.0, -2.0])).item() == -7  # the branch follows the value: the rest ran eagerly
    rep = explain(g, _t([1.0, 2.0]))
    assert len(rep.graph_breaks) == 1 and "Tensor.item()" in rep.graph_breaks[0][0]
    assert "test_compile.py" in rep.graph_breaks[0][1]
    assert rep.graph_count == 1 and "before the first break is compiled" in rep


def _compiled_part(t):
    """Whether autograd reaches a compiled region (CompiledFunctionBackward) from ``t``."""
    from jitgrad.compiler import CompiledFunctionBackward
    stack, seen = [t.grad_fn], set()
    while stack:
        n = stack.pop()
        if n is None or id(n) in seen:
            continue
        seen.add(id(n))
        if isinstance(n, CompiledFunctionBackward):
            return True
        stack += [f for f, _ in n.next_functions]
    return False


@pytest.mark.parametrize("size", [5, 3000, 70000])
def test_the_graph_before_a_break_is_compiled_and_the_rest_runs_eagerly(size):
    """A value read (item(), bool(t)) ends the graph: the ops before it run as one plan, the function's Python
    then goes on eagerly from the read (a branch on the value included), with eager's values and gradients.
    Past PREFIX_SIZE elements in all, the whole call runs eagerly."""
    from jitgrad.compiler import variant
    compiled = 3 * size + 2 <= variant.PREFIX_SIZE  # (mul, sin and add of size elements, two scalars)
    def f(x, w):
        h = (x * w).sin() + x
        if h.sum() > 0:  # bool(tensor): the break
            return (h * h.mean().item()).sum()
        return (h.exp() - w).sum()
    cf = jg.compile(f)
    rng = np.random.default_rng(0)
    for shift in (3.0, -3.0, 2.0, -2.0):
        base = rng.standard_normal(size) + shift
        got, want = [], []
        for fn, out in ((cf, got), (f, want)):
            x, w = _t(base), _t(np.full(size, 0.5))
            y = fn(x, w)
            y.backward()
            out += [y.item(), x.grad.numpy(), w.grad.numpy(), _compiled_part(y)]
        np.testing.assert_allclose(got[0], want[0], rtol=1e-10)
        np.testing.assert_allclose(got[1], want[1], rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(got[2], want[2], rtol=1e-10, atol=1e-12)
        assert got[3] == compiled and not want[3]  # the values before the break came from the plan
    (var,) = cf._jitgrad_compiled.variants.values()
    assert var.prefix == compiled and var.eager != compiled
    assert [n.op.name for n in var.graph.nodes] == ["mul", "sin", "add", "sum_all", "gt"]


def test_a_returned_value_the_backward_saved_is_version_checked():
    """softmax's VJP reads its output: written in place after the call, the compiled backward raises eager's
    error instead of using the changed values."""
    def f(x):
        return (x * 2).softmax(0)
    cf = jg.compile(f)
    for fn in (f, cf, cf):
        x = _t([1.0, 2.0, 0.5])
        y = fn(x)
        with jg.no_grad():
            y.mul_(2)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y[0].backward()
    x = _t([1.0, 2.0, 0.5])
    cf(x)[0].backward()  # untouched, it runs
    want = _t([1.0, 2.0, 0.5])
    f(want)[0].backward()
    np.testing.assert_allclose(x.grad.numpy(), want.grad.numpy(), rtol=1e-12)


@pytest.mark.parametrize("view", ["t", "view", "index", "reshape", "view_of_t", "computed"])
def test_a_returned_view_of_an_input_is_a_view_as_in_eager(view):
    """A compiled function that returns a view of its input returns a view: an in-place write to it changes the
    input and bumps its version, and gradients flow through it as in eager."""
    make = {"t": lambda x: x.t(), "view": lambda x: x.view(-1), "index": lambda x: x[0],
            "reshape": lambda x: x.reshape(2, 3), "view_of_t": lambda x: x.t().reshape(6),
            "computed": lambda x: (x * 2).view(-1)}[view]

    def f(x, w):
        return make(x), (x * w).sum()
    cf = jg.compile(f)
    for fn in (f, cf, cf, f):
        x, w = _t(np.arange(6.0).reshape(2, 3)), _t(np.full((2, 3), 0.5))
        xv = x.detach()  # the same memory, no history
        y, s = fn(xv, w)
        with jg.no_grad():
            y.add_(100)
        try:  # where the write went to x, which s's backward reads: eager's error
            (s * 2).backward()
            raised = None
        except RuntimeError as e:
            raised = str(e)
        got = (xv.tolist(), y.tolist(), xv._version, y._base is xv, raised)
        if fn is f:
            want = got
        assert got == want
    assert (want[4] is not None) == (view in ("t", "view", "index", "reshape"))
    grads = []
    for fn in (f, cf):
        x = _t(np.arange(6.0).reshape(2, 3))
        y, _ = fn(x, _t(np.ones((2, 3))))
        (y * _t(np.arange(float(np.prod(y.shape))).reshape(tuple(y.shape)))).sum().backward()
        grads.append(x.grad.numpy())
    np.testing.assert_array_equal(grads[1], grads[0])


@pytest.mark.parametrize("case", ["twice", "view", "t", "index", "chain"])
def test_outputs_that_view_other_outputs_are_views_as_in_eager(case):
    """An output returned twice is one tensor; an output that is a view of another output is its view (an
    in-place write to either shows in both, with one version counter); gradients through both add up."""
    make = {"twice": lambda y: (y, y), "view": lambda y: (y, y.view(-1)), "t": lambda y: (y.t(), y),
            "index": lambda y: (y, y[1]), "chain": lambda y: (y, y.t()[0])}[case]

    def f(x):
        return make(x * 2 + 1)
    cf = jg.compile(f)
    runs = []
    for fn in (f, cf, cf):
        x = _t(np.arange(6.0).reshape(2, 3))
        a, b = fn(x)
        (a.sum() * 3 + (b * b).sum()).backward()
        with jg.no_grad():
            a.add_(100)
        runs.append((a.tolist(), b.tolist(), a is b, a._version, b._version, x.grad.tolist()))
    assert runs[1] == runs[0] and runs[2] == runs[0]


def test_views_made_before_a_break_are_views_after_it():
    """A view op before the break is made as eager makes it at each call: an in-place write to it after the break
    changes its base, and gradients flow as in eager."""
    def f(x):
        h = x * 2
        v = h.view(2, 2)
        if h.sum().item() > 0:
            with jg.no_grad():
                v.add_(1)
        return h * v.view(4)
    cf = jg.compile(f)
    for sign in (1.0, -1.0, 1.0):
        got, want = [], []
        for fn, out in ((cf, got), (f, want)):
            x = _t([1.0, 2.0, 3.0, 4.0]) * sign
            x.retain_grad()
            y = fn(x)
            y.sum().backward()
            out += [y.tolist(), x.grad.tolist()]
        assert got == want
    (var,) = cf._jitgrad_compiled.variants.values()
    assert var.prefix


def test_a_call_that_leaves_the_traced_ops_runs_eagerly_from_there():
    """The ops up to the break are checked against the graph at each call (operands by identity, numbers by
    value): Python that takes another path (a global here) runs eagerly from the first op that differs."""
    scale = [2.0]

    def f(x):
        y = x * scale[0]
        return y + y.sum().item()
    cf = jg.compile(f)
    assert cf(_t([1.0, 2.0])).tolist() == [8.0, 10.0]
    scale[0] = 3.0
    x = _t([1.0, 2.0])
    y = cf(x)
    assert y.tolist() == [12.0, 15.0] and not _compiled_part(y)
    y.sum().backward()
    assert x.grad.tolist() == [3.0, 3.0]  # (the read value is a constant, as in eager)
    scale[0] = 2.0
    assert cf(_t([1.0, 2.0])).tolist() == [8.0, 10.0]
    (var,) = cf._jitgrad_compiled.variants.values()
    assert var.prefix and var.missed == 0
    scale[0] = 3.0  # two calls in a row that leave the traced ops: the plan is no longer run for nothing
    assert cf(_t([1.0, 2.0])).tolist() == [12.0, 15.0] and var.prefix
    assert cf(_t([1.0, 2.0])).tolist() == [12.0, 15.0] and var.eager and not var.prefix
    assert cf(_t([1.0, 2.0])).tolist() == [12.0, 15.0]


def _mlp_step_parts(seed=0):
    jg.manual_seed(seed)
    nn = jg.nn
    m = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
    x = jg.tensor(np.random.default_rng(seed).standard_normal((5, 6)).astype(np.float32))
    return m, x, jg.tensor([0, 1, 2, 1, 0])


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_a_step_that_returns_loss_item_compiles_its_forward_and_backward(optimizer):
    """The usual step ending in loss.item(): its forward runs as a plan and its loss's gradients as the captured
    backward's plan; zero_grad(), backward() and step() run as its Python calls them. Losses, parameters and
    optimizer state equal eager's after 6 steps."""
    runs = []
    for compiled in (False, True):
        m, x, y = _mlp_step_parts()
        opt = (jg.optim.SGD(m.parameters(), lr=0.1, momentum=0.9) if optimizer == "sgd"
               else jg.optim.Adam(m.parameters(), lr=0.01))
        seen = []

        def step():
            opt.zero_grad()
            loss = jg.nn.functional.cross_entropy(m(x), y)
            loss.backward()
            opt.step()
            seen.append(type(loss.grad_fn).__name__)
            return loss.item()
        f = jg.compile(step) if compiled else step
        runs.append(([f() for _ in range(6)], [p.detach().numpy().copy() for p in m.parameters()],
                     [np.asarray(v.detach().numpy()) for st in opt.state.values() for v in st.values()
                      if isinstance(v, jg.Tensor)], seen))
    (want, wparams, wstate, _), (got, params, state, seen) = runs
    np.testing.assert_allclose(got, want, rtol=1e-5)  # (float32: a plan fuses differently)
    for a, b in zip(params + state, wparams + wstate):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    # the trace ran the Python once more (eagerly); each of the 6 calls then took the plan's loss
    assert len(seen) == 7 and seen[0] != "CompiledFunctionBackward" and seen[1:] == ["CompiledFunctionBackward"] * 6
    (var,) = f._jitgrad_compiled.variants.values()
    assert var.prefix and not var.effects and var.bplan is not None


def test_a_step_whose_ops_follow_its_optimizer_step_runs_eagerly():
    """Ops after optimizer.step() read the updated parameters, which a plan run before the step would not see:
    such a step with a break stays eager, with eager's results."""
    runs = []
    for compiled in (False, True):
        m, x, y = _mlp_step_parts(1)
        opt = jg.optim.SGD(m.parameters(), lr=0.5)

        def step():
            opt.zero_grad()
            jg.nn.functional.cross_entropy(m(x), y).backward()
            opt.step()
            return m(x).sum().item()
        f = jg.compile(step) if compiled else step
        runs.append([f() for _ in range(3)])
    np.testing.assert_allclose(runs[1], runs[0], rtol=1e-6)
    (var,) = f._jitgrad_compiled.variants.values()
    assert var.eager and not var.prefix


def test_outputs_of_a_replayed_step_besides_its_loss_backpropagate():
    """A replayed step's other values get a node that runs the region again when a backward reaches them: a
    value beside the loss's graph backpropagates as in eager; one the loss derives from raises eager's error
    once the loss's backward freed that graph."""
    runs = []
    for compiled in (False, True):
        m, x, y = _mlp_step_parts(2)
        xs = x.clone().requires_grad_()

        opt = jg.optim.SGD(m.parameters(), lr=0.1)

        def step():
            opt.zero_grad()
            logits = m(xs)
            side = (xs * 2).tanh()  # not in the loss's graph (nor reading the parameters the step updates)
            loss = jg.nn.functional.cross_entropy(logits, y)
            loss.backward()
            opt.step()
            return loss.item(), logits, side
        f = jg.compile(step) if compiled else step
        out = []
        for _ in range(2):
            xs.grad = None
            value, logits, side = f()
            (side ** 2).sum().backward()
            with pytest.raises(RuntimeError, match="backward through the graph a second time"):
                logits.sum().backward()
            out.append([value, xs.grad.numpy().copy()] + [p.detach().numpy().copy() for p in m.parameters()])
        runs.append(out)
    for want, got in zip(*runs):
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    (var,) = f._jitgrad_compiled.variants.values()
    assert var.prefix and var.replay_outs and var.replay_shared


def test_inplace_and_random_are_graph_breaks():
    def g(x):
        y = x * 1
        y.add_(1)
        return y
    assert "in-place" in explain(g, _t([1.0])).graph_breaks[0][0]
    cf = jg.compile(lambda x: jg.nn.functional.dropout(x, 0.5))
    a, b = cf(_t(np.ones(200))), cf(_t(np.ones(200)))
    assert not np.array_equal(a.detach().numpy(), b.detach().numpy())  # fresh masks: not frozen by the trace
    with pytest.raises(Unsupported, match="random"):
        jg.compile(lambda x: jg.nn.functional.dropout(x, 0.5), fullgraph=True)(_t(np.ones(4)))


@pytest.mark.parametrize("draw", [lambda x, gen: x * jg.rand(x.shape, generator=gen, dtype=x.dtype),
                                  lambda x, gen: x.bernoulli(generator=gen) + x],
                         ids=["factory", "op"])
@pytest.mark.parametrize("passed", [True, False], ids=["generator", "default"])
def test_random_draws_run_eagerly_with_the_draws_of_eager_calls(draw, passed):
    gen = jg.Generator() if passed else None
    reseed = (lambda: gen.manual_seed(0)) if passed else (lambda: jg.manual_seed(0))
    x = _t(np.full(8, 0.5), rg=False)
    reseed()
    eager = [draw(x, gen).numpy() for _ in range(3)]
    reseed()
    cf = jg.compile(lambda x: draw(x, gen))
    compiled = [cf(x).numpy() for _ in range(3)]
    for a, b in zip(eager, compiled):  # nothing frozen by the trace, and the trace's own draws not seen
        np.testing.assert_array_equal(a, b)
    assert "random" in explain(lambda x: draw(x, gen), x).graph_breaks[0][0]
    with pytest.raises(Unsupported, match="random"):
        jg.compile(lambda x: draw(x, gen), fullgraph=True)(x)


def test_dispatch_looks_for_a_trace_only_while_one_runs():
    """The capture hook sits behind the per-op path's rare-mode counter: a trace raises it, and it is back
    to 0 after the trace, a graph break, and a fullgraph error alike."""
    from jitgrad._grad_mode import SPECIAL, STATE
    seen = []

    def g(x):
        seen.append((SPECIAL[0], STATE.capture is not None))
        return x * 2
    jg.compile(g)(_t([1.0]))
    assert seen == [(1, True)] and SPECIAL[0] == 0 and STATE.capture is None
    explain(lambda x: float(x.sum()) * x, _t([1.0]))
    with pytest.raises(Unsupported):
        jg.compile(lambda x: float(x.sum()) * x, fullgraph=True)(_t([1.0]))
    assert SPECIAL[0] == 0 and STATE.capture is None


@pytest.mark.parametrize("small", [4096, 0])
def test_explain_shows_graph_groups_guards_source(capsys, monkeypatch, small):
    monkeypatch.setattr(jg.compiler.tape, "SMALL", small)
    monkeypatch.setattr(jg.compiler.variant, "JOINT_MAX_SIZE", 0)  # a backward plan of its own (see test_compile_joint)
    rep = explain(f, _t([1.0, 2.0]), _t([3.0, 4.0]))
    out = capsys.readouterr().out
    assert rep.graph_count == 1 and rep.ops == ["mul", "tanh", "sigmoid", "mul", "add", "sum_all"]
    for part in ("Guards:", "requires_grad=True", "Forward graph: 6 ops", "def forward(", "Backward graph"):
        assert part in out
    if small:  # a small graph is a tape: its instructions, and the interpreter of its cases
        for part in ("a tape of 6 instructions over values of 1, 2 element(s)", "v3 = tanh(v2)", "def tape_",
                     "F_tanh(np.float64(u0[j]))", "fused groups: 0"):
            assert part in out
    else:
        assert "fused groups: 1" in out and "for i in range(n):" in out


def test_a_tape_compiles_a_large_scalar_graph_once_per_set_of_functions():
    """1,000 scalar ops of five kinds: one interpreter with a case per (function, dtypes), equal to eager."""
    def g(*xs):
        v = list(xs)
        for k in range(200):
            a, b = v[-1], v[-3]
            v.append([a * b, a + b, (a * 0.5).tanh(), b.sigmoid(), (a - b).exp() * 0.01][k % 5])
        return v[-1] + v[-2] * v[-4]
    xs = [_t(0.1 * k - 0.3) for k in range(4)]
    cg = jg.compile(g)
    got = cg(*xs)
    got.backward()
    cgrads = [None if x.grad is None else x.grad.item() for x in xs]
    for x in xs:
        x.grad = None
    want = g(*xs)
    want.backward()
    assert got.item() == pytest.approx(want.item(), rel=1e-12)
    egrads = [None if x.grad is None else x.grad.item() for x in xs]
    assert [g is None for g in cgrads] == [g is None for g in egrads] and egrads.count(None) < 2
    assert [g for g in cgrads if g is not None] == pytest.approx([g for g in egrads if g is not None], rel=1e-10)
    var = next(iter(cg._jitgrad_compiled.variants.values()))
    # one tape computes the value and its gradients (see test_compile_joint), with one case per function
    assert var.joint is not None and var.bplan is None
    assert var.plan.groups == [] and "a tape of" in var.plan.source
    # (hundreds of instructions: the ops the value and gradients need; a plan drops the others)
    assert var.plan.source.count("\n") > 500 and var.plan.kernel_sources[0].count("op ==") <= 10
    stats = jg.jit_stats()["graphs"][-1]
    assert stats["fused_groups"] == 0 and stats["tape_instructions"] == var.plan.instructions > 500


def test_a_tape_casts_between_float32_float64_and_bool_as_eager():
    def g(x, y):
        z = (x.double() * y.double()).tanh()  # float32 -> float64, exactly
        m = (z > 0.1).float()  # bool -> float32
        return (z.float() * m + (x * y).bool().float()).sum(), z  # float64 -> float32 rounds
    a, b = np.float32([0.3, -1.7, 2.5, 1e-3]), np.float32([1.1, 0.4, -0.2, 3.0])
    xs = [jg.tensor(a, requires_grad=True), jg.tensor(b, requires_grad=True)]
    ys = [jg.tensor(a, requires_grad=True), jg.tensor(b, requires_grad=True)]
    cg = jg.compile(g)
    (s1, z1), (s2, z2) = g(*xs), cg(*ys)
    assert z2.dtype is jg.float64 and s2.dtype is jg.float32
    np.testing.assert_array_equal(z2.detach().numpy(), z1.detach().numpy())
    assert s2.item() == s1.item()
    s1.backward()
    s2.backward()
    for p, q in zip(xs, ys):
        np.testing.assert_allclose(q.grad.numpy(), p.grad.numpy(), rtol=1e-6)
    var = next(iter(cg._jitgrad_compiled.variants.values()))
    assert var.plan.instructions and "cast(v" in var.plan.source


def test_create_graph_falls_back_to_formulas():
    x, w = _t([0.5, -1.0]), _t([1.5, 0.3])
    x2, w2 = _t(x.detach().numpy()), _t(w.detach().numpy())
    (gx,) = jg.autograd.grad(jg.compile(f)(x, w), x, create_graph=True)
    (ex,) = jg.autograd.grad(f(x2, w2), x2, create_graph=True)
    np.testing.assert_allclose(gx.detach().numpy(), ex.detach().numpy(), rtol=1e-12)
    gx.sum().backward()
    ex.sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), w2.grad.numpy(), rtol=1e-10)


def test_gradgradcheck_through_compiled():
    cf = jg.compile(f)
    x, w = _t([0.5, -1.0, 0.25]), _t([1.5, 0.3, -2.0])
    assert jg.autograd.gradcheck(cf, (x, w))
    assert jg.autograd.gradgradcheck(cf, (x, w))


def test_version_check_hooks_retain_grad_and_retain_graph():
    x, w = _t([0.5, -1.0]), _t([1.5, 0.3])
    xi = x * 1  # a non-leaf input
    xi.retain_grad()
    seen = []
    xi.register_hook(lambda g: seen.append(g.numpy().copy()))
    y = jg.compile(f)(xi, w)
    y.backward(retain_graph=True)
    assert len(seen) == 1 and xi.grad is not None
    np.testing.assert_allclose(x.grad.numpy(), xi.grad.numpy())
    first = x.grad.numpy().copy()
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * first)
    assert len(seen) == 2
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward()
    x3, w3 = _t([0.5, -1.0]), _t([1.5, 0.3])
    xi3 = x3 * 1
    y3 = jg.compile(f)(xi3, w3)
    with jg.no_grad():
        xi3.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y3.backward()


def test_outputs_structure_and_passthrough():
    @jg.compile
    def g(x, pair):
        a, b = pair
        return {"s": x + a, "p": (x * b, 3)}, x
    x = _t([1.0, 2.0])
    out, same = g(x, (_t([1.0, 1.0], rg=False), _t([2.0, 2.0], rg=False)))
    assert same is x and out["p"][1] == 3
    np.testing.assert_allclose(out["s"].detach().numpy(), [2.0, 3.0])
    np.testing.assert_allclose(out["p"][0].detach().numpy(), [2.0, 4.0])


class MLP(jg.nn.Module):
    def __init__(self):
        super().__init__()
        self.l1, self.l2 = jg.nn.Linear(6, 8), jg.nn.Linear(8, 3)
        self.drop = jg.nn.Dropout(0.0)
        self.scale = 2.0

    def forward(self, x):
        return self.l2(self.drop(self.l1(x).relu())) * self.scale


def test_module_shares_parameters_and_state():
    jg.manual_seed(0)
    m = MLP()
    cm = jg.compile(m)
    assert cm._orig_mod is m and cm.scale == 2.0 and cm.l1 is m.l1
    assert list(cm.parameters())[0] is list(m.parameters())[0]
    assert set(cm.state_dict()) == {"_orig_mod." + k for k in m.state_dict()}
    x = jg.tensor(np.random.default_rng(0).standard_normal((4, 6)), dtype=jg.float32)
    np.testing.assert_allclose(cm(x).detach().numpy(), m(x).detach().numpy(), rtol=1e-6)
    cm.eval()
    assert not m.training
    cm.train()
    with jg.no_grad():
        m.l1.weight.mul_(0.5)  # parameters are read live, not copied by the trace
    np.testing.assert_allclose(cm(x).detach().numpy(), m(x).detach().numpy(), rtol=1e-6)
    m.l2.weight = jg.nn.Parameter(m.l2.weight.detach() * 3)  # a new parameter object: re-trace
    np.testing.assert_allclose(cm(x).detach().numpy(), m(x).detach().numpy(), rtol=1e-6)


def test_module_training_matches_eager():
    jg.manual_seed(0)
    m1 = MLP()
    m2 = MLP()
    m2.load_state_dict(m1.state_dict())
    cm = jg.compile(m1)
    o1 = jg.optim.SGD(m1.parameters(), lr=0.1, momentum=0.9)
    o2 = jg.optim.SGD(m2.parameters(), lr=0.1, momentum=0.9)
    rng = np.random.default_rng(0)
    x, y = jg.tensor(rng.standard_normal((5, 6)), dtype=jg.float32), jg.tensor(rng.integers(0, 3, 5))
    for _ in range(4):
        for model, opt in ((cm, o1), (m2, o2)):
            opt.zero_grad()
            jg.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
    for p1, p2 in zip(m1.parameters(), m2.parameters()):
        np.testing.assert_allclose(p1.detach().numpy(), p2.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_conv_plans_keep_no_columns_between_calls():
    """conv2d hands its im2col columns to its weight gradient as a workspace output: a value of the compiled
    graph like any other, which a plan must neither keep alive between calls (with the last input) nor get
    wrong."""
    import gc
    import weakref
    jg.manual_seed(0)
    conv = jg.nn.Conv2d(3, 4, 3)

    def step(x):
        return conv(x).relu().sum()
    cf = jg.compile(step)
    rng = np.random.default_rng(0)
    for _ in range(2):
        x = jg.tensor(rng.standard_normal((2, 3, 8, 8)), dtype=jg.float32)
        conv.zero_grad()
        cf(x).backward()
        compiled = conv.weight.grad.numpy().copy()
        conv.zero_grad()
        step(x).backward()
        np.testing.assert_allclose(compiled, conv.weight.grad.numpy(), rtol=1e-5, atol=1e-5)
    x = jg.tensor(rng.standard_normal((2, 3, 8, 8)), dtype=jg.float32)
    alive = weakref.ref(x._data)
    loss = cf(x)  # forward only: no backward takes the columns
    del loss, x
    gc.collect()
    assert alive() is None
    convs = [n for var in cf._jitgrad_compiled.variants.values() for n in var.graph.nodes if n.op.name == "conv2d"]
    assert convs and all(len(n.outs) == 2 for n in convs)  # the result and the columns


@pytest.mark.parametrize("backend,small", [("jitgrad", 4096), ("jitgrad", 0), ("eager", 0)])
def test_conv_training_step_reads_the_forward_columns(monkeypatch, backend, small):
    """A whole training step (forward, backward, SGD) of a convolution whose im2col columns (its workspace
    output, a value of the plan) feed its fused weight gradient: a tape, fused loops and the op-by-op plan give
    eager's parameters; compiled autograd's plan of the same backward too."""
    monkeypatch.setattr(jg.compiler.tape, "SMALL", small)

    def run(compiled, autograd=False):
        jg.manual_seed(0)
        model = jg.nn.Sequential(jg.nn.Conv2d(3, 4, 3, padding=1), jg.nn.ReLU(), jg.nn.Flatten(),
                                 jg.nn.Linear(4 * 6 * 6, 3)).double()
        opt = jg.optim.SGD(model.parameters(), lr=0.1)
        x = jg.tensor(np.linspace(-1, 1, 2 * 3 * 36).reshape(2, 3, 6, 6))
        y = jg.tensor([0, 2])

        def step():
            opt.zero_grad()
            loss = jg.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return loss
        fn = jg.compile(step, backend=backend) if compiled else step
        prev = jg.autograd.set_compiled_autograd(autograd, threshold=2)
        try:
            for _ in range(3):
                fn()
        finally:
            jg.autograd.set_compiled_autograd(prev)
        return [p.detach().numpy() for p in model.parameters()]
    eager = run(False)
    ran = jg.jit_stats()["compiled_autograd"]["hits"]
    for got in (run(True), run(False, autograd=True)):
        for a, b in zip(got, eager):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    assert jg.jit_stats()["compiled_autograd"]["hits"] > ran  # (the third step's backward ran a plan)


@pytest.mark.parametrize("small", [4096, 0])  # a tape, and fused loops
def test_disk_cache_serves_a_second_process(tmp_path, small):
    script = (
        "import numpy as np, jitgrad as jg\n"
        "jg.compiler.tape.SMALL = %d\n"
        "jg.compiler.variant.JOINT_MAX_SIZE = 0\n"  # a forward and a backward plan
        "f = jg.compile(lambda x, w: ((x * w + 0.25).tanh() * x.sigmoid()).sum())\n"
        "x = jg.tensor(np.linspace(-1, 1, 7), requires_grad=True)\n"
        "f(x, jg.tensor(np.ones(7))).backward()\n"
        "g = jg.jit_stats()['graphs'][0]\n"
        "print(g['fused_groups'], g['kernels_from_cache'])\n") % small
    env = dict(os.environ, JITGRAD_COMPILE_CACHE=str(tmp_path))
    runs = [subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600)
            for _ in range(2)]
    for r in runs:
        assert r.returncode == 0, r.stderr
    first, second = (tuple(map(int, r.stdout.split())) for r in runs)
    # two fused loops (forward, backward), or two tapes whose interpreters are compiled, then loaded
    assert first == (0 if small else 2, 0)
    assert second == (0 if small else 2, 2)
    assert any(p.endswith(".py") for p in os.listdir(tmp_path))


def test_jit_stats_and_log(tmp_path):
    script = ("import numpy as np, jitgrad as jg\n"
              "jg.compile(lambda x: (x * 2 + 1).exp().sum())(jg.tensor(np.ones(3)))\n")
    env = dict(os.environ, JITGRAD_LOG_COMPILES="1", JITGRAD_COMPILE_CACHE=str(tmp_path))
    r = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600)
    assert "jitgrad: compiled graph <lambda> (4 ops forward" in r.stderr
    before = len(jg.jit_stats()["graphs"])
    jg.compile(lambda x: (x * 2).sum())(_t([1.0]))
    stats = jg.jit_stats()
    assert len(stats["graphs"]) == before + 1 and stats["graphs"][-1]["nodes"] == 2
    assert stats["graph_compile_seconds"] >= stats["graphs"][-1]["compile_seconds"] >= 0


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_reduced_precision_runs_eagerly_with_eagers_values(dtype):
    """Eager ops compute float16/bfloat16 in float32 and round each result: a compiled function of them runs
    eagerly (a graph break that explain names), with eager's dtypes, values and gradients."""
    dt = getattr(jg, dtype)

    def g(x, w):
        return ((x * w).tanh() * x.sigmoid()).sum()
    rng = np.random.default_rng(4)
    for n in (100, 70_000):  # a tape's size, and a loop's
        x, w = (jg.tensor(rng.standard_normal(n), dtype=dt, requires_grad=True) for _ in range(2))
        got = jg.compile(g)(x, w)
        got.backward()
        grads = [x.grad.float().numpy(), w.grad.float().numpy()]
        x.grad = w.grad = None
        want = g(x, w)
        want.backward()
        assert got.dtype is dt and got.grad_fn is not None
        assert got.float().item() == want.float().item()
        np.testing.assert_array_equal(grads[0], x.grad.float().numpy())
        np.testing.assert_array_equal(grads[1], w.grad.float().numpy())
    assert any("float16 or bfloat16" in reason for reason, _ in explain(g, x, w).graph_breaks)
    with pytest.raises(Unsupported, match="float16 or bfloat16"):
        jg.compile(g, fullgraph=True)(x, w)


def test_module_guard_sees_flags_parameters_and_buffers_of_every_submodule():
    from jitgrad.compiler.guards import module_guard
    block = jg.nn.Sequential(jg.nn.Linear(3, 3), jg.nn.BatchNorm1d(3))
    m = jg.nn.Sequential(block, jg.nn.ReLU(), block)  # a shared submodule: walked once
    guard = module_guard(m)
    first = guard()
    assert first == guard() and len(first[0]) == len(list(m.modules()))
    block[1].eval()
    assert guard() != first
    block[1].train()
    assert guard() == first
    block[1].running_mean = jg.zeros(3)  # a new buffer object
    second = guard()
    assert second != first
    block[0].weight = jg.nn.Parameter(block[0].weight.detach().clone())  # a new parameter object
    assert guard() != second


def test_a_forward_value_a_backward_gemm_reads_is_saved_not_recomputed():
    """relu(x @ w1) is the operand of w2's gradient GEMM: the backward reads the forward's array (recomputing
    it would cost a pass and a buffer); gradients equal eager's."""
    rng = np.random.default_rng(0)
    x = jg.tensor(rng.standard_normal((64, 32)).astype(np.float32))
    w1 = jg.tensor(rng.standard_normal((32, 48)).astype(np.float32), requires_grad=True)
    w2 = jg.tensor(rng.standard_normal((48, 8)).astype(np.float32), requires_grad=True)

    def f(x, w1, w2):
        return (jg.relu(x @ w1) @ w2).sum()
    text = explain(f, x, w1, w2)
    backward = text[text.index("Backward graph"):text.index("Backward generated source")]
    assert "= relu(" not in backward and "fwd float32 [64, 48]" in backward
    got = jg.autograd.grad(jg.compile(f)(x, w1, w2), (w1, w2))
    want = jg.autograd.grad(f(x, w1, w2), (w1, w2))
    for g, e in zip(got, want):
        np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("joint", [False, True])
def test_a_traced_backward_holds_the_entries_fused_vjp_kernels(monkeypatch, joint):
    """The backward graph holds an entry's fused VJP kernel as one op (tanh's, sigmoid's, leaky_relu's with its
    slope), where its formula would record two or three: fewer instructions, and eager's own arithmetic."""
    monkeypatch.setattr(jg.compiler.variant, "JOINT_MAX_SIZE", 4096 if joint else 0)

    def f(x, w):
        return ((x * w).tanh().sigmoid() + jg.nn.functional.leaky_relu(x, 0.2)).sum()
    rng = np.random.default_rng(7)
    arrays = [rng.standard_normal(16).astype(np.float32) for _ in range(2)]
    ce = [jg.tensor(a, requires_grad=True) for a in arrays]
    f(*ce).backward()
    cf = jg.compile(f)
    ts = [jg.tensor(a, requires_grad=True) for a in arrays]
    cf(*ts).backward()
    var = next(iter(cf._jitgrad_compiled.variants.values()))
    names = [node.op.name for node in var.bgraph.nodes]
    assert {"tanh_vjp", "sigmoid_vjp", "leaky_relu_vjp"} <= set(names) and "sub" not in names
    for t, e in zip(ts, ce):
        np.testing.assert_allclose(t.grad.numpy(), e.grad.numpy(), rtol=1e-6, atol=0)
