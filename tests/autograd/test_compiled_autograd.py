"""Compiled autograd (jitgrad/compiler/compiled_autograd.py): an eager backward of a graph seen before runs a
compiled plan, with the node-by-node engine's results and semantics.

The differential test runs hypothesis-generated programs (elementwise chains, broadcasting, views, in-place
writes, integer targets, index tensors, boolean masks, retain_grad, hooks) for several steps with new values of
every input each step, and a new shape at the end, with the switch on and off: the gradients, ``.grad``
identities and errors agree. The others pin the branches: freeing, retain_graph, inputs=, grad_tensors,
autograd.grad, version errors, custom Functions, hooks, threads, the counters, the environment variable.
"""
import os
import subprocess
import sys
import threading

import numpy as np
import pytest
from hypothesis import given, settings, HealthCheck, strategies as st

import jitgrad as jg
from jitgrad.compiler import compiled_autograd as ca

import helpers


@pytest.fixture
def compiled():
    """Compiled autograd on, plans built on a graph's second backward; the previous switches restored after."""
    yield from helpers.compiled_autograd_on()


def _stats():
    return jg.jit_stats()["compiled_autograd"]


# ---------------------------------------------------------------- programs
# An instruction: (name, argument). Values are float64 tensors of shape (rows, 3); leaves: x (rows, 3), w (3,),
# b (rows, 3). The program's last value is reduced to the loss (sum, mean, cross_entropy or nll_loss).
UNARY = ["exp", "tanh", "sin", "sigmoid", "relu", "abs", "neg", "square", "sqrt1"]
BINARY = ["add_w", "mul_w", "mul_x", "sub_b", "div_b", "max_x", "where_mask", "mul_mask"]
SHAPES = ["transpose2", "reshape", "slice_add", "expand_mul", "cat", "index_select", "gather"]
INPLACE = ["mul_", "add_", "clamp_", "setitem"]
MARKS = ["retain_grad", "hook"]
INSTRUCTIONS = UNARY + BINARY + SHAPES + INPLACE + MARKS
LOSSES = ["sum", "mean", "cross_entropy", "nll_loss", "weighted"]


def _inputs(rng, rows):
    """New values of every input: the leaves, a boolean mask, index tensors, integer targets, a weight."""
    return {
        "x": rng.standard_normal((rows, 3)), "w": rng.standard_normal(3), "b": rng.uniform(0.5, 2.0, (rows, 3)),
        "mask": rng.random((rows, 3)) < 0.5, "idx": rng.integers(0, rows, rows), "gidx": rng.integers(0, 3, (rows, 3)),
        "target": rng.integers(0, 3, rows), "weight": rng.standard_normal((rows, 3)),
    }


def _run_program(program, loss_kind, data, leaves, retained):
    x, w, b = leaves
    mask = jg.tensor(data["mask"])
    y = x
    for name in program:
        if name == "exp":
            y = (y * 0.3).exp()
        elif name == "square":
            y = y ** 2
        elif name == "sqrt1":
            y = (y.abs() + 1).sqrt()
        elif name in UNARY:
            y = getattr(y, name)()
        elif name == "add_w":
            y = y + w
        elif name == "mul_w":
            y = y * w
        elif name == "mul_x":
            y = y * x
        elif name == "sub_b":
            y = b - y
        elif name == "div_b":
            y = y / b
        elif name == "max_x":
            y = jg.maximum(y, x * 0.5)
        elif name == "where_mask":
            y = jg.where(mask, y, y * 2 + 1)
        elif name == "mul_mask":
            y = y * mask
        elif name == "transpose2":
            y = y.t().contiguous().t() * 1.5
        elif name == "reshape":
            y = y.reshape(-1).tanh().reshape(y.shape)
        elif name == "slice_add":
            y = y + y[:1]
        elif name == "expand_mul":
            y = y * w.unsqueeze(0).expand(y.shape)
        elif name == "cat":
            y = jg.cat([y[:, :1], y[:, 1:] * 2], dim=1)
        elif name == "index_select":
            y = y.index_select(0, jg.tensor(data["idx"])) + y
        elif name == "gather":
            y = y.gather(1, jg.tensor(data["gidx"])) * y
        elif name == "mul_":
            y = y * 1.0
            y.mul_(b)
        elif name == "add_":
            y = y.clone()
            y.add_(w)
        elif name == "clamp_":
            y = y + 0
            y.clamp_(-1.5, 1.5)
        elif name == "setitem":
            y = y.clone()
            y[0] = w * 2  # (CopySlices: the graph runs on the node-by-node engine)
        elif name == "retain_grad":
            y = y * 1.25
            y.retain_grad()
            retained.append(y)
        elif name == "hook":
            y = y * 0.75
            y.register_hook(lambda g: g * 2)
    if loss_kind == "sum":
        return y.sum()
    if loss_kind == "mean":
        return y.mean()
    if loss_kind == "weighted":
        return (y * jg.tensor(data["weight"])).sum()
    target = jg.tensor(data["target"])
    if loss_kind == "cross_entropy":
        return jg.nn.functional.cross_entropy(y, target)
    return jg.nn.functional.nll_loss(jg.nn.functional.log_softmax(y, dim=1), target)


