"""Custom autograd.Function under vmap: its own vmap staticmethod, generate_vmap_rule=True, and PyTorch's errors
for a Function with neither (or without setup_context)."""
import numpy as np
import pytest

import jitgrad as jg
from jitgrad import func as F

RNG = np.random.default_rng(5)


class Scale(jg.autograd.Function):
    """x * k with a vmap rule of its own that records what it was told."""
    calls = []

    @staticmethod
    def forward(x, k):
        return x * k

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.k = inputs[1]

    @staticmethod
    def backward(ctx, g):
        return g * ctx.k, None

    @staticmethod
    def vmap(info, in_dims, x, k):
        Scale.calls.append((info.batch_size, info.randomness, in_dims, tuple(x.shape)))
        return Scale.apply(x, k), in_dims[0]


class Cube(jg.autograd.Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(x):
        return x ** 3

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return 3 * x * x * g


def test_the_vmap_staticmethod_sees_the_batch_and_its_result_is_batched():
    Scale.calls.clear()
    x = RNG.standard_normal((4, 3))
    out = jg.vmap(Scale.apply, in_dims=(1, None))(jg.tensor(x), 2.5)
    np.testing.assert_allclose(out.numpy(), 2.5 * x.T)
    assert Scale.calls == [(3, "error", (0, None), (3, 4))]  # the physical tensor, its batch dim in front
    # vmap of grad: the rule runs at the vmap level, its apply records the graph grad differentiates
    g = jg.vmap(F.grad(lambda v: Scale.apply(v, 3.0).sum()))(jg.tensor(x))
    np.testing.assert_allclose(g.numpy(), np.full_like(x, 3.0))


def test_out_dims_none_is_shared_by_the_batch():
    class Total(jg.autograd.Function):
        @staticmethod
        def forward(x):
            return x.sum()

        @staticmethod
        def setup_context(ctx, inputs, output):
            pass

        @staticmethod
        def vmap(info, in_dims, x):
            return x.sum(), None  # one value for the whole batch

    x = RNG.standard_normal((5, 2))
    out = jg.vmap(Total.apply)(jg.tensor(x))
    np.testing.assert_allclose(out.numpy(), np.full(5, x.sum()))


def test_generate_vmap_rule_runs_forward_batched_and_refuses_gradients():
    x = RNG.standard_normal((6, 3))
    np.testing.assert_allclose(jg.vmap(Cube.apply)(jg.tensor(x)).numpy(), x ** 3)
    with pytest.raises(NotImplementedError, match="Cube sets generate_vmap_rule=True.*implement the vmap staticmethod"):
        jg.vmap(F.grad(lambda v: Cube.apply(v).sum()))(jg.tensor(x))
    # outside vmap nothing changes
    t = jg.tensor(x, requires_grad=True)
    Cube.apply(t).sum().backward()
    np.testing.assert_allclose(t.grad.numpy(), 3 * x ** 2)


def test_errors_as_pytorch_words_them():
    class NoRule(jg.autograd.Function):
        @staticmethod
        def forward(x):
            return x * 2

        @staticmethod
        def setup_context(ctx, inputs, output):
            pass

    class OldStyle(jg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

    class Both(Cube):
        generate_vmap_rule = True

        @staticmethod
        def vmap(info, in_dims, x):
            return x, 0

    x = jg.tensor(RNG.standard_normal((2, 3)))
    with pytest.raises(RuntimeError, match="You tried to vmap over NoRule, but it does not have vmap support. Please "
                                           "override and implement the vmap staticmethod or set generate_vmap_rule"):
        jg.vmap(NoRule.apply)(x)
    with pytest.raises(RuntimeError, match="it must override the setup_context staticmethod"):
        jg.vmap(OldStyle.apply)(x)
    with pytest.raises(RuntimeError, match="has both generate_vmap_rule=True and an overriden vmap staticmethod"):
        jg.vmap(Both.apply)(x)
    assert NoRule.apply(x).shape == (2, 3)  # unbatched inputs never reach the rule


@pytest.mark.torch
def test_matches_torch():
    torch = pytest.importorskip("torch")
    x = RNG.standard_normal((4, 3))

    def build(lib):
        class S(lib.autograd.Function):
            @staticmethod
            def forward(x, k):
                return x * k

            @staticmethod
            def setup_context(ctx, inputs, output):
                ctx.k = inputs[1]

            @staticmethod
            def backward(ctx, g):
                return g * ctx.k, None

            @staticmethod
            def vmap(info, in_dims, x, k):
                return S.apply(x, k).sin(), in_dims[0]
        return S

    outs = []
    for lib in (jg, torch):
        S = build(lib)
        a = lib.vmap(S.apply, in_dims=(0, None))(lib.tensor(x), 2.0)
        outs.append(a.numpy())
    np.testing.assert_allclose(outs[0], outs[1])
