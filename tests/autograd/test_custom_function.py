"""Custom autograd.Function: forward/backward and setup_context styles, saved tensors (version-checked),
needs_input_grad, mark_dirty, mark_non_differentiable, set_materialize_grads, once_differentiable,
and a forward running the user's own numba kernel on tensor.numpy() arrays."""
import numba
import numpy as np
import pytest

import jitgrad as jg
from jitgrad.autograd import Function, grad, gradcheck, gradgradcheck
from jitgrad.autograd.function import once_differentiable


def leaf(values, dtype=jg.float64):
    return jg.tensor(values, dtype=dtype, requires_grad=True)


class Exp(Function):
    @staticmethod
    def forward(ctx, x):
        r = x.exp()
        ctx.save_for_backward(r)  # an output: saved without a reference cycle
        return r

    @staticmethod
    def backward(ctx, g):
        r, = ctx.saved_tensors
        return g * r


class Mul(Function):
    """setup_context style: forward takes only the inputs."""

    @staticmethod
    def forward(x, y):
        return x * y

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, y = inputs
        ctx.save_for_backward(x, y)

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        return (g * y if ctx.needs_input_grad[0] else None), (g * x if ctx.needs_input_grad[1] else None)


def test_forward_backward_and_node():
    x = leaf([1.0, 2.0])
    y = Exp.apply(x)
    assert y.requires_grad and y.grad_fn.name() == "ExpBackward" and not y.is_leaf
    assert y.grad_fn.next_functions[0][0].variable is x
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.exp([1.0, 2.0]))
    assert gradcheck(Exp.apply, (leaf([0.3, -0.7]),))
    assert gradgradcheck(Exp.apply, (leaf([0.3, -0.7]),))  # backward written with ops: differentiable again


def test_setup_context_style_and_needs_input_grad():
    seen = []

    class Spy(Mul):
        @staticmethod
        def backward(ctx, g):
            seen.append(ctx.needs_input_grad)
            return Mul.backward(ctx, g)
    a, b = leaf([1.0, 2.0]), jg.tensor([3.0, 4.0], dtype=jg.float64)
    Spy.apply(a, b).sum().backward()
    assert seen == [(True, False)]
    assert a.grad.tolist() == [3.0, 4.0] and b.grad is None
    assert gradcheck(Mul.apply, (leaf([1.0, 2.0]), leaf([0.5, -1.0])))


def test_non_tensor_arguments_and_ctx_attributes():
    class Scale(Function):
        @staticmethod
        def forward(ctx, x, k):
            ctx.k = k
            return x * k

        @staticmethod
        def backward(ctx, g):
            return g * ctx.k, None
    x = leaf([1.0])
    Scale.apply(x, 3.0).sum().backward()
    assert x.grad.tolist() == [3.0]
    y = Scale.apply(jg.tensor([1.0]), 2.0)
    assert not y.requires_grad and y.grad_fn is None  # nothing requires grad: nothing recorded


def test_saved_tensors_are_version_checked():
    x = leaf([1.0, 2.0])
    y = Exp.apply(x)
    with jg.no_grad():
        y.mul_(2)
    with pytest.raises(RuntimeError, match=r"^one of the variables needed for gradient computation has been modified "
                                           r"by an inplace operation: \[jitgrad.DoubleTensor \[2\]\], which is output "
                                           r"0 of ExpBackward, is at version 1; expected version 0 instead."):
        y.sum().backward()
    a = leaf([1.0, 2.0]) * 1
    z = Mul.apply(a, a)
    a.add_(1)
    with pytest.raises(RuntimeError, match="is at version 1; expected version 0 instead"):
        z.sum().backward()


def test_saved_tensors_are_freed_after_backward():
    x = leaf([1.0, 2.0])
    y = Exp.apply(x)
    y.sum().backward()
    with pytest.raises(RuntimeError, match="^Trying to backward through the graph a second time"):
        y.grad_fn.saved_tensors
    y = Exp.apply(x)
    y.sum().backward(retain_graph=True)
    assert y.grad_fn.saved_tensors[0].tolist() == y.tolist()


