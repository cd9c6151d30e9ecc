"""NumPy arrays as tensor data: the ones that cannot be shared as they are (another byte order: an error from
from_numpy, a native-order copy from tensor/as_tensor; read-only: a warning, then in-place writes refused) and
NumPy subclasses (memmap slices, ndarray subclasses), which are CPU arrays."""
import os
import re
import warnings

import numpy as np
import pytest

import jitgrad as jg


# ---------------------------------------------------------------------- NumPy arrays in another byte order, read-only
BYTE_ORDER = ("given numpy array has byte order different from the native byte order. Conversion between byte "
              "orders is currently not supported.")


def test_big_endian_arrays():
    for dt in (">f4", ">f8", ">i8", ">i4"):
        a = np.arange(3, dtype=dt)
        with pytest.raises(ValueError, match="^" + re.escape(BYTE_ORDER) + "$"):
            jg.from_numpy(a)  # cannot share memory in the wrong byte order
        for make in (jg.tensor, jg.as_tensor):  # these may copy: the values arrive in native order
            t = make(a)
            assert t.dtype is jg.tensor(a.astype(np.dtype(dt).newbyteorder("="))).dtype
            assert t.tolist() == [0, 1, 2] and (t + 1).tolist() == [1, 2, 3]
            t.add_(1)
            assert t.tolist() == [1, 2, 3] and a.tolist() == [0, 1, 2]


NOT_WRITABLE = "The given NumPy array is not writable"


def test_read_only_arrays():
    ro = np.arange(3.0)
    ro.flags.writeable = False
    for make in (jg.from_numpy, jg.as_tensor):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            t = make(ro)
        assert [str(x.message)[:len(NOT_WRITABLE)] for x in w] == [NOT_WRITABLE]
        assert (t * 2).tolist() == [0.0, 2.0, 4.0] and t.sum().item() == 3.0
        for write in (lambda t: t.add_(1), lambda t: t.__setitem__(0, 5.0), lambda t: t[1:].mul_(2),
                      lambda t: t.zero_()):
            with pytest.raises(RuntimeError, match="not writable"):
                write(t)
        assert ro.tolist() == [0.0, 1.0, 2.0] and t._version == 0
    t = jg.tensor(ro)  # a copy: writable
    t.add_(1)
    assert t.tolist() == [1.0, 2.0, 3.0] and ro.tolist() == [0.0, 1.0, 2.0]
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor refers to a single memory"):
        jg.ones(3).expand(2, 3).add_(1)  # an expanded tensor keeps PyTorch's message


# ---------------------------------------------------------------------- NumPy subclasses are CPU arrays
def test_memmap_slices_make_cpu_tensors(tmp_path):
    path = os.path.join(tmp_path, "data.bin")
    m = np.memmap(path, dtype=np.int64, mode="w+", shape=(10,))
    m[:] = np.arange(10)
    m.flush()
    data = np.memmap(path, dtype=np.int64, mode="r+")
    for make in (jg.from_numpy, jg.as_tensor, jg.tensor):
        t = make(data[2:5])
        assert t.device == jg.device("cpu") and not t.is_cuda
        assert t._data.__class__ is np.ndarray
        assert (t + 1).tolist() == [3, 4, 5]
    # nanoGPT's get_batch: stack of memmap slices converted to int64
    x = jg.stack([jg.from_numpy(data[i:i + 3].astype(np.int64)) for i in (0, 4)])
    assert x.device == jg.device("cpu") and x.tolist() == [[0, 1, 2], [4, 5, 6]]
    shared = jg.from_numpy(data[2:5])  # zero copy: writes reach the file's pages
    shared[0] = 100
    assert data[2] == 100
    ro = np.memmap(path, dtype=np.int64, mode="r")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = jg.from_numpy(ro[:3])
    assert t.tolist() == [0, 1, 100]
    with pytest.raises(RuntimeError, match="not writable"):
        t.add_(1)
    del data, ro, m, shared, t


def test_ndarray_subclass_is_cpu():
    class Sub(np.ndarray):
        pass
    a = np.arange(4.0).view(Sub)
    for make in (jg.from_numpy, jg.as_tensor, jg.tensor):
        t = make(a)
        assert t.device == jg.device("cpu") and (t * 2).tolist() == [0.0, 2.0, 4.0, 6.0]
