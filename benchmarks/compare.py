"""jitgrad vs PyTorch on the CPU: the workloads of workloads.py, alternating between the two.

    python benchmarks/compare.py                  # every workload, 7 timed samples each
    python benchmarks/compare.py --repeats 15 --only mlp_step,chain100
    python benchmarks/compare.py --output speed.md
    python benchmarks/compare.py --cpu-time --only mul16,mul16_grad,chain100   # on a busy machine
    python benchmarks/compare.py --only chain100,elementwise_4m,mlp_step,mlp_step_whole,scalar_graph1000  # compiled rows

Each library runs in a worker process of its own (as a user runs one of them: two OpenMP
runtimes and BLAS thread pools in one process would compete for the cores), driven by this
one. For each workload both workers build the same model on the same data and run three warm-up
steps (jitgrad compiles or loads its kernels and builds its compiled-autograd plan there); then timed samples alternate between them,
after a short idle gap that lets the other library's threads stop spinning; each sample times
enough back-to-back steps to last about --sample-seconds. The table shows the median time per
step, the jitgrad/PyTorch ratio and the speed targets. The cold-start row times fresh
processes that import the library and run a first MLP step, after one untimed run has warmed
numba's on-disk cache. A third worker runs jitgrad.compile'd forms of the workloads that have one
(workloads.COMPILED; the compiled columns compare them with PyTorch eager). PyTorch runs with 2 threads; without it (not installed) only jitgrad's
times are shown. Where JAX is installed (a benchmark-only tool: ``pip install jax``), a JAX worker runs the
function-transform workloads as a JAX user writes them (jax_workloads.py: under ``jax.jit``) in a column of
its own; ``--no-jax`` leaves it out.
"""
import argparse
import gc
import multiprocessing
import os
import platform
import statistics
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import coldstart  # noqa: E402
import jax_workloads  # noqa: E402
import workloads  # noqa: E402

# steps before timing: the first compiles or loads kernels, the second builds jitgrad's compiled-autograd plan, and
# the step that sizes the samples must be a steady one (sized on the plan's build, a sample of chain100 held 6 steps)
WARM_STEPS = 3
IDLE_GAP = 0.1  # seconds between samples: spinning OpenMP/BLAS threads of the other worker go to sleep
TIMER = time.perf_counter  # the workers' clock: wall time, or with --cpu-time the worker's CPU time


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _sample(step, n, timer=None):
    timer = timer or TIMER
    start = timer()
    for _ in range(n):
        step()
    return (timer() - start) / n


def _serve(conn, lib_name, cpu_time=False):
    """Worker process: build workloads and time samples of them on request ("jitgrad-compiled": jitgrad
    with the workloads' compiled forms, jitgrad.compile)."""
    global TIMER
    if cpu_time:
        TIMER = time.process_time
    compiled = lib_name == "jitgrad-compiled"
    try:
        lib = __import__("jax") if lib_name == "jax" else workloads.library("jitgrad" if compiled else lib_name)
        conn.send(("ok", _versions(lib)))
    except ImportError as e:
        conn.send(("missing", str(e)))
        return
    steps = {}
    while True:
        cmd, name, arg = conn.recv()
        try:
            if cmd == "build":  # arg: seconds one sample should last
                if compiled and name not in workloads.COMPILED:
                    raise NotImplementedError("%s has no compiled form" % name)
                if lib_name == "jax":
                    if name not in jax_workloads.WORKLOADS:
                        raise NotImplementedError("%s has no JAX form" % name)
                    step = jax_workloads.WORKLOADS[name]()
                else:
                    step = workloads.WORKLOADS[name](lib, compiled=True) if compiled else workloads.WORKLOADS[name](lib)
                for _ in range(WARM_STEPS):  # warm-up: compile / load kernels, allocate, build autograd plans
                    step()
                steps[name] = (step, max(1, int(arg / max(_sample(step, 1, time.perf_counter), 1e-9))))
                reply = None
            elif cmd == "sample":
                gc.collect()
                reply = _sample(*steps[name])
            elif cmd == "drop":
                steps.pop(name, None)
                gc.collect()
                reply = None
            else:
                return
            conn.send(("ok", reply))
        except NotImplementedError as e:
            conn.send(("skip", str(e)))
        except Exception:  # noqa: BLE001  (shown by the driver)
            conn.send(("error", traceback.format_exc()))


