"""Autograd on complex tensors, PyTorch's convention: the gradient of a real loss L in z = x + iy is
dL/dx + i dL/dy (the conjugate Wirtinger derivative, times 2), so that it is the steepest-ascent direction;
the VJP of a holomorphic f is g * conj(f'(z)), its JVP f'(z) * t. Checked against closed forms, finite
differences (gradcheck splits complex inputs and outputs into their real and imaginary parts, as PyTorch's
does), forward mode, vmap, and PyTorch itself (marked torch)."""
import functools

import numpy as np
import pytest

import jitgrad as jg
import jitgrad.autograd.forward_ad as fwAD
from jitgrad.autograd import GradcheckError, gradcheck, gradgradcheck


def _z(shape, seed=0, lo=-1.5, hi=1.5):
    rng = np.random.default_rng(seed)
    return rng.uniform(lo, hi, shape) + 1j * rng.uniform(lo, hi, shape)


def _leaf(a):
    return jg.tensor(a, dtype=jg.complex128 if np.iscomplexobj(a) else jg.float64, requires_grad=True)


def test_closed_forms():
    z0, w0 = _z(3), _z(3, 1)
    z, w = _leaf(z0), _leaf(w0)
    (z.abs() ** 2).sum().backward()  # |z|^2 = x^2 + y^2: gradient 2x + 2iy = 2z
    np.testing.assert_allclose(z.grad.numpy(), 2 * z0)
    z.grad = None
    (z * w).real.sum().backward()  # Re(zw): the gradient in z is conj(w)
    np.testing.assert_allclose(z.grad.numpy(), np.conj(w0))
    np.testing.assert_allclose(w.grad.numpy(), np.conj(z0))
    z.grad = None
    z.abs().sum().backward()  # |z|: z / |z|
    np.testing.assert_allclose(z.grad.numpy(), z0 / np.abs(z0))
    z.grad = None
    z.angle().sum().backward()  # atan2(y, x): (-y + ix) / |z|^2 = i z / |z|^2
    np.testing.assert_allclose(z.grad.numpy(), 1j * z0 / np.abs(z0) ** 2)
    z.grad = None
    z.imag.sum().backward()
    np.testing.assert_allclose(z.grad.numpy(), np.full(3, 1j))


def test_a_real_input_gets_the_real_part():
    x = jg.tensor([0.5, -1.0], dtype=jg.float64, requires_grad=True)
    c = jg.tensor([2 - 1j, 1j], dtype=jg.complex128)
    (x * c).abs().sum().backward()  # |x c| = |x| |c|
    assert x.grad.dtype is jg.float64
    np.testing.assert_allclose(x.grad.numpy(), np.sign([0.5, -1.0]) * np.abs(c.numpy()))


FUNCTIONS = {  # fn(lib, z, w, x): jitgrad and torch alike
    "mul_div": lambda lib, z, w, x: z * w / (w + 2),
    "exp_log": lambda lib, z, w, x: (z * x).exp() + (w + 3).log(),
    "sqrt_pow": lambda lib, z, w, x: (z + 3).sqrt() + z ** w + z ** 2.5 + 2 ** z,
    "trig": lambda lib, z, w, x: z.sin() + z.cos() * w.tanh() + z.tan() + z.sinh() - z.cosh() + z.sigmoid(),
    "reciprocal_square": lambda lib, z, w, x: z.reciprocal() + w.square() + (z + 3).rsqrt(),
    "abs_angle_sgn": lambda lib, z, w, x: (z.abs(), z.angle(), lib.sgn(w)),
    "conj_real_imag": lambda lib, z, w, x: (z.conj() * w, z.real * w.imag, lib.conj_physical(w)),
    "views": lambda lib, z, w, x: (lib.view_as_real(z * w), lib.view_as_complex(lib.view_as_real(z).contiguous())),
    "complex_polar": lambda lib, z, w, x: (lib.complex(x, x * 2), lib.polar(x.abs() + 0.5, x)),
    "reductions": lambda lib, z, w, x: (z.sum(), (z * w).mean(), z.prod(), z.var(), z.std(), z.norm(), lib.cumsum(z, 0)),
    "linear_algebra": lambda lib, z, w, x: (lib.outer(z, w) @ w, lib.dot(z, w), lib.einsum("i,j->ij", z, x.to(z.dtype))),
    "shapes": lambda lib, z, w, x: (lib.stack([z, w])[:, 1:].T.reshape(-1), lib.where(x > 0, z, w), z.flip(0)),
}


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_gradcheck_and_gradgradcheck(name):
    fn = functools.partial(FUNCTIONS[name], jg)
    inputs = (_leaf(_z(3)), _leaf(_z(3, 1)), _leaf(np.random.default_rng(2).uniform(-1, 1, 3)))
    assert gradcheck(fn, inputs)
    assert gradcheck(fn, inputs, fast_mode=True)
    assert gradgradcheck(fn, inputs)


@pytest.mark.parametrize("name", ["mul_div", "exp_log", "trig", "abs_angle_sgn", "conj_real_imag", "reductions",
                                  "linear_algebra"])
