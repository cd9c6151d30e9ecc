"""GPU figures of jitgrad's CUDA kernels (needs an NVIDIA GPU and the 'cuda' extra).

    python benchmarks/cuda_bench.py                 # every figure, median of 20 samples
    python benchmarks/cuda_bench.py --repeats 50 --n 67108864 --matmul 4096

Measures, on float32:
  - elementwise add and mul over 64M elements, as bandwidth and as a fraction of a
    device-to-device copy of the same bytes (goal: >= 80%); the copy is the fastest of numba's
    (the driver's memcpy) and PyTorch's copy_ where PyTorch with CUDA is installed;
  - reductions: a full sum of 64M elements and row sums of an 8192 x 8192 matrix, as bandwidth
    (goal for the rows: >= 70% of the copy), beside PyTorch's where it is installed;
  - matmul at 4096 x 4096 x 4096 in GFLOP/s;
  - one training step of an MLP 784-512-256-10, batch 256, cross-entropy, SGD with momentum:
    written directly on the kernels (forward and backward), through jitgrad's tensors and
    autograd on device='cuda' (when that path is available), the same step under jitgrad.compile,
    and in PyTorch CUDA when PyTorch with CUDA is importable (goal: jitgrad <= 1.5x PyTorch's time);
  - launch overhead: host time per op of 100 back-to-back adds of 16 elements, on the kernels, on
    jitgrad tensors and in PyTorch (goal: within 2x of PyTorch's);
  - the caching allocator: driver allocations during the timed training steps (goal: none).

Kernel times come from CUDA events around back-to-back launches; training steps are timed on the host
over back-to-back steps ending in a synchronize, so the launch overhead counts.
"""
import argparse
import statistics
import sys
import time
import types

import numpy as np

def _modules():
    from jitgrad.kernels.cuda import memory
    memory.install()  # before the first allocation creates the CUDA context
    from numba import cuda

    from jitgrad.kernels.cuda import array, elementwise, matmul, reduce
    return cuda, memory, array, elementwise, matmul, reduce


def count(n):
    return "%dM" % (n >> 20) if n >= 1 << 20 else str(n)


def event_seconds(cuda, fn, repeats, warmup=2, inner=10):
    """Median GPU seconds per call of ``fn()``, between two events around ``inner`` back-to-back calls
    (``cuda``: numba.cuda, or what has its ``synchronize`` and ``event``). Back to back, the host's
    launch work overlaps the GPU's (around a single call the GPU would wait for it): these are device
    figures, and launch_overhead measures the host's cost per op."""
    for _ in range(warmup):
        fn()
    cuda.synchronize()
    start, end = cuda.event(), cuda.event()
    samples = []
    for _ in range(repeats):
        start.record()
        for _ in range(inner):
            fn()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) / 1e3 / inner)
    return statistics.median(samples)


def host_seconds(fn, sync, repeats, inner=10, warmup=3):
    """Median seconds per call of ``fn()`` over ``inner`` back-to-back calls, synchronized."""
    for _ in range(warmup):
        fn()
    sync()
    samples = []
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(inner):
            fn()
        sync()
        samples.append((time.perf_counter() - t) / inner)
    return statistics.median(samples)


