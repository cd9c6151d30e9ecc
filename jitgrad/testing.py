"""jitgrad.testing: ``assert_close`` (PyTorch's default tolerances per dtype and its mismatch reports) and
``make_tensor`` (random tensors for tests, drawn from jitgrad's generator)."""
import collections.abc
import math
import numbers

import numpy as np

from . import _dtype as D
from ._generator import numpy_rng
from ._tensor import Tensor

__all__ = ["assert_close", "make_tensor", "assert_allclose"]

# dtype name -> (rtol, atol): PyTorch's defaults; every other dtype compares exactly
_TOLERANCES = {"float16": (1e-3, 1e-5), "bfloat16": (1.6e-2, 1e-5), "float32": (1.3e-6, 1e-5), "float64": (1e-7, 1e-7)}


class _Mismatch(AssertionError):
    pass


def _tolerances(dtype_name, rtol, atol):
    if (rtol is None) != (atol is None):
        raise ValueError("Both 'rtol' and 'atol' must be either specified or omitted, but got no %s."
                         % ("rtol" if rtol is None else "atol"))
    if rtol is not None:
        return rtol, atol
    return _TOLERANCES.get(dtype_name, (0.0, 0.0))


def _is_number(x):
    return isinstance(x, numbers.Number) and not isinstance(x, np.ndarray)


def _array_of(x):
    """(host array, dtype name, device string, shape) of a tensor-like (Tensor or NumPy array)."""
    if isinstance(x, Tensor):
        return np.asarray(x.detach()._host()), x.dtype.name, str(x.device), tuple(x.shape), "jitgrad." + x.dtype.name
    a = np.asarray(x)
    name = "bool" if a.dtype == np.bool_ else a.dtype.name
    return a, name, "cpu", a.shape, a.dtype


def _compare(actual, expected, rtol, atol, equal_nan, check_device, check_dtype, check_stride, path):
    if isinstance(actual, (Tensor, np.ndarray)) and type(actual) is type(expected) or \
            isinstance(actual, Tensor) and isinstance(expected, Tensor):
        return _compare_tensors(actual, expected, rtol, atol, equal_nan, check_device, check_dtype, check_stride)
    if _is_number(actual) and _is_number(expected) and not isinstance(actual, (Tensor, np.ndarray)):
        return _compare_scalars(actual, expected, rtol, atol, equal_nan, check_dtype)
    if isinstance(actual, collections.abc.Sequence) and isinstance(expected, collections.abc.Sequence) and \
            not isinstance(actual, str) and not isinstance(expected, str):
        if len(actual) != len(expected):
            raise _Mismatch("The length of the sequences mismatch: %d != %d" % (len(actual), len(expected)))
        for i, (a, e) in enumerate(zip(actual, expected)):
            _nested(a, e, path + (i,), rtol, atol, equal_nan, check_device, check_dtype, check_stride)
        return None
    if isinstance(actual, collections.abc.Mapping) and isinstance(expected, collections.abc.Mapping):
        ka, ke = set(actual), set(expected)
        if ka != ke:
            missing, extra = sorted(ke - ka, key=repr), sorted(ka - ke, key=repr)
            raise _Mismatch("The keys of the mappings do not match:\nMissing keys in the actual mapping: %s\n"
                            "Additional keys in the actual mapping: %s" % (missing, extra))
        for k in expected:
            _nested(actual[k], expected[k], path + (k,), rtol, atol, equal_nan, check_device, check_dtype, check_stride)
        return None
    raise TypeError("No comparison pair was able to handle inputs of type %s and %s." % (type(actual), type(expected)))


def _nested(a, e, path, *args):
    try:
        _compare(a, e, *args[:6], path)
    except _Mismatch as m:
        if getattr(m, "located", False):
            raise
        located = _Mismatch("%s\n\nThe failure occurred for item %s" % (m, "".join("[%r]" % p for p in path)))
        located.located = True
        raise located from None


