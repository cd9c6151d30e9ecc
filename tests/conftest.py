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


# What numba-cuda's device arrays answer besides their methods (numba-cuda 0.30's DeviceNDArray)
DEVICE_ARRAY_ATTRIBUTES = {
    "T", "_default_stream", "_do_getitem", "_do_setitem", "_numba_type_", "as_cuda_arg", "bind", "copy_to_device",
    "copy_to_host", "device_ctypes_pointer", "flags", "get_ipc_handle", "getitem", "is_c_contiguous",
    "is_f_contiguous", "nbytes", "ravel", "reshape", "setitem", "split", "squeeze", "transpose", "view",
    "__cuda_array_interface__", "__array__", "shape", "strides", "dtype", "size", "ndim", "gpu_data", "stream",
    "alloc_size"}


def _simulator_arrays_answer_as_device_arrays():
    """The simulator's device arrays wrap NumPy arrays and forward every attribute to them, so code that reads
    a NumPy-only attribute (``.flags.c_contiguous``, ``.itemsize``, ``__array_interface__``, ``.astype``...)
    passes here and fails on a GPU. Here they answer only what numba's device arrays have, as those do
    (``flags`` is a dict of the two contiguity flags)."""
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

    forward = FakeCUDAArray.__getattr__

    def getattr_(self, name):
        if name not in DEVICE_ARRAY_ATTRIBUTES:
            raise AttributeError("numba's device arrays have no attribute %r" % name)
        if name == "flags":
            flags = self._ary.flags
            return {"C_CONTIGUOUS": flags.c_contiguous, "F_CONTIGUOUS": flags.f_contiguous}
        return forward(self, name)

    FakeCUDAArray.__getattr__ = getattr_

    def no_arithmetic(self, other):  # numba's device arrays have none: kernels do the math
        raise TypeError("numba's device arrays have no arithmetic operators")

    for name in ("__add__", "__sub__", "__mul__", "__floordiv__", "__truediv__", "__mod__", "__pow__"):
        setattr(FakeCUDAArray, name, no_arithmetic)
    for name in ("__lt__", "__le__", "__gt__", "__ge__"):
        setattr(FakeCUDAArray, name, lambda self, other: NotImplemented)
    FakeCUDAArray.__eq__, FakeCUDAArray.__ne__, FakeCUDAArray.__hash__ = object.__eq__, object.__ne__, object.__hash__


if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
    _simulator_shared_arrays_made_atomic()
    _simulator_arrays_answer_as_device_arrays()


@pytest.fixture(autouse=True)
def _grad_mode_restored():
    """Every test starts in default grad mode and must leave it that way."""
    assert jg.is_grad_enabled() and not jg.is_inference_mode_enabled()
    yield
    assert jg.is_grad_enabled() and not jg.is_inference_mode_enabled(), "test left grad mode changed"


@pytest.fixture
def rng():
    return np.random.default_rng(0)
