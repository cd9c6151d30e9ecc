"""Multi-process tests: pytest launches this file under ``mpiexec -n 2`` or ``-n 3``.

Each launch runs a whole scenario (many checks, since every launch imports jitgrad in each
rank); a failed check raises, which aborts the job (jitgrad.distributed's excepthook) with the
rank's traceback on stderr. Each rank writes the names of the checks it passed to its own file,
which the test compares with the expected list. Every launch has a timeout, and its whole
process group is killed past it: the tests never hang.
"""
import datetime
import os
import signal
import subprocess
import sys
import time
import warnings

import numpy as np
import pytest

import jitgrad as jg
import jitgrad.distributed as dist
import jitgrad.nn as nn
from jitgrad.nn.parallel import DistributedDataParallel as DDP
from jitgrad.utils.data import DistributedSampler

HERE = os.path.abspath(__file__)
DTYPES = [jg.float32, jg.float64, jg.int32, jg.int64, jg.bool]


def launch(scenario, n, tmp_path, timeout=240, script=HERE):
    """Run ``scenario`` on ``n`` ranks; returns (returncode, stdout, stderr, seconds, passed checks per rank)."""
    env = dict(os.environ, NUMBA_NUM_THREADS="1", OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
               MKL_NUM_THREADS="1")
    args = [scenario, str(tmp_path)] if script == HERE else scenario
    cmd = [dist.find_mpiexec(), "-n", str(n), sys.executable, script] + args
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail("mpiexec -n %d %s did not finish in %d s\n%s\n%s" % (n, scenario, timeout, out, err))
    passed = []
    for r in range(n):
        path = os.path.join(str(tmp_path), "rank%d.txt" % r)
        passed.append(open(path).read().split() if os.path.exists(path) else [])
    return proc.returncode, out, err, time.monotonic() - start, passed


# ====================================================================== what each rank runs
class Checks:
    """Records the checks this rank passed in its own file (the ranks' stdout interleave)."""

    def __init__(self, directory):
        self.path = os.path.join(directory, "rank%d.txt" % dist.get_rank())
        open(self.path, "w").close()

    def passed(self, name):
        with open(self.path, "a") as f:
            f.write(name + "\n")


def rank_data(r, shape, dtype, seed=0):
    """Rank ``r``'s values (every rank can compute every other rank's, for the NumPy reference)."""
    rng = np.random.default_rng(seed * 100 + r)
    if dtype is jg.bool:
        return rng.random(shape) < 0.5
    if dtype.is_floating_point:
        return rng.standard_normal(shape).astype(dtype.np)
    return rng.integers(-3, 4, shape).astype(dtype.np)


def expect_error(fn, kind, text):
    try:
        fn()
    except kind as e:
        assert text in str(e), str(e)
        return
    raise AssertionError("expected %s(%r)" % (kind.__name__, text))


NUMPY_REDUCE = {"SUM": lambda a: a.sum(0), "PRODUCT": lambda a: a.prod(0), "MIN": lambda a: a.min(0),
                "MAX": lambda a: a.max(0), "BAND": lambda a: np.bitwise_and.reduce(a, 0),
                "BOR": lambda a: np.bitwise_or.reduce(a, 0), "BXOR": lambda a: np.bitwise_xor.reduce(a, 0)}


def reference(op, stacked, dtype):
    if dtype is jg.bool:
        name = {"SUM": "MAX", "PRODUCT": "MIN", "BAND": "MIN", "BOR": "MAX"}.get(op, op)
        return {"MAX": stacked.any(0), "MIN": stacked.all(0), "BXOR": np.logical_xor.reduce(stacked, 0)}[name]
    if op == "AVG":
        s = stacked.sum(0)
        return s / len(stacked) if dtype.is_floating_point else np.trunc(s / len(stacked)).astype(s.dtype)
    return NUMPY_REDUCE[op](stacked).astype(dtype.np)


