"""Smoke runs of the examples (few epochs) and of the memory benchmark; full runs are marked slow."""
import os
import runpy

import numpy as np
import pytest

import sklearn  # noqa: F401,E402  (the examples extra, installed by the dev extra)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the checkout


def example(name):
    """The example's globals (its main() not yet run)."""
    return runpy.run_path(os.path.join(ROOT, "examples", name + ".py"))


def test_mlp_digits_smoke(tmp_path):
    result = example("mlp_digits")["main"](["--epochs", "3", "--out", str(tmp_path / "mlp.jg")])
    assert result["accuracy"] > 0.8  # three epochs already learn most digits; the reload check ran in main()
    assert (tmp_path / "mlp.jg").exists()


def test_cnn_digits_smoke(tmp_path):
    result = example("cnn_digits")["main"](["--epochs", "1", "--out", str(tmp_path / "cnn.jg")])
    assert 0.0 <= result["accuracy"] <= 1.0 and (tmp_path / "cnn.jg").exists()


def test_finetune(tmp_path):
    result = example("finetune")["main"](["--epochs", "2", "--out", str(tmp_path / "pre.jg")])
    assert result["unchanged"]
    assert "AddmmBackward0" in result["nodes"] and result["nodes"].count("AccumulateGrad") == 2  # head only
    assert len(result["nodes"]) < len(result["full_nodes"])
    assert result["accuracy"] > 0.8


def test_memory_benchmark_smoke():
    rows = runpy.run_path(os.path.join(ROOT, "benchmarks", "memory_training.py"))["run"](steps=40, every=20)
    assert [r[0] for r in rows] == [20, 40]


@pytest.mark.slow
@pytest.mark.parametrize("name, target", [("mlp_digits", 0.95), ("cnn_digits", 0.97)])
def test_examples_reach_their_targets(name, target, tmp_path):
    result = example(name)["main"](["--out", str(tmp_path / "w.jg")])
    assert result["accuracy"] >= target


@pytest.mark.slow
def test_training_memory_stays_flat():
    rows = runpy.run_path(os.path.join(ROOT, "benchmarks", "memory_training.py"))["run"](steps=3000, every=500)
    rss = np.array([r[1] for r in rows[1:]])  # after the warm-up
    assert rss.max() - rss.min() < 8.0  # MiB


def test_char_transformer_smoke():
    result = example("char_transformer")["main"](["--steps", "8", "--layers", "1", "--d-model", "16", "--heads", "2",
                                                  "--context", "16", "--batch-size", "8", "--sample", "10"])
    losses = result["losses"]
    assert len(losses) == 8 and np.isfinite(losses).all()
    assert np.mean(losses[-3:]) < losses[0] <= result["uniform_loss"] + 1.0  # learning from the start
    assert result["sample"].startswith("The keeper ") and len(result["sample"]) == len("The keeper ") + 10


def test_lstm_tagger_smoke():
    result = example("lstm_tagger")["main"](["--epochs", "2", "--train", "256", "--hidden", "16"])
    assert result["accuracy"] > 0.5  # chance is 20%


@pytest.mark.slow
def test_lstm_tagger_learns_the_context_rule():
    result = example("lstm_tagger")["main"]([])
    assert result["accuracy"] > 0.97 and result["ambiguous_accuracy"] > 0.9


# ---------------------------------------------------------------- the generative examples (and PyTorch's numbers)
try:
    import torch
except ImportError:  # pragma: no cover
    torch = None
needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed")


def test_vae_digits_smoke(tmp_path):
    result = example("vae_digits")["main"](["--epochs", "2", "--out", str(tmp_path / "vae.jg")])
    assert result["test_loss"] < 64 * np.log(2)  # below the loss of a model that predicts 0.5 everywhere
    assert (tmp_path / "vae.jg").exists()


def test_gan_digits_smoke(tmp_path):
    result = example("gan_digits")["main"](["--epochs", "1", "--out", str(tmp_path / "gan.jg")])
    assert 0.0 < result["fake_score"] < 1.0 and 0.0 < result["real_score"] < 1.0
    assert (tmp_path / "gan.jg").exists()


def _copy_weights(src, dst):
    """The jitgrad module's parameters into the torch module of the same layout."""
    with torch.no_grad():
        for p, q in zip(src.parameters(), dst.parameters()):
            q.copy_(torch.from_numpy(p.detach().numpy().copy()))


def _vae_outputs(model, x, e):
    logits, mu, logvar = model(x, e)
    return logits, x, mu, logvar


@needs_torch
def test_vae_losses_equal_torch():
    import jitgrad as jg
    ex = example("vae_digits")
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 1, (16, 64)).astype(np.float32)
    eps = [rng.standard_normal((16, 8)).astype(np.float32) for _ in range(4)]
    ours, theirs = ex["make_model"](jg.nn), ex["make_model"](torch.nn)
    _copy_weights(ours, theirs)
    losses = []
    for lib, model in ((jg, ours), (torch, theirs)):
        opt = lib.optim.Adam(model.parameters(), lr=1e-2)
        seq = []
        for e in eps:
            loss = ex["vae_loss"](lib.nn.functional, *_vae_outputs(model, lib.from_numpy(x), lib.from_numpy(e)))
            opt.zero_grad()
            loss.backward()
            opt.step()
            seq.append(loss.item())
        losses.append(seq)
    np.testing.assert_allclose(losses[0], losses[1], rtol=1e-4)
    assert losses[0][-1] < losses[0][0]


@needs_torch
def test_gan_losses_equal_torch():
    import jitgrad as jg
    ex = example("gan_digits")
    rng = np.random.default_rng(0)
    real = rng.uniform(0, 1, (16, 64)).astype(np.float32)
    noise = [rng.standard_normal((16, ex["LATENT"])).astype(np.float32) for _ in range(4)]
    ours, theirs = ex["make_models"](jg.nn), ex["make_models"](torch.nn)
    for a, b in zip(ours, theirs):
        _copy_weights(a, b)
    losses = []
    for lib, (g, d) in ((jg, ours), (torch, theirs)):
        opt_g, opt_d = ex["optimizers"](lib, g, d, 2e-3)
        losses.append([ex["gan_step"](lib.nn.functional, lib, g, d, opt_g, opt_d, lib.from_numpy(real),
                                      lib.from_numpy(n)) for n in noise])
    np.testing.assert_allclose(losses[0], losses[1], rtol=1e-4)
