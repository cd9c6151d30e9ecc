"""The fast paths of jitgrad.linalg against NumPy/SciPy and finite differences: solve through the LU of A^T (its
info still getrf's on A), the direct 2x2/3x3 gradients (det's cofactors at a singular matrix), cholesky_solve's
thin-product gradient, cdist's matrix-product form (_euclidean_dist) and the Cholesky gradient's one-buffer path,
batched and upper."""
import numpy as np
import pytest
import scipy.linalg as sl

import jitgrad as jg
from jitgrad.autograd import gradcheck

RNG = np.random.default_rng(3)


def t(a, grad=False):
    return jg.tensor(np.asarray(a, np.float64), requires_grad=grad)


def test_solve_info_names_getrf_pivot_of_A():
    a = np.array([[1.0, 2, 3, 4], [2, 4, 6, 8], [1, 0, 1, 0], [0, 1, 0, 2]])  # getrf: U[4,4] = 0 (A^T's: U[2,2])
    assert sl.lapack.dgetrf(a)[2] == 4 and sl.lapack.dgetrf(a.T.copy())[2] == 2
    assert jg.linalg.solve_ex(t(a), t(np.ones(4))).info.item() == 4
    with pytest.raises(jg.linalg.LinAlgError, match="singular"):
        jg.linalg.solve(t(a), t(np.ones(4)))


@pytest.mark.parametrize("rhs", [(8, 3), (8,)])
def test_solve_gradients_match_numpy(rhs):
    a, b = RNG.standard_normal((8, 8)) + 4 * np.eye(8), RNG.standard_normal(rhs)
    A, B = t(a, True), t(b, True)
    jg.linalg.solve(A, B).sum().backward()
    gB = np.linalg.solve(a.T, np.ones(rhs))
    x = np.linalg.solve(a, b)
    gA = -np.outer(gB, x) if len(rhs) == 1 else -gB @ x.T
    np.testing.assert_allclose(B.grad.numpy(), gB, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(A.grad.numpy(), gA, rtol=1e-10, atol=1e-12)


def test_solve_only_B_needs_grad():
    a, b = RNG.standard_normal((6, 6)) + 4 * np.eye(6), RNG.standard_normal((6, 2))
    B = t(b, True)
    jg.linalg.solve(t(a), B).sum().backward()
    np.testing.assert_allclose(B.grad.numpy(), np.linalg.solve(a.T, np.ones((6, 2))), rtol=1e-10)


@pytest.mark.parametrize("n", [2, 3])
def test_small_batches_gradients(n):
    a = RNG.standard_normal((50, n, n)) + 3 * np.eye(n)
    b = RNG.standard_normal((50, n, 1))
    A, B = t(a, True), t(b, True)
    (jg.linalg.solve(A, B).sum() + jg.linalg.inv(A).sum() + jg.linalg.det(A).sum()).backward()
    inv = np.linalg.inv(a)
    ones = np.ones((50, n, 1))
    gB = np.swapaxes(inv, -1, -2) @ ones
    x = inv @ b
    g_solve = -gB @ np.swapaxes(x, -1, -2)
    g_inv = -np.swapaxes(inv, -1, -2) @ np.ones((50, n, n)) @ np.swapaxes(inv, -1, -2)
    g_det = np.linalg.det(a)[:, None, None] * np.swapaxes(inv, -1, -2)
    np.testing.assert_allclose(A.grad.numpy(), g_solve + g_inv + g_det, rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(B.grad.numpy(), gB, rtol=1e-10)


def test_det_gradient_at_a_singular_3x3_is_the_cofactor_matrix():
    a = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]])
    A = t(a, True)
    jg.linalg.det(A).backward()
    cof = np.array([[(a[(i + 1) % 3, (j + 1) % 3] * a[(i + 2) % 3, (j + 2) % 3]
                      - a[(i + 1) % 3, (j + 2) % 3] * a[(i + 2) % 3, (j + 1) % 3]) for j in range(3)] for i in range(3)])
    np.testing.assert_allclose(A.grad.numpy(), cof, atol=1e-12)


