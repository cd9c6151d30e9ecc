"""jitgrad.autograd.functional (jacobian, hessian, vjp, jvp, hvp, vhp) and autograd.grad's arguments,
against analytic results and PyTorch's documented behaviour and messages."""
import numpy as np
import pytest

import jitgrad as jg
from jitgrad.autograd import grad
from jitgrad.autograd.functional import hessian, hvp, jacobian, jvp, vhp, vjp


def t64(a, requires_grad=False):
    return jg.tensor(np.asarray(a, dtype=np.float64), requires_grad=requires_grad)


RNG = np.random.default_rng(0)
X = RNG.uniform(-1, 1, 3)
Y = RNG.uniform(-1, 1, 3)
V = RNG.uniform(-1, 1, 3)


# ------------------------------------------------------------------ jacobian
def test_jacobian_single_input_output():
    J = jacobian(lambda x: x.exp() * 2, t64(X))
    np.testing.assert_allclose(J.numpy(), np.diag(2 * np.exp(X)))
    assert not J.requires_grad


def test_jacobian_shapes_are_output_then_input():
    A = RNG.standard_normal((2, 3, 4))
    J = jacobian(lambda x: jg.tensor(A) @ x, t64(RNG.standard_normal((4, 5))))
    assert J.shape == (2, 3, 5, 4, 5)
    # d(A x)[i,j,k] / d x[l,m] = A[i,j,l] * (k == m)
    np.testing.assert_allclose(J.numpy(), np.einsum("ijl,km->ijklm", A, np.eye(5)))


def test_jacobian_tuple_inputs_and_outputs():
    J = jacobian(lambda a, b: (a * b, a.sum()), (t64(X), t64(Y)))
    assert isinstance(J, tuple) and len(J) == 2 and all(isinstance(r, tuple) and len(r) == 2 for r in J)
    np.testing.assert_allclose(J[0][0].numpy(), np.diag(Y))
    np.testing.assert_allclose(J[0][1].numpy(), np.diag(X))
    np.testing.assert_allclose(J[1][0].numpy(), np.ones(3))
    np.testing.assert_allclose(J[1][1].numpy(), np.zeros(3))


def test_jacobian_nesting_follows_the_arguments():
    x = t64(X)
    assert isinstance(jacobian(lambda a: a * 2, (x,)), tuple)  # tuple input -> tuple
    assert isinstance(jacobian(lambda a: (a * 2,), x), tuple)  # tuple output -> tuple
    assert isinstance(jacobian(lambda a: a * 2, x), jg.Tensor)


def test_jacobian_strict():
    x, y = t64(X), t64(Y)
    with pytest.raises(RuntimeError, match=r"^Output 0 of the user-provided function is independent of input 1\. "
                                           r"This is not allowed in strict mode\.$"):
        jacobian(lambda a, b: a * 2, (x, y), strict=True)
    np.testing.assert_allclose(jacobian(lambda a, b: a * 2, (x, y))[1].numpy(), np.zeros((3, 3)))


def test_jacobian_strict_output_not_requiring_grad():
    with pytest.raises(RuntimeError, match="^Output 0 of the user-provided function does not require gradients. The "
                                           "outputs must be computed in a differentiable manner from the input when "
                                           "running in strict mode.$"):
        jacobian(lambda a: a.detach() * 2, t64(X), strict=True)


def test_jacobian_create_graph():
    x = t64(X, requires_grad=True)
    J = jacobian(lambda a: a ** 3, x, create_graph=True)
    assert J.requires_grad
    J.sum().backward()  # d/dx sum(diag(3 x^2)) = 6 x
    np.testing.assert_allclose(x.grad.numpy(), 6 * X)


def test_jacobian_does_not_touch_the_inputs():
    x = t64(X, requires_grad=True)
    jacobian(lambda a: a.sin(), x)
    assert x.grad is None and x.is_leaf


def _two_in_two_out(a, b):
    return (a[:3] * b).sin(), (a ** 2).sum() * b.exp()


