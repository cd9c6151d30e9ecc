"""nn layers and nn.functional: forward against NumPy references written here, gradients against
finite differences (gradcheck, float64), PyTorch's error messages, default initialisation."""
import math

import numpy as np
import pytest

import jitgrad as jg
import jitgrad.nn as nn
import jitgrad.nn.functional as F
from jitgrad.autograd import gradcheck, gradgradcheck


def T(a, requires_grad=False):
    a = np.asarray(a)
    return jg.tensor(a, requires_grad=requires_grad and a.dtype.kind == "f")


def R(rng, *shape):
    return rng.standard_normal(shape)


def _f64(module):
    return module.double()


# ---------------------------------------------------------------------- NumPy references
def ref_conv2d(x, w, b=None, stride=(1, 1), pad=((0, 0), (0, 0)), dil=(1, 1), groups=1):
    """Direct convolution: one dot product per output pixel."""
    N, C, H, W = x.shape
    O, Cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), pad[0], pad[1]))
    Hp, Wp = xp.shape[2:]
    oh = (Hp - dil[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (Wp - dil[1] * (kw - 1) - 1) // stride[1] + 1
    out = np.zeros((N, O, oh, ow))
    Og = O // groups
    for o in range(O):
        g = o // Og
        for i in range(oh):
            for j in range(ow):
                h0, w0 = i * stride[0], j * stride[1]
                patch = xp[:, g * Cg:(g + 1) * Cg, h0:h0 + dil[0] * (kh - 1) + 1:dil[0],
                           w0:w0 + dil[1] * (kw - 1) + 1:dil[1]]
                out[:, o, i, j] = (patch * w[o]).sum(axis=(1, 2, 3))
    return out if b is None else out + b[None, :, None, None]


def ref_conv_transpose2d(y, w, b=None, stride=(1, 1), pad=(0, 0), out_pad=(0, 0), groups=1):
    """Each input pixel scatters its kernel-weighted values into the (cropped) output."""
    N, Ci, H, W = y.shape
    _, Cog, kh, kw = w.shape
    Ho = (H - 1) * stride[0] - 2 * pad[0] + kh + out_pad[0]
    Wo = (W - 1) * stride[1] - 2 * pad[1] + kw + out_pad[1]
    full = np.zeros((N, Cog * groups, Ho + 2 * pad[0] + kh, Wo + 2 * pad[1] + kw))
    cig = Ci // groups
    for c in range(Ci):
        g = c // cig
        for i in range(H):
            for j in range(W):
                full[:, g * Cog:(g + 1) * Cog, i * stride[0]:i * stride[0] + kh, j * stride[1]:j * stride[1] + kw] += \
                    y[:, c, i, j][:, None, None, None] * w[c][None]
    out = full[:, :, pad[0]:pad[0] + Ho, pad[1]:pad[1] + Wo]
    return out if b is None else out + b[None, :, None, None]


def ref_pool(x, k, s, p, reduce, fill):
    N, C, H, W = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)), constant_values=fill)
    oh, ow = (H + 2 * p - k) // s + 1, (W + 2 * p - k) // s + 1
    out = np.zeros((N, C, oh, ow))
    for i in range(oh):
        for j in range(ow):
            out[:, :, i, j] = reduce(xp[:, :, i * s:i * s + k, j * s:j * s + k], axis=(2, 3))
    return out


def ref_normalize(x, axes, eps=1e-5):
    mean = x.mean(axis=axes, keepdims=True)
    var = x.var(axis=axes, keepdims=True)
    return (x - mean) / np.sqrt(var + eps)


# ---------------------------------------------------------------------- Linear, Bilinear, Identity
def test_linear_forward_backward_and_default_init(rng):
    jg.manual_seed(0)
    lin = nn.Linear(5, 3)
    bound = 1 / math.sqrt(5)
    w, b = lin.weight.detach().numpy(), lin.bias.detach().numpy()
    assert w.shape == (3, 5) and b.shape == (3,)
    assert np.abs(w).max() <= bound and np.abs(b).max() <= bound and w.std() > bound / 4
    x = R(rng, 2, 4, 5).astype(np.float32)
    out = lin(T(x))
    np.testing.assert_allclose(out.detach().numpy(), x @ w.T + b, rtol=1e-5, atol=1e-6)
    assert out.shape == (2, 4, 3) and out.dtype is jg.float32
    lin.double()
    xt = T(R(rng, 4, 5), requires_grad=True)
    assert gradcheck(lambda x, w, b: F.linear(x, w, b), (xt, lin.weight, lin.bias))
    assert gradgradcheck(lambda x, w: F.linear(x, w), (xt, lin.weight))


def test_linear_without_bias_and_1d_input(rng):
    lin = _f64(nn.Linear(3, 2, bias=False))
    assert lin.bias is None and [n for n, _ in lin.named_parameters()] == ["weight"]
    x = R(rng, 3)
    np.testing.assert_allclose(lin(T(x)).detach().numpy(), lin.weight.detach().numpy() @ x)


