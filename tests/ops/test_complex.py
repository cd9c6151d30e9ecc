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


# ---------------------------------------------------------------------- elementwise ops against NumPy
def _z(shape, dtype=np.complex128, seed=0, lo=-2.0, hi=2.0):
    rng = np.random.default_rng(seed)
    return (rng.uniform(lo, hi, shape) + 1j * rng.uniform(lo, hi, shape)).astype(dtype)


UNARY = [("neg", np.negative), ("exp", np.exp), ("log", np.log), ("sqrt", np.sqrt), ("sin", np.sin),
         ("cos", np.cos), ("tan", np.tan), ("sinh", np.sinh), ("cosh", np.cosh), ("tanh", np.tanh),
         ("sigmoid", lambda z: 1 / (1 + np.exp(-z))), ("reciprocal", lambda z: 1 / z), ("square", np.square),
         ("rsqrt", lambda z: 1 / np.sqrt(z)), ("expm1", np.expm1), ("log1p", np.log1p), ("log2", np.log2),
         ("log10", np.log10), ("abs", np.abs), ("angle", np.angle), ("conj", np.conj), ("conj_physical", np.conj),
         ("sgn", lambda z: z / np.abs(z)), ("isnan", np.isnan), ("isfinite", np.isfinite), ("isinf", np.isinf)]


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
@pytest.mark.parametrize("name,ref", UNARY, ids=[n for n, _ in UNARY])
def test_unary_against_numpy(name, ref, dtype):
    a = _z((3, 4), dtype)
    a.T[0, 0] = 0.5 - 0.25j
    got = getattr(jg, name)(jg.from_numpy(a.T))  # (a non-contiguous input)
    want = ref(a.T)
    assert got.dtype is D.from_np(want.dtype)
    tol = dict(rtol=2e-6, atol=1e-6) if dtype == np.complex64 else dict(rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got.resolve_conj().numpy(), want, **tol)  # (conj: a lazy view)


BINARY = [("add", np.add), ("sub", np.subtract), ("mul", np.multiply), ("div", np.divide), ("pow", np.power),
          ("eq", np.equal), ("ne", np.not_equal)]


@pytest.mark.parametrize("name,ref", BINARY, ids=[n for n, _ in BINARY])
def test_binary_against_numpy_with_real_and_complex_mixes(name, ref):
    z, w, x = _z((2, 3)), _z((3,), seed=1), np.random.default_rng(2).uniform(0.5, 2, (2, 1))
    fn = getattr(jg, name)
    for a, b in [(z, w), (z, x), (x, w), (z, 1.5), (2.0, w), (z, 0.5 - 1j), (z.astype(np.complex64), x)]:
        ta = jg.tensor(a) if isinstance(a, np.ndarray) else a
        tb = jg.tensor(b) if isinstance(b, np.ndarray) else b
        got = fn(ta, tb)
        want = ref(np.asarray(a), np.asarray(b))
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-6)
        if want.dtype.kind == "c":
            assert got.dtype.is_complex


def test_operators_and_in_place_forms():
    z = jg.tensor(_z((4,)))
    w = jg.tensor(_z((4,), seed=1))
    zn, wn = z.numpy().copy(), w.numpy()
    np.testing.assert_allclose((z + w * 2 - 1j / w).numpy(), zn + wn * 2 - 1j / wn)
    np.testing.assert_allclose((2 ** z).numpy(), 2 ** zn)
    np.testing.assert_allclose(abs(-z).numpy(), np.abs(zn))
    t = z.clone()
    t += w
    t *= 1j
    t /= 2
    t.sub_(w, alpha=0.5 - 1j)
    t.exp_()
    np.testing.assert_allclose(t.numpy(), np.exp(((zn + wn) * 1j / 2) - (0.5 - 1j) * wn))
    np.testing.assert_array_equal(z.numpy(), zn)  # (clone: z itself unchanged)


def test_reductions_and_products():
    z, w = _z((3, 4)), _z((4, 2), seed=1)
    t = jg.tensor(z)
    np.testing.assert_allclose(t.sum().item(), z.sum())
    np.testing.assert_allclose(t.sum(0).numpy(), z.sum(0))
    np.testing.assert_allclose(t.mean(1, keepdim=True).numpy(), z.mean(1, keepdims=True))
    np.testing.assert_allclose(t.prod(1).numpy(), z.prod(1))
    np.testing.assert_allclose(jg.cumsum(t, 1).numpy(), np.cumsum(z, 1))
    np.testing.assert_allclose(t.var().item(), z.var(ddof=1))
    np.testing.assert_allclose(t.std(0).numpy(), z.std(0, ddof=1))
    np.testing.assert_allclose(t.norm().item(), np.linalg.norm(z))
    np.testing.assert_allclose((t @ jg.tensor(w)).numpy(), z @ w)
    np.testing.assert_allclose(t.mm(jg.tensor(w)).numpy(), z @ w)
    np.testing.assert_allclose(jg.bmm(t[None], jg.tensor(w)[None]).numpy(), (z @ w)[None])
    np.testing.assert_allclose(jg.einsum("ij,jk->ik", t, jg.tensor(w)).numpy(), z @ w)
    with pytest.raises(RuntimeError, match="expected m1 and m2 to have the same dtype, but got: c10::complex<double> "
                                           "!= double"):
        t.mm(jg.tensor(w.real))  # (as PyTorch: GEMM does not promote)