# ------------------------------------------------------------------ kernels
def bandwidth(mods, n, repeats):
    cuda, _, _, E, _, R = mods
    rng = np.random.default_rng(0)
    a = cuda.to_device(rng.standard_normal(n, dtype=np.float32))
    b = cuda.to_device(rng.standard_normal(n, dtype=np.float32))
    out = cuda.device_array(n, np.float32)
    nbytes = 4 * n
    rows = []
    copies = {"numba copy_to_device (cuMemcpyDtoD)": event_seconds(cuda, lambda: out.copy_to_device(a), repeats)}
    copies.update(_library_copies(n, repeats))
    # the reference is the fastest copy measured: the driver's memcpy reads well under what a copy kernel reaches
    best = min(copies, key=copies.get)
    copy_bw = 2 * nbytes / copies[best]
    for what, t in copies.items():
        rows.append(("device-to-device copy, %s float32: %s" % (count(n), what), t, "%.0f GB/s" % (2 * nbytes / t / 1e9),
                     "%.2f of copy%s" % (2 * nbytes / t / copy_bw, " (the reference)" if what == best else "")))
    for name in ("add", "mul"):
        t = event_seconds(cuda, lambda: E.run(name, np.float32, a, b, out=out), repeats)
        bw = 3 * nbytes / t
        rows.append(("elementwise %s, %s float32" % (name, count(n)), t, "%.0f GB/s" % (bw / 1e9),
                     "%.2f of copy (goal >= 0.80)" % (bw / copy_bw)))
    t = event_seconds(cuda, lambda: R.reduce("sum", a, (0,)), repeats)
    rows += _torch_reductions(n, repeats, copy_bw)
    rows.append(("sum of all %s float32" % count(n), t, "%.0f GB/s" % (nbytes / t / 1e9),
                 "%.2f of copy" % (nbytes / t / copy_bw)))
    side = int(np.sqrt(n))
    m = a[:side * side].reshape(side, side)
    for dims, what in (((1,), "rows"), ((0,), "columns")):
        t = event_seconds(cuda, lambda: R.reduce("sum", m, dims), repeats)
        bw = 4 * side * side / t
        rows.append(("sum of the %s of %d x %d float32" % (what, side, side), t, "%.0f GB/s" % (bw / 1e9),
                     "%.2f of copy%s" % (bw / copy_bw, " (goal >= 0.70)" if what == "rows" else "")))
    t = event_seconds(cuda, lambda: R.softmax(m, 1, False), repeats)
    rows.append(("softmax of the rows of %d x %d float32" % (side, side), t, "%.0f GB/s" % (8 * side * side / t / 1e9),
                 "%.2f of copy" % (8 * side * side / t / copy_bw)))
    return rows


def _torch_reductions(n, repeats, copy_bw):
    """PyTorch's add and row/column sums on the same sizes, for comparison."""
    torch = _torch_cuda()
    if torch is None:
        return []
    x, y, z = (torch.randn(n, device="cuda") for _ in range(3))
    side = int(np.sqrt(n))
    m = x[:side * side].reshape(side, side)
    rows = []
    for what, fn, nbytes in (("PyTorch add, %s float32" % count(n), lambda: torch.add(x, y, out=z), 12 * n),
                             ("PyTorch sum of the rows of %d x %d" % (side, side), lambda: m.sum(1), 4 * side * side),
                             ("PyTorch sum of the columns of %d x %d" % (side, side), lambda: m.sum(0), 4 * side * side)):
        t = event_seconds(_torch_events(torch), fn, repeats)
        rows.append((what, t, "%.0f GB/s" % (nbytes / t / 1e9), "%.2f of copy" % (nbytes / t / copy_bw)))
    return rows


def _torch_cuda():
    """PyTorch, for the comparison rows, where it is installed with a usable GPU; else None."""
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


def _library_copies(n, repeats):
    """Seconds of a device-to-device copy of ``n`` float32 by the libraries installed beside jitgrad."""
    torch = _torch_cuda()
    if torch is None:
        return {}
    x, y = torch.empty(n, device="cuda"), torch.empty(n, device="cuda")
    return {"PyTorch copy_": event_seconds(_torch_events(torch), lambda: y.copy_(x), repeats)}


def _torch_events(torch):
    """PyTorch's CUDA events behind the names event_seconds uses of numba.cuda."""
    return types.SimpleNamespace(synchronize=torch.cuda.synchronize,
                                 event=lambda: torch.cuda.Event(enable_timing=True))


