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


def _cholesky_grad_reference(L, gL):
    """PyTorch's formula in NumPy: L^-T Phi L^-1, Phi = tril(L^T gL) made symmetric with its diagonal halved."""
    phi = np.tril(np.swapaxes(L, -1, -2) @ gL)
    phi = (phi + np.swapaxes(np.tril(phi, -1), -1, -2)) * 0.5
    Linv = np.linalg.inv(L)
    return np.swapaxes(Linv, -1, -2) @ phi @ Linv


@pytest.mark.parametrize("n, batch, upper", [(150, (), False), (150, (2,), True), (64, (), False), (65, (), True)])
def test_blocked_cholesky_gradient_matches_the_formula(n, batch, upper):
    """Orders of several blocks (CHOLESKY_GRAD_BLOCK) and at its edges: the blocked triangle of L^T gL and the blocked
    solve of the result's lower triangle give the formula's values, exactly symmetric."""
    rng = np.random.default_rng(1)
    m = rng.standard_normal(batch + (n, n))
    L = np.linalg.cholesky(m @ np.swapaxes(m, -1, -2) / n + np.eye(n))
    gL = rng.standard_normal(batch + (n, n))
    ref = _cholesky_grad_reference(L, gL)
    factor, grad = (np.swapaxes(L, -1, -2), np.swapaxes(gL, -1, -2)) if upper else (L, gL)
    for g in (np.ascontiguousarray(grad), np.asfortranarray(grad)):
        out = K.cholesky_grad(np.asfortranarray(factor), g, upper)
        np.testing.assert_allclose(out, (ref + np.swapaxes(ref, -1, -2)) / 2, rtol=1e-9, atol=1e-11)
        assert (out == np.swapaxes(out, -1, -2)).all()


@pytest.mark.parametrize("n, batch", [(1, ()), (9, (3,)), (130, ())])
def test_eigh_gradient_kernels_match_the_formula(n, batch):
    """eigh_grad (V M V^T by trmm and syr2k) and eigvalsh_grad (two syrk of V's columns scaled by sqrt|gL|, gL of
    both signs) against V (skew(V^T gV) / E + diag(gL)) V^T in NumPy."""
    rng = np.random.default_rng(2)
    m = rng.standard_normal(batch + (n, n))
    w, v = K.eigh(m + np.swapaxes(m, -1, -2), True, True)
    gw, gv = rng.standard_normal(batch + (n,)), rng.standard_normal(batch + (n, n))
    vt = np.swapaxes(v, -1, -2)
    vhgv = vt @ gv
    skew = (vhgv - np.swapaxes(vhgv, -1, -2)) * 0.5
    E = w[..., None, :] - w[..., :, None] + np.eye(n)
    mid = skew / E + gw[..., None] * np.eye(n)
    np.testing.assert_allclose(K.eigh_grad(v, vhgv, w, gw), v @ mid @ vt, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(K.eigvalsh_grad(v, gw), (v * gw[..., None, :]) @ vt, rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("dtype, tol", [(np.float32, 1e-4), (np.float64, 1e-12)])
def test_eigh_gradient_kernels_run_on_numpys_openblas(monkeypatch, dtype, tol):
    """The BLAS-3 products of eigh's gradient kernels are NumPy's OpenBLAS's where NumPy has one (its integers are
    64-bit in NumPy's wheels): a batch or a matrix of order up to SMALL_LAPACK runs them on one thread of it (as
    factorizations run on one of SciPy's, which eigh itself keeps); results as the formula's, exactly symmetric."""
    from jitgrad.kernels import config
    if config.OPENBLAS is None:
        pytest.skip("NumPy is not linked to OpenBLAS")
    assert K._numpy_routines(np.dtype(dtype), ("syrk", "syr2k", "trmm")) is not None
    calls, lapack_calls = [], []
    monkeypatch.setattr(config, "lapack_threads", lambda package="scipy": (
        lambda: 2, (calls if package == "numpy" else lapack_calls).append))
    rng = np.random.default_rng(3)
    m = rng.standard_normal((2, 40, 40))
    w, v = np.linalg.eigh(m + np.swapaxes(m, -1, -2))
    w, v = w.astype(dtype), np.asfortranarray(v.astype(dtype))
    gw = rng.standard_normal((2, 40)).astype(dtype)
    vhgv = rng.standard_normal((2, 40, 40)).astype(dtype)
    got = K.eigvalsh_grad(v, gw)
    assert calls == [1, 2] and not lapack_calls and got.dtype == dtype
    np.testing.assert_allclose(got, (v * gw[..., None, :]) @ np.swapaxes(v, -1, -2), rtol=tol, atol=tol)
    assert (got == np.swapaxes(got, -1, -2)).all()
    got = K.eigh_grad(v[0], vhgv[0], w[0], gw[0])  # one matrix of order 40: one thread
    skew = (vhgv[0] - vhgv[0].T) * 0.5
    mid = skew / (w[0][None, :] - w[0][:, None] + np.eye(40, dtype=dtype)) + np.diag(gw[0])
    np.testing.assert_allclose(got, v[0] @ mid @ v[0].T, rtol=tol * 10, atol=tol * 10)
    assert calls == [1, 2, 1, 2] and not lapack_calls and (got == got.T).all()
    calls.clear()
    K.eigh(m.astype(dtype), True, True)  # (syevd, a batch: SciPy's)
    assert not calls and lapack_calls == [1, 2]


@pytest.mark.parametrize("lower", [True, False])
def test_eigh_of_a_row_major_input_as_it_lies(lower):
    """eigh(..., transposed=True) (eigvalsh's forward) hands a row-major real input to syevd without transposing it,
    reading the other triangle of A^T: the same symmetric matrix (the triangle ``lower`` names), whose eigenvalues
    and V diag(w) V^T match, batched too; a column-major input takes the usual path."""
    rng = np.random.default_rng(4)
    a = rng.standard_normal((2, 70, 70))  # (not symmetric: one triangle is read)
    tri = np.tril(a) if lower else np.triu(a)
    sym = tri + np.swapaxes(tri, -1, -2) - np.diagonal(a, 0, -2, -1)[..., None] * np.eye(70)
    for x in (a, np.asfortranarray(a[0])):
        w, v = K.eigh(x, lower, True, True)
        ref = sym if x.ndim == 3 else sym[0]
        np.testing.assert_allclose(w, np.linalg.eigvalsh(ref), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose((v * w[..., None, :]) @ np.swapaxes(v, -1, -2), ref, rtol=1e-11, atol=1e-11)
        np.testing.assert_allclose(K.eigh(x, lower, False, True)[0], w, rtol=1e-13, atol=1e-13)
