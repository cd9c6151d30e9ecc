"""Complex inputs everywhere PyTorch's CPU kernels take them: every op-table entry's complex sample side by side
with PyTorch (values, or the same error word for word), and the complex paths added to the inverse trigonometric
functions, exp2, sinc, silu, logaddexp, lerp, cumprod, logsumexp, the GEMM family, vdot, vecdot, float_power
and einsum against NumPy/cmath and finite differences (these run without torch)."""
import cmath
import re

import numpy as np
import pytest

import helpers
import jitgrad as jg
from jitgrad.autograd import gradcheck, gradgradcheck
from jitgrad.ops._table import OPS

C128 = jg.complex128


def _torch_callable(torch, op):
    """PyTorch's function for an entry's public callable (torch.<name>, torch.nn.functional.<name>,
    torch.linalg, torch.special), or None."""
    if op.name.startswith("linalg_") and callable(getattr(torch.linalg, op.name[len("linalg_"):], None)):
        return getattr(torch.linalg, op.name[len("linalg_"):])  # (before torch.lu_solve, whose arguments differ)
    call = helpers.call_of(op)
    names = (getattr(call, "__name__", op.name), op.name) + tuple(op.exposure.api)
    spaces = (torch.nn.functional, torch) if "functional" in (getattr(call, "__module__", "") or "") else \
        (torch, torch.nn.functional)
    for n in names:
        for space in spaces + (torch.special,):
            f = getattr(space, n, None)
            if callable(f):
                return f
    return None


def _complex_entries():
    out = []
    for name, op in sorted(OPS.items()):
        try:
            samples = helpers.samples_of(op, np.complex128)
        except (KeyError, TypeError, ValueError):
            continue
        if samples and any(isinstance(a, np.ndarray) and a.dtype.kind == "c" for a in samples[0][0]):
            out.append(name)
    return out


# Where the sweep differs from PyTorch on purpose, or where PyTorch's callable takes other arguments:
# entry -> why. (Each is listed in the report; the rest must agree.)
DIFFERENT = {
    # PyTorch's complex refusal names another kernel ("softshrink_check") than its refusal of other dtypes
    "softshrink": "kernel name in the message",
    # the entry's call gives |U| (singular vectors are unique up to a phase each): tests/linalg/test_linalg_complex.py
    "linalg_svd": "the call's U is |U|",
    # jitgrad's own internal entries and ones whose torch function takes other arguments than the entry's call
    **{n: "no PyTorch function of that signature" for n in (
        "cast", "copy_from", "expand", "fft_c2c", "fft_c2r", "index", "index_put_zeros", "move", "repeat", "select",
        "slice", "unsafe_view", "view", "embedding")},
}


def _outcome(lib, fn, args, kwargs):
    a, k = helpers.build(args, kwargs, lambda x: lib.from_numpy(x.copy()))
    try:
        r = fn(*a, **k)
    except Exception as e:  # noqa: BLE001  (the outcome compared is the error itself)
        return "error", (type(e).__name__, str(e).split("\n")[0])
    r = r[0] if isinstance(r, (tuple, list)) else r
    return "value", r.detach().resolve_conj().numpy() if hasattr(r, "detach") else np.asarray(r)


@pytest.mark.torch
@pytest.mark.parametrize("name", _complex_entries())
def test_entry_on_complex_inputs_as_pytorch(name):
    """The entry's first complex128 sample gives PyTorch's values, or PyTorch's error (type and message)."""
    torch = pytest.importorskip("torch")
    if name in DIFFERENT:
        pytest.skip(DIFFERENT[name])
    op = OPS[name]
    fn = _torch_callable(torch, op)
    assert fn is not None, name
    args, kwargs = helpers.samples_of(op, np.complex128)[0]
    want = _outcome(torch, fn, args, kwargs)
    got = _outcome(jg, helpers.call_of(op), args, kwargs)
    assert got[0] == want[0], (got, want)
    if want[0] == "error":
        assert got[1] == want[1]
    else:
        assert got[1].shape == want[1].shape and got[1].dtype == want[1].dtype
        np.testing.assert_allclose(got[1], want[1], rtol=1e-6, atol=1e-9, equal_nan=True)


