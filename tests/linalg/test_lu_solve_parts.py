"""One system's right-hand sides solved in parts on numba's threads (kernels/linalg.py, ``lu_solve``): the same
bits as one getrs call over all of them (OpenBLAS's trsm works them in fours, the parts are multiples of four),
both transposes and dtypes, ragged last parts; which problems split; and solve / lu_solve with gradients through it."""
import numba
import numpy as np
import pytest
import scipy.linalg as sl

import jitgrad as jg
from jitgrad.kernels import config
from jitgrad.kernels import linalg as K

pytestmark = pytest.mark.skipif(config.lapack_threads() is None or numba.config.NUMBA_NUM_THREADS < 2,
                                reason="the parts run on two of numba's threads with SciPy's OpenBLAS on one")


def _system(n, k, dtype, seed=0):
    rng = np.random.default_rng(seed)
    a = (rng.standard_normal((n, n)) + np.sqrt(n) * np.eye(n)).astype(dtype)
    return a, rng.standard_normal((n, k)).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("k", [8, 10, 12, 16, 27])
@pytest.mark.parametrize("adjoint", [False, True])
def test_parts_give_the_bits_of_one_call(k, adjoint, dtype):
    a, b = _system(200, k, dtype)
    lu, piv, _ = K.lu_factor(a)
    assert K._rhs_width(200, K._col(b)) < k  # (this problem splits)
    got = K.lu_solve(lu, piv, b, adjoint)
    ref = sl.lu_solve((np.asarray(lu), np.asarray(piv) - 1), b, trans=1 if adjoint else 0, check_finite=False)
    np.testing.assert_array_equal(got, ref)
    threads = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        one = K.lu_solve(lu, piv, b, adjoint)  # (one thread: no parts)
    finally:
        numba.set_num_threads(threads)
    np.testing.assert_array_equal(got, one)


def test_which_problems_split():
    x = lambda batch, k, n: np.empty((batch, k, n))  # noqa: E731  (as _col lays right-hand sides out)
    assert K._rhs_width(256, x(1, 8, 256)) == 4
    assert K._rhs_width(256, x(1, 12, 256)) == 8  # (ceil(12 / 2) rounded up to a multiple of 4)
    assert K._rhs_width(256, x(1, 7, 256)) == 7  # too few right-hand sides
    assert K._rhs_width(256, x(2, 8, 256)) == 8  # a batch: parallel over its systems already
    assert K._rhs_width(32, x(1, 8, 32)) == 8  # too little work
    assert K._rhs_width(1024, x(1, 8, 1024)) == 8  # SMALL_GEMM's work or more: OpenBLAS's own threads


def test_solve_and_lu_solve_with_gradients_through_the_parts():
    a, b = _system(256, 8, np.float64, seed=3)
    A, B = jg.tensor(a, requires_grad=True), jg.tensor(b, requires_grad=True)
    X = jg.linalg.solve(A, B)
    (X * X).sum().backward()
    x = np.linalg.solve(a, b)
    gb = np.linalg.solve(a.T, 2 * x)
    np.testing.assert_allclose(X.detach().numpy(), x, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(B.grad.numpy(), gb, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(A.grad.numpy(), -gb @ x.T, rtol=1e-10, atol=1e-12)
    LU, piv = jg.linalg.lu_factor(jg.tensor(a))
    for adjoint in (False, True):
        got = jg.linalg.lu_solve(LU, piv, jg.tensor(b), adjoint=adjoint).numpy()
        np.testing.assert_allclose(got, np.linalg.solve(a.T if adjoint else a, b), rtol=1e-10, atol=1e-12)
