"""Batches of matrices of order up to small_matrix.ORDER by direct code (kernels/small_matrix.py, one matrix a
thread): Cholesky, triangular solves and the Cholesky gradient against LAPACK's kernels on the same inputs (every
flag, both dtypes, non-positive-definite inputs with potrf's info and partial factor), and programs through the
public functions with gradients."""
import numpy as np
import pytest

import jitgrad as jg
from jitgrad.autograd import gradcheck, gradgradcheck
from jitgrad.kernels import linalg as K
from jitgrad.kernels import small_matrix

TOL = {np.float32: dict(rtol=2e-5, atol=2e-5), np.float64: dict(rtol=1e-12, atol=1e-12)}


@pytest.fixture
def lapack(monkeypatch):
    """Run a kernel function on LAPACK's path (no direct code)."""
    def run(fn, *args):
        with monkeypatch.context() as m:
            m.setattr(small_matrix, "ORDER", 0)
            return fn(*args)
    return run


def _spd(rng, batch, n, dtype):
    m = rng.standard_normal(batch + (n, n))
    return (m @ m.swapaxes(-1, -2) + n * np.eye(n)).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [1, 2, 3, 5, 8])
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_matches_potrf(n, upper, dtype, lapack):
    rng = np.random.default_rng(n)
    a = _spd(rng, (4, 3), n, dtype)
    a[0, 0] += np.triu(rng.standard_normal((n, n)), 1).astype(dtype)  # (an unsymmetric one: which triangle is read)
    (l, info), (ref, ref_info) = K.cholesky(a, upper), lapack(K.cholesky, a, upper)
    np.testing.assert_allclose(l, ref, **TOL[dtype])
    assert (info == ref_info).all() and not info.any() and l.strides == ref.strides


@pytest.mark.parametrize("n", [2, 3, 8])
def test_cholesky_of_matrices_that_are_not_positive_definite(n, lapack):
    a = _spd(np.random.default_rng(0), (5,), n, np.float64)
    a[1, n - 1, n - 1] = -50.0  # the last leading minor
    a[2, 0, 0] = 0.0  # the first
    a[3, 1, 1] = np.nan
    for upper in (False, True):
        (l, info), (ref, ref_info) = K.cholesky(a, upper), lapack(K.cholesky, a, upper)
        # (a NaN pivot: reference LAPACK's and PyTorch's info; OpenBLAS's potrf lets it through)
        assert info.tolist() == [0, n, 1, 2, 0] and ref_info[[0, 1, 2, 4]].tolist() == [0, n, 1, 0]
        ok = ~np.isnan(ref).any((-2, -1))
        np.testing.assert_allclose(l[ok], ref[ok], rtol=1e-12, atol=1e-12)  # (potrf's partial factor too)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [1, 3, 8])
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("upper", [True, False])
@pytest.mark.parametrize("trans", [False, True])
@pytest.mark.parametrize("unit", [False, True])
def test_triangular_solves_match_trsm(n, left, upper, trans, unit, dtype):
    rng = np.random.default_rng(n)
    a = (rng.standard_normal((6, n, n)) + 3 * np.eye(n)).astype(dtype)
    x = rng.standard_normal((6, 3, n) if left else (6, n, 4)).astype(dtype)  # (column-major: (columns, rows))
    got, ref = x.copy(), x.copy()
    K._small_triangular(a, got, left, upper, trans, unit)
    K._kernels(dtype)["triangular"](a, ref, ord("L" if left else "R"), ord("U" if upper else "L"),
                                    ord("T" if trans else "N"), ord("U" if unit else "N"))
    np.testing.assert_allclose(got, ref, **TOL[dtype])


def test_which_problems_take_direct_code():
    a = np.zeros((4, 8, 8))
    assert K._direct(a, 16) and not K._direct(a, 17) and not K._direct(np.zeros((4, 9, 9)))
    assert not K._direct(a.astype(np.complex128)) and K._direct(a.astype(np.float32))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [1, 2, 4, 8])
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_gradient_matches_the_blocked_kernel(n, upper, dtype, lapack):
    rng = np.random.default_rng(n)
    l = np.linalg.cholesky(_spd(rng, (7,), n, np.float64)).astype(dtype)
    if upper:
        l = l.swapaxes(-1, -2)
    g = rng.standard_normal(l.shape).astype(dtype)
    got, ref = K.cholesky_grad(l, g, upper), lapack(K.cholesky_grad, l, g, upper)
    np.testing.assert_allclose(got, ref, **TOL[dtype])
    assert (got == got.swapaxes(-1, -2)).all()  # (exactly symmetric)


def _gaussian_nll(lib, A, x):
    """The negative log-likelihood of points x under zero-mean Gaussians of covariances A (batched): a Cholesky
    factor, a triangular solve, cholesky_solve and the log-determinant from the factor's diagonal."""
    L = lib.linalg.cholesky(A)
    z = lib.linalg.solve_triangular(L, x, upper=False)
    quad = (z * z).sum((-2, -1)) + (x * lib.cholesky_solve(x, L)).sum((-2, -1))
    return 0.5 * quad + 2 * lib.log(lib.diagonal(L, dim1=-2, dim2=-1)).sum(-1)


def test_gaussian_likelihood_gradients_against_finite_differences():
    rng = np.random.default_rng(1)
    A = jg.tensor(_spd(rng, (3,), 3, np.float64), requires_grad=True)
    x = jg.tensor(rng.standard_normal((3, 3, 2)), requires_grad=True)
    fn = lambda A, x: _gaussian_nll(jg, (A + A.mT) / 2, x)  # noqa: E731  (a symmetric direction, as PyTorch's OpInfo)
    assert gradcheck(fn, (A, x)) and gradgradcheck(fn, (A, x))


def test_gaussian_likelihood_matches_pytorch_as_inputs_change():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(2)
    for batch, n in [((200,), 3), ((200,), 3), ((10, 4), 2), ((50,), 8)]:  # new values, then new shapes
        a, x = _spd(rng, batch, n, np.float64), rng.standard_normal(batch + (n, 2))
        got = []
        for lib in (jg, torch):
            A, X = lib.tensor(a, requires_grad=True), lib.tensor(x, requires_grad=True)
            nll = _gaussian_nll(lib, A, X)
            nll.sum().backward()
            got.append([t.detach().numpy() for t in (nll, A.grad, X.grad)])
        for mine, theirs in zip(*got):
            np.testing.assert_allclose(mine, theirs, rtol=1e-10, atol=1e-10)
