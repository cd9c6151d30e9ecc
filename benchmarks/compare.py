"""jitgrad vs PyTorch on the CPU: the workloads of workloads.py, run in one process, alternating.

    python benchmarks/compare.py                  # every workload, 7 timed samples each
    python benchmarks/compare.py --repeats 15 --only mlp_step,chain100
    python benchmarks/compare.py --output speed.md

For each workload both libraries build the same model on the same data and run one warm-up
step (jitgrad compiles or loads its kernels there); then samples alternate between them, each
sample timing enough back-to-back steps to last about --sample-seconds. The table shows the
median time per step, the jitgrad/PyTorch ratio and the speed bar of issue 7. The cold-start
row times fresh processes that import the library and run a first MLP step, after one untimed
run has warmed numba's on-disk cache. PyTorch runs with 2 threads; without it (not installed)
only jitgrad's times are shown.
"""
import argparse
import gc
import os
import platform
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import coldstart  # noqa: E402
import workloads  # noqa: E402


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _sample(step, n):
    start = time.perf_counter()
    for _ in range(n):
        step()
    return (time.perf_counter() - start) / n


def _inner_count(step, sample_seconds):
    t = _sample(step, 1)
    return max(1, int(sample_seconds / max(t, 1e-9)))


def measure_workload(name, libs, repeats, sample_seconds):
    """Median seconds per step of workload ``name`` for each library (None where it can't run)."""
    steps, counts, times = {}, {}, {}
    for lib_name, lib in libs.items():
        try:
            steps[lib_name] = workloads.WORKLOADS[name](lib)
        except NotImplementedError as e:
            print("  %s: %s" % (lib_name, e), file=sys.stderr)
            continue
        steps[lib_name]()  # warm-up: compile / load kernels, allocate
        counts[lib_name] = _inner_count(steps[lib_name], sample_seconds)
        times[lib_name] = []
    order = list(steps)
    for r in range(repeats):
        for lib_name in (order if r % 2 == 0 else order[::-1]):
            gc.collect()
            times[lib_name].append(_sample(steps[lib_name], counts[lib_name]))
    return {lib_name: statistics.median(times[lib_name]) if lib_name in times else None for lib_name in libs}


def measure_cold_start(libs, repeats):
    """Median wall time of a fresh process importing the library and running its first MLP step."""
    for lib_name in libs:
        coldstart.first_step_seconds("mlp_step", lib_name)  # fill numba's cache (jitgrad), page in files
    times = {lib_name: [] for lib_name in libs}
    for r in range(repeats):
        for lib_name in (list(libs) if r % 2 == 0 else list(libs)[::-1]):
            times[lib_name].append(coldstart.first_step_seconds("mlp_step", lib_name))
    return {lib_name: statistics.median(t) for lib_name, t in times.items()}


def _ms(seconds):
    if seconds is None:
        return "n/a"
    return "%.3f" % (seconds * 1e3) if seconds < 0.01 else "%.1f" % (seconds * 1e3)


def table(results, cold):
    """The comparison as a Markdown table."""
    lines = ["| workload | jitgrad (ms) | PyTorch (ms) | jitgrad / PyTorch | bar | meets bar |",
             "|---|---:|---:|---:|---:|:---:|"]
    for name, r in results.items():
        jg, pt = r.get("jitgrad"), r.get("torch")
        ratio = jg / pt if jg is not None and pt else None
        bar = workloads.BAR[name]
        lines.append("| %s | %s | %s | %s | <= %.1f | %s |" % (
            name, _ms(jg), _ms(pt), "%.2f" % ratio if ratio is not None else "n/a", bar,
            "n/a" if ratio is None else ("yes" if ratio <= bar else "no")))
    if cold is not None:
        jg, pt = cold.get("jitgrad"), cold.get("torch")
        lines.append("| cold start: import + first mlp_step, warm cache (s) | %.2f | %s | %s | <= %.1f s | %s |" % (
            jg, "%.2f" % pt if pt else "n/a", "%.2f" % (jg / pt) if pt else "n/a", workloads.COLD_START_BAR,
            "yes" if jg <= workloads.COLD_START_BAR else "no"))
    return "\n".join(lines)


def _load():
    """The 1-minute load average: other processes on the machine skew the timings of both libraries."""
    return "%.1f" % os.getloadavg()[0] if hasattr(os, "getloadavg") else "n/a"


def machine(libs):
    import numba
    import numpy
    versions = ["Python %s" % platform.python_version(), "NumPy %s" % numpy.__version__,
                "numba %s (%d threads)" % (numba.__version__, numba.config.NUMBA_NUM_THREADS)]
    if "torch" in libs:
        versions.append("PyTorch %s (%d threads)" % (libs["torch"].__version__, libs["torch"].get_num_threads()))
    return "%s, %d cores; %s" % (cpu_model(), os.cpu_count(), ", ".join(versions))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=7, help="timed samples per library (default %(default)s)")
    parser.add_argument("--sample-seconds", type=float, default=0.2, help="length of one sample (default %(default)s)")
    parser.add_argument("--only", help="comma-separated workloads (default: all): " + ", ".join(workloads.WORKLOADS))
    parser.add_argument("--no-cold-start", action="store_true", help="skip the fresh-process cold-start row")
    parser.add_argument("--output", help="also write the table (with the machine line) to this file")
    a = parser.parse_args(argv)
    names = a.only.split(",") if a.only else list(workloads.WORKLOADS)
    for n in names:
        if n not in workloads.WORKLOADS:
            parser.error("unknown workload %r (choose from %s)" % (n, ", ".join(workloads.WORKLOADS)))
    libs = {"jitgrad": workloads.library("jitgrad")}
    try:
        libs["torch"] = workloads.library("torch")
    except ImportError:
        print("PyTorch is not installed: showing jitgrad's times only", file=sys.stderr)
    load_start = _load()
    results = {}
    for name in names:
        print("timing %s ..." % name, file=sys.stderr, flush=True)
        results[name] = measure_workload(name, libs, a.repeats, a.sample_seconds)
    cold = None
    if not a.no_cold_start:
        print("timing cold start ...", file=sys.stderr, flush=True)
        cold = measure_cold_start(libs, max(3, a.repeats // 2))
    command = " ".join(["python benchmarks/compare.py"] + list(argv if argv is not None else sys.argv[1:]))
    text = "Machine: %s\n\nMedians of %d alternating samples, from `%s` (load average %s at the start, %s " \
           "at the end):\n\n%s\n" % (machine(libs), a.repeats, command, load_start, _load(), table(results, cold))
    print(text)
    if a.output:
        with open(a.output, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
