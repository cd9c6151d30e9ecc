"""gradcheck / gradgradcheck: slow and fast mode, the failure reports, undefined output gradients,
non-determinism and the input checks, with PyTorch's messages."""
import re

import numpy as np
import pytest

import jitgrad as jg
from jitgrad.autograd import Function, GradcheckError, gradcheck, gradgradcheck


def t64(a, requires_grad=True):
    return jg.tensor(np.asarray(a, dtype=np.float64), requires_grad=requires_grad)


class WrongSquare(Function):
    """x**2 with a backward that forgot the factor 2."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return g * x


class Square(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return 2 * g * x


X = [1.0, 2.0, 3.0]


@pytest.mark.parametrize("fast_mode", [False, True])
def test_passes_for_correct_gradients(fast_mode):
    a, b = t64([[0.3, -0.2], [1.1, 0.4]]), t64([0.5, -1.5])
    assert gradcheck(lambda a, b: ((a * b).tanh() @ b, a.sum()), (a, b), fast_mode=fast_mode)
    assert gradcheck(Square.apply, (t64(X),), fast_mode=fast_mode)


def test_wrong_backward_is_reported_like_pytorch():
    with pytest.raises(GradcheckError) as info:
        gradcheck(WrongSquare.apply, (t64(X),))
    assert str(info.value) == (
        "Jacobian mismatch for output 0 with respect to input 0,\n"
        "numerical:tensor([[2.0000, 0.0000, 0.0000],\n"
        "        [0.0000, 4.0000, 0.0000],\n"
        "        [0.0000, 0.0000, 6.0000]], dtype=jitgrad.float64)\n"
        "analytical:tensor([[1., 0., 0.],\n"
        "        [0., 2., 0.],\n"
        "        [0., 0., 3.]], dtype=jitgrad.float64)\n")
    assert isinstance(info.value, RuntimeError)


def test_raise_exception_false_returns_false():
    assert gradcheck(WrongSquare.apply, (t64(X),), raise_exception=False) is False
    assert gradcheck(WrongSquare.apply, (t64(X),), raise_exception=False, fast_mode=True) is False
    assert gradgradcheck(lambda x: WrongSquare.apply(x) * x, (t64(X),), raise_exception=False) is False


def test_fast_mode_report_recomputes_slow_mode():
    with pytest.raises(GradcheckError) as info:
        gradcheck(WrongSquare.apply, (t64(X),), fast_mode=True)
    msg = str(info.value)
    assert re.match(r"Jacobian mismatch for output 0 with respect to input 0,\nnumerical:tensor\([0-9.]+, "
                    r"dtype=jitgrad.float64\)\nanalytical:tensor\([0-9.]+, dtype=jitgrad.float64\)\n", msg)
    assert "Below, we recompute numerical and analytical jacobians in slow mode:" in msg
    assert "The max per-element difference (slow mode) is: tensor(3.0000, dtype=jitgrad.float64)." in msg
    assert "Fast gradcheck failed but element-wise differences are small" not in msg


def test_fast_mode_compares_random_projections():
    """v^T J u: the numerical and analytical scalars agree for a correct backward (and use their own
    random generator, so jitgrad's random state is left alone)."""
    jg.manual_seed(5)
    before = jg.rand(3).tolist()
    jg.manual_seed(5)
    assert gradcheck(lambda x: x.exp() @ x, (t64(X),), fast_mode=True)
    assert jg.rand(3).tolist() == before


def test_fast_mode_is_cheaper():
    """Fast mode evaluates the function twice per input instead of twice per input element."""
    calls = []

    def f(x):
        calls.append(1)
        return x.sin()
    x = t64(np.linspace(-1, 1, 20))
    gradcheck(f, (x,), check_undefined_grad=False)
    slow = len(calls)
    calls.clear()
    gradcheck(f, (x,), fast_mode=True, check_undefined_grad=False)
    assert len(calls) < slow / 5


def test_gradgradcheck_catches_a_wrong_double_backward():
    class WrongDouble(Function):  # first derivative right (2x), its derivative wrong (0 instead of 2)
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            x, = ctx.saved_tensors
            return g * 2 * x.detach()
    x = t64(X)
    assert gradcheck(WrongDouble.apply, (x,))
    with pytest.raises(GradcheckError, match="^Jacobian mismatch for output 0 with respect to input 0,\nnumerical:"):
        gradgradcheck(WrongDouble.apply, (x,))
    for fast in (False, True):
        assert gradgradcheck(Square.apply, (x,), fast_mode=fast)


def test_gradgradcheck_grad_outputs():
    x = t64([[0.5, -0.3], [0.2, 0.9]])
    go = t64([[1.0, -2.0], [0.5, 0.25]])
    assert gradgradcheck(lambda x: x.exp() * x, (x,), (go,))
    assert gradgradcheck(lambda x: x.exp() * x, (x,), gen_non_contig_grad_outputs=True)


def test_undefined_output_grads_must_be_handled():
    class NeedsGrad(Function):
        """Two outputs; its backward copes with an undefined gradient for the second output, except when the
        first one is all zeros (the case gradcheck's undefined-gradient check creates)."""

        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, g1, g2):
            if g2 is None:
                if not np.any(g1.numpy()):
                    raise RuntimeError("no gradient to work with")
                return g1 * 2
            return (g1 * 2 if g1 is not None else 0) + g2 * 3
    x = t64(X)
    with pytest.warns(UserWarning, match="Backwards compatibility: New undefined gradient support checking feature"):
        with pytest.raises(GradcheckError, match='^Expected backward function to handle undefined output grads. Please '
                                                 'look at "Notes about undefined output gradients" in '
                                                 '"tools/autograd/derivatives.yaml"$'):
            gradcheck(NeedsGrad.apply, (x,))
    assert gradcheck(NeedsGrad.apply, (x,), check_undefined_grad=False)

    class HandlesNone(NeedsGrad):
        @staticmethod
        def backward(ctx, g1, g2):
            out = None
            for g, k in ((g1, 2), (g2, 3)):
                if g is not None:
                    out = g * k if out is None else out + g * k
            return out
    assert gradcheck(HandlesNone.apply, (x,))


