"""Multi-process tests of the collectives and of failing ranks: pytest launches this file under
``mpiexec -n 3`` or ``-n 2`` (DDP's are in test_distributed_ddp.py; both use launch() of tests/helpers.py).

Each launch runs a whole scenario (many checks, since every launch imports jitgrad in each
rank); a failed check raises, which aborts the job (jitgrad.distributed's excepthook) with the
rank's traceback on stderr. Each rank writes the names of the checks it passed to its own file,
which the test compares with the expected list. Every launch has a timeout, and its whole
process group is killed past it: the tests never hang.
"""
import datetime
import functools
import os
import signal
import sys
import time
import warnings

import numpy as np
import pytest

import jitgrad as jg
import jitgrad.distributed as dist

import helpers
from helpers import Checks, expect_error

HERE = os.path.abspath(__file__)
DTYPES = [jg.float32, jg.float64, jg.int32, jg.int64, jg.bool]
launch = functools.partial(helpers.launch, script=HERE)  # this file's scenarios (DDP's pass their own script)


# ====================================================================== what each rank runs
class _Tee:
    def __init__(self, *streams):
        self.streams = streams

    def write(self, text):
        for s in self.streams:
            s.write(text)

    def flush(self):
        for s in self.streams:
            s.flush()


def stderr_also_to_file(directory):
    """Copy this rank's stderr to its own file: when a rank aborts the job, mpiexec may end the
    ranks before it has forwarded what they printed last."""
    log = open(os.path.join(directory, "rank%d.err" % dist.get_rank()), "w", buffering=1)
    sys.stderr = _Tee(sys.stderr, log)


def rank_data(r, shape, dtype, seed=0):
    """Rank ``r``'s values (every rank can compute every other rank's, for the NumPy reference)."""
    rng = np.random.default_rng(seed * 100 + r)
    if dtype is jg.bool:
        return rng.random(shape) < 0.5
    if dtype.is_floating_point:
        return rng.standard_normal(shape).astype(dtype.np)
    return rng.integers(-3, 4, shape).astype(dtype.np)


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
    if r == 0:
        dist.send(jg.zeros(2), dst=1, tag=8)
    elif r == 1:
        expect_error(lambda: dist.recv(jg.zeros(3), src=0, tag=8), RuntimeError,
                     "recv: expected 12 bytes (3 elements of jitgrad.float32) but rank 0 sent 8 bytes")
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


def scenario_raise(directory):
    """Rank 1 raises while rank 0 waits in a collective with the default (30 minute) timeout."""
    dist.init_process_group("mpi")
    stderr_also_to_file(directory)
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
    stderr_also_to_file(directory)
    if dist.get_rank() == 1:
        time.sleep(120)
    dist.all_reduce(jg.ones(3))


def scenario_exit(directory):
    """Rank 1 exits (sys.exit: no excepthook) while rank 0 waits in a collective: rank 0's timeout ends the job."""
    dist.init_process_group("mpi", timeout=datetime.timedelta(seconds=3))
    stderr_also_to_file(directory)
    if dist.get_rank() == 1:
        sys.exit(3)
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


@pytest.mark.parametrize("scenario,message", [
    ("raise", "ValueError: rank 1 fails on purpose"),
    ("kill", "Killed (signal 9)"),  # mpiexec's report of the dead rank
    ("timeout", "all_reduce did not complete within the timeout of 3.0 s"),
    # rank 0's timeout, or mpiexec's report if rank 1's MPI_Finalize returns and it exits first
    ("exit", "all_reduce did not complete within the timeout of 3.0 s|EXIT CODE: 3"),
])
def test_failing_rank_ends_the_job(tmp_path, scenario, message):
    rc, out, err, seconds, _ = launch(scenario, 2, tmp_path, timeout=90)
    assert rc != 0, out + err
    assert any(m in out + err for m in message.split("|")), out + err
    assert seconds < 60  # the whole job ended: nobody is left waiting for the 30-minute default timeout


if __name__ == "__main__":
    globals()["scenario_" + sys.argv[1]](sys.argv[2])