@pytest.mark.parametrize("kw", [dict(vectorize=True), dict(vectorize=True, strategy="forward-mode")])
def test_jacobian_vectorized_and_forward_mode_match_the_loop(kw):
    a, b = t64(RNG.uniform(-1, 1, 4)), t64(RNG.uniform(-1, 1, 3))
    want = jacobian(_two_in_two_out, (a, b))
    got = jacobian(_two_in_two_out, (a, b), **kw)
    for w_row, g_row in zip(want, got):
        for w, g in zip(w_row, g_row):
            assert g.shape == w.shape and not g.requires_grad
            np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-12, atol=1e-14)
    single = jacobian(lambda x: x.exp() * 2, t64(X), **kw)  # (a Tensor in, a Tensor out: no tuples)
    np.testing.assert_allclose(single.numpy(), np.diag(2 * np.exp(X)), rtol=1e-12)
    unused = jacobian(lambda x, y: x * 2, (t64(X), t64(Y)), **kw)  # an output independent of an input: zeros
    np.testing.assert_array_equal(unused[1].numpy(), np.zeros((3, 3)))


def test_vectorized_jacobian_keeps_the_graph_on_request():
    x = t64(X, requires_grad=True)
    J = jacobian(lambda a: a.sin() * a.sum(), x, vectorize=True, create_graph=True)
    assert J.requires_grad
    (g,) = grad(J.sum(), x)

    def jac_sum(v):  # sum of J = diag(cos v) * sum(v) + sin(v) 1^T
        return np.sum(np.diag(np.cos(v)) * v.sum() + np.sin(v)[:, None])
    fd = [(jac_sum(X + 1e-6 * e) - jac_sum(X - 1e-6 * e)) / 2e-6 for e in np.eye(3)]
    np.testing.assert_allclose(g.numpy(), fd, rtol=1e-6)


@pytest.mark.parametrize("kw", [dict(vectorize=True), dict(vectorize=True, outer_jacobian_strategy="forward-mode")])
def test_hessian_vectorized_and_forward_over_reverse(kw):
    def f(x, y):
        return (x.tanh() ** 2).sum() * y.sum() + (x * x).sum()
    x, y = t64(X), t64(Y)
    want = hessian(f, (x, y))
    got = hessian(f, (x, y), **kw)
    for w_row, g_row in zip(want, got):
        for w, g in zip(w_row, g_row):
            np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-10, atol=1e-12)


def test_jacobian_vectorize_and_forward_mode_errors_are_pytorch_s():
    with pytest.raises(NotImplementedError, match="^Computing Jacobian using forward-AD or forward-over-reverse "
                                                  "Hessian isonly implemented for `vectorize=True`.$"):
        jacobian(lambda a: a, t64(X), strategy="forward-mode")
    with pytest.raises(NotImplementedError, match='`create_graph=True` and `strategy="forward-mode"` are not '
                                                  'supported together'):
        jacobian(lambda a: a, t64(X), strategy="forward-mode", vectorize=True, create_graph=True)
    with pytest.raises(RuntimeError, match='`strict=True` and `strategy="forward-mode"` are not supported'):
        jacobian(lambda a: a, t64(X), strategy="forward-mode", vectorize=True, strict=True)
    with pytest.raises(RuntimeError, match="`strict=True` and `vectorized=True` are not supported together"):
        jacobian(lambda a: a, t64(X), vectorize=True, strict=True)
    with pytest.raises(AssertionError, match='Expected strategy to be either "forward-mode" or "reverse-mode"'):
        jacobian(lambda a: a, t64(X), strategy="sideways")


def test_grad_is_grads_batched():
    x = t64(X, requires_grad=True)
    y = (x * 3).sin()
    gos = t64(RNG.standard_normal((4, 3)))
    (g,) = grad(y, x, gos, is_grads_batched=True)
    np.testing.assert_allclose(g.numpy(), gos.numpy() * 3 * np.cos(3 * X), rtol=1e-12)
    assert not g.requires_grad
    (g,) = grad(y, x, gos, is_grads_batched=True, create_graph=True)
    assert g.requires_grad


@pytest.mark.torch
def test_vectorized_jacobians_match_torch():
    torch = pytest.importorskip("torch")
    from torch.autograd.functional import jacobian as tjac
    a, b = RNG.uniform(-1, 1, 4), RNG.uniform(-1, 1, 3)
    for kw in (dict(vectorize=True), dict(vectorize=True, strategy="forward-mode")):
        got = jacobian(_two_in_two_out, (t64(a), t64(b)), **kw)
        want = tjac(_two_in_two_out, (torch.tensor(a), torch.tensor(b)), **kw)
        for w_row, g_row in zip(want, got):
            for w, g in zip(w_row, g_row):
                np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-12, atol=1e-14)


