"""Devices. The CPU is always there; CUDA tensors need numba-cuda and a GPU (or its simulator)."""
import importlib.util

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
DEFAULT = [None]  # the device factories use when given none (set_default_device); None: the CPU


def set_default_device(d):
    """The device tensor factories use when given none (None: back to the CPU), as torch.set_default_device."""
    DEFAULT[0] = None if d is None else d if isinstance(d, Device) else Device(
        "cuda:%d" % d if isinstance(d, int) else str(d))


def get_default_device():
    return DEFAULT[0] or CPU


def backend(array):
    """The kernel backend module (kernels.cpu or kernels.cuda.backend) for an array."""
    if array.__class__ is np.ndarray or isinstance(array, np.ndarray):  # (a lazy conjugate's: ConjView)
        return cpu_backend
    return cuda_backend()


def is_array(x):
    """Whether ``x`` is an array a tensor can hold: a NumPy array, or a device array of the CUDA backend (by the
    backend's own test, not by the protocols an array answers: the simulator's arrays answer none of them)."""
    return isinstance(x, np.ndarray) or _cuda_backend is not None and _cuda_backend.is_device_array(x)


def may_share_memory(a, b):
    """Whether two arrays may overlap in memory: NumPy's test on the host, the address ranges on the device (NumPy's
    would copy device arrays to the host and never find an overlap); arrays on two devices never do."""
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        return np.may_share_memory(a, b)
    if isinstance(a, np.ndarray) != isinstance(b, np.ndarray):
        return False
    return cuda_backend().may_share_memory(a, b)


def value_range(array):
    """(min, max) of a non-empty array as NumPy scalars, reduced where the array lives (a GPU sends
    back two numbers, not the array)."""
    if array.__class__ is np.ndarray or array.ndim == 0:
        a = array if array.__class__ is np.ndarray else cuda_backend().to_host(array)
        return a.min(), a.max()
    xp, dims = cuda_backend(), tuple(range(array.ndim))
    return xp.to_host(xp.reduce("amin", array, dims))[()], xp.to_host(xp.reduce("amax", array, dims))[()]


def device_of(array):
    return CPU if isinstance(array, np.ndarray) else CUDA0


INSTALL_HINT = 'pip install "jitgrad[cuda]"'
_cuda_problem = None  # why CUDA cannot run here (None: not checked yet; "": it can)


def cuda_unavailable_reason():
    """'' when CUDA tensors can run here, else what is missing (checked once per process)."""
    global _cuda_problem
    if _cuda_problem is None:
        _cuda_problem = _find_cuda_problem()
    return _cuda_problem


def _find_cuda_problem():
    # numba still ships an old numba.cuda of its own; jitgrad's CUDA kernels need the numba-cuda package
    try:
        found = importlib.util.find_spec("numba_cuda") is not None
    except ImportError:
        found = False
    if not found:
        return "the numba-cuda package is not installed (%s installs it)" % INSTALL_HINT
    try:
        from numba import cuda
        from .kernels.cuda import memory
    except ImportError as e:
        return "numba-cuda could not be imported (%s); reinstall it with %s" % (e, INSTALL_HINT)
    memory.install()  # the caching pool goes in before numba creates the CUDA context
    try:
        if cuda.is_available():
            return ""
    except Exception as e:  # a broken driver install: report it, never raise from is_available()
        return "the CUDA driver could not be initialised (%s)" % e
    return ("numba-cuda found no NVIDIA GPU and driver on this machine (set NUMBA_ENABLE_CUDASIM=1 to run CUDA "
            "tensors in numba's CUDA simulator)")


def cuda_available():
    """True when numba-cuda is installed and finds a GPU (or runs its simulator)."""
    return not cuda_unavailable_reason()


_cuda_backend = None


def cuda_backend():
    """kernels.cuda.backend, imported the first time a CUDA array needs it (it needs numba-cuda)."""
    global _cuda_backend
    if _cuda_backend is None:
        from .kernels.cuda import backend
        _cuda_backend = backend
    return _cuda_backend


def to_device(d):
    """Resolve a device argument; CUDA is refused with a clear message where it cannot run."""
    d = d if isinstance(d, Device) else Device(str(d) if not isinstance(d, int) else "cuda:%d" % d)
    if d.type == "cuda":
        reason = cuda_unavailable_reason()
        if reason:
            raise RuntimeError("jitgrad was asked for device '%s', but CUDA is not available: %s" % (d, reason))
        if d.index not in (None, 0):
            raise RuntimeError("CUDA error: invalid device ordinal (jitgrad uses one GPU, cuda:0)")
    return d
