"""The spectral-layer program (examples/fno_1d.py, a Fourier neural operator layer): its gradients against finite
differences, its training, and (marked torch) its losses step by step against PyTorch running the same code."""
import os
import runpy

import numpy as np
import pytest

import jitgrad as jg
from jitgrad.autograd import gradcheck, gradgradcheck

FNO = runpy.run_path(os.path.join(os.path.dirname(__file__), "..", "..", "examples", "fno_1d.py"))


def _spectral_inputs(rng, requires_grad=True):
    x = jg.tensor(rng.standard_normal((2, 3, 10)), requires_grad=requires_grad)
    w = jg.tensor(rng.standard_normal((3, 2, 4)) + 1j * rng.standard_normal((3, 2, 4)), requires_grad=requires_grad)
    return x, w


def test_spectral_conv_matches_numpy():
    rng = np.random.default_rng(0)
    x, w = _spectral_inputs(rng, requires_grad=False)
    out = FNO["spectral_conv"](jg, x, w, 4)
    xf = np.fft.rfft(x.numpy())
    of = np.zeros((2, 2, 6), complex)
    of[:, :, :4] = np.einsum("bix,iox->box", xf[:, :, :4], w.numpy())
    np.testing.assert_allclose(out.numpy(), np.fft.irfft(of, n=10), rtol=1e-12, atol=1e-12)


def test_spectral_conv_gradients_match_finite_differences():
    x, w = _spectral_inputs(np.random.default_rng(1))
    assert gradcheck(lambda a, b: FNO["spectral_conv"](jg, a, b, 4), (x, w))
    assert gradgradcheck(lambda a, b: FNO["spectral_conv"](jg, a, b, 4), (x, w))


def test_the_layer_trains():
    losses = FNO["train"](jg, steps=30)
    assert np.all(np.isfinite(losses)) and losses[-1] < 0.5 * losses[0]


@pytest.mark.torch
def test_losses_match_torch():
    torch = pytest.importorskip("torch")
    mine, theirs = FNO["train"](jg, steps=15), FNO["train"](torch, steps=15)
    np.testing.assert_allclose(mine, theirs, rtol=2e-4, atol=1e-6)
