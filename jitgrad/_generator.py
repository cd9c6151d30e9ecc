"""jitgrad.Generator: a seedable stream of random numbers (NumPy's PCG64), and the default generator.

Every random factory, random op, sampler and ``nn.init`` function draws from a Generator: the one
passed as ``generator=``, else ``default_generator`` (seeded by ``jitgrad.manual_seed``). The
stream is jitgrad's own (PyTorch's Mersenne Twister numbers are not reproduced), deterministic
under a seed; ``get_state``/``set_state`` save and restore it as a uint8 tensor. CUDA tensors draw
their numbers on the host, so a generator's device only says which tensors it may fill.
"""
import weakref

import numpy as np

from . import _dtype as D
from ._device import to_device
from ._tensor import Tensor
from ._trace_hooks import random_draw

DEFAULT_SEED = 67280421310721  # PyTorch's seed of a new Generator
_FIELDS = (16, 16, 8, 8, 8)  # the state as bytes: PCG64 state, increment, has_uint32, uinteger, initial seed
STATE_SIZE = sum(_FIELDS)
_LIVE = weakref.WeakSet()  # every Generator of the process (jitgrad.compile checks which ones a trace drew from)


def _check_seed(seed):
    """``seed`` as PyTorch reads it: anything int() takes, in [-2**63, 2**64); negatives wrap to 64 bits."""
    seed = int(seed)
    if not -2 ** 63 <= seed < 2 ** 64:
        raise ValueError("Overflow when unpacking long long")
    return seed % 2 ** 64


class Generator:
    """A random number generator (``torch.Generator``): ``manual_seed``, ``seed``, ``initial_seed``,
    ``get_state``/``set_state``, ``device``. Picklable (the state travels)."""

    def __init__(self, device="cpu"):
        self._device = to_device(device)
        self._np = np.random.Generator(np.random.PCG64(DEFAULT_SEED))
        self._seed = DEFAULT_SEED
        _LIVE.add(self)

    @property
    def device(self):
        return self._device

    def manual_seed(self, seed):
        """Reset the stream to the one of ``seed``; returns the generator."""
        seed = _check_seed(seed)
        random_draw(self)
        self._np.bit_generator.state = np.random.PCG64(seed).state
        self._seed = seed
        return self

    def seed(self):
        """Seed from the operating system's entropy; returns the new seed."""
        s = int(np.random.SeedSequence().entropy % 2 ** 64)
        self.manual_seed(s)
        return s

    def initial_seed(self):
        return self._seed

    def get_state(self):
        """The state as a uint8 tensor (give it to ``set_state`` to replay the stream from here)."""
        st = self._np.bit_generator.state
        values = (st["state"]["state"], st["state"]["inc"], st["has_uint32"], st["uinteger"], self._seed)
        raw = b"".join(int(v).to_bytes(n, "little") for v, n in zip(values, _FIELDS))
        return Tensor._wrap(np.frombuffer(raw, np.uint8).copy())

    def set_state(self, new_state):
        if not isinstance(new_state, Tensor) or new_state.dtype is not D.uint8:
            raise TypeError("RNG state must be a jitgrad.ByteTensor")
        raw = bytes(new_state._host().reshape(-1))
        if len(raw) != STATE_SIZE:
            raise RuntimeError("Expected a jitgrad Generator state of size %d but found the input RNG state size "
                               "to be %d" % (STATE_SIZE, len(raw)))
        random_draw(self)
        values, pos = [], 0
        for n in _FIELDS:
            values.append(int.from_bytes(raw[pos:pos + n], "little"))
            pos += n
        self._np.bit_generator.state = {"bit_generator": "PCG64", "state": {"state": values[0], "inc": values[1]},
                                        "has_uint32": values[2], "uinteger": values[3]}
        self._seed = values[4]
        return self

    def __reduce__(self):
        return _rebuild, (str(self._device), self.get_state()._host().tobytes())

    def __repr__(self):
        return "<jitgrad.Generator object at 0x%x>" % id(self)


def _rebuild(device, state):
    g = Generator(device)
    return g.set_state(Tensor._wrap(np.frombuffer(state, np.uint8).copy()))


default_generator = Generator()
default_generator.seed()  # as PyTorch: a process starts from a fresh seed


def generators():
    """Every live Generator, the default one included."""
    return list(_LIVE)


def numpy_rng(generator, device=None):
    """The NumPy Generator to draw from for tensors on ``device``: ``generator``'s, else the default
    one's; PyTorch's errors for a generator of another device or something that is not one."""
    if generator is None:
        random_draw(default_generator)
        return default_generator._np
    if not isinstance(generator, Generator):
        raise TypeError("expected a jitgrad.Generator as generator, but got %s" % type(generator).__name__)
    if device is not None:
        want = to_device(device).type
        if generator._device.type != want:
            raise RuntimeError("Expected a '%s' device type for generator but found '%s'"
                               % (want, generator._device.type))
    random_draw(generator)
    return generator._np


def manual_seed(seed):
    """Seed the default generator (rand, randn, dropout, init, samplers...); returns it."""
    return default_generator.manual_seed(seed)


def seed():
    """Seed the default generator from the operating system's entropy; returns the seed."""
    return default_generator.seed()


def initial_seed():
    return default_generator.initial_seed()


def get_rng_state():
    return default_generator.get_state()


def set_rng_state(new_state):
    default_generator.set_state(new_state)