# ---------------------------------------------------------------------- public functions beyond the entries
FUNCTIONS = {
    "mean": lambda L, a, v: L.mean(v), "prod": lambda L, a, v: L.prod(v), "cumprod": lambda L, a, v: L.cumprod(a, 1),
    "dot": lambda L, a, v: L.dot(v, v), "vdot": lambda L, a, v: L.vdot(v, v * 2j), "inner": lambda L, a, v: L.inner(v, v),
    "vecdot": lambda L, a, v: L.linalg.vecdot(a, v), "pow": lambda L, a, v: L.pow(v, v), "rpow": lambda L, a, v: 2 ** v,
    "logsumexp": lambda L, a, v: L.logsumexp(a, 1), "logcumsumexp": lambda L, a, v: L.logcumsumexp(a, 0),
    "softmax": lambda L, a, v: L.softmax(v, 0), "silu": lambda L, a, v: L.nn.functional.silu(v),
    "mv": lambda L, a, v: a @ v, "trace": lambda L, a, v: L.trace(a), "diag": lambda L, a, v: L.diag(a),
    "tril": lambda L, a, v: L.tril(a), "kron": lambda L, a, v: L.kron(a, a), "cross": lambda L, a, v: L.linalg.cross(v, v),
    "roll": lambda L, a, v: L.roll(a, 1, 0), "var": lambda L, a, v: L.var(v), "norm": lambda L, a, v: L.norm(v),
    "tensordot": lambda L, a, v: L.tensordot(a, a, 1), "einsum": lambda L, a, v: L.einsum("ij,j->i", a, v),
    "einsum_mixed_product": lambda L, a, v: L.einsum("i,j->ij", v.real.float(), v),
    "einsum_mixed_sum": lambda L, a, v: L.einsum("ij,j->i", a.real.float(), v.real),
    "outer": lambda L, a, v: L.outer(v, v), "addmm": lambda L, a, v: L.addmm(a, a, a, beta=0.5, alpha=2j),
    "baddbmm": lambda L, a, v: L.baddbmm(a[None], a[None], a[None]), "addmv": lambda L, a, v: L.addmv(v, a, v),
    "linear": lambda L, a, v: L.nn.functional.linear(v, a, v), "lerp": lambda L, a, v: L.lerp(v, v * 2, 0.3 + 1j),
    "exp2": lambda L, a, v: L.exp2(v), "sinc": lambda L, a, v: L.sinc(v), "logaddexp": lambda L, a, v: L.logaddexp(v, v.flip(0)),
    "asin": lambda L, a, v: L.asin(v), "acosh": lambda L, a, v: L.acosh(v), "atanh": lambda L, a, v: L.atanh(v),
    "float_power": lambda L, a, v: L.float_power(v, 2), "masked_select": lambda L, a, v: L.masked_select(v, v.real > 0),
    "any": lambda L, a, v: v.any(), "logical_and": lambda L, a, v: L.logical_and(v, v * 0),
    "pad_reflect": lambda L, a, v: L.nn.functional.pad(a[None], (1, 1), mode="reflect"),
    "pixel_shuffle": lambda L, a, v: L.nn.functional.pixel_shuffle(L.stack([a, a, a, a])[None], 2),
    "mse_loss": lambda L, a, v: L.nn.functional.mse_loss(v, 2 * v), "nansum": lambda L, a, v: L.nansum(v),
}


@pytest.mark.torch
@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_public_function_on_complex_inputs_as_pytorch(name):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((3, 3)) + 1j * rng.standard_normal((3, 3))
    v = rng.standard_normal(3) + 1j * rng.standard_normal(3)
    fn = FUNCTIONS[name]
    want = _outcome(torch, lambda a, v: fn(torch, a, v), (a, v), {})
    got = _outcome(jg, lambda a, v: fn(jg, a, v), (a, v), {})
    assert got[0] == want[0], (got, want)
    if want[0] == "error":
        assert got[1] == want[1]
    else:
        assert got[1].dtype == want[1].dtype
        np.testing.assert_allclose(got[1], want[1], rtol=1e-6, atol=1e-9)


