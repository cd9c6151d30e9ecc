"""jitgrad.cpu: the CPU device module, as torch.cpu (jitgrad.cpu.amp: its autocast and GradScaler)."""
from . import amp  # noqa: F401


def is_available():
    return True


def device_count():
    return 1


def current_device():
    return "cpu"


def synchronize(device=None):
    """Nothing to wait for: CPU kernels finish before they return."""
