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


# products of at least SMALL_GEMM multiply-adds, for blocks on numba's threads (kernels/blas.py split_gemm): rows, columns, a batch
SPLIT = [((300, 80), (80, 90)), ((40, 30), (30, 8000)), ((40, 64, 32), (40, 32, 64)), ((2, 260, 16), (2, 16, 300))]


@pytest.fixture(scope="module")
def blocks_built():
    """The parallel build of the blocks in the cache (on an empty cache it compiles in the background, NumPy's
    GEMM running meanwhile)."""
    from jitgrad.kernels import _background, blas
    blas.precompile(("float32", "float64"))
    assert _background.wait(600)


def _layouts(x):
    """x C-contiguous, as the transposed view of a copy (unit stride down the columns), and padded rows."""
    pad = [(0, 0)] * (x.ndim - 1) + [(0, 3)]
    return [x, np.ascontiguousarray(x.swapaxes(-1, -2)).swapaxes(-1, -2), np.pad(x, pad)[..., :x.shape[-1]]]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("sa,sb", SPLIT)
def test_blocks_on_numba_threads_match_numpy(sa, sb, dtype, monkeypatch, blocks_built):
    from jitgrad.kernels import blas, config
    rng = np.random.default_rng(2)
    a0, b0 = (rng.standard_normal(s).astype(dtype) for s in (sa, sb))
    calls = []
    real = blas.split_gemm
    monkeypatch.setattr(blas, "split_gemm", lambda *args: calls.append(1) or real(*args))
    tol = 1e-4 if dtype == np.float32 else 1e-12
    for a in _layouts(a0):
        for b in _layouts(b0):
            got = cpu.matmul(a, b)
            assert got.dtype == dtype and got.flags.c_contiguous
            np.testing.assert_allclose(got, np.matmul(a, b), rtol=tol, atol=tol)
    if config.SPLIT_GEMM and config.OPENBLAS_THREADS is not None and blas.GEMM is not None:
        assert len(calls) == 9 and real(a0, b0) is not None


def test_blocks_do_not_depend_on_the_thread_count(blocks_built):
    """The blocks are fixed in size, so the values are the same bits on one thread or several (OpenBLAS's own
    split of a float32 GEMM over its threads changes the last bits)."""
    import numba
    from jitgrad.kernels import blas
    if blas.GEMM is None:
        pytest.skip("NumPy's BLAS is not a 64-bit-integer OpenBLAS")
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((520, 96)).astype(np.float32), rng.standard_normal((96, 200)).astype(np.float32)
    many = blas.split_gemm(a, b)
    prev = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        one = blas.split_gemm(a, b)
    finally:
        numba.set_num_threads(prev)
    np.testing.assert_array_equal(many, one)
    np.testing.assert_allclose(many, a @ b, rtol=1e-4, atol=1e-4)


def test_blocks_leave_what_they_cannot_take_to_numpy(blocks_built):
    from jitgrad.kernels import blas
    rng = np.random.default_rng(4)
    a = rng.standard_normal((300, 40))
    assert blas.split_gemm(a, rng.standard_normal((40, 90)).astype(np.float32)) is None  # two dtypes
    assert blas.split_gemm(a[::2], rng.standard_normal((40, 90))) is None or blas.GEMM is None  # rows of stride 2: fine
    assert blas.split_gemm(a[:, ::2], rng.standard_normal((20, 90))) is None  # no unit stride
    assert blas.split_gemm(a[:100], rng.standard_normal((40, 90))) is None  # one block
    assert blas.split_gemm(a.astype(np.int64), rng.standard_normal((40, 90)).astype(np.int64)) is None


def test_blocks_into_a_given_output(blocks_built):
    """blas.matmul(a, b, out) (the convolutions' GEMMs): the blocks write into a C-contiguous ``out``; another
    layout of ``out`` goes to NumPy's matmul, which writes it."""
    from jitgrad.kernels import blas
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((3, 100, 70)), rng.standard_normal((3, 70, 400))
    for out in (np.empty((3, 100, 400)), np.empty((3, 400, 100)).swapaxes(1, 2)):
        got = blas.matmul(a, b, out)
        assert got is out
        np.testing.assert_allclose(out, a @ b, rtol=1e-12)
    assert blas.split_gemm(a, b, np.empty((3, 100, 400))) is not None
    assert blas.split_gemm(a, b, np.empty((3, 400, 100)).swapaxes(1, 2)) is None
