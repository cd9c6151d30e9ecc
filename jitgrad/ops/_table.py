"""The op table: every Op entry, by name, and the helpers the entry files share."""
import functools
import inspect
import itertools

import numpy as np

from .. import _dtype as D
from .._grad_mode import SPECIAL, STATE
from .._tensor import Tensor

OPS = {}  # name -> Op: the single registry that tests and benchmarks are generated from
METHODS = {}  # Tensor method name -> function(self, ...)
FUNCTIONS = {}  # jitgrad.<name> -> function


_TYPE_NAMES = {"bool": "Bool", "int32": "Int", "int64": "Long", "float32": "Float", "float64": "Double",
               "complex64": "ComplexFloat", "complex128": "ComplexDouble"}
INTS = ("int32", "int64")
COMPLEX = ("complex64", "complex128")
EMPTY = {}


def no_kernel(kernel, *dtypes):
    """``TypeRule.unsupported`` for input dtypes PyTorch has no kernel named ``kernel`` for."""
    return rejects(NotImplementedError, "\"%s\" not implemented for '%%(type)s'" % kernel, *dtypes)


def no_complex(exc, message):
    """``TypeRule.unsupported`` for complex64 and complex128 (PyTorch's error, which names no dtype)."""
    return {d: (exc, message) for d in COMPLEX}


def rejects(exc, message, *dtypes):
    """``TypeRule.unsupported``: ``exc(message)`` for these input dtypes (``%(type)s``: PyTorch's name, 'Long')."""
    return {d: (exc, message % {"type": _TYPE_NAMES[d]}) for d in dtypes}


def c_order(a):
    """``a`` C-contiguous, as PyTorch lays out the results of cat, stack and gather (NumPy follows the
    layout of non-contiguous inputs, which view() would then refuse where PyTorch accepts)."""
    return a if a.__class__ is not np.ndarray or a.flags.c_contiguous else np.ascontiguousarray(a)


# ------------------------------------------------------------------ autocast
# An entry's ``autocast``: device type -> PyTorch's cast policy for the op under jitgrad.autocast (its
# "CPU/CUDA ops that can autocast to" lists): "lower_precision_fp" casts the floating inputs (float64
# aside) to the autocast dtype, "fp32" to float32.
LOWER = {"cpu": "lower_precision_fp", "cuda": "lower_precision_fp"}
CUDA_LOWER = {"cuda": "lower_precision_fp"}
FP32 = {"cpu": "fp32", "cuda": "fp32"}
CUDA_FP32 = {"cuda": "fp32"}


def autocasts(entry):
    """Decorator: the public function of op table entry ``entry`` (a name). Under jitgrad.autocast its
    tensor arguments are cast as the entry's ``autocast`` policy says, before the function checks them
    (mm's "same dtype" check sees the cast operands). Outside autocast it costs one call."""
    return _autocaster(lambda: OPS[entry].types.autocast, entry)


def autocast_policy(**policy):
    """Decorator: the autocast ``policy`` (device type -> cast policy) of a public function that is not one
    entry of the table (cross_entropy, mse_loss: composed of entries)."""
    return _autocaster(lambda: policy, True)