def _train(program, loss_kind, seed, steps, enabled):
    """Run ``program`` for ``steps`` steps (new values each, then one of another shape), accumulating into the
    leaves' .grad; returns per step (gradients, retained gradients, which .grad objects are kept, error)."""
    jg.autograd.set_compiled_autograd(enabled, threshold=2)
    rng = np.random.default_rng(seed)
    out = []
    leaves = None
    for step in range(steps + 1):
        rows = 4 if step < steps else 5  # the last step: a new shape (new leaves too)
        data = _inputs(rng, rows)
        if leaves is None or step == steps:
            leaves = [jg.tensor(data[k], requires_grad=True) for k in ("x", "w", "b")]
        else:  # new values in the same leaves (as an optimizer step writes them)
            with jg.no_grad():
                for t, k in zip(leaves, ("x", "w", "b")):
                    t.copy_(jg.tensor(data[k]))
        before = [t.grad for t in leaves]
        retained = []
        error = None
        try:
            loss = _run_program(program, loss_kind, data, leaves, retained)
            loss.backward()
        except RuntimeError as exc:
            error = str(exc)
        grads = [None if t.grad is None else t.grad.numpy().copy() for t in leaves]
        kept = [a is not None and a is t.grad for a, t in zip(before, leaves)]
        out.append((grads, [None if r.grad is None else r.grad.numpy().copy() for r in retained], kept, error))
    return out


def _same(a, b):
    assert len(a) == len(b)
    for (ga, ra, ka, ea), (gb, rb, kb, eb) in zip(a, b):
        assert ea == eb
        assert ka == kb
        for u, v in zip(ga + ra, gb + rb):
            assert (u is None) == (v is None)
            if u is not None:
                np.testing.assert_array_equal(u, v)  # (plans give the engine's results to the last bit)


_PROGRAMS = dict(program=st.lists(st.sampled_from(INSTRUCTIONS), min_size=1, max_size=6),
                 loss=st.sampled_from(LOSSES), seed=st.integers(0, 2 ** 16))


@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
@given(**_PROGRAMS)
def test_differential_programs(program, loss, seed):
    _differential(program, loss, seed)


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(program=st.lists(st.sampled_from(INSTRUCTIONS), min_size=1, max_size=12), loss=st.sampled_from(LOSSES),
       seed=st.integers(0, 2 ** 16))
def test_differential_programs_sweep(program, loss, seed):
    _differential(program, loss, seed)


def _differential(program, loss, seed):
    prev = dict(ca.SETTINGS)
    ca.reset()
    try:
        on = _train(program, loss, seed, 3, True)
        off = _train(program, loss, seed, 3, False)
    finally:
        ca.SETTINGS.update(prev)
    _same(on, off)


