"""linalg.eig and linalg.eigvals: values against NumPy (LAPACK's geev, the same conventions as PyTorch), gradients
of gauge-invariant losses against finite differences, PyTorch's errors, and (marked torch) PyTorch's gradients."""
import numpy as np
import pytest

import jitgrad as jg
from jitgrad.autograd import gradcheck, gradgradcheck

RNG = np.random.default_rng(0)


def _matrix(n, batch=(), complex_=False):
    shape = tuple(batch) + (n, n)
    a = np.diag(2.0 * np.arange(1.0, n + 1)) + 0.3 * RNG.standard_normal(shape)  # separated eigenvalues
    return a + 0.2j * RNG.standard_normal(shape) if complex_ else a


ROTATION = np.array([[0.2, -2.0, 0.1], [2.0, 0.3, 0.4], [0.1, 0.2, 3.0]])  # a real matrix with a complex pair


@pytest.mark.parametrize("a", [_matrix(4), ROTATION, _matrix(3, (2,)), _matrix(3, complex_=True)],
                         ids=["real", "complex-pair", "batch", "complex"])
def test_values_match_numpy(a):
    L, V = jg.linalg.eig(jg.tensor(a))
    w, v = np.linalg.eig(a)
    assert L.dtype is jg.complex128 and V.dtype is jg.complex128
    np.testing.assert_allclose(L.numpy(), w, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(V.numpy(), v, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(jg.linalg.eigvals(jg.tensor(a)).numpy(), w, rtol=1e-12, atol=1e-12)
    # A V = V diag(L)
    np.testing.assert_allclose(a @ V.numpy(), V.numpy() * L.numpy()[..., None, :], rtol=1e-10, atol=1e-10)


def test_float32_gives_complex64():
    L, V = jg.linalg.eig(jg.tensor(ROTATION, dtype=jg.float32))
    assert L.dtype is jg.complex64 and V.dtype is jg.complex64
    np.testing.assert_allclose(L.numpy(), np.linalg.eigvals(ROTATION), rtol=1e-5)


def _gauge_invariant(A):
    """A loss of the eigenvectors that does not depend on their phases: |V|, and L itself."""
    L, V = jg.linalg.eig(A)
    return L, V.abs()


@pytest.mark.parametrize("a", [_matrix(4), ROTATION, _matrix(3, (2,)), _matrix(3, complex_=True)],
                         ids=["real", "complex-pair", "batch", "complex"])
def test_gradcheck(a):
    A = jg.tensor(a, requires_grad=True)
    assert gradcheck(_gauge_invariant, (A,))
    assert gradcheck(jg.linalg.eigvals, (A,))


def test_gradgradcheck():
    A = jg.tensor(_matrix(3), requires_grad=True)
    assert gradgradcheck(jg.linalg.eigvals, (A,))
    assert gradgradcheck(_gauge_invariant, (A,))


def test_a_phase_dependent_loss_raises():
    A = jg.tensor(ROTATION, requires_grad=True)
    L, V = jg.linalg.eig(A)
    with pytest.raises(RuntimeError, match="linalg_eig_backward: The eigenvectors in the complex case are specified "
                                           "up to multiplication by e\\^{i phi}"):
        V.sum().abs().backward()


ERRORS = [
    (lambda: jg.linalg.eig(jg.randn(2, 3)), RuntimeError,
     "linalg.eig: A must be batches of square matrices, but they are 2 by 3 matrices"),
    (lambda: jg.linalg.eig(jg.randn(3)), RuntimeError,
     "linalg.eig: The input tensor A must have at least 2 dimensions."),
    (lambda: jg.linalg.eigvals(jg.full((2, 2), float("nan"))), RuntimeError,
     "torch.linalg.eigvals: input tensor should not contain infs or NaNs."),
    (lambda: jg.linalg.eig(jg.randn(2, 2).half()), NotImplementedError,
     "\"linalg_eig_out_cpu\" not implemented for 'Half'"),
]


@pytest.mark.parametrize("k", range(len(ERRORS)))
def test_errors(k):
    fn, exc, msg = ERRORS[k]
    with pytest.raises(exc, match=msg):
        fn()


@pytest.mark.torch
@pytest.mark.parametrize("a", [_matrix(4), ROTATION, _matrix(3, complex_=True)], ids=["real", "pair", "complex"])
def test_gradients_match_torch(a):
    torch = pytest.importorskip("torch")
    grads = []
    for lib in (jg, torch):
        A = lib.tensor(a, requires_grad=True)
        L, V = lib.linalg.eig(A)
        (L.real.sum() + (L.imag ** 2).sum() + (V.abs() ** 3).sum()).backward()
        grads.append(A.grad.numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-9, atol=1e-10)