def test_linear_shape_error_message():
    with pytest.raises(RuntimeError, match=r"^mat1 and mat2 shapes cannot be multiplied \(4x3 and 5x2\)$"):
        nn.Linear(5, 2)(jg.randn(4, 3))
    with pytest.raises(RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied \(8x3 and 5x2\)"):
        nn.Linear(5, 2)(jg.randn(2, 4, 3))
    with pytest.raises(RuntimeError, match="expected m1 and m2 to have the same dtype, but got: double != float"):
        nn.Linear(3, 2)(jg.randn(4, 3, dtype=jg.float64))


def test_bilinear(rng):
    m = _f64(nn.Bilinear(2, 3, 4))
    x1, x2 = R(rng, 5, 2), R(rng, 5, 3)
    A, b = m.weight.detach().numpy(), m.bias.detach().numpy()
    ref = np.einsum("ni,oij,nj->no", x1, A, x2) + b
    np.testing.assert_allclose(m(T(x1), T(x2)).detach().numpy(), ref, rtol=1e-12)
    assert gradcheck(lambda a, c, w, bb: F.bilinear(a, c, w, bb), (T(x1[:2], True), T(x2[:2], True), m.weight, m.bias))
    with pytest.raises(RuntimeError, match="input1 size does not match weight size: got 3 but expected 2"):
        m(T(x2), T(x2))


def test_identity():
    x = jg.randn(2, 3)
    assert nn.Identity(54, unused="x")(x) is x


# ---------------------------------------------------------------------- convolution
@pytest.mark.parametrize("kw", [dict(), dict(stride=2, padding=1), dict(padding=(1, 0), dilation=(2, 1)),
                                dict(groups=2, stride=(1, 2)), dict(padding="same", dilation=2),
                                dict(padding="valid")])
def test_conv2d_matches_reference(rng, kw):
    m = _f64(nn.Conv2d(4, 6, (3, 2) if kw.get("padding") != "same" else 2, **kw))
    x = R(rng, 2, 4, 6, 5)
    k = m.weight.shape[2:]
    stride, dil = m.stride, m.dilation
    if m.padding == "same":
        tot = [d * (kk - 1) for d, kk in zip(dil, k)]
        pad = tuple((t // 2, t - t // 2) for t in tot)
    elif m.padding == "valid":
        pad = ((0, 0), (0, 0))
    else:
        pad = tuple((p, p) for p in m.padding)
    ref = ref_conv2d(x, m.weight.detach().numpy(), m.bias.detach().numpy(), stride, pad, dil, m.groups)
    out = m(T(x))
    np.testing.assert_allclose(out.detach().numpy(), ref, rtol=1e-10, atol=1e-12)
    assert type(out.grad_fn).__name__ == "ConvolutionBackward0"
    if m.padding == "same":
        assert out.shape[2:] == x.shape[2:]


def test_conv2d_gradcheck_and_double_backward(rng):
    x = T(R(rng, 2, 4, 5, 4), True)
    w = T(R(rng, 4, 2, 2, 3), True)
    b = T(R(rng, 4), True)
    fn = lambda x, w, b: F.conv2d(x, w, b, stride=(2, 1), padding=1, dilation=(1, 2), groups=2)  # noqa: E731
    assert gradcheck(fn, (x, w, b))
    assert gradgradcheck(fn, (x, w, b))


def test_conv1d_and_unbatched_inputs(rng):
    m = _f64(nn.Conv1d(3, 4, 3, stride=2, padding=1))
    x = R(rng, 2, 3, 7)
    ref = ref_conv2d(x[:, :, None], m.weight.detach().numpy()[:, :, None], m.bias.detach().numpy(), (1, 2),
                     ((0, 0), (1, 1)))[:, :, 0]
    np.testing.assert_allclose(m(T(x)).detach().numpy(), ref, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(m(T(x[0])).detach().numpy(), ref[0], rtol=1e-10, atol=1e-12)
    assert gradcheck(lambda x, w: F.conv1d(x, w, dilation=2, groups=3), (T(R(rng, 1, 3, 7), True),
                                                                          T(R(rng, 3, 1, 2), True)))
    c2 = _f64(nn.Conv2d(3, 2, 2))
    xi = R(rng, 3, 4, 4)
    assert c2(T(xi)).shape == (2, 3, 3)


def test_conv_transpose2d(rng):
    m = _f64(nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2))
    assert m.weight.shape == (4, 3, 3, 3)
    y = R(rng, 2, 4, 3, 3)
    ref = ref_conv_transpose2d(y, m.weight.detach().numpy(), m.bias.detach().numpy(), (2, 2), (1, 1), (1, 1), 2)
    out = m(T(y))
    assert out.shape == (2, 6, 6, 6)
    np.testing.assert_allclose(out.detach().numpy(), ref, rtol=1e-10, atol=1e-12)
    # output_size picks output_padding
    m2 = _f64(nn.ConvTranspose2d(4, 2, 3, stride=2))
    assert m2(T(y), output_size=[8, 8]).shape == (2, 2, 8, 8)
    assert m2(T(y)).shape == (2, 2, 7, 7)
    with pytest.raises(ValueError, match="requested an output size of"):
        m2(T(y), output_size=[10, 10])
    assert gradcheck(lambda y, w, b: F.conv_transpose2d(y, w, b, stride=2, padding=1, output_padding=1),
                     (T(R(rng, 1, 2, 2, 3), True), T(R(rng, 2, 3, 3, 2), True), T(R(rng, 3), True)))


def test_conv_is_the_adjoint_of_conv_transpose(rng):
    """<conv2d(x, w), y> == <x, conv_transpose2d(y, w)>: the input-gradient identity."""
    x, w = R(rng, 2, 3, 8, 6), R(rng, 4, 3, 3, 2)
    y = R(rng, 2, 4, 4, 4)
    lhs = (F.conv2d(T(x), T(w), stride=2, padding=1).numpy() * y).sum()
    rhs = (x * F.conv_transpose2d(T(y), T(w), stride=2, padding=1, output_padding=(1, 0)).numpy()).sum()
    assert abs(lhs - rhs) < 1e-9 * max(1, abs(lhs))


def test_conv_errors():
    conv = nn.Conv2d(3, 8, 3)
    with pytest.raises(RuntimeError, match=r"^Given groups=1, weight of size \[8, 3, 3, 3\], expected input\[2, 4, 8, "
                                           r"8\] to have 3 channels, but got 4 channels instead$"):
        conv(jg.randn(2, 4, 8, 8))
    with pytest.raises(RuntimeError, match=r"Expected 3D \(unbatched\) or 4D \(batched\) input to conv2d, but got "
                                           r"input of size: \[2, 3\]"):
        conv(jg.randn(2, 3))
    with pytest.raises(RuntimeError, match=r"Calculated padded input size per channel: \(2 x 2\). Kernel size: \(3 x "
                                           r"3\). Kernel size can't be greater than actual input size"):
        conv(jg.randn(2, 3, 2, 2))
    with pytest.raises(RuntimeError, match=r"Input type \(double\) and bias type \(float\) should be the same"):
        conv(jg.randn(2, 3, 8, 8, dtype=jg.float64))
    with pytest.raises(RuntimeError, match="padding='same' is not supported for strided convolutions"):
        F.conv2d(jg.randn(1, 3, 5, 5), jg.randn(2, 3, 3, 3), stride=2, padding="same")
    with pytest.raises(RuntimeError, match="Invalid padding string: 'foo'"):
        F.conv2d(jg.randn(1, 3, 5, 5), jg.randn(2, 3, 3, 3), padding="foo")
    with pytest.raises(ValueError, match="padding='same' is not supported for strided convolutions"):
        nn.Conv2d(3, 3, 3, stride=2, padding="same")
    with pytest.raises(ValueError, match="out_channels must be divisible by groups"):
        nn.Conv2d(4, 6, 3, groups=4)
    with pytest.raises(RuntimeError, match=r"expected bias to be 1-dimensional with 8 elements, but got bias of size "
                                           r"\[5\] instead"):
        F.conv2d(jg.randn(2, 3, 8, 8), jg.randn(8, 3, 3, 3), jg.randn(5))
    with pytest.raises(RuntimeError, match="non-positive stride is not supported"):
        F.conv2d(jg.randn(2, 3, 8, 8), jg.randn(8, 3, 3, 3), stride=0)
    with pytest.raises(RuntimeError, match=r"Given transposed=1, weight of size \[3, 8, 3, 3\], expected input\[2, 4, "
                                           r"5, 5\] to have 3 channels, but got 4 channels instead"):
        F.conv_transpose2d(jg.randn(2, 4, 5, 5), jg.randn(3, 8, 3, 3))
    with pytest.raises(RuntimeError, match="output padding must be smaller than either stride or dilation"):
        F.conv_transpose2d(jg.randn(2, 3, 5, 5), jg.randn(3, 8, 3, 3), output_padding=2)


# ---------------------------------------------------------------------- pooling
def test_max_pool2d_forward_indices_and_grad(rng):
    x = R(rng, 2, 3, 6, 6)
    out, idx = F.max_pool2d(T(x), 2, return_indices=True)
    np.testing.assert_array_equal(out.numpy(), ref_pool(x, 2, 2, 0, np.max, -np.inf))
    flat = x.reshape(2, 3, -1)
    np.testing.assert_array_equal(np.take_along_axis(flat, idx.numpy().reshape(2, 3, -1), 2),
                                  out.numpy().reshape(2, 3, -1))
    assert idx.dtype is jg.int64
    m = nn.MaxPool2d(3, stride=2, padding=1)
    np.testing.assert_array_equal(m(T(x)).numpy(), ref_pool(x, 3, 2, 1, np.max, -np.inf))
    xt = T(x, True)
    y = m(xt)
    assert type(y.grad_fn).__name__ == "MaxPool2DWithIndicesBackward0"
    assert gradcheck(lambda x: F.max_pool2d(x, 3, 2, 1), (xt,))
    assert gradgradcheck(lambda x: F.max_pool2d(x, (2, 3), (1, 2), dilation=(2, 1), ceil_mode=True),
                         (T(x[:1, :1], True),))


def test_max_pool2d_nan_and_ties():
    x = T(np.array([[[[1.0, np.nan], [3.0, 2.0]]]]))
    v, i = F.max_pool2d(x, 2, return_indices=True)
    assert np.isnan(v.item()) and i.item() == 1
    x = T(np.ones((1, 1, 2, 2)), True)
    F.max_pool2d(x, 2).sum().backward()
    assert x.grad.numpy().ravel().tolist() == [1.0, 0.0, 0.0, 0.0]  # the gradient goes to the first maximum


def test_avg_pool2d(rng):
    x = R(rng, 2, 3, 5, 5)
    np.testing.assert_allclose(F.avg_pool2d(T(x), 2).numpy(), ref_pool(x, 2, 2, 0, np.mean, 0), rtol=1e-12)
    # count_include_pad: the zero padding counts in the divisor (or not)
    np.testing.assert_allclose(nn.AvgPool2d(3, 2, 1)(T(x)).numpy(), ref_pool(x, 3, 2, 1, np.mean, 0), rtol=1e-12)
    ones = np.ones((1, 1, 5, 5))
    no_pad = F.avg_pool2d(T(ones), 3, 2, 1, count_include_pad=False).numpy()
    np.testing.assert_allclose(no_pad, np.ones((1, 1, 3, 3)))
    np.testing.assert_allclose(F.avg_pool2d(T(x), 2, divisor_override=3).numpy(),
                               ref_pool(x, 2, 2, 0, np.sum, 0) / 3, rtol=1e-12)
    assert gradcheck(lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False), (T(x[:1], True),))
    assert gradgradcheck(lambda x: F.avg_pool2d(x, 2), (T(x[:1, :2], True),))


def test_adaptive_avg_pool2d(rng):
    x = R(rng, 2, 3, 7, 5)
    out = nn.AdaptiveAvgPool2d((3, 2))(T(x)).numpy()
    for i in range(3):
        for j in range(2):
            h0, h1 = (i * 7) // 3, -(-(i + 1) * 7 // 3)
            w0, w1 = (j * 5) // 2, -(-(j + 1) * 5 // 2)
            np.testing.assert_allclose(out[:, :, i, j], x[:, :, h0:h1, w0:w1].mean(axis=(2, 3)), rtol=1e-12)
    np.testing.assert_allclose(F.adaptive_avg_pool2d(T(x), 1).numpy(), x.mean(axis=(2, 3), keepdims=True), rtol=1e-12)
    assert F.adaptive_avg_pool2d(T(x), (None, 2)).shape == (2, 3, 7, 2)
    assert gradcheck(lambda x: F.adaptive_avg_pool2d(x, (2, 3)), (T(x[:1, :2], True),))


def test_pool_errors():
    with pytest.raises(RuntimeError, match="pad should be at most half of effective kernel size, but got pad=2, "
                                           "kernel_size=3 and dilation=1"):
        F.max_pool2d(jg.randn(2, 4, 8, 8), 3, padding=2)
    with pytest.raises(RuntimeError, match=r"Given input size: \(4x1x1\). Calculated output size: \(4x0x0\). Output "
                                           r"size is too small"):
        nn.MaxPool2d(2)(jg.randn(2, 4, 1, 1))
    with pytest.raises(RuntimeError, match=r"non-empty 3D or 4D \(batch mode\) tensor expected for input"):
        F.avg_pool2d(jg.randn(2, 4), 2)
    with pytest.raises(RuntimeError, match=r"adaptive_avg_pool2d\(\): Expected 3D or 4D tensor, but got \[2, 4\]"):
        F.adaptive_avg_pool2d(jg.randn(2, 4), 2)
    with pytest.raises(RuntimeError, match="max_pool2d: kernel_size must either be a single int, or a tuple of two"):
        F.max_pool2d(jg.randn(1, 1, 4, 4), (2, 2, 2))


# ---------------------------------------------------------------------- normalisation
def test_batch_norm_training_running_stats_and_eval(rng):
    bn = _f64(nn.BatchNorm2d(3))
    assert [k for k in bn.state_dict()] == ["weight", "bias", "running_mean", "running_var", "num_batches_tracked"]
    x = R(rng, 4, 3, 2, 2) * 2 + 1
    out = bn(T(x))
    np.testing.assert_allclose(out.detach().numpy(), ref_normalize(x, (0, 2, 3)), rtol=1e-10, atol=1e-12)
    n = 4 * 2 * 2
    np.testing.assert_allclose(bn.running_mean.numpy(), 0.1 * x.mean(axis=(0, 2, 3)), rtol=1e-12)
    np.testing.assert_allclose(bn.running_var.numpy(), 0.9 + 0.1 * x.var(axis=(0, 2, 3)) * n / (n - 1), rtol=1e-12)
    assert bn.num_batches_tracked.item() == 1
    bn.eval()
    rm, rv = bn.running_mean.numpy().copy(), bn.running_var.numpy().copy()
    y = bn(T(x)).detach().numpy()
    np.testing.assert_allclose(y, (x - rm[None, :, None, None]) / np.sqrt(rv[None, :, None, None] + 1e-5), rtol=1e-10)
    assert bn.num_batches_tracked.item() == 1 and np.array_equal(bn.running_mean.numpy(), rm)
    bn.train()
    assert gradcheck(lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
                     (T(x[:3, :, :1], True), T(R(rng, 3), True), T(R(rng, 3), True)))


def test_batch_norm1d_momentum_none_and_no_tracking(rng):
    bn = _f64(nn.BatchNorm1d(2, momentum=None))
    xs = [R(rng, 5, 2) for _ in range(3)]
    for x in xs:
        bn(T(x))
    np.testing.assert_allclose(bn.running_mean.numpy(), np.mean([x.mean(0) for x in xs], axis=0), rtol=1e-12)
    free = _f64(nn.BatchNorm1d(2, affine=False, track_running_stats=False))
    assert list(free.state_dict()) == [] and free.running_mean is None
    x3 = R(rng, 4, 2, 3)
    free.eval()  # without running statistics, eval mode uses the batch's
    np.testing.assert_allclose(free(T(x3)).numpy(), ref_normalize(x3, (0, 2)), rtol=1e-10)


def test_batch_norm_errors():
    with pytest.raises(ValueError, match=r"Expected more than 1 value per channel when training, got input size "
                                         r"jitgrad.Size\(\[1, 4\]\)"):
        nn.BatchNorm1d(4)(jg.randn(1, 4))
    with pytest.raises(ValueError, match=r"expected 2D or 3D input \(got 4D input\)"):
        nn.BatchNorm1d(4)(jg.randn(2, 4, 3, 3))
    with pytest.raises(ValueError, match=r"expected 4D input \(got 3D input\)"):
        nn.BatchNorm2d(4)(jg.randn(2, 4, 3))
    with pytest.raises(RuntimeError, match="running_mean should contain 5 elements not 4"):
        nn.BatchNorm2d(4)(jg.randn(2, 5, 3, 3))


@pytest.mark.torch
@pytest.mark.parametrize("dtype,tol", [("float32", 2e-6), ("float64", 1e-12)])
def test_layer_norm_is_one_node_with_pytorchs_values_and_gradients(dtype, tol, rng):
    """F.layer_norm is native_layer_norm, one node (NativeLayerNormBackward0) whose fused backward and whose
    formulas (create_graph) both give PyTorch's gradients; rows of 128 as a transformer's."""
    torch = pytest.importorskip("torch")
    x, w, b, g = (R(rng, *s).astype(dtype) for s in ((4, 6, 128), (128,), (128,), (4, 6, 128)))
    tx, tw, tb = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
    jx, jw, jb = (T(a, True) for a in (x, w, b))
    ty = torch.nn.functional.layer_norm(tx, (128,), tw, tb)
    jy = F.layer_norm(jx, (128,), jw, jb)
    assert jy.grad_fn.name() == type(ty.grad_fn).__name__ == "NativeLayerNormBackward0"
    np.testing.assert_allclose(jy.detach().numpy(), ty.detach().numpy(), rtol=tol, atol=tol)
    want = torch.autograd.grad(ty, (tx, tw, tb), torch.tensor(g))
    fused = jg.autograd.grad(jy, (jx, jw, jb), T(g))
    jy = F.layer_norm(jx, (128,), jw, jb)
    formulas = jg.autograd.grad(jy, (jx, jw, jb), T(g), create_graph=True)
    for a, b_, c in zip(want, fused, formulas):
        np.testing.assert_allclose(b_.numpy(), a.numpy(), rtol=20 * tol, atol=20 * tol)
        np.testing.assert_allclose(c.detach().numpy(), a.numpy(), rtol=20 * tol, atol=20 * tol)


def test_layer_norm_and_group_norm(rng):
    ln = _f64(nn.LayerNorm((2, 3)))
    with jg.no_grad():
        ln.weight.copy_(T(R(rng, 2, 3)))
    x = R(rng, 4, 2, 3)
    np.testing.assert_allclose(ln(T(x)).detach().numpy(), ref_normalize(x, (1, 2)) * ln.weight.detach().numpy(),
                               rtol=1e-10)
    assert gradcheck(lambda x, w, b: F.layer_norm(x, (3,), w, b), (T(x[:2], True), T(R(rng, 3), True),
                                                                   T(R(rng, 3), True)))
    with pytest.raises(RuntimeError, match=r"Given normalized_shape=\[10\], expected input with shape \[\*, 10\], but "
                                           r"got input of size\[3, 5\]"):
        nn.LayerNorm(10)(jg.randn(3, 5))
    gn = _f64(nn.GroupNorm(2, 4))
    xg = R(rng, 3, 4, 5)
    ref = ref_normalize(xg.reshape(3, 2, 10), (2,)).reshape(3, 4, 5)
    np.testing.assert_allclose(gn(T(xg)).detach().numpy(), ref, rtol=1e-10)
    assert gradcheck(lambda x, w: F.group_norm(x, 2, w), (T(xg[:2, :, :2], True), T(R(rng, 4), True)))
    with pytest.raises(ValueError, match=r"num_channels \(4\) must be divisible by num_groups \(3\)"):
        nn.GroupNorm(3, 4)
    with pytest.raises(RuntimeError, match="Expected number of channels in input to be divisible by num_groups"):
        gn(jg.randn(2, 5, 3, dtype=jg.float64))


# ---------------------------------------------------------------------- embedding, dropout, shape layers
def test_embedding_padding_idx_gets_zero_grad(rng):
    jg.manual_seed(0)
    emb = _f64(nn.Embedding(5, 3, padding_idx=1))
    assert np.all(emb.weight.detach().numpy()[1] == 0)
    idx = np.array([[0, 1, 4], [1, 1, 0]])
    out = emb(T(idx))
    np.testing.assert_array_equal(out.detach().numpy(), emb.weight.detach().numpy()[idx])
    g = R(rng, 2, 3, 3)
    out.backward(T(g))
    expect = np.zeros((5, 3))
    np.add.at(expect, idx.reshape(-1), g.reshape(-1, 3))
    expect[1] = 0
    np.testing.assert_allclose(emb.weight.grad.numpy(), expect, rtol=1e-12)
    assert type(out.grad_fn).__name__ == "EmbeddingBackward0"
    assert gradcheck(lambda w: F.embedding(T(idx), w), (T(R(rng, 5, 2), True),))
    assert nn.Embedding(5, 3, padding_idx=-1).padding_idx == 4


def test_embedding_scale_grad_by_freq_divides_by_the_index_counts(rng):
    idx = np.array([[0, 2, 2], [4, 2, 0]])
    w = T(R(rng, 5, 3), True)
    g = R(rng, 2, 3, 3)
    F.embedding(T(idx), w, scale_grad_by_freq=True).backward(T(g))
    counts = np.bincount(idx.reshape(-1), minlength=5)
    expect = np.zeros((5, 3))
    np.add.at(expect, idx.reshape(-1), (g / counts[idx][..., None]).reshape(-1, 3))
    np.testing.assert_allclose(w.grad.numpy(), expect, rtol=1e-12)  # (not the derivative: no gradcheck)


def test_embedding_max_norm_and_errors(rng):
    w = T(R(rng, 4, 3) * 5)
    F.embedding(T([0, 2]), w, max_norm=1.0)
    norms = np.linalg.norm(w.numpy(), axis=1)
    assert np.all(norms[[0, 2]] <= 1.0 + 1e-6) and np.all(norms[[1, 3]] > 1.0)
    with pytest.raises(IndexError, match="index out of range in self"):
        nn.Embedding(10, 3)(T([10]))
    with pytest.raises(RuntimeError, match="Expected tensor for argument #1 'indices' to have one of the following "
                                           "scalar types: Long, Int; but got jitgrad.FloatTensor instead"):
        nn.Embedding(10, 3)(jg.tensor([1.0]))
    with pytest.raises(AssertionError, match="Padding_idx must be within num_embeddings"):
        nn.Embedding(10, 3, padding_idx=10)
    pre = nn.Embedding.from_pretrained(jg.ones(3, 2))
    assert not pre.weight.requires_grad and pre(T([2])).tolist() == [[1.0, 1.0]]


def test_dropout_train_eval_and_seed():
    x = jg.ones(1000)
    drop = nn.Dropout(0.25)
    jg.manual_seed(7)
    a = drop(x)
    jg.manual_seed(7)
    b = drop(x)
    assert np.array_equal(a.numpy(), b.numpy())
    kept = a.numpy()[a.numpy() != 0]
    np.testing.assert_allclose(kept, 1 / 0.75, rtol=1e-6)
    assert 150 < (a.numpy() == 0).sum() < 350
    drop.eval()
    assert drop(x) is x
    assert F.dropout(x, 0.5, training=False) is x
    assert F.dropout(x, 1.0).sum().item() == 0
    xg = jg.ones(8, dtype=jg.float64, requires_grad=True)
    jg.manual_seed(1)
    out = F.dropout(xg, 0.5)
    out.sum().backward()
    np.testing.assert_array_equal(xg.grad.numpy(), out.detach().numpy())
    with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1, but got 1.5"):
        nn.Dropout(1.5)


def test_flatten_unflatten(rng):
    x = jg.randn(2, 3, 4, 5)
    assert nn.Flatten()(x).shape == (2, 60)
    assert nn.Flatten(0, 1)(x).shape == (6, 4, 5)
    assert nn.Unflatten(1, (3, 20))(nn.Flatten()(x)).shape == (2, 3, 20)


# ---------------------------------------------------------------------- activations
ACTIVATIONS = [
    (nn.ReLU(), lambda x: np.maximum(x, 0)),
    (nn.LeakyReLU(0.2), lambda x: np.where(x > 0, x, 0.2 * x)),
    (nn.ELU(0.7), lambda x: np.where(x > 0, x, 0.7 * np.expm1(x))),
    (nn.Hardtanh(-0.5, 0.7), lambda x: np.clip(x, -0.5, 0.7)),
    (nn.GELU(), lambda x: 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))),
    (nn.GELU("tanh"), lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))),
    (nn.SiLU(), lambda x: x / (1 + np.exp(-x))),
    (nn.Tanh(), np.tanh),
    (nn.Sigmoid(), lambda x: 1 / (1 + np.exp(-x))),
    (nn.Softplus(2.0, 5.0), lambda x: np.where(2 * x > 5, x, np.log1p(np.exp(2 * x)) / 2)),
    (nn.Softmax(dim=1), lambda x: np.exp(x) / np.exp(x).sum(1, keepdims=True)),
    (nn.LogSoftmax(dim=0), lambda x: x - np.log(np.exp(x).sum(0, keepdims=True))),
]


