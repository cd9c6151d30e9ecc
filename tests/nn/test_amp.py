"""Reduced precision and mixed-precision training: float16/bfloat16 storage and casts, their ops
computed in float32 and rounded (held to NumPy: float16 is NumPy's, bfloat16 ml_dtypes'), PyTorch's
type promotion, autocast regions and GradScaler.

Every entry's samples in float16 and bfloat16 against the same op on the rounded inputs in float32,
rounded once, bit for bit, are in the op matrix (tests/ops/test_op_matrix.py).
"""
import io
import math
import warnings

import ml_dtypes
import numpy as np
import pytest

import jitgrad as jg
from helpers import rounded, values
from jitgrad.ops import OPS

F16, BF16, F32, F64 = jg.float16, jg.bfloat16, jg.float32, jg.float64
REDUCED = [F16, BF16]
IDS = ["float16", "bfloat16"]


@pytest.fixture(autouse=True)
def _autocast_restored():
    """Every test starts and must end outside autocast."""
    assert not jg.is_autocast_enabled("cpu") and jg.get_autocast_dtype("cpu") is BF16
    yield
    assert not jg.is_autocast_enabled("cpu") and jg.get_autocast_dtype("cpu") is BF16, "test left autocast on"


# ------------------------------------------------------------------ the dtypes
def test_dtype_attributes_and_names():
    assert jg.half is F16 and jg.bfloat16 is BF16
    for d, name, legacy in [(F16, "float16", "HalfTensor"), (BF16, "bfloat16", "BFloat16Tensor")]:
        assert d.is_floating_point and d.is_signed and d.itemsize == 2
        assert repr(d) == "jitgrad." + name and d.compute is F32
        t = jg.ones(2, dtype=d)
        assert t.dtype is d and t.element_size() == 2 and t.is_floating_point()
        assert t.type() == "jitgrad." + legacy and isinstance(t, getattr(jg, legacy))
        assert repr(t) == "tensor([1., 1.], dtype=jitgrad.%s)" % name
        assert jg.tensor(1e-5, dtype=d).__repr__().endswith("dtype=jitgrad.%s)" % name)
    assert repr(jg.tensor([1.5, 2.7], dtype=BF16)) == "tensor([1.5000, 2.7031], dtype=jitgrad.bfloat16)"
    assert repr(jg.tensor([0.1, 0.2], dtype=F16, requires_grad=True)) == \
        "tensor([0.1000, 0.2000], dtype=jitgrad.float16, requires_grad=True)"


@pytest.mark.parametrize("dt", REDUCED, ids=IDS)
def test_casts_round_trip(dt):
    x = np.array([0.1, -1.7, 3.14159, 65504.0 if dt is F16 else 1e30, 1e-8, -0.0], dtype=np.float32)
    t = jg.tensor(x)
    for h in (t.to(dt), t.half() if dt is F16 else t.bfloat16(), t.type(dt), jg.tensor(x, dtype=dt),
              jg.tensor(x.tolist(), dtype=dt), jg.as_tensor(x, dtype=dt)):
        assert h.dtype is dt
        np.testing.assert_array_equal(values(h), rounded(x, dt))
        back = h.float()  # every float16/bfloat16 value is a float32 value: exact
        assert back.dtype is F32 and (back.to(dt).float() == back).all()
    h = t.to(dt)
    other = BF16 if dt is F16 else F16
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(values(h.to(other)), rounded(rounded(x, dt), other))
    assert h[:3].to(jg.int32).tolist() == rounded(x[:3], dt).astype(np.int32).tolist() == [0, -1, 3]
    assert jg.tensor([True, False]).to(dt).tolist() == [1.0, 0.0]
    assert h.double().dtype is F64 and (h.double().float() == h.float()).all()


def test_numpy_interop():
    a = np.array([1.5, -2.25], dtype=np.float16)
    t = jg.from_numpy(a)
    assert t.dtype is F16 and np.shares_memory(t.numpy(), a)
    assert jg.tensor(a).dtype is F16 and jg.tensor(np.float16(2.5)).dtype is F16
    assert t.numpy().dtype == np.float16 and t.tolist() == [1.5, -2.25] and t[0].item() == 1.5
    b = jg.tensor([1.5, 2.7], dtype=BF16)
    with pytest.raises(TypeError, match="^Got unsupported ScalarType BFloat16$"):
        b.numpy()
    with pytest.raises(TypeError, match="Got unsupported ScalarType BFloat16"):
        np.asarray(b)
    assert b.tolist() == [1.5, 2.703125] and isinstance(b[1].item(), float)


