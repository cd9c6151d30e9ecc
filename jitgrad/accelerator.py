"""jitgrad.accelerator: PyTorch's device-agnostic accelerator API; jitgrad's one accelerator is CUDA."""
from . import _device
from . import cuda as _cuda


def is_available():
    return _device.cuda_available()


def current_accelerator(check_available=False):
    """``device('cuda')`` where jitgrad can use a GPU, else None."""
    return _device.Device("cuda") if is_available() else None


def device_count():
    return _cuda.device_count()


def current_device_index():
    return _cuda.current_device()


current_device_idx = current_device_index


def set_device_index(device):
    _device.to_device(device if not isinstance(device, int) else "cuda:%d" % device)


set_device_idx = set_device_index


def synchronize(device=None):
    if is_available():
        _cuda.synchronize()
