"""jitgrad.autocast: regions where the ops of PyTorch's autocast lists run in a lower-precision dtype.

The state is thread-local (jitgrad._grad_mode.STATE). Which op casts its inputs to what is a field
of its op-table entry (``TypeRule.autocast``, read by ``ops._table.autocasts``); this module only opens
and closes regions and answers PyTorch's state queries.
"""
import copy
import functools
import warnings

from .. import _dtype as D
from .._device import cuda_available
from .._grad_mode import STATE
from .._tensor import Tensor

__all__ = ["autocast", "is_autocast_available", "custom_fwd", "custom_bwd"]

# the dtypes autocast uses where none was set (PyTorch's: bfloat16 on the CPU, float16 on CUDA)
_DEFAULT_DTYPES = {"cpu": D.bfloat16, "cuda": D.float16}


def is_autocast_available(device_type):
    """Whether autocast supports ``device_type`` (jitgrad's: 'cpu' and 'cuda')."""
    return device_type in _DEFAULT_DTYPES


def _device_type(device_type):
    if device_type is None:
        return "cuda"  # PyTorch's default for the legacy calls without a device type
    if not is_autocast_available(device_type):
        raise RuntimeError("Expected one of cpu, cuda device type at start of device string: %s" % (device_type,))
    return device_type


def is_autocast_enabled(device_type=None):
    """Whether autocast is on for ``device_type`` in this thread (no argument: CUDA's, as in PyTorch)."""
    on = STATE.autocast
    return bool(on) and _device_type(device_type) in on


def set_autocast_enabled(device_type, enabled=None):
    """``set_autocast_enabled(device_type, enabled)``, or the legacy ``set_autocast_enabled(enabled)`` (CUDA)."""
    if enabled is None:
        device_type, enabled = "cuda", device_type
    device_type = _device_type(device_type)
    on = dict(STATE.autocast or {})
    if enabled:
        on[device_type] = get_autocast_dtype(device_type)
    else:
        on.pop(device_type, None)
    STATE.autocast = on or None


def get_autocast_dtype(device_type):
    device_type = _device_type(device_type)
    return (STATE.autocast_dtypes or _DEFAULT_DTYPES).get(device_type, _DEFAULT_DTYPES[device_type])


def set_autocast_dtype(device_type, dtype):
    device_type = _device_type(device_type)
    STATE.autocast_dtypes = dict(STATE.autocast_dtypes or _DEFAULT_DTYPES, **{device_type: D.to_dtype(dtype)})
    if STATE.autocast and device_type in STATE.autocast:
        STATE.autocast = dict(STATE.autocast, **{device_type: D.to_dtype(dtype)})


def is_autocast_cpu_enabled():
    warnings.warn("torch.is_autocast_cpu_enabled() is deprecated. Please use torch.is_autocast_enabled('cpu') "
                  "instead.", DeprecationWarning, stacklevel=2)
    return is_autocast_enabled("cpu")


def get_autocast_cpu_dtype():
    warnings.warn("torch.get_autocast_cpu_dtype() is deprecated. Please use torch.get_autocast_dtype('cpu') instead.",
                  DeprecationWarning, stacklevel=2)
    return get_autocast_dtype("cpu")


def get_autocast_gpu_dtype():
    warnings.warn("torch.get_autocast_gpu_dtype() is deprecated. Please use torch.get_autocast_dtype('cuda') instead.",
                  DeprecationWarning, stacklevel=2)
    return get_autocast_dtype("cuda")


def is_autocast_cache_enabled():
    return STATE.autocast_cache_enabled


def set_autocast_cache_enabled(enabled):
    STATE.autocast_cache_enabled = bool(enabled)


def clear_autocast_cache():
    """Drop the casts of weights cached in this thread's autocast regions."""
    STATE.autocast_cache = None


def autocast_increment_nesting():
    STATE.autocast_nesting += 1
    return STATE.autocast_nesting


def autocast_decrement_nesting():
    STATE.autocast_nesting -= 1
    return STATE.autocast_nesting


