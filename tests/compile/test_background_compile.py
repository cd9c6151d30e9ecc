"""Parallel kernel builds compiled in a background process (kernels/_background.py).

Each case runs in a fresh process with an empty numba cache, so that the parallel builds it calls are
not compiled yet: the first call runs the serial twin while a worker compiles the parallel build into
the cache, and a later call loads it from there.
"""
import json
import os
import re
import subprocess
import sys
import time

import numpy as np
import pytest

from jitgrad.kernels import _background, loss, reduce

_CHILD = r"""
import json, sys, time
import numpy as np
import jitgrad
from jitgrad.kernels import _background, _jit, elementwise as E, reduce as R

x = np.random.default_rng(0).standard_normal((300, 400)).astype(np.float32)  # above the parallel threshold
b = np.random.default_rng(1).standard_normal(400).astype(np.float32)
calls = [lambda: E.run("relu", np.float32, x), lambda: E.run("add", np.float32, x, b),
         lambda: R.reduce("sum", x, (0,))]
E._loops[("relu", True, True)] = E._make_loop("relu", (True,), True)
if %(break_remake)s:  # a build the worker cannot make
    E._loops[("relu", True, True)].remake = ("jitgrad.kernels._jit", "built", ("no.such.module", "nothing"))
first = [f() for f in calls]
builds = [E._loops[("relu", True, True)], E._loops[("add", True, "2d", "a", "t")], R._KERNELS["sum_cols"][1]]
report = {"background": [type(d).__name__ for d in builds], "overloads_at_first": [len(d.overloads) for d in builds]}
deadline = time.time() + 300
while any(s == "building" for s in _background._state.values()) and time.time() < deadline:
    time.sleep(0.05)
report["states"] = sorted(_background._state.values())
again = [f() for f in calls]
report["equal"] = [bool(np.array_equal(a, b)) for a, b in zip(first, again)]
report["overloads"] = [len(d.overloads) for d in builds]
report["cache_hits"] = [sum(d.stats.cache_hits.values()) for d in builds]
stats = jitgrad.jit_stats()
report["background_builds"] = stats["background_builds"]
report["background_pending"] = stats["background_pending"]
report["background_seconds"] = stats["background_seconds"]
report["compiled_here"] = sorted({n for n, _, _, depth in _jit.COMPILES
                                  if depth == 0 and ("_par_" in n or n.endswith("_par"))})
print(json.dumps(report))
"""


def _child(tmp_path, background=True, break_remake=False):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "numba"), JITGRAD_LOG_COMPILES="1",
               JITGRAD_BACKGROUND_COMPILE="1" if background else "0")
    out = subprocess.run([sys.executable, "-c", _CHILD % dict(break_remake=break_remake)], env=env,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.splitlines()[-1]), out.stderr


def test_a_parallel_build_compiles_in_the_background_while_its_serial_twin_runs(tmp_path):
    r, err = _child(tmp_path)
    assert r["background"] == ["Dispatcher"] * 3
    assert "jitgrad: compiling _sum_cols_par(array(float32, 3d, C)" in err  # JITGRAD_LOG_COMPILES names it
    assert r["overloads_at_first"] == [0, 0, 0]  # the first calls ran the serial twins
    assert r["states"] == ["ok"] * 3
    assert r["equal"] == [True] * 3  # twins give the same values
    assert r["overloads"] == [1, 1, 1] and r["cache_hits"] == [1, 1, 1]  # loaded from the worker's cache entry
    assert r["compiled_here"] == []  # no parallel build was compiled in this process
    assert r["background_builds"] == 3
    assert r["background_pending"] == 0 and r["background_seconds"] > 0  # jit_stats shows the worker's time
    assert re.search(r"jitgrad: built _sum_cols_par\(array\(float32, 3d, C\).*\) in the background in \d+\.\d+ s", err)


def test_without_background_compiles_the_parallel_build_at_its_first_call(tmp_path):
    r, _ = _child(tmp_path, background=False)
    assert r["background"] == ["CPUDispatcher"] * 3
    assert r["overloads_at_first"] == [1, 1, 1] and r["states"] == [] and r["background_builds"] == 0
    assert r["equal"] == [True] * 3 and r["cache_hits"] == [0, 0, 0]
    assert len(r["compiled_here"]) == 3


def test_a_build_the_worker_cannot_make_is_compiled_here(tmp_path):
    r, err = _child(tmp_path, break_remake=True)
    assert "failed" in r["states"]
    assert "background compile of jitgrad.kernels._jit.built" in err
    assert r["equal"] == [True] * 3 and r["overloads"] == [1, 1, 1]
    assert any(n.startswith("_loop_relu_a_par") for n in r["compiled_here"])


def test_sums_split_across_threads_have_no_background_twin():
    """A prange sum rounds differently in its parallel build, so that build is never stood in for."""
    if not _background.ENABLED:
        pytest.skip("background builds are off in this environment (JITGRAD_BACKGROUND_COMPILE=0 or no cache)")
    assert type(loss._KERNELS["nll_sum"][1]).__name__ == "CPUDispatcher"
    assert type(loss._KERNELS["loss_sum"][1]).__name__ == "CPUDispatcher"
    assert type(loss._KERNELS["nll_map"][1]).__name__ == "Dispatcher"
    assert type(reduce._KERNELS["sum_cols"][1]).__name__ == "Dispatcher"
    x = np.arange(12.0).reshape(3, 4)
    np.testing.assert_array_equal(reduce.reduce("sum", x, (0,)), x.sum(0))


