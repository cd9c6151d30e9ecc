"""Numerical edge cases and input handling, against NumPy references and PyTorch's documented behaviour
(the expected numbers and messages are PyTorch 2.13's)."""
import math
import re
import tracemalloc

import numpy as np
import pytest

import jitgrad as jg
import jitgrad.nn.functional as F

FLOATS = [jg.float32, jg.float64]


def _grad(f, x, create_graph=False):
    """d f(x).sum() / dx, by backward (fused VJP kernels) or through a recorded backward graph."""
    x = x.detach().requires_grad_()
    y = f(x).sum()
    if create_graph:
        (g,) = jg.autograd.grad(y, x, create_graph=True)
        return g.detach().numpy()
    y.backward()
    return x.grad.numpy()


# ---------------------------------------------------------------------- 1. log-softmax of large logits
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("big", [1e15, 1e16, -3e17])
def test_log_softmax_of_large_equal_logits_is_minus_log_n(dtype, big):
    # (x - max) - log(sum), never x - (max + log(sum)): max + log(3) rounds to max at this magnitude
    x = jg.full((2, 3), big, dtype=dtype)
    np.testing.assert_allclose(F.log_softmax(x, 1).numpy(), np.full((2, 3), -math.log(3)), rtol=1e-6)
    np.testing.assert_allclose(F.softmax(x, 1).numpy(), np.full((2, 3), 1 / 3), rtol=1e-6)
    np.testing.assert_allclose(F.log_softmax(x.t(), 0).numpy(), np.full((3, 2), -math.log(3)), rtol=1e-6)
    target = jg.tensor([0, 2])
    for create_graph in (False, True):
        xs = x.detach().requires_grad_()
        for loss in (F.cross_entropy(xs, target), F.nll_loss(F.log_softmax(xs, 1), target)):
            assert loss.item() == pytest.approx(math.log(3), rel=1e-6)
            (g,) = jg.autograd.grad(loss, xs, create_graph=create_graph)
            # PyTorch: [[-0.6667, 0.3333, 0.3333], [0.3333, 0.3333, -0.6667]] / 2 (the mean over the batch)
            np.testing.assert_allclose(g.detach().numpy(), np.array([[-2, 1, 1], [1, 1, -2]]) / 6, rtol=1e-6)