class autocast:
    """A region (context manager or decorator) in which the ops of PyTorch's autocast lists run in mixed
    precision: matmul, linear and convolution in ``dtype`` (bfloat16 on the CPU, float16 on CUDA by
    default), the losses in float32; other ops run in their inputs' dtypes. The state is thread-local;
    regions nest, and ``enabled=False`` turns autocast off inside one."""

    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        if not isinstance(device_type, str):
            raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
        self.device = device_type
        if not is_autocast_available(device_type):
            raise RuntimeError(f"User specified an unsupported autocast device_type '{device_type}'")
        self.fast_dtype = get_autocast_dtype(device_type) if dtype is None else D.to_dtype(dtype)
        self._cache_enabled = is_autocast_cache_enabled() if cache_enabled is None else cache_enabled
        if enabled:
            if device_type == "cuda":
                if not cuda_available():
                    warnings.warn("CUDA is not available or torch_xla is imported. Disabling autocast.", stacklevel=2)
                    enabled = False
                elif self.fast_dtype is D.bfloat16:  # jitgrad's CUDA backend stores no bfloat16
                    raise RuntimeError("Current CUDA Device does not support bfloat16. Please switch dtype to float16.")
            elif self.fast_dtype not in D.REDUCED:
                warnings.warn("In CPU autocast, but the target dtype is not supported. Disabling autocast.\n"
                              "CPU Autocast only supports dtypes of %s currently."
                              % ", ".join(map(repr, (D.bfloat16, D.float16))), stacklevel=2)
                enabled = False
        self._enabled = bool(enabled)
        self._saved = []  # the state each open use of this instance replaced (a region may be re-entered)

    def __enter__(self):
        self._saved.append((STATE.autocast, STATE.autocast_dtypes, STATE.autocast_cache_enabled))
        on = dict(STATE.autocast or {})
        if self._enabled:
            on[self.device] = self.fast_dtype
        else:
            on.pop(self.device, None)
        STATE.autocast_dtypes = dict(STATE.autocast_dtypes or _DEFAULT_DTYPES, **{self.device: self.fast_dtype})
        STATE.autocast = on or None
        autocast_increment_nesting()
        STATE.autocast_cache_enabled = self._cache_enabled
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        if autocast_decrement_nesting() == 0:  # leaving the outermost region: drop the cached weight casts
            clear_autocast_cache()
        STATE.autocast, STATE.autocast_dtypes, STATE.autocast_cache_enabled = self._saved.pop()
        return False

    def __call__(self, func):
        if not callable(func):
            raise TypeError(f"autocast()(func) requires a callable, but got {type(func).__name__}. "
                            f"Did you mean to use autocast as a context manager? For example:\n"
                            f"    with torch.autocast(device_type=...):\n"
                            f"        output = model(input)")

        @functools.wraps(func)
        def decorate_autocast(*args, **kwargs):
            region = copy.copy(self)  # one per call: threads and recursion each open their own
            region._saved = []
            with region:
                return func(*args, **kwargs)
        return decorate_autocast


def custom_fwd(fwd=None, *, device_type, cast_inputs=None):
    """For the forward of a custom autograd.Function: with ``cast_inputs``, an autocast-enabled region runs
    it with floating tensor arguments cast to ``cast_inputs`` and autocast off; ``custom_bwd`` runs the
    backward in the autocast state the forward had."""
    if not isinstance(device_type, str):
        raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)

    @functools.wraps(fwd)
    def decorate_fwd(*args, **kwargs):
        args[0]._dtype = get_autocast_dtype(device_type)
        if cast_inputs is None:
            args[0]._fwd_used_autocast = is_autocast_enabled(device_type)
            return fwd(*args, **kwargs)
        autocast_context = is_autocast_enabled(device_type)
        args[0]._fwd_used_autocast = False
        if autocast_context:
            with autocast(device_type=device_type, enabled=False):
                return fwd(*_cast(args, device_type, cast_inputs), **_cast(kwargs, device_type, cast_inputs))
        return fwd(*args, **kwargs)
    return decorate_fwd


def custom_bwd(bwd=None, *, device_type):
    if not isinstance(device_type, str):
        raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)

    @functools.wraps(bwd)
    def decorate_bwd(*args, **kwargs):
        with autocast(device_type=device_type, enabled=args[0]._fwd_used_autocast, dtype=args[0]._dtype):
            return bwd(*args, **kwargs)
    return decorate_bwd


def _cast(value, device_type, dtype):
    """``value`` with its floating tensors (float64 aside) on ``device_type`` cast to ``dtype``, also inside
    lists, tuples and dicts."""
    if isinstance(value, Tensor):
        eligible = value.is_floating_point() and value.device.type == device_type and value.dtype is not D.float64
        return value.to(dtype) if eligible else value
    if isinstance(value, dict):
        return {k: _cast(v, device_type, dtype) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_cast(v, device_type, dtype) for v in value)
    return value