def gemm(mods, size, repeats):
    cuda, _, _, _, MM, _ = mods
    rng = np.random.default_rng(0)
    a = cuda.to_device(rng.standard_normal((size, size), dtype=np.float32))
    b = cuda.to_device(rng.standard_normal((size, size), dtype=np.float32))
    t = event_seconds(cuda, lambda: MM.matmul(a, b), repeats)
    via = "cuBLAS via CuPy" if MM._cublas() is not None else "numba tiled kernel"
    rows = [("matmul %d^3 float32 (%s)" % (size, via), t, "%.0f GFLOP/s" % (2 * size ** 3 / t / 1e9), "")]
    if MM._cublas() is not None:  # the numba kernel too: the fallback without CuPy
        MM._CUPY[:] = [None]
        try:
            tn = event_seconds(cuda, lambda: MM.matmul(a, b), max(3, repeats // 4))
        finally:
            MM._CUPY[:] = []
        rows.append(("matmul %d^3 float32 (numba tiled kernel)" % size, tn, "%.0f GFLOP/s" % (2 * size ** 3 / tn / 1e9),
                     "%.1fx cuBLAS's time" % (tn / t)))
    torch = _torch_cuda()
    if torch is not None:
        ta = torch.randn(size, size, device="cuda")
        tb = torch.randn(size, size, device="cuda")
        torch.set_float32_matmul_precision("highest")
        tt = host_seconds(lambda: ta @ tb, torch.cuda.synchronize, repeats, inner=3)
        rows.append(("PyTorch matmul %d^3 float32 (no TF32)" % size, tt,
                     "%.0f GFLOP/s" % (2 * size ** 3 / tt / 1e9), "jitgrad at %.2fx PyTorch's time" % (t / tt)))
    return rows


def launch_overhead(mods, repeats, n=16):
    """Host time per op on tiny tensors, back to back: what dispatch and the launch cost (goal: <= 2x PyTorch)."""
    cuda, _, _, E, _, _ = mods
    import jitgrad as jg
    rng = np.random.default_rng(0)
    ha, hb = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
    da, db = cuda.to_device(ha), cuda.to_device(hb)
    ta, tb = jg.tensor(ha, device="cuda"), jg.tensor(hb, device="cuda")
    ops = 100

    def chain(f, a, b):
        def run():
            for _ in range(ops):
                f(a, b)
        return run
    rows, times = [], {}
    cases = [("kernel call E.run('add')", chain(lambda a, b: E.run("add", np.float32, a, b), da, db), cuda.synchronize),
             ("jitgrad tensors a + b", chain(lambda a, b: a + b, ta, tb), cuda.synchronize)]
    torch = _torch_cuda()
    if torch is not None:
        xa, xb = torch.from_numpy(ha).cuda(), torch.from_numpy(hb).cuda()
        cases.append(("PyTorch a + b", chain(lambda a, b: a + b, xa, xb), torch.cuda.synchronize))
    for label, fn, sync in cases:
        times[label] = host_seconds(fn, sync, repeats, inner=1) / ops
    torch_t = times.get("PyTorch a + b")
    for label, t in times.items():
        note = "%.2fx PyTorch (goal <= 2x)" % (t / torch_t) if torch_t and not label.startswith("PyTorch") else ""
        rows.append(("launch overhead, %d-element add: %s" % (n, label), t, "%.1f us/op" % (t * 1e6), note))
    return rows


# ------------------------------------------------------------------ MLP training step
SIZES = [(784, 512), (512, 256), (256, 10)]
BATCH, LR, MOMENTUM = 256, 0.01, 0.9


def _mlp_data():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((BATCH, SIZES[0][0]), dtype=np.float32)
    labels = rng.integers(0, SIZES[-1][1], BATCH)
    params = []
    for n_in, n_out in SIZES:
        bound = 1 / np.sqrt(n_in)
        params += [rng.uniform(-bound, bound, (n_out, n_in)).astype(np.float32),
                   rng.uniform(-bound, bound, n_out).astype(np.float32)]
    return x, labels, params


def mlp_step_on_kernels(mods):
    """The step written directly on the kernel twins: what the tensor layer adds is measured apart."""
    cuda, _, A, E, MM, R = mods
    f32 = np.float32
    x, labels, host_params = _mlp_data()
    x = cuda.to_device(x)
    params = [cuda.to_device(p) for p in host_params]
    bufs = [cuda.to_device(np.zeros_like(p)) for p in host_params]
    # d loss / d log-probabilities of the mean cross-entropy
    g_logp = cuda.to_device(-np.eye(SIZES[-1][1], dtype=f32)[labels] / BATCH)
    last = len(params) - 2

    def step():
        acts = [x]
        h = x
        for i in range(0, len(params), 2):
            h = E.run("add", f32, MM.matmul(h, A.transpose(params[i], (1, 0))), params[i + 1])
            if i < last:
                h = E.run("relu", f32, h)
                acts.append(h)
        logp = R.softmax(h, 1, True)
        loss = R.reduce("sum", E.run("mul", f32, logp, g_logp), (0, 1))  # noqa: F841 (kept on the device)
        g = R.softmax_vjp(g_logp, logp, 1, True)
        grads = [None] * len(params)
        for i in range(last, -1, -2):
            a = acts[i // 2]
            grads[i] = MM.matmul(A.transpose(g, (1, 0)), a)
            grads[i + 1] = R.reduce("sum", g, (0,))
            if i:
                g = E.run("relu_vjp", f32, MM.matmul(g, params[i]), a)
        for p, buf, gr in zip(params, bufs, grads):
            E.run("add_alpha", f32, gr, buf, f32(MOMENTUM), out=buf)
            E.run("add_alpha", f32, p, buf, f32(-LR), out=p)
    step.params = params
    return step


def mlp_step_on_tensors(compiled=False):
    """The same step through jitgrad's nn/optim/autograd on device='cuda' (``compiled``: the whole step
    through ``jitgrad.compile``: one plan of fused CUDA kernels and cuBLAS calls, then the update)."""
    import jitgrad as jg
    from jitgrad import nn, optim
    x, labels, _ = _mlp_data()
    jg.manual_seed(0)
    model = nn.Sequential(nn.Linear(*SIZES[0]), nn.ReLU(), nn.Linear(*SIZES[1]), nn.ReLU(), nn.Linear(*SIZES[2]))
    model = model.to("cuda")
    opt = optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
    xt, yt = jg.tensor(x, device="cuda"), jg.tensor(labels, device="cuda")

    def step():
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(xt), yt)
        loss.backward()
        opt.step()
    return jg.compile(step) if compiled else step


def mlp_step_in_torch():
    import torch
    x, labels, _ = _mlp_data()
    torch.manual_seed(0)
    nn = torch.nn
    model = nn.Sequential(nn.Linear(*SIZES[0]), nn.ReLU(), nn.Linear(*SIZES[1]), nn.ReLU(), nn.Linear(*SIZES[2])).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
    xt, yt = torch.from_numpy(x).cuda(), torch.from_numpy(labels).cuda()

    def step():
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(xt), yt)
        loss.backward()
        opt.step()
    return step


def training(mods, repeats):
    cuda, memory = mods[0], mods[1]
    rows, times = [], {}
    steps = [("jitgrad kernels, hand-written step", lambda: mlp_step_on_kernels(mods), cuda.synchronize),
             ("jitgrad tensors + autograd, device='cuda'", mlp_step_on_tensors, cuda.synchronize),
             ("jitgrad.compile(step), device='cuda'", lambda: mlp_step_on_tensors(compiled=True), cuda.synchronize)]
    torch = _torch_cuda()
    if torch is not None:
        steps.append(("PyTorch CUDA", mlp_step_in_torch, torch.cuda.synchronize))
    for label, make, sync in steps:
        try:
            step = make()
            step()
        except Exception as e:  # a path not available in this build is reported, not fatal
            rows.append(("MLP step: " + label, None, "not available: %s: %s" % (type(e).__name__, str(e)[:120]), ""))
            continue
        sync()
        before = memory.memory_stats()["driver_allocs"]
        times[label] = host_seconds(step, sync, repeats)
        allocs = memory.memory_stats()["driver_allocs"] - before
        note = "" if label.startswith("PyTorch") else "%d driver allocations while timed" % allocs
        rows.append(("MLP step: " + label, times[label], "", note))
    torch_t = times.get("PyTorch CUDA")
    if torch_t:
        rows = [(name, t, (extra + "; " if extra else "") + ("%.2fx PyTorch (goal <= 1.5x)" % (t / torch_t)
                                                             if t and not name.endswith("PyTorch CUDA") else ""), note)
                for name, t, extra, note in rows]
    return rows


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--n", type=int, default=64 << 20, help="elements of the bandwidth arrays (default 64M)")
    p.add_argument("--matmul", type=int, default=4096)
    args = p.parse_args(argv)
    mods = _modules()
    cuda = mods[0]
    if not cuda.is_available():
        print("no CUDA GPU available: nothing to measure", file=sys.stderr)
        return 1
    dev = cuda.get_current_device()
    name = getattr(dev, "name", "CUDA simulator")
    print("device: %s (cc %s, %s SMs)\n" % (name.decode() if isinstance(name, bytes) else name,
                                           ".".join(map(str, getattr(dev, "compute_capability", ()))),
                                           getattr(dev, "MULTIPROCESSOR_COUNT", "?")))
    t0 = time.perf_counter()
    rows = (bandwidth(mods, args.n, args.repeats) + gemm(mods, args.matmul, args.repeats)
            + launch_overhead(mods, args.repeats) + training(mods, args.repeats))
    print("| what | time | rate | note |\n|---|---|---|---|")
    for name, t, rate, note in rows:
        print("| %s | %s | %s | %s |" % (name, "-" if t is None else "%.3f ms" % (t * 1e3), rate, note))
    stats = mods[1].memory_stats()
    print("\ncaching allocator: %d driver allocations, %d reuses, peak %.1f MiB; total %.0f s"
          % (stats["driver_allocs"], stats["reuses"], stats["peak_allocated_bytes"] / 2**20, time.perf_counter() - t0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
