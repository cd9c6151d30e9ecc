"""The kernels' runtime in a process: numba's threading layer (TBB by default, a fork-safe fallback)
survives fork() and concurrent threads, and freed arrays are reused without page faults unless the user set
glibc's malloc options. Each case runs in a fresh interpreter (numba's layer choice is per process).
"""
import sys

import pytest

from helpers import run_code as _run

PARALLEL_OP = """
import jitgrad as jg
N = 1 << 17  # above PARALLEL_THRESHOLD: the prange kernels run
x = jg.ones(N)
assert (x * 2).sum().item() == 2 * N
"""


def test_default_threading_layer_is_tbb():
    r = _run(PARALLEL_OP + "import numba; print(numba.threading_layer())")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["tbb"]


def test_an_explicit_threading_layer_is_kept():
    r = _run(PARALLEL_OP + "import numba; print(numba.threading_layer())", NUMBA_THREADING_LAYER="workqueue")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["workqueue"]


def test_a_missing_tbb_falls_back_to_a_fork_safe_layer():
    code = ("import sys; sys.modules['numba.np.ufunc.tbbpool'] = None\n" + PARALLEL_OP
            + "import numba; print(numba.threading_layer())")
    r = _run(code)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["workqueue"]


REALLOCATE = """
import resource
import numpy as np
import jitgrad.kernels.config as config

def step():  # a step's large arrays: allocated, written, freed
    arrays = [np.empty(1 << 22, np.float32) for _ in range(3)]
    for a in arrays:
        a.fill(1.0)

step()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(3):
    step()
print(config.FREED_MEMORY_KEPT, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc options")
def test_freed_arrays_are_reused_without_page_faults():
    # three 16 MiB arrays freed and allocated again: glibc's defaults give their pages back and fault them in
    # anew (about 12,000 faults over three steps); kept, the next step finds them
    r = _run(REALLOCATE)
    assert r.returncode == 0, r.stderr
    kept, faults = r.stdout.split()
    assert kept == "True" and int(faults) < 500
    r = _run(REALLOCATE, JITGRAD_KEEP_FREED_MEMORY="0")
    assert r.returncode == 0, r.stderr
    kept, faults = r.stdout.split()
    assert kept == "False" and int(faults) > 3000


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc options")
def test_malloc_settings_of_the_user_are_kept():
    r = _run("import jitgrad.kernels.config as c; print(c.FREED_MEMORY_KEPT)", MALLOC_TRIM_THRESHOLD_="131072")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False"]


FORK_CHILD = PARALLEL_OP + """
import os
pid = os.fork()
if pid == 0:
    ok = (x * 3).sum().item() == 3 * N and (x + 1).mean().item() == 2.0
    os._exit(0 if ok else 3)
_, status = os.waitpid(pid, 0)
print("child", os.waitstatus_to_exitcode(status))
"""


@pytest.mark.parametrize("layer", [None, "workqueue"])
def test_a_forked_child_runs_parallel_kernels(layer):
    r = _run(FORK_CHILD, timeout=120, NUMBA_THREADING_LAYER=layer)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["child", "0"], r.stdout + r.stderr


def test_a_multiprocessing_fork_worker_runs_parallel_kernels():
    code = PARALLEL_OP + """
import multiprocessing as mp

def work(n):
    return (jg.ones(N) * n).sum().item()

with mp.get_context("fork").Pool(2) as pool:
    print(pool.map(work, [1, 2, 3]))
"""
    r = _run(code, timeout=120)
    assert r.returncode == 0, r.stderr
    n = 1 << 17
    assert r.stdout.strip() == str([float(n), 2.0 * n, 3.0 * n])


THREADS = PARALLEL_OP + """
import threading, time
errors = []

def work(k):
    y = jg.full((N,), float(k))
    end = time.perf_counter() + 1.5
    while time.perf_counter() < end:
        s = (y * 2 + 1).relu().sum().item()  # exact in float32
        if s != (2 * k + 1) * N:
            errors.append(s)

ts = [threading.Thread(target=work, args=(k,)) for k in range(4)]
for t in ts:
    t.start()
for t in ts:
    t.join()
print("errors", len(errors))
"""


@pytest.mark.parametrize("layer", [None, "workqueue"])
def test_threads_run_parallel_kernels_concurrently(layer):
    r = _run(THREADS, timeout=120, NUMBA_THREADING_LAYER=layer)
    assert r.returncode == 0, "exit %d: %s" % (r.returncode, r.stderr[-2000:])
    assert r.stdout.split() == ["errors", "0"]


def test_set_num_threads_sizes_numba_and_both_openblas_pools():
    """torch.set_num_threads: numba's loops (at most the threads it started), NumPy's and SciPy's OpenBLAS; the
    count given comes back from get_num_threads; PyTorch's errors. (Its own interpreter: the counts are global.)"""
    code = """
import numba, jitgrad as jg
from jitgrad.kernels import config
jg.set_num_threads(1)
print(jg.get_num_threads(), numba.get_num_threads(), config.OPENBLAS_THREADS[0](), config.lapack_threads()[0]())
jg.set_num_threads(7)
print(jg.get_num_threads(), numba.get_num_threads() == numba.config.NUMBA_NUM_THREADS, config.OPENBLAS_THREADS[0]())
for bad in (0, -2, True, 2.0):
    try:
        jg.set_num_threads(bad)
    except RuntimeError as e:
        print(e)
"""
    r = _run(code)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["1 1 1 1", "7 True 7", "set_num_threads expects a positive integer",
                                     "set_num_threads expects a positive integer",
                                     "set_num_threads expects an int, but got bool",
                                     "set_num_threads expects an int, but got float"]