@pytest.mark.parametrize("module,ref", ACTIVATIONS, ids=[repr(m) for m, _ in ACTIVATIONS])
def test_activation_modules(rng, module, ref):
    x = R(rng, 3, 4) * 2
    np.testing.assert_allclose(module(T(x)).numpy(), ref(x), rtol=1e-10, atol=1e-12)
    assert gradcheck(module, (T(x, True),))


def test_inplace_activations():
    x = jg.tensor([-1.0, 2.0])
    y = nn.ReLU(inplace=True)(x)
    assert y is x and x.tolist() == [0.0, 2.0] and x._version == 1
    z = jg.tensor([-1.0, 2.0])
    F.leaky_relu(z, 0.5, inplace=True)
    assert z.tolist() == [-0.5, 2.0]
    h = jg.tensor([-3.0, 0.5, 3.0])
    assert nn.Hardtanh(-2.0, 1.0, inplace=True)(h) is h and h.tolist() == [-2.0, 0.5, 1.0] and h._version == 1
    assert F.hardtanh_(h, max_val=0.0) is h and h.tolist() == [-1.0, 0.0, 0.0]


def test_hardtanh_gradient_passes_strictly_inside_the_bounds():
    # PyTorch's hardtanh_backward: 0 where x <= min_val or x >= max_val, g elsewhere (NaN included)
    x = jg.tensor([-2.0, -1.0, 0.0, 1.0, 2.0, math.nan], requires_grad=True)
    F.hardtanh(x).sum().backward()
    assert x.grad.tolist() == [0.0, 0.0, 1.0, 0.0, 0.0, 1.0]
    assert F.hardtanh(jg.tensor([-3, 0, 3]), -1.5, 2.5).tolist() == [-1, 0, 2]  # integer bounds cut toward 0


