"""jitgrad.cuda: the NVIDIA GPU, through numba-cuda (the 'cuda' extra).

Tensors get there with ``device="cuda"``, ``.cuda()`` or ``.to("cuda")``. Device memory comes from
a caching pool (numba's External Memory Management interface), installed before the first CUDA
allocation, so a training step does not call cudaMalloc once its sizes have been seen.
"""
from .. import _device, _factories


def is_available():
    """True when numba-cuda finds a GPU (or numba's CUDA simulator is on)."""
    return _device.cuda_available()


def _cuda():
    _device.to_device("cuda")  # a clear error where there is no GPU
    from numba import cuda
    return cuda


def device_count():
    if not is_available():
        return 0
    cuda = _cuda()
    try:
        return len(cuda.gpus)
    except Exception:  # the simulator has one device
        return 1


def current_device():
    _cuda()
    return 0


def get_device_name(device=None):
    cuda = _cuda()
    name = cuda.get_current_device().name
    return name.decode() if isinstance(name, bytes) else str(name)


def synchronize(device=None):
    """Wait for every kernel queued on the device to finish; raises an index error a kernel recorded."""
    _cuda().synchronize()
    _device.cuda_backend().raise_pending()


def manual_seed(seed):
    """Seed the generator of CUDA random tensors (jitgrad draws them on the host, with one generator)."""
    _factories.manual_seed(seed)


manual_seed_all = manual_seed


def _memory():
    _cuda()
    from ..kernels.cuda import memory
    return memory


def memory_allocated(device=None):
    """Bytes of device memory held by live tensors (0 under the simulator, which has no device memory)."""
    return _memory().memory_allocated()


def memory_reserved(device=None):
    """Bytes held from the driver: in use plus cached in the pool."""
    return _memory().memory_reserved()


def max_memory_allocated(device=None):
    return _memory().memory_stats()["peak_allocated_bytes"]


def memory_stats(device=None):
    return _memory().memory_stats()


def empty_cache():
    """Return the pool's cached blocks to the driver."""
    _memory().empty_cache()


from . import amp  # noqa: E402,F401  (jitgrad.cuda.amp: the deprecated spellings of jitgrad.amp's)