@pytest.mark.parametrize("dt", REDUCED, ids=IDS)
def test_factories(dt):
    for t in (jg.zeros(2, 3, dtype=dt), jg.ones(2, dtype=dt), jg.empty(4, dtype=dt), jg.full((2,), 1.5, dtype=dt),
              jg.arange(5, dtype=dt), jg.linspace(0, 1, 5, dtype=dt), jg.eye(3, dtype=dt), jg.rand(50, dtype=dt),
              jg.randn(3, 4, dtype=dt), jg.zeros_like(jg.ones(2), dtype=dt), jg.ones(2).new_ones(3, dtype=dt)):
        assert t.dtype is dt
    r = values(jg.rand(2000, dtype=dt))
    assert r.min() >= 0 and r.max() < 1 and (r == rounded(r, dt)).all()  # drawn in the dtype: never rounds up to 1
    assert jg.randn_like(jg.ones(3, dtype=dt)).dtype is dt and jg.zeros(2, dtype=dt).new_zeros(2).dtype is dt
    with pytest.raises(RuntimeError, match="value cannot be converted to type c10::%s without overflow"
                       % ("Half" if dt is F16 else "BFloat16")):
        jg.full((2,), 1e6 if dt is F16 else 1e39, dtype=dt)


def test_save_and_load_keep_the_dtype():
    x = {"h": jg.tensor([0.1, 65504.0], dtype=F16), "b": jg.tensor([1.5, -3.1], dtype=BF16, requires_grad=True)}
    buf = io.BytesIO()
    jg.save(x, buf)
    buf.seek(0)
    y = jg.load(buf)
    for k in x:
        assert y[k].dtype is x[k].dtype and y[k].requires_grad == x[k].requires_grad
        assert (y[k].float() == x[k].float()).all()


def test_reduced_precision_default_dtype():
    jg.set_default_dtype(BF16)
    try:
        assert jg.tensor([1.5, 2.7]).dtype is BF16 and jg.ones(2).dtype is BF16 and jg.randn(2).dtype is BF16
        assert (jg.arange(3) * 2.5).dtype is BF16 and repr(jg.tensor([1.5, 2.7])) == "tensor([1.5000, 2.7031])"
    finally:
        jg.set_default_dtype(F32)
    with pytest.raises(TypeError, match="only floating-point types are supported as the default type"):
        jg.set_default_dtype(jg.int64)


# ------------------------------------------------------------------ type promotion
PROMOTION = [  # (a, b, result) as PyTorch's promote_types gives them
    (F16, F16, F16), (F16, F32, F32), (F16, F64, F64), (F16, BF16, F32), (BF16, F32, F32), (BF16, F64, F64),
    (F16, jg.int64, F16), (BF16, jg.int32, BF16), (F16, jg.bool, F16), (BF16, BF16, BF16)]


@pytest.mark.parametrize("a,b,result", PROMOTION)
def test_promote_types(a, b, result):
    assert jg.promote_types(a, b) is result and jg.promote_types(b, a) is result
    assert (jg.ones(2, dtype=a) + jg.ones(2, dtype=b)).dtype is result


def test_result_types_with_numbers_and_zero_dim_tensors():
    h, b = jg.ones(3, dtype=F16), jg.ones(3, dtype=BF16)
    assert (h + 1.5).dtype is F16 and (2 * b).dtype is BF16 and (h / 3).dtype is F16
    assert (h + jg.tensor(2.0)).dtype is F16  # a 0-d float32 tensor takes no part against a dims tensor
    assert (jg.ones(3, dtype=jg.int64) + jg.tensor(2.0, dtype=F16)).dtype is F16
    assert (jg.ones(3, dtype=jg.int32) * jg.tensor(2.0, dtype=BF16)).dtype is BF16
    assert (jg.arange(3) / jg.tensor(2.0, dtype=BF16)).dtype is BF16
    assert (h > 0.5).dtype is jg.bool and h.argmax().dtype is jg.int64
    assert jg.result_type(h, b) is F32 and jg.result_type(h, 1.0) is F16
    assert jg.cat([h, b]).dtype is F32 and jg.where(h > 0, h, b).dtype is F32