def test_softmax_without_dim_warns():
    with pytest.warns(UserWarning, match="Implicit dimension choice for softmax has been deprecated"):
        nn.Softmax()(jg.randn(2, 3))


# ---------------------------------------------------------------------- functional extras
def test_pad_constant(rng):
    x = R(rng, 2, 3, 4)
    out = F.pad(T(x), (1, 2, 0, 1), value=-1.0)
    np.testing.assert_array_equal(out.numpy(), np.pad(x, ((0, 0), (0, 1), (1, 2)), constant_values=-1.0))
    np.testing.assert_array_equal(F.pad(T(x), (-1, 1)).numpy(), np.pad(x[:, :, 1:], ((0, 0), (0, 0), (0, 1))))
    assert type(out.grad_fn).__name__ if out.grad_fn else True
    assert gradcheck(lambda x: F.pad(x, (1, -1, 2, 0)), (T(x, True),))
    with pytest.raises(RuntimeError, match="Padding length must be divisible by 2"):
        F.pad(T(x), (1, 2, 3))
    with pytest.raises(RuntimeError, match="Padding length should be less than or equal to two times the input "
                                           "dimension but got padding length 8 and input of dimension 3"):
        F.pad(T(x), (1,) * 8)


def test_one_hot():
    assert F.one_hot(jg.tensor([0, 2]), 3).tolist() == [[1, 0, 0], [0, 0, 1]]


