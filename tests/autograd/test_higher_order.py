"""Higher-order gradients: backward(create_graph=True) records the backward pass through ordinary
table ops, so gradients of gradients work.

gradgradcheck of every differentiable entry's samples is in the op matrix (tests/ops/test_op_matrix.py);
here, which entries claim double backward, third order on a few ops, Hessians, Hessian-vector products and a gradient penalty are
compared with analytic results.
"""
import numpy as np
import pytest

import jitgrad as jg
from jitgrad.autograd import grad, gradcheck, gradgradcheck
from jitgrad.autograd.functional import hessian, hvp
from jitgrad.ops import OPS


def second_order_ops():
    return [name for name, op in OPS.items() if op.differentiable and op.tests.samples and op.derivatives.double_backward]


def test_second_order_covers_the_table():
    """Every differentiable op with samples is in the generated list above, except ops whose entry says
    their backward is a fused kernel only (those must not claim double backward)."""
    first_only = [n for n, op in OPS.items() if op.differentiable and op.tests.samples and not op.derivatives.double_backward]
    assert set(second_order_ops()) | set(first_only) == {n for n, op in OPS.items() if op.differentiable and op.tests.samples}
    for n in first_only:
        assert any(f is not None for f in OPS[n].derivatives.fused), n


THIRD_ORDER = [
    ("exp", lambda x: x.exp()),
    ("sin", lambda x: x.sin()),
    ("tanh", lambda x: x.tanh()),
    ("sigmoid", lambda x: x.sigmoid()),
    ("log", lambda x: (x.abs() + 0.5).log()),
    ("pow", lambda x: x.pow(3)),
    ("mul", lambda x: x * x * x),
    ("softmax", lambda x: x.softmax(-1)),
    ("logsumexp", lambda x: x.logsumexp(-1)),
    ("matmul", lambda x: (x @ x.T).sum(0)),
]


@pytest.mark.parametrize("name,f", THIRD_ORDER, ids=[n for n, _ in THIRD_ORDER])
def test_third_order(name, f):
    """gradgradcheck of the first derivative (itself built with create_graph) checks the third."""
    x = jg.tensor(np.random.default_rng(3).uniform(-1, 1, (2, 3)), requires_grad=True)

    def first_derivative(x):
        y = f(x)
        g, = grad(y, x, jg.ones_like(y), create_graph=True)
        return g
    assert gradgradcheck(first_derivative, (x,))


def test_nth_derivative_of_x_cubed():
    x = jg.tensor(1.5, dtype=jg.float64, requires_grad=True)
    y = x ** 3
    d1, = grad(y, x, create_graph=True)
    d2, = grad(d1, x, create_graph=True)
    d3, = grad(d2, x, create_graph=True)
    assert (d1.item(), d2.item(), d3.item()) == pytest.approx((3 * 1.5 ** 2, 6 * 1.5, 6))
    assert d1.requires_grad and d2.requires_grad
    if d3.requires_grad:  # a constant; whether its graph was recorded depends on the formulas
        d4, = grad(d3, x, allow_unused=True)
        assert d4 is None or d4.item() == 0


def test_backward_create_graph_records_the_backward():
    x = jg.tensor([0.5, -1.0, 2.0], dtype=jg.float64, requires_grad=True)
    with pytest.warns(UserWarning, match="create a reference cycle"):
        x.sin().sum().backward(create_graph=True)
    g = x.grad
    assert g.requires_grad and g.grad_fn is not None
    np.testing.assert_allclose(g.detach().numpy(), np.cos(x.detach().numpy()))
    x.grad = None
    g.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), -np.sin(x.detach().numpy()))


def test_without_create_graph_the_gradient_has_no_history():
    x = jg.tensor([0.5, -1.0], dtype=jg.float64, requires_grad=True)
    g, = grad(x.exp().sum(), x)
    assert not g.requires_grad and g.grad_fn is None


