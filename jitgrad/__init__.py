"""jitgrad: reverse-mode autograd with PyTorch's semantics, on numba kernels.

    import jitgrad as jg
    x = jg.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    (x.exp() * 3).mean().backward()
    x.grad
"""
from . import _dtype
from ._device import Device, device  # noqa: F401
from ._dtype import (bool_ as bool, dtype, float32, float64, get_default_dtype, int32, int64,  # noqa: F401
                     set_default_dtype)
from ._factories import *  # noqa: F401,F403
from ._factories import METHODS as _FACTORY_METHODS
from ._jit_stats import jit_stats  # noqa: F401
from ._grad_mode import (enable_grad, inference_mode, is_grad_enabled, is_inference_mode_enabled,  # noqa: F401
                         no_grad, set_grad_enabled)
from ._tensor import Size, Tensor  # noqa: F401
from . import autograd  # noqa: F401
from .autograd.anomaly import is_anomaly_check_nan_enabled, is_anomaly_enabled  # noqa: F401
from .serialization import load, save  # noqa: F401
from . import ops as _ops
from .ops import FUNCTIONS as _FUNCTIONS
from . import nn  # noqa: F401,E402
from . import optim  # noqa: F401,E402
from . import cuda  # noqa: F401,E402

float = float32
double = float64
long = int64
int = int32

for _name, _fn in _FACTORY_METHODS.items():
    setattr(Tensor, _name, _fn)
globals().update(_FUNCTIONS)

__version__ = "0.1.0"


def is_tensor(obj):
    return isinstance(obj, Tensor)


def numel(input):
    return input.numel()


def result_type(tensor1, tensor2):
    from ._op import _result_dtypes
    return _result_dtypes("promote", (tensor1, tensor2))[1]


def promote_types(type1, type2):
    return _dtype.promote_types(type1, type2)


def is_floating_point(input):
    return input.dtype.is_floating_point