# ---------------------------------------------------------------------- a small network end to end
def test_cnn_forward_backward_float32():
    jg.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
                        nn.Conv2d(4, 8, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(0.1),
                        nn.Linear(8, 3))
    x = jg.randn(5, 1, 8, 8)
    y = jg.tensor([0, 1, 2, 1, 0])
    loss = nn.CrossEntropyLoss()(net(x), y)
    assert loss.dtype is jg.float32 and loss.shape == ()
    loss.backward()
    assert all(p.grad is not None and p.grad.shape == p.shape and np.isfinite(p.grad.numpy()).all()
               for p in net.parameters())


def test_integer_and_bool_inputs_like_pytorch(rng):
    x = rng.integers(-5, 5, (1, 2, 4, 4))
    w = rng.integers(-3, 3, (3, 2, 2, 2))
    out = F.conv2d(T(x), T(w))
    assert out.dtype is jg.int64
    np.testing.assert_array_equal(out.numpy(), ref_conv2d(x, w).astype(np.int64))
    np.testing.assert_array_equal(F.max_pool2d(T(x), 2).numpy(), ref_pool(x, 2, 2, 0, np.max, 0).astype(np.int64))
    # integer average pooling truncates toward zero, as PyTorch's integer division does
    np.testing.assert_array_equal(F.avg_pool2d(T(x), 2).numpy(), np.trunc(ref_pool(x, 2, 2, 0, np.mean, 0)))
    b = jg.ones(1, 2, 4, 4, dtype=jg.bool)
    for fn, kernel in [(lambda: F.conv2d(b, b[:, :, :2, :2]), "slow_conv2d_cpu"),
                       (lambda: F.conv_transpose2d(b, b[:, :, :2, :2]), "slow_conv_transpose2d_out_cpu"),
                       (lambda: F.max_pool2d(b, 2), "max_pool2d"), (lambda: F.avg_pool2d(b, 2), "avg_pool2d"),
                       (lambda: F.adaptive_avg_pool2d(b, 2), "adaptive_avg_pool2d"),
                       (lambda: F.linear(b[0, 0], b[0, 0]), "addmm_impl_cpu_")]:
        with pytest.raises(NotImplementedError, match="^\"%s\" not implemented for 'Bool'$" % kernel):
            fn()
    with pytest.raises(NotImplementedError, match="\"adaptive_avg_pool2d\" not implemented for 'Long'"):
        F.adaptive_avg_pool2d(T(x), 2)
    assert F.pad(b, (1, 1)).dtype is jg.bool and F.embedding(T([1]), b[0, 0]).dtype is jg.bool


