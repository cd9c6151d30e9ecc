import os
import sys
import threading

import numpy as np
import pytest

import jitgrad as jg


def _simulator_shared_arrays_made_atomic():
    """numba's CUDA simulator runs a block's threads as Python threads and gives them one shared
    array per source line with an unlocked check-then-insert: two threads can each make their own,
    and a block-wide reduction then reads a half-written tree (a wrong answer about 1 run in 10).
    Hold a lock around it, so that every thread of a block sees the same array, as on a GPU."""
    from numba.core import types
    from numba.np import numpy_support
    from numba.cuda.simulator.kernelapi import FakeCUDAShared

    unlocked, lock = FakeCUDAShared.array, threading.Lock()

    def array(self, shape, dtype, alignment=None):
        if shape == 0 or alignment is not None:  # dynamic shared memory (one buffer), or its error
            return unlocked(self, shape, dtype, alignment)
        caller = sys._getframe(1)  # one array per source line of the kernel, as the simulator keys them
        key = (caller.f_code.co_filename, caller.f_lineno)
        with lock:
            res = self._allocations.get(key)
            if res is None:
                dtype = numpy_support.as_dtype(dtype) if isinstance(dtype, types.Type) else dtype
                res = self._allocations[key] = np.empty(shape, dtype)
        return res

    FakeCUDAShared.array = array


if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
    _simulator_shared_arrays_made_atomic()


@pytest.fixture(autouse=True)
def _grad_mode_restored():
    """Every test starts in default grad mode and must leave it that way."""
    assert jg.is_grad_enabled() and not jg.is_inference_mode_enabled()
    yield
    assert jg.is_grad_enabled() and not jg.is_inference_mode_enabled(), "test left grad mode changed"


@pytest.fixture
def rng():
    return np.random.default_rng(0)
