"""BatchedTensor: what code inside ``jitgrad.vmap`` sees, a tensor of the logical (per-sample) shape that holds
the physical tensor of the whole batch, the batch dim at its front.

    BatchedTensor(level=2, value=BatchedTensor(level=1, value=P))    P: [B1, B2, *logical]

Each vmap is a level (1 for the outermost); a tensor batched at several levels nests one wrapper per level,
the highest outside, so the physical array holds the outermost level's dim first. A wrapper's ``_data`` is
its sample 0 (a view of the physical array): the shape, dtype and device every Tensor property and shape
check reads are the logical ones, while code that reads values (``item``, ``numpy``, ``bool``) is refused
as PyTorch refuses it. Ops reach the batching rules through dispatch's hook (``STATE.vmap``, vmap.py).
"""
import threading

import numpy as np

from .._trace_hooks import ValueUnavailable
from .._device import backend
from .._tensor import Tensor


class Level:
    """One open vmap: its number, batch size and randomness mode."""
    __slots__ = ("level", "size", "randomness")

    def __init__(self, level, size, randomness):
        self.level, self.size, self.randomness = level, size, randomness


class _Stack(threading.local):
    """A list of this thread's own (vmaps in different threads do not see each other's levels)."""

    def __init__(self):
        self.items = []

    def append(self, x):
        self.items.append(x)

    def pop(self):
        return self.items.pop()

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]

    def __iter__(self):
        return iter(self.items)


LEVELS = _Stack()  # the open vmaps of this thread, outermost first (LEVELS[k].level == k + 1)

ITEM_ERROR = ("vmap: It looks like you're calling .item() on a Tensor. We don't support vmap over calling .item() on "
              "a Tensor, please try to rewrite what you're doing with other operations. If error is occurring "
              "somewhere inside PyTorch internals, please file a bug report.")
CONTROL_FLOW_ERROR = ("vmap: It looks like you're attempting to use a Tensor in some data-dependent control flow. We "
                      "don't support that yet, please shout over at https://github.com/pytorch/functorch/issues/257 .")
DATA_ERROR = ("vmap: It looks like you're attempting to read the values of a Tensor (%s) inside vmap. "
              "We don't support that, please rewrite it with tensor operations.")


def _refuse(what, message=None):
    def method(self, *args, **kwargs):
        raise ValueUnavailable(message or DATA_ERROR % what)
    method.__name__ = what
    return method


class BatchedTensor(Tensor):
    """A tensor batched at vmap level ``_level``: ``_value``'s dim 0 is that level's batch dim."""
    __slots__ = ()

    item = _refuse("item", ITEM_ERROR)
    __bool__ = _refuse("__bool__", CONTROL_FLOW_ERROR)
    __float__ = __int__ = __index__ = _refuse("__float__", ITEM_ERROR)
    tolist = _refuse("tolist")
    numpy = _refuse("numpy")
    __array__ = _refuse("__array__")
    _host = _refuse("_host")
    data_ptr = _refuse("data_ptr")

    def __repr__(self, *, tensor_contents=None):
        return "BatchedTensor(lvl=%d, bdim=0, value=\n%r\n)" % (self._level, self._value)

    def detach(self):
        return batched(self._value.detach(), self._level)

    @property
    def data(self):
        return batched(self._value.data, self._level)

    def _alias(self, grad_fn=None, output_nr=0, share_version=True):
        return batched(self._value._alias(grad_fn, output_nr, share_version), self._level)

    def requires_grad_(self, requires_grad=True):
        self._value.requires_grad_(requires_grad)
        self._requires_grad = self._value._requires_grad
        return self


def batched(value, level):
    """``value`` (its dim 0 the batch dim of ``level``; batched only at lower levels) wrapped at ``level``."""
    t = object.__new__(BatchedTensor)
    d = value._data
    # (d[0, ...]: a 0-d array, not a NumPy scalar, for a batch of 0-d samples)
    t._data = backend(d).empty(d.shape[1:], d.dtype) if not d.shape[0] else d[0, ...] if d.__class__ is np.ndarray \
        else d[0:1].reshape(d.shape[1:])
    t._vc = value._vc
    t._requires_grad = value._requires_grad
    t.grad_fn = value.grad_fn
    t._value = value
    t._level = level
    return t


def level_of(x):
    """The highest vmap level ``x`` is batched at (0: none)."""
    return x._level if x.__class__ is BatchedTensor else 0


def move_out(x, level, size):
    """``x`` not batched at ``level``, that level's batch dim in front of its logical dims (expanded, stride 0,
    where ``x`` is not batched there); still batched at its other levels."""
    top = level_of(x)
    if top == level:
        return x._value
    if top > level:  # the level sits inside: bring it out below the wrappers above it
        inner = move_out(x._value, level, size)  # [b_level, b_top, ...]
        return batched(inner.movedim(1, 0), top)
    return x.expand((size,) + tuple(x.shape)) if isinstance(x, Tensor) else x


def move_in(x, level):
    """The inverse of move_out: ``x``'s logical dim 0 becomes the batch dim of ``level``."""
    top = level_of(x)
    if top > level:
        inner = x._value  # [b_top, b_level, ...]
        return batched(move_in(inner.movedim(1, 0), level), top)
    return batched(x, level)


def unwrap_all(x):
    """The physical tensor of ``x`` and the levels it was batched at, outermost first."""
    levels = []
    while x.__class__ is BatchedTensor:
        levels.append(x._level)
        x = x._value
    return x, levels[::-1]


def wrap_levels(x, levels):
    """Inverse of unwrap_all: ``x``'s leading dims become the batch dims of ``levels`` (outermost first)."""
    for lv in levels:
        x = move_in(x, lv)
    return x


def is_batched(x):
    return x.__class__ is BatchedTensor