@pytest.mark.torch
def test_promotion_matches_pytorch():
    torch = pytest.importorskip("torch")
    names = ["bool", "int32", "int64", "float16", "bfloat16", "float32", "float64"]
    for a in names:
        for b in names:
            assert jg.promote_types(getattr(jg, a), getattr(jg, b)).name == \
                str(torch.promote_types(getattr(torch, a), getattr(torch, b))).split(".")[1]
        for number in (True, 2, 2.5):
            ours = (jg.ones(2, dtype=getattr(jg, a)) * number).dtype.name if a != "bool" or number is not True else None
            theirs = str((torch.ones(2, dtype=getattr(torch, a)) * number).dtype).split(".")[1]
            assert ours in (None, theirs), (a, number)


# ------------------------------------------------------------------ arithmetic: float32 compute, then rounding
@pytest.mark.parametrize("dt", REDUCED, ids=IDS)
def test_other_operands_are_rounded_to_the_result_type_first(dt):
    """As PyTorch casts operands to the common dtype before its float32 math: 0.1 enters x + 0.1 as dt's
    0.1; mul and div read a number or 0-d tensor unrounded (PyTorch's original scalar value)."""
    rng = np.random.default_rng(0)
    x32 = rounded(rng.standard_normal(500) * 3, dt).astype(np.float32)
    x = jg.tensor(x32).to(dt)
    s, s_dt = np.float32(0.1), np.float32(rounded(0.1, dt))
    for got, want in [(x + 0.1, x32 + s_dt), (0.1 - x, s_dt - x32), (x + jg.tensor(0.1), x32 + s_dt),
                      (x.abs() ** 1.1, np.abs(x32) ** np.float32(rounded(1.1, dt))),
                      (x * 0.1, x32 * s), (x / 0.1, x32 / s), (x * jg.tensor(0.1), x32 * s)]:
        assert got.dtype is dt
        np.testing.assert_array_equal(values(got), rounded(want, dt))
    assert (jg.tensor([0.1], dtype=dt) == 0.1).item() and (jg.tensor([0.1], dtype=dt) == jg.tensor(0.1)).item()
    ints = jg.tensor([2049, 4097])  # an int64 tensor against a dt 0-d tensor: the ints are rounded to dt
    assert (ints + jg.tensor(0.0, dtype=dt)).tolist() == rounded([2049, 4097], dt).tolist()


@pytest.mark.torch
@pytest.mark.parametrize("dt", IDS)
def test_results_match_pytorch_bit_for_bit(dt):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    a, b, c = (rng.standard_normal(s).astype(np.float32) for s in [(16, 9), (9, 5), (16, 9)])
    ops = [lambda m, x, y, z: x + 0.1, lambda m, x, y, z: x * 0.3, lambda m, x, y, z: x / 3,
           lambda m, x, y, z: 0.7 - x, lambda m, x, y, z: x * z, lambda m, x, y, z: x / z,
           lambda m, x, y, z: x.exp(), lambda m, x, y, z: x.tanh(), lambda m, x, y, z: x.sigmoid(),
           lambda m, x, y, z: x.abs().sqrt(), lambda m, x, y, z: x.abs() ** 1.7, lambda m, x, y, z: x.sum(),
           lambda m, x, y, z: x.mean(0), lambda m, x, y, z: x.var(1), lambda m, x, y, z: x @ y,
           lambda m, x, y, z: m.softmax(x, 1), lambda m, x, y, z: x.relu(), lambda m, x, y, z: x == 0.1,
           lambda m, x, y, z: m.nn.functional.mse_loss(x, z), lambda m, x, y, z: m.where(x > 0, x, 0.1),
           lambda m, x, y, z: m.nn.functional.linear(x, y.t())]
    for k, f in enumerate(ops):
        got = [f(m, *(m.tensor(v).to(getattr(m, dt)) for v in (a, b, c))) for m in (jg, torch)]
        assert str(got[0].dtype).split(".")[1] == str(got[1].dtype).split(".")[1], k
        np.testing.assert_array_equal(got[0].float().numpy(), got[1].float().numpy(), err_msg=str(k))