class Worker:
    """A library in its own process (spawned: no state shared with this one)."""

    def __init__(self, lib_name, cpu_time=False):
        ctx = multiprocessing.get_context("spawn")
        self.conn, child = ctx.Pipe()
        # not a daemon: the DataLoader workloads start worker processes of their own (the worker still ends
        # with the driver: its recv() fails once the driver's end of the pipe is gone)
        self.process = ctx.Process(target=_serve, args=(child, lib_name, cpu_time))
        self.process.start()
        status, self.versions = self.conn.recv()
        self.available = status == "ok"

    def ask(self, cmd, name=None, arg=None):
        self.conn.send((cmd, name, arg))
        status, reply = self.conn.recv()
        if status == "error":
            raise RuntimeError("worker failed on %s %s:\n%s" % (cmd, name, reply))
        if status == "skip":
            raise NotImplementedError(reply)
        return reply

    def close(self):
        self.conn.send(("quit", None, None))
        self.process.join(10)


def measure_workload(name, workers, repeats, sample_seconds):
    """Median seconds per step of workload ``name`` for each library (None where it can't run or, for the
    compiled column, has no compiled form)."""
    times = {}
    for lib_name, w in workers.items():
        try:
            w.ask("build", name, sample_seconds)
            times[lib_name] = []
        except NotImplementedError as e:
            print("  %s: %s" % (lib_name, e), file=sys.stderr)
    order = list(times)
    for r in range(repeats):
        for lib_name in (order if r % 2 == 0 else order[::-1]):
            time.sleep(IDLE_GAP)
            times[lib_name].append(workers[lib_name].ask("sample", name))
    for w in workers.values():
        w.ask("drop", name)
    return {lib_name: statistics.median(times[lib_name]) if lib_name in times else None for lib_name in workers}


def measure_cold_start(lib_names, repeats):
    """Median wall time of a fresh process importing the library and running its first MLP step."""
    for lib_name in lib_names:
        coldstart.first_step_seconds("mlp_step", lib_name, fill=True)  # fill numba's cache (jitgrad), page in files
    times = {lib_name: [] for lib_name in lib_names}
    for r in range(repeats):
        for lib_name in (lib_names if r % 2 == 0 else lib_names[::-1]):
            times[lib_name].append(coldstart.first_step_seconds("mlp_step", lib_name))
    return {lib_name: statistics.median(t) for lib_name, t in times.items()}


def _ms(seconds):
    if seconds is None:
        return "n/a"
    if seconds < 1e-4:  # per-op rows: microseconds matter
        return "%.4f" % (seconds * 1e3)
    return "%.3f" % (seconds * 1e3) if seconds < 0.01 else "%.1f" % (seconds * 1e3)


def _vs(a, b, bar):
    """(ratio, bar, meets) cells of a against b."""
    if bar is None:
        return ["", "", ""]
    ratio = a / b if a is not None and b else None
    return ["%.2f" % ratio if ratio is not None else "n/a", "<= %g" % bar,
            "n/a" if ratio is None else ("yes" if ratio <= bar else "no")]


def table(results, cold):
    """The comparison as a Markdown table (the compiled columns: jitgrad.compile against PyTorch eager; the JAX
    columns, where a workload has a JAX form: JAX under jit, and jitgrad eager against it)."""
    jax = any(r.get("jax") is not None for r in results.values())
    lines = ["| workload | jitgrad (ms) | jitgrad compiled (ms) | PyTorch (ms) | jitgrad / PyTorch | bar | meets bar "
             "| compiled / PyTorch | bar | meets bar |" + (" JAX jit (ms) | jitgrad / JAX | compiled / JAX | bar | "
                                                          "meets bar |" if jax else ""),
             "|---|---:|---:|---:|---:|---:|:---:|---:|---:|:---:|" + ("---:|---:|---:|---:|:---:|" if jax else "")]
    for name, r in results.items():
        jg, jc, pt, jx = r.get("jitgrad"), r.get("jitgrad-compiled"), r.get("torch"), r.get("jax")
        cells = [_ms(jg), _ms(jc) if jc is not None else "", _ms(pt)] + _vs(jg, pt, workloads.BAR[name]) + \
            _vs(jc, pt, workloads.COMPILED_BAR.get(name) if jc is not None else None)
        if jax:
            cells += [_ms(jx), "%.2f" % (jg / jx) if jx and jg is not None else ""] if jx is not None else ["", ""]
            cells += _vs(jc, jx, workloads.COMPILED_JAX_BAR.get(name) if jc is not None and jx is not None else None)
        lines.append("| %s | " % name + " | ".join(cells) + " |")
    if cold is not None:
        jg, pt = cold.get("jitgrad"), cold.get("torch")
        lines.append("| cold start: import + first mlp_step, warm cache (s) | %.2f | | %s | %s | <= %.1f s | %s "
                     "| | | |" % (jg, "%.2f" % pt if pt else "n/a", "%.2f" % (jg / pt) if pt else "n/a",
                                  workloads.COLD_START_BAR, "yes" if jg <= workloads.COLD_START_BAR else "no")
                     + (" | | | | |" if jax else ""))
    return "\n".join(lines)


