"""The existing suites with compiled autograd forced on from the first backward (JITGRAD_COMPILED_AUTOGRAD=always,
in a subprocess) and off (=0: the node-by-node engine alone; on, from a graph's second occurrence, is the
default every other test runs in), and training examples reaching the same losses with it on and off.

The default run takes a representative part (the hook and checkpoint tests) in both modes; ``-m slow`` runs the
autograd, nn, compile, transforms and distributions folders and the op matrix's gradient checks forced on, and
the autograd folder off (CI's script, .ci/run, runs the autograd folder off as well).
"""
import os
import runpy
import subprocess
import sys

import numpy as np
import pytest

import jitgrad as jg
from jitgrad.compiler import compiled_autograd as ca

import helpers


def _pytest_forced(paths, *extra, timeout=3000, mode="always"):
    env = dict(os.environ, JITGRAD_COMPILED_AUTOGRAD=mode, PYTHONPATH=str(helpers.ROOT))
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:warnings", "-p", "no:cacheprovider", "-x",
                        *paths, *extra], cwd=str(helpers.ROOT), env=env, capture_output=True, text=True,
                       timeout=timeout)
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-3000:]
    assert "100%" in r.stdout


@pytest.mark.parametrize("mode", ["always", "0"])
def test_hook_and_checkpoint_tests_with_compiled_autograd(mode):
    _pytest_forced(["tests/autograd/test_hooks.py", "tests/autograd/test_checkpoint.py"], mode=mode)


@pytest.mark.slow
@pytest.mark.parametrize("paths,extra,mode", [
    (["tests/autograd"], (), "always"),
    (["tests/autograd"], (), "0"),
    (["tests/nn"], (), "always"),
    (["tests/compile"], (), "always"),
    (["tests/transforms", "tests/distributions"], (), "always"),
    (["tests/ops/test_op_matrix.py"], ("-k", "grad and not gradgrad and -0-"), "always"),  # (each entry's 1st sample)
])
def test_suites_with_compiled_autograd(paths, extra, mode):
    _pytest_forced(paths, *extra, mode=mode)


def _example(name):
    return runpy.run_path(os.path.join(str(helpers.ROOT), "examples", name + ".py"))


@pytest.fixture
def switch():
    prev = dict(ca.SETTINGS)
    ca.reset()
    yield lambda on: jg.autograd.set_compiled_autograd(on, threshold=2)
    ca.SETTINGS.update(prev)
    ca.reset()


def test_char_transformer_same_losses(switch):
    args = ["--steps", "6", "--layers", "1", "--d-model", "16", "--heads", "2", "--context", "16",
            "--batch-size", "8", "--sample", "4"]
    losses = []
    for on in (True, False):
        switch(on)
        losses.append(_example("char_transformer")["main"](list(args))["losses"])
    assert len(losses[0]) == 6
    np.testing.assert_array_equal(losses[0], losses[1])


def test_mlp_and_cnn_steps_same_losses(switch):
    """An MLP and a CNN trained a few steps with SGD (momentum) on new batches each step."""
    nn, F = jg.nn, jg.nn.functional

    def train(make, shape):
        jg.manual_seed(0)
        rng = np.random.default_rng(0)
        model = make()
        opt = jg.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        losses = []
        for _ in range(5):
            x = jg.tensor(rng.standard_normal(shape).astype(np.float32))
            y = jg.tensor(rng.integers(0, 10, shape[0]))
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return losses

    def mlp():
        return nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))

    def cnn():
        return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                             nn.Linear(4 * 4 * 4, 10))
    for make, shape in ((mlp, (16, 64)), (cnn, (8, 1, 8, 8))):
        results = []
        for on in (True, False):
            switch(on)
            before = jg.jit_stats()["compiled_autograd"]["hits"]
            results.append(train(make, shape))
            if on:
                assert jg.jit_stats()["compiled_autograd"]["hits"] - before >= 3
        assert results[0] == results[1]
