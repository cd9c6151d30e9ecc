"""Tiled copies of transposed matrices (kernels/layout_copy.py): what takes them, their values in every transposable
dtype, ragged tile edges and batches, serial and parallel builds; and the ops that go through them (elementwise ops
of transposed operands, contiguous, clone, LAPACK's column-major copies) against NumPy."""
import numpy as np
import pytest

import jitgrad as jg
from jitgrad.kernels import _background, layout_copy


@pytest.fixture(scope="module")
def built():
    """Both builds of the copy in the cache (the parallel one compiles in the background on an empty cache)."""
    a = np.ones((1, layout_copy.PARALLEL // 64, 64))
    layout_copy.into(a, np.empty((1, 64, a.shape[1])))
    assert _background.wait(600)


@pytest.mark.parametrize("dtype", sorted(layout_copy.TRANSPOSABLE, key=str))
@pytest.mark.parametrize("shape", [(64, 64), (3, 70, 91), (2, 1, 130, 67), (520, 517)])
def test_copy_of_a_transposed_batch(shape, dtype, built):
    rng = np.random.default_rng(len(shape))
    x = rng.standard_normal(shape[:-2] + shape[-1:] + shape[-2:-1])
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(x.shape)
    x = x.astype(dtype).swapaxes(-1, -2)  # (a batch of transposed C-contiguous matrices)
    assert layout_copy.transposed(x)
    got = layout_copy.copy(x)
    assert got.flags.c_contiguous and got.dtype == dtype and np.array_equal(got, x)
    assert np.array_equal(layout_copy.flat(x), x.reshape(-1))


def test_what_is_not_a_transposed_batch_takes_numpys_copy():
    x = np.arange(80 * 80.0).reshape(80, 80)
    small = np.ones((8, 8)).T
    assert not layout_copy.transposed(x)  # (C-contiguous already)
    assert not layout_copy.transposed(x[::2].T)  # (strided rows)
    assert not layout_copy.transposed(small)  # (in cache: NumPy's copy)
    assert not layout_copy.transposed(x.astype(np.int64).T)
    for a in (x, x[::2].T, small, x.astype(np.int64).T):
        got = layout_copy.copy(a)
        assert got.flags.c_contiguous and np.array_equal(got, a) and not np.shares_memory(got, a)
    assert np.shares_memory(layout_copy.flat(x), x)


@pytest.mark.parametrize("n", [96, 600])
def test_ops_of_transposed_operands(n, built):
    """Elementwise ops with transposed operands (the gradients of x.mT @ x, of .mT in a graph), contiguous and
    clone: NumPy's values, C-contiguous results, the inputs unchanged."""
    rng = np.random.default_rng(n)
    a, b = rng.standard_normal((n, n)), rng.standard_normal((n, n))
    A, B = jg.tensor(a), jg.tensor(b)
    np.testing.assert_array_equal((A + B.mT).numpy(), a + b.T)
    np.testing.assert_array_equal((A.mT - B).numpy(), a.T - b)
    np.testing.assert_array_equal((A.mT * B.mT).numpy(), a.T * b.T)
    np.testing.assert_allclose(A.mT.exp().numpy(), np.exp(a.T), rtol=1e-15)
    np.testing.assert_array_equal((A.mT * 2.5).numpy(), a.T * 2.5)
    for t in (A.mT.contiguous(), A.mT.clone(memory_format=jg.contiguous_format)):
        assert t.is_contiguous() and np.array_equal(t.numpy(), a.T)
    C = jg.tensor(a.copy())
    C += B.mT  # (in place: the accumulation of a transposed gradient)
    np.testing.assert_array_equal(C.numpy(), a + b.T)
    np.testing.assert_array_equal(A.numpy(), a)
    np.testing.assert_array_equal(B.numpy(), b)
    X = jg.tensor(a, requires_grad=True)
    (X.mT @ X).sum().backward()  # (x.mT's gradient arrives transposed, added to x's own)
    ones = np.ones((n, n))
    np.testing.assert_allclose(X.grad.numpy(), a @ ones.T + a @ ones, rtol=1e-12, atol=1e-9)
