"""Samplers: iterables of dataset indices (or of lists of indices, for batch samplers)."""
import itertools

from ..._dtype import float64, int64
from ..._factories import as_tensor, randint, randperm
from ..._generator import Generator, numpy_rng
from ...ops.random import multinomial


class Sampler:
    """Base class of every sampler: an iterable over indices of a dataset.

    Subclasses give ``__iter__`` and, where the number of indices is known, ``__len__``. The
    ``data_source`` argument is accepted for compatibility and not used, as in PyTorch.
    """

    def __init__(self, data_source=None):
        pass

    def __iter__(self):
        raise NotImplementedError


def _check_num_samples(num_samples):
    if not isinstance(num_samples, int) or isinstance(num_samples, bool) or num_samples <= 0:
        raise ValueError("num_samples should be a positive integer value, but got num_samples=%s" % (num_samples,))


def _check_replacement(replacement, exc=TypeError):
    if not isinstance(replacement, bool):
        raise exc("replacement should be a boolean value, but got replacement=%s" % (replacement,))


class SequentialSampler(Sampler):
    """0, 1, ..., len(data_source) - 1."""

    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


class RandomSampler(Sampler):
    """Indices in a random order: a permutation (repeated where ``num_samples`` exceeds the dataset), or with
    ``replacement`` independent draws. Without a ``generator`` each pass seeds its own from the default one."""

    def __init__(self, data_source, replacement=False, num_samples=None, generator=None):
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator
        _check_replacement(replacement)
        _check_num_samples(self.num_samples)

    @property
    def num_samples(self):
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        n = len(self.data_source)
        generator = self.generator
        if generator is None:
            generator = Generator().manual_seed(int(numpy_rng(None).integers(2 ** 63)))
        if self.replacement:
            for _ in range(self.num_samples // 32):
                yield from randint(high=n, size=(32,), dtype=int64, generator=generator).tolist()
            yield from randint(high=n, size=(self.num_samples % 32,), dtype=int64, generator=generator).tolist()
        else:
            for _ in range(self.num_samples // n):
                yield from randperm(n, generator=generator).tolist()
            yield from randperm(n, generator=generator).tolist()[:self.num_samples % n]

    def __len__(self):
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given indices, in a random order."""

    def __init__(self, indices, generator=None):
        self.indices = indices
        self.generator = generator

    def __iter__(self):
        for i in randperm(len(self.indices), generator=self.generator).tolist():
            yield self.indices[i]

    def __len__(self):
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """``num_samples`` indices drawn with probabilities proportional to ``weights`` (with replacement unless
    told otherwise)."""

    def __init__(self, weights, num_samples, replacement=True, generator=None):
        _check_num_samples(num_samples)
        _check_replacement(replacement, ValueError)
        weights_tensor = as_tensor(weights, dtype=float64)
        if weights_tensor.ndim != 1:
            raise ValueError("weights should be a 1d sequence but given weights have shape %s"
                             % (tuple(weights_tensor.shape),))
        self.weights = weights_tensor
        self.num_samples = num_samples
        self.replacement = replacement
        self.generator = generator

    def __iter__(self):
        rand_tensor = multinomial(self.weights, self.num_samples, self.replacement, generator=self.generator)
        yield from iter(rand_tensor.tolist())

    def __len__(self):
        return self.num_samples


class BatchSampler(Sampler):
    """Lists of ``batch_size`` indices from ``sampler``; the last one shorter, or dropped with ``drop_last``."""

    def __init__(self, sampler, batch_size, drop_last):
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
            raise ValueError("batch_size should be a positive integer value, but got batch_size=%s" % (batch_size,))
        if not isinstance(drop_last, bool):
            raise ValueError("drop_last should be a boolean value, but got drop_last=%s" % (drop_last,))
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __iter__(self):
        it = iter(self.sampler)
        size = self.batch_size
        batch = list(itertools.islice(it, size))
        while len(batch) == size:
            yield batch
            batch = list(itertools.islice(it, size))
        if batch and not self.drop_last:
            yield batch

    def __len__(self):
        if self.drop_last:
            return len(self.sampler) // self.batch_size
        return (len(self.sampler) + self.batch_size - 1) // self.batch_size