def test_shape_ops_and_indexing():
    z = _z((2, 3))
    t = jg.tensor(z)
    np.testing.assert_array_equal(t.T.numpy(), z.T)
    np.testing.assert_array_equal(t.reshape(3, 2).numpy(), z.reshape(3, 2))
    np.testing.assert_array_equal(t[:, 1].numpy(), z[:, 1])
    np.testing.assert_array_equal(t[jg.tensor([1, 0])].numpy(), z[[1, 0]])
    np.testing.assert_array_equal(t[t.abs() > 1].numpy(), z[np.abs(z) > 1])
    np.testing.assert_array_equal(jg.cat([t, t]).numpy(), np.concatenate([z, z]))
    np.testing.assert_array_equal(jg.stack([t, t], 1).numpy(), np.stack([z, z], 1))
    np.testing.assert_array_equal(jg.where(t.abs() > 1, t, 0).numpy(), np.where(np.abs(z) > 1, z, 0))
    np.testing.assert_array_equal(t.flip(0).numpy(), z[::-1])
    u = t.clone()
    u[0, 0] = 5j
    assert u[0, 0].item() == 5j and t[0, 0].item() == z[0, 0]


# ---------------------------------------------------------------------- views: real, imag, view_as_real/complex
def test_real_and_imag_are_views():
    z = jg.tensor([1 + 2j, 3 - 4j])
    assert z.real.dtype is F32 and z.imag.tolist() == [2.0, -4.0]
    z.real.mul_(10)
    z.imag[1] = 7
    assert z.tolist() == [10 + 2j, 30 + 7j]
    z.real = jg.tensor([0.5, 0.25])
    assert z.tolist() == [0.5 + 2j, 0.25 + 7j]
    x = jg.tensor([1.0, 2.0])
    assert jg.real(x) is x and x.real is x
    with pytest.raises(RuntimeError, match="imag is not implemented for tensors with non-complex dtypes."):
        x.imag


def test_view_as_real_and_view_as_complex_share_memory():
    z = jg.tensor([[1 + 2j, 3 - 4j]], dtype=C128)
    r = jg.view_as_real(z)
    assert r.dtype is F64 and r.shape == (1, 2, 2) and r.tolist() == [[[1, 2], [3, -4]]]
    r[0, 1, 1] = 9
    assert z[0, 1].item() == 3 + 9j
    c = jg.view_as_complex(r)
    assert c.dtype is C128 and c.tolist() == z.tolist()
    c[0, 0] = 0j
    assert z[0, 0].item() == 0
    np.testing.assert_array_equal(jg.view_as_real(z.T).numpy(), np.stack([z.numpy().T.real, z.numpy().T.imag], -1))
    with pytest.raises(RuntimeError, match="Tensor must have a last dimension of size 2"):
        jg.view_as_complex(jg.ones(3))
    with pytest.raises(RuntimeError, match="Tensor must have a last dimension with stride 1"):
        jg.view_as_complex(jg.ones(2, 3).T)
    with pytest.raises(RuntimeError, match="view_as_complex is only supported for float and double tensors, but got "
                                           "a tensor of scalar type: Long"):
        jg.view_as_complex(jg.ones(2, dtype=jg.int64))
    with pytest.raises(RuntimeError, match="view_as_real is only supported for complex tensors"):
        jg.view_as_real(jg.ones(2))


def test_conj():
    z = jg.tensor([1 + 2j])
    assert z.conj().tolist() == [1 - 2j] and jg.conj_physical(z).tolist() == [1 - 2j]
    assert z.conj().is_conj() and z.resolve_conj() is z  # (the lazy view: tests/ops/test_conj_view.py)
    x = jg.tensor([1.0])
    assert x.conj() is x  # a real tensor's conj is itself, as PyTorch's
    assert jg.conj_physical(x) is not x and jg.conj_physical(x).tolist() == [1.0]
    t = z.clone()
    t.conj_physical_()
    assert t.tolist() == [1 - 2j]


