"""Function transforms on CUDA tensors, under numba's CUDA simulator (set before numba.cuda is first imported,
hence in a child process), against the same transforms on the CPU; and jitgrad.compile of a transformed
function against eager on new inputs and a new batch size."""
import os
import subprocess
import sys

import numpy as np
import pytest

import jitgrad as jg
from jitgrad import func as F

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CHILD = """
import numpy as np, jitgrad as jg
from jitgrad import func as F
rng = np.random.default_rng(0)
w, x = rng.standard_normal((3, 2)), rng.standard_normal((4, 3))
def loss(w, x):
    return ((x @ w).tanh() ** 2).sum()
def f(v):
    return (v.sin() * v.sum()).exp()
for dev in ("cpu", "cuda"):
    W, X = jg.tensor(w, device=dev), jg.tensor(x, device=dev)
    per_sample = F.vmap(F.grad(loss), in_dims=(None, 0))(W, X)
    J = F.jacrev(f)(X[0])
    Jf = F.jacfwd(f)(X[0])
    _, t = F.jvp(f, (X[0],), (X[1],))
    assert per_sample.device.type == dev and J.device.type == dev
    for name, v in (("per_sample", per_sample), ("jacrev", J), ("jacfwd", Jf), ("jvp", t)):
        np.save("%s/%s_%s.npy" % (OUT, name, dev), v.cpu().numpy())
"""


@pytest.mark.cuda
def test_transforms_on_cuda_tensors_under_the_simulator(tmp_path):
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1", PYTHONPATH=ROOT)
    proc = subprocess.run([sys.executable, "-c", "OUT = %r\n" % str(tmp_path) + CHILD], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    for name in ("per_sample", "jacrev", "jacfwd", "jvp"):
        np.testing.assert_allclose(np.load(tmp_path / ("%s_cuda.npy" % name)), np.load(tmp_path / ("%s_cpu.npy" % name)),
                                   rtol=1e-12, atol=1e-14, err_msg=name)


def test_compiled_vmap_of_grad_gives_the_eager_numbers_on_new_inputs_and_batch_sizes():
    def loss(w, x):
        return ((x @ w).tanh() ** 2).sum() + (w * w).sum()
    eager = F.vmap(F.grad(loss), in_dims=(None, 0))
    compiled = jg.compile(F.vmap(F.grad(loss), in_dims=(None, 0)))
    rng = np.random.default_rng(3)
    for batch in (4, 4, 7):  # (a new input, then a new batch size)
        w = jg.tensor(rng.standard_normal((3, 2)))
        x = jg.tensor(rng.standard_normal((batch, 3)))
        got, want = compiled(w, x), eager(w, x)
        assert tuple(got.shape) == (batch, 3, 2)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-13, atol=1e-15)
    hess = jg.compile(F.hessian(lambda v: (v.tanh() ** 2).sum()))
    for n in (3, 5):
        v = rng.standard_normal(n)
        np.testing.assert_allclose(hess(jg.tensor(v)).numpy(), F.hessian(lambda v: (v.tanh() ** 2).sum())(
            jg.tensor(v)).numpy(), rtol=1e-13, atol=1e-15)