@pytest.mark.torch
@pytest.mark.parametrize("name", ["asin", "acos", "atan", "asinh", "acosh", "atanh", "exp2", "sinc", "logsumexp",
                                  "logcumsumexp", "cumprod", "logaddexp", "vdot", "addmm", "lerp"])
def test_gradients_on_complex_inputs_as_pytorch(name):
    torch = pytest.importorskip("torch")
    fns = {"logsumexp": lambda L, x: L.logsumexp(x, 0), "logcumsumexp": lambda L, x: L.logcumsumexp(x, 0),
           "cumprod": lambda L, x: L.cumprod(x, 0), "logaddexp": lambda L, x: L.logaddexp(x, x.flip(0) * 2),
           "vdot": lambda L, x: L.vdot(x * 1j, x.flip(0)), "lerp": lambda L, x: L.lerp(x, x.flip(0), x * 0.5j),
           "addmm": lambda L, x: L.addmm(x[:1, None], x[None, :], x[:, None] * 1j, alpha=1 - 2j, beta=0.5j)}
    fn = fns.get(name, lambda L, x: getattr(L, name)(x))
    z = np.array([0.5 + 0.5j, 0.2 - 0.3j, -0.4 + 0.1j])
    grads = []
    for L in (torch, jg):
        x = L.tensor(z, requires_grad=True)
        y = fn(L, x)
        (y.abs() + y.real * 0.3).sum().backward()
        grads.append(x.grad.resolve_conj().numpy())
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-7, atol=1e-12)


def test_message_names_pytorch_s_kernel():
    # (the entry's refusal of other dtypes names the kernel: so does its refusal of complex ones)
    with pytest.raises(NotImplementedError, match="^\"log_sigmoid_cpu\" not implemented for 'ComplexDouble'$"):
        jg.nn.functional.logsigmoid(jg.tensor([1j], dtype=C128))


# ---------------------------------------------------------------------- without torch: cmath, NumPy, finite differences
Z = np.array([0.3 + 0.4j, -1.5 + 0.2j, 2 - 1j, 0j, 1 + 0j, -2 + 0j, 0.5 - 2j])


@pytest.mark.parametrize("name,ref", [
    ("asin", cmath.asin), ("acos", cmath.acos), ("atan", cmath.atan), ("asinh", cmath.asinh),
    ("acosh", cmath.acosh), ("atanh", lambda z: cmath.atanh(z) if abs(z) != 1 else complex("nan")),
    ("exp2", lambda z: 2 ** z if z else 1 + 0j), ("sinc", lambda z: cmath.sin(cmath.pi * z) / (cmath.pi * z) if z else 1 + 0j)])
@pytest.mark.parametrize("dtype", [jg.complex64, jg.complex128])
def test_unary_twins_against_cmath(name, ref, dtype):
    got = getattr(jg, name)(jg.tensor(Z, dtype=dtype)).numpy()
    assert got.dtype == dtype.np
    want = np.array([ref(complex(z)) for z in Z])
    finite = np.isfinite(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=2e-6 if dtype is jg.complex64 else 1e-14, atol=1e-7)


def test_poles_are_infinite_as_c_s():
    assert jg.atanh(jg.tensor([1 + 0j, -1 + 0j], dtype=C128)).tolist() == [complex(np.inf, 0), complex(-np.inf, 0)]
    assert np.isinf(jg.atan(jg.tensor([1j], dtype=C128)).numpy().imag).all()


