"""The CPU kernels' LAPACK calls (SciPy's LAPACK through its Cython function pointers) against NumPy/SciPy: LU with
its int32 pivots, the infos of singular and indefinite matrices, solve, inverse, Cholesky and its gradient, eigh, SVD,
QR, lstsq drivers, in float32 and float64, batched."""
import numpy as np
import pytest

from jitgrad.kernels import linalg as K

CHECKS = r'''
import numpy as np, scipy.linalg as sl, jitgrad as jg
from jitgrad.kernels import linalg as K

rng = np.random.default_rng(5)
for dt, tol in ((np.float32, 2e-4), (np.float64, 1e-10)):
    a = (rng.standard_normal((3, 9, 9)) + 4 * np.eye(9)).astype(dt)
    b = rng.standard_normal((3, 9, 2)).astype(dt)
    close = lambda x, y: np.testing.assert_allclose(x, y, rtol=tol, atol=tol)
    lu, piv, info = K.lu_factor(a)
    assert piv.dtype == np.int32 and info.dtype == np.int32 and not info.any()
    ref = sl.lu_factor(a[1].astype(np.float64))
    close(lu[1], ref[0]); assert (piv[1] == ref[1] + 1).all()
    close(K.lu_solve(lu, piv, b, False), np.linalg.solve(a, b))
    close(K.lu_solve(lu, piv, b, True), np.linalg.solve(np.swapaxes(a, -1, -2), b))
    x, _, _, info = K.solve(a, b); close(x, np.linalg.solve(a, b)); assert not info.any()
    close(K.inv(a + 0 * np.eye(9, dtype=dt)[None])[0], np.linalg.inv(a))
    s = a @ np.swapaxes(a, -1, -2) + 9 * np.eye(9, dtype=dt)
    l, info = K.cholesky(s, False); close(l, np.linalg.cholesky(s)); assert not info.any()
    w, v = K.eigh(s, True, True); close(w, np.linalg.eigvalsh(s)); close(v @ (w[..., None] * np.swapaxes(v, -1, -2)), s)
    u, sv, vh = K.svd(a, False, True); close(sv, np.linalg.svd(a, compute_uv=False)); close((u * sv[..., None, :]) @ vh, a)
    q, r = K.qr(a, "reduced"); close(q @ r, a)
    for driver in K.DRIVERS:
        close(K.lstsq(a, b, 1e-6, driver)[0], np.linalg.solve(a, b))
    singular = np.ones((2, 4, 4), dt)
    assert (K.lu_factor(singular)[2] == 2).all() and (K.inv(singular)[1] == 2).all()
    indefinite = np.diag(np.array([1, 2, -1, 3], dt))
    assert K.cholesky(indefinite, False)[1] == 3
    S = jg.tensor(s.astype(np.float64), requires_grad=True)
    jg.linalg.cholesky(S).sum().backward()
    L = np.linalg.cholesky(s.astype(np.float64))
    phi = np.tril(np.swapaxes(L, -1, -2) @ np.tril(np.ones((9, 9))))
    phi = (phi + np.swapaxes(np.tril(phi, -1), -1, -2)) * 0.5
    Linv = np.linalg.inv(L)
    np.testing.assert_allclose(S.grad.numpy(), np.swapaxes(Linv, -1, -2) @ phi @ Linv, rtol=1e-8, atol=1e-10)
'''


def test_lapack_kernels_match_numpy():
    namespace = {}
    exec(CHECKS, namespace)


def test_cholesky_gradient_comes_back_row_major():
    m = np.random.default_rng(0).standard_normal((2, 6, 6))
    l = np.linalg.cholesky(m @ np.swapaxes(m, -1, -2) + 6 * np.eye(6))
    g = K.cholesky_grad(l, np.tril(np.ones((2, 6, 6))), False)
    assert g.flags.c_contiguous and g.shape == (2, 6, 6)