def _compare_tensors(actual, expected, rtol, atol, equal_nan, check_device, check_dtype, check_stride):
    a, a_name, a_dev, a_shape, a_dtype = _array_of(actual)
    e, e_name, e_dev, e_shape, e_dtype = _array_of(expected)
    size = "torch.Size" if isinstance(actual, Tensor) else ""
    if a_shape != e_shape:
        fmt = (lambda s: "%s(%s)" % (size, list(s))) if size else repr
        raise _Mismatch("The values for attribute 'shape' do not match: %s != %s." % (fmt(a_shape), fmt(e_shape)))
    if check_device and a_dev != e_dev:
        raise _Mismatch("The values for attribute 'device' do not match: %s != %s." % (a_dev, e_dev))
    if check_dtype and a_name != e_name:
        raise _Mismatch("The values for attribute 'dtype' do not match: %s != %s."
                        % (str(a_dtype).replace("jitgrad.", "torch."), str(e_dtype).replace("jitgrad.", "torch.")))
    if check_stride and isinstance(actual, Tensor) and actual.stride() != expected.stride():
        raise _Mismatch("The values for attribute 'stride()' do not match: %s != %s."
                        % (actual.stride(), expected.stride()))
    name = a_name if a_name == e_name else D.promote_types(D.FROM_NP[a.dtype] if a.dtype in D.FROM_NP else D.float64,
                                                           D.FROM_NP[e.dtype] if e.dtype in D.FROM_NP else D.float64).name
    rtol, atol = _tolerances(name, rtol, atol)
    if a.ndim == 0:
        return _compare_scalars(a.item(), e.item(), rtol, atol, equal_nan, False, given=True)
    _report(a, e, rtol, atol, equal_nan, "Tensor-likes")


def _close(a, e, rtol, atol, equal_nan):
    with np.errstate(all="ignore"):
        if a.dtype.kind in "biu" and e.dtype.kind in "biu":
            return a.astype(np.int64) == e.astype(np.int64) if rtol == 0 and atol == 0 else \
                np.abs(a.astype(np.int64) - e.astype(np.int64)) <= atol + rtol * np.abs(e.astype(np.int64))
        a64, e64 = a.astype(np.float64), e.astype(np.float64)
        ok = (a64 == e64) | (np.abs(a64 - e64) <= atol + rtol * np.abs(e64))
        if equal_nan:
            ok |= np.isnan(a64) & np.isnan(e64)
        return ok & ~(np.isinf(a64) & (a64 != e64))


def _diffs(a, e):
    """Absolute and relative differences, as PyTorch computes them (in the compared dtype; integers as int64)."""
    with np.errstate(all="ignore"):
        if a.dtype.kind in "biu":
            a, e = a.astype(np.int64), e.astype(np.int64)
        else:
            common = np.result_type(a, e)
            a, e = a.astype(common), e.astype(common)
        absolute = np.abs(a - e)
        return absolute, absolute / np.abs(e)


def _fmt(x):
    return repr(x.item() if isinstance(x, np.generic) else x)


def _report(a, e, rtol, atol, equal_nan, what):
    ok = _close(a, e, rtol, atol, equal_nan)
    if ok.all():
        return
    exact = rtol == 0 and atol == 0
    absolute, relative = _diffs(a, e)
    absolute = np.where(ok, 0, absolute)
    relative = np.where(ok, 0, relative)
    n_bad, n = int((~ok).sum()), ok.size
    lines = ["%s are not %s!" % (what, "equal" if exact else "close"), "",
             "Mismatched elements: %d / %d (%.1f%%)" % (n_bad, n, 100.0 * n_bad / n)]
    for label, diff, tol in (("absolute", absolute, atol), ("relative", relative, rtol)):
        i = np.unravel_index(int(np.argmax(np.where(np.isnan(diff), np.inf, diff))), diff.shape)
        value = diff[i]
        line = "Greatest %s difference: %s at index %s" % (label, _fmt(value), tuple(int(k) for k in i))
        lines.append(line + ("" if exact else " (up to %s allowed)" % tol))
    raise _Mismatch("\n".join(lines))


def _compare_scalars(actual, expected, rtol, atol, equal_nan, check_dtype, given=False):
    if not given:
        if check_dtype and type(actual) is not type(expected):
            raise _Mismatch("The values for attribute 'dtype' do not match: %s != %s." % (type(actual), type(expected)))
        kind = float if isinstance(actual, float) or isinstance(expected, float) else int
        rtol, atol = _tolerances("float64" if kind is float else "int64", rtol, atol)
    if isinstance(actual, complex) or isinstance(expected, complex):
        close = abs(actual - expected) <= atol + rtol * abs(expected) or actual == expected
    else:
        close = actual == expected or (equal_nan and math.isnan(actual) and math.isnan(expected)) or (
            not (math.isinf(actual) or math.isinf(expected)) and abs(actual - expected) <= atol + rtol * abs(expected))
    if close:
        return
    exact = rtol == 0 and atol == 0
    absolute = abs(actual - expected)
    relative = absolute / abs(expected) if expected != 0 else math.inf
    lines = ["Scalars are not %s!" % ("equal" if exact else "close"), "",
             "Expected %r but got %r." % (expected, actual),
             "Absolute difference: %r%s" % (absolute, "" if exact else " (up to %s allowed)" % atol),
             "Relative difference: %r%s" % (relative, "" if exact else " (up to %s allowed)" % rtol)]
    raise _Mismatch("\n".join(lines))