def test_inputs_must_be_tensors():
    with pytest.raises(TypeError, match=r"^The inputs given to jacobian must be either a Tensor or a tuple of Tensors "
                                        r"but the given inputs has type <class 'list'>\.$"):
        jacobian(lambda a: a, [t64(X)])
    with pytest.raises(TypeError, match="but the value at index 1 has type <class 'float'>"):
        vjp(lambda a, b: a, (t64(X), 1.0))
    with pytest.raises(TypeError, match="The outputs of the user-provided function given to jacobian must be"):
        jacobian(lambda a: 3.0, t64(X))


# ------------------------------------------------------------------ hessian
def test_hessian_quadratic_form():
    A = RNG.standard_normal((3, 3))
    H = hessian(lambda x: x @ (jg.tensor(A) @ x), t64(X))
    np.testing.assert_allclose(H.numpy(), A + A.T, rtol=1e-12)


def test_hessian_cube_sum():
    np.testing.assert_allclose(hessian(lambda x: x.pow(3).sum(), t64(X)).numpy(), np.diag(6 * X))


def test_hessian_tuple_inputs():
    H = hessian(lambda a, b: (a * b * b).sum(), (t64(X), t64(Y)))
    np.testing.assert_allclose(H[0][0].numpy(), np.zeros((3, 3)))
    np.testing.assert_allclose(H[0][1].numpy(), np.diag(2 * Y))
    np.testing.assert_allclose(H[1][0].numpy(), np.diag(2 * Y))
    np.testing.assert_allclose(H[1][1].numpy(), np.diag(2 * X))


def test_hessian_of_matrix_input_has_doubled_shape():
    x = t64(RNG.standard_normal((2, 2)))
    H = hessian(lambda x: (x ** 2).sum(), x)
    assert H.shape == (2, 2, 2, 2)
    np.testing.assert_allclose(H.numpy().reshape(4, 4), 2 * np.eye(4))


def test_hessian_errors():
    with pytest.raises(RuntimeError, match="^The function given to hessian should return a single Tensor$"):
        hessian(lambda x: (x.sum(), x.sum()), t64(X))
    with pytest.raises(RuntimeError, match="^The Tensor returned by the function given to hessian should contain a "
                                           "single element$"):
        hessian(lambda x: x * 2, t64(X))
    with pytest.raises(RuntimeError, match="^While computing the hessian, found that the jacobian of the user-provided "
                                           "function with respect to input 0 is independent of the input"):
        hessian(lambda x: (x * 2).sum(), t64(X), strict=True)
    np.testing.assert_allclose(hessian(lambda x: (x * 2).sum(), t64(X)).numpy(), np.zeros((3, 3)))


# ------------------------------------------------------------------ vjp / jvp / vhp / hvp
def test_vjp():
    out, g = vjp(lambda x: x.sin(), t64(X), t64(V))
    np.testing.assert_allclose(out.numpy(), np.sin(X))
    np.testing.assert_allclose(g.numpy(), V * np.cos(X))
    out, g = vjp(lambda x: (x ** 2).sum(), t64(X))  # v may be left out for a single-element output
    np.testing.assert_allclose(g.numpy(), 2 * X)


def test_vjp_tuple_inputs_and_strict():
    out, (ga, gb) = vjp(lambda a, b: a * b, (t64(X), t64(Y)), t64(V))
    np.testing.assert_allclose(ga.numpy(), V * Y)
    np.testing.assert_allclose(gb.numpy(), V * X)
    _, (ga, gb) = vjp(lambda a, b: a * 2, (t64(X), t64(Y)), t64(V))
    np.testing.assert_allclose(gb.numpy(), np.zeros(3))  # unused input: zeros
    with pytest.raises(RuntimeError, match="^The output of the user-provided function is independent of input 1. This "
                                           "is not allowed in strict mode.$"):
        vjp(lambda a, b: a * 2, (t64(X), t64(Y)), t64(V), strict=True)


