"""Zero-copy exchange with other array libraries: NumPy, DLPack producers, CUDA arrays."""
import os
import subprocess
import sys

import numpy as np
import pytest

import jitgrad as jg


def test_from_numpy_and_dlpack_share_memory():
    a = np.arange(4.0)
    t = jg.from_numpy(a)
    t[0] = 10.0
    assert a[0] == 10.0
    b = np.arange(3, dtype=np.float32)
    u = jg.from_dlpack(b)
    u.add_(1)
    assert b.tolist() == [1.0, 2.0, 3.0]


def test_dlpack_export_of_cpu_tensor():
    t = jg.tensor([1.0, 2.0, 3.0])
    a = np.from_dlpack(t)
    a[1] = 5.0
    assert t.tolist() == [1.0, 5.0, 3.0]
    assert t.__dlpack_device__() == (1, 0)
    with pytest.raises(RuntimeError, match="Can't export tensors that require gradient"):
        np.from_dlpack(jg.ones(2, requires_grad=True))


def test_cuda_array_interface_only_on_cuda_tensors():
    with pytest.raises(AttributeError, match="Can't get __cuda_array_interface__ on non-CUDA tensor"):
        jg.ones(2).__cuda_array_interface__


def test_numba_device_arrays_are_wrapped_without_copy_in_simulator():
    code = ("import numpy as np, jitgrad as jg\n"
            "from numba import cuda\n"
            "d = cuda.to_device(np.arange(4, dtype=np.float32))\n"
            "t = jg.as_tensor(d)\n"
            "assert t.device == jg.device('cuda:0')\n"
            "t[1] = 7\n"
            "assert d.copy_to_host().tolist() == [0.0, 7.0, 2.0, 3.0]\n"
            "u = jg.from_dlpack(d)\n"
            "u.mul_(2)\n"
            "assert d.copy_to_host().tolist() == [0.0, 14.0, 4.0, 6.0]\n"
            "print('ok')\n")
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-3000:]
