"""Dropout1d/2d/3d, AlphaDropout, FeatureAlphaDropout, PixelShuffle/Unshuffle and the activation modules
Softsign, Tanhshrink, Softshrink, Hardshrink, Threshold, ReLU6, PReLU, RReLU, Softmin, Softmax2d."""
import numpy as np
import pytest

import jitgrad as jg
import jitgrad.nn.functional as F
from jitgrad import nn
from jitgrad.autograd import gradcheck


def rand(*shape, seed=0):
    return np.random.default_rng(seed).normal(size=shape)


@pytest.mark.parametrize("cls,shape,spatial", [(nn.Dropout1d, (4, 6, 5), 1), (nn.Dropout2d, (4, 6, 3, 3), 2),
                                               (nn.Dropout3d, (4, 6, 2, 2, 2), 3), (nn.Dropout1d, (6, 5), 1),
                                               (nn.Dropout3d, (6, 2, 2, 2), 3)])
def test_channel_dropout_zeroes_whole_channels(cls, shape, spatial):
    jg.manual_seed(0)
    m = cls(p=0.5)
    x = jg.ones(*shape)
    channels = m(x).numpy().reshape(-1, int(np.prod(shape[-spatial:])))
    for row in channels:  # a channel is dropped or kept (scaled by 1 / (1 - p)) whole
        assert len(np.unique(row)) == 1 and row[0] in (0.0, 2.0)
    assert 0 < (channels[:, 0] == 0).mean() < 1
    m.eval()
    assert m(x) is x
    assert repr(m) == "%s(p=0.5, inplace=False)" % cls.__name__


def test_dropout_errors_and_warnings():
    with pytest.raises(RuntimeError, match="dropout1d: Expected 2D or 3D input, but received a 4D input"):
        F.dropout1d(jg.ones(1, 2, 3, 4))
    with pytest.warns(UserWarning, match="dropout2d: Received a 3D input to dropout2d"):
        F.dropout2d(jg.ones(2, 3, 4))
    with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1, but got 1.5"):
        nn.Dropout2d(1.5)


@pytest.mark.parametrize("feature", [False, True])
def test_alpha_dropout_keeps_mean_and_variance(feature):
    jg.manual_seed(0)
    x = jg.randn(400, 50, 2, 2, dtype=jg.float64)
    m = (nn.FeatureAlphaDropout if feature else nn.AlphaDropout)(0.2)
    y = m(x).numpy()
    assert abs(y.mean()) < 0.05 and abs(y.std() - 1) < 0.05
    if feature:  # a dropped channel takes one value everywhere
        per = y.reshape(400, 50, -1)
        dropped = np.all(per == per[..., :1], axis=-1)
        assert 0.1 < dropped.mean() < 0.3
    m.eval()
    assert m(x) is x
    assert F.alpha_dropout(x, 0.2) is x  # training=False by default, as PyTorch's functional form


def test_pixel_shuffle_roundtrip_and_errors():
    x = jg.tensor(rand(2, 8, 3, 5), requires_grad=True)
    y = F.pixel_shuffle(x, 2)
    assert y.shape == (2, 2, 6, 10) and y.grad_fn.name() == "PixelShuffleBackward0"
    np.testing.assert_array_equal(F.pixel_unshuffle(y, 2).detach().numpy(), x.detach().numpy())
    # out[n, c, h*r + i, w*r + j] = in[n, c*r*r + i*r + j, h, w]
    np.testing.assert_array_equal(y.detach().numpy()[1, 1, 4 + 1, 6 + 0], x.detach().numpy()[1, 4 + 2 + 0, 2, 3])
    assert gradcheck(lambda t: F.pixel_shuffle(t, 2), (x,))
    assert repr(nn.PixelShuffle(2)) == "PixelShuffle(upscale_factor=2)"
    assert repr(nn.PixelUnshuffle(3)) == "PixelUnshuffle(downscale_factor=3)"
    with pytest.raises(RuntimeError, match="input.size\\(-3\\)=5 is not divisible by 4"):
        F.pixel_shuffle(jg.ones(1, 5, 2, 2), 2)
    with pytest.raises(RuntimeError, match="pixel_unshuffle expects height to be divisible by downscale_factor"):
        F.pixel_unshuffle(jg.ones(1, 1, 3, 4), 2)


