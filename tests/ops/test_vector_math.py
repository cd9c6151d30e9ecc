"""The vectorizable exp/tanh/sigmoid of kernels/vmath.py (float32 and float64 versions)
against NumPy in float64, over wide ranges and the special values, in ulp of the result's dtype."""
import warnings

import numpy as np
import pytest

from jitgrad.kernels import elementwise as E
from jitgrad.kernels import vmath

SPECIAL = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1e-30, 0.39999, 0.4, 0.40001, 0.02, 0.021,
           88.0, 88.7, 88.72283, 88.7229, 88.73, 89.0, 100.0, -87.3, -88.8, -100.0, -103.0, -103.9, -104.0, -110.0,
           709.0, 709.7, 709.78, 709.79, 710.0, -708.0, -740.0, -745.0, -745.2, -800.0, 1e300, -1e300]
# worst case allowed, in ulp of the dtype (PyTorch's float32 kernels are within 1-4 ulp; float64
# tanh keeps its series below 0.02, where (1 - e)/(1 + e) loses a few digits just above)
LIMITS = {("exp", np.float32): 1, ("tanh", np.float32): 3, ("sigmoid", np.float32): 4, ("silu", np.float32): 4,
          ("exp", np.float64): 1, ("tanh", np.float64): 12, ("sigmoid", np.float64): 4, ("silu", np.float64): 4}


def _inputs(dtype):
    rng = np.random.default_rng(0)
    parts = [rng.uniform(-1, 1, 20000), rng.uniform(-120, 100, 20000), rng.uniform(-800, 800, 20000),
             rng.standard_normal(20000) * 1e-3, rng.standard_normal(2000) * 1e-20, SPECIAL]
    with np.errstate(over="ignore"):
        return np.concatenate(parts).astype(dtype)


def _reference(name, x64, dtype):
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.exp(-x64.astype(dtype)).astype(np.float64)  # exp(-x) overflowing as it does in the dtype
        return {"exp": np.exp(x64), "tanh": np.tanh(x64), "sigmoid": 1 / (1 + e), "silu": x64 / (1 + e)}[name]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", ["exp", "tanh", "sigmoid", "silu"])
def test_within_a_few_ulp_of_float64_numpy(name, dtype):
    x = _inputs(dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the loops compile without numba's warnings
        got = E.run(name, dtype, x)
    assert got.dtype == dtype
    ref = _reference(name, x.astype(np.float64), dtype)
    with np.errstate(over="ignore"):
        ref_d = ref.astype(dtype)  # what a correctly rounded result is
    finite = np.isfinite(ref_d)
    np.testing.assert_array_equal(got[~finite], ref_d[~finite])  # inf, -inf and NaN where NumPy has them
    ulp = np.spacing(np.abs(ref_d[finite])).astype(np.float64)
    err = np.abs(got[finite].astype(np.float64) - ref[finite]) / ulp
    worst = int(np.argmax(err))
    assert err[worst] <= LIMITS[name, dtype], "%s(%r) = %r, NumPy %r" % (name, x[finite][worst], got[finite][worst],
                                                                       ref[finite][worst])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_signs_and_saturation(dtype):
    x = np.array([-0.0, 0.0, -1e-30, 1e-30, -50, 50, -np.inf, np.inf], dtype)
    t = E.run("tanh", dtype, x)
    np.testing.assert_array_equal(np.signbit(t), np.signbit(x))  # odd, -0.0 included
    np.testing.assert_array_equal(t[4:], [-1, 1, -1, 1])
    np.testing.assert_array_equal(E.run("sigmoid", dtype, np.array([-np.inf, np.inf], dtype)), [0, 1])
    np.testing.assert_array_equal(E.run("exp", dtype, np.array([-np.inf, np.inf, 0], dtype)), [0, np.inf, 1])


def test_float32_math_stays_in_float32():
    """The float32 versions compute in float32 (twice the SIMD lanes of float64): called from Python,
    they return float32 values, and 1 - ulp rounding differs from float64's."""
    for f in (vmath.vexp, vmath.vtanh, vmath.vsigmoid):
        assert isinstance(f(np.float32(0.5)), (np.float32, float))
    assert vmath.vexp(np.float32(1.0)) == np.float32(np.e)
    assert vmath.vexp(1.0) == np.e


@pytest.mark.parametrize("name,ref", [
    ("tanh_vjp", lambda g, y: g * (1 - y * y)), ("sigmoid_vjp", lambda g, y: g * y * (1 - y)),
    ("square_vjp", lambda g, x: 2 * g * x), ("relu_vjp", lambda g, y: np.where(y > 0, g, 0))])
def test_float32_vjps_compute_in_float32(name, ref):
    """vmath.like keeps a VJP's constants in its operands' float type: float32 gradients compute in float32,
    as PyTorch's (a Python literal would make numba compute them in float64, on half the SIMD lanes)."""
    from numba import njit
    from jitgrad.kernels.scalars import SCALARS
    fn = SCALARS[name]
    call = njit(lambda g, y: fn(g, y))
    rng = np.random.default_rng(1)
    g, y = rng.uniform(-3, 3, 2000).astype(np.float32), rng.uniform(-1, 1, 2000).astype(np.float32)
    for dt in (np.float32, np.float64):
        got = np.array([call(dt(a), dt(b)) for a, b in zip(g[:50], y[:50])])
        assert {s.return_type.name for s in call.nopython_signatures if s.args[0].name == np.dtype(dt).name} == {
            np.dtype(dt).name}
        np.testing.assert_allclose(got, ref(g[:50].astype(dt), y[:50].astype(dt)), rtol=4e-7 if dt is np.float32
                                   else 1e-15, atol=1e-7 if dt is np.float32 else 1e-15)
