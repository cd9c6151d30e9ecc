"""The CPU reduction and scan kernels (jitgrad.kernels.reduce) against NumPy, in every loop they run:
rows (B == 1), column tiles (B > 1), serial, parallel and split into chunks of R whose partial
states are merged; with PyTorch's NaN and tie rules (a NaN propagates and counts as the extreme,
argmax/argmin return the first index)."""
import numpy as np
import pytest

from jitgrad.kernels import config
from jitgrad.kernels import reduce as R

REFS = {"sum": np.sum, "prod": np.prod, "amax": np.max, "amin": np.min, "argmax": np.argmax, "argmin": np.argmin}
SCAN_REFS = {"cumsum": np.cumsum, "cumprod": np.cumprod, "cummax": np.maximum.accumulate,
             "cummin": np.minimum.accumulate}
# (shape, dims): rows, columns, a middle axis, all, and shapes long enough to split R into chunks
LAYOUTS = [((6, 9), (1,)), ((9, 6), (0,)), ((3, 7, 5), (1,)), ((4, 5), (0, 1)), ((2, 70000), (1,)),
           ((3, 40000, 5), (1,)), ((70000, 2), (0,))]


@pytest.fixture(params=["serial", "parallel"])
def threshold(request, monkeypatch):
    """Serial builds, or parallel ones (chunks of R where the tasks are few) even for small arrays."""
    monkeypatch.setattr(config, "PARALLEL_THRESHOLD", 1 << 62 if request.param == "serial" else 0)


def _input(kind, dtype, shape, rng):
    if np.dtype(dtype) == np.bool_:
        return rng.random(shape) > 0.5
    if kind in ("prod", "cumprod"):
        x = rng.uniform(0.9, 1.1, shape) if np.dtype(dtype).kind == "f" else rng.integers(1, 2, shape)
        return x.astype(dtype)
    return (rng.standard_normal(shape) * 8).astype(dtype)


def _reference(kind, x, dims):
    if kind in ("sum", "prod"):
        acc = np.float64 if x.dtype.kind == "f" else np.int64
        return REFS[kind](x.astype(acc), axis=dims).astype(x.dtype if x.dtype.kind == "f" else np.int64)
    if kind in ("argmax", "argmin"):
        return REFS[kind](x, axis=dims[0])
    return REFS[kind](x, axis=dims)


@pytest.mark.parametrize("layout", LAYOUTS, ids=str)
@pytest.mark.parametrize("kind", sorted(REFS))
def test_reduce_matches_numpy(kind, layout, threshold, rng):
    shape, dims = layout
    if kind.startswith("arg") and len(dims) > 1:
        return
    for dtype in (np.float32, np.float64, np.int32, np.int64, np.uint8, np.bool_):
        x = _input(kind, dtype, shape, rng)
        out, ref = R.reduce(kind, x, dims), _reference(kind, x, dims)
        assert out.dtype == ref.dtype and out.shape == ref.shape
        np.testing.assert_allclose(out, ref, rtol=1e-5 if dtype == np.float32 else 1e-12)


@pytest.mark.parametrize("layout", [((2, 70000), 1), ((70000, 3), 0), ((3, 40000, 5), 1)], ids=str)
@pytest.mark.parametrize("kind", ["amax", "amin", "argmax", "argmin"])
def test_nan_propagates_and_counts_as_the_extreme(kind, layout, threshold, rng):
    shape, dim = layout
    x = rng.standard_normal(shape)
    n = shape[dim]
    at = [slice(None)] * len(shape)
    for pos in (n - 3, n // 2 + 1, n // 2):  # several NaNs, in different chunks of R: the first counts
        at[dim] = pos
        x[tuple(at)] = np.nan
    out = R.reduce(kind, x, (dim,))
    if kind.startswith("arg"):
        assert (out == n // 2).all()
    else:
        assert np.isnan(out).all()


@pytest.mark.parametrize("layout", [((2, 70000), 1), ((70000, 3), 0), ((4, 9), 1), ((9, 4), 0)], ids=str)
@pytest.mark.parametrize("kind", ["argmax", "argmin"])
def test_arg_reductions_return_the_first_of_ties(kind, layout, threshold):
    shape, dim = layout
    n = shape[dim]
    x = np.zeros(shape, np.float32)
    at = [slice(None)] * len(shape)
    for pos in (n - 1, n // 2, 1):
        at[dim] = pos
        x[tuple(at)] = 5.0 if kind == "argmax" else -5.0
    assert (R.reduce(kind, x, (dim,)) == 1).all()
    # every element equal to the empty state's value: the first index, not the empty state's
    x[...] = -np.inf if kind == "argmax" else np.inf
    assert (R.reduce(kind, x, (dim,)) == 0).all()
    info = np.iinfo(np.int32)
    assert (R.reduce(kind, np.full(shape, info.min if kind == "argmax" else info.max, np.int32), (dim,)) == 0).all()


def test_max_of_infinities_and_a_nan_row():
    x = np.array([[-np.inf, -np.inf], [np.inf, 1.0], [np.nan, np.inf], [np.inf, np.nan]])
    np.testing.assert_array_equal(R.reduce("amax", x, (1,)), [-np.inf, np.inf, np.nan, np.nan])
    np.testing.assert_array_equal(R.reduce("amin", x, (1,)), [-np.inf, 1.0, np.nan, np.nan])
    np.testing.assert_array_equal(R.reduce("argmax", x, (1,)), [0, 0, 0, 1])
    np.testing.assert_array_equal(R.reduce("argmin", x, (1,)), [0, 1, 0, 1])


@pytest.mark.parametrize("layout", [((6, 9), 1), ((9, 6), 0), ((3, 7, 5), 1), ((12,), 0), ((3, 2000), 1)], ids=str)
@pytest.mark.parametrize("kind", sorted(SCAN_REFS))
def test_scans_match_numpy(kind, layout, threshold, rng):
    shape, dim = layout
    for dtype in (np.float32, np.float64, np.int32, np.int64, np.bool_):
        x = _input(kind, dtype, shape, rng)
        if np.dtype(dtype).kind == "f":
            x.flat[x.size // 2] = np.nan
        out = R.scan(kind, x, dim)
        if kind in ("cumsum", "cumprod"):
            acc = np.float64 if x.dtype.kind == "f" else np.int64
            ref = SCAN_REFS[kind](x.astype(acc), axis=dim).astype(x.dtype if x.dtype.kind == "f" else np.int64)
        else:
            ref = SCAN_REFS[kind](x, axis=dim)  # NumPy's maximum/minimum propagate NaN as PyTorch's cummax
        assert out.dtype == ref.dtype and out.shape == ref.shape
        np.testing.assert_allclose(out, ref, rtol=1e-5 if dtype == np.float32 else 1e-12)


def test_unknown_scan_kind_is_an_error():
    with pytest.raises(ValueError, match="unknown scan kind: cumfoo"):
        R.scan("cumfoo", np.ones(3), 0)
