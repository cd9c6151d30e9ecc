"""nn.utils.clip_grad_norm_ and clip_grad_value_ against NumPy."""
import math

import numpy as np
import pytest

import jitgrad as jg
import jitgrad.nn as nn
from jitgrad.nn.utils import clip_grad_norm_, clip_grad_value_


def _params_with_grads(rng, *grads):
    ps = []
    for g in grads:
        p = nn.Parameter(jg.zeros(*g.shape, dtype=jg.float64))
        p.grad = jg.tensor(g)
        ps.append(p)
    return ps


@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0, math.inf])
def test_clip_grad_norm(rng, norm_type):
    gs = [rng.standard_normal((3, 2)), rng.standard_normal(4)]
    ps = _params_with_grads(rng, *gs)
    flat = np.concatenate([g.ravel() for g in gs])
    total = np.abs(flat).max() if norm_type == math.inf else (np.abs(flat) ** norm_type).sum() ** (1 / norm_type)
    out = clip_grad_norm_(iter(ps), max_norm=0.5, norm_type=norm_type)
    assert out.item() == pytest.approx(total)
    coef = min(1.0, 0.5 / (total + 1e-6))
    for p, g in zip(ps, gs):
        np.testing.assert_allclose(p.grad.numpy(), g * coef, rtol=1e-12)


def test_clip_grad_norm_below_max_is_untouched_and_skips_missing_grads(rng):
    g = rng.standard_normal(5) * 1e-3
    ps = _params_with_grads(rng, g) + [nn.Parameter(jg.zeros(2))]
    clip_grad_norm_(ps, 10.0)
    np.testing.assert_array_equal(ps[0].grad.numpy(), g)
    assert ps[1].grad is None
    bad = _params_with_grads(rng, np.array([np.inf, 1.0]))
    with pytest.raises(RuntimeError, match="The total norm of order 2.0 for gradients from `parameters` is non-finite"):
        clip_grad_norm_(bad, 1.0, error_if_nonfinite=True)


def test_clip_grad_value(rng):
    g = rng.standard_normal((4, 4)) * 3
    ps = _params_with_grads(rng, g)
    clip_grad_value_(ps[0], 1.5)
    np.testing.assert_array_equal(ps[0].grad.numpy(), np.clip(g, -1.5, 1.5))


def test_clipping_after_a_real_backward():
    jg.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    (model(jg.randn(16, 4)) * 100).sum().backward()
    total = clip_grad_norm_(model.parameters(), 1.0)
    assert total.item() > 1.0
    after = math.sqrt(sum((p.grad.numpy().astype(np.float64) ** 2).sum() for p in model.parameters()))
    assert after == pytest.approx(1.0, rel=1e-4)
