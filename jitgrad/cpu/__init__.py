"""jitgrad.cpu: the CPU device module, as torch.cpu (jitgrad.cpu.amp: its autocast and GradScaler)."""
import numbers

from ..kernels import config
from . import amp  # noqa: F401

_THREADS = []  # the count set_num_threads was given last (get_num_threads gives it back, as PyTorch's does)


def set_num_threads(n):
    """The number of threads the CPU kernels run on (torch.set_num_threads): numba's parallel loops, at most the
    threads numba started (NUMBA_NUM_THREADS, the cores by default; numba keeps the count per calling Python
    thread), and the OpenBLAS pools of NumPy's GEMMs and SciPy's LAPACK."""
    if isinstance(n, bool) or not isinstance(n, numbers.Integral):
        raise RuntimeError("set_num_threads expects an int, but got %s" % type(n).__name__)
    if n <= 0:
        raise RuntimeError("set_num_threads expects a positive integer")
    config.set_threads(int(n))
    _THREADS[:] = [int(n)]


def get_num_threads():
    """The threads set_num_threads set, else the threads numba's parallel loops run on."""
    return _THREADS[0] if _THREADS else config.threads()


def is_available():
    return True


def device_count():
    return 1


def current_device():
    return "cpu"


def synchronize(device=None):
    """Nothing to wait for: CPU kernels finish before they return."""
