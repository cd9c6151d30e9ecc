"""nn.init: bounds and statistics of each initialiser, gains and fans, no_grad, and reproducibility
through jitgrad.manual_seed."""
import math

import numpy as np
import pytest

import jitgrad as jg
import jitgrad.nn as nn
from jitgrad.nn import init


def test_calculate_gain():
    assert init.calculate_gain("linear") == 1 and init.calculate_gain("conv2d") == 1
    assert init.calculate_gain("sigmoid") == 1
    assert init.calculate_gain("tanh") == pytest.approx(5 / 3)
    assert init.calculate_gain("relu") == pytest.approx(math.sqrt(2))
    assert init.calculate_gain("leaky_relu") == pytest.approx(math.sqrt(2 / (1 + 0.01 ** 2)))
    assert init.calculate_gain("leaky_relu", math.sqrt(5)) == pytest.approx(math.sqrt(1 / 3))
    assert init.calculate_gain("selu") == 0.75
    with pytest.raises(ValueError, match="Unsupported nonlinearity foo"):
        init.calculate_gain("foo")


def test_fans():
    assert init._calculate_fan_in_and_fan_out(jg.empty(8, 3, 5, 5)) == (75, 200)
    assert init._calculate_fan_in_and_fan_out(jg.empty(4, 6)) == (6, 4)
    with pytest.raises(ValueError, match="Fan in and fan out can not be computed for tensor with fewer than 2 "
                                         "dimensions"):
        init.kaiming_uniform_(jg.empty(5))
    with pytest.raises(ValueError, match="Mode fan_avg not supported, please use one of fan_in, fan_out"):
        init.kaiming_normal_(jg.empty(3, 3), mode="fan_avg")


def test_uniform_normal_constant():
    t = jg.empty(200, 50)
    init.uniform_(t, -0.3, 0.7)
    a = t.numpy()
    assert a.min() >= -0.3 and a.max() <= 0.7 and abs(a.mean() - 0.2) < 0.02
    init.normal_(t, 1.0, 0.5)
    assert abs(t.numpy().mean() - 1.0) < 0.02 and abs(t.numpy().std() - 0.5) < 0.02
    assert np.all(init.zeros_(t).numpy() == 0) and np.all(init.ones_(t).numpy() == 1)
    assert np.all(init.constant_(t, 2.5).numpy() == 2.5)
    assert np.array_equal(init.eye_(jg.empty(2, 3)).numpy(), np.eye(2, 3))
    assert t.dtype is jg.float32


def test_kaiming_and_xavier_statistics():
    w = jg.empty(400, 300)
    init.kaiming_uniform_(w, a=0, nonlinearity="relu")
    bound = math.sqrt(2) * math.sqrt(3 / 300)
    assert np.abs(w.numpy()).max() <= bound and np.abs(w.numpy()).max() > 0.95 * bound
    init.kaiming_normal_(w, mode="fan_out")
    assert w.numpy().std() == pytest.approx(math.sqrt(2 / (1 + 0.01 ** 2)) / math.sqrt(400), rel=0.03)
    init.xavier_uniform_(w, gain=2.0)
    bound = 2.0 * math.sqrt(6 / 700)
    assert np.abs(w.numpy()).max() <= bound and np.abs(w.numpy()).max() > 0.95 * bound
    init.xavier_normal_(w)
    assert w.numpy().std() == pytest.approx(math.sqrt(2 / 700), rel=0.03)


def test_trunc_normal():
    t = jg.empty(10000)
    init.trunc_normal_(t, mean=0.5, std=1.0, a=0.0, b=1.5)
    a = t.numpy()
    pdf = lambda z: math.exp(-z * z / 2) / math.sqrt(2 * math.pi)  # noqa: E731
    cdf = lambda z: (1 + math.erf(z / math.sqrt(2))) / 2  # noqa: E731
    mean = 0.5 + (pdf(-0.5) - pdf(1.0)) / (cdf(1.0) - cdf(-0.5))  # of N(0.5, 1) truncated to [0, 1.5]
    assert a.min() >= 0.0 and a.max() <= 1.5 and abs(a.mean() - mean) < 0.02


def test_init_runs_under_no_grad_and_bumps_the_version():
    p = nn.Parameter(jg.zeros(3, 3))
    v = p._version
    out = init.kaiming_uniform_(p)
    assert out is p and p.grad_fn is None and p.requires_grad and p.is_leaf
    assert p._version > v and np.any(p.detach().numpy() != 0)


def test_manual_seed_makes_init_and_layers_reproducible():
    jg.manual_seed(123)
    a = nn.Linear(4, 3)
    c = nn.Conv2d(2, 3, 3)
    jg.manual_seed(123)
    b = nn.Linear(4, 3)
    d = nn.Conv2d(2, 3, 3)
    for x, y in [(a.weight, b.weight), (a.bias, b.bias), (c.weight, d.weight), (c.bias, d.bias)]:
        assert np.array_equal(x.detach().numpy(), y.detach().numpy())
    assert not np.array_equal(nn.Linear(4, 3).weight.detach().numpy(), a.weight.detach().numpy())


def test_default_layer_initialisation():
    jg.manual_seed(0)
    conv = nn.Conv2d(4, 8, 3, groups=2)
    fan_in = 2 * 9
    assert np.abs(conv.weight.detach().numpy()).max() <= 1 / math.sqrt(fan_in)
    assert np.abs(conv.bias.detach().numpy()).max() <= 1 / math.sqrt(fan_in)
    bn = nn.BatchNorm2d(3)
    assert bn.weight.tolist() == [1.0] * 3 and bn.bias.tolist() == [0.0] * 3
    emb = nn.Embedding(1000, 4)
    assert abs(emb.weight.detach().numpy().std() - 1.0) < 0.05
    ln = nn.LayerNorm(5)
    assert ln.weight.tolist() == [1.0] * 5


def test_init_overwrites_garbage():
    """Layers start from uninitialised memory: NaN or inf there must not leak into the initialised values."""
    p = nn.Parameter(jg.full((4, 4), float("nan")))
    init.kaiming_uniform_(p)
    assert np.isfinite(p.detach().numpy()).all()
    init.constant_(p, float("inf"))
    init.zeros_(p)
    assert np.all(p.detach().numpy() == 0)
