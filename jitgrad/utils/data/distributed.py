"""DistributedSampler: each rank's share of a dataset's indices, with PyTorch's padding and partition rules."""
import math

import numpy as np

from ... import distributed as dist
from .sampler import Sampler


class DistributedSampler(Sampler):
    """The indices of ``dataset`` that rank ``rank`` of ``num_replicas`` processes reads.

    Every rank gets ``ceil(len(dataset) / num_replicas)`` indices: the (shuffled) list is padded by
    repeating its first indices until it divides evenly, or, with ``drop_last``, cut to the largest
    multiple of ``num_replicas``; rank r takes every ``num_replicas``-th index from position r. The
    shuffle is a permutation seeded by ``seed + epoch`` (the same on every rank): call
    ``set_epoch(epoch)`` at the start of each epoch to draw a new one. ``num_replicas`` and ``rank``
    default to the default process group's.
    """

    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True, seed=0, drop_last=False):
        if num_replicas is None:
            if not dist.is_available():
                raise RuntimeError("Requires distributed package to be available")
            num_replicas = dist.get_world_size()
        if rank is None:
            if not dist.is_available():
                raise RuntimeError("Requires distributed package to be available")
            rank = dist.get_rank()
        if rank >= num_replicas or rank < 0:
            raise ValueError("Invalid rank %d, rank should be in the interval [0, %d]" % (rank, num_replicas - 1))
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self.drop_last = drop_last
        n = len(dataset)
        if drop_last and n % num_replicas != 0:
            self.num_samples = math.ceil((n - num_replicas) / num_replicas)
        else:
            self.num_samples = math.ceil(n / num_replicas)
        self.total_size = self.num_samples * num_replicas
        self.shuffle = shuffle
        self.seed = seed

    def __iter__(self):
        n = len(self.dataset)
        if self.shuffle:
            indices = np.random.default_rng(self.seed + self.epoch).permutation(n).tolist()
        else:
            indices = list(range(n))
        if not self.drop_last:
            padding = self.total_size - len(indices)
            if padding <= len(indices):
                indices += indices[:padding]
            else:
                indices += (indices * math.ceil(padding / len(indices)))[:padding]
        else:
            indices = indices[:self.total_size]
        indices = indices[self.rank:self.total_size:self.num_replicas]
        return iter(indices)

    def __len__(self):
        return self.num_samples

    def set_epoch(self, epoch):
        """The epoch whose shuffle the next iteration draws (the same on every rank)."""
        self.epoch = epoch
