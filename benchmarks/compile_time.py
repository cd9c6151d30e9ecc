"""Compile cost of jitgrad.compile: a fresh process's first compiled call of a workload, with an empty
and with a warm cache of generated kernels (numba's cache of the eager kernels is warm in both).

    python benchmarks/compile_time.py                      # mlp_step, chain100, scalar_graph1000
    python benchmarks/compile_time.py --only mlp_step
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


def first_call(name, cache_dir):
    """(seconds of the first compiled step, seconds of it spent building graphs) in a fresh process."""
    env = dict(os.environ, JITGRAD_COMPILE_CACHE=cache_dir)
    out = subprocess.run([sys.executable, "-c", _CHILD % (os.path.dirname(os.path.abspath(__file__)), name)],
                         env=env, capture_output=True, text=True, check=True).stdout.split()
    return float(out[0]), float(out[1])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="mlp_step,chain100,scalar_graph1000")
    a = parser.parse_args(argv)
    print("| workload | first call, empty cache (s) | of it compiling graphs (s) | first call, warm cache (s) |")
    print("|---|---:|---:|---:|")
    for name in a.only.split(","):
        with tempfile.TemporaryDirectory() as d:
            cold = first_call(name, d)
            warm = first_call(name, d)
        print("| %s | %.2f | %.2f | %.2f |" % (name, cold[0], cold[1], warm[0]), flush=True)


if __name__ == "__main__":
    sys.exit(main())
