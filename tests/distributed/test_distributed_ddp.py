"""Multi-process tests of DistributedDataParallel and the DDP example: pytest launches this file
under ``mpiexec -n 2`` (see test_distributed_mpi.py for how launches and checks work: launch() and
Checks are in tests/helpers.py)."""
import datetime
import os
import sys
import time

import numpy as np
import pytest

import jitgrad as jg
import jitgrad.distributed as dist
import jitgrad.nn as nn
from jitgrad.distributed import _mpi
from jitgrad.nn.parallel import DistributedDataParallel as DDP
from jitgrad.utils.data import DistributedSampler

from helpers import Checks, expect_error, launch

HERE = os.path.abspath(__file__)
EXAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(HERE))), "examples", "ddp_digits.py")


def make_mlp():
    return nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 8), nn.ReLU(), nn.Linear(8, 3))


def mse(out, y):
    return ((out - y) ** 2).mean()


def same_on_every_rank(tensors):
    """Whether each tensor is bit-for-bit equal on every rank."""
    for t in tensors:
        out = [jg.zeros_like(t) for _ in range(dist.get_world_size())]
        dist.all_gather(out, t.detach().contiguous())
        if any(not np.array_equal(o.numpy(), t.detach().numpy()) for o in out):
            return False
    return True


def scenario_ddp(directory):
    """DDP: equivalence with one process, no_sync, unused parameters, buffers, overlap, state_dict, sampler."""
    size, me = int(os.environ["PMI_SIZE"]), int(os.environ["PMI_RANK"])  # what mpiexec told this process
    expect_error(lambda: dist.init_process_group("mpi", world_size=size + 1), ValueError,
                 "world_size=%d, but MPI started %d processes" % (size + 1, size))
    expect_error(lambda: dist.init_process_group("mpi", rank=(me + 1) % size), ValueError,
                 "but MPI gave this process rank %d" % me)
    expect_error(lambda: dist.init_process_group("nccl"), ValueError, "backend must be 'mpi'")
    assert not dist.is_initialized()
    dist.init_process_group("mpi", world_size=size, rank=me, timeout=datetime.timedelta(seconds=120))
    checks = Checks(directory)
    r, n = dist.get_rank(), dist.get_world_size()
    rng = np.random.default_rng(0)
    X = rng.standard_normal((32, 6)).astype(np.float32)
    Y = rng.standard_normal((32, 3)).astype(np.float32)
    mine = slice(r * 32 // n, (r + 1) * 32 // n)

    # N steps on half of a fixed global batch each == one process on the whole batch
    for kwargs in [{}, {"bucket_cap_mb": 0.0001}, {"bucket_cap_mb": 0.0001, "gradient_as_bucket_view": True}]:
        jg.manual_seed(10 + r)  # a different initialization on each rank: DDP copies rank 0's
        model = make_mlp()
        ddp = DDP(model, **kwargs)
        assert same_on_every_rank(list(model.parameters()))
        ref = make_mlp()
        ref.load_state_dict(model.state_dict())
        opt = jg.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
        ref_opt = jg.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
        for step in range(4):
            opt.zero_grad()
            mse(ddp(jg.from_numpy(X[mine])), jg.from_numpy(Y[mine])).backward()
            opt.step()
            ref_opt.zero_grad()
            mse(ref(jg.from_numpy(X)), jg.from_numpy(Y)).backward()
            ref_opt.step()
        for p, q in zip(model.parameters(), ref.parameters()):
            np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-5, atol=1e-6)
        assert same_on_every_rank(list(model.parameters()) + [p.grad for p in model.parameters()])
        if kwargs.get("bucket_cap_mb"):
            assert len(ddp.reducer.buckets) == 3
        if kwargs.get("gradient_as_bucket_view"):
            views = [v for b in ddp.reducer.buckets for v in b.views]
            assert all(any(p.grad._data is v for v in views) for p in model.parameters())
    checks.passed("ddp_equivalence")
    assert list(ddp.state_dict()) == ["module." + k for k in model.state_dict()]
    plain = make_mlp()
    plain.load_state_dict({k[len("module."):]: v for k, v in ddp.state_dict().items()})
    checks.passed("ddp_state_dict")

    # overlap: when the last gradient of backward arrives, the first buckets' allreduce has already started
    jg.manual_seed(0)
    model = make_mlp()
    seen = []
    model[0].weight.register_post_accumulate_grad_hook(lambda p: seen.append(ddp.reducer.next_bucket))
    ddp = DDP(model, bucket_cap_mb=0.0001)
    mse(ddp(jg.from_numpy(X[mine])), jg.from_numpy(Y[mine])).backward()
    assert seen and seen[0] >= 1 and seen[0] < len(ddp.reducer.buckets)
    assert not ddp.reducer.poller.active and all(b.request is None for b in ddp.reducer.buckets)

    # the progress thread: a 4 MB allreduce completes while this rank makes no MPI call (MPICH moves
    # a non-blocking collective only inside MPI calls); rank 1 joins 0.1 s late
    comm, MPI = dist.group.WORLD.comm, _mpi.mpi()
    buf = np.full(1 << 20, float(r + 1), dtype=np.float32)
    if r == 1:
        time.sleep(0.1)
    poller = _mpi.Poller()
    poller.add(comm.Iallreduce(MPI.IN_PLACE, buf, op=MPI.SUM))
    deadline = time.monotonic() + 60
    while poller.active and time.monotonic() < deadline:
        time.sleep(0.01)  # "computing": no MPI call on this thread
    assert not poller.active and buf[0] == buf[-1] == 3.0  # the thread completed it and ended
    assert poller.stop()[0] == MPI.REQUEST_NULL
    checks.passed("ddp_overlap")

    # no_sync: local accumulation, then the sync step averages the accumulated gradients
    jg.manual_seed(0)
    model = make_mlp()
    ddp = DDP(model, bucket_cap_mb=0.0001)
    ref = make_mlp()
    ref.load_state_dict(model.state_dict())
    halves = [slice(mine.start, mine.start + 8), slice(mine.start + 8, mine.stop)]
    with ddp.no_sync():
        mse(ddp(jg.from_numpy(X[halves[0]])), jg.from_numpy(Y[halves[0]])).backward()
    local = [p.grad.numpy().copy() for p in model.parameters()]
    assert not same_on_every_rank([p.grad for p in model.parameters()])  # nothing was communicated
    mse(ddp(jg.from_numpy(X[halves[1]])), jg.from_numpy(Y[halves[1]])).backward()
    for k in range(n):  # the reference: the mean over ranks of each rank's two micro-batch gradients
        for q in (slice(k * 16, k * 16 + 8), slice(k * 16 + 8, k * 16 + 16)):
            (mse(ref(jg.from_numpy(X[q])), jg.from_numpy(Y[q])) / n).backward()
    for p, q, l in zip(model.parameters(), ref.parameters(), local):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-5, atol=1e-6)
        assert not np.allclose(p.grad.numpy(), l)
    assert same_on_every_rank([p.grad for p in model.parameters()])
    checks.passed("ddp_no_sync")

    # unused parameters: PyTorch's error at the next forward, or find_unused_parameters=True
    class TwoHeads(nn.Module):
        def __init__(self):
            super().__init__()
            self.unused = nn.Linear(6, 3)  # registered first: the last bucket
            self.a = nn.Linear(6, 3)
            self.b = nn.Linear(6, 3)

        def forward(self, x, use_b=True):
            return self.a(x) + self.b(x) if use_b else self.a(x)

    jg.manual_seed(0)
    ddp = DDP(TwoHeads())
    ddp(jg.from_numpy(X[mine])).sum().backward()
    try:
        ddp(jg.from_numpy(X[mine]))
        raise AssertionError("no error for unused parameters")
    except RuntimeError as e:
        msg = str(e)
        assert msg.startswith("Expected to have finished reduction in the prior iteration before starting a new one.")
        assert "Parameter indices which did not receive grad for rank %d: 0 1" % r in msg
        assert "unused.weight, unused.bias" in msg
    checks.passed("ddp_unused_error")

    jg.manual_seed(0)
    model = TwoHeads()
    ddp = DDP(model, find_unused_parameters=True)
    ref = TwoHeads()
    ref.load_state_dict(model.state_dict())
    for step in range(2):
        for p in model.parameters():
            p.grad = None
        # rank 1 leaves head b out: b is used on rank 0 only, so it is used globally
        ddp(jg.from_numpy(X[mine]), use_b=(r == 0)).sum().backward()
        assert model.unused.weight.grad is None and model.unused.bias.grad is None  # unused everywhere
    for p in ref.parameters():
        p.grad = None
    for k in range(n):
        q = slice(k * 32 // n, (k + 1) * 32 // n)
        (ref(jg.from_numpy(X[q]), use_b=(k == 0)).sum() / n).backward()
    for name in ["a.weight", "a.bias", "b.weight", "b.bias"]:
        got, want = model.get_parameter(name).grad, ref.get_parameter(name).grad
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)
    checks.passed("ddp_find_unused_parameters")

    # buffers: rank 0's are copied at wrap time and before every forward
    jg.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 4), nn.BatchNorm1d(4))
    model[1].running_mean.fill_(float(r + 1))
    ddp = DDP(model)
    assert model[1].running_mean.tolist() == [1.0] * 4
    ddp(jg.from_numpy(X[mine])).sum().backward()  # each rank updates its statistics from its own data
    assert not same_on_every_rank([model[1].running_mean])
    rank0_stats = model[1].running_mean.numpy().copy()
    dist.broadcast(jg.from_numpy(rank0_stats), src=0)
    ddp.eval()
    with jg.no_grad():
        ddp(jg.from_numpy(X[mine]))  # eval: statistics are read, not updated, after the broadcast
    assert np.array_equal(model[1].running_mean.numpy(), rank0_stats)
    assert same_on_every_rank([model[1].running_mean, model[1].running_var])
    checks.passed("ddp_buffers")

    # a different model on some rank: PyTorch's error on every rank
    widths = 4 if r == 0 else 5
    expect_error(lambda: DDP(nn.Linear(6, widths)), RuntimeError, "DDP expects same model across all ranks")
    expect_error(lambda: DDP(nn.ReLU()), RuntimeError, "DistributedDataParallel is not needed")
    checks.passed("ddp_errors")

    # DistributedSampler takes rank and world size from the default group
    s = DistributedSampler(range(11), shuffle=False)
    assert (s.num_replicas, s.rank, list(s)) == (n, r, list(range(11))[r::n] + ([0] if r == 1 else []))
    checks.passed("sampler_from_group")
    dist.destroy_process_group()