def test_vjp_v_checks():
    with pytest.raises(RuntimeError, match="^The vector v can only be None if the user-provided function returns a "
                                           "single Tensor with a single element.$"):
        vjp(lambda x: x * 2, t64(X))
    with pytest.raises(RuntimeError, match=r"^v has invalid size: should be jitgrad.Size\(\[3\]\) but got "
                                           r"jitgrad.Size\(\[2\]\).$"):
        vjp(lambda x: x * 2, t64(X), t64([1.0, 2.0]))
    with pytest.raises(RuntimeError, match="^v is a tuple of invalid length: should be 2 but got 1.$"):
        vjp(lambda x: (x * 2, x * 3), t64(X), (t64(V),))
    with pytest.raises(RuntimeError, match="^The given v should contain a single Tensor.$"):
        vjp(lambda x: x * 2, t64(X), (t64(V), t64(V)))


def test_vjp_create_graph():
    x = t64(X, requires_grad=True)
    out, g = vjp(lambda a: (a ** 2).sum(), x, create_graph=True)
    assert out.requires_grad and g.requires_grad
    g.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.ones(3))
    out, g = vjp(lambda a: (a ** 2).sum(), x)
    assert not out.requires_grad and not g.requires_grad


def test_jvp():
    out, Jv = jvp(lambda x: x.sin() * x, t64(X), t64(V))
    np.testing.assert_allclose(Jv.numpy(), (np.cos(X) * X + np.sin(X)) * V)
    A = RNG.standard_normal((2, 3))
    out, Jv = jvp(lambda x: jg.tensor(A) @ x, t64(X), t64(V))
    np.testing.assert_allclose(Jv.numpy(), A @ V)


def test_jvp_tuple_and_strict():
    out, Jv = jvp(lambda a, b: (a * b, a.sum()), (t64(X), t64(Y)), (t64(V), t64(V)))
    np.testing.assert_allclose(Jv[0].numpy(), V * Y + X * V)
    np.testing.assert_allclose(Jv[1].numpy(), V.sum())
    with pytest.raises(RuntimeError, match="^The vector v can only be None if the input to the user-provided function "
                                           "is a single Tensor with a single element.$"):
        jvp(lambda x: x, t64(X))
    with pytest.raises(RuntimeError, match="^Output 0 of the user-provided function does not require gradients"):
        jvp(lambda a: a.detach(), t64(X), t64(V), strict=True)


def test_hvp_and_vhp():
    A = RNG.standard_normal((3, 3))
    f = lambda x: 0.5 * (x @ (jg.tensor(A) @ x)) + x.pow(3).sum()  # noqa: E731
    H = 0.5 * (A + A.T) + np.diag(6 * X)
    out, Hv = hvp(f, t64(X), t64(V))
    np.testing.assert_allclose(Hv.numpy(), H @ V, rtol=1e-12)
    out, vH = vhp(f, t64(X), t64(V))
    np.testing.assert_allclose(vH.numpy(), V @ H, rtol=1e-12)
    np.testing.assert_allclose(out.numpy(), 0.5 * X @ A @ X + (X ** 3).sum())


def test_hvp_tuple_inputs():
    f = lambda a, b: (a * a * b).sum()  # noqa: E731
    _, (ha, hb) = hvp(f, (t64(X), t64(Y)), (t64(V), t64(V)))
    # H = [[diag(2b), diag(2a)], [diag(2a), 0]]
    np.testing.assert_allclose(ha.numpy(), 2 * Y * V + 2 * X * V)
    np.testing.assert_allclose(hb.numpy(), 2 * X * V)


def test_hvp_vhp_errors():
    for fn, name in ((hvp, "hvp"), (vhp, "vhp")):
        with pytest.raises(RuntimeError, match="^The Tensor returned by the function given to %s should contain a "
                                               "single element$" % name):
            fn(lambda x: x * 2, t64(X), t64(V))
        with pytest.raises(RuntimeError, match="^The function given to %s should return a single Tensor$" % name):
            fn(lambda x: (x.sum(),), t64(X), t64(V))
        with pytest.raises(RuntimeError, match="^While computing the hessian, found that the jacobian"):
            fn(lambda x: x.sum(), t64(X), t64(V), strict=True)
        _, r = fn(lambda x: x.sum(), t64(X), t64(V))
        np.testing.assert_allclose(r.numpy(), np.zeros(3))


def test_hvp_create_graph_third_derivative():
    x = t64(X, requires_grad=True)
    _, Hv = hvp(lambda a: (a ** 4).sum(), x, t64(V), create_graph=True)  # 12 x^2 v
    assert Hv.requires_grad
    Hv.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 24 * X * V)