def _autocaster(policy_of, entry):
    def deco(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            if SPECIAL[0] and STATE.autocast:
                args, kwargs = autocast_arguments(policy_of(), args, kwargs)
            return fn(*args, **kwargs)
        wrapper.autocast_entry = entry
        return wrapper
    return deco


def autocast_arguments(policy, args, kwargs):
    """``(args, kwargs)`` with the floating tensors cast as ``policy`` says for their device type, where
    autocast is on for it; float64 tensors, other dtypes and tensors on other devices stay as they are."""
    first = next((a for a in itertools.chain(args, kwargs.values()) if isinstance(a, Tensor)), None)
    if first is None:
        return args, kwargs
    device = "cpu" if first._data.__class__ is np.ndarray else "cuda"
    fast = STATE.autocast.get(device)
    rule = policy.get(device)
    if fast is None or rule is None:
        return args, kwargs
    to = fast if rule == "lower_precision_fp" else D.float32

    def cast(a):
        if not isinstance(a, Tensor) or a._data.dtype not in D.FLOATING_NP or a.dtype is D.float64 or \
                a.dtype is to or (a._data.__class__ is np.ndarray) != (device == "cpu"):
            return a
        return _cached_cast(a, to) if to is fast else a.to(to)
    return tuple(cast(a) for a in args), {k: cast(v) for k, v in kwargs.items()}


def _cached_cast(t, to):
    """``t.to(to)``; a float32 leaf that requires grad (a weight) is cast once per autocast region, as
    PyTorch's autocast caches it (the cache is dropped when the outermost region exits). A cast made under
    no_grad is kept apart from one made with grad mode on, which has a grad_fn."""
    if not (STATE.autocast_cache_enabled and t._requires_grad and t.grad_fn is None and t._base is None
            and t.dtype is D.float32):
        return t.to(to)
    cache = STATE.autocast_cache
    if cache is None:
        cache = STATE.autocast_cache = {}
    key = (id(t), to, STATE.grad_enabled)
    hit = cache.get(key)
    if hit is None or hit[0] is not t:
        hit = cache[key] = (t, t.to(to))
    return hit[1]


INPLACE = {}  # Tensor method name -> the out-of-place function its in-place form name_ runs (see _inplace)
OPERATORS = {}  # Tensor.__op__ -> the function it runs (__rX__ with the operands swapped, __iX__ in place)
NN = {}  # nn module class name -> the entry it applies (generated in nn/modules/activation.py)


def register(op):
    """Add an entry to the table and publish its ``call`` as the entry says (api, in-place, operators)."""
    if op.name in OPS:
        raise ValueError("op %r defined twice" % op.name)
    if op.types.autocast and getattr(op.exposure.call, "autocast_entry", None) is None:
        raise ValueError("op %r has an autocast policy: its call must be an @autocasts function" % op.name)
    OPS[op.name] = op
    if op.exposure.api:
        export(*op.exposure.api, method=op.exposure.method, function=op.exposure.function, inplace=op.exposure.inplace,
               operators=op.exposure.operators)(op.exposure.call)
    if op.exposure.module:
        NN[op.exposure.module] = op
    return op


def export(*names, method=True, function=True, inplace=False, operators=()):
    """Decorator: publish an API function as jitgrad.<name> and/or Tensor.<name>, with an in-place
    Tensor.<name>_ form (``inplace``: True for every name, or the names that have one) and as
    Python operators."""
    def deco(fn):
        public = _typed(fn) if function else fn
        for n in names or (fn.__name__,):
            if function:
                FUNCTIONS[n] = public
            if method:
                METHODS[n] = fn
            if inplace is True or n in (inplace or ()):
                INPLACE[n] = fn
        for name in operators:
            OPERATORS[name] = fn
        return fn
    return deco


_TENSOR_PARAMS = ("input", "tensor", "other", "mat2", "vec", "vec2", "index", "src", "mask", "condition")


def _typed(fn):
    """jitgrad.<fn> with PyTorch's TypeError, not an AttributeError, when a tensor argument is something else (the
    check runs only on the error path: a normal call pays one frame)."""
    params = list(inspect.signature(fn).parameters)
    if not any(p in _TENSOR_PARAMS for p in params):
        return fn

    @functools.wraps(fn)
    def typed(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except AttributeError:
            for i, p in enumerate(params):
                x = args[i] if i < len(args) else kwargs.get(p, fn)
                if p in _TENSOR_PARAMS and x is not fn and not isinstance(x, Tensor):
                    raise TypeError("%s(): argument '%s' (position %d) must be Tensor, not %s"
                                    % (fn.__name__, p, i + 1, type(x).__name__)) from None
            raise
    return typed


# ------------------------------------------------------------------ sample inputs
# A sample is (args, kwargs) for the op's public callable: ``op.exposure.call`` if the entry sets one, else
# ``jitgrad.<op.name>``. The generated tests turn the NumPy arrays in args (also inside lists and
# tuples: cat's tensors, index keys) and the array-valued kwargs into tensors, float ones requiring
# grad; ``op.tests.ref`` takes the same (args, kwargs) with the arrays. Non-contiguous arrays stay
# non-contiguous (from_numpy).
def _arr(rng, shape, lo, hi, dtype):
    if np.dtype(dtype).kind == "b":
        return np.asarray(rng.random(shape) > 0.5)
    if np.dtype(dtype).kind in "iu":  # the integers inside the domain (or around it, if none is inside)
        a, b = int(np.ceil(lo)), int(np.floor(hi))
        a, b = (a, b) if a <= b else (int(np.floor(lo)), int(np.ceil(hi)))
        return np.asarray(rng.integers(a, b + 1, size=shape), dtype=dtype)
    a = rng.uniform(lo, hi, size=shape)
    if np.dtype(dtype).kind == "c":  # both parts in the domain's range
        a = a + 1j * rng.uniform(lo, hi, size=shape)
    return np.asarray(a, dtype=dtype)


def _noncontig(rng, shape, lo, hi, dtype):
    return _arr(rng, shape[::-1], lo, hi, dtype).T


def joined(*sample_fns):
    """Samples of several sample functions, one list (e.g. an op with and without a keyword)."""
    def samples(rng, dtype):
        return [s for fn in sample_fns for s in fn(rng, dtype)]
    return samples


def unary_samples(lo=-2.0, hi=2.0, **kwargs):
    def samples(rng, dtype):
        return [((_arr(rng, s, lo, hi, dtype),), dict(kwargs)) for s in [(), (5,), (2, 3)]] + \
               [((_noncontig(rng, (3, 2), lo, hi, dtype),), dict(kwargs))]
    return samples


def binary_samples(a=(-2.0, 2.0), b=(-2.0, 2.0), scalar=1.5, **kwargs):
    def samples(rng, dtype):
        A = lambda s: _arr(rng, s, a[0], a[1], dtype)  # noqa: E731
        B = lambda s: _arr(rng, s, b[0], b[1], dtype)  # noqa: E731
        out = [((A(()), B(())), {}), ((A((4,)), B((4,))), {}), ((A((2, 3)), B((3,))), {}),
               ((A((2, 1)), B((1, 3))), {}), ((A((2, 3)), B(())), {}),
               ((_noncontig(rng, (3, 2), a[0], a[1], dtype), B((3, 2))), {})]
        if scalar is not None:
            out += [((A((2, 3)), scalar), {}), ((scalar, B((2, 3))), {})]
        return [(args, dict(kwargs, **kw)) for args, kw in out]
    return samples