def test_ddp_on_2_ranks(tmp_path):
    rc, out, err, _, passed = launch("ddp", 2, tmp_path, script=HERE)
    assert rc == 0, out + err
    want = ["ddp_equivalence", "ddp_state_dict", "ddp_overlap", "ddp_no_sync", "ddp_unused_error",
            "ddp_find_unused_parameters", "ddp_buffers", "ddp_errors", "sampler_from_group"]
    assert passed == [want, want], err


def test_ddp_digits_example_on_2_ranks(tmp_path):
    out_file = str(tmp_path / "w.jg")
    rc, out, err, _, _ = launch(["--epochs", "3", "--out", out_file], 2, tmp_path, script=EXAMPLE)
    assert rc == 0, out + err
    assert "2 ranks, global batch 32 (16 per rank)" in out and "weights identical on all 2 ranks: True" in out
    acc = float(out.split("held-out accuracy ")[1].split("%")[0])
    assert acc > 80 and os.path.exists(out_file)  # three epochs learn most digits (20 reach 97.6%, README)


@pytest.mark.slow
def test_ddp_digits_example_reaches_its_target_on_2_ranks(tmp_path):
    rc, out, err, _, _ = launch(["--out", str(tmp_path / "w.jg")], 2, tmp_path, timeout=600, script=EXAMPLE)
    assert rc == 0, out + err
    assert float(out.split("held-out accuracy ")[1].split("%")[0]) >= 95.0


if __name__ == "__main__":
    globals()["scenario_" + sys.argv[1]](sys.argv[2])