def test_activation_values_and_nodes():
    a = rand(3, 4)
    x = jg.tensor(a, requires_grad=True)
    cases = [(nn.Softsign(), a / (1 + np.abs(a)), "DivBackward0"), (nn.Tanhshrink(), a - np.tanh(a), "SubBackward0"),
             (nn.Hardshrink(0.5), np.where(np.abs(a) > 0.5, a, 0), "HardshrinkBackward0"),
             (nn.Softshrink(0.5), np.where(np.abs(a) > 0.5, a - np.sign(a) * 0.5, 0), "SoftshrinkBackward0"),
             (nn.Threshold(0.1, 20.0), np.where(a > 0.1, a, 20.0), "ThresholdBackward0"),
             (nn.ReLU6(), np.clip(a, 0, 6), "HardtanhBackward0"),
             (nn.Softmin(1), np.exp(-a) / np.exp(-a).sum(1, keepdims=True), "SoftmaxBackward0"),
             (nn.PReLU(), np.where(a > 0, a, 0.25 * a), None)]
    for m, want, node in cases:
        y = m(x)
        np.testing.assert_allclose(y.detach().numpy(), want, rtol=1e-12)
        if node:
            assert y.grad_fn.name() == node, m
        assert gradcheck(lambda t: m(t), (x,))


def test_prelu_rrelu_softmax2d_and_reprs():
    p = nn.PReLU(3, init=0.1, dtype=jg.float64)
    x = jg.tensor(rand(2, 3, 4), requires_grad=True)
    assert gradcheck(lambda t, w: F.prelu(t, w), (x, p.weight))
    with pytest.raises(RuntimeError, match="Mismatch of parameter numbers and input channel size. Found parameter "
                                           "numbers = 3 and channel size = 4"):
        p(jg.ones(1, 4, 2, dtype=jg.float64))
    r = nn.RReLU(0.1, 0.3)
    y = r(x).detach().numpy()
    slope = y[x.detach().numpy() < 0] / x.detach().numpy()[x.detach().numpy() < 0]
    assert np.all((slope >= 0.1) & (slope <= 0.3)) and np.unique(slope).size > 1
    r.eval()
    np.testing.assert_allclose(r(x).detach().numpy(), np.where(x.detach().numpy() > 0, x.detach().numpy(),
                                                                0.2 * x.detach().numpy()))
    s = nn.Softmax2d()(jg.tensor(rand(2, 3, 2, 2)))
    np.testing.assert_allclose(s.sum(1).numpy(), 1.0)
    with pytest.raises(ValueError, match="Softmax2d: expected input to be 3D or 4D, got 2D instead"):
        nn.Softmax2d()(jg.ones(2, 2))
    with pytest.raises(RuntimeError, match=r"lambda must be in range \[0, 3.40282e\+38\] for input dtype Float, but "
                                           "found -1"):
        F.softshrink(jg.ones(2), -1)
    reprs = [nn.ReLU6(), nn.ReLU6(True), nn.Threshold(0.1, 20), nn.Hardshrink(), nn.Softshrink(), nn.PReLU(),
             nn.RReLU(), nn.Softmin(1), nn.Softmax2d(), nn.Softsign(), nn.Tanhshrink(), nn.RReLU(0.1, 0.3, True)]
    assert " ".join(map(repr, reprs)) == (
        "ReLU6() ReLU6(inplace=True) Threshold(threshold=0.1, value=20) Hardshrink(0.5) Softshrink(0.5) "
        "PReLU(num_parameters=1) RReLU(lower=0.125, upper=0.3333333333333333) Softmin(dim=1) Softmax2d() Softsign() "
        "Tanhshrink() RReLU(lower=0.1, upper=0.3, inplace=True)")


@pytest.mark.torch
def test_matches_pytorch():
    torch = pytest.importorskip("torch")
    a = rand(2, 8, 3, 4)
    pairs = [(lambda f, t: f.softsign(t), None), (lambda f, t: f.tanhshrink(t), None),
             (lambda f, t: f.softshrink(t, 0.3), None), (lambda f, t: f.hardshrink(t, 0.3), None),
             (lambda f, t: f.threshold(t, 0.2, -3.0), None), (lambda f, t: f.relu6(t * 4), None),
             (lambda f, t: f.softmin(t, 1), None), (lambda f, t: f.pixel_shuffle(t, 2), None),
             (lambda f, t: f.pixel_unshuffle(t[..., :2, :], 2), None), (lambda f, t: f.rrelu(t), "composed: LeakyReluBackward0")]
    for fn, node_differs in pairs:
        t = torch.tensor(a, requires_grad=True)
        j = jg.tensor(a, requires_grad=True)
        to, jo = fn(torch.nn.functional, t), fn(F, j)
        np.testing.assert_allclose(jo.detach().numpy(), to.detach().numpy(), rtol=1e-10, atol=1e-15)
        g = rand(*to.shape, seed=1)
        to.backward(torch.tensor(g))
        jo.backward(jg.tensor(g))
        np.testing.assert_allclose(j.grad.numpy(), t.grad.numpy(), rtol=1e-10, atol=1e-14)
        if not node_differs:
            assert jo.grad_fn.name() == to.grad_fn.name()
