"""jitgrad.testing.assert_close (PyTorch's default tolerances and reports) and make_tensor."""
import numpy as np
import pytest

import jitgrad as jg
from jitgrad.testing import assert_close, make_tensor

NAN = float("nan")


def cases(lib):
    t = lib.tensor
    return [
        ((t([1.0, 2.0, 3.0]), t([1.0, 2.1, 3.0])), {}),
        ((t([[1.0, 2.0], [3.0, 4.0]]), t([[1.0, 2.5], [3.0, 5.0]])), {}),
        ((t([1, 2, 3]), t([1, 2, 4])), {}),
        ((t([1.0, 2.0]), t([1.0, 2.0, 3.0])), {}),
        ((t([1.0, 2.0]), t([1.0, 2.0], dtype=lib.float64)), {}),
        ((t([1.0, NAN]), t([1.0, NAN])), {}),
        ((t([1.0, NAN]), t([1.0, NAN])), {"equal_nan": True}),
        (([t(1.0), t(2.0)], [t(1.0), t(3.0)]), {}),
        (({"a": t(1.0)}, {"a": t(2.0)}), {}),
        ((1.0, 1.1), {}),
        ((t([1.0]), t([1.1])), {"rtol": 0.1}),
        ((t([True, False]), t([True, True])), {}),
        ((t(1.0), t(2.0)), {}),
        (([1, 2], [1, 2, 3]), {}),
        ((t([1.0, 2.0]), t([1.0, 2.0], dtype=lib.float64)), {"check_dtype": False}),
        ((t([1.0, 2.0]), t([1.0, 2.1])), {"msg": "custom"}),
        ((t([1.0, 2.0], dtype=lib.float16), t([1.0, 2.001], dtype=lib.float16)), {}),
        ((t([1.0, 2.0], dtype=lib.float64), t([1.0, 2.0 + 1e-8], dtype=lib.float64)), {}),
        ((t([1.0, 2.0], dtype=lib.float64), t([1.0, 2.0 + 1e-6], dtype=lib.float64)), {}),
        ((t([0.0, 1e-6]), t([0.0, 0.0])), {}),
        ((t([float("inf")]), t([float("inf")])), {}),
        ((t([float("inf")]), t([-float("inf")])), {}),
    ]


def outcome(fn, args, kwargs):
    try:
        fn(*args, **kwargs)
    except Exception as e:  # noqa: BLE001
        return type(e).__name__, str(e).replace("torch._tensor.Tensor", "Tensor").replace("torch.Tensor", "Tensor")
    return "ok", ""


def test_reports():
    got = [outcome(assert_close, a, k) for a, k in cases(jg)]
    assert got[0] == ("AssertionError", "Tensor-likes are not close!\n\nMismatched elements: 1 / 3 (33.3%)\nGreatest "
                      "absolute difference: 0.09999990463256836 at index (1,) (up to 1e-05 allowed)\nGreatest relative "
                      "difference: 0.04761900380253792 at index (1,) (up to 1.3e-06 allowed)")
    assert got[2][1].startswith("Tensor-likes are not equal!") and "allowed" not in got[2][1]
    assert got[3][1] == "The values for attribute 'shape' do not match: torch.Size([2]) != torch.Size([3])."
    assert got[6] == ("ok", "") and got[14] == ("ok", "") and got[17] == ("ok", "") and got[20] == ("ok", "")
    assert got[7][1].endswith("The failure occurred for item [1]")
    assert got[9][1].startswith("Scalars are not close!\n\nExpected 1.1 but got 1.0.")
    assert got[10] == ("ValueError", "Both 'rtol' and 'atol' must be either specified or omitted, but got no atol.")
    assert got[15] == ("AssertionError", "custom")
    assert got[18][0] == "AssertionError" and got[21][0] == "AssertionError"


def test_numpy_arrays_and_type_errors():
    assert_close(np.array([1.0, 2.0]), np.array([1.0, 2.0 + 1e-9]))
    with pytest.raises(AssertionError, match="Tensor-likes are not close"):
        assert_close(np.array([1.0, 2.0]), np.array([1.0, 2.1]))
    with pytest.raises(TypeError, match="No comparison pair was able to handle inputs of type"):
        assert_close(jg.tensor(1.0), 1.0)


def test_make_tensor():
    jg.manual_seed(0)
    a = make_tensor(200, 3, dtype=jg.float32)
    assert a.shape == (200, 3) and a.dtype is jg.float32 and -9 <= a.min().item() and a.max().item() < 9
    b = make_tensor((50,), dtype=jg.int64, low=0, high=3)
    assert set(b.tolist()) <= {0, 1, 2}
    c = make_tensor(4, 5, dtype=jg.float64, noncontiguous=True, requires_grad=True)
    assert not c.is_contiguous() and c.shape == (4, 5) and c.requires_grad and c.is_leaf
    assert 0 not in make_tensor(500, dtype=jg.int64, low=-1, high=2, exclude_zero=True).tolist()
    assert make_tensor(3, dtype=jg.bool).dtype is jg.bool
    with pytest.raises(ValueError, match="low must be less than or equal to high"):
        make_tensor(3, dtype=jg.float32, low=2, high=1)


@pytest.mark.torch
def test_reports_match_pytorch():
    torch = pytest.importorskip("torch")
    from torch.testing import assert_close as theirs
    ours = [outcome(assert_close, a, k) for a, k in cases(jg)]
    want = [outcome(theirs, a, k) for a, k in cases(torch)]
    for o, w in zip(ours, want):
        assert o == w
