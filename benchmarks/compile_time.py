"""Compile cost of jitgrad.compile: a fresh process's first compiled call of a workload, with an empty
and with a warm cache of generated kernels (numba's cache of the eager kernels is warm in both, unless
--empty-numba-cache: then it starts empty too, and the second process finds what the first compiled).

    python benchmarks/compile_time.py                      # mlp_step, chain100, scalar_graph1000
    python benchmarks/compile_time.py --only mlp_step --empty-numba-cache
"""
import argparse
import os
import subprocess
import sys
import tempfile

_CHILD = """
import sys, time
sys.path.insert(0, %r)
import workloads, jitgrad
step = workloads.WORKLOADS[%r](jitgrad, compiled=True)
t0 = time.perf_counter()
step()
first = time.perf_counter() - t0
graphs = jitgrad.jit_stats()["graphs"]
print(first, sum(g["compile_seconds"] for g in graphs))
"""


def first_call(name, cache_dir, numba_cache=None):
    """(seconds of the first compiled step, seconds of it spent building graphs) in a fresh process."""
    env = dict(os.environ, JITGRAD_COMPILE_CACHE=cache_dir)
    if numba_cache:
        env["NUMBA_CACHE_DIR"] = numba_cache
    out = subprocess.run([sys.executable, "-c", _CHILD % (os.path.dirname(os.path.abspath(__file__)), name)],
                         env=env, capture_output=True, text=True, check=True).stdout.split()
    return float(out[0]), float(out[1])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="mlp_step,chain100,scalar_graph1000")
    parser.add_argument("--empty-numba-cache", action="store_true",
                        help="start numba's cache of the eager kernels empty too (a new machine's first step)")
    a = parser.parse_args(argv)
    print("| workload | first call, empty cache (s) | of it compiling graphs (s) | first call, warm cache (s) |")
    print("|---|---:|---:|---:|")
    for name in a.only.split(","):
        with tempfile.TemporaryDirectory() as d:
            numba_cache = os.path.join(d, "numba") if a.empty_numba_cache else None
            cold = first_call(name, os.path.join(d, "graphs"), numba_cache)
            warm = first_call(name, os.path.join(d, "graphs"), numba_cache)
        print("| %s | %.2f | %.2f | %.2f |" % (name, cold[0], cold[1], warm[0]), flush=True)


if __name__ == "__main__":
    sys.exit(main())
