"""Host-side plumbing of kernels/cuda, checked without a device: the direct kernel launch of
kernels/cuda/_launch.py packs arguments as numba's dispatcher does (on a GPU every launch after a kernel's
first goes through these packers; the GPU test run checks the results of every op), and device arrays are
compared without copying them to the host.
"""
import ctypes
import types

import numpy as np
import pytest
from numba import types as nt

from jitgrad.kernels.cuda import _launch as L


class FakeDeviceArray:
    """What the packers read of a numba device array."""
    __cuda_ndarray__ = True

    def __init__(self, shape, strides, dtype, pointer):
        self.shape, self.strides, self.dtype = shape, strides, np.dtype(dtype)
        self.ndim, self.size = len(shape), int(np.prod(shape))
        self.gpu_data = types.SimpleNamespace(device_pointer_value=pointer)
        c = strides == tuple(np.empty(shape, self.dtype).strides)
        f = strides == tuple(np.empty(shape, self.dtype, order="F").strides)
        self.flags = {"C_CONTIGUOUS": c, "F_CONTIGUOUS": f}


def pack(ty, value):
    params = []
    L._packer(ty)(value, params)
    return params


def test_an_array_is_meminfo_parent_size_itemsize_data_shape_strides():
    a = FakeDeviceArray((3, 4), (32, 8), np.float64, 0x7000)
    assert pack(nt.Array(nt.float64, 2, "C"), a) == [0, 0, 12, 8, 0x7000, 3, 4, 32, 8]


def test_scalars_are_c_values_of_their_numba_type():
    (f,) = pack(nt.float32, np.float32(1.5))
    (d,) = pack(nt.float64, 2.25)
    (i,) = pack(nt.int32, 7)
    (q,) = pack(nt.int64, -3)
    assert (type(f), f.value) == (ctypes.c_float, 1.5)
    assert (type(d), d.value) == (ctypes.c_double, 2.25)
    assert (type(i), i.value) == (ctypes.c_int32, 7)
    assert (type(q), q.value) == (ctypes.c_int64, -3)
    assert pack(nt.boolean, np.bool_(True)) == [True]


def test_a_tuple_is_its_fields_in_order():
    params = pack(nt.UniTuple(nt.int64, 3), (4, 5, 6))
    assert [p.value for p in params] == [4, 5, 6]


def test_unsupported_argument_types_go_through_numba():
    with pytest.raises(NotImplementedError):
        L._packer(nt.complex128)
    assert L._argument_key(np.zeros(3)) is None  # a host array: numba copies it
    assert L._argument_key((1, np.zeros(2))) is None


def test_argument_keys_follow_numbas_typing():
    c = FakeDeviceArray((3, 4), (16, 4), np.float32, 1)
    f = FakeDeviceArray((3, 4), (4, 12), np.float32, 1)
    strided = FakeDeviceArray((3, 2), (16, 8), np.float32, 1)
    broadcast = FakeDeviceArray((3, 4), (0, 4), np.float32, 1)
    assert L._argument_key(c) == (np.dtype(np.float32), 2, "C")
    assert L._argument_key(f) == (np.dtype(np.float32), 2, "F")
    assert L._argument_key(strided)[2] == "A"
    assert L._argument_key(broadcast)[2] == "A"  # numba types broadcast arrays as 'A'
    assert L._argument_key(np.float32(1)) == np.dtype(np.float32)
    assert L._argument_key((1, 2)) == (tuple, int, int)
    assert L._argument_key(1.0) is float and L._argument_key(True) is bool


def test_a_flat_argument_packs_as_the_1d_view_of_its_array():
    a = FakeDeviceArray((3, 4), (16, 4), np.float32, 0x9000)
    f = L.Flat(a)
    assert L._argument_key(f) == (np.dtype(np.float32), 1, "C")
    assert pack(nt.Array(nt.float32, 1, "C"), f) == [0, 0, 12, 4, 0x9000, 12, 4]


def test_the_first_launch_goes_through_numba_and_later_ones_launch_directly(monkeypatch):
    calls = []

    class Dispatcher:  # stands in for a numba kernel
        def __getitem__(self, config):
            return lambda *args: calls.append(("numba", config, args))

    monkeypatch.setattr(L, "SIM", False)
    monkeypatch.setattr(L, "_BOUND", {})
    monkeypatch.setattr(L, "_CONFIGS", {})
    monkeypatch.setattr(L, "_STREAM", ["stream"])
    monkeypatch.setattr(L, "_THREAD", [None])
    monkeypatch.setattr(L, "_bind", lambda kernel, args: ("function", [L._packer(nt.float64)]))
    monkeypatch.setattr(L, "_core", types.SimpleNamespace(
        LaunchConfig=lambda **config: config, launch=lambda *a: calls.append(("direct",) + a)))
    k = Dispatcher()
    L.launch(k, 4, 256, 1.5)
    L.launch(k, 4, 256, 2.5)
    assert calls[0] == ("numba", (4, 256), (1.5,))
    kind, stream, config, function, value = calls[1]
    assert (kind, stream, config, function, value.value) == (
        "direct", "stream", {"grid": 4, "block": 256, "shmem_size": 0}, "function", 2.5)
    L._THREAD[0] = -1  # another thread bound the kernels: numba makes the context current on this one
    L.launch(k, 4, 256, 3.5)
    assert calls[2] == ("numba", (4, 256), (3.5,))


