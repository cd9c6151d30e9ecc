"""Cold start: a fresh process imports a library and runs the first step of a workload.

    python benchmarks/coldstart.py mlp_step jitgrad
    python benchmarks/coldstart.py mlp_step torch
    python benchmarks/coldstart.py mlp_step jitgrad --fill   # and wait for the background builds

The caller times the whole process (interpreter start, import, building the workload, first
step); ``first_step_seconds`` runs it in a subprocess and returns that wall time. With jitgrad
the first step compiles its kernels, or loads them from numba's on-disk cache (NUMBA_CACHE_DIR
picks the cache: an empty directory gives a cold cache). The parallel loops it meets first compile
in a background process, which finishes only the build in hand when the step's process exits:
``--fill`` waits for all of them, so that the runs after it find a warm cache.
"""
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def first_step_seconds(workload, lib="jitgrad", cache_dir=None, fill=False):
    """Wall time of a fresh ``python coldstart.py workload lib`` (with NUMBA_CACHE_DIR=cache_dir if given;
    ``fill``: it waits for jitgrad's background builds before it exits)."""
    env = dict(os.environ)
    # warm means Python's bytecode cache too: installed wheels (PyTorch's, numba's) ship theirs, and an
    # editable checkout writes its own on first import, unless this variable forbids it
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if cache_dir is not None:
        env["NUMBA_CACHE_DIR"] = cache_dir
    start = time.perf_counter()
    subprocess.run([sys.executable, os.path.join(HERE, "coldstart.py"), workload, lib] + ["--fill"] * fill, env=env,
                   check=True)
    return time.perf_counter() - start


def main(workload, lib, fill=False):
    sys.path.insert(0, HERE)
    import workloads
    workloads.WORKLOADS[workload](workloads.library(lib))()
    if fill and lib == "jitgrad":
        from jitgrad.kernels import _background
        _background.wait()


if __name__ == "__main__":
    main(*sys.argv[1:3], fill="--fill" in sys.argv[3:])
