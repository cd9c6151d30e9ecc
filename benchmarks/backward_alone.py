"""chain100's forward and its backward timed apart, in one process (CPU time of this thread, gc off):

    python benchmarks/backward_alone.py jitgrad
    python benchmarks/backward_alone.py torch

Each round builds 100 graphs, then runs their backwards; prints the per-graph minimum and median over the rounds
(compare.py's chain100 minus chain100_forward mixes in the cost of freeing a graph without its backward)."""
import gc
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import workloads  # noqa: E402


def main(lib_name, rounds=15, graphs=100):
    lib = workloads.library(lib_name)
    forward = workloads.chain100_forward(lib)
    for _ in range(20):
        forward().backward()
    gc.disable()
    fwd, bwd = [], []
    for _ in range(rounds):
        t0 = time.thread_time()
        ys = [forward() for _ in range(graphs)]
        t1 = time.thread_time()
        for y in ys:
            y.backward()
        t2 = time.thread_time()
        del ys
        fwd.append((t1 - t0) / graphs * 1e6)
        bwd.append((t2 - t1) / graphs * 1e6)
    print("%s: forward %.0f us (median %.0f), backward %.0f us (median %.0f)"
          % (lib_name, min(fwd), statistics.median(fwd), min(bwd), statistics.median(bwd)))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "jitgrad")
