"""Time per step and page faults per step of workloads, with jitgrad keeping freed memory for the next
step (the default, kernels/config.py) and with glibc's defaults (JITGRAD_KEEP_FREED_MEMORY=0), each in a
fresh process.

    python benchmarks/freed_memory.py                                  # the default workloads
    python benchmarks/freed_memory.py --only elementwise_4m:compiled,cnn_step
"""
import argparse
import os
import subprocess
import sys

_CHILD = """
import resource, sys, time
sys.path.insert(0, %r)
import workloads, jitgrad
name, compiled = %r, %r
step = workloads.WORKLOADS[name](jitgrad, compiled=True) if compiled else workloads.WORKLOADS[name](jitgrad)
for _ in range(3):
    step()
r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
for _ in range(%d):
    step()
t1, r1 = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
print((t1 - t0) / %d * 1e3, (r1.ru_minflt - r0.ru_minflt) / %d, (r1.ru_stime - r0.ru_stime) / %d * 1e3)
"""


def measure(name, compiled, steps, keep):
    env = dict(os.environ, JITGRAD_KEEP_FREED_MEMORY="1" if keep else "0")
    code = _CHILD % (os.path.dirname(os.path.abspath(__file__)), name, compiled, steps, steps, steps, steps)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return [float(v) for v in out.stdout.split()]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="elementwise_4m:compiled,elementwise_4m,cnn_step,transformer_step,"
                                           "lstm_step,mlp_step")
    parser.add_argument("--steps", type=int, default=20)
    a = parser.parse_args(argv)
    print("| workload | ms a step, kept / glibc's | page faults a step, kept / glibc's | system ms a step |")
    print("|---|---:|---:|---:|")
    for item in a.only.split(","):
        name, _, kind = item.partition(":")
        kept, default = (measure(name, kind == "compiled", a.steps, keep) for keep in (True, False))
        print("| %s%s | %.1f / %.1f | %.0f / %.0f | %.1f / %.1f |" % (
            name, " (compiled)" if kind else "", kept[0], default[0], kept[1], default[1], kept[2], default[2]))


if __name__ == "__main__":
    main()
