"""jitgrad.utils.data: datasets, samplers, default_collate/default_convert and the DataLoader, in the main process
and with worker processes (small datasets, two workers, timeouts so that a hang fails instead of waiting)."""
import collections
import os
import time

import numpy as np
import pytest

import jitgrad as jg
from jitgrad.utils.data import (BatchSampler, ChainDataset, ConcatDataset, DataLoader, Dataset, IterableDataset,
                                RandomSampler, Sampler, SequentialSampler, StackDataset, Subset, SubsetRandomSampler,
                                TensorDataset, WeightedRandomSampler, default_collate, default_convert, get_worker_info,
                                random_split)

Point = collections.namedtuple("Point", "x y")


def gen(seed=0):
    return jg.Generator().manual_seed(seed)


def plain(obj):
    """A batch as Python data, tensors as (dtype name, shape, values): comparable across libraries."""
    if hasattr(obj, "numpy") and hasattr(obj, "dtype"):
        return (str(obj.dtype).split(".")[-1], tuple(obj.shape), obj.numpy().tolist())
    if isinstance(obj, dict):
        return {k: plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return (type(obj).__name__ if type(obj) in (list, tuple) else "namedtuple", [plain(o) for o in obj])
    return obj


class Squares(Dataset):
    def __init__(self, n):
        self.n = n

    def __getitem__(self, i):
        if not 0 <= i < self.n:
            raise IndexError(i)
        return i * i

    def __len__(self):
        return self.n


class Counting(IterableDataset):
    """0 .. n-1; with workers, each worker yields its share (i % num_workers == id)."""

    def __init__(self, n, sized=True):
        self.n = n
        self.sized = sized

    def __iter__(self):
        info = get_worker_info()
        k, m = (0, 1) if info is None else (info.id, info.num_workers)
        return iter(range(k, self.n, m))

    def __len__(self):
        if not self.sized:
            raise TypeError("no len")
        return self.n


# ------------------------------------------------------------------ datasets
def test_dataset_base_classes():
    with pytest.raises(NotImplementedError):
        Dataset()[0]
    with pytest.raises(NotImplementedError):
        iter(IterableDataset())
    both = Squares(3) + Squares(2)
    assert isinstance(both, ConcatDataset) and len(both) == 5 and [both[i] for i in range(5)] == [0, 1, 4, 0, 1]
    chain = Counting(2) + Counting(3)
    assert isinstance(chain, ChainDataset) and list(chain) == [0, 1, 0, 1, 2] and len(chain) == 5


def test_tensor_dataset():
    x, y = jg.arange(12.).reshape(4, 3), jg.tensor([1, 0, 1, 1])
    ds = TensorDataset(x, y)
    assert len(ds) == 4
    a, b = ds[2]
    assert a.tolist() == [6.0, 7.0, 8.0] and b.item() == 1 and b.dtype == jg.int64
    with pytest.raises(AssertionError, match="Size mismatch between tensors"):
        TensorDataset(x, jg.zeros(3))
    # the DataLoader's one-gather batches are the collated samples
    assert plain(ds._gather([3, 0, 3])) == plain(default_collate([ds[3], ds[0], ds[3]]))
    with pytest.raises(IndexError, match="index 4 is out of bounds for dimension 0 with size 4"):
        ds._gather([0, 4])
    # indices that are not Python ints (a sampler's tensors) take the sample-by-sample way, as the same batch
    batch = next(iter(DataLoader(ds, batch_size=2, sampler=[jg.tensor(3), jg.tensor(1)])))
    assert ds._gather([jg.tensor(3)]) is None and plain(batch) == plain(ds._gather([3, 1]))


def test_tensor_dataset_of_tensors_requiring_grad_gives_graph_connected_samples():
    w = jg.ones(4, 2, requires_grad=True)
    batch = next(iter(DataLoader(TensorDataset(w), batch_size=4)))
    (batch[0] * jg.arange(8.).reshape(4, 2)).sum().backward()
    assert w.grad.tolist() == jg.arange(8.).reshape(4, 2).tolist()


def test_stack_dataset():
    tup = StackDataset(Squares(3), TensorDataset(jg.arange(3)))
    assert len(tup) == 3 and tup[2][0] == 4 and tup[2][1][0].item() == 2
    d = StackDataset(a=Squares(2), b=["x", "y"])
    assert d[1] == {"a": 1, "b": "y"}
    batch = next(iter(DataLoader(d, batch_size=2)))
    assert batch["a"].tolist() == [0, 1] and batch["b"] == ["x", "y"]
    with pytest.raises(ValueError, match="Size mismatch between datasets"):
        StackDataset(Squares(2), Squares(3))
    with pytest.raises(ValueError, match="At least one dataset should be passed"):
        StackDataset()
    with pytest.raises(ValueError, match="but both types are given"):
        StackDataset(Squares(2), b=Squares(2))


def test_subset_and_concat():
    base = Squares(10)
    sub = Subset(base, [9, 2, 5])
    assert len(sub) == 3 and sub[0] == 81 and [sub[i] for i in range(3)] == [81, 4, 25]
    td = TensorDataset(jg.arange(10))
    assert [t[0].item() for t in Subset(td, [4, 1]).__getitems__([1, 0])] == [1, 4]
    cat = ConcatDataset([Squares(2), Squares(3)])
    assert cat.cumulative_sizes == [2, 5] and cat[-1] == 4 and cat[2] == 0
    with pytest.raises(ValueError, match="absolute value of index should not exceed dataset length"):
        cat[-6]
    with pytest.raises(AssertionError, match="datasets should not be an empty iterable"):
        ConcatDataset([])
    with pytest.raises(AssertionError, match="ConcatDataset does not support IterableDataset"):
        ConcatDataset([Counting(2)])


def test_random_split_lengths_fractions_and_generator():
    parts = random_split(range(10), [3, 7], generator=gen(0))
    assert [len(p) for p in parts] == [3, 7]
    assert sorted(list(parts[0]) + list(parts[1])) == list(range(10))
    again = random_split(range(10), [3, 7], generator=gen(0))
    assert list(again[0]) == list(parts[0])
    assert [len(p) for p in random_split(range(10), [0.33, 0.33, 0.34])] == [4, 3, 3]  # PyTorch's rounding
    assert [len(p) for p in random_split(range(7), [0.5, 0.5])] == [4, 3]
    with pytest.warns(UserWarning, match="Length of split at index 1 is 0"):
        random_split(range(2), [1.0, 0.0])
    with pytest.raises(ValueError, match="Sum of input lengths does not equal the length of the input dataset!"):
        random_split(range(10), [3, 3])
    with pytest.raises(ValueError, match="Fraction at index 0 is not between 0 and 1"):
        random_split(range(10), [1.5, -0.5])


# ------------------------------------------------------------------ samplers
def test_sequential_and_random_sampler():
    assert list(SequentialSampler(range(4))) == [0, 1, 2, 3] and len(SequentialSampler(range(4))) == 4
    order = list(RandomSampler(range(50), generator=gen(1)))
    assert sorted(order) == list(range(50)) and order != list(range(50))
    assert list(RandomSampler(range(50), generator=gen(1))) == order
    longer = list(RandomSampler(range(5), num_samples=12, generator=gen(2)))
    assert len(longer) == 12 and sorted(longer[:5]) == list(range(5)) and sorted(longer[5:10]) == list(range(5))
    drawn = list(RandomSampler(range(3), replacement=True, num_samples=300, generator=gen(3)))
    assert len(drawn) == 300 and set(drawn) == {0, 1, 2}
    assert len(RandomSampler(range(3), replacement=True, num_samples=40)) == 40
    jg.manual_seed(5)  # without a generator, the default generator decides
    first = list(RandomSampler(range(20)))
    jg.manual_seed(5)
    assert list(RandomSampler(range(20))) == first


def test_subset_and_weighted_samplers():
    s = SubsetRandomSampler([10, 20, 30], generator=gen(0))
    assert sorted(s) == [10, 20, 30] and len(s) == 3
    w = WeightedRandomSampler([0.0, 1.0, 3.0], 4000, generator=gen(0))
    counts = np.bincount(list(w), minlength=3)
    assert len(w) == 4000 and counts[0] == 0 and abs(counts[2] / 4000 - 0.75) < 0.03
    distinct = list(WeightedRandomSampler([1.0, 1.0, 1.0, 5.0], 4, replacement=False, generator=gen(1)))
    assert sorted(distinct) == [0, 1, 2, 3]
    assert w.weights.dtype == jg.float64


def test_batch_sampler():
    assert list(BatchSampler(range(7), 3, False)) == [[0, 1, 2], [3, 4, 5], [6]]
    assert list(BatchSampler(range(7), 3, True)) == [[0, 1, 2], [3, 4, 5]]
    assert len(BatchSampler(range(7), 3, False)) == 3 and len(BatchSampler(range(7), 3, True)) == 2
    assert isinstance(BatchSampler(range(1), 1, False), Sampler)


@pytest.mark.parametrize("make,exc,msg", [
    (lambda: RandomSampler(range(3), num_samples=0), ValueError, "num_samples should be a positive integer value, "
                                                                 "but got num_samples=0"),
    (lambda: RandomSampler(range(3), replacement=0), TypeError, "replacement should be a boolean value, but got "
                                                                "replacement=0"),
    (lambda: WeightedRandomSampler([[1.0]], 2), ValueError, "weights should be a 1d sequence but given weights have "
                                                            "shape \\(1, 1\\)"),
    (lambda: WeightedRandomSampler([1.0], 0), ValueError, "num_samples should be a positive integer value"),
    (lambda: WeightedRandomSampler([1.0], 2, replacement=1), ValueError, "replacement should be a boolean value"),
    (lambda: BatchSampler(range(3), 0, False), ValueError, "batch_size should be a positive integer value, but got "
                                                           "batch_size=0"),
    (lambda: BatchSampler(range(3), 2, 1), ValueError, "drop_last should be a boolean value, but got drop_last=1"),
])
def test_sampler_errors(make, exc, msg):
    with pytest.raises(exc, match=msg):
        make()


# ------------------------------------------------------------------ default_collate / default_convert
COLLATE_CASES = {
    "ints": [1, 2, 3],
    "floats": [1.0, 2.5],
    "bools": [True, False],
    "strings": ["a", "b"],
    "arrays": [np.zeros((2, 2), np.float32), np.ones((2, 2), np.float32)],
    "int32 arrays": [np.arange(3, dtype=np.int32), np.arange(3, dtype=np.int32)],
    "numpy scalars": [np.float32(1.5), np.float32(2.0)],
    "numpy ints": [np.int64(4), np.int64(5)],
    "tuples": [(1, "a", 2.0), (2, "b", 3.0)],
    "lists": [[1, 2], [3, 4]],
    "namedtuples": [Point(1, 2.0), Point(3, 4.0)],
    "dicts": [{"a": 1, "b": [1.0, 2.0]}, {"a": 2, "b": [3.0, 4.0]}],
    "nested": [{"x": (np.zeros(2), {"y": 1})}, {"x": (np.ones(2), {"y": 2})}],
}


def _tensor_cases(lib):
    return {"tensors": [lib.tensor([1.0, 2.0]), lib.tensor([3.0, 4.0])],
            "scalar tensors": [lib.tensor(1), lib.tensor(2)],
            "tensor tuples": [(lib.tensor([1, 2]), 0), (lib.tensor([3, 4]), 1)]}


def test_default_collate_cases():
    out = default_collate(COLLATE_CASES["ints"])
    assert out.dtype == jg.int64 and out.tolist() == [1, 2, 3]
    assert default_collate(COLLATE_CASES["floats"]).dtype == jg.float64
    assert default_collate(COLLATE_CASES["bools"]).dtype == jg.bool
    assert default_collate(COLLATE_CASES["strings"]) == ["a", "b"]
    arr = default_collate(COLLATE_CASES["arrays"])
    assert arr.shape == (2, 2, 2) and arr.dtype == jg.float32
    assert default_collate(COLLATE_CASES["int32 arrays"]).dtype == jg.int32
    t = default_collate(COLLATE_CASES["tuples"])
    assert isinstance(t, list) and t[0].tolist() == [1, 2] and t[1] == ("a", "b") and t[2].dtype == jg.float64
    p = default_collate(COLLATE_CASES["namedtuples"])
    assert isinstance(p, Point) and p.x.tolist() == [1, 3] and p.y.dtype == jg.float64
    d = default_collate(COLLATE_CASES["dicts"])
    assert d["a"].tolist() == [1, 2] and [v.tolist() for v in d["b"]] == [[1.0, 3.0], [2.0, 4.0]]
    n = default_collate(COLLATE_CASES["nested"])
    assert n["x"][0].shape == (2, 2) and n["x"][1]["y"].tolist() == [1, 2]
    s = default_collate(_tensor_cases(jg)["tensors"])
    assert s.tolist() == [[1.0, 2.0], [3.0, 4.0]]


def test_default_collate_matches_pytorch():
    torch = pytest.importorskip("torch")
    from torch.utils.data import default_collate as torch_collate
    from torch.utils.data import default_convert as torch_convert
    cases = dict(COLLATE_CASES)
    for name in _tensor_cases(jg):
        assert plain(default_collate(_tensor_cases(jg)[name])) == plain(torch_collate(_tensor_cases(torch)[name])), name
    for name, batch in cases.items():
        assert plain(default_collate(batch)) == plain(torch_collate(batch)), name
        assert plain(default_convert(batch)) == plain(torch_convert(batch)), name
    for sample in [np.zeros(2), (np.zeros(1), "a", 3), np.float32(2), Point(np.ones(1), 2), {"k": np.ones(2)}, "s"]:
        assert plain(default_convert(sample)) == plain(torch_convert(sample))


def test_default_collate_errors():
    with pytest.raises(TypeError, match="default_collate: batch must contain tensors, numpy arrays, numbers, dicts or "
                                        "lists; found <U1"):
        default_collate([np.array(["a"]), np.array(["b"])])
    with pytest.raises(TypeError, match="found <class 'object'>"):
        default_collate([object(), object()])
    with pytest.raises(RuntimeError, match="each element in list of batch should be of equal size"):
        default_collate([[1, 2], [3]])


def test_default_collate_records_stack_for_tensors_requiring_grad():
    a = jg.ones(2, requires_grad=True)
    out = default_collate([a, a * 2])
    assert out.grad_fn is not None
    out.sum().backward()
    assert a.grad.tolist() == [3.0, 3.0]


# ------------------------------------------------------------------ DataLoader in the main process
def test_dataloader_batches_len_and_drop_last():
    ds = TensorDataset(jg.arange(10.).reshape(10, 1), jg.arange(10))
    dl = DataLoader(ds, batch_size=4)
    batches = list(dl)
    assert len(dl) == 3 and [len(b[1]) for b in batches] == [4, 4, 2]
    assert isinstance(batches[0], list) and batches[0][0].shape == (4, 1) and batches[2][1].tolist() == [8, 9]
    dl = DataLoader(ds, batch_size=4, drop_last=True)
    assert len(dl) == 2 and [len(b[1]) for b in dl] == [4, 4]
    assert [b.tolist() for b in DataLoader(Squares(5), batch_size=2)] == [[0, 1], [4, 9], [16]]
    assert len(DataLoader(Squares(5))) == 5


def test_dataloader_shuffle_is_deterministic_under_a_generator():
    ds = Squares(20)
    a = [b.tolist() for b in DataLoader(ds, batch_size=5, shuffle=True, generator=gen(3))]
    b = [b.tolist() for b in DataLoader(ds, batch_size=5, shuffle=True, generator=gen(3))]
    squares = [i * i for i in range(20)]
    assert a == b and sorted(sum(a, [])) == squares and sum(a, []) != squares
    dl = DataLoader(ds, batch_size=5, shuffle=True, generator=gen(3))
    assert [x.tolist() for x in dl] != [x.tolist() for x in dl]  # each epoch a new order
    jg.manual_seed(8)
    c = [x.tolist() for x in DataLoader(ds, batch_size=5, shuffle=True)]
    jg.manual_seed(8)
    assert [x.tolist() for x in DataLoader(ds, batch_size=5, shuffle=True)] == c


def test_dataloader_sampler_batch_sampler_and_collate_fn():
    ds = Squares(6)
    assert [b.tolist() for b in DataLoader(ds, batch_size=2, sampler=[5, 4, 3])] == [[25, 16], [9]]
    assert [b.tolist() for b in DataLoader(ds, batch_sampler=[[0, 5], [1]])] == [[0, 25], [1]]
    assert list(DataLoader(ds, batch_size=3, collate_fn=sum)) == [5, 50]
    # batch_size=None: samples one at a time, NumPy arrays converted
    out = list(DataLoader([np.zeros(2), np.ones(2)], batch_size=None))
    assert isinstance(out[0], jg.Tensor) and out[1].dtype == jg.float64
    dl = DataLoader(ds, pin_memory=True, batch_size=6)  # accepted; nothing to pin on the CPU
    assert next(iter(dl)).tolist() == [0, 1, 4, 9, 16, 25]


@pytest.mark.parametrize("kwargs,msg", [
    (dict(sampler=[0], shuffle=True), "sampler option is mutually exclusive with shuffle"),
    (dict(batch_sampler=[[0]], batch_size=2), "batch_sampler option is mutually exclusive with batch_size, shuffle, "
                                              "sampler, and drop_last"),
    (dict(batch_sampler=[[0]], shuffle=True), "batch_sampler option is mutually exclusive"),
    (dict(batch_sampler=[[0]], sampler=[0]), "batch_sampler option is mutually exclusive"),
    (dict(batch_sampler=[[0]], drop_last=True), "batch_sampler option is mutually exclusive"),
    (dict(batch_size=None, drop_last=True), "batch_size=None option disables auto-batching and is mutually exclusive "
                                            "with drop_last"),
    (dict(num_workers=-1), "num_workers option should be non-negative; use num_workers=0 to disable multiprocessing."),
    (dict(timeout=-1), "timeout option should be non-negative"),
    (dict(prefetch_factor=2), "prefetch_factor option could only be specified in multiprocessing"),
    (dict(num_workers=1, prefetch_factor=-1), "prefetch_factor option should be non-negative"),
    (dict(persistent_workers=True), "persistent_workers option needs num_workers > 0"),
    (dict(num_workers=1, multiprocessing_context="nope"), "multiprocessing_context option should specify a valid start "
                                                          "method"),
])
def test_dataloader_argument_errors(kwargs, msg):
    with pytest.raises(ValueError, match=msg):
        DataLoader(Squares(3), **kwargs)


def test_dataloader_argument_errors_match_pytorch():
    torch_data = pytest.importorskip("torch.utils.data")
    for kwargs in [dict(sampler=[0], shuffle=True), dict(batch_sampler=[[0]], batch_size=2),
                   dict(batch_size=None, drop_last=True), dict(persistent_workers=True), dict(prefetch_factor=2)]:
        with pytest.raises(ValueError) as ours:
            DataLoader(Squares(3), **kwargs)
        with pytest.raises(ValueError) as theirs:
            torch_data.DataLoader(Squares(3), **kwargs)
        assert str(ours.value) == str(theirs.value)


def test_dataloader_attributes_are_fixed_after_init():
    dl = DataLoader(Squares(3))
    with pytest.raises(ValueError, match="batch_size attribute should not be set after DataLoader is initialized"):
        dl.batch_size = 2
    dl.num_workers = 0  # others may change


def test_dataloader_iterable_dataset():
    assert [b.tolist() for b in DataLoader(Counting(7), batch_size=3)] == [[0, 1, 2], [3, 4, 5], [6]]
    assert [b.tolist() for b in DataLoader(Counting(7), batch_size=3, drop_last=True)] == [[0, 1, 2], [3, 4, 5]]
    assert len(DataLoader(Counting(7), batch_size=3)) == 3 and len(DataLoader(Counting(7), batch_size=3,
                                                                              drop_last=True)) == 2
    assert list(DataLoader(Counting(3), batch_size=None)) == [0, 1, 2]  # default_convert keeps numbers
    with pytest.raises(TypeError):
        len(DataLoader(Counting(3, sized=False)))
    for kwargs, name in [(dict(shuffle=True), "shuffle"), (dict(sampler=[0]), "sampler"),
                         (dict(batch_sampler=[[0]]), "batch_sampler")]:
        with pytest.raises(ValueError, match="DataLoader with IterableDataset: expected unspecified %s option" % name):
            DataLoader(Counting(3), **kwargs)


# ------------------------------------------------------------------ worker processes
class Indexed(Dataset):
    """Sample i: (i, worker id, worker seed, a draw from jitgrad's default generator in the worker)."""

    def __init__(self, n, fail_at=None, exc=ValueError, sleep=0.0):
        self.n, self.fail_at, self.exc, self.sleep = n, fail_at, exc, sleep

    def __getitem__(self, i):
        if i == self.fail_at:
            raise self.exc("sample %d is broken" % i)
        time.sleep(self.sleep)
        info = get_worker_info()
        return i, info.id, info.seed, jg.rand(1).item(), os.getpid(), info.num_workers, info.dataset is self

    def __len__(self):
        return self.n


def test_workers_give_the_batches_in_order():
    ds = TensorDataset(jg.arange(40.).reshape(20, 2), jg.arange(20))
    single = [plain(b) for b in DataLoader(ds, batch_size=3, shuffle=True, generator=gen(4))]
    multi = [plain(b) for b in DataLoader(ds, batch_size=3, shuffle=True, generator=gen(4), num_workers=2, timeout=20)]
    assert multi == single and len(multi) == 7
    unordered = [b[1].tolist() for b in DataLoader(ds, batch_size=3, num_workers=2, timeout=20, in_order=False)]
    assert sorted(sum(unordered, [])) == list(range(20))


class Counted(Squares):
    """Counts its fetches in shared memory (workers are forked: they share the counter)."""

    def __init__(self, n, counter):
        super().__init__(n)
        self.counter = counter

    def __getitem__(self, i):
        with self.counter.get_lock():
            self.counter.value += 1
        return super().__getitem__(i)


def test_prefetch_factor_bounds_the_batches_ahead():
    import multiprocessing
    ctx = multiprocessing.get_context("fork")
    counter = ctx.Value("i", 0)
    it = iter(DataLoader(Counted(40, counter), batch_size=2, num_workers=1, prefetch_factor=3, timeout=20,
                         multiprocessing_context=ctx))
    assert next(it).tolist() == [0, 1]
    time.sleep(0.5)
    assert counter.value == 2 * 4  # the batch handed out and the 3 queued behind it, no more
    assert [b.tolist() for b in it][-1] == [38 * 38, 39 * 39]


def test_worker_info_seeds_and_init_fn():
    dl = DataLoader(Indexed(8), batch_size=None, num_workers=2, timeout=20, generator=gen(1),
                    worker_init_fn=_record_init, prefetch_factor=1)
    rows = list(dl)
    assert [r[0] for r in rows] == list(range(8))
    by_worker = {r[1]: r for r in rows}
    assert set(by_worker) == {0, 1} and {r[5] for r in rows} == {2} and all(r[6] for r in rows)
    assert by_worker[1][2] == by_worker[0][2] + 1  # seed = base seed + worker id
    assert by_worker[0][4] != by_worker[1][4] != os.getpid()
    draws = [r[3] for r in rows]
    assert len(set(draws)) == len(draws)  # the workers' default generators are seeded apart
    again = list(DataLoader(Indexed(8), batch_size=None, num_workers=2, timeout=20, generator=gen(1),
                            worker_init_fn=_record_init, prefetch_factor=1))
    assert [r[2] for r in again] == [r[2] for r in rows] and [r[3] for r in again] == draws
    assert get_worker_info() is None


def _record_init(worker_id):
    info = get_worker_info()
    assert info.id == worker_id
    with pytest.raises(RuntimeError, match="Cannot assign attributes to WorkerInfo objects"):
        info.id = 5
    assert "WorkerInfo(id=%d, num_workers=2" % worker_id in repr(info)


def test_worker_init_fn_failure_is_reraised():
    with pytest.raises(RuntimeError, match="Caught RuntimeError in DataLoader worker process [01]"):
        list(DataLoader(Squares(4), num_workers=2, timeout=20, worker_init_fn=_broken_init))


def _broken_init(worker_id):
    raise RuntimeError("init failed")


def test_worker_exception_names_the_worker():
    dl = DataLoader(Indexed(6, fail_at=3), batch_size=None, num_workers=2, timeout=20)
    with pytest.raises(ValueError) as err:
        list(dl)
    text = str(err.value)
    assert text.startswith("Caught ValueError in DataLoader worker process 1.\nOriginal Traceback (most recent call "
                           "last):") and "sample 3 is broken" in text
    with pytest.raises(KeyError, match="Caught KeyError in DataLoader worker process"):
        list(DataLoader(Indexed(2, fail_at=0, exc=KeyError), batch_size=None, num_workers=1, timeout=20))


class _Unconstructible(Exception):
    def __init__(self, a, b):
        super().__init__(a, b)


def test_worker_exception_that_cannot_take_a_message_becomes_runtime_error():
    class D(Squares):
        def __getitem__(self, i):
            raise _Unconstructible(1, 2)
    with pytest.raises(RuntimeError, match="Caught _Unconstructible in DataLoader worker process 0"):
        list(DataLoader(D(2), num_workers=1, timeout=20))


def test_worker_timeout():
    with pytest.raises(RuntimeError, match="DataLoader timed out after 0.2 seconds"):
        list(DataLoader(Indexed(2, sleep=1.0), batch_size=None, num_workers=1, timeout=0.2))


def test_worker_that_dies_is_reported():
    class Dies(Squares):
        def __getitem__(self, i):
            os._exit(3)
    with pytest.raises(RuntimeError, match=r"DataLoader worker \(pid\(s\) \d+\) exited unexpectedly"):
        list(DataLoader(Dies(2), num_workers=1))


def test_iterable_dataset_with_workers():
    out = sorted(sum([b.tolist() for b in DataLoader(Counting(11), batch_size=2, num_workers=2, timeout=20)], []))
    assert out == list(range(11))
    out = [b.tolist() for b in DataLoader(Counting(11), batch_size=2, num_workers=2, timeout=20, drop_last=True)]
    assert all(len(b) == 2 for b in out) and len(out) == 5  # each worker drops its own short last batch


def test_persistent_workers_serve_several_epochs():
    dl = DataLoader(Indexed(6), batch_size=2, num_workers=2, timeout=20, persistent_workers=True)
    first = list(dl)
    second = list(dl)
    assert [b[0].tolist() for b in first] == [b[0].tolist() for b in second] == [[0, 1], [2, 3], [4, 5]]
    assert {p for b in first for p in b[4].tolist()} == {p for b in second for p in b[4].tolist()}  # same processes
    it = iter(dl)
    next(it)  # an epoch left early: the next one starts afresh
    assert [b[0].tolist() for b in dl] == [[0, 1], [2, 3], [4, 5]]
    assert sorted(sum([b.tolist() for b in DataLoader(Counting(5), batch_size=2, num_workers=2, timeout=20,
                                                         persistent_workers=True)], [])) == list(range(5))
    it = DataLoader(Counting(5), batch_size=2, num_workers=2, timeout=20, persistent_workers=True)
    assert [sorted(sum([b.tolist() for b in it], [])) for _ in range(2)] == [list(range(5))] * 2


@pytest.mark.slow
def test_spawned_workers():
    """Workers started by 'spawn' (a fresh interpreter each, which imports jitgrad: seconds)."""
    dl = DataLoader(TensorDataset(jg.arange(6)), batch_size=4, num_workers=1, timeout=60,
                    multiprocessing_context="spawn")
    assert [b[0].tolist() for b in dl] == [[0, 1, 2, 3], [4, 5]]
