"""Smoke runs of the examples (few epochs) and of the memory benchmark; full runs are marked slow."""
import os
import runpy

import numpy as np
import pytest

import sklearn  # noqa: F401,E402  (the examples extra, installed by the dev extra)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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