def ops_for(dtype):
    if dtype is jg.bool:
        return ["SUM", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR"]
    if dtype.is_floating_point:
        return ["SUM", "AVG", "PRODUCT", "MIN", "MAX"]
    return ["SUM", "AVG", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR"]


def close(got, want, dtype):
    got = got.numpy() if isinstance(got, jg.Tensor) else got
    if dtype.is_floating_point:
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    else:
        np.testing.assert_array_equal(got, want)


def scenario_collectives(directory):
    """Every collective on every dtype against NumPy, sync and async, subgroups, point to point, errors."""
    dist.init_process_group("mpi", world_size=int(os.environ.get("PMI_SIZE", -1)))
    checks = Checks(directory)
    r, n = dist.get_rank(), dist.get_world_size()
    assert dist.is_initialized() and dist.get_backend() == "mpi" and n == 3
    expect_error(lambda: dist.init_process_group("mpi"), ValueError,
                 "trying to initialize the default process group twice!")
    shape = (2, 3)
    for dtype in DTYPES:
        everyone = np.stack([rank_data(k, shape, dtype) for k in range(n)])
        mine = lambda: jg.from_numpy(everyone[r].copy())  # noqa: E731
        for op in ops_for(dtype):
            for async_op in (False, True):
                t = mine()
                version = t._version
                work = dist.all_reduce(t, op=getattr(dist.ReduceOp, op), async_op=async_op)
                if async_op:
                    assert work.wait() and work.is_completed()
                else:
                    assert work is None
                close(t, reference(op, everyone, dtype), dtype)
                assert t.dtype is dtype and t.shape == shape and t._version > version
        if dtype is jg.bool:
            expect_error(lambda: dist.all_reduce(mine(), op=dist.ReduceOp.AVG), ValueError, "AVG with bool")
        elif dtype.is_floating_point:
            expect_error(lambda: dist.all_reduce(mine(), op=dist.ReduceOp.BAND), ValueError, "floating-point")
        checks.passed("all_reduce_" + dtype.name)

        t = mine()
        dist.broadcast(t, src=np.int64(1))  # any integer type names a rank
        close(t, everyone[1], dtype)
        t = mine()
        dist.broadcast(t, src=2, async_op=True).wait()
        close(t, everyone[2], dtype)
        if dtype is not jg.bool:
            t = mine()
            dist.reduce(t, dst=2, op=dist.ReduceOp.SUM)
            close(t, everyone.sum(0) if r == 2 else everyone[r], dtype)
        t = mine()
        dist.reduce(t, dst=1, op=dist.ReduceOp.MAX)
        if r == 1:
            close(t, reference("MAX", everyone, dtype), dtype)
        out = [jg.from_numpy(np.zeros(shape, dtype.np)) for _ in range(n)]
        work = dist.all_gather(out, mine(), async_op=True)
        while not work.is_completed():  # polling completes it too (and copies into the list)
            time.sleep(1e-4)
        for k in range(n):
            close(out[k], everyone[k], dtype)
        for out_shape in [(n * 2, 3), (n, 2, 3)]:
            o = jg.from_numpy(np.zeros(out_shape, dtype.np))
            dist.all_gather_into_tensor(o, mine(), async_op=True).wait()
            close(o.numpy().reshape(n, 2, 3), everyone, dtype)
        gl = [jg.from_numpy(np.zeros(shape, dtype.np)) for _ in range(n)] if r == 1 else None
        dist.gather(mine(), gl, dst=1)
        if r == 1:
            for k in range(n):
                close(gl[k], everyone[k], dtype)
        t = jg.from_numpy(np.zeros(shape, dtype.np))
        dist.scatter(t, [jg.from_numpy(everyone[k]) for k in range(n)] if r == 2 else None, src=2)
        close(t, everyone[r], dtype)
        big = np.stack([rank_data(k, (n, 4), dtype, seed=1) for k in range(n)])  # rank k's input: (n, 4)
        o = jg.from_numpy(np.zeros(4, dtype.np))
        dist.reduce_scatter_tensor(o, jg.from_numpy(big[r].copy()), op=dist.ReduceOp.MAX)
        close(o, reference("MAX", big, dtype)[r], dtype)
        if dtype is not jg.bool:
            o = jg.from_numpy(np.zeros(4, dtype.np))
            dist.reduce_scatter(o, [jg.from_numpy(row) for row in big[r]], op=dist.ReduceOp.SUM)
            close(o, big.sum(0)[r], dtype)
        checks.passed("rooted_and_gathers_" + dtype.name)

    # 0-d tensors and point to point: a ring
    t = jg.tensor(float(r + 1))
    dist.all_reduce(t)
    assert t.item() == 6.0
    x = jg.tensor([r, 10 * r], dtype=jg.int64)
    got = jg.zeros(2, dtype=jg.int64)
    send = dist.isend(x, dst=(r + 1) % n)
    src = dist.recv(got, src=(r - 1) % n)
    send.wait()
    assert src == (r - 1) % n and got.tolist() == [(r - 1) % n, 10 * ((r - 1) % n)]
    if r == 0:
        dist.send(jg.tensor([1.5, 2.5]), dst=2, tag=7)
    elif r == 2:
        buf = jg.zeros(2)
        assert dist.recv(buf, tag=7) == 0 and buf.tolist() == [1.5, 2.5]
    dist.barrier()
    checks.passed("point_to_point")

    # picklable objects (metrics, configurations)
    objs = [None] * n
    dist.all_gather_object(objs, {"rank": r, "name": "r" * r})
    assert objs == [{"rank": k, "name": "r" * k} for k in range(n)]
    lst = [r, "from %d" % r]
    dist.broadcast_object_list(lst, src=1)
    assert lst == [1, "from 1"]
    gathered = [None] * n if r == 2 else None
    dist.gather_object((r, [r] * r), gathered, dst=2)
    assert r != 2 or gathered == [(k, [k] * k) for k in range(n)]
    checks.passed("objects")

    # subgroups: ranks 0 and 2; rank 1 is not a member
    g = dist.new_group([2, 0])
    if r == 1:
        assert g is dist.GroupMember.NON_GROUP_MEMBER and dist.get_rank(g) == -1
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            assert dist.all_reduce(jg.ones(1), group=g) is None
        assert "does not belong to the given group" in str(w[0].message)
    else:
        assert dist.get_world_size(g) == 2 and dist.get_rank(g) == r // 2
        assert dist.get_process_group_ranks(g) == [0, 2] and dist.get_global_rank(g, 1) == 2
        t = jg.tensor([float(r)])
        dist.all_reduce(t, group=g)
        assert t.item() == 2.0
        t = jg.tensor([float(r)])
        dist.broadcast(t, src=2, group=g)  # src is a global rank
        assert t.item() == 2.0
    dist.barrier()
    checks.passed("subgroups")

    # mismatches across ranks: the same RuntimeError on every rank, no hang
    mismatch = "Detected mismatch between collectives on ranks"
    expect_error(lambda: dist.all_reduce(jg.zeros(2 + (r == 1))), RuntimeError, mismatch)
    expect_error(lambda: dist.all_reduce(jg.zeros(2, dtype=jg.float64 if r == 2 else jg.float32)), RuntimeError,
                 "dtype=jitgrad.float64")
    expect_error(lambda: dist.broadcast(jg.zeros(2), src=r % 2), RuntimeError, mismatch)
    expect_error(lambda: dist.all_reduce(jg.zeros(2)) if r else dist.barrier(), RuntimeError,
                 "is running collective: barrier")
    expect_error(lambda: dist.all_reduce(jg.zeros(4)[::2]), RuntimeError, "input tensor has to be contiguous")
    expect_error(lambda: dist.all_gather([jg.zeros(2)], jg.zeros(2)), ValueError, "one tensor per rank")
    expect_error(lambda: dist.all_gather_into_tensor(jg.zeros(5), jg.zeros(2)), ValueError, "world_size times")
    expect_error(lambda: dist.all_reduce([1.0]), TypeError, "Expected parameter `tensor` of type jitgrad.Tensor")
    expect_error(lambda: dist.gather(jg.zeros(1), [jg.zeros(1)] * n, dst=(r + 1) % n), ValueError,
                 "must NOT be specified on non-destination ranks")
    dist.barrier()
    checks.passed("mismatch_errors")
    dist.destroy_process_group()
    assert not dist.is_initialized()
    checks.passed("destroyed")


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


def scenario_raise(directory):
    """Rank 1 raises while rank 0 waits in a collective with the default (30 minute) timeout."""
    dist.init_process_group("mpi")
    if dist.get_rank() == 1:
        raise ValueError("rank 1 fails on purpose")
    dist.all_reduce(jg.ones(3))


def scenario_kill(directory):
    """Rank 1 is killed (SIGKILL, no Python cleanup) while rank 0 waits in a collective."""
    dist.init_process_group("mpi")
    if dist.get_rank() == 1:
        time.sleep(0.5)
        os.kill(os.getpid(), signal.SIGKILL)
    dist.all_reduce(jg.ones(3))


def scenario_timeout(directory):
    """Rank 1 never joins the collective (it sleeps): rank 0 gives up after the group's timeout."""
    dist.init_process_group("mpi", timeout=datetime.timedelta(seconds=3))
    if dist.get_rank() == 1:
        time.sleep(120)
    dist.all_reduce(jg.ones(3))


# ====================================================================== the tests
COLLECTIVE_CHECKS = (["all_reduce_" + d.name for d in DTYPES] + ["rooted_and_gathers_" + d.name for d in DTYPES]
                     + ["point_to_point", "objects", "subgroups", "mismatch_errors", "destroyed"])
COLLECTIVE_CHECKS = sorted(COLLECTIVE_CHECKS, key=lambda c: (c.startswith("rooted"), c))


def test_collectives_on_3_ranks(tmp_path):
    rc, out, err, _, passed = launch("collectives", 3, tmp_path)
    assert rc == 0, out + err
    for r in range(3):
        assert sorted(passed[r], key=lambda c: (c.startswith("rooted"), c)) == COLLECTIVE_CHECKS, (r, err)


def test_ddp_on_2_ranks(tmp_path):
    rc, out, err, _, passed = launch("ddp", 2, tmp_path)
    assert rc == 0, out + err
    want = ["ddp_equivalence", "ddp_state_dict", "ddp_overlap", "ddp_no_sync", "ddp_unused_error",
            "ddp_find_unused_parameters", "ddp_buffers", "ddp_errors", "sampler_from_group"]
    assert passed == [want, want], err


@pytest.mark.parametrize("scenario,message", [
    ("raise", "ValueError: rank 1 fails on purpose"),
    ("kill", "Killed (signal 9)"),  # mpiexec's report of the dead rank
    ("timeout", "all_reduce did not complete within the timeout of 3.0 s"),
])
def test_failing_rank_ends_the_job(tmp_path, scenario, message):
    rc, out, err, seconds, _ = launch(scenario, 2, tmp_path, timeout=90)
    assert rc != 0, out + err
    assert message in out + err, out + err
    assert seconds < 60  # the whole job ended: nobody is left waiting for the 30-minute default timeout


def test_ddp_digits_example_on_2_ranks(tmp_path):
    script = os.path.join(os.path.dirname(os.path.dirname(HERE)), "examples", "ddp_digits.py")
    out_file = str(tmp_path / "w.jg")
    rc, out, err, _, _ = launch(["--epochs", "3", "--out", out_file], 2, tmp_path, script=script)
    assert rc == 0, out + err
    assert "2 ranks, global batch 32 (16 per rank)" in out and "weights identical on all 2 ranks: True" in out
    acc = float(out.split("held-out accuracy ")[1].split("%")[0])
    assert acc > 80 and os.path.exists(out_file)  # three epochs learn most digits (20 reach 97.6%, README)


@pytest.mark.slow
def test_ddp_digits_example_reaches_its_target_on_2_ranks(tmp_path):
    script = os.path.join(os.path.dirname(os.path.dirname(HERE)), "examples", "ddp_digits.py")
    rc, out, err, _, _ = launch(["--out", str(tmp_path / "w.jg")], 2, tmp_path, timeout=600, script=script)
    assert rc == 0, out + err
    assert float(out.split("held-out accuracy ")[1].split("%")[0]) >= 95.0


if __name__ == "__main__":
    globals()["scenario_" + sys.argv[1]](sys.argv[2])
