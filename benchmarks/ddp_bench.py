"""Multi-process benchmark: allreduce bandwidth, and a DistributedDataParallel step against one process.

    mpiexec -n 2 python benchmarks/ddp_bench.py [--steps 30] [--batch 256] [--output ddp.md]

1. Allreduce of float32 messages from 4 KB to 16 MB: jitgrad's ``dist.all_reduce`` (which first
   checks that the ranks agree on the collective), DDP's path (MPI's non-blocking allreduce and
   jitgrad's wait), and mpi4py's own blocking ``Allreduce`` on the same array.
2. A training step of the MLP 784-512-256-10 (cross-entropy, SGD with momentum) with ``--batch``
   samples per rank: the local step alone (no communication), DDP with one bucket (PyTorch's
   default sizes put this model's 2.1 MB in one bucket), DDP with small buckets (their allreduces
   start from the hooks while backward runs: overlap), the same step with one allreduce of all
   gradients after backward (no overlap), and one process on the whole global batch.

A step's time is the slowest rank's; the table gives medians of ``--steps`` timed steps, the
variants alternating. Each rank runs one compute thread (NUMBA_NUM_THREADS, OPENBLAS_NUM_THREADS
default to 1 here): data parallelism across processes, not threads.
"""
import argparse
import os
import time

