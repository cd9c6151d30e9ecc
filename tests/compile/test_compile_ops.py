"""jitgrad.compile against eager, generated from the op table's samples and from random op chains.

For every op with float samples: the compiled call's outputs equal eager's, the gradients through the
CompiledFunctionBackward node equal eager's, and a second call with new values (same shapes: no
re-trace; integer and boolean inputs permuted) still agrees, so nothing the trace saw is baked into
the plan. The op-table sweep runs the captured plan op by op (backend="eager") and fused (the default
backend) for the elementwise entries.
"""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import jitgrad as jg
from jitgrad.ops import OPS

from helpers import build, call_of, samples_of

TOL = dict(rtol=1e-9, atol=1e-11)
TOL32 = dict(rtol=2e-5, atol=2e-6)


def _outputs(r):
    return [t for t in (r if isinstance(r, (tuple, list)) else (r,)) if isinstance(t, jg.Tensor)]


def _run(fn, args, kwargs, seed):
    """fn's float outputs and the gradients of a fixed random weighting of them."""
    inputs = []

    def leaf(a):
        t = jg.tensor(a.copy())
        if a.dtype.kind == "f":
            t.requires_grad_()
            inputs.append(t)
        return t
    a, k = build(args, kwargs, leaf)
    outs = _outputs(fn(a, k))
    rng = np.random.default_rng(seed)
    loss = None
    for o in outs:
        if o.requires_grad:
            w = jg.tensor(rng.standard_normal(o.shape).astype(o.dtype.np))
            term = (o * w).sum()
            loss = term if loss is None else loss + term
    if loss is not None:
        loss.backward()
    return [o.detach().numpy() for o in outs], [None if t.grad is None else t.grad.numpy() for t in inputs]


def _perturbed(args, kwargs, rng):
    """New values of every input: floats shifted, integer and boolean ones (indices, targets, masks)
    permuted, so they stay valid and a plan that froze the traced ones gives other numbers."""
    def shift(a):
        if a.dtype.kind == "f":
            return a + rng.uniform(-0.05, 0.05, a.shape).astype(a.dtype)
        if a.size > 1:
            return rng.permutation(a.reshape(-1)).reshape(a.shape)
        return a
    a, k = build(args, kwargs, shift)
    return a, k


def _check(op, dtype, backend):
    call = call_of(op)
    samples = samples_of(op, dtype)
    if not samples:
        pytest.skip("no %s samples" % np.dtype(dtype).name)
    tol = TOL if dtype == np.float64 else TOL32
    rng = np.random.default_rng(1)
    for args, kwargs in samples:
        eager = lambda a, k: call(*a, **k)  # noqa: E731
        compiled = jg.compile(eager, backend=backend)
        for a, k in ((args, kwargs), _perturbed(args, kwargs, rng)):
            try:
                want = _run(eager, a, k, 0)
            except Exception as e:  # noqa: BLE001  (an error sample: compiled must raise the same)
                with pytest.raises(type(e)):
                    _run(compiled, a, k, 0)
                continue
            got = _run(compiled, a, k, 0)
            for w, g in zip(want[0], got[0]):
                np.testing.assert_allclose(g, w, **tol, err_msg="%s forward" % op.name)
                assert g.dtype == w.dtype and g.shape == w.shape
            for w, g in zip(want[1], got[1]):
                assert (w is None) == (g is None) or (g is not None and not g.any()), op.name
                if w is not None and g is not None:
                    np.testing.assert_allclose(g, w, **tol, err_msg="%s gradient" % op.name)


FLOAT_OPS = sorted(name for name, op in OPS.items() if op.tests.samples)
ELEMENTWISE = sorted(name for name, op in OPS.items() if op.tests.samples and (
    getattr(op.forward, "kernel", None) or name in ("add", "sub", "where", "masked_fill")))


