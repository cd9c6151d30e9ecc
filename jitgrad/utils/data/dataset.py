"""Datasets: the map-style and iterable base classes, TensorDataset, StackDataset, Subset, ConcatDataset,
ChainDataset and random_split."""
import bisect
import itertools
import math
import warnings

import numpy as np

from ..._factories import randperm
from ..._generator import default_generator
from ..._grad_mode import STATE
from ..._tensor import Tensor


class Dataset:
    """A map-style dataset: ``__getitem__(index)`` gives a sample; ``__len__`` where the size is known.
    ``a + b`` concatenates two datasets (a ConcatDataset). A subclass may add ``__getitems__(indices)``,
    the samples of a list of indices at once, which the DataLoader then calls for each batch."""

    def __getitem__(self, index):
        raise NotImplementedError("Subclasses of Dataset should implement __getitem__.")

    def __add__(self, other):
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    """A dataset that is an iterable of samples (``__iter__``); ``a + b`` chains two of them. With worker
    processes each worker iterates its own copy: use ``get_worker_info()`` to split the work."""

    def __iter__(self):
        raise NotImplementedError("Subclasses of IterableDataset should implement __iter__.")

    def __add__(self, other):
        return ChainDataset([self, other])


class TensorDataset(Dataset):
    """Samples are the rows of the given tensors (all with the same first dimension), as tuples."""

    def __init__(self, *tensors):
        if not all(tensors[0].size(0) == t.size(0) for t in tensors):
            raise AssertionError("Size mismatch between tensors")
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def _gather(self, indices):
        """``default_collate([self[i] for i in indices])`` in one gather per tensor, for Python int indices into
        CPU tensors that autograd need not see; else None (the DataLoader then collates sample by sample)."""
        if STATE.grad_enabled and any(t._requires_grad for t in self.tensors) or \
                not all(t._data.__class__ is np.ndarray for t in self.tensors) or \
                not all(i.__class__ is int for i in indices):
            return None
        idx = np.asarray(indices, dtype=np.int64)
        for t in self.tensors:
            n = t._data.shape[0]
            if idx.size and (idx.max() >= n or idx.min() < -n):
                bad = int(idx[(idx >= n) | (idx < -n)][0])
                raise IndexError("index %d is out of bounds for dimension 0 with size %d" % (bad, n))
        return [Tensor._wrap(t._data[idx]) for t in self.tensors]

    def __len__(self):
        return self.tensors[0].size(0)


class StackDataset(Dataset):
    """Several datasets of one length side by side: sample i is the tuple (positional datasets) or the dict
    (keyword datasets) of their samples i."""

    def __init__(self, *args, **kwargs):
        if args and kwargs:
            raise ValueError("Supported either ``tuple``- (via ``args``) or``dict``- (via ``kwargs``) like "
                             "input/output, but both types are given.")
        if not args and not kwargs:
            raise ValueError("At least one dataset should be passed")
        parts = args or list(kwargs.values())
        self._length = len(parts[0])
        if any(len(d) != self._length for d in parts):
            raise ValueError("Size mismatch between datasets")
        self.datasets = args or kwargs

    def __getitem__(self, index):
        if isinstance(self.datasets, dict):
            return {k: d[index] for k, d in self.datasets.items()}
        return tuple(d[index] for d in self.datasets)

    def __len__(self):
        return self._length


class Subset(Dataset):
    """The samples of ``dataset`` at ``indices``, in that order."""

    def __init__(self, dataset, indices):
        self.dataset = dataset
        self.indices = indices

    def __getitem__(self, idx):
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def __getitems__(self, indices):
        getitems = getattr(self.dataset, "__getitems__", None)
        if getitems is not None:
            return getitems([self.indices[i] for i in indices])
        return [self.dataset[self.indices[i]] for i in indices]

    def _gather(self, indices):
        gather = getattr(self.dataset, "_gather", None)
        return gather([self.indices[i] for i in indices]) if gather is not None else None

    def __len__(self):
        return len(self.indices)


class ConcatDataset(Dataset):
    """Map-style datasets one after another."""

    @staticmethod
    def cumsum(sequence):
        r, s = [], 0
        for e in sequence:
            s += len(e)
            r.append(s)
        return r

    def __init__(self, datasets):
        self.datasets = list(datasets)
        if not self.datasets:
            raise AssertionError("datasets should not be an empty iterable")
        for d in self.datasets:
            if isinstance(d, IterableDataset):
                raise AssertionError("ConcatDataset does not support IterableDataset")
        self.cumulative_sizes = self.cumsum(self.datasets)

    def __len__(self):
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx):
        if idx < 0:
            if -idx > len(self):
                raise ValueError("absolute value of index should not exceed dataset length")
            idx = len(self) + idx
        k = bisect.bisect_right(self.cumulative_sizes, idx)
        return self.datasets[k][idx if k == 0 else idx - self.cumulative_sizes[k - 1]]


class ChainDataset(IterableDataset):
    """Iterable datasets one after another."""

    def __init__(self, datasets):
        self.datasets = datasets

    def __iter__(self):
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise AssertionError("ChainDataset only supports IterableDataset")
            yield from d

    def __len__(self):
        total = 0
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise AssertionError("ChainDataset only supports IterableDataset")
            total += len(d)
        return total


def random_split(dataset, lengths, generator=default_generator):
    """Split ``dataset`` into non-overlapping Subsets of the given lengths, or fractions of its length (the
    remainder of the rounding goes one by one to the first subsets), in an order drawn from ``generator``."""
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        subset_lengths = []
        for i, frac in enumerate(lengths):
            if frac < 0 or frac > 1:
                raise ValueError("Fraction at index %d is not between 0 and 1" % i)
            subset_lengths.append(int(math.floor(len(dataset) * frac)))
        remainder = len(dataset) - sum(subset_lengths)
        for i in range(remainder):
            subset_lengths[i % len(subset_lengths)] += 1
        lengths = subset_lengths
        for i, length in enumerate(lengths):
            if length == 0:
                warnings.warn("Length of split at index %d is 0. This might result in an empty dataset." % i)
    if sum(lengths) != len(dataset):
        raise ValueError("Sum of input lengths does not equal the length of the input dataset!")
    indices = randperm(sum(lengths), generator=generator).tolist()
    return [Subset(dataset, indices[offset - length:offset])
            for offset, length in zip(itertools.accumulate(lengths), lengths)]