@pytest.mark.parametrize("program,loss", [
    (["mul_w", "tanh", "add_w", "exp"], "sum"),
    (["sub_b", "div_b", "sigmoid", "index_select"], "cross_entropy"),
    (["where_mask", "mul_mask", "gather", "relu"], "nll_loss"),
    (["mul_", "add_", "clamp_", "reshape", "transpose2"], "weighted"),
    (["slice_add", "expand_mul", "cat", "max_x", "square"], "mean"),
])
def test_plans_run_with_new_values_each_step(compiled, program, loss):
    """These graphs run as plans from their second step (counted as hits), reading each step's values."""
    before = _stats()
    on = _train(program, loss, 7, 4, True)
    hits = _stats()["hits"] - before["hits"]
    off = _train(program, loss, 7, 4, False)
    _same(on, off)
    assert hits >= 2, _stats()  # steps 3 and 4 (step 2 builds the plan and runs it; step 5 has a new shape)
    inc = [on[k + 1][0][0] - on[k][0][0] for k in range(3)]  # (each step's gradient differs: new values)
    assert not np.allclose(inc[1], inc[2])


def _chain(x, w):
    return ((x * w).tanh() * x + w).sum()


def test_freed_graph_and_retain_graph(compiled):
    x = jg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    w = jg.tensor([0.5, -1.0, 2.0], requires_grad=True)
    for _ in range(2):
        _chain(x, w).backward()
    hits = _stats()["hits"]
    loss = _chain(x, w)
    loss.backward(retain_graph=True)
    loss.backward()  # the plan ran with retain_graph: the saved values are still there
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        loss.backward()
    assert _stats()["hits"] >= hits + 2
    x.grad = w.grad = None
    xe = x.detach().requires_grad_()
    we = w.detach().requires_grad_()
    _chain(x, w).backward()
    jg.autograd.set_compiled_autograd(False)
    _chain(xe, we).backward()
    np.testing.assert_allclose(x.grad.numpy(), xe.grad.numpy(), rtol=1e-6)


def test_version_error_is_the_engines(compiled):
    x = jg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    for _ in range(3):
        y = x * 2
        z = y.exp()  # saves its result
        z.sum().backward()
    y = x * 2
    z = y.exp()
    with jg.no_grad():
        z.add_(1)
    with pytest.raises(RuntimeError, match="is at version 1; expected version 0 instead"):
        z.sum().backward()
    assert _stats()["fallback_reasons"].get("a saved tensor freed or modified in place")


def test_grad_inputs_and_grad_tensors(compiled):
    x = jg.tensor([[1.0, 2.0], [3.0, -1.0]], requires_grad=True)
    w = jg.tensor([0.5, -2.0], requires_grad=True)
    results = []
    for enabled in (True, True, True, False):
        jg.autograd.set_compiled_autograd(enabled)
        h = (x * w).sigmoid()
        out = h * x
        go = jg.tensor([[1.0, 0.5], [-1.0, 2.0]])
        gx, gh = jg.autograd.grad(out, (x, h), go, retain_graph=True)
        x.grad = w.grad = None
        out.backward(go, inputs=[w])
        results.append((gx.numpy(), gh.numpy(), w.grad.numpy(), x.grad))
    assert _stats()["hits"] >= 2
    for r in results[:-1]:
        for a, b in zip(r[:3], results[-1][:3]):
            np.testing.assert_allclose(a, b, rtol=1e-6)
        assert r[3] is None


def test_grad_passes_a_roots_gradient_through(compiled):
    x = jg.tensor([1.0, 2.0], requires_grad=True)
    for _ in range(3):
        y = x * 3
        z = y + 1
        g = jg.tensor([1.0, -1.0])
        (gy,) = jg.autograd.grad(z, y, g)
        assert gy is g  # the engine hands the root's own gradient on


def test_grad_identity_and_accumulation(compiled):
    """A first gradient is a new tensor; later ones accumulate into it in place, as AccumulateGrad does."""
    w = jg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    x = jg.tensor([0.5, 0.5, 0.5])
    _chain(x, w).backward()
    first = w.grad
    for _ in range(3):
        _chain(x, w).backward()
        assert w.grad is first
    w2 = w.detach().requires_grad_()
    jg.autograd.set_compiled_autograd(False)
    for _ in range(4):
        _chain(x, w2).backward()
    np.testing.assert_allclose(w.grad.numpy(), w2.grad.numpy(), rtol=1e-12)