@pytest.mark.parametrize("dt", REDUCED, ids=IDS)
def test_grads_keep_the_leaf_dtype(dt):
    x = jg.tensor([1.0, 2.0, 3.0], dtype=dt, requires_grad=True)
    w = jg.tensor([0.5, -1.0, 2.0], requires_grad=True)  # float32
    y = (x * w).sum()
    assert y.dtype is F32
    y.backward()
    assert x.grad.dtype is dt and w.grad.dtype is F32
    np.testing.assert_array_equal(values(x.grad), [0.5, -1.0, 2.0])
    z = (x * x).exp().mean()  # fused VJPs (mul, exp) on dt operands, and grad accumulation in place
    z.backward()
    x32 = rounded([1.0, 2.0, 3.0], dt)
    g = rounded(rounded(np.exp(x32 * x32), dt) / 3, dt) * 2 * x32  # d mean(exp(x^2)) / dx
    np.testing.assert_allclose(values(x.grad), rounded(np.array([0.5, -1.0, 2.0]) + g, dt), rtol=2 ** -7)
    assert x.grad.dtype is dt


@pytest.mark.parametrize("dt", REDUCED, ids=IDS)
def test_reductions_accumulate_in_float32(dt):
    n = 3000 if dt is F16 else 1000  # a sum kept in dt would stall at 2048 (float16) / 256 (bfloat16)
    x = jg.ones(n, dtype=dt)
    assert x.sum().dtype is dt and x.sum().item() == n and x.mean().item() == 1.0
    y = jg.full((n,), 0.1, dtype=dt)
    assert y.sum().item() == float(rounded(n * float(rounded(0.1, dt)), dt))
    assert x.cumsum(0)[-1].item() == n and x.reshape(10, -1).sum(1).tolist() == [n / 10] * 10