def _load():
    """The 1-minute load average: other processes on the machine skew the timings of both libraries."""
    return "%.1f" % os.getloadavg()[0] if hasattr(os, "getloadavg") else "n/a"


def _versions(lib):
    """Version and threads of a library (and of numba, NumPy for jitgrad), as seen in its worker."""
    if lib.__name__ == "torch":
        return ["PyTorch %s (%d threads)" % (lib.__version__, lib.get_num_threads())]
    if lib.__name__ == "jax":
        return ["JAX %s (jit, CPU)" % lib.__version__]
    import numba
    import numpy
    return ["NumPy %s (%s)" % (numpy.__version__, workloads.blas_kernels()),
            "numba %s (%d threads)" % (numba.__version__, numba.config.NUMBA_NUM_THREADS)]


def machine(workers):
    versions = ["Python %s" % platform.python_version()] + [v for w in workers.values() for v in w.versions]
    versions = list(dict.fromkeys(versions))  # the eager and compiled jitgrad workers report the same
    return "%s, %d cores; %s" % (cpu_model(), os.cpu_count(), ", ".join(versions))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=7, help="timed samples per library (default %(default)s)")
    parser.add_argument("--sample-seconds", type=float, default=0.2, help="length of one sample (default %(default)s)")
    parser.add_argument("--only", help="comma-separated workloads (default: all): " + ", ".join(workloads.WORKLOADS))
    parser.add_argument("--no-cold-start", action="store_true", help="skip the fresh-process cold-start row")
    parser.add_argument("--output", help="also write the table (with the machine line) to this file")
    parser.add_argument("--cpu-time", action="store_true",
                        help="time samples in CPU time of each worker process instead of wall time: steadier on a "
                             "machine shared with other jobs (counts the work of a library's own threads too)")
    parser.add_argument("--no-compiled", action="store_true", help="skip the jitgrad.compile columns")
    parser.add_argument("--no-jax", action="store_true", help="skip the JAX column of the transform workloads")
    a = parser.parse_args(argv)
    names = a.only.split(",") if a.only else list(workloads.WORKLOADS)
    for n in names:
        if n not in workloads.WORKLOADS:
            parser.error("unknown workload %r (choose from %s)" % (n, ", ".join(workloads.WORKLOADS)))
    workers = {"jitgrad": Worker("jitgrad", a.cpu_time)}
    if not a.no_compiled:
        workers["jitgrad-compiled"] = Worker("jitgrad-compiled", a.cpu_time)
    torch_worker = Worker("torch", a.cpu_time)
    if torch_worker.available:
        workers["torch"] = torch_worker
    else:
        print("PyTorch is not installed: showing jitgrad's times only", file=sys.stderr)
    if not a.no_jax and any(n in jax_workloads.WORKLOADS for n in names):
        jax_worker = Worker("jax", a.cpu_time)
        if jax_worker.available:
            workers["jax"] = jax_worker
    load_start = _load()
    results = {}
    try:
        for name in names:
            print("timing %s ..." % name, file=sys.stderr, flush=True)
            results[name] = measure_workload(name, workers, a.repeats, a.sample_seconds)
    finally:
        for w in workers.values():
            w.close()
    cold = None
    if not a.no_cold_start:
        print("timing cold start ...", file=sys.stderr, flush=True)
        cold = measure_cold_start([n for n in workers if n in ("jitgrad", "torch")], max(3, a.repeats // 2))
    command = " ".join(["python benchmarks/compare.py"] + list(argv if argv is not None else sys.argv[1:]))
    text = "Machine: %s\n\nMedians of %d alternating samples%s, from `%s` (load average %s at the start, %s " \
           "at the end):\n\n%s\n" % (machine(workers), a.repeats, " (CPU time)" if a.cpu_time else "", command,
                                     load_start, _load(), table(results, cold))
    print(text)
    if a.output:
        with open(a.output, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
