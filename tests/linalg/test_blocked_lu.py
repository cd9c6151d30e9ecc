"""The LU of one large matrix on numba's threads (kernels/lu.py) against SciPy's getrf: the same pivots, P L U = A,
getrf's info for singular matrices, tall, wide and panel-ragged shapes, both panel widths, float32 and float64,
the same bits on one thread or two; and that linalg's LU, solve and det of a large matrix run through it."""
import numba
import numpy as np
import pytest
import scipy.linalg as sl

import jitgrad as jg
from jitgrad.kernels import config, lu
from jitgrad.kernels import linalg as K


@pytest.fixture(scope="module")
def lu_built():
    """The parallel build in the cache (on an empty cache it compiles in the background, getrf running meanwhile)."""
    from jitgrad.kernels import _background
    lu.precompile(("float32", "float64"))
    assert _background.wait(600)


def _factor(a):
    """The blocked LU of ``a`` (m x n) as (LU m x n, 1-based pivots, info), SciPy's OpenBLAS on one thread."""
    f = np.ascontiguousarray(a.T)[None].copy()
    piv, info = np.zeros((1, min(a.shape)), np.int32), np.zeros(1, np.int32)
    threads = config.lapack_threads()
    assert threads is not None
    assert config.on_one_thread(threads, lu.factor, f, piv, info)
    return f[0].T, piv[0], info[0]


def _plu(lu_, piv):
    m, n = lu_.shape
    k = min(m, n)
    low, up = np.tril(lu_[:, :k], -1) + np.eye(m, k), np.triu(lu_[:k])
    perm = np.arange(m)
    for i, p in enumerate(piv - 1):
        perm[[i, p]] = perm[[p, i]]
    out = np.empty((m, n))
    out[perm] = low.astype(np.float64) @ up.astype(np.float64)
    return out


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(256, 256), (300, 270), (270, 300), (517, 517), (640, 520), (520, 700)])
def test_blocked_lu_matches_getrf(shape, dtype, lu_built):
    if config.lapack_threads() is None:
        pytest.skip("SciPy's LAPACK is not an OpenBLAS")
    rng = np.random.default_rng(sum(shape))
    a = rng.standard_normal(shape).astype(dtype)
    got, piv, info = _factor(a)
    ref, ref_piv, ref_info = sl.get_lapack_funcs("getrf", (a,))(np.asfortranarray(a))
    assert (piv == ref_piv + 1).all() and info == ref_info == 0
    tol = 2e-3 if dtype == np.float32 else 1e-10
    np.testing.assert_allclose(got, ref, rtol=tol, atol=tol)
    np.testing.assert_allclose(_plu(got, piv), a, rtol=tol, atol=tol)


@pytest.mark.parametrize("zero", [3, 40, 200, 299])
def test_blocked_lu_names_the_first_zero_pivot(zero, lu_built):
    """info as getrf's: the first zero diagonal element of U (1-based), the factorization completed past it."""
    if config.lapack_threads() is None:
        pytest.skip("SciPy's LAPACK is not an OpenBLAS")
    rng = np.random.default_rng(zero)
    a = rng.standard_normal((300, 300))
    a[:, zero] = a[:, 280] = 0  # (a zero column stays zero through the elimination: an exact zero pivot)
    got, piv, info = _factor(a)
    ref, ref_piv, ref_info = sl.get_lapack_funcs("getrf", (a,))(np.asfortranarray(a))
    assert info == ref_info == min(zero, 280) + 1
    assert (piv == ref_piv + 1).all()
    np.testing.assert_allclose(_plu(got, piv), a, atol=1e-9)


def test_blocked_lu_does_not_depend_on_the_thread_count(lu_built):
    if config.lapack_threads() is None:
        pytest.skip("SciPy's LAPACK is not an OpenBLAS")
    a = np.random.default_rng(7).standard_normal((600, 600)).astype(np.float32)
    many = _factor(a)
    prev = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        one = _factor(a)
    finally:
        numba.set_num_threads(prev)
    assert all(np.array_equal(x, y) for x, y in zip(many, one))


def test_large_lu_solve_and_det_run_blocked(monkeypatch, lu_built):
    """linalg.lu_factor, solve and det of one large matrix take the blocked LU; a batch and a small matrix keep
    getrf's loop. Values against NumPy/SciPy, gradients against the formulas."""
    if config.lapack_threads() is None:
        pytest.skip("SciPy's LAPACK is not an OpenBLAS")
    calls = []
    real = lu.factor
    monkeypatch.setattr(lu, "factor", lambda *args: calls.append(args[0].shape) or real(*args))
    rng = np.random.default_rng(8)
    a = rng.standard_normal((300, 300)) + 10 * np.eye(300)
    b = rng.standard_normal((300, 4))
    LU, piv = jg.linalg.lu_factor(jg.tensor(a))
    ref = sl.lu_factor(a)
    np.testing.assert_allclose(LU.numpy(), ref[0], atol=1e-10)
    assert (piv.numpy() == ref[1] + 1).all()
    A, B = jg.tensor(a, requires_grad=True), jg.tensor(b, requires_grad=True)
    X = jg.linalg.solve(A, B)
    np.testing.assert_allclose(X.detach().numpy(), np.linalg.solve(a, b), rtol=1e-10, atol=1e-12)
    X.sum().backward()
    gB = np.linalg.solve(a.T, np.ones_like(b))
    np.testing.assert_allclose(B.grad.numpy(), gB, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(A.grad.numpy(), -gB @ np.linalg.solve(a, b).T, rtol=1e-10, atol=1e-12)
    sign, logdet = jg.linalg.slogdet(jg.tensor(a))
    ref_sign, ref_logdet = np.linalg.slogdet(a)
    assert sign.item() == ref_sign and abs(logdet.item() - ref_logdet) < 1e-9
    assert len(calls) == 3 and all(s == (1, 300, 300) for s in calls)
    K.lu_factor(rng.standard_normal((2, 300, 300)))  # (a batch: getrf per matrix)
    K.lu_factor(rng.standard_normal((200, 200)))
    assert len(calls) == 3
