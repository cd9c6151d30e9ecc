"""Devices. The CPU is always there; CUDA tensors need numba-cuda and a GPU (or its simulator)."""
import numpy as np

from .kernels import cpu as cpu_backend


class Device:
    __slots__ = ("type", "index")

    def __init__(self, type, index=None):
        if isinstance(type, Device):
            type, index = type.type, type.index
        elif ":" in type:
            type, idx = type.split(":")
            index = int(idx)
        if type not in ("cpu", "cuda"):
            raise RuntimeError("Expected one of cpu, cuda device type at start of device string: " + type)
        self.type = type
        self.index = index if index is not None or type == "cpu" else 0

    def __repr__(self):
        return "device(type='%s'%s)" % (self.type, "" if self.index is None else ", index=%d" % self.index)

    def __str__(self):
        return self.type if self.index is None else "%s:%d" % (self.type, self.index)

    def __eq__(self, other):
        if isinstance(other, str):
            other = Device(other)
        return isinstance(other, Device) and (self.type, self.index) == (other.type, other.index)

    def __hash__(self):
        return hash((self.type, self.index))


device = Device
CPU = Device("cpu")
CUDA0 = Device("cuda", 0)


def backend(array):
    """The kernel backend module (kernels.cpu or kernels.cuda.backend) for an array."""
    if array.__class__ is np.ndarray:
        return cpu_backend
    return cuda_backend()


def device_of(array):
    return CPU if array.__class__ is np.ndarray else CUDA0


_pool_installed = False


def cuda_available():
    """True when numba-cuda is installed and finds a GPU (or runs its simulator)."""
    global _pool_installed
    try:
        from numba import cuda
    except ImportError:
        return False
    if not _pool_installed:  # before numba creates the CUDA context
        from .kernels.cuda import memory
        memory.install()
        _pool_installed = True
    try:
        return bool(cuda.is_available())
    except Exception:
        return False


def cuda_backend():
    from .kernels.cuda import backend as cuda
    return cuda


def to_device(d):
    """Resolve a device argument; CUDA is refused with a clear message where it cannot run."""
    d = d if isinstance(d, Device) else Device(str(d) if not isinstance(d, int) else "cuda:%d" % d)
    if d.type == "cuda":
        if not cuda_available():
            raise RuntimeError("jitgrad was asked for device '%s', but no CUDA device is available: install the "
                               "'cuda' extra (numba-cuda) and run on a machine with an NVIDIA GPU and driver, or set "
                               "NUMBA_ENABLE_CUDASIM=1 to use numba's CUDA simulator" % d)
        if d.index not in (None, 0):
            raise RuntimeError("CUDA error: invalid device ordinal (jitgrad uses one GPU, cuda:0)")
    return d