# ---------------------------------------------------------------------- dropout probability
def test_dropout_probability_nan_or_out_of_range_raises():
    x = jg.ones(4)
    for p in (-0.1, 1.5):
        with pytest.raises(ValueError, match="^dropout probability has to be between 0 and 1, but got %s$" % p):
            F.dropout(x, p)
        with pytest.raises(ValueError, match="^dropout probability has to be between 0 and 1, but got %s$" % p):
            jg.nn.Dropout(p)
    # NaN passes Python's comparisons: PyTorch's kernel rejects it, in training and in eval mode
    for training in (True, False):
        for inplace in (False, True):
            with pytest.raises(RuntimeError, match="^dropout probability has to be between 0 and 1, but got nan$"):
                F.dropout(x, math.nan, training, inplace)
    m = jg.nn.Dropout(math.nan)  # constructing succeeds, as in PyTorch
    for mode in (m.train, m.eval):
        mode()
        with pytest.raises(RuntimeError, match="but got nan$"):
            m(x)
    assert x.tolist() == [1.0] * 4
    assert F.dropout(x, 1.0).tolist() == [0.0] * 4 and F.dropout(x, 0.0) is x


# ---------------------------------------------------------------------- linear without input features
def test_linear_with_zero_input_features():
    x = jg.zeros(4, 0, requires_grad=True)
    w = jg.zeros(3, 0, requires_grad=True)
    b = jg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = F.linear(x, w, b)
    assert y.tolist() == [[1.0, 2.0, 3.0]] * 4
    y.sum().backward()
    assert x.grad.shape == (4, 0) and w.grad.shape == (3, 0) and b.grad.tolist() == [4.0, 4.0, 4.0]
    assert F.linear(jg.zeros(4, 0), jg.zeros(3, 0)).tolist() == [[0.0] * 3] * 4
    assert F.linear(jg.zeros(2, 5, 0), jg.zeros(3, 0)).shape == (2, 5, 3)
    z = jg.ones(2, 5, requires_grad=True)
    out = F.linear(z, jg.ones(0, 5, requires_grad=True), jg.zeros(0, requires_grad=True))  # 0 output features
    assert out.shape == (2, 0)
    out.sum().backward()
    assert z.grad.tolist() == [[0.0] * 5] * 2
    e = jg.ones(0, 5, requires_grad=True)  # an empty batch
    F.linear(e, jg.ones(3, 5)).sum().backward()
    assert e.grad.shape == (0, 5)


