"""jitgrad.cuda.amp: the deprecated CUDA spellings of jitgrad.amp's autocast and GradScaler."""
import warnings

from .. import _dtype as D
from ..amp._deprecated import spellings
from ..amp.autocast_mode import custom_bwd as _custom_bwd, custom_fwd as _custom_fwd

__all__ = ["autocast", "custom_bwd", "custom_fwd", "GradScaler"]


autocast, GradScaler = spellings("cuda", D.float16, __name__)


def custom_fwd(fwd=None, *, cast_inputs=None):
    warnings.warn("`torch.cuda.amp.custom_fwd(args...)` is deprecated. Please use `torch.amp.custom_fwd(args..., "
                  "device_type='cuda')` instead.", FutureWarning, stacklevel=2)
    return _custom_fwd(fwd, device_type="cuda", cast_inputs=cast_inputs)


def custom_bwd(bwd=None):
    warnings.warn("`torch.cuda.amp.custom_bwd(args...)` is deprecated. Please use `torch.amp.custom_bwd(args..., "
                  "device_type='cuda')` instead.", FutureWarning, stacklevel=2)
    return _custom_bwd(bwd, device_type="cuda")


