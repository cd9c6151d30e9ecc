"""The CPU matmul kernel's layouts that skip NumPy's batched matmul (a batch of matrices times one matrix, an
expanded matrix, batched outer products) give NumPy's values, for every dtype and shape the ops pass it."""
import numpy as np
import pytest

from jitgrad.kernels import cpu

CASES = [((5, 7, 1), (5, 1, 3)), ((5, 3, 4), (4, 2)), ((2, 5, 3, 4), (4, 2)), ((0, 3, 4), (4, 2)),
         ((3, 4, 0), (0, 2)), ((4, 3, 1), (1, 1, 5)), ((1, 3, 4), (4, 2)), ((6, 1, 784), (784, 128))]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.complex128])
@pytest.mark.parametrize("sa,sb", CASES)
def test_matches_numpy(sa, sb, dtype):
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal(s).astype(dtype) for s in (sa, sb))
    got, want = cpu.matmul(a, b), np.matmul(a, b)
    assert got.shape == want.shape and got.dtype == want.dtype
    tol = 1e-3 if dtype == np.float32 else 1e-10  # (float32 sums of 784 terms in another order)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def test_expanded_matrix_and_large_outer_products():
    rng = np.random.default_rng(1)
    a, w = rng.standard_normal((6, 2, 4)), rng.standard_normal((4, 3))
    np.testing.assert_allclose(cpu.matmul(a, np.broadcast_to(w, (6, 4, 3))), np.matmul(a, w), rtol=1e-12)
    c, v = rng.standard_normal((6, 3, 2)), rng.standard_normal((2, 5))
    np.testing.assert_allclose(cpu.matmul(c, np.broadcast_to(v, (6, 2, 5))), np.matmul(c, v), rtol=1e-12)
    x, y = rng.standard_normal((64, 300, 1)), rng.standard_normal((64, 1, 40))  # (the parallel build's size)
    np.testing.assert_allclose(cpu.matmul(x, y), x * y, rtol=1e-12)
