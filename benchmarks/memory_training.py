"""Does a long training loop keep a flat memory footprint? Resident memory over N steps of a small MLP.

    python benchmarks/memory_training.py                     # 10,000 steps, SGD with momentum
    python benchmarks/memory_training.py --steps 20000 --optimizer adam --every 2000

Each step is forward, cross-entropy, zero_grad, backward and an optimizer step on a fresh random
batch. The current resident set (VmRSS from /proc/self/status, or the peak from getrusage where
/proc is missing) is printed every ``--every`` steps; a leak shows as steady growth after warm-up
(the first report includes kernel compilation and NumPy/BLAS buffers). Not an asv benchmark: run
it directly.
"""
import argparse
import resource
import sys
import time


def rss_mib():
    """Current resident set size in MiB (peak size where /proc is unavailable)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024 if sys.platform == "darwin" else 1024)


def peak_mib():
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024 if sys.platform == "darwin" else 1024)


def run(steps=10_000, every=1_000, optimizer="sgd", batch=64, seed=0):
    import numpy as np

    import jitgrad as jg
    import jitgrad.nn as nn
    from jitgrad import optim

    jg.manual_seed(seed)
    rng = np.random.default_rng(seed)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 10))
    opt = optim.Adam(model.parameters(), lr=1e-3) if optimizer == "adam" else \
        optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    loss_fn = nn.CrossEntropyLoss()
    X = rng.standard_normal((batch * 16, 64)).astype(np.float32)
    y = rng.integers(0, 10, batch * 16)

    print("%8s  %9s  %9s  %10s  %8s" % ("step", "RSS MiB", "peak MiB", "loss", "steps/s"))
    print("%8d  %9.1f  %9.1f  %10s  %8s" % (0, rss_mib(), peak_mib(), "-", "-"), flush=True)
    rows = []
    t0 = time.perf_counter()
    for step in range(1, steps + 1):
        i = (step % 16) * batch
        loss = loss_fn(model(jg.from_numpy(X[i:i + batch])), jg.from_numpy(y[i:i + batch]))
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % every == 0:
            rate = every / (time.perf_counter() - t0)
            rows.append((step, rss_mib()))
            print("%8d  %9.1f  %9.1f  %10.4f  %8.0f" % (step, rows[-1][1], peak_mib(), loss.item(), rate), flush=True)
            t0 = time.perf_counter()
    if len(rows) >= 2:
        print("RSS change from step %d to step %d: %+.1f MiB" % (rows[0][0], rows[-1][0], rows[-1][1] - rows[0][1]))
    return rows


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=10_000)
    p.add_argument("--every", type=int, default=1_000)
    p.add_argument("--optimizer", choices=["sgd", "adam"], default="sgd")
    p.add_argument("--batch", type=int, default=64)
    args = p.parse_args(argv)
    run(args.steps, args.every, args.optimizer, args.batch)


if __name__ == "__main__":
    main()