def test_a_context_reset_forgets_the_kernel_handles_and_the_pool(monkeypatch):
    monkeypatch.setattr(L, "_BOUND", {("kernel",): ("function", [])})
    monkeypatch.setattr(L, "_STREAM", ["stream"])
    monkeypatch.setattr(L, "_THREAD", [1])
    monkeypatch.setattr(L, "_POOL", [])
    L.use_pool(lambda n: n, object)
    assert L._POOL[2] is not None
    L.forget_context()  # kernels.cuda.memory's manager calls it when numba resets the context
    assert (L._BOUND, L._STREAM, L._THREAD, L._POOL) == ({}, [], [None], [])


class HostCopyForbidden(FakeDeviceArray):
    """A device array whose host copy fails the test: NumPy would make one to read it as an array."""
    def __init__(self, pointer, nbytes):
        super().__init__((nbytes // 4,), (4,), np.float32, pointer)
        self.nbytes = nbytes
        self.device_ctypes_pointer = ctypes.c_void_p(pointer)

    def __array__(self, *args, **kwargs):
        raise AssertionError("copied to the host")


def test_views_of_device_arrays_are_found_by_address_without_host_copies():
    from jitgrad._device import may_share_memory
    base = HostCopyForbidden(0x10000, 64)
    assert may_share_memory(base, HostCopyForbidden(0x10020, 16))  # a view inside it
    assert not may_share_memory(base, HostCopyForbidden(0x10040, 16))  # the next block
    assert not may_share_memory(base, np.zeros(4, np.float32))  # another device
    x = np.zeros(4)
    assert may_share_memory(x, x[1:]) and not may_share_memory(x, np.zeros(4))


def test_the_check_buffer_is_read_only_after_a_checking_kernel(monkeypatch):
    """Every copy to the host calls raise_pending: it reads the device buffer only when a kernel that checks
    indices was launched since, and raises what that kernel recorded once."""
    from jitgrad.kernels.cuda import asserts

    class Buffer:
        def __init__(self):
            self.value, self.reads = np.zeros(2, np.int64), 0

        def copy_to_host(self):
            self.reads += 1
            return self.value.copy()

        def copy_to_device(self, host):
            self.value = host.copy()
    buf = Buffer()
    monkeypatch.setattr(asserts, "_FLAG", [buf])
    monkeypatch.setattr(asserts, "_QUEUED", [False])
    asserts.raise_pending()
    assert buf.reads == 0
    asserts.launched()
    asserts.raise_pending()
    asserts.raise_pending()
    assert buf.reads == 1
    buf.value[:] = (asserts.TARGET_OUT_OF_BOUNDS, 7)  # a kernel recorded a bad target
    asserts.launched()
    with pytest.raises(IndexError, match="Target 7 is out of bounds."):
        asserts.raise_pending()
    asserts.raise_pending()  # raised once, the buffer cleared
    assert buf.reads == 2 and not buf.value.any()


def test_placeholders_are_kept_while_the_pool_serves_the_context(monkeypatch):
    """A reduction's unread partial-state arguments: one array per (dtype, rank) while the pool serves the
    context, dropped with it; without the pool each call gets a fresh one."""
    made = []
    monkeypatch.setattr(L, "_POOL", [])
    monkeypatch.setattr(L, "_PLACEHOLDERS", {})
    monkeypatch.setattr(L, "empty", lambda shape, dtype: made.append((shape, np.dtype(dtype))) or np.empty(shape, dtype))
    a = L.placeholder(np.float64, 2)
    assert L.placeholder(np.float64, 2) is not a and len(made) == 2  # no pool: not kept
    L.use_pool(lambda n: n, object)
    b = L.placeholder(np.float64, 2)
    assert L.placeholder("float64", 2) is b and L.placeholder(np.int64, 2) is not b and b.shape == (1, 1)
    assert L.placeholder(np.float64, 3).shape == (1, 1, 1) and len(made) == 5
    L.forget_context()
    assert L._PLACEHOLDERS == {} and L.placeholder(np.float64, 2) is not b