# ------------------------------------------------------------------ Hessians against analytic ones
def test_hessian_of_quadratic_form():
    rng = np.random.default_rng(0)
    A = rng.standard_normal((4, 4))
    x0 = rng.standard_normal(4)
    At = jg.tensor(A)
    H = hessian(lambda x: x @ (At @ x), jg.tensor(x0))
    np.testing.assert_allclose(H.numpy(), A + A.T, rtol=1e-12)


def test_hessian_of_cube_sum_by_double_backward():
    x = jg.tensor([1.0, -2.0, 0.5], dtype=jg.float64, requires_grad=True)
    g, = grad(x.pow(3).sum(), x, create_graph=True)
    rows = [grad(g[i], x, retain_graph=True)[0].numpy() for i in range(3)]
    np.testing.assert_allclose(np.stack(rows), np.diag(6 * x.detach().numpy()))
    np.testing.assert_allclose(hessian(lambda x: x.pow(3).sum(), x.detach()).numpy(),
                               np.diag(6 * x.detach().numpy()))


def test_hessian_vector_product():
    rng = np.random.default_rng(1)
    A = rng.standard_normal((3, 3))
    v = rng.standard_normal(3)
    x = jg.tensor(rng.standard_normal(3), requires_grad=True)
    At = jg.tensor(A)
    f = lambda x: 0.5 * (x @ (At @ x)) + x.pow(3).sum()  # noqa: E731
    # by hand: grad, then grad of <grad, v>
    g, = grad(f(x), x, create_graph=True)
    Hv, = grad((g * jg.tensor(v)).sum(), x)
    expected = 0.5 * (A + A.T) @ v + 6 * x.detach().numpy() * v
    np.testing.assert_allclose(Hv.numpy(), expected, rtol=1e-12)
    _, Hv2 = hvp(f, x.detach(), jg.tensor(v))
    np.testing.assert_allclose(Hv2.numpy(), expected, rtol=1e-12)


def test_gradient_penalty():
    """loss = f(x, w) + ||d f / d x||^2, then backward to w (as in WGAN-GP)."""
    rng = np.random.default_rng(2)
    x = jg.tensor(rng.standard_normal((5, 3)), requires_grad=True)
    w = jg.tensor(rng.standard_normal(3), requires_grad=True)
    out = (x @ w).tanh().sum()
    gx, = grad(out, x, create_graph=True)
    loss = out + (gx * gx).sum()
    loss.backward()
    assert x.grad is not None and w.grad is not None

    X, W = x.detach().numpy(), w.detach().numpy()

    def loss_np(W):
        t = np.tanh(X @ W)
        gx = (1 - t ** 2)[:, None] * W[None, :]
        return t.sum() + (gx ** 2).sum()
    eps = 1e-6
    numeric = np.array([(loss_np(W + eps * e) - loss_np(W - eps * e)) / (2 * eps) for e in np.eye(3)])
    np.testing.assert_allclose(w.grad.numpy(), numeric, rtol=1e-6)
    assert gradcheck(lambda w: _penalty(x.detach(), w), (w.detach().clone().requires_grad_(),))


def _penalty(x, w):
    x = x.clone().requires_grad_()
    out = (x @ w).tanh().sum()
    gx, = grad(out, x, create_graph=True)
    return out + (gx * gx).sum()


def test_double_backward_through_custom_function():
    class Cube(jg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        def backward(ctx, g):
            x, = ctx.saved_tensors
            return g * 3 * x ** 2  # written with ops: differentiable again
    x = jg.tensor([0.5, 2.0], dtype=jg.float64, requires_grad=True)
    assert gradgradcheck(Cube.apply, (x,))
    g, = grad(Cube.apply(x).sum(), x, create_graph=True)
    g2, = grad(g.sum(), x)
    np.testing.assert_allclose(g2.numpy(), 6 * x.detach().numpy())
