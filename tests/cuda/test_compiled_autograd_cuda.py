"""Compiled autograd on device='cuda': plans of CUDA graphs (generated code calling the CUDA backend) give the
CPU's gradients. Without a GPU the check runs in a child process under numba's CUDA simulator; set
JITGRAD_CUDA_TESTS=gpu on a machine with a GPU to run it for real."""
import os
import subprocess
import sys

import pytest

import helpers

pytestmark = pytest.mark.cuda

CHECK = """
import numpy as np, jitgrad as jg
rng = np.random.default_rng(0)
for step in range(3):  # new values each step: the plan (built on the first, forced) reads each step's arrays
    x0, w0 = rng.standard_normal((4, 3)).astype(np.float32), rng.standard_normal(3).astype(np.float32)
    res = []
    for dev in ("cuda", "cpu"):
        x = jg.tensor(x0, device=dev, requires_grad=True)
        w = jg.tensor(w0, device=dev, requires_grad=True)
        loss = (((x * w).tanh() + x) ** 2).sum() + jg.nn.functional.softmax(x, 1).mean()
        loss.backward()
        res.append((x.grad.cpu().numpy(), w.grad.cpu().numpy()))
    for a, b in zip(*res):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
s = jg.jit_stats()["compiled_autograd"]
assert s["plans"] == 2 and s["hits"] == 4 and not s["fallbacks"], s
# a CUDA graph and a CPU graph of one structure have keys of their own (the leaves' keys hold the device class)
keys = {(jg.tensor(x0, device=d, requires_grad=True) * 2.0).tanh().sum().grad_fn._key for d in ("cuda", "cpu")}
assert len(keys) == 2, keys
print("ok")
"""


def test_cuda_graphs_run_as_plans():
    env = dict(os.environ, JITGRAD_COMPILED_AUTOGRAD="always", PYTHONPATH=str(helpers.ROOT))
    if os.environ.get("JITGRAD_CUDA_TESTS") != "gpu":
        env["NUMBA_ENABLE_CUDASIM"] = "1"
    r = subprocess.run([sys.executable, "-c", CHECK], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout + r.stderr


INDEX_CHECK = """
import os, sys
import numpy as np, jitgrad as jg
if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":  # the simulator's arrays answer only what numba's device arrays do
    sys.path.insert(0, os.path.join(%r, "tests"))
    import conftest
    conftest._simulator_arrays_answer_as_device_arrays()
rng = np.random.default_rng(0)
x0 = rng.standard_normal((4, 3))
losses = (lambda x, i, w: (jg.index_select(x, 1, i) * w).sum(),  # (the index inside index_put's key)
          lambda x, i, w: (x[i] ** 2).sum())  # (an index key in the node's params)
for loss_of in losses:
    for index in ([1, 2], [0, 0], [2, 1]):  # graphs alike but for the index: each plan reads its own graph's index
        for dev in ("cuda", "cpu"):
            x = jg.tensor(x0, device=dev, requires_grad=True)
            loss_of(x, jg.tensor(index, device=dev), jg.arange(1.0, 9.0, device=dev).reshape(4, 2)).backward()
            if dev == "cuda":
                got = x.grad.cpu().numpy()
        np.testing.assert_allclose(got, x.grad.numpy(), rtol=1e-12, atol=1e-12)
s = jg.jit_stats()["compiled_autograd"]
assert s["hits"] >= 4 and not s["fallbacks"], s
print("ok")
"""


def test_cuda_plans_read_each_graphs_index():
    """Arrays a backward formula puts in an op's params (index_select's index inside index_put's key) are found as
    values of the graph whatever the device array's class answers, so a plan never freezes the first graph's index."""
    env = dict(os.environ, JITGRAD_COMPILED_AUTOGRAD="always", PYTHONPATH=str(helpers.ROOT))
    if os.environ.get("JITGRAD_CUDA_TESTS") != "gpu":
        env["NUMBA_ENABLE_CUDASIM"] = "1"
    r = subprocess.run([sys.executable, "-c", INDEX_CHECK % str(helpers.ROOT)], env=env, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout + r.stderr