def test_backward_must_be_linear_in_grad_output():
    class Affine(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):  # right for every one-hot grad_output, but not zero for a zero one
            return g * 2 + float(np.all(g.numpy() == 0))
    with pytest.raises(GradcheckError, match="^backward not multiplied by grad_output$"):
        gradcheck(Affine.apply, (t64(X),))


def test_nondet_tol():
    rng = np.random.default_rng(0)

    class Noisy(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * (2 + 1e-9 * rng.standard_normal())
    with pytest.raises(GradcheckError, match="^Backward is not reentrant, i.e., running backward with same input and "
                                             "grad_output multiple times gives different values, although analytical "
                                             "gradient matches numerical gradient.The tolerance for nondeterminism was "
                                             "0.0."):
        gradcheck(Noisy.apply, (t64(X),))
    assert gradcheck(Noisy.apply, (t64(X),), nondet_tol=1e-6)
    assert gradcheck(Noisy.apply, (t64(X),), nondet_tol=1e-6, fast_mode=True)


def test_no_differentiable_output():
    """Without differentiable outputs the numerical gradient must be zero."""
    for fast in (False, True):
        assert gradcheck(lambda x: (x > 0), (t64(X),), fast_mode=fast)
        with pytest.raises(GradcheckError, match="^Numerical gradient for function expected to be zero$"):
            gradcheck(lambda x: x.detach() * 2, (t64(X),), fast_mode=fast)


def test_input_checks():
    with pytest.raises(ValueError, match="^gradcheck expects at least one input tensor to require gradient, but none "
                                         "of them have requires_grad=True.$"):
        gradcheck(lambda x: x * 2, (t64(X, requires_grad=False),))
    with pytest.warns(UserWarning, match="^Input #0 requires gradient and is not a double precision floating point or "
                                         "complex. "):
        gradcheck(lambda x: x * 2, (jg.tensor(X, requires_grad=True),), eps=1e-3, atol=1e-3)
    expanded = t64([1.0], requires_grad=False).expand(3).requires_grad_()
    with pytest.raises(RuntimeError, match="^The 0th input has a dimension with stride 0. gradcheck only supports "
                                           "inputs that are non-overlapping"):
        gradcheck(lambda x: x * 2, (expanded,))


def test_non_tensor_and_non_contiguous_inputs():
    base = np.arange(6, dtype=np.float64).reshape(2, 3) / 7
    x = jg.from_numpy(base.T.copy().T).requires_grad_()  # a transposed (non-contiguous) layout
    assert not x.is_contiguous()
    assert gradcheck(lambda x, k, flag: (x * k).sin() if flag else x, (x, 3.0, True))
    assert x._data.base is not None or not x.is_contiguous()  # the input is restored, layout untouched
    np.testing.assert_array_equal(x.detach().numpy(), base)


def test_inputs_are_restored_and_grad_untouched():
    x = t64(X)
    gradcheck(lambda x: x.exp(), (x,))
    np.testing.assert_array_equal(x.detach().numpy(), X)
    assert x.grad is None and x._version == 0


# ------------------------------------------------------------------ batched gradients (vmap over the backward)
def test_check_batched_grad_and_batched_forward_grad_pass():
    x = jg.tensor(np.linspace(-1, 1, 5), requires_grad=True)
    w = jg.tensor(np.arange(10.0).reshape(5, 2) / 7, requires_grad=True)

    def f(x, w):
        return (x @ w).tanh(), x.exp().sum(), (x[:2] * w[0]).cumsum(0)
    assert gradcheck(f, (x, w), check_forward_ad=True, check_batched_grad=True, check_batched_forward_grad=True)
    assert gradgradcheck(f, (x, w), check_batched_grad=True)


class _ReadsValues(jg.autograd.Function):  # a backward that leaves the table: it cannot run under vmap
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return jg.Tensor._wrap(g.detach().numpy() * 2)


class _WrongUnderVmap(jg.autograd.Function):  # a backward that reads one sample's array under vmap
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 0 + jg.Tensor._wrap(np.asarray(g._data) * 2)


def test_check_batched_grad_failures_are_reported_like_pytorch():
    x = jg.tensor(np.linspace(-1, 1, 3), requires_grad=True)
    assert gradcheck(_ReadsValues.apply, (x,))  # (without the batched check it passes)
    with pytest.raises(GradcheckError, match="^While computing batched gradients, got: vmap: It looks like you're "
                                             "attempting to read the values"):
        gradcheck(_ReadsValues.apply, (x,), check_batched_grad=True)
    with pytest.raises(GradcheckError, match="(?s)^For output 0 and input 0:\n\ngradcheck or gradgradcheck failed "
                                             "while testing batched gradient computation.*Got:\n.*Expected:\n"):
        gradcheck(_WrongUnderVmap.apply, (x,), check_batched_grad=True)
    assert gradcheck(_WrongUnderVmap.apply, (x,), check_batched_grad=True, raise_exception=False) is False
    with pytest.raises(AssertionError, match="^Setting check_batched_grad=True requires check_backward_ad to be True$"):
        gradcheck(lambda a: a, (x,), check_batched_grad=True, check_backward_ad=False, check_forward_ad=True)
    with pytest.raises(AssertionError, match="^Setting check_batched_forward_grad=True requires check_forward_ad"):
        gradcheck(lambda a: a, (x,), check_batched_forward_grad=True)
    with pytest.raises(AssertionError, match="^Setting check_batched_grad=True requires check_rev_over_rev"):
        gradgradcheck(lambda a: a, (x,), check_batched_grad=True, check_rev_over_rev=False, check_fwd_over_rev=True,
                      check_undefined_grad=False)
