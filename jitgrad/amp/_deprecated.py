"""The deprecated per-device spellings (jitgrad.cpu.amp, jitgrad.cuda.amp) of jitgrad.amp's autocast and
GradScaler: the same classes bound to one device type, warning as PyTorch does."""
import warnings

from . import autocast_mode as _autocast_mode
from . import grad_scaler as _grad_scaler


def spellings(device, default_dtype, module):
    """(autocast, GradScaler) of ``torch.<device>.amp``, with ``module`` as their module."""
    def warn(name):
        warnings.warn("`torch.%s.amp.%s(args...)` is deprecated. Please use `torch.amp.%s('%s', args...)` instead."
                      % (device, name, name, device), FutureWarning, stacklevel=3)

    class autocast(_autocast_mode.autocast):
        def __init__(self, enabled=True, dtype=default_dtype, cache_enabled=True):
            warn("autocast")
            super().__init__(device, enabled=enabled, dtype=dtype, cache_enabled=cache_enabled)

    class GradScaler(_grad_scaler.GradScaler):
        def __init__(self, init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000,
                     enabled=True):
            warn("GradScaler")
            super().__init__(device, init_scale=init_scale, growth_factor=growth_factor,
                             backoff_factor=backoff_factor, growth_interval=growth_interval, enabled=enabled)

    for cls, doc in ((autocast, "``jitgrad.autocast(%r, ...)``; deprecated as in PyTorch."),
                     (GradScaler, "``jitgrad.amp.GradScaler(%r, ...)``; deprecated as in PyTorch.")):
        cls.__module__, cls.__qualname__, cls.__doc__ = module, cls.__name__, doc % device
    return autocast, GradScaler