def test_functional_works_under_no_grad():
    with jg.no_grad():
        J = jacobian(lambda x: x ** 2, t64(X))
        _, Hv = hvp(lambda x: (x ** 3).sum(), t64(X), t64(V))
    np.testing.assert_allclose(J.numpy(), np.diag(2 * X))
    np.testing.assert_allclose(Hv.numpy(), 6 * X * V)


# ------------------------------------------------------------------ autograd.grad's arguments
def test_grad_several_outputs_and_inputs():
    a, b = t64(X, True), t64(Y, True)
    ga, gb = grad([a * b, (a ** 2).sum()], [a, b], [t64(V), None])
    np.testing.assert_allclose(ga.numpy(), V * Y + 2 * X)
    np.testing.assert_allclose(gb.numpy(), V * X)
    assert a.grad is None and b.grad is None  # .grad is left alone


def test_grad_unused_inputs():
    a, b = t64(X, True), t64(Y, True)
    msg = ("^One of the differentiated Tensors appears to not have been used in the graph. Set allow_unused=True if "
           "this is the desired behavior.$")
    with pytest.raises(RuntimeError, match=msg):
        grad((a * 2).sum(), [a, b])
    ga, gb = grad((a * 2).sum(), [a, b], allow_unused=True)
    assert gb is None
    ga, gb = grad((a * 2).sum(), [a, b], materialize_grads=True)
    np.testing.assert_array_equal(gb.numpy(), np.zeros(3))
    with pytest.raises(ValueError, match="^Expected allow_unused to be True or not passed when materialize_grads=True, "
                                         "but got: allow_unused=False.$"):
        grad((a * 2).sum(), [a], allow_unused=False, materialize_grads=True)


def test_grad_errors():
    a = t64(X, True)
    with pytest.raises(RuntimeError, match="^One of the differentiated Tensors does not require grad$"):
        grad((a * 2).sum(), [a, t64(Y)])
    with pytest.raises(RuntimeError, match="^grad can be implicitly created only for scalar outputs$"):
        grad(a * 2, a)
    with pytest.raises(RuntimeError, match=r"^Mismatch in shape: grad_output\[0\] has a shape of jitgrad.Size\(\[2\]\) "
                                           r"and output\[0\] has a shape of jitgrad.Size\(\[3\]\).$"):
        grad(a * 2, a, t64([1.0, 2.0]))


def test_grad_returns_a_tuple_and_frees_the_graph():
    a = t64(X, True)
    y = (a.exp()).sum()
    g = grad(y, a)
    assert isinstance(g, tuple) and len(g) == 1
    with pytest.raises(RuntimeError, match="^Trying to backward through the graph a second time"):
        grad(y, a)
    y = (a.exp()).sum()
    grad(y, a, retain_graph=True)
    np.testing.assert_allclose(grad(y, a)[0].numpy(), np.exp(X))


def test_grad_of_non_leaf_inputs():
    a = t64(X, True)
    h = a * 3
    gh, = grad((h ** 2).sum(), h)
    np.testing.assert_allclose(gh.numpy(), 2 * 3 * X)


def test_backward_inputs_accumulates_into_the_named_tensors_only():
    a, b = t64(X, True), t64(Y, True)
    h = a * b
    h.retain_grad()
    (h * h).sum().backward(inputs=[a])
    np.testing.assert_allclose(a.grad.numpy(), 2 * X * Y * Y)
    assert b.grad is None
    np.testing.assert_allclose(h.grad.numpy(), 2 * X * Y)  # retain_grad still fills h.grad, as in PyTorch
    (a * b).sum().backward(inputs=[b, a])
    np.testing.assert_allclose(a.grad.numpy(), 2 * X * Y * Y + Y)  # accumulated
    np.testing.assert_allclose(b.grad.numpy(), X)


def test_backward_inputs_can_be_a_non_leaf():
    a = t64(X, True)
    h = a * 2
    (h ** 2).sum().backward(inputs=[h])
    np.testing.assert_allclose(h.grad.numpy(), 2 * 2 * X)
    assert a.grad is None


def test_backward_inputs_errors():
    a = t64(X, True)
    with pytest.raises(RuntimeError, match=r"^`inputs` argument to `backward\(\)` cannot be empty.$"):
        (a * 2).sum().backward(inputs=[])