def assert_close(actual, expected, *, allow_subclasses=True, rtol=None, atol=None, equal_nan=False, check_device=True,
                 check_dtype=True, check_layout=True, check_stride=False, msg=None):
    """Assert that ``actual`` and ``expected`` are close: |actual - expected| <= atol + rtol * |expected| elementwise,
    with PyTorch's default tolerances for their dtype, after checking shape, device and dtype. Tensors, NumPy
    arrays, numbers, and sequences and mappings of them (compared item by item) are accepted. The error is
    PyTorch's report (mismatched elements, the greatest differences and where), or ``msg`` (a string, or a
    function of the report)."""
    _tolerances("float64", rtol, atol)  # (both or neither)
    try:
        _compare(actual, expected, rtol, atol, equal_nan, check_device, check_dtype, check_stride, ())
    except _Mismatch as m:
        text = str(m)
        if msg is not None:
            text = msg(text) if callable(msg) else msg
        raise AssertionError(text) from None


def assert_allclose(actual, expected, rtol=None, atol=None, equal_nan=True, msg=""):
    """The deprecated form of assert_close (dtypes may differ; NaNs compare equal)."""
    if not isinstance(actual, Tensor):
        actual = Tensor._wrap(np.asarray(actual))
    if not isinstance(expected, Tensor):
        expected = Tensor._wrap(np.asarray(expected, dtype=actual.dtype.np))
    assert_close(actual, expected, rtol=rtol, atol=atol, equal_nan=equal_nan, check_device=True, check_dtype=False,
                 msg=msg or None)


def make_tensor(*shape, dtype, device=None, low=None, high=None, requires_grad=False, noncontiguous=False,
                exclude_zero=False, memory_format=None):
    """A tensor of ``shape`` with values drawn uniformly from [low, high) (floats: [-9, 9) by default; integers:
    [-9, 10), unsigned from 0; bools: either), from jitgrad's generator. ``exclude_zero`` replaces zeros (by 1 for
    integers, the dtype's smallest normal for floats); ``noncontiguous`` returns a strided view."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    shape = tuple(int(s) for s in shape)
    dt = D.FROM_NP[np.dtype(dtype.np)] if isinstance(dtype, D.dtype) else D.FROM_NP[np.dtype(dtype)]
    if requires_grad and not dt.is_inexact:
        raise ValueError("make_tensor: requires_grad must be False for integral dtype")
    rng = numpy_rng(None)
    full = shape[:-1] + (shape[-1] * 2,) if noncontiguous and shape and shape[-1] > 1 else shape
    if dt.name == "bool":
        values = rng.integers(0, 2, size=full).astype(bool)
    elif dt.np.kind in "iu":
        info = np.iinfo(dt.np)
        lo = max(info.min, -9 if low is None else math.ceil(low)) if dt.np.kind == "i" else max(0, 0 if low is None
                                                                                                 else math.ceil(low))
        hi = min(info.max, 10 if high is None else math.ceil(high))
        if lo > hi:
            raise ValueError("make_tensor: low must be less than or equal to high, but got low=%s and high=%s"
                             % (low, high))
        values = rng.integers(lo, max(hi, lo + 1), size=full).astype(dt.np)
        if exclude_zero:
            values[values == 0] = 1
    else:
        lo, hi = (-9.0 if low is None else float(low)), (9.0 if high is None else float(high))
        if lo > hi:
            raise ValueError("make_tensor: low must be less than or equal to high, but got low=%s and high=%s"
                             % (low, high))
        if any(math.isnan(v) for v in (lo, hi)):
            raise ValueError("make_tensor: one of low or high was NaN!")
        values = rng.uniform(lo, hi, size=full)
        if exclude_zero:
            values[values == 0] = np.finfo(np.float64 if dt.name == "bfloat16" else dt.np).tiny
        values = values.astype(dt.np)
    t = Tensor._wrap(np.ascontiguousarray(values))
    if device is not None:
        t = t.to(device)
    if full != shape:
        t = t[..., ::2]
    if memory_format is not None:
        t = t.contiguous(memory_format=memory_format)
    return t.requires_grad_(requires_grad) if requires_grad else t