class _Cube(jg.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 3

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 3 * x ** 2 * g


def test_eager_branches(compiled):
    """A custom Function, hooks, anomaly mode and create_graph run on the node-by-node engine, counted (from a
    graph's second occurrence: a graph seen once runs on the engine, a miss, without being looked at)."""
    x = jg.tensor([1.0, -2.0], requires_grad=True)
    for _ in range(3):
        _Cube.apply(x * 2).sum().backward()
    seen = []
    for _ in range(3):
        y = x * 2
        y.register_hook(lambda g: seen.append(g) or g * 3)
        y.sum().backward()
    with jg.autograd.detect_anomaly():
        for _ in range(2):
            (x * 2).sum().backward()
    for _ in range(2):
        (gx,) = jg.autograd.grad((x ** 3).sum(), x, create_graph=True)
    reasons = _stats()["fallback_reasons"]
    assert reasons.get("a _CubeBackward node", 0) + reasons.get("a BackwardCFunction node", 0) >= 2 or any(
        "Cube" in r for r in reasons), reasons
    assert reasons.get("hooks", 0) >= 2 and reasons.get("anomaly mode", 0) >= 2
    assert len(seen) == 3
    np.testing.assert_allclose(gx.detach().numpy(), [3.0, 12.0])
    assert gx.requires_grad


def test_post_accumulate_hooks_and_retain_grad(compiled):
    p = jg.tensor([1.0, 2.0], requires_grad=True)
    calls = []
    p.register_post_accumulate_grad_hook(lambda t: calls.append(t.grad.numpy().copy()))
    for _ in range(3):
        y = p * 2
        y.retain_grad()
        (y * y).sum().backward()
        np.testing.assert_allclose(y.grad.numpy(), 2 * y.detach().numpy())
    assert len(calls) == 3


def test_threads_backward_into_one_leaf(compiled):
    w = jg.tensor(np.linspace(-1, 1, 16), requires_grad=True)
    x = jg.tensor(np.linspace(0, 2, 16))

    def work():
        for _ in range(20):
            _chain(x, w).backward()
    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    w2 = w.detach().requires_grad_()
    jg.autograd.set_compiled_autograd(False)
    _chain(x, w2).backward()
    np.testing.assert_allclose(w.grad.numpy(), 80 * w2.grad.numpy(), rtol=1e-10)


def test_counters_and_switch(compiled):
    before = _stats()
    w = jg.tensor([1.0, 2.0], requires_grad=True)
    for _ in range(3):
        (w.sin() * w).sum().backward()
    s = _stats()
    assert (s["misses"] - before["misses"], s["plans"] - before["plans"], s["hits"] - before["hits"]) == (1, 1, 1)
    assert s["compile_seconds"] > 0
    assert jg.autograd.set_compiled_autograd(False) is True
    assert not jg.autograd.is_compiled_autograd_enabled()
    (w.sin() * w).sum().backward()
    assert _stats()["hits"] == s["hits"]
    with pytest.raises(ValueError):
        jg.autograd.set_compiled_autograd(True, threshold=0)



def test_gradcheck_runs_on_the_engine(compiled):
    # gradcheck compares two backward passes bit for bit: a plan built between them may round a fused formula
    # differently (a multiply-add contracted in one loop and not in another), so its passes run on the engine
    a = jg.tensor(0.7, dtype=jg.float64, requires_grad=True)
    b = jg.tensor(-1.3, dtype=jg.float64, requires_grad=True)
    for _ in range(3):
        jg.autograd.grad(jg.atan2(a, b), (a, b))  # the structure's plan exists
    before = _stats()
    assert jg.autograd.gradcheck(jg.atan2, (a, b)) and jg.autograd.gradgradcheck(jg.atan2, (a, b))
    assert _stats()["hits"] == before["hits"]
    jg.autograd.grad(jg.atan2(a, b), (a, b))
    assert _stats()["hits"] == before["hits"] + 1  # (and afterwards plans run again)

def test_environment_variable_and_log():
    code = ("import jitgrad as jg\n"
            "w = jg.tensor([1.0, 2.0], requires_grad=True)\n"
            "(w.cos() * w).sum().backward()\n"
            "s = jg.jit_stats()['compiled_autograd']\n"
            "print(jg.autograd.is_compiled_autograd_enabled(), s['plans'], s['hits'])\n")
    env = dict(os.environ, JITGRAD_COMPILED_AUTOGRAD="always", JITGRAD_LOG_COMPILES="1",
               PYTHONPATH=str(helpers.ROOT))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["True", "1", "0"]
    assert "jitgrad: autograd plan built" in r.stderr


def test_on_by_default_and_off_by_the_environment():
    code = ("import jitgrad as jg\n"
            "print(jg.autograd.is_compiled_autograd_enabled(), jg.compiler.compiled_autograd.SETTINGS['threshold'])")
    for value, expect in ((None, "True 2"), ("1", "True 2"), ("always", "True 1"), ("0", "False 2"),
                          ("off", "False 2")):
        env = dict(os.environ, PYTHONPATH=str(helpers.ROOT))
        env.pop("JITGRAD_COMPILED_AUTOGRAD", None)
        if value is not None:
            env["JITGRAD_COMPILED_AUTOGRAD"] = value
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0 and r.stdout.strip() == expect, (value, r.stdout, r.stderr)


# ---------------------------------------------------------------- the key built while recording
def test_node_keys_are_built_while_recording(compiled):
    """(Keys are built while compiled autograd is on.) Equal structures give equal keys; an entry, a scalar, a
    shape, a param or a dtype changes the key."""
    w = jg.tensor([1.0, 2.0], requires_grad=True)

    def key(f, x=w):
        return f(x).grad_fn._key
    base = key(lambda x: (x * 2.0).tanh().sum())
    assert key(lambda x: (x * 2.0).tanh().sum()) == base
    assert key(lambda x: (x.detach().requires_grad_() * 2.0).tanh().sum()) == base  # (another leaf, same shape)
    others = [key(lambda x: (x * 3.0).tanh().sum()), key(lambda x: (x * 2.0).sigmoid().sum()),
              key(lambda x: (x * 2.0).tanh().sum(0)), key(lambda x: (x * 2.0).tanh().sum(), jg.ones(3).requires_grad_()),
              key(lambda x: (x * 2.0).tanh().sum(), jg.ones(2, dtype=jg.float64).requires_grad_())]
    assert base not in others and len(set(others)) == len(others)


def test_graphs_seen_once_are_not_walked(compiled, monkeypatch):
    """A graph whose key is new (here a new scalar each step) runs on the engine without a walk; a backward
    repeated on one graph (gradcheck's) counts once, so it builds no plan."""
    walks = []
    walk = ca.walk
    monkeypatch.setattr(ca, "walk", lambda *a: walks.append(1) or walk(*a))
    w = jg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    before = _stats()
    for k in range(5):
        (w * (1.0 + k)).tanh().sum().backward()
    loss = (w.exp() * w).sum()
    for _ in range(4):
        loss.backward(retain_graph=True)
    assert jg.autograd.gradcheck(lambda x: (x * x).sin(), (jg.tensor([0.3, -0.7], dtype=jg.float64,
                                                                     requires_grad=True),))
    s = _stats()
    assert walks == [] and s["plans"] == before["plans"] and s["misses"] - before["misses"] >= 9
    for _ in range(3):  # new graphs of ``loss``'s structure: the second graph of that key is walked (and its plan
        (w.exp() * w).sum().backward()  # built), the next ones are read by the walker generated from it
    s = _stats()
    assert len(walks) == 1 and s["plans"] == before["plans"] + 1 and s["hits"] - before["hits"] == 2


def test_a_key_whose_structures_vary_runs_eagerly(compiled, monkeypatch):
    """Graphs equal by their node keys but not by their full keys (here: which leaves are one tensor, and 0
    against 0.0) get a plan each, up to ca.MAX_BUILT, then the key runs eagerly; gradients stay the engine's."""
    monkeypatch.setattr(ca, "MAX_BUILT", 2)
    leaves = [jg.tensor([0.5 + k, -1.0], requires_grad=True) for k in range(ca.MAX_BUILT + 3)]
    for k in range(len(leaves)):
        for a, b in ((leaves[0], leaves[0]), (leaves[0], leaves[k])):
            a.grad = b.grad = None
            (a * b * (k % 2 * 0.0 if k % 3 else 0)).sum().backward()
            expect = 0 * a.detach().numpy()
            np.testing.assert_allclose(a.grad.numpy(), expect)
    assert _stats()["fallback_reasons"].get("structures vary under one key", 0) >= 1


def test_param_arrays_are_part_of_the_key(compiled):
    """upsample's VJP makes its weights and indices into constants in Python from the entry's param arrays: two
    graphs alike in every shape but with other scales must not share a plan (it would freeze the first's weights)."""
    x0 = np.random.default_rng(0).standard_normal((2, 2, 4))

    def grad(scale, on):
        jg.autograd.set_compiled_autograd(on, threshold=2)
        x = jg.tensor(x0, requires_grad=True)
        y = jg.nn.functional.interpolate(x, scale_factor=scale, mode="linear", align_corners=False)  # 6 outputs
        (y * jg.arange(12.0).reshape(1, 2, 6)).sum().backward()
        return x.grad.numpy()
    for scale in (1.5, 1.5, 1.7, 1.7, 1.6, 1.5):
        np.testing.assert_array_equal(grad(scale, True), grad(scale, False))
    jg.autograd.set_compiled_autograd(True, threshold=2)
    s = _stats()
    assert s["plans"] + s["build_failures"] >= 1, s  # (the graphs got past the threshold: a plan was tried)


def test_rnn_and_attention_nodes_run_as_plans(compiled, monkeypatch):
    """A node whose inputs' fused VJP functions share one computation (an LSTM layer's, attention's) runs in a plan
    as one call on one stand-in node: the shared parts are computed once per backward, and the gradients are the
    engine's to the bit, with new values every step and a new batch size at the end."""
    from jitgrad.ops import rnn
    computed = []
    parts = rnn._parts
    monkeypatch.setattr(rnn, "_parts", lambda g, s, compute: parts(g, s, lambda *a: computed.append(1) or compute(*a)))
    rng = np.random.default_rng(0)
    jg.manual_seed(0)
    lstm = jg.nn.LSTM(5, 7, num_layers=2, batch_first=True)
    att = jg.nn.MultiheadAttention(8, 2, batch_first=True)
    head = jg.nn.Linear(7, 3)
    params = list(lstm.parameters()) + list(att.parameters()) + list(head.parameters())

    def loss_of(x, q, y):
        out, _ = lstm(x)
        a, _ = att(q, q, q)
        return jg.nn.functional.cross_entropy(head(out[:, -1]), y) + a.square().mean()

    for step in range(5):
        rows = 4 if step < 4 else 3
        x = jg.tensor(rng.standard_normal((rows, 6, 5)), dtype=jg.float32)
        q = jg.tensor(rng.standard_normal((rows, 3, 8)), dtype=jg.float32)
        y = jg.tensor(rng.integers(0, 3, rows))
        grads = []
        for enabled in (True, False):
            ca.SETTINGS["enabled"] = enabled
            for p in params:
                p.grad = None
            hits = _stats()["hits"]
            del computed[:]
            loss_of(x, q, y).backward()
            grads.append([p.grad.numpy().copy() for p in params])
            if enabled and step in (2, 3):
                assert _stats()["hits"] == hits + 1  # (the plan ran)
                assert len(computed) == 2  # (once per LSTM layer node, not once per input of it)
        ca.SETTINGS["enabled"] = True
        for a, b in zip(*grads):
            np.testing.assert_array_equal(a, b)
    assert "a fused VJP function of several inputs" not in _stats()["fallback_reasons"]
