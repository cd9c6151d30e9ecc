"""complex64 and complex128 tensors: dtypes, promotion, factories, NumPy interop, printing, ops and
autograd (PyTorch's conjugate Wirtinger convention), against NumPy values and finite differences."""
import numpy as np
import pytest

import jitgrad as jg
from jitgrad import _dtype as D

C64, C128, F32, F64 = jg.complex64, jg.complex128, jg.float32, jg.float64


# ---------------------------------------------------------------------- dtypes and promotion
def test_dtype_attributes():
    assert jg.cfloat is C64 and jg.cdouble is C128
    assert C64.is_complex and not C64.is_floating_point and C64.itemsize == 8
    assert C64.to_real() is F32 and C128.to_real() is F64 and F32.to_real() is F32
    assert F64.to_complex() is C128 and F32.to_complex() is C64
    assert repr(C64) == "jitgrad.complex64"
    assert jg.is_complex(jg.zeros(2, dtype=C64)) and not jg.is_complex(jg.zeros(2))
    assert jg.zeros(2, dtype=C128).is_complex() and not jg.zeros(2, dtype=C128).is_floating_point()


@pytest.mark.parametrize("a,b,want", [
    (C64, F64, C128), (F64, C64, C128), (C64, F32, C64), (C64, C128, C128), (C64, jg.int64, C64),
    (jg.float16, C64, C64), (jg.bool, C128, C128)])
def test_promote_types(a, b, want):
    assert jg.promote_types(a, b) is want


def test_result_type_with_numbers_and_zero_dim_tensors():
    f64, f32, i64 = jg.ones(2, dtype=F64), jg.ones(2), jg.ones(2, dtype=jg.int64)
    assert (f32 * 1j).dtype is C64 and (f64 * 1j).dtype is C128 and (i64 * 1j).dtype is C64
    assert (f64 + jg.tensor(1j)).dtype is C128  # a 0-d complex64 keeps the float64 precision
    assert (f32 + jg.tensor(1j, dtype=C128)).dtype is C64
    assert (jg.ones(2, dtype=C64) + 2.5).dtype is C64
    jg.set_default_dtype(F64)
    try:
        assert jg.tensor([1 + 2j]).dtype is C128 and (i64 * 1j).dtype is C128
    finally:
        jg.set_default_dtype(F32)
    assert jg.get_default_dtype() is F32


# ---------------------------------------------------------------------- factories and interop
def test_factories():
    assert jg.tensor([1 + 2j]).dtype is C64 and jg.tensor(1j).dtype is C64
    assert jg.tensor([1, 2j]).tolist() == [1 + 0j, 2j]
    for make in (jg.zeros, jg.ones, jg.empty, jg.randn, jg.rand):
        t = make(2, 3, dtype=C128)
        assert t.dtype is C128 and t.shape == (2, 3)
    assert jg.full((2,), 1j).dtype is C64 and jg.full((2,), 1j).tolist() == [1j, 1j]
    assert jg.ones(2, dtype=jg.cfloat).numpy().tolist() == [1, 1]
    with pytest.raises(RuntimeError, match="value cannot be converted to type float without overflow"):
        jg.full((2,), 1j, dtype=F32)


def test_randn_parts_have_variance_one_half():
    jg.manual_seed(0)
    z = jg.randn(200000, dtype=C64).numpy()
    assert z.dtype == np.complex64
    np.testing.assert_allclose([z.real.var(), z.imag.var()], [0.5, 0.5], atol=0.01)
    np.testing.assert_allclose([z.real.mean(), z.imag.mean()], [0, 0], atol=0.01)


def test_numpy_interop_shares_memory():
    a = np.array([1 + 2j, 3 - 4j])
    t = jg.from_numpy(a)
    assert t.dtype is C128
    a[0] = 5j
    assert t[0].item() == 5j
    assert t.numpy() is a or np.shares_memory(t.numpy(), a)
    assert jg.from_numpy(a.astype(np.complex64)).dtype is C64
    assert jg.tensor(np.complex64(1 + 1j)).dtype is C64


def test_item_and_python_numbers():
    z = jg.tensor(1 + 2j)
    assert z.item() == 1 + 2j and isinstance(z.item(), complex)
    assert float(jg.tensor(2 + 0j)) == 2.0 and int(jg.tensor(3 + 0j)) == 3
    with pytest.raises(RuntimeError, match="value cannot be converted to type double without overflow"):
        float(z)
    with pytest.raises(RuntimeError, match="value cannot be converted to type int64_t without overflow"):
        int(z)


def test_casts():
    t = jg.tensor([1, 2])
    assert t.to(complex).dtype is C128 and t.to(C64).tolist() == [1, 2]
    assert jg.tensor([1.5 + 1j]).to(C128).dtype is C128


@pytest.mark.parametrize("value,text", [
    ([1 + 2j, 3.5 - 1e-3j], "tensor([1.0000+2.0000e+00j, 3.5000-1.0000e-03j])"),
    ([[1 + 2j, 3 - 4j]], "tensor([[1.+2.j, 3.-4.j]])"),
    (1 + 0j, "tensor(1.+0.j)"),
    ([0j, 0j], "tensor([0.+0.j, 0.+0.j])"),
])
def test_repr(value, text):
    assert repr(jg.tensor(value)) == text


def test_repr_dtype_suffix_and_requires_grad():
    assert repr(jg.tensor([1 + 2j, 1e5j], dtype=C128)) == \
        "tensor([1.+2.0000e+00j, 0.+1.0000e+05j], dtype=jitgrad.complex128)"
    assert repr(jg.tensor([1j], requires_grad=True)) == "tensor([0.+1.j], requires_grad=True)"
    jg.set_default_dtype(F64)
    try:
        assert repr(jg.tensor([1j])) == "tensor([0.+1.j])"  # complex128 is the default complex dtype now
    finally:
        jg.set_default_dtype(F32)


def test_complex_tensors_can_require_grad():
    assert jg.zeros(2, dtype=C64, requires_grad=True).requires_grad
    with pytest.raises(RuntimeError, match="only Tensors of floating point"):
        jg.zeros(2, dtype=jg.int64).requires_grad_()


def test_backward_of_a_complex_scalar_is_refused():
    z = jg.tensor([1 + 2j], requires_grad=True)
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for real scalar outputs but got "
                                           "jitgrad.complex64"):
        (z * 2).sum().backward()


def test_default_dtype_stays_real():
    with pytest.raises(TypeError, match="only floating-point types are supported as the default type"):
        jg.set_default_dtype(C64)