for _var in ("NUMBA_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

import jitgrad as jg  # noqa: E402
import jitgrad.distributed as dist  # noqa: E402
import jitgrad.nn as nn  # noqa: E402
from jitgrad.distributed import _mpi  # noqa: E402
from jitgrad.nn.parallel import DistributedDataParallel  # noqa: E402

SIZES = [4 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20]


def slowest(seconds):
    """The largest of every rank's ``seconds`` (a collective step lasts as long as its slowest rank)."""
    t = jg.tensor([seconds], dtype=jg.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.item()


def timed(fn, repeats):
    """Median over ``repeats`` calls of the slowest rank's time for ``fn()``."""
    times = []
    for _ in range(repeats):
        dist.barrier()
        t0 = time.perf_counter()
        fn()
        times.append(slowest(time.perf_counter() - t0))
    return float(np.median(times))


def allreduce_table(repeats):
    comm = dist.group.WORLD.comm
    MPI = _mpi.mpi()
    rows = []
    for nbytes in SIZES:
        arr = np.ones(nbytes // 4, dtype=np.float32)
        t = jg.from_numpy(arr)
        jitgrad_s = timed(lambda: dist.all_reduce(t), repeats)
        ddp_s = timed(lambda: _mpi.wait([comm.Iallreduce(MPI.IN_PLACE, arr, op=MPI.SUM)], 60, "allreduce"), repeats)
        mpi_s = timed(lambda: comm.Allreduce(MPI.IN_PLACE, arr, op=MPI.SUM), repeats)
        rows.append((nbytes, jitgrad_s, ddp_s, mpi_s))
    return rows


def make_mlp():
    jg.manual_seed(0)
    return nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(), nn.Linear(256, 10))


class Steps:
    """The step variants, each with its own model and optimizer, on this rank's part of a fixed batch."""

    def __init__(self, batch):
        rank, world = dist.get_rank(), dist.get_world_size()
        rng = np.random.default_rng(0)
        X = rng.standard_normal((batch * world, 784)).astype(np.float32)
        Y = rng.integers(0, 10, batch * world)
        part = slice(rank * batch, (rank + 1) * batch)
        self.x, self.y = jg.from_numpy(X[part]), jg.from_numpy(Y[part])
        self.X, self.Y = jg.from_numpy(X), jg.from_numpy(Y)
        self.loss = nn.CrossEntropyLoss()
        self.models = {}

    def _setup(self, name, model):
        opt = jg.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        self.models[name] = (model, opt)
        return model, opt

    def variant(self, name, wrap=None, after=None, whole_batch=False):
        model, opt = self._setup(name, wrap(make_mlp()) if wrap else make_mlp())
        x, y = (self.X, self.Y) if whole_batch else (self.x, self.y)
        params = list(model.parameters())

        def step():
            opt.zero_grad()
            self.loss(model(x), y).backward()
            if after is not None:
                after(params)
            opt.step()
        return step


def unpolled(model):
    """DDP whose started buckets advance only in its hooks and final wait (no progress thread)."""
    ddp = DistributedDataParallel(model, bucket_cap_mb=0.5)
    ddp.reducer.use_poller = False
    return ddp


def one_allreduce_after_backward(params):
    """Every gradient into one flat array, one blocking allreduce, averages back: no overlap."""
    comm = dist.group.WORLD.comm
    MPI = _mpi.mpi()
    flat = np.concatenate([p.grad.numpy().ravel() for p in params])
    comm.Allreduce(MPI.IN_PLACE, flat, op=MPI.SUM)
    flat /= comm.Get_size()
    offset = 0
    for p in params:
        g = p.grad.numpy()
        g[...] = flat[offset:offset + g.size].reshape(g.shape)
        offset += g.size


def step_table(batch, repeats):
    s = Steps(batch)
    variants = {
        "local step, no communication (batch %d)" % batch: s.variant("local"),
        "DDP, default buckets (hooks)": s.variant("ddp", wrap=DistributedDataParallel),
        "DDP, 0.5 MB buckets (hooks: overlap)": s.variant(
            "ddp_small", wrap=lambda m: DistributedDataParallel(m, bucket_cap_mb=0.5)),
        "DDP, 0.5 MB buckets, no progress thread": s.variant("ddp_small_unpolled", wrap=unpolled),
        "one allreduce after backward (no overlap)": s.variant("after", after=one_allreduce_after_backward),
        "one process, whole global batch (%d)" % (batch * dist.get_world_size()): s.variant("whole", whole_batch=True),
    }
    for step in variants.values():  # warm-up: kernels compiled or loaded from the cache
        for _ in range(3):
            dist.barrier()
            step()
    times = {name: [] for name in variants}
    for _ in range(repeats):
        for name, step in variants.items():
            dist.barrier()
            t0 = time.perf_counter()
            step()
            times[name].append(slowest(time.perf_counter() - t0))
    ddp = s.models["ddp_small"][0]
    overlap = []  # per step: how long before the last bucket the first started; buckets done by then; final wait
    small = variants["DDP, 0.5 MB buckets (hooks: overlap)"]
    for _ in range(repeats):
        dist.barrier()
        small()
        red = ddp.reducer
        overlap.append((red.started_at[-1] - red.started_at[0], red.done_before_wait,
                        red.completed_at - red.started_at[-1]))
    buckets = [b.nbytes for b in ddp.reducer.buckets]
    grad_bytes = sum(p.numel() * 4 for p in ddp.parameters())
    arr = np.ones(grad_bytes // 4, dtype=np.float32)
    comm, MPI = dist.group.WORLD.comm, _mpi.mpi()
    raw = timed(lambda: comm.Allreduce(MPI.IN_PLACE, arr, op=MPI.SUM), repeats)
    overlap = np.array(overlap)
    summary = (float(np.median(overlap[:, 0])), float(overlap[:, 1].mean()), float(np.median(overlap[:, 2])))
    return {name: (float(np.median(t)), min(t)) for name, t in times.items()}, raw, grad_bytes, buckets, summary


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=30, help="timed repeats per row")
    p.add_argument("--batch", type=int, default=256, help="samples per rank")
    p.add_argument("--output", help="also write the tables (markdown) to this file")
    args = p.parse_args(argv)
    dist.init_process_group("mpi")
    world = dist.get_world_size()
    lines = ["%d ranks; %s threads per rank; load average %.1f at the start"
             % (world, os.environ["NUMBA_NUM_THREADS"], os.getloadavg()[0]), "",
             "| message | jitgrad all_reduce (ms) | DDP path: Iallreduce + wait (ms) | mpi4py Allreduce (ms) "
             "| jitgrad GB/s | mpi4py GB/s |", "|---:|---:|---:|---:|---:|---:|"]
    for nbytes, j, d, m in allreduce_table(args.steps):
        size = "%d KB" % (nbytes >> 10) if nbytes < 1 << 20 else "%d MB" % (nbytes >> 20)
        lines.append("| %s | %.3f | %.3f | %.3f | %.2f | %.2f |" % (size, 1e3 * j, 1e3 * d, 1e3 * m,
                                                                   nbytes / j / 1e9, nbytes / m / 1e9))
    steps, raw, grad_bytes, buckets, (window, done, tail) = step_table(args.batch, args.steps)
    local = steps["local step, no communication (batch %d)" % args.batch][0]
    lines += ["", "MLP 784-512-256-10, %d samples per rank, gradients %.2f MB; 0.5 MB buckets: %s; "
              "mpi4py Allreduce of %.2f MB: %.3f ms" % (args.batch, grad_bytes / 1e6,
                                                       ", ".join("%.2f MB" % (b / 1e6) for b in buckets),
                                                       grad_bytes / 1e6, 1e3 * raw), "",
              "| step | median (ms) | fastest (ms) | median minus local step (ms) "
              "| overhead beyond the raw allreduce, % of step |", "|---|---:|---:|---:|---:|"]
    for name, (t, fastest) in steps.items():
        extra = t - local
        beyond = "" if "whole" in name or "local" in name else "%.1f%%" % (100 * (extra - raw) / t)
        lines.append("| %s | %.3f | %.3f | %+.3f | %s |" % (name, 1e3 * t, 1e3 * fastest, 1e3 * extra, beyond))
    lines += ["", "0.5 MB buckets, on rank 0 (medians): the first bucket's allreduce started %.3f ms before the last "
              "one (the rest of backward ran meanwhile); %.0f%% of the steps had the first bucket's allreduce "
              "complete by then; waiting for the buckets after the last one started took %.3f ms."
              % (1e3 * window, 100 * done / max(1, len(buckets) - 1), 1e3 * tail)]
    if dist.get_rank() == 0:
        print("\n".join(lines), flush=True)
        if args.output:
            with open(args.output, "w") as f:
                f.write("\n".join(lines) + "\n")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