def test_logaddexp_logsumexp_logcumsumexp_values():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((3, 4)) + 1j * rng.standard_normal((3, 4))
    b = rng.standard_normal((3, 4)) + 1j * rng.standard_normal((3, 4))
    close = lambda x, y: np.testing.assert_allclose(np.exp(x), np.exp(y), rtol=1e-12)  # noqa: E731  (mod 2 pi i)
    close(jg.logaddexp(jg.tensor(a), jg.tensor(b)).numpy(), np.log(np.exp(a) + np.exp(b)))
    close(jg.logsumexp(jg.tensor(a), 1).numpy(), np.log(np.exp(a).sum(1)))
    close(jg.logsumexp(jg.tensor(a), (0, 1), keepdim=True).numpy(), np.log(np.exp(a).sum(keepdims=True)))
    close(jg.logcumsumexp(jg.tensor(a), 1).numpy(), np.log(np.cumsum(np.exp(a), 1)))
    big = jg.tensor([1000 + 1j, 1000 - 1j], dtype=C128)  # shifted by the largest real part: no overflow
    np.testing.assert_allclose(jg.logsumexp(big, 0).item(), 1000 + np.log(2 * np.cos(1)), rtol=1e-14)


def test_products_conjugate_as_pytorch_s():
    rng = np.random.default_rng(2)
    x, y = (rng.standard_normal((2, 3)) + 1j * rng.standard_normal((2, 3)) for _ in range(2))
    assert np.isclose(jg.vdot(jg.tensor(x[0]), jg.tensor(y[0])).item(), np.vdot(x[0], y[0]))
    np.testing.assert_allclose(jg.linalg.vecdot(jg.tensor(x), jg.tensor(y)).numpy(), (x.conj() * y).sum(-1))
    assert jg.float_power(jg.tensor(x), 2).dtype is C128 and jg.float_power(jg.tensor([2.0]), 1j).dtype is C128
    assert jg.float_power(jg.tensor([2.0]), 2).dtype is jg.float64
    np.testing.assert_allclose(jg.cumprod(jg.tensor(x), 1).numpy(), np.cumprod(x, 1))


def test_einsum_promotes_on_its_product_path_only():
    a, b = jg.randn(2, 3), jg.randn(3, dtype=jg.float64)
    assert jg.einsum("ij,j->ij", a, b).dtype is jg.float64 and jg.einsum("i,j->ij", b, a[0]).dtype is jg.float64
    assert jg.einsum("i,j->ij", a[0], b.to(C128)).dtype is C128
    assert jg.einsum("i,i,i->", b, a[0], b).dtype is jg.float64  # (the first pair keeps i: a product)
    np.testing.assert_allclose(jg.einsum("ij,j->ij", a, b).numpy(), a.numpy() * b.numpy())
    with pytest.raises(RuntimeError, match="^expected scalar type Float but found Double$"):
        jg.einsum("ij,j->i", a, b)
    with pytest.raises(RuntimeError, match="^expected scalar type Double but found Float$"):
        jg.einsum("ij,jk->ik", a.double(), a.T)


def test_silu_computes_complex_values_but_refuses_their_gradient():
    z = jg.tensor(Z, dtype=C128)
    np.testing.assert_allclose(jg.nn.functional.silu(z).numpy(), Z / (1 + np.exp(-Z)))
    with pytest.raises(RuntimeError, match=re.escape("silu does not support automatic differentiation for outputs "
                                                     "with complex dtype.")):
        jg.nn.functional.silu(z.requires_grad_())
    with jg.no_grad():
        jg.nn.functional.silu(z)


@pytest.mark.parametrize("fn", [lambda x: jg.logsumexp(x, 1), lambda x: jg.logcumsumexp(x, 0),
                                lambda x: jg.logsumexp(x, (0, 1), keepdim=True), lambda x: jg.vdot(x[0], x[1]),
                                lambda x: jg.linalg.vecdot(x, x.flip(0)), lambda x: jg.float_power(x, 3),
                                lambda x: jg.einsum("ij,kj->ik", x, x)],
                         ids=["logsumexp", "logcumsumexp", "logsumexp_all", "vdot", "vecdot", "float_power", "einsum"])
def test_composed_complex_gradients_by_finite_differences(fn):
    rng = np.random.default_rng(3)
    x = jg.tensor(rng.standard_normal((2, 3)) + 1j * rng.standard_normal((2, 3)), requires_grad=True)
    assert gradcheck(fn, (x,))
    assert gradgradcheck(fn, (x,))
