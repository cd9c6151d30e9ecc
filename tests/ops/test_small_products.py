"""Batches of products of matrices of at most 3 rows, columns and inner size by direct code (kernels/cpu.py,
``_small_products``) against NumPy: shapes around the limit, layouts, dtypes, an expanded batch, and gradients
through bmm / matmul."""
import numpy as np
import pytest

import jitgrad as jg
from jitgrad.autograd import gradcheck
from jitgrad.kernels import cpu


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shapes", [((5000, 3, 3), (5000, 3, 3)), ((5000, 2, 3), (5000, 3, 1)), ((7, 1, 2), (7, 2, 3)),
                                    ((5000, 3, 4), (5000, 4, 3)), ((5000, 4, 3), (5000, 3, 3)), ((2, 3, 0), (2, 0, 2))])
def test_products_match_numpy(shapes, dtype):
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal(s).astype(dtype) for s in shapes)
    got = cpu.matmul(a, b)
    assert got.dtype == dtype and got.shape == np.matmul(a, b).shape
    np.testing.assert_allclose(got, np.matmul(a, b), rtol=1e-5 if dtype == np.float32 else 1e-13, atol=1e-6)


def test_products_of_strided_and_expanded_batches():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((400, 3, 3)).transpose(0, 2, 1)  # (transposed matrices)
    b = rng.standard_normal((800, 3, 2))[::2]  # (every other one)
    e = np.broadcast_to(rng.standard_normal((1, 3, 3)), (400, 3, 3))  # (one matrix for the batch)
    for x, y in ((a, b), (e, b), (a, e)):
        np.testing.assert_allclose(cpu.matmul(x, y), np.matmul(x, y), rtol=1e-13, atol=1e-13)


def test_gradients_through_batched_products():
    rng = np.random.default_rng(2)
    a = jg.tensor(rng.standard_normal((6, 3, 2)), requires_grad=True)
    b = jg.tensor(rng.standard_normal((6, 2, 3)), requires_grad=True)
    assert gradcheck(lambda a, b: jg.bmm(a, b).sin(), (a, b))
    assert gradcheck(lambda a, b: (a @ b @ a).sum(-1), (a, b))