def test_returning_an_input_gives_a_new_tensor():
    class Identity(Function):
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, g):
            return g
    x = leaf([1.0])
    y = Identity.apply(x)
    assert y is not x and y.grad_fn.name() == "IdentityBackward" and x.is_leaf


def test_mark_dirty():
    class AddOne(Function):
        @staticmethod
        def forward(ctx, x):
            x.add_(1)
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, g):
            return g
    a = leaf([1.0, 2.0])
    b = a * 1
    c = AddOne.apply(b)
    assert c is b and b._version == 2 and b.grad_fn.name() == "AddOneBackward"
    assert b.tolist() == [2.0, 3.0]
    c.sum().backward()
    assert a.grad.tolist() == [1.0, 1.0]
    with pytest.raises(RuntimeError, match="^a leaf Variable that requires grad has been used in an in-place "
                                           "operation.$"):
        AddOne.apply(leaf([1.0]))


def test_mark_non_differentiable():
    class ArgmaxAndDouble(Function):
        @staticmethod
        def forward(ctx, x):
            idx = x.argmax()
            mask = x > 1
            ctx.mark_non_differentiable(mask)
            return x * 2, idx, mask

        @staticmethod
        def backward(ctx, g, g_idx, g_mask):  # one gradient slot per output, non-differentiable ones included
            return g * 2
    x = leaf([1.0, 3.0, 2.0])
    v, i, m = ArgmaxAndDouble.apply(x)
    assert v.requires_grad and not i.requires_grad and not m.requires_grad
    v.sum().backward()
    assert x.grad.tolist() == [2.0, 2.0, 2.0]


def test_set_materialize_grads():
    got = []

    class Two(Function):
        @staticmethod
        def forward(ctx, x, materialize):
            ctx.set_materialize_grads(materialize)
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, g1, g2):
            got.append((g1 is None, g2 is None))
            out = g1 * 2 if g1 is not None else 0
            return (out + g2 * 3 if g2 is not None else out), None
    x = leaf([1.0])
    a, b = Two.apply(x, True)
    a.sum().backward()
    a, b = Two.apply(x, False)
    a.sum().backward()
    assert got == [(False, False), (False, True)]  # materialized: zeros for the unused output
    assert x.grad.tolist() == [4.0]


def test_several_outputs_both_used():
    class Two(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, g1, g2):
            return g1 * 2 + g2 * 3
    x = leaf([1.0, 2.0])
    a, b = Two.apply(x)
    (a * b).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 12 * np.array([1.0, 2.0]))
    assert gradcheck(Two.apply, (leaf([0.5, 1.5]),))


