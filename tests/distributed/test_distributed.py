"""jitgrad.distributed without MPI processes: errors before init_process_group, DistributedSampler's
partitions (beside PyTorch's when it is installed), DDP's bucket assignment. The multi-process
tests are in test_distributed_mpi.py."""
import itertools
import math

import numpy as np
import pytest

import jitgrad as jg
import jitgrad.distributed as dist
from jitgrad.nn.parallel._reducer import FIRST_BUCKET_BYTES, assign_buckets
from jitgrad.utils.data import DistributedSampler
from jitgrad.utils.data.sampler import Sampler

NOT_INITIALIZED = "Default process group has not been initialized, please make sure to call init_process_group."


@pytest.mark.parametrize("call", [
    lambda: dist.all_reduce(jg.ones(2)), lambda: dist.broadcast(jg.ones(2), 0), lambda: dist.barrier(),
    lambda: dist.get_rank(), lambda: dist.get_world_size(), lambda: dist.new_group([0]),
    lambda: dist.send(jg.ones(1), 1), lambda: dist.all_gather_into_tensor(jg.ones(2), jg.ones(1)),
    lambda: jg.nn.parallel.DistributedDataParallel(jg.nn.Linear(2, 2)),
    lambda: DistributedSampler(range(10)),
])
def test_collective_before_init_process_group(call):
    assert not dist.is_initialized()
    with pytest.raises(ValueError) as e:
        call()
    assert str(e.value) == NOT_INITIALIZED


def test_public_names():
    assert dist.is_available()
    for name in ["init_process_group", "is_available", "is_initialized", "get_rank", "get_world_size", "get_backend",
                 "barrier", "destroy_process_group", "all_reduce", "broadcast", "reduce", "all_gather",
                 "all_gather_into_tensor", "gather", "scatter", "reduce_scatter_tensor", "send", "recv", "new_group",
                 "all_gather_object", "broadcast_object_list", "gather_object"]:
        assert callable(getattr(dist, name)), name
    assert [op.name for op in dist.ReduceOp.RedOpType][:5] == ["SUM", "AVG", "PRODUCT", "MIN", "MAX"]
    assert dist.ReduceOp.SUM is dist.ReduceOp.RedOpType.SUM
    assert dist.group.WORLD is None
    assert dist.Backend("MPI") == "mpi"
    with pytest.raises(ValueError, match="backend must be 'mpi'"):
        dist.Backend("nccl")
    assert jg.nn.parallel.DistributedDataParallel.__mro__[1] is jg.nn.Module


def test_find_mpiexec():
    import os
    path = dist.find_mpiexec()
    assert os.path.basename(path) == "mpiexec" and os.access(path, os.X_OK)


# ------------------------------------------------------------------ DistributedSampler
def reference_partition(n, replicas, rank, drop_last, order=None):
    """PyTorch's documented rule, written out: pad by repeating from the start (or cut), then stride."""
    order = list(range(n)) if order is None else list(order)
    if drop_last and n % replicas:
        per = math.ceil((n - replicas) / replicas)
    else:
        per = math.ceil(n / replicas)
    total = per * replicas
    if drop_last:
        order = order[:total]
    else:
        while len(order) < total:
            order += order[:total - len(order)]
    return order[rank:total:replicas]


CASES = list(itertools.product([0, 1, 2, 5, 10, 11, 13], [1, 2, 3, 4], [False, True]))


@pytest.mark.parametrize("n,replicas,drop_last", CASES)
def test_distributed_sampler_partition(n, replicas, drop_last):
    data = list(range(n))
    parts = []
    for rank in range(replicas):
        s = DistributedSampler(data, num_replicas=replicas, rank=rank, shuffle=False, drop_last=drop_last)
        got = list(s)
        assert got == reference_partition(n, replicas, rank, drop_last)
        assert len(s) == len(got)
        parts.append(got)
    assert len({len(p) for p in parts}) == 1  # every rank takes the same number of steps
    if drop_last:
        flat = [i for p in parts for i in p]
        assert len(flat) == len(set(flat))  # no index twice
    elif n:
        assert set(i for p in parts for i in p) == set(range(n))  # every index read


def test_distributed_sampler_shuffle_and_epochs():
    data = list(range(23))
    a = DistributedSampler(data, num_replicas=3, rank=1, seed=7)
    b = DistributedSampler(data, num_replicas=3, rank=1, seed=7)
    assert list(a) == list(b)  # same seed and epoch: the same order on every rank
    first = list(a)
    a.set_epoch(1)
    assert list(a) != first and a.epoch == 1
    # the shuffled order is the unshuffled partition applied to the epoch's permutation
    perm = np.random.default_rng(7 + 1).permutation(23).tolist()
    assert list(a) == reference_partition(23, 3, 1, False, perm)
    ranks = [list(DistributedSampler(data, num_replicas=3, rank=r, seed=7)) for r in range(3)]
    assert set(i for p in ranks for i in p) == set(range(23))
    assert isinstance(a, Sampler)


def test_distributed_sampler_invalid_rank():
    with pytest.raises(ValueError, match=r"Invalid rank 3, rank should be in the interval \[0, 2\]"):
        DistributedSampler(range(4), num_replicas=3, rank=3)
    with pytest.raises(ValueError, match="Invalid rank -1"):
        DistributedSampler(range(4), num_replicas=3, rank=-1)


def test_distributed_sampler_beside_pytorch():
    torch = pytest.importorskip("torch")
    from torch.utils.data.distributed import DistributedSampler as TorchSampler
    for n, replicas, drop_last in CASES:
        if n == 0:
            continue
        for rank in range(replicas):
            ours = DistributedSampler(range(n), num_replicas=replicas, rank=rank, shuffle=False, drop_last=drop_last)
            theirs = TorchSampler(range(n), num_replicas=replicas, rank=rank, shuffle=False, drop_last=drop_last)
            assert list(ours) == list(theirs) and len(ours) == len(theirs), (n, replicas, rank, drop_last)
            # shuffled: PyTorch permutes with its own generator; the padding and partition of the permutation
            # are the same, so ours is PyTorch's unshuffled index list read through our permutation
            ours = DistributedSampler(range(n), num_replicas=replicas, rank=rank, seed=3, drop_last=drop_last)
            ours.set_epoch(2)
            perm = np.random.default_rng(3 + 2).permutation(n)
            assert list(ours) == [int(perm[i]) for i in theirs]
    assert torch.__version__


# ------------------------------------------------------------------ DDP's buckets
def params(*shapes, dtype=np.float32):
    return [jg.from_numpy(np.zeros(s, dtype=dtype)).requires_grad_() for s in shapes]


def test_bucket_assignment_reverse_order_and_caps():
    p = params((10,), (300, 300), (300,), (600, 600), (5,))  # 40 B, 360 kB, 1.2 kB, 1.44 MB, 20 B
    # the first bucket closes once it holds at least 1 MiB; later ones at the cap
    assert assign_buckets(p, 25 * 2 ** 20, FIRST_BUCKET_BYTES) == [[4, 3], [2, 1, 0]]
    assert assign_buckets(p, 300_000, 300_000) == [[4, 3], [2, 1], [0]]
    assert assign_buckets(p, 10 ** 9, 10 ** 9) == [[4, 3, 2, 1, 0]]
    mixed = params((4,), (4,)) + params((4,), dtype=np.float64)
    assert assign_buckets(mixed, 10 ** 9, 10 ** 9) == [[2], [1, 0]]  # one dtype per bucket