@pytest.mark.parametrize("shape", [(4, 5), (30000, 3)])  # serial and parallel kernels
def test_log_softmax_large_logits_against_numpy(shape):
    rng = np.random.default_rng(0)
    a = 1e15 + rng.integers(-4, 4, size=shape) * 0.5  # exactly representable around 1e15
    ref = (a - a.max(1, keepdims=True)) - np.log(np.exp(a - a.max(1, keepdims=True)).sum(1, keepdims=True))
    np.testing.assert_allclose(F.log_softmax(jg.tensor(a), 1).numpy(), ref, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(F.log_softmax(jg.tensor(a.T.copy()), 0).numpy(), ref.T, rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------------- 2. masks select, they don't multiply
MASKED = {  # PyTorch's gradient of f(x).sum() at x = [-1, 4]: an infinite or NaN upstream gradient where the
    # mask is off gives 0 where PyTorch selects, and NaN where it multiplies (leaky_relu, elu)
    "relu_sqrt": (lambda x: x.relu().sqrt(), [0.0, 0.25]),
    "relu_log": (lambda x: F.relu(x).log(), [0.0, 0.25]),
    "clamp": (lambda x: x.clamp(0, 10).sqrt(), [0.0, 0.25]),
    "clamp_min": (lambda x: x.clamp_min(0).sqrt(), [0.0, 0.25]),
    "clamp_max": (lambda x: (-x).clamp_max(0).neg().sqrt(), [0.0, 0.25]),
    "clamp_tensor_bounds": (lambda x: x.clamp(jg.zeros(2), jg.full((2,), 10.0)).sqrt(), [0.0, 0.25]),
    "maximum": (lambda x: jg.maximum(x, jg.zeros(2)).sqrt(), [0.0, 0.25]),
    "minimum": (lambda x: jg.minimum(-x, jg.zeros(2)).neg().sqrt(), [0.0, 0.25]),
    "where": (lambda x: jg.where(x > 0, x, 0.0).sqrt(), [0.0, 0.25]),
    "masked_fill": (lambda x: x.masked_fill(x < 0, 0.0).sqrt(), [0.0, 0.25]),
    "sign": (lambda x: x.sign().sqrt(), [0.0, 0.0]),
    "floor_times_inf": (lambda x: x.floor() * math.inf, [0.0, 0.0]),
    "pow_0": (lambda x: x.pow(0.0) * math.inf, [0.0, 0.0]),
    "pow_0_tensor": (lambda x: x.pow(jg.tensor([0.0, 1.0])) * math.inf, [0.0, math.inf]),
    "leaky_relu_0": (lambda x: x.leaky_relu(0.0).sqrt(), [math.nan, 0.25]),
    "elu_0": (lambda x: x.elu(0.0).sqrt(), [math.nan, 0.25]),
}


@pytest.mark.parametrize("create_graph", [False, True])
@pytest.mark.parametrize("name", sorted(MASKED))
def test_masked_gradient_is_selected_not_multiplied(name, create_graph):
    f, expected = MASKED[name]
    with np.errstate(invalid="ignore"):
        got = _grad(f, jg.tensor([-1.0, 4.0]), create_graph)
    np.testing.assert_array_equal(got, np.array(expected, np.float32))


def test_relu_second_order_selects():
    x = jg.tensor([-1.0, 4.0], requires_grad=True)
    (g,) = jg.autograd.grad((x.relu() ** 3).sum(), x, create_graph=True)
    assert g.tolist() == [0.0, 48.0]
    (gg,) = jg.autograd.grad(g.sum(), x)
    assert gg.tolist() == [0.0, 24.0]


def test_maximum_minimum_nan_and_ties_follow_pytorch():
    # PyTorch: where(a == b, g / 2, g).masked_fill(a < b, 0): a NaN on either side passes g to both inputs
    for fn in (jg.maximum, jg.minimum):
        for create_graph in (False, True):
            a = jg.tensor([math.nan, 1.0, 2.0], requires_grad=True)
            b = jg.tensor([1.0, math.nan, 2.0], requires_grad=True)
            ga, gb = jg.autograd.grad(fn(a, b).sum(), (a, b), create_graph=create_graph)
            assert ga.tolist() == gb.tolist() == [1.0, 1.0, 0.5]


def test_max_min_of_all_elements_split_the_gradient_as_pytorch():
    # PyTorch's evenly_distribute_backward: among the ties, or among the NaNs when the result is NaN;
    # amax/amin instead divide by the count of elements equal to the result (none when it is NaN)
    for fn in (jg.max, jg.min):
        x = jg.tensor([math.nan, 1.0, math.nan], requires_grad=True)
        fn(x).backward()
        assert x.grad.tolist() == [0.5, 0.0, 0.5]
        x = jg.tensor([[2.0, 1.0], [2.0, 2.0]], requires_grad=True)
        jg.max(x).backward()
        np.testing.assert_allclose(x.grad.numpy(), [[1 / 3, 0], [1 / 3, 1 / 3]])
    x = jg.tensor([math.nan, 1.0], requires_grad=True)
    jg.amax(x).backward()
    assert np.isnan(x.grad.numpy()).all()


@pytest.mark.parametrize("dtype", FLOATS)
def test_sign_of_nan_is_zero(dtype):
    x = jg.tensor([math.nan, -2.0, -0.0, 3.0], dtype=dtype)
    assert jg.sign(x).tolist() == [0.0, -1.0, 0.0, 1.0]


@pytest.mark.parametrize("create_graph", [False, True])
def test_atan2_gradient_at_origin_is_zero(create_graph):
    a = jg.tensor([0.0, 1.0], dtype=jg.float64, requires_grad=True)
    b = jg.tensor([0.0, 2.0], dtype=jg.float64, requires_grad=True)
    ga, gb = jg.autograd.grad(jg.atan2(a, b).sum(), (a, b), create_graph=create_graph)
    np.testing.assert_allclose(ga.detach().numpy(), [0.0, 2 / 5])
    np.testing.assert_allclose(gb.detach().numpy(), [0.0, -1 / 5])


def test_mask_formulas_still_pass_gradcheck():
    x = jg.tensor([-1.5, -0.3, 0.4, 2.0], dtype=jg.float64, requires_grad=True)
    y = jg.tensor([0.5, -0.7, 0.1, 1.0], dtype=jg.float64, requires_grad=True)
    for f in (lambda x, y: jg.maximum(x, y), lambda x, y: jg.minimum(x, y), lambda x, y: jg.atan2(x, y),
              lambda x, y: x.clamp(-1.0, 1.0) * y, lambda x, y: jg.where(x > 0, x, y), lambda x, y: x.relu() * y):
        assert jg.autograd.gradcheck(f, (x, y))
        assert jg.autograd.gradgradcheck(f, (x, y))


# ---------------------------------------------------------------------- 3. integer overflow
def test_tensor_from_python_ints_outside_int64_raises():
    for data in ([2 ** 63], 2 ** 63, [[1], [2 ** 63]], [-2 ** 63 - 1], [1, 2 ** 64], [True, 2 ** 63]):
        with pytest.raises(ValueError, match="^Overflow when unpacking long long$"):
            jg.tensor(data)
    with pytest.raises(ValueError, match="^Overflow when unpacking long long$"):
        jg.tensor([2 ** 63], dtype=jg.int64)
    assert jg.tensor([2 ** 63 - 1, -2 ** 63]).tolist() == [2 ** 63 - 1, -2 ** 63]
    assert jg.tensor([2 ** 63], dtype=jg.float32).tolist() == [2.0 ** 63]  # an explicit float dtype converts
    assert jg.tensor([2 ** 64], dtype=jg.float64).tolist() == [2.0 ** 64]
    assert jg.tensor([1.5, 2 ** 63]).tolist() == [1.5, 2.0 ** 63]  # a float among them: all read as doubles
    assert jg.tensor([1.5, -2 ** 63 - 1]).tolist() == [1.5, -2.0 ** 63]


def test_tensor_with_explicit_int_dtype_checks_the_range():
    for data, dtype, name in [([2 ** 40], jg.int32, "int32"), (2 ** 40, jg.int32, "int32"),
                              ([2 ** 31], jg.int32, "int32"), ([[1], [2 ** 40]], jg.int32, "int32"),
                              ([2.5e10], jg.int32, "int32"), ([math.inf], jg.int32, "int32"), ([1e20], jg.int64, "int64"),
                              ([math.nan], jg.int64, "int64"), (2.0 ** 70, jg.int64, "int64")]:
        with pytest.raises(RuntimeError, match="^value cannot be converted to type %s without overflow$" % name):
            jg.tensor(data, dtype=dtype)
    assert jg.tensor([2 ** 31 - 1, -2 ** 31], dtype=jg.int32).tolist() == [2 ** 31 - 1, -2 ** 31]
    assert jg.tensor([2 ** 40], dtype=jg.bool).tolist() == [True]
    # arrays convert as NumPy's astype does (as PyTorch, which does not check them)
    assert jg.tensor(np.array([2 ** 40]), dtype=jg.int32).tolist() == [0]


def test_scalar_fill_values_check_the_range():
    def message(ctype):
        return "^value cannot be converted to type %s without overflow$" % ctype
    with pytest.raises(RuntimeError, match=message("int64_t")):
        jg.full((2,), 2 ** 63)
    with pytest.raises(RuntimeError, match=message("int64_t")):
        jg.full((2,), 1e20, dtype=jg.int64)
    with pytest.raises(RuntimeError, match=message("int")):
        jg.full((2,), 2 ** 40, dtype=jg.int32)
    with pytest.raises(RuntimeError, match=message("float")):
        jg.full((2,), 1e300, dtype=jg.float32)
    with pytest.raises(RuntimeError, match=message("int")):
        jg.zeros(2, dtype=jg.int32).fill_(2 ** 40)
    with pytest.raises(RuntimeError, match=message("int")):
        jg.zeros(2, dtype=jg.int32).fill_(2.5e10)
    with pytest.raises(RuntimeError, match=message("int64_t")):
        jg.zeros(2, dtype=jg.int64).fill_(2 ** 63)
    with pytest.raises(RuntimeError, match=message("float")):
        jg.zeros(2).fill_(1e300)
    with pytest.raises(RuntimeError, match=message("int")):
        jg.zeros(2, dtype=jg.int32).masked_fill(jg.tensor([True, False]), 2 ** 40)
    with pytest.raises(RuntimeError, match=message("int64_t")):
        jg.zeros(2, dtype=jg.int64).masked_fill(jg.tensor([True, False]), 2 ** 63)
    with pytest.raises(RuntimeError, match=message("int")):
        jg.zeros(2, dtype=jg.int32).add(1, alpha=2 ** 40)
    with pytest.raises(RuntimeError, match=message("int")):
        jg.zeros(2, dtype=jg.int32).clamp(max=2 ** 40)
    with pytest.raises(RuntimeError, match=message("float")):
        jg.zeros(2).masked_fill(jg.tensor([True, False]), 1e300)
    with pytest.raises(RuntimeError, match=message("float")):
        jg.zeros(2).clamp(max=1e300)
    with pytest.raises(RuntimeError, match=message("int64_t")):
        jg.full((2,), math.nan, dtype=jg.int64)
    assert jg.full((2,), 2 ** 63, dtype=jg.float32).tolist() == [2.0 ** 63] * 2
    assert jg.full((1,), 2 ** 31 - 1, dtype=jg.int32).tolist() == [2 ** 31 - 1]
    assert jg.zeros(2).fill_(math.inf).tolist() == [math.inf] * 2
    assert jg.zeros(2, dtype=jg.int32).clamp(min=-2 ** 31, max=2 ** 31 - 1).tolist() == [0, 0]


# ---------------------------------------------------------------------- 4. flatten and view
def test_flatten_returns_the_input_when_nothing_is_merged():
    x = jg.ones(3, requires_grad=True)
    assert x.flatten() is x and jg.flatten(x) is x
    y = jg.ones(2, 3, requires_grad=True) * 1
    assert y.flatten(1, 1) is y and y.flatten(0, 0) is y and y.flatten(-1, -1) is y
    s = jg.tensor(2.0)
    f = s.flatten()
    assert f.shape == (1,) and f is not s and f._base is s
    assert y.flatten().shape == (6,) and y.flatten(0, 1).grad_fn is not None


INDEXED = [  # (index of jitgrad tensors, the same index of NumPy arrays, PyTorch's strides of the result)
    (lambda b2, b3: b2[:, [0, 2, 4]], lambda b2, b3: b2[:, [0, 2, 4]], (3, 1)),
    (lambda b2, b3: b2.t()[:, [0, 2]], lambda b2, b3: b2.T[:, [0, 2]], (2, 1)),
    (lambda b2, b3: b2.t()[[0, 2, 4]], lambda b2, b3: b2.T[[0, 2, 4]], (4, 1)),
    (lambda b2, b3: b2.t()[1:5:2, [0, 3]], lambda b2, b3: b2.T[1:5:2, [0, 3]], (2, 1)),
    (lambda b2, b3: b2[::2].t()[:, [0, 1]], lambda b2, b3: b2[::2].T[:, [0, 1]], (2, 1)),
    (lambda b2, b3: b3[:, [0, 2]], lambda b2, b3: b3[:, [0, 2]], (8, 4, 1)),
    (lambda b2, b3: b3[..., [0, 2]], lambda b2, b3: b3[..., [0, 2]], (6, 2, 1)),
    (lambda b2, b3: b3[:, None, [0, 2]], lambda b2, b3: b3[:, None, [0, 2]], (8, 8, 4, 1)),
    (lambda b2, b3: b3[[0, 1], :, [1, 0]], lambda b2, b3: b3[[0, 1], :, [1, 0]], (3, 1)),
    (lambda b2, b3: b3.transpose(1, 2)[:, [0, 1]], lambda b2, b3: b3.transpose(0, 2, 1)[:, [0, 1]], (6, 3, 1)),
    (lambda b2, b3: b3.transpose(1, 2)[:, :, jg.tensor([True, False, True])],
     lambda b2, b3: b3.transpose(0, 2, 1)[:, :, np.array([True, False, True])], (8, 2, 1)),
    (lambda b2, b3: b3.permute(2, 0, 1)[:, [0, 1]], lambda b2, b3: b3.transpose(2, 0, 1)[:, [0, 1]], (1, 4, 8)),
    (lambda b2, b3: b3.permute(2, 0, 1)[..., [0, 2]], lambda b2, b3: b3.transpose(2, 0, 1)[..., [0, 2]], (2, 8, 1)),
    (lambda b2, b3: b3.permute(1, 2, 0)[:, [0, 1], :], lambda b2, b3: b3.transpose(1, 2, 0)[:, [0, 1], :], (1, 3, 6)),
    (lambda b2, b3: b3.permute(2, 0, 1)[[1, 2]], lambda b2, b3: b3.transpose(2, 0, 1)[[1, 2]], (6, 3, 1)),
    (lambda b2, b3: jg.arange(3.0).reshape(3, 1).expand(3, 4)[:, [0, 1]],
     lambda b2, b3: np.broadcast_to(np.arange(3.0).reshape(3, 1), (3, 4))[:, [0, 1]], (2, 1)),
    (lambda b2, b3: b2.t()[jg.tensor([[0, 1], [2, 3]]).t()], lambda b2, b3: b2.T[np.array([[0, 1], [2, 3]]).T],
     (4, 8, 1)),
]


@pytest.mark.parametrize("k", range(len(INDEXED)))
def test_advanced_indexing_result_has_pytorchs_layout(k):
    make, make_ref, strides = INDEXED[k]
    b2 = jg.arange(24.0).reshape(4, 6)
    b3 = jg.arange(24.0).reshape(2, 3, 4)
    r = make(b2, b3)
    np.testing.assert_array_equal(r.numpy(), make_ref(b2.numpy(), b3.numpy()))
    assert [s for s, n in zip(r.stride(), r.shape) if n > 1] == [s for s, n in zip(strides, r.shape) if n > 1]
    # view follows PyTorch's stride rule on those strides: it works exactly where NumPy reshapes in place
    for shape in [(-1,), (r.shape[0], -1), (-1, r.shape[-1])]:
        probe = np.lib.stride_tricks.as_strided(np.zeros(64), r.shape, [s * 8 for s in strides]).view()
        try:
            probe.shape = np.empty(r.shape).reshape(shape).shape
            ok = True
        except AttributeError:
            ok = False
        if ok:
            np.testing.assert_array_equal(r.view(*shape).numpy(), r.numpy().reshape(shape))
        else:
            with pytest.raises(RuntimeError, match=re.escape("view size is not compatible with input tensor's size and "
                                                             "stride (at least one dimension spans across two "
                                                             "contiguous subspaces). Use .reshape(...) instead.")):
                r.view(*shape)


def test_cat_stack_gather_of_non_contiguous_inputs_are_contiguous():
    # PyTorch allocates these results contiguous, so view() works on them; NumPy follows the inputs' layout
    b3 = jg.arange(24.0).reshape(2, 3, 4)
    t = b3.transpose(0, 2)
    for r, strides in [(jg.cat([t, t], 1), (12, 2, 1)), (jg.stack([t, t], 1), (12, 6, 2, 1)),
                       (b3.gather(1, jg.zeros(2, 4, 3, dtype=jg.int64).transpose(1, 2)), (12, 4, 1))]:
        assert r.stride() == strides and r.is_contiguous()
        assert r.view(-1).shape == (r.numel(),)
    np.testing.assert_array_equal(jg.cat([t, t], 1).numpy(), np.concatenate([t.numpy(), t.numpy()], 1))


def test_view_after_advanced_indexing_keeps_gradients():
    x = jg.arange(24.0).reshape(4, 6).t().requires_grad_()
    y = x[:, [0, 2]].view(-1)  # PyTorch: contiguous, so view(-1) works
    (y * jg.arange(12.0)).sum().backward()
    expected = np.zeros((6, 4))
    expected[:, [0, 2]] = np.arange(12.0).reshape(6, 2)
    np.testing.assert_array_equal(x.grad.numpy(), expected)


def test_view_transposed_splits_and_merges_along_contiguous_chunks():
    x = jg.arange(24.0).reshape(2, 3, 4).transpose(0, 1)  # (3, 2, 4), strides (4, 12, 1)
    assert x.view(3, 2, 2, 2).stride() == (4, 12, 2, 1)
    assert x.view(3, 2, 4, 1).shape == (3, 2, 4, 1)
    with pytest.raises(RuntimeError, match="Use .reshape"):
        x.view(6, 4)
    with pytest.raises(RuntimeError, match="Use .reshape"):
        x.view(-1)
    e = jg.zeros(3, 0, 4).transpose(0, 2)
    assert e.view(12, 0).shape == (12, 0) and e.view(-1).shape == (0,)


# ---------------------------------------------------------------------- 5. smaller items
def test_all_any_methods_and_functions():
    x = jg.tensor([[True, False], [True, True]])
    assert x.all().item() is False and x.any().item() is True
    assert x.all(0).tolist() == [True, False] and x.any(1).tolist() == [True, True]
    assert x.all(dim=1, keepdim=True).tolist() == [[False], [True]]
    assert jg.all(x).item() is False and jg.any(x, 0).tolist() == [True, True] and jg.all(x, dim=(0, 1)).item() is False
    f = jg.tensor([1.0, 0.0, math.nan], requires_grad=True)
    assert f.all().item() is False and f.any().item() is True and not f.any().requires_grad
    assert f.all().dtype is jg.bool and jg.tensor([2, 3], dtype=jg.int32).all(0).dtype is jg.bool
    assert jg.tensor(True).all(0).item() is True
    assert jg.zeros(0).all().item() is True and jg.zeros(0).any().item() is False
    assert jg.zeros(2, 0).all(1).tolist() == [True, True] and jg.zeros(2, 0).any(0).shape == (0,)
    rng = np.random.default_rng(0)
    a = rng.integers(0, 3, (3, 4, 2))
    for dim in (None, 0, 1, -1, (0, 2)):
        kw = {} if dim is None else {"dim": dim}
        np.testing.assert_array_equal(jg.tensor(a).all(**kw).numpy(), np.all(a, axis=dim))
        np.testing.assert_array_equal(jg.tensor(a).any(**kw).numpy(), np.any(a, axis=dim))


def test_tensor_of_strings_messages():
    for data, name in [([1.0, "a"], "str"), ([1, "a"], "str"), ([[1.0], ["a", "b"]], "str"), ("a", "str"),
                       ([1.0, b"ab"], "bytes"), ([[1.0, 2.0], [3.0, "a"]], "str")]:
        with pytest.raises(TypeError, match="^%s$" % re.escape("new(): invalid data type '%s'" % name)):
            jg.tensor(data)
    for data in (["a", 1.0], ["ab"], [["a", 1.0]]):
        with pytest.raises(ValueError, match="^too many dimensions 'str'$"):
            jg.tensor(data)
    for data, name in [([1.0, None], "NoneType"), ([1, object()], "object")]:
        with pytest.raises(RuntimeError, match="^Could not infer dtype of %s$" % name):
            jg.tensor(data)


def test_sum_of_expanded_tensor_does_not_materialize():
    N = 20000
    small = jg.ones(3).expand(3, 3)  # compile the kernels first: compilation allocates too
    small.sum(), small.mean(), small.sum(0), small.amax(), jg.arange(3.0).reshape(3, 1).expand(3, 3).sum(1)
    tracemalloc.start()
    try:
        x = jg.ones(N).expand(N, N)
        s = x.sum()
        m = x.mean()
        r0 = x.sum(0)
        r1 = jg.arange(float(N)).reshape(N, 1).expand(N, N).sum(1)
        mx = x.amax()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < N * N // 100  # PyTorch reduces the stride-0 dim without a copy; N*N*4 bytes would be 1.6 GB
    assert s.item() == float(N) * N and m.item() == 1.0 and mx.item() == 1.0
    assert r0.shape == (N,) and float(r0.amin()) == N == float(r0.amax())
    np.testing.assert_array_equal(r1.numpy(), np.arange(float(N)) * N)


def test_reductions_of_broadcast_tensors_match_numpy():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((3, 1, 4))
    x = jg.tensor(a).expand(3, 5, 4)
    ref = np.broadcast_to(a, (3, 5, 4))
    for dim in (None, 0, 1, 2, (0, 1), (1, 2), (0, 2)):
        kw = {} if dim is None else {"dim": dim}
        np.testing.assert_allclose(x.sum(**kw).numpy(), ref.sum(axis=dim), rtol=1e-12)
        np.testing.assert_allclose(x.mean(**kw).numpy(), ref.mean(axis=dim), rtol=1e-12)
        np.testing.assert_array_equal(x.amax(**kw).numpy(), ref.max(axis=dim))
        np.testing.assert_array_equal(x.amin(**kw).numpy(), ref.min(axis=dim))
    s = x.sum(1)
    s.add_(1)  # a fresh, writable result
    xi = jg.tensor(rng.integers(-5, 5, (1, 4))).expand(6, 4)
    np.testing.assert_array_equal(xi.sum(0).numpy(), np.broadcast_to(xi.numpy(), (6, 4)).sum(0))
    xg = jg.tensor(a, requires_grad=True)
    xg.expand(3, 5, 4).sum().backward()
    np.testing.assert_array_equal(xg.grad.numpy(), np.full((3, 1, 4), 5.0))


# ---------------------------------------------------------------------- elementwise results and memory layout
def _scalar_functions():
    from jitgrad.kernels.scalars import SCALARS
    import inspect
    for name, fn in sorted(SCALARS.items()):
        n = len(inspect.signature(fn.py_func).parameters)
        if n <= 3:
            yield pytest.param(name, n, id=name)


@pytest.mark.parametrize("name,arity", list(_scalar_functions()))
def test_an_elementwise_result_does_not_depend_on_where_its_output_lies(name, arity):
    """The loop of each scalar function gives the same bits whatever the output's distance to its inputs: a
    loop's vectorized body and its scalar remainder round alike (which one an element takes depends on
    that distance: the loop checks that the output does not overlap an input)."""
    from jitgrad.kernels import elementwise
    rng = np.random.default_rng(7)
    # (a complex twin, kernels/scalars.py's COMPLEX, runs on complex values)
    n, dt = 13, np.dtype(np.complex128 if name.startswith("complex_") else np.float64)
    args = [rng.uniform(0.5, 2.0, n) + (rng.uniform(-1.0, 1.0, n) * 1j if dt.kind == "c" else 0) for _ in range(arity)]
    want = elementwise.run(name, dt, *args)
    buf = np.zeros(1024, dt)
    ins = []
    for k, a in enumerate(args):
        buf[200 + 16 * k: 200 + 16 * k + n] = a
        ins.append(buf[200 + 16 * k: 200 + 16 * k + n])
    end = 200 + 16 * arity
    for start in list(range(200 - 40, 200 - n + 1)) + list(range(end, end + 40)):
        out = buf[start: start + n]
        elementwise.run(name, dt, *ins, out=out)
        np.testing.assert_array_equal(out, want, err_msg="output at %d" % (start - 200))
        for k, a in enumerate(args):  # (the inputs are unchanged)
            np.testing.assert_array_equal(ins[k], a)


def test_logcumsumexp_stays_finite_at_large_magnitudes():
    """Values of +-700 overflow exp(x) and exp(-y): the scan and its gradient work in the log domain."""
    rng = np.random.default_rng(41)
    x = rng.uniform(-700, 700, (3, 6))
    g = rng.standard_normal((3, 6))
    a = jg.tensor(x, requires_grad=True)
    y = jg.logcumsumexp(a, 1)
    np.testing.assert_allclose(y.detach().numpy(), np.logaddexp.accumulate(x, axis=1), rtol=1e-12)
    y.backward(jg.tensor(g))
    want = [[sum(g[r, j] * np.exp(x[r, i] - np.logaddexp.accumulate(x[r])[j]) for j in range(i, 6)) for i in range(6)]
            for r in range(3)]
    np.testing.assert_allclose(a.grad.numpy(), want, rtol=1e-10, atol=1e-300)
    small = jg.tensor(rng.standard_normal((4, 3)), requires_grad=True)
    assert jg.autograd.gradgradcheck(lambda z: jg.logcumsumexp(z, 0), (small,))  # mixed-sign gradients


@pytest.mark.torch
def test_logcumsumexp_matches_torch():
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(42).standard_normal((3, 4, 5)) * 20
    g = np.random.default_rng(43).standard_normal((3, 4, 5))
    for dim in (0, 1, -1):
        a, b = jg.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        ya, yb = jg.logcumsumexp(a, dim), torch.logcumsumexp(b, dim)
        assert ya.grad_fn.name() == yb.grad_fn.name()
        ya.backward(jg.tensor(g))
        yb.backward(torch.tensor(g))
        np.testing.assert_allclose(ya.detach().numpy(), yb.detach().numpy(), rtol=1e-12)
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-9, atol=1e-12)
    for bad in (jg.tensor([1, 2]), jg.tensor([True])):
        with pytest.raises(NotImplementedError, match="logcumsumexp_out_cpu"):
            jg.logcumsumexp(bad, 0)