@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_solve_thin_and_square_gradients(upper):
    n = 12
    m = RNG.standard_normal((2, n, n))
    l = np.linalg.cholesky(m @ np.swapaxes(m, -1, -2) + n * np.eye(n))
    f = np.swapaxes(l, -1, -2).copy() if upper else l
    for k in (1, n):  # (1 column: the thin products; n: the n x n one)
        B, F = t(RNG.standard_normal((n, k)), True), t(f, True)
        fn = (lambda b, c: jg.cholesky_solve(b, c.triu() if upper else c.tril(), upper=upper))
        assert gradcheck(fn, (B, F))
        x = jg.cholesky_solve(B, F, upper=upper)
        ref = np.linalg.solve(l @ np.swapaxes(l, -1, -2), B.detach().numpy())
        np.testing.assert_allclose(x.detach().numpy(), ref, rtol=1e-10)


@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_gradient_batched(upper):
    m = RNG.standard_normal((3, 7, 7))
    a = m @ np.swapaxes(m, -1, -2) + 7 * np.eye(7)
    A = t(a, True)
    assert gradcheck(lambda x: jg.linalg.cholesky((x + x.mT) * 0.5, upper=upper), (A,))
    L = jg.linalg.cholesky(A, upper=upper)
    np.testing.assert_allclose(L.detach().numpy(), np.linalg.cholesky(a) if not upper
                               else np.swapaxes(np.linalg.cholesky(a), -1, -2), rtol=1e-12, atol=1e-12)


def test_cdist_matrix_product_form():
    x, y = RNG.standard_normal((30, 3)), RNG.standard_normal((2, 27, 3))
    X, Y = t(x, True), t(y, True)
    d = jg.cdist(X, Y)
    assert type(d.grad_fn).__name__ == "EuclideanDistBackward0"
    ref = np.sqrt(((x[None, :, None, :] - y[:, None, :, :]) ** 2).sum(-1))
    np.testing.assert_allclose(d.detach().numpy(), ref, rtol=1e-10)
    assert gradcheck(lambda a, b: jg.cdist(a, b), (X, Y))
    small = jg.cdist(X[:5], Y[0, :5])  # 25 rows or fewer: the norm of differences, as PyTorch
    assert type(small.grad_fn).__name__ != "EuclideanDistBackward0"
    np.testing.assert_allclose(small.detach().numpy(), ref[0, :5, :5], rtol=1e-12)


def test_cdist_zero_distance_takes_subgradient_zero():
    x = RNG.standard_normal((30, 2))
    X = t(x, True)
    jg.cdist(X, X).sum().backward()
    assert np.isfinite(X.grad.numpy()).all()


def test_lapack_threads_one_for_small_factorizations_and_products(monkeypatch):
    """Factorizations up to order SMALL_LAPACK, triangular solves under SMALL_GEMM multiply-adds and batches run
    on one thread of SciPy's OpenBLAS, the count restored after; larger single problems keep OpenBLAS's."""
    from jitgrad.kernels import config, linalg as KL
    threads = [2]
    calls = []

    def put(n):
        calls.append(n)
        threads[0] = n
    monkeypatch.setattr(config, "lapack_threads", lambda: (lambda: threads[0], put))
    monkeypatch.setattr(config, "SMALL_LAPACK", 16)
    spd = lambda n: np.eye(n) * n + RNG.standard_normal((n, n)) * 0.1  # noqa: E731
    a = spd(16)
    np.testing.assert_allclose(KL.cholesky(a + a.T, False)[0], np.linalg.cholesky(a + a.T), rtol=1e-12)
    assert calls == [1, 2]
    calls.clear()
    b = spd(17)
    KL.cholesky(b + b.T, False)  # order 17 > 16: OpenBLAS chooses
    assert calls == []
    KL.lu_factor(np.stack([b, b]))  # a batch: one thread each, numba's threads run them
    assert calls == [1, 2]
    calls.clear()
    L = np.tril(spd(64))
    x = RNG.standard_normal((64, 3))
    np.testing.assert_allclose(KL.solve_triangular(L, x, False, True, False), sl.solve_triangular(L, x, lower=True),
                               rtol=1e-10)
    assert calls == [1, 2]  # 64 * 64 * 3 multiply-adds < SMALL_GEMM, though 64 > SMALL_LAPACK
    calls.clear()
    monkeypatch.setattr(config, "SMALL_GEMM", 64 * 64 * 3)
    KL.solve_triangular(L, x, False, True, False)
    assert calls == [] and threads[0] == 2
