"""jitgrad.autograd: backward, grad, Function, gradcheck, grad modes, anomaly mode, graph hooks, Variable."""
from .._grad_mode import enable_grad, inference_mode, no_grad, set_grad_enabled  # noqa: F401
from . import forward_ad, functional, graph, profiler, profiler_util  # noqa: F401
from .anomaly import detect_anomaly, set_detect_anomaly  # noqa: F401
from .engine import backward, grad, is_compiled_autograd_enabled, set_compiled_autograd  # noqa: F401
from .function import Function, FunctionCtx, once_differentiable  # noqa: F401
from .gradcheck import GradcheckError, gradcheck, gradgradcheck  # noqa: F401
from .variable import Variable  # noqa: F401
