"""The digits MLP trained data-parallel with DistributedDataParallel, one process per rank (MPI).

    mpiexec -n 2 python examples/ddp_digits.py    # 2 ranks, each on half of every batch of 32
    python examples/ddp_digits.py                  # 1 rank: the same training as examples/mlp_digits.py

``--batch-size`` is the global batch: each of the N ranks takes batch_size / N of it, chosen by
DistributedSampler, and DDP averages the gradients, so N ranks follow the same trajectory as one
process on the whole batch. Rank 0 prints the log (the ranks' stdout would interleave) and saves
the weights; at the end every rank's weights are compared.
"""
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

import jitgrad as jg  # noqa: E402
import jitgrad.distributed as dist  # noqa: E402
import jitgrad.nn as nn  # noqa: E402
from jitgrad import optim  # noqa: E402
from jitgrad.nn.parallel import DistributedDataParallel  # noqa: E402
from jitgrad.utils.data import DistributedSampler  # noqa: E402

from _digits import accuracy, arguments, load_digits, report  # noqa: E402
from mlp_digits import TARGET, make_model  # noqa: E402


def log(*args):
    if dist.get_rank() == 0:
        print(*args, flush=True)


def replicas_identical(model):
    """Whether every rank holds bit-for-bit the same weights."""
    flat = jg.from_numpy(np.concatenate([p.detach().numpy().ravel() for p in model.parameters()]))
    everyone = [jg.zeros_like(flat) for _ in range(dist.get_world_size())]
    dist.all_gather(everyone, flat)
    return all(np.array_equal(e.numpy(), flat.numpy()) for e in everyone)


def main(argv=None):
    args = arguments(__doc__.splitlines()[0], epochs=20, lr=0.05, out="ddp_digits.jg", argv=argv)
    if not dist.is_initialized():
        dist.init_process_group("mpi")
    rank, world = dist.get_rank(), dist.get_world_size()
    if args.batch_size % world:
        raise ValueError("--batch-size %d must be a multiple of the number of ranks (%d)" % (args.batch_size, world))
    per_rank = args.batch_size // world
    jg.manual_seed(args.seed + rank)  # different on each rank: DDP starts every replica from rank 0's weights
    X_train, X_test, y_train, y_test = load_digits(args.seed)
    model = make_model()
    ddp = DistributedDataParallel(model)
    log(ddp)
    log("%d rank%s, global batch %d (%d per rank)" % (world, "s" if world > 1 else "", args.batch_size, per_rank))
    optimizer = optim.SGD(ddp.parameters(), lr=args.lr, momentum=0.9, nesterov=True, weight_decay=1e-4)
    scheduler = optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.epochs)
    sampler = DistributedSampler(X_train, seed=args.seed)
    loss_fn = nn.CrossEntropyLoss()
    start = time.perf_counter()
    for epoch in range(1, args.epochs + 1):
        t0 = time.perf_counter()
        sampler.set_epoch(epoch)
        order = np.fromiter(sampler, dtype=np.int64)
        total = jg.zeros(2, dtype=jg.float64)  # loss summed over samples, number of samples
        for step in range(math.ceil(len(order) / per_rank)):
            idx = order[step * per_rank:(step + 1) * per_rank]
            loss = loss_fn(ddp(jg.from_numpy(X_train[idx])), jg.from_numpy(y_train[idx]))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += jg.tensor([loss.item() * len(idx), len(idx)], dtype=jg.float64)
        scheduler.step()
        dist.all_reduce(total)
        if rank == 0:  # the replicas are identical: one rank evaluates
            log("epoch %2d/%d  loss %.4f  train acc %.2f%%  test acc %.2f%%  %.2f s"
                % (epoch, args.epochs, total[0].item() / total[1].item(), 100 * accuracy(model, X_train, y_train),
                   100 * accuracy(model, X_test, y_test), time.perf_counter() - t0))
    seconds = time.perf_counter() - start
    identical = replicas_identical(model)
    acc = accuracy(model, X_test, y_test)
    log("weights identical on all %d ranks: %s" % (world, identical))
    if not identical:
        raise RuntimeError("the replicas' weights differ")
    if rank == 0:
        jg.save(model.state_dict(), args.out)  # the plain model's keys (ddp.state_dict() prefixes them 'module.')
        report("MLP on %d rank%s" % (world, "s" if world > 1 else ""), acc, seconds, TARGET)
    return {"accuracy": acc, "seconds": seconds, "identical": identical}


if __name__ == "__main__":
    main()