def test_complex_and_polar():
    re, im = jg.tensor([1.0, -2.0]), jg.tensor([0.5, 3.0])
    c = jg.complex(re, im)
    assert c.dtype is C64 and c.tolist() == [1 + 0.5j, -2 + 3j]
    assert jg.complex(re.double(), im.double()).dtype is C128
    p = jg.polar(jg.tensor([2.0], dtype=F64), jg.tensor([np.pi / 2], dtype=F64))
    np.testing.assert_allclose(p.numpy(), [2j], atol=1e-15)
    with pytest.raises(RuntimeError, match="Expected object of scalar type Float but got scalar type Double"):
        jg.complex(re, im.double())


# ---------------------------------------------------------------------- PyTorch's refusals
@pytest.mark.parametrize("call,exc,message", [
    (lambda z: z < z, NotImplementedError, "\"lt_cpu\" not implemented for 'ComplexFloat'"),
    (lambda z: z >= 1, NotImplementedError, "\"ge_cpu\" not implemented for 'ComplexFloat'"),
    (lambda z: jg.max(z), NotImplementedError, "\"max_all\" not implemented for 'ComplexFloat'"),
    (lambda z: z.max(0), RuntimeError, "max(): does not support complex input"),
    (lambda z: z.amin(), NotImplementedError, "\"min_values_cpu\" not implemented for 'ComplexFloat'"),
    (lambda z: z.argmax(), RuntimeError, "argmax(): does not support complex input"),
    (lambda z: jg.sort(z), RuntimeError, " Sort does not support complex dtypes on CPU"),
    (lambda z: jg.topk(z, 1), RuntimeError, " topk does not support complex dtypes on CPU"),
    (lambda z: jg.clamp(z, 0, 1), NotImplementedError, "clamp is not supported for complex types"),
    (lambda z: jg.relu(z), NotImplementedError, "clamp is not supported for complex types"),
    (lambda z: jg.maximum(z, z), RuntimeError, "maximum not implemented for complex tensors."),
    (lambda z: jg.floor(z), NotImplementedError, "floor is not supported for complex inputs"),
    (lambda z: jg.sign(z), NotImplementedError, "Unlike NumPy, torch.sign is not intended to support complex numbers. "
                                                "Please use torch.sgn instead."),
    (lambda z: z // z, NotImplementedError, "\"div_floor_cpu\" not implemented for 'ComplexFloat'"),
    (lambda z: z % z, NotImplementedError, "\"remainder_cpu\" not implemented for 'ComplexFloat'"),
    (lambda z: jg.atan2(z, z), NotImplementedError, "\"atan2_cpu\" not implemented for 'ComplexFloat'"),
    (lambda z: jg.erf(z), NotImplementedError, "\"erf_vml_cpu\" not implemented for 'ComplexFloat'"),
    (lambda z: jg.isposinf(z), RuntimeError, "isposinf does not support complex inputs."),
    (lambda z: z.abs_(), RuntimeError, "In-place abs is not supported for complex tensors."),
    (lambda z: jg.ones(2).add_(z), RuntimeError, "result type ComplexFloat can't be cast to the desired output type "
                                                 "Float"),
])
def test_refusals(call, exc, message):
    z = jg.tensor([1 + 2j, 3 - 1j])
    with pytest.raises(exc) as info:
        call(z)
    assert str(info.value) == message


@pytest.mark.torch
def test_refusals_word_for_word_as_pytorch():
    torch = pytest.importorskip("torch")
    calls = ["z < z", "lib.max(z)", "z.max(0)", "lib.sort(z)", "lib.topk(z, 1)", "lib.clamp(z, 0, 1)",
             "lib.maximum(z, z)", "lib.floor(z)", "lib.sign(z)", "z // z", "lib.atan2(z, z)", "z.argmax()",
             "lib.amax(z)", "lib.isposinf(z)", "z.abs_()", "lib.ones(2).add_(z)", "float(z[0])",
             "lib.view_as_complex(lib.ones(3))", "lib.nn.functional.leaky_relu(z)", "lib.round(z)"]
    for code in calls:
        errors = []
        for lib in (jg, torch):
            z = lib.tensor([1 + 2j, 3 - 1j])
            with pytest.raises(Exception) as info:
                eval(code, {"lib": lib, "z": z})
            errors.append((type(info.value).__name__, str(info.value).split("\n")[0]))
        assert errors[0] == errors[1], code


@pytest.mark.torch
def test_printing_as_pytorch():
    torch = pytest.importorskip("torch")
    for value, dtype in [([1 + 2j, 3.5 - 1e-3j], None), ([[1 + 2j, -3 - 4j], [0.5j, 2]], None), (1 + 0j, None),
                         ([1e-5 + 1e5j], "complex128"), ([1.25 + 1j] * 3, None), ([[1j] * 12] * 2, None)]:
        a = repr(jg.tensor(value, dtype=getattr(jg, dtype) if dtype else None))
        b = repr(torch.tensor(value, dtype=getattr(torch, dtype) if dtype else None))
        assert a == b.replace("torch.", "jitgrad."), (a, b)
