"""Profile a short training loop on the 8x8 digits: where the time goes, op by op, and what numba compiled.

    python examples/profile_training.py               # MLP, 12 steps, 4 of them profiled
    python examples/profile_training.py --trace t.json  # also a Chrome trace (chrome://tracing, Perfetto)

The profiler's schedule skips the first steps (kernels compile or load from numba's cache there), warms up
for one and records three; the table is PyTorch's, with one more column: the numba compile time of each op.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jitgrad as jg  # noqa: E402
import jitgrad.nn as nn  # noqa: E402
from jitgrad.profiler import ProfilerActivity, profile, record_function, schedule  # noqa: E402

from _digits import load_digits  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--trace", default=None, help="write the recorded steps as a Chrome trace here")
    args = p.parse_args(argv)
    jg.manual_seed(0)
    X, _, y, _ = load_digits(0)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 10))
    opt = jg.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    recorded = []
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True,
                 schedule=schedule(skip_first=args.steps - 4, wait=0, warmup=1, active=3, repeat=1),
                 on_trace_ready=recorded.append) as prof:
        for step in range(args.steps):
            i = (step * args.batch_size) % (len(X) - args.batch_size)
            xb, yb = jg.from_numpy(X[i:i + args.batch_size]), jg.from_numpy(y[i:i + args.batch_size])
            with record_function("forward"):
                loss = loss_fn(model(xb), yb)
            with record_function("backward"):
                opt.zero_grad()
                loss.backward()
            opt.step()
            prof.step()
    table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=10)
    print(table)
    if args.trace:
        prof.export_chrome_trace(args.trace)
        print("Chrome trace written to", args.trace)
    return {"table": table, "events": prof.events(), "traces": len(recorded), "loss": loss.item()}


if __name__ == "__main__":
    main()