def test_activation_modules_are_generated_from_their_entries():
    """ReLU, LeakyReLU, ELU, SiLU, CELU and SELU come from their op-table entries: PyTorch's reprs, the in-place
    form (positional or keyword), F.<name> and F.<name>_, and grad_fn names (SELU's is EluBackward0)."""
    assert [repr(m) for m in (nn.ReLU(), nn.ReLU(True), nn.LeakyReLU(0.2, True), nn.ELU(), nn.CELU(2.0, True),
                              nn.SELU(inplace=True), nn.SiLU())] == [
        "ReLU()", "ReLU(inplace=True)", "LeakyReLU(negative_slope=0.2, inplace=True)", "ELU(alpha=1.0)",
        "CELU(alpha=2.0, inplace=True)", "SELU(inplace=True)", "SiLU()"]
    x = jg.tensor([-2.0, -0.5, 0.0, 1.5], dtype=jg.float64)
    alpha, scale = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946
    np.testing.assert_allclose(nn.CELU(2.0)(x).numpy(), np.where(x.numpy() > 0, x.numpy(), 2 * np.expm1(x.numpy() / 2)))
    np.testing.assert_allclose(F.selu(x).numpy(), scale * np.where(x.numpy() > 0, x.numpy(), alpha * np.expm1(x.numpy())))
    y = x.clone()
    assert nn.SELU(True)(y) is y and F.celu_(y) is y
    w = x.clone().requires_grad_()
    assert F.selu(w).grad_fn.name() == "EluBackward0" and F.celu(w).grad_fn.name() == "CeluBackward0"
    with pytest.raises(RuntimeError, match="alpha cannot be 0 for CELU"):
        F.celu(x, 0.0)
    with pytest.raises(NotImplementedError, match="\"elu_cpu\" not implemented for 'Long'"):
        jg.selu(jg.tensor([1, 2]))


def test_data_parallel_on_one_device_runs_the_module():
    m = jg.nn.Linear(2, 3)
    dp = jg.nn.DataParallel(m)
    assert jg.nn.parallel.DataParallel is jg.nn.DataParallel and dp.module is m
    assert list(dp.state_dict()) == ["module.weight", "module.bias"]
    x = jg.ones(4, 2)
    np.testing.assert_array_equal(dp(x).detach().numpy(), m(x).detach().numpy())
    if not jg.cuda.is_available():
        assert dp.device_ids == []
        with pytest.raises(RuntimeError, match="device type could not be determined"):  # (PyTorch's, without a GPU)
            jg.nn.parallel.data_parallel(m, x)
    with pytest.raises(NotImplementedError, match="DistributedDataParallel"):
        jg.nn.DataParallel(m, device_ids=[0, 1])