def test_forward_mode_matches_finite_differences(name):
    inputs = (_leaf(_z(3)), _leaf(_z(3, 1)), _leaf(np.random.default_rng(2).uniform(-1, 1, 3)))
    assert gradcheck(functools.partial(FUNCTIONS[name], jg), inputs, check_forward_ad=True)


def test_the_jvp_of_a_holomorphic_function_is_its_derivative_times_the_tangent():
    z0, t0 = _z(4), _z(4, 1)
    with fwAD.dual_level():
        y = fwAD.make_dual(jg.tensor(z0), jg.tensor(t0)).exp()
        np.testing.assert_allclose(fwAD.unpack_dual(y).tangent.numpy(), np.exp(z0) * t0)


def test_gradcheck_catches_a_wrong_complex_gradient():
    class Wrong(jg.autograd.Function):  # exp's VJP without the conjugate
        @staticmethod
        def forward(ctx, z):
            ctx.save_for_backward(z)
            return z.exp()

        @staticmethod
        def backward(ctx, g):
            (z,) = ctx.saved_tensors
            return g * z.exp()
    z = _leaf(_z(3))
    with pytest.raises(GradcheckError, match="Jacobian mismatch"):
        gradcheck(Wrong.apply, (z,))
    assert gradcheck(lambda z: z.exp(), (z,))


def test_vmap_and_grad_transforms():
    Z = jg.tensor(_z((4, 3)))
    f = lambda z: (z * z.conj()).real + z.abs() + jg.view_as_real(z.exp()).sum(-1) + z.angle()  # noqa: E731
    np.testing.assert_allclose(jg.vmap(f)(Z).numpy(), np.stack([f(Z[i]).numpy() for i in range(4)]))
    np.testing.assert_allclose(jg.func.grad(lambda z: (z.abs() ** 2).sum())(Z[0]).numpy(), 2 * Z[0].numpy())


def test_backward_of_a_complex_output_needs_its_gradient():
    z = _leaf(_z(2))
    y = z * 2
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for real scalar outputs"):
        y.sum().backward()
    y.backward(jg.tensor([1 + 0j, 1j], dtype=jg.complex128))
    np.testing.assert_allclose(z.grad.numpy(), [2, 2j])  # the VJP: g * conj(2)


# ---------------------------------------------------------------------- a program: a complex linear model
def _fit(lib, steps=200, lr=0.1):
    """Gradient descent on W for y = X W (complex X, W, y), loss mean |X W - y|^2."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((32, 3)) + 1j * rng.standard_normal((32, 3))
    W_true = rng.standard_normal((3, 2)) + 1j * rng.standard_normal((3, 2))
    y = X @ W_true + 0.01 * (rng.standard_normal((32, 2)) + 1j * rng.standard_normal((32, 2)))
    Xt, yt = lib.tensor(X, dtype=lib.complex128), lib.tensor(y, dtype=lib.complex128)
    W = lib.zeros(3, 2, dtype=lib.complex128, requires_grad=True)
    losses = []
    for _ in range(steps):
        loss = ((Xt @ W - yt).abs() ** 2).mean()
        loss.backward()
        with lib.no_grad():
            W -= lr * W.grad  # (the gradient is the steepest-ascent direction: descend against it)
            W.grad = None
        losses.append(loss.item())
    return np.array(losses), W.detach().numpy(), np.linalg.lstsq(X, y, rcond=None)[0]


def test_fitting_a_complex_linear_model_converges_to_least_squares():
    losses, W, W_ls = _fit(jg)
    assert losses[-1] < 1e-3 < losses[0]
    np.testing.assert_allclose(W, W_ls, atol=1e-6)


@pytest.mark.torch
def test_fitting_a_complex_linear_model_matches_pytorch():
    torch = pytest.importorskip("torch")
    got, want = _fit(jg, steps=50), _fit(torch, steps=50)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-12)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-12, atol=1e-14)


@pytest.mark.torch
@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_gradients_match_pytorch(name):
    torch = pytest.importorskip("torch")
    if name == "views":
        pytest.skip("view_as_complex of a contiguous copy: same values, checked by gradcheck")
    fn = FUNCTIONS[name]
    arrays = (_z(3), _z(3, 1), np.random.default_rng(2).uniform(-1, 1, 3))
    results = []
    for lib in (jg, torch):
        xs = [lib.tensor(a, requires_grad=True) for a in arrays]
        outs = fn(lib, *xs)
        outs = outs if isinstance(outs, tuple) else (outs,)
        loss = 0
        for o in outs:  # a real loss: each output weighted by fixed random numbers (real and imaginary parts)
            w = np.random.default_rng(o.numel()).standard_normal(tuple(o.shape) + (2,))
            part = lib.view_as_real(o) if o.is_complex() else o.unsqueeze(-1).expand(tuple(o.shape) + (2,))
            loss = loss + (part * lib.tensor(w)).sum()
        grads = lib.autograd.grad(loss, xs, allow_unused=True)
        results.append([None if g is None else g.detach().numpy() for g in grads])
    for a, b in zip(*results):
        assert (a is None) == (b is None), name
        if a is not None:
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12, err_msg=name)