@pytest.mark.parametrize("dt", REDUCED, ids=IDS)
def test_layers_and_losses(dt):
    """matmul, linear, conv, softmax and the losses on dt operands: their float32 values, rounded."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 3, 6, 6))
    w = rng.standard_normal((2, 3, 3, 3))
    cases = [(lambda a, b: jg.nn.functional.conv2d(a, b, padding=1), (x, w)),
             (lambda a, b: a @ b, (rng.standard_normal((2, 5, 3)), rng.standard_normal((3, 4)))),
             (lambda a, b: jg.nn.functional.linear(a, b), (rng.standard_normal((5, 3)), rng.standard_normal((2, 3)))),
             (lambda a: jg.softmax(a, -1), (rng.standard_normal((3, 5)),)),
             (lambda a: jg.nn.functional.log_softmax(a, 1), (rng.standard_normal((3, 5)),)),
             (lambda a, b: jg.nn.functional.mse_loss(a, b), (rng.standard_normal(8), rng.standard_normal(8))),
             (lambda a: jg.nn.functional.cross_entropy(a, jg.tensor([0, 2, 1])), (rng.standard_normal((3, 4)),)),
             (lambda a, b: jg.nn.functional.binary_cross_entropy_with_logits(a, b),
              (rng.standard_normal(6), rng.random(6)))]
    for fn, arrays in cases:
        ts = [jg.tensor(a, dtype=dt, requires_grad=True) for a in arrays]
        out = fn(*ts)
        ref = fn(*[t.detach().float() for t in ts])
        assert out.dtype is dt
        np.testing.assert_allclose(values(out), values(ref), rtol=2 ** -6, atol=2 ** -8)
        out.float().sum().backward()
        assert all(t.grad.dtype is dt for t in ts)


def test_clear_errors_for_mixed_gemm_operands():
    h, f = jg.ones(2, 2, dtype=F16), jg.ones(2, 2)
    with pytest.raises(RuntimeError, match=r"^expected m1 and m2 to have the same dtype, but got: c10::Half != float$"):
        h @ f
    with pytest.raises(RuntimeError, match=r"but got: float != c10::BFloat16$"):
        jg.mm(f, f.bfloat16())
    with pytest.raises(RuntimeError, match=r"^expected m1 and m2 to have the same dtype, but got: c10::Half != float$"):
        jg.nn.functional.linear(h, f)
    with pytest.raises(RuntimeError, match=r"^dot : expected both vectors to have same dtype, but found Half and "
                                           r"Float$"):
        jg.dot(h[0], f[0])


@pytest.mark.parametrize("dt", REDUCED, ids=IDS)
def test_modules_in_reduced_precision(dt):
    nn = jg.nn
    jg.manual_seed(0)
    for model, x in [(nn.Sequential(nn.Conv2d(2, 3, 3, padding=1), nn.BatchNorm2d(3), nn.ReLU(), nn.Flatten(),
                                    nn.Linear(48, 4), nn.LayerNorm(4)), jg.randn(2, 2, 4, 4)),
                     (nn.LSTM(5, 4, batch_first=True), jg.randn(2, 3, 5)),
                     (nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True), jg.randn(2, 3, 8))]:
        model = model.half() if dt is F16 else model.bfloat16()
        assert all(p.dtype is dt for p in model.parameters())
        out = model(x.to(dt))
        out = out[0] if isinstance(out, tuple) else out
        assert out.dtype is dt
        out.float().sum().backward()
        assert all(p.grad.dtype is dt for p in model.parameters())
        jg.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        jg.optim.AdamW(model.parameters()).step()


@pytest.mark.parametrize("dt", REDUCED, ids=IDS)
def test_optimizers_update_reduced_precision_parameters(dt):
    for make in (lambda p: jg.optim.SGD(p, lr=0.1, momentum=0.9), lambda p: jg.optim.Adam(p, lr=0.1)):
        w = jg.tensor([1.0, 2.0, 3.0], dtype=dt, requires_grad=True)
        opt = make([w])
        for _ in range(2):
            opt.zero_grad()
            (w * w).sum().backward()
            opt.step()
        assert w.dtype is dt and all(v.dtype is dt for v in opt.state[w].values() if v.shape == w.shape)
        assert (values(w) < [1.0, 2.0, 3.0]).all()


# ------------------------------------------------------------------ autocast
def _linear_inputs():
    return jg.randn(3, 4), jg.randn(5, 4, requires_grad=True), jg.randn(5, requires_grad=True)


@pytest.mark.parametrize("dt", REDUCED, ids=IDS)
def test_autocast_lowers_gemm_ops_but_not_elementwise_ones(dt):
    x, w, b = _linear_inputs()
    with jg.autocast("cpu", dtype=dt):
        assert jg.is_autocast_enabled("cpu") and jg.get_autocast_dtype("cpu") is dt
        assert not jg.is_autocast_enabled()  # no argument: CUDA's state, as in PyTorch
        y = jg.nn.functional.linear(x, w, b)
        assert y.dtype is dt and (x @ w.t()).dtype is dt and jg.mm(x, w.t()).dtype is dt
        assert jg.matmul(x.unsqueeze(0), w.t()).dtype is dt and jg.bmm(x[None], w.t()[None]).dtype is dt
        assert jg.nn.functional.conv2d(jg.randn(1, 2, 4, 4), jg.randn(3, 2, 3, 3)).dtype is dt
        assert jg.nn.functional.conv1d(jg.randn(1, 2, 5), jg.randn(3, 2, 3)).dtype is dt
        assert (x.double() @ w.double().t()).dtype is F64  # float64 is never cast
        assert (x.half() @ w.t()).dtype is dt  # other floats are
        assert (x + 1).dtype is F32 and x.exp().dtype is F32 and (y + x[:, :1]).dtype is F32
        assert y.relu().dtype is dt and jg.softmax(y, 1).dtype is dt  # (softmax is on CUDA's float32 list only)
        assert jg.dot(x[0], x[1]).dtype is F32 and jg.mv(x, x[0]).dtype is F32  # not on the CPU list
        loss = jg.nn.functional.cross_entropy(y, jg.tensor([0, 1, 2]))
        assert loss.dtype is F32  # the losses run in float32
        assert jg.nn.functional.mse_loss(y, jg.zeros(3, 5, dtype=dt)).dtype is F32
        assert y.prod().dtype is F32
    assert not jg.is_autocast_enabled("cpu")
    assert (x @ w.t()).dtype is F32
    loss.backward()
    assert w.grad.dtype is F32 and b.grad.dtype is F32  # the gradient goes back through the cast


def test_autocast_values_are_the_lower_precision_ones():
    x, w, b = _linear_inputs()
    with jg.autocast("cpu"):
        y = jg.nn.functional.linear(x, w, b)
    want = jg.nn.functional.linear(x.bfloat16(), w.bfloat16(), b.bfloat16())
    assert y.dtype is BF16 and (y.float() == want.float()).all()


def test_autocast_nests_disables_and_decorates():
    x, w, _ = _linear_inputs()
    with jg.autocast("cpu"):
        with jg.autocast("cpu", enabled=False):
            assert not jg.is_autocast_enabled("cpu") and (x @ w.t()).dtype is F32
        with jg.autocast("cpu", dtype=F16):
            assert (x @ w.t()).dtype is F16
        assert (x @ w.t()).dtype is BF16 and jg.get_autocast_dtype("cpu") is BF16

    @jg.autocast("cpu")
    def forward(a, depth=1):
        return forward(a, depth - 1) if depth else (a @ w.t(), jg.is_autocast_enabled("cpu"))
    out, on = forward(x)
    assert out.dtype is BF16 and on and not jg.is_autocast_enabled("cpu")
    assert jg.amp.autocast is jg.autocast
    with pytest.raises(ValueError, match="Expected `device_type` of type `str`, got: `<class 'int'>`"):
        jg.autocast(0)
    with pytest.raises(RuntimeError, match="User specified an unsupported autocast device_type 'tpu'"):
        jg.autocast("tpu")


def test_autocast_caches_the_cast_of_a_weight_per_region():
    x, w, _ = _linear_inputs()
    with jg.autocast("cpu"):
        y1, y2 = x @ w.t(), jg.nn.functional.linear(x, w)
        cast1 = [f for f, _ in y2.grad_fn.next_functions if f is not None]
        with jg.autocast("cpu", cache_enabled=False):
            y3 = jg.nn.functional.linear(x, w)

    def weight_cast(y):  # (as PyTorch's graph: MmBackward0 -> TBackward0 -> ToCopyBackward0 -> the weight)
        t = y.grad_fn.next_functions[1][0]
        assert type(t).__name__ == "TBackward0"
        return t.next_functions[0][0]
    casts = {id(weight_cast(y)) for y in (y2, y3) if type(weight_cast(y)).__name__ == "ToCopyBackward0"}
    assert len(casts) == 2 and cast1  # one cast for the region (y2), one made apart (cache off)
    (y1.float().sum() + y2.float().sum()).backward()
    np.testing.assert_allclose(w.grad.numpy(), 2 * x.bfloat16().float().sum(0).numpy()[None].repeat(5, 0),
                               rtol=1e-2)
    with jg.autocast("cpu"):
        with jg.no_grad():
            assert not (x @ w.t()).requires_grad
        assert (x @ w.t()).requires_grad  # (not the cast cached under no_grad)


def test_autocast_warnings():
    with pytest.warns(UserWarning, match="In CPU autocast, but the target dtype is not supported. Disabling "
                                         "autocast.\nCPU Autocast only supports dtypes of jitgrad.bfloat16, "
                                         "jitgrad.float16 currently."):
        with jg.autocast("cpu", dtype=F32):
            assert not jg.is_autocast_enabled("cpu")
    with pytest.warns(FutureWarning, match=r"`torch.cpu.amp.autocast\(args...\)` is deprecated"):
        ctx = jg.cpu.amp.autocast()
    with ctx:
        assert jg.is_autocast_enabled("cpu")
    if not jg.cuda.is_available():  # CUDA autocast without CUDA: PyTorch's warning, and a no-op
        with pytest.warns(UserWarning, match="CUDA is not available or torch_xla is imported. Disabling autocast."):
            with jg.autocast("cuda"):
                assert not jg.is_autocast_enabled("cuda")
                assert (jg.ones(2, 2) @ jg.ones(2, 2)).dtype is F32
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            jg.cuda.amp.autocast()
        assert [type(w.message) for w in seen] == [FutureWarning, UserWarning]
        assert "`torch.cuda.amp.autocast(args...)` is deprecated" in str(seen[0].message)


def test_autocast_policies_live_in_the_op_table():
    lowered = {n for n, op in OPS.items() if op.types.autocast.get("cpu") == "lower_precision_fp"}
    assert {"mm", "bmm", "matmul", "linear", "conv2d", "conv_transpose2d"} <= lowered
    assert OPS["prod"].types.autocast["cpu"] == "fp32" and "cpu" not in OPS["softmax"].types.autocast
    assert OPS["softmax"].types.autocast["cuda"] == "fp32"
    for op in OPS.values():
        if op.types.autocast:
            assert op.exposure.call.autocast_entry  # the public function applies the entry's policy


# ------------------------------------------------------------------ GradScaler
def _model_and_loss(value=1.0):
    w = jg.tensor([1.0, 2.0], requires_grad=True)
    opt = jg.optim.SGD([w], lr=0.1)
    return w, opt, (w * value).sum()


def test_grad_scaler_disabled_passes_through():
    scaler = jg.amp.GradScaler("cpu", enabled=False)
    w, opt, loss = _model_and_loss()
    assert not scaler.is_enabled() and scaler.scale(loss) is loss and scaler.get_scale() == 1.0
    loss.backward()
    scaler.unscale_(opt)
    assert w.grad.tolist() == [1.0, 1.0]
    scaler.step(opt)
    scaler.update()
    assert w.tolist() == pytest.approx([0.9, 1.9])
    assert scaler.state_dict() == {} and scaler.load_state_dict({}) is None


def test_grad_scaler_scales_unscales_and_steps():
    scaler = jg.amp.GradScaler("cpu", init_scale=2.0 ** 10)
    w, opt, loss = _model_and_loss(3.0)
    assert scaler.get_scale() == 1024.0
    scaled = scaler.scale(loss)
    assert scaled.item() == 1024.0 * loss.item() and scaled.dtype is F32
    scaled.backward()
    assert w.grad.tolist() == [3072.0, 3072.0]
    scaler.unscale_(opt)
    assert w.grad.tolist() == [3.0, 3.0]
    with pytest.raises(RuntimeError, match=r"^unscale_\(\) has already been called on this optimizer since the "
                                           r"last update\(\).$"):
        scaler.unscale_(opt)
    scaler.step(opt)  # (already unscaled: not divided again)
    assert w.tolist() == pytest.approx([0.7, 1.7])
    with pytest.raises(RuntimeError, match=r"^step\(\) has already been called since the last update\(\).$"):
        scaler.step(opt)
    scaler.update()
    assert scaler.get_scale() == 1024.0 and scaler._get_growth_tracker() == 1


def test_grad_scaler_skips_a_step_with_an_inf_gradient_and_backs_off():
    scaler = jg.amp.GradScaler("cpu", init_scale=2.0 ** 16, growth_interval=3)
    w, opt, _ = _model_and_loss()
    loss = (w * jg.tensor([1.0, math.inf])).sum()
    scaler.scale(loss).backward()
    assert scaler.step(opt) is None
    assert w.tolist() == [1.0, 2.0]  # skipped
    scaler.update()
    assert scaler.get_scale() == 2.0 ** 15 and scaler._get_growth_tracker() == 0
    opt.zero_grad()
    scaler.scale((w * jg.tensor([1.0, math.nan])).sum()).backward()
    scaler.step(opt)
    scaler.update()
    assert w.tolist() == [1.0, 2.0] and scaler.get_scale() == 2.0 ** 14


def test_grad_scaler_grows_after_growth_interval_clean_steps():
    scaler = jg.amp.GradScaler("cpu", init_scale=4.0, growth_factor=2.0, backoff_factor=0.25, growth_interval=2)
    w, opt, _ = _model_and_loss()
    scales = []
    for step in range(5):
        opt.zero_grad()
        scaler.scale((w * w).sum()).backward()
        scaler.step(opt)
        scaler.update()
        scales.append(scaler.get_scale())
    assert scales == [4.0, 8.0, 8.0, 16.0, 16.0]
    sd = scaler.state_dict()
    assert sd == {"scale": 16.0, "growth_factor": 2.0, "backoff_factor": 0.25, "growth_interval": 2,
                  "_growth_tracker": 1}
    other = jg.amp.GradScaler("cpu")
    other.load_state_dict(sd)
    assert other.state_dict() == sd
    with pytest.raises(RuntimeError, match="The source state dict is empty"):
        other.load_state_dict({})
    scaler.update(new_scale=3.0)
    assert scaler.get_scale() == 3.0


def test_grad_scaler_refuses_float16_gradients_and_closures():
    scaler = jg.amp.GradScaler("cpu", init_scale=4.0)
    w = jg.ones(2, dtype=F16, requires_grad=True)
    opt = jg.optim.SGD([w], lr=0.1)
    scaler.scale(w.sum()).backward()
    with pytest.raises(ValueError, match="^Attempting to unscale FP16 gradients.$"):
        scaler.step(opt)
    with pytest.raises(RuntimeError, match="Closure use is not currently supported if GradScaler is enabled."):
        scaler.step(opt, closure=lambda: 0)
    fresh = jg.amp.GradScaler("cpu")
    with pytest.raises(AssertionError, match="Attempted step but _scale is None."):
        fresh.step(opt)
    with pytest.raises(AssertionError, match="The growth factor must be > 1.0."):
        jg.amp.GradScaler("cpu", growth_factor=1.0)


def test_grad_scaler_bfloat16_gradients():
    w = jg.tensor([1.0, 2.0], dtype=BF16, requires_grad=True)
    opt = jg.optim.SGD([w], lr=0.5)
    scaler = jg.amp.GradScaler("cpu", init_scale=256.0)
    scaler.scale((w * 3).sum()).backward()
    assert w.grad.dtype is BF16 and w.grad.tolist() == [768.0, 768.0]
    scaler.step(opt)
    assert w.tolist() == [-0.5, 0.5]


def test_cuda_grad_scaler_spellings():
    with pytest.warns(FutureWarning, match=r"`torch.cuda.amp.GradScaler\(args...\)` is deprecated"):
        s = jg.cuda.amp.GradScaler(enabled=False)
    assert isinstance(s, jg.amp.GradScaler) and s.scale(jg.ones(1)).item() == 1.0
    if not jg.cuda.is_available():
        with pytest.warns(UserWarning, match="torch.cuda.amp.GradScaler is enabled, but CUDA is not available.  "
                                             "Disabling."):
            assert not jg.amp.GradScaler().is_enabled()
    with pytest.warns(FutureWarning, match=r"`torch.cpu.amp.GradScaler\(args...\)` is deprecated"):
        assert jg.cpu.amp.GradScaler().is_enabled()


# ------------------------------------------------------------------ whole programs
def mlp_program(torch, steps=30):
    """A small classifier trained under CPU autocast with bfloat16: PyTorch code, run as it is by
    jitgrad and by PyTorch. Returns the losses and the dtypes seen."""
    torch.manual_seed(0)
    g = np.random.default_rng(0)
    X = torch.tensor(g.standard_normal((64, 8)), dtype=torch.float32)
    y = torch.tensor((X.numpy()[:, 0] + X.numpy()[:, 1] > 0).astype(np.int64))
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    scaler = torch.amp.GradScaler("cpu", enabled=False)
    losses, dtypes = [], set()
    for _ in range(steps):
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = model(X)
            loss = torch.nn.functional.cross_entropy(logits, y)
        dtypes.add((str(logits.dtype).split(".")[-1], str(loss.dtype).split(".")[-1]))
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        losses.append(loss.item())
    dtypes.add(str(model[0].weight.grad.dtype).split(".")[-1])
    return losses, dtypes


def test_mlp_program_trains_under_autocast():
    losses, dtypes = mlp_program(jg)
    assert dtypes == {("bfloat16", "float32"), "float32"}
    assert losses[-1] < 0.5 * losses[0]


@pytest.mark.torch
def test_mlp_program_runs_the_same_with_pytorch():
    torch = pytest.importorskip("torch")
    ours, our_dtypes = mlp_program(jg, steps=5)
    theirs, their_dtypes = mlp_program(torch, steps=5)
    assert our_dtypes == their_dtypes


@pytest.mark.torch
def test_mixed_precision_training_matches_pytorch():
    """The same weights and data in jitgrad and PyTorch, autocast bfloat16 + GradScaler(enabled=False):
    the losses agree within bfloat16's precision at every step."""
    torch = pytest.importorskip("torch")
    g = np.random.default_rng(1)
    X, y = g.standard_normal((32, 6)).astype(np.float32), g.integers(0, 3, 32)
    params = [g.standard_normal((10, 6)) * 0.4, g.standard_normal(10) * 0.1, g.standard_normal((3, 10)) * 0.4,
              g.standard_normal(3) * 0.1]

    def run(lib):
        ws = [lib.tensor(p, dtype=lib.float32, requires_grad=True) for p in params]
        opt = lib.optim.SGD(ws, lr=0.3, momentum=0.5)
        scaler = lib.amp.GradScaler("cpu", enabled=False)
        xs, ys = lib.tensor(X), lib.tensor(y)
        losses = []
        for _ in range(8):
            opt.zero_grad()
            with lib.autocast("cpu", dtype=lib.bfloat16):
                h = lib.nn.functional.linear(xs, ws[0], ws[1]).relu()
                loss = lib.nn.functional.cross_entropy(lib.nn.functional.linear(h, ws[2], ws[3]), ys)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            losses.append(loss.item())
        return np.array(losses), [w.detach().numpy() for w in ws]

    ours, our_w = run(jg)
    theirs, their_w = run(torch)
    np.testing.assert_allclose(ours, theirs, rtol=2 ** -6, atol=2 ** -7)
    for a, b in zip(our_w, their_w):
        np.testing.assert_allclose(a, b, rtol=2 ** -5, atol=2 ** -5)

