"""dtypes and PyTorch's type promotion: tensors with dims outrank 0-d tensors, which outrank Python numbers;
a lower tier only matters when it is of a higher category (bool < integer < float)."""
import numpy as np
import pytest

import jitgrad as jg

F32, F64, I32, I64, B = jg.float32, jg.float64, jg.int32, jg.int64, jg.bool


def t(dtype, shape=(2,)):
    return jg.ones(shape, dtype=dtype)


@pytest.mark.parametrize("make,expected", [
    (lambda: t(F32) * 2.5, F32),  # a Python float does not upcast float32
    (lambda: t(F32) * 2, F32),
    (lambda: t(I64) * 2.5, F32),  # int + float -> the default float dtype
    (lambda: t(I64) * 2, I64),
    (lambda: t(I32) * 2, I32),  # a Python int does not upcast int32
    (lambda: t(I32) + t(I64), I64),
    (lambda: t(I64) + t(F32), F32),
    (lambda: t(I64) + t(F64), F64),
    (lambda: t(F32) + t(F64), F64),  # float32 + float64 -> float64
    (lambda: t(F32) + t(F64, ()), F32),  # a 0-d tensor of the same category does not upcast
    (lambda: t(I64) + t(F64, ()), F64),  # ... but one of a higher category decides, with its own dtype
    (lambda: t(I32) + t(I64, ()), I32),
    (lambda: t(I32, ()) + t(I64, ()), I64),  # among 0-d tensors only: ordinary promotion
    (lambda: t(F32, ()) + t(F64, ()), F64),
    (lambda: t(B) + 1, I64),
    (lambda: t(B) + 1.5, F32),
    (lambda: t(B) + True, B),
    (lambda: t(B) * t(B), B),
    (lambda: t(B) + t(I32), I32),
    (lambda: t(I64) / 2, F32),  # true division always gives a float
    (lambda: t(I64) / t(I64), F32),
    (lambda: t(I64) // 2, I64),
    (lambda: t(F64) * np.float32(2), F64),  # NumPy scalars count as Python numbers
    (lambda: t(F32) * np.float64(2), F32),
    (lambda: np.float64(2) * t(F32), F32),
    (lambda: t(I64) * np.int32(2), I64),
    (lambda: t(F32) == 1, B),
    (lambda: jg.where(t(B), t(I64), 0.5), F32),
    (lambda: jg.cat([t(I64), t(F32)]), F32),
    (lambda: t(I64).sum(), I64),
    (lambda: t(B).sum(), I64),
    (lambda: t(I32).exp(), F32),
    (lambda: t(F64).exp(), F64),
    (lambda: t(I64).sqrt(), F32),
    (lambda: jg.atan2(t(I64), t(I64)), F32),
    (lambda: t(I64).abs(), I64),
    (lambda: t(B).square(), I64),
    (lambda: t(I64).argmax(), I64),
    (lambda: t(I64).clamp(0.5, 1), F32),
])
def test_result_dtype(make, expected):
    assert make().dtype is expected


def test_result_type_and_promote_types():
    assert jg.result_type(t(F32), 1.0) is F32 and jg.result_type(t(I64), 1.0) is F32
    assert jg.result_type(t(I32), jg.tensor(1)) is I32
    assert jg.promote_types(I32, F32) is F32 and jg.promote_types(B, I64) is I64 and jg.promote_types(F32, F64) is F64


def test_default_dtype():
    assert jg.get_default_dtype() is F32
    (t(I64) * 1.5).dtype  # noqa: B018  (caches the dtype of int * float before the switch)
    jg.set_default_dtype(F64)
    try:
        assert jg.tensor([1.5]).dtype is F64 and jg.zeros(2).dtype is F64 and jg.arange(2.0).dtype is F64
        assert (t(I64) * 1.5).dtype is F64 and t(I64).exp().dtype is F64
        assert repr(jg.tensor([1.5])) == "tensor([1.5000])"  # the default dtype is not printed
    finally:
        jg.set_default_dtype(F32)
    assert (t(I64) * 1.5).dtype is F32
    with pytest.raises(TypeError, match="only floating-point types are supported as the default type"):
        jg.set_default_dtype(I64)


def test_dtype_objects():
    assert repr(F64) == "jitgrad.float64" and jg.float is F32 and jg.double is F64 and jg.long is I64
    assert jg.int is I32 and jg.bool is B
    assert F32.is_floating_point and not I64.is_floating_point and F64.itemsize == 8
    assert {d: d.tensor_type for d in (F32, F64, I64, I32, B)} == {
        F32: "FloatTensor", F64: "DoubleTensor", I64: "LongTensor", I32: "IntTensor", B: "BoolTensor"}
    for d in (F32, F64, I64, I32, B):
        assert jg.zeros(1, dtype=d).dtype is d and jg.tensor([1], dtype=d).numpy().dtype == d.np


def test_gradients_keep_the_input_dtype():
    a = jg.tensor([1.0, 2.0], requires_grad=True)
    b = jg.tensor([3.0, 4.0], dtype=F64, requires_grad=True)
    out = a * b
    assert out.dtype is F64
    out.sum().backward()
    assert a.grad.dtype is F32 and b.grad.dtype is F64
    assert a.grad.tolist() == [3.0, 4.0] and b.grad.tolist() == [1.0, 2.0]


def test_unsupported_numpy_dtypes():
    for arr, name in [(np.array(["a"]), "str32"), (np.array([1, 2], dtype=np.uint16), "uint16")]:
        with pytest.raises(TypeError, match="can't convert np.ndarray of type numpy.%s. The only supported types are: "
                                            "float64, float32, float16, complex64, complex128, int64, int32, and bool."
                                            % name):
            jg.from_numpy(arr) if arr.dtype == np.uint16 else jg.tensor(arr)
