"""The CPU elementwise loops over broadcast operands (kernels/elementwise.py): a bias row, a value
per row and their mixes are read in place by one loop over (rows, cols), and give NumPy's results."""
import numpy as np
import pytest

from jitgrad.kernels import config
from jitgrad.kernels import elementwise as E

CASES = [
    ((4, 5), (5,)),            # a bias row
    ((4, 5), (1, 5)),
    ((4, 5), (4, 1)),          # one value per row
    ((4, 1), (1, 5)),          # an outer product
    ((2, 3, 4), (3, 4)),       # a repeated block of two dims
    ((2, 3, 4), (2, 3, 1)),
    ((2, 3, 4), (2, 1, 1)),
    ((2, 3, 4), (4,)),
    ((2, 3, 4), (1, 3, 1)),    # fits no single split: the expanded path
    ((1, 1), (3, 4)),          # one value as an array
]


@pytest.mark.parametrize("parallel", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
@pytest.mark.parametrize("sa,sb", CASES)
def test_broadcast_operands_match_numpy(sa, sb, dtype, parallel, monkeypatch, rng):
    monkeypatch.setattr(config, "PARALLEL_THRESHOLD", 1 if parallel else 1 << 30)
    a = (rng.standard_normal(sa) * 5).astype(dtype)
    b = (rng.standard_normal(sb) * 5).astype(dtype)
    np.testing.assert_array_equal(E.run("add", np.dtype(dtype), a, b), a + b)
    np.testing.assert_array_equal(E.run("mul", np.dtype(dtype), b, a), b * a)
    np.testing.assert_array_equal(E.run("sub", np.dtype(dtype), b, a), b - a)
    cond = a > 0  # three operands, two of them broadcast
    np.testing.assert_array_equal(E.run("where", np.dtype(dtype), cond, b, dtype(3)), np.where(cond, b, dtype(3)))


def test_in_place_and_strided_operands(rng):
    out = rng.standard_normal((6, 4))
    bias = rng.standard_normal(4)
    expect = out + bias
    E.run("add", out.dtype, out, bias, out=out)
    np.testing.assert_array_equal(out, expect)
    full = rng.standard_normal((4, 6)).T  # not contiguous
    np.testing.assert_array_equal(E.run("mul", full.dtype, full, bias[::-1][:, None].T[0]), full * bias[::-1])
    zero_strides = np.broadcast_to(np.float64(2.5), (6, 4))
    np.testing.assert_array_equal(E.run("mul", full.dtype, full, zero_strides), full * 2.5)
    per_row = rng.standard_normal((6, 1))
    np.testing.assert_array_equal(E.run("where", full.dtype, full > 0, per_row, bias), np.where(full > 0, per_row, bias))


@pytest.mark.parametrize("parallel", [False, True])
def test_a_bias_row_takes_the_cached_loop_directly(parallel, monkeypatch, rng):
    """A matrix and a row (a linear layer's bias): once its 2-D loop is compiled, later calls go to it
    without the general path's shape analysis, for new arrays, an ``out`` and a strided matrix alike."""
    monkeypatch.setattr(config, "PARALLEL_THRESHOLD", 1 if parallel else 1 << 30)
    a, b = rng.standard_normal((6, 4)), rng.standard_normal(4)
    np.testing.assert_array_equal(E.run("mul", np.dtype(np.float64), a, b), a * b)  # compiles the loop
    calls = []
    monkeypatch.setattr(E, "_run_general", lambda *args: calls.append(args))
    a2, b2 = rng.standard_normal((3, 4)), rng.standard_normal(4)
    np.testing.assert_array_equal(E.run("mul", np.dtype(np.float64), a2, b2), a2 * b2)
    out = np.empty((3, 4))
    assert E.run("mul", np.dtype(np.float64), a2, b2, out=out) is out
    np.testing.assert_array_equal(out, a2 * b2)
    t = rng.standard_normal((4, 5)).T  # (5, 4), not C-contiguous
    np.testing.assert_array_equal(E.run("mul", np.dtype(np.float64), t, b2), t * b2)
    assert calls == []