def test_once_differentiable():
    class Square(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 2

        @staticmethod
        @once_differentiable
        def backward(ctx, g):
            x, = ctx.saved_tensors
            assert not jg.is_grad_enabled()  # runs under no_grad
            return 2 * x * g
    x = leaf([1.0, 2.0])
    g, = grad(Square.apply(x).sum(), x, create_graph=True)
    assert not g.requires_grad  # the gradient of a constant grad_output has no history
    go = jg.ones(2, dtype=jg.float64, requires_grad=True)
    g, = grad(Square.apply(x), x, go, create_graph=True)
    assert g.requires_grad
    with pytest.raises(RuntimeError, match="^trying to differentiate twice a function that was marked with "
                                           "@once_differentiable$"):
        g.sum().backward()
    assert gradcheck(Square.apply, (leaf([0.5, 1.5]),))


def test_backward_result_checks():
    class TooMany(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2, g
    with pytest.raises(RuntimeError, match=r"^function TooManyBackward returned an incorrect number of gradients "
                                           r"\(expected 1, got 2\)$"):
        TooMany.apply(leaf([1.0])).sum().backward()

    class WrongShape(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return jg.ones(2, 3, dtype=jg.float64)
    with pytest.raises(RuntimeError, match=r"^Function WrongShapeBackward returned an invalid gradient at index 0 - got "
                                           r"\[2, 3\] but expected shape compatible with \[4\]$"):
        WrongShape.apply(leaf([1.0, 2.0, 3.0, 4.0])).sum().backward()


def test_legacy_style_is_refused_and_instances_warn():
    class Legacy(Function):
        def forward(self, x):
            return x
    with pytest.raises(RuntimeError, match="^Legacy autograd function with non-static forward method is deprecated."):
        Legacy.apply(leaf([1.0]))
    with pytest.warns(DeprecationWarning, match="should not be instantiated"):
        Exp()


# ------------------------------------------------------------------ the user's own numba kernel
@numba.njit(cache=False)
def _softclip_forward(x, out):
    for i in range(x.size):
        out[i] = x[i] / (1.0 + abs(x[i]))


@numba.njit(cache=False)
def _softclip_backward(x, g, out):
    for i in range(x.size):
        d = 1.0 + abs(x[i])
        out[i] = g[i] / (d * d)


class SoftClip(Function):
    """x / (1 + |x|) with forward and backward in the user's numba kernels, on tensor.numpy() arrays."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        xs = np.ascontiguousarray(x.detach().numpy()).reshape(-1)
        out = np.empty_like(xs)
        _softclip_forward(xs, out)
        return jg.from_numpy(out.reshape(x.shape))

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        x, = ctx.saved_tensors
        xs = np.ascontiguousarray(x.detach().numpy()).reshape(-1)
        out = np.empty_like(xs)
        _softclip_backward(xs, np.ascontiguousarray(g.detach().numpy(), dtype=xs.dtype).reshape(-1), out)
        return jg.from_numpy(out.reshape(x.shape))


def test_forward_with_a_user_numba_kernel():
    x = leaf([[-2.0, -0.5], [0.25, 3.0]])
    y = SoftClip.apply(x)
    xs = x.detach().numpy()
    np.testing.assert_allclose(y.detach().numpy(), xs / (1 + np.abs(xs)))
    assert y.grad_fn.name() == "SoftClipBackward"
    (y * y).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * y.detach().numpy() / (1 + np.abs(xs)) ** 2)
    assert gradcheck(SoftClip.apply, (leaf([[-2.0, -0.5], [0.25, 3.0]]),))
    x32 = jg.tensor([1.0, -1.0], requires_grad=True)
    (SoftClip.apply(x32)).sum().backward()
    assert x32.grad.dtype is jg.float32 and x32.grad.tolist() == [0.25, 0.25]


def test_missing_forward_or_backward_raises_pytorchs_errors():
    """A Function subclass without forward, or without backward/vjp, fails as in PyTorch, naming what is
    missing (these base methods exist only to say so); a plain graph node has no backward either."""
    x = jg.ones(2, requires_grad=True)

    class NoForward(Function):
        pass
    with pytest.raises(NotImplementedError, match="^You must implement the forward function for custom "
                                                  "autograd.Function.$"):
        NoForward.apply(x)

    class NoBackward(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2
    y = NoBackward.apply(x)
    np.testing.assert_array_equal(y.detach().numpy(), [2.0, 2.0])  # the forward itself runs
    with pytest.raises(NotImplementedError, match="You must implement either the backward or vjp method for your "
                                                  "custom autograd.Function to use it with backward mode AD."):
        y.sum().backward()
    with pytest.raises(NotImplementedError, match="setup_context is not implemented."):
        Function.setup_context(None, (x,), y)
    from jitgrad._graph import Node
    with pytest.raises(NotImplementedError, match="Node has no backward"):
        Node().apply([None])


# ------------------------------------------------------------------ forward-mode AD: jvp and save_for_forward
class SinWithJvp(Function):
    @staticmethod
    def forward(ctx, x, scale):
        ctx.save_for_forward(x)
        ctx.scale = scale
        return x.sin() * scale, x.clone()

    @staticmethod
    def backward(ctx, g, g2):
        raise AssertionError("forward mode does not run backward")

    @staticmethod
    def jvp(ctx, tx, tscale):
        (x,) = ctx.saved_tensors  # what save_for_forward kept
        assert tscale is None  # (a number has no tangent)
        return x.cos() * tx * ctx.scale, tx


def test_function_jvp_gives_the_outputs_tangents():
    fwAD = jg.autograd.forward_ad
    p, t = np.array([0.5, 1.0]), np.array([1.0, -2.0])
    seen = []

    class Spy(Function):
        @staticmethod
        def forward(ctx, x):
            seen.append(fwAD.unpack_dual(x).tangent)  # forward sees the primal only, as PyTorch's
            return x * 2

        @staticmethod
        def jvp(ctx, tx):
            return tx * 2
    with fwAD.dual_level():
        x = fwAD.make_dual(jg.tensor(p), jg.tensor(t))
        y, z = SinWithJvp.apply(x, 3.0)
        np.testing.assert_allclose(fwAD.unpack_dual(y).primal.numpy(), 3 * np.sin(p))
        np.testing.assert_allclose(fwAD.unpack_dual(y).tangent.numpy(), 3 * np.cos(p) * t)
        np.testing.assert_allclose(fwAD.unpack_dual(z).tangent.numpy(), t)
        np.testing.assert_allclose(fwAD.unpack_dual(Spy.apply(x)).tangent.numpy(), 2 * t)
        assert seen == [None]
    # under the function transforms: jvp and jacfwd use the Function's jvp (batched for jacfwd)
    _, tangent = jg.func.jvp(lambda a: SinWithJvp.apply(a, 1.0)[0], (jg.tensor(p),), (jg.tensor(t),))
    np.testing.assert_allclose(tangent.numpy(), np.cos(p) * t)
    J = jg.func.jacfwd(lambda a: SinWithJvp.apply(a, 1.0)[0])(jg.tensor(p))
    np.testing.assert_allclose(J.numpy(), np.diag(np.cos(p)))


def test_function_jvp_errors_are_pytorch_s():
    fwAD = jg.autograd.forward_ad
    with fwAD.dual_level():
        x = fwAD.make_dual(jg.ones(2, dtype=jg.float64), jg.ones(2, dtype=jg.float64))
        with pytest.raises(NotImplementedError, match="^You must implement the jvp function for custom "
                                                      "autograd.Function to use it with forward mode AD.$"):
            Exp.apply(x)

        class TooMany(Function):
            @staticmethod
            def forward(ctx, a):
                return a * 2

            @staticmethod
            def jvp(ctx, ta):
                return ta, ta
        with pytest.raises(RuntimeError, match=r"^Function's jvp returned an invalid number of forward gradients "
                                               r"\(expected 1 but got 2\)$"):
            TooMany.apply(x)

        class WrongSize(Function):
            @staticmethod
            def forward(ctx, a):
                return a * 2

            @staticmethod
            def jvp(ctx, ta):
                return ta[:1]
        with pytest.raises(RuntimeError, match=r"Tensor is of size \[2\] while the given forward gradient is of "
                                               r"size \[1\]"):
            WrongSize.apply(x)


def test_function_jvp_with_mark_dirty_updates_the_input_s_tangent():
    fwAD = jg.autograd.forward_ad

    class Double_(Function):
        @staticmethod
        def forward(ctx, a):
            a.mul_(2)
            ctx.mark_dirty(a)
            return a

        @staticmethod
        def jvp(ctx, ta):
            return ta.mul_(2)
    with fwAD.dual_level():
        x = fwAD.make_dual(jg.ones(2, dtype=jg.float64), jg.ones(2, dtype=jg.float64))
        y = Double_.apply(x)
        assert y is x
        np.testing.assert_allclose(fwAD.unpack_dual(x).primal.numpy(), [2.0, 2.0])
        np.testing.assert_allclose(fwAD.unpack_dual(x).tangent.numpy(), [2.0, 2.0])


@pytest.mark.torch
def test_function_jvp_matches_torch():
    torch = pytest.importorskip("torch")
    p, t = np.array([0.5, 1.0]), np.array([1.0, -2.0])
    out = []
    for lib in (jg, torch):
        class F(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x, y):
                ctx.save_for_forward(x, y)
                return x.sin() * y

            @staticmethod
            def jvp(ctx, tx, ty):
                x, y = ctx.saved_tensors
                return x.cos() * tx * y + x.sin() * ty
        ad = lib.autograd.forward_ad
        with ad.dual_level():
            x = ad.make_dual(lib.tensor(p), lib.tensor(t))
            out.append(ad.unpack_dual(F.apply(x, lib.tensor(p[::-1].copy()))).tangent.numpy())
    np.testing.assert_allclose(out[0], out[1], rtol=1e-14)