_FUSED_CHILD = r"""
import json, time
import numpy as np
import jitgrad
from jitgrad.compiler import codegen
from jitgrad.kernels import _background

x = jitgrad.tensor(np.random.default_rng(0).standard_normal(70000).astype(np.float32), requires_grad=True)
f = jitgrad.compile(lambda t: (jitgrad.tanh(t * 1.5 + 0.25) ** 2 * jitgrad.sigmoid(t)).sum())
eager = (jitgrad.tanh(x * 1.5 + 0.25) ** 2 * jitgrad.sigmoid(x)).sum()
g_eager, = jitgrad.autograd.grad(eager, x)
y = f(x)
g, = jitgrad.autograd.grad(y, x)
kernels = [d for d in codegen._KERNELS.values() if isinstance(d, _background.Dispatcher)]
report = {"parallel_kernels": len(kernels), "overloads_at_first": [len(d.overloads) for d in kernels]}
deadline = time.time() + 300
while any(s == "building" for s in _background._state.values()) and time.time() < deadline:
    time.sleep(0.05)
y2 = f(x)
g2, = jitgrad.autograd.grad(y2, x)
report["overloads"] = [len(d.overloads) for d in kernels]
report["states"] = sorted(_background._state.values())
report["same"] = bool(y.item() == y2.item() and np.array_equal(g.numpy(), g2.numpy()))
report["close_to_eager"] = bool(np.allclose(y.item(), eager.item(), rtol=1e-5) and
                                np.allclose(g.numpy(), g_eager.numpy(), rtol=1e-5, atol=1e-6))
print(json.dumps(report))
"""


def test_a_parallel_fused_kernel_of_jitgrad_compile_builds_in_the_background(tmp_path):
    """The plan of a compiled function runs its fused loop's serial twin until the parallel loop is built."""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "numba"), JITGRAD_COMPILE_CACHE=str(tmp_path / "graphs"),
               JITGRAD_BACKGROUND_COMPILE="1")
    out = subprocess.run([sys.executable, "-c", _FUSED_CHILD], env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    r = json.loads(out.stdout.splitlines()[-1])
    assert r["parallel_kernels"] >= 1 and r["overloads_at_first"] == [0] * r["parallel_kernels"]
    assert "ok" in r["states"] and "failed" not in r["states"]
    assert r["overloads"] == [1] * r["parallel_kernels"]
    assert r["same"] and r["close_to_eager"]  # the twin and the parallel loop give the same values


def test_a_parallel_build_already_in_the_cache_is_loaded_at_its_first_call(tmp_path):
    """A second process finds the worker's builds in the cache: no request, no twin, counted as cache hits."""
    first, _ = _child(tmp_path)
    assert first["states"] == ["ok"] * 3
    again, _ = _child(tmp_path)
    assert again["states"] == [] and again["background_builds"] == 0
    assert again["overloads_at_first"] == [1, 1, 1] and again["cache_hits"] == [1, 1, 1]
    assert again["compiled_here"] == []


# a parallel build asked of the worker, then the process exits at once (the worker is still starting)
_EXITING_CHILD = r"""
import json
import numpy as np
from jitgrad.kernels import _background, elementwise as E
x = np.linspace(-1.0, 1.0, 70000).astype(np.float32)  # above the parallel threshold
y = E.run("neg", np.float32, x)
assert np.array_equal(y, -x)
print(json.dumps({"worker": _background._worker[0].pid, "states": sorted(_background._state.values())}))
"""

# the next process: the same call finds the build in the cache
_NEXT_CHILD = r"""
import json
import numpy as np
import jitgrad
from jitgrad.kernels import elementwise as E
x = np.linspace(-1.0, 1.0, 70000).astype(np.float32)
y = E.run("neg", np.float32, x)
d = E._loops[("neg", True, True)]
s = jitgrad.jit_stats()
print(json.dumps({"equal": bool(np.array_equal(y, -x)), "overloads": len(d.overloads), "hits": sum(d.stats.cache_hits.values()),
                  "background_builds": s["background_builds"]}))
"""


def _ended(pid):
    """Whether process ``pid`` (not our child) has ended: gone, or a zombie nobody has reaped yet."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="watches the orphaned worker through /proc")
def test_a_build_asked_for_by_a_process_that_exits_is_in_the_cache_for_the_next(tmp_path):
    """The requester exits while its worker is still starting: the worker finishes the build in hand, then ends."""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "numba"), JITGRAD_LOG_COMPILES="1",
               JITGRAD_BACKGROUND_COMPILE="1")
    out = subprocess.run([sys.executable, "-c", _EXITING_CHILD], env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    first = json.loads(out.stdout.splitlines()[-1])
    assert first["states"] == ["building"]  # it exited before the worker answered
    assert "exiting with 1 background build(s) pending" in out.stderr
    deadline = time.time() + 300
    while not _ended(first["worker"]) and time.time() < deadline:
        time.sleep(0.05)
    assert _ended(first["worker"])  # the worker ends by itself
    out = subprocess.run([sys.executable, "-c", _NEXT_CHILD], env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout.splitlines()[-1]) == {"equal": True, "overloads": 1, "hits": 1, "background_builds": 0}
