"""Samplers: iterables of dataset indices (or of lists of indices, for batch samplers)."""


class Sampler:
    """Base class of every sampler: an iterable over indices of a dataset.

    Subclasses give ``__iter__`` and, where the number of indices is known, ``__len__``. The
    ``data_source`` argument is accepted for compatibility and not used, as in PyTorch.
    """

    def __init__(self, data_source=None):
        pass

    def __iter__(self):
        raise NotImplementedError
