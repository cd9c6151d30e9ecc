"""jitgrad.compile against eager on random op chains (every entry's samples are in the op matrix,
tests/ops/test_op_matrix.py: compiled op by op and, for elementwise entries, through the tape and the
generated loops, with new values on a second call).
"""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import jitgrad as jg

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