@pytest.mark.parametrize("name", FLOAT_OPS)
def test_op_plan_matches_eager(name):
    _check(OPS[name], np.float64, "eager")


@pytest.fixture(params=["tape", "loops"])
def plan(request, monkeypatch):
    """Small graphs run as a tape (compiler/tape.py); with SMALL = 0 they get codegen's fused loops."""
    if request.param == "loops":
        monkeypatch.setattr(jg.compiler.tape, "SMALL", 0)
    return request.param


@pytest.mark.parametrize("name", ELEMENTWISE)
def test_op_fused_matches_eager(name, plan):
    _check(OPS[name], np.float64, "jitgrad")


@pytest.mark.parametrize("name", ["mul", "tanh", "sigmoid", "add", "where", "relu", "exp"])
def test_op_fused_float32(name, plan):
    _check(OPS[name], np.float32, "jitgrad")


# ------------------------------------------------------------------ random chains
UNARY = ["tanh", "sigmoid", "exp", "neg", "relu", "sin", "square", "abs"]
BINARY = ["add", "sub", "mul", "maximum"]


def _chain(ops):
    def f(x, y, z):
        vals = [x, y, z]
        for kind, name, i, j in ops:
            a, b = vals[i % len(vals)], vals[j % len(vals)]
            if kind == "u":
                vals.append(getattr(a, name)() * 0.5)
            elif kind == "b":
                vals.append(getattr(jg, name)(a, b))
            else:
                vals.append(a.sum() * b if name == "sum" else a.mean() + b)
        return vals[-1].sum() + vals[-2].mean()
    return f


_step = st.one_of(
    st.tuples(st.just("u"), st.sampled_from(UNARY), st.integers(0, 50), st.integers(0, 50)),
    st.tuples(st.just("b"), st.sampled_from(BINARY), st.integers(0, 50), st.integers(0, 50)),
    st.tuples(st.just("r"), st.sampled_from(["sum", "mean"]), st.integers(0, 50), st.integers(0, 50)))


# a tape where the chain's values allow it, or fused loops; each with a backward plan, or computing the scalar's
# gradients in the forward plan (compiler/variant.py: for tapes and large arrays, JOINT_MIN_SIZE forced here)
@pytest.mark.parametrize("small,joint", [(4096, False), (4096, True), (0, False), (0, True)])
@settings(max_examples=15, deadline=None, derandomize=True)  # fixed examples: their kernels stay cached
@given(st.lists(_step, min_size=1, max_size=12), st.sampled_from([(4,), (2, 3)]), st.booleans())
def test_random_chain_matches_eager(small, joint, ops, shape, broadcast):
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(jg.compiler.tape, "SMALL", small)
        if joint:
            mp.setattr(jg.compiler.variant, "JOINT_MIN_SIZE", 1)
        else:
            mp.setattr(jg.compiler.variant, "JOINT_MAX_SIZE", 0)
        _random_chain(ops, shape, broadcast)


def _random_chain(ops, shape, broadcast):
    f = _chain(ops)
    rng = np.random.default_rng(len(ops))
    arrays = [rng.uniform(-1, 1, shape), rng.uniform(-1, 1, shape[-1:] if broadcast else shape), rng.uniform(-1, 1, ())]
    cf = jg.compile(f, fullgraph=True)
    for _ in range(2):
        ts = [jg.tensor(a, requires_grad=True) for a in arrays]
        ce = [jg.tensor(a, requires_grad=True) for a in arrays]
        want = f(*ce)
        got = cf(*ts)
        np.testing.assert_allclose(got.item(), want.item(), rtol=1e-9, atol=1e-12)
        want.backward()
        got.backward()
        for t, e in zip(ts, ce):
            assert (t.grad is None) == (e.grad is None)
            if e.grad is not None:
                np.testing.assert_allclose(t.grad.numpy(), e.grad.numpy(), rtol=1e-8, atol=1e-11)
        arrays = [a * 0.9 + 0.01 for a in arrays]
