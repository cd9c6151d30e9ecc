"""Device-side index checks: a kernel that meets a bad index records it, the host raises when it next waits.

Copying indices to the host to check them would wait for every kernel in the queue. As PyTorch's device
asserts do, the check runs inside the kernel: it skips the bad element and records (code, value) in a
two-element device buffer; ``raise_pending()``, called where the host waits for the device anyway (a copy to
the host, a synchronize), reads the buffer and raises the error the CPU raises at once. Unlike a device
assert, the CUDA context stays usable.
"""
import numpy as np
from numba import cuda

from . import _launch as L

TARGET_OUT_OF_BOUNDS = 1  # nll_loss / cross_entropy
INDEX_OUT_OF_RANGE = 2  # embedding / index_select
MESSAGES = {TARGET_OUT_OF_BOUNDS: (IndexError, "Target {} is out of bounds."),
            INDEX_OUT_OF_RANGE: (IndexError, "index out of range in self")}

_FLAG = []  # the (code, value) buffer, made at the first check
_QUEUED = [False]  # whether a checking kernel was launched since the buffer was last read


def flag():
    """The device buffer in which kernels record their first failed check."""
    if not _FLAG:
        _FLAG.append(L.to_device(np.zeros(2, np.int64)))
    return _FLAG[0]


def launched():
    """Called after launching a kernel that checks: the next ``raise_pending`` reads the buffer. (After the
    launch, not at ``flag()``: a read between the two, from another thread, would miss the kernel's record.)"""
    _QUEUED[0] = True


@cuda.jit(device=True)
def record(flag, code, value):
    """Record (code, value) unless an earlier failure is recorded."""
    if cuda.atomic.cas(flag, 0, 0, code) == 0:
        flag[1] = value


def raise_pending():
    """Raise the first failure recorded since the last call (after the kernels queued so far ran). The buffer
    is read only when a checking kernel ran since: every copy to the host calls this."""
    if _QUEUED[0]:
        _QUEUED[0] = False
        code, value = _FLAG[0].copy_to_host()
        if code:
            _FLAG[0].copy_to_device(np.zeros(2, np.int64))
            error, message = MESSAGES[int(code)]
            raise error(message.format(value))
