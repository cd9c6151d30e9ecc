"""Tensor factories: tensor, from_numpy, zeros, ones, full, arange, random tensors, *_like and new_*.

Also as_tensor, empty, linspace, eye. Random factories draw from a jitgrad.Generator (see _generator). No factory is affected by no_grad.
"""
import math
import numbers
import warnings

import ml_dtypes
import numpy as np

from . import _dtype as D
from . import _memory_format as MF
from ._device import DEFAULT as DEFAULT_DEVICE, backend, cuda_backend, to_device
from ._generator import default_generator, get_rng_state, initial_seed, manual_seed, numpy_rng, seed, set_rng_state  # noqa: F401
from ._grad_mode import SPECIAL, STATE
from ._tensor import Tensor



def generator():
    """The default generator's NumPy stream (dropout, checkpoint's saved random state)."""
    return numpy_rng(None)


def _leaf(data, dtype, requires_grad, device=None):
    if dtype is not None:
        d = D.to_dtype(dtype)
        if data.dtype != d.np:
            data = data.astype(d.np)
    if device is None:
        device = DEFAULT_DEVICE[0]  # set_default_device's; None: the CPU
    if device is not None and to_device(device).type == "cuda":
        data = cuda_backend().from_host(data)
    t = Tensor._wrap(data)
    if requires_grad:
        t._set_requires_grad(True, "Only Tensors of floating point and complex dtype can require gradients")
    return t


def _check_ragged(data, dim=0):
    """PyTorch's errors for nested sequences of unequal lengths or depths."""
    if isinstance(data, (list, tuple)) and data:
        first = data[0]
        n = len(first) if isinstance(first, (list, tuple)) else None
        for item in data:
            m = len(item) if isinstance(item, (list, tuple)) else None
            if n is not None and m is None:
                raise TypeError("not a sequence")
            if n is None and m is not None:
                raise TypeError("'%s' object cannot be interpreted as an integer" % type(item).__name__)
            if m != n:
                raise ValueError("expected sequence of length %s at dim %d (got %s)" % (n, dim + 1, m))
            _check_ragged(item, dim + 1)


def _infer_array(data, dtype=None):
    """A NumPy array of ``data``. Without ``dtype``, Python floats become the default dtype; with one,
    they are kept in float64 for the caller's conversion. Python numbers are checked as PyTorch
    checks them (arrays convert as NumPy's astype does): an int must fit int64 unless ``dtype`` is
    not an integer type, and every number must fit an integer ``dtype``."""
    if isinstance(data, Tensor):
        return data._host()
    if isinstance(data, np.generic) and data.dtype.kind in "biufc":
        data = np.asarray(data)  # a NumPy scalar keeps its dtype, as an array does
    if isinstance(data, np.ndarray):
        if data.dtype.kind not in "biufc":
            raise TypeError("can't convert np.ndarray of type numpy.%s. The only supported types are: float64, "
                            "float32, float16, complex64, complex128, int64, int32, and bool." % data.dtype.name)
        return np.asarray(data)  # a subclass (np.memmap) as the CPU array it is
    if isinstance(data, (str, bytes)):
        raise TypeError("new(): invalid data type '%s'" % type(data).__name__)
    try:
        _check_ragged(data)
    except (TypeError, ValueError):
        _check_leaves(data)  # PyTorch reads the element types before the lengths
        raise
    if isinstance(data, (list, tuple)) and any(isinstance(x, Tensor) for x in _flat(data)):
        data = _tensors_to_lists(data)
    try:
        arr = np.array(data)
    except ValueError as e:
        raise ValueError(str(e)) from None
    kind = arr.dtype.kind
    if kind not in "bifc" or kind == "f" and isinstance(_first(data), int) and arr.max() >= 2.0 ** 63:
        arr = _unusual(data, arr, dtype)  # (the last: ints beyond int64 among int64 ones, which NumPy reads as floats)
        kind = arr.dtype.kind
    if kind in "iu":
        arr = arr.astype(np.int64)
    elif kind == "f" and dtype is None:
        arr = arr.astype(D.get_default_dtype().np)
    elif kind == "c" and dtype is None:  # Python complex numbers: the default dtype's complex twin, as PyTorch
        arr = arr.astype(D.get_default_dtype().to_complex().np)
    if dtype is not None and dtype.category == 1 and arr.size and kind in "if":
        info = np.iinfo(dtype.np)
        if arr.dtype.kind == "f" and not np.isfinite(arr).all() or arr.min() < info.min or arr.max() > info.max:
            raise RuntimeError("value cannot be converted to type %s without overflow" % dtype.name)
    return arr


def _unusual(data, arr, dtype):
    """The array of nested Python numbers where NumPy's reading differs from PyTorch's: ints beyond int64
    (NumPy reads them as uint64, or as float64 among int64 ones), strings and other objects."""
    if arr.dtype.kind in "biuf":
        if arr.dtype.kind == "u" and arr.max() <= np.iinfo(np.int64).max:
            return arr  # NumPy unsigned scalars that fit
        ints = all(isinstance(x, (numbers.Integral, np.integer)) for x in _leaves(data))
    else:
        first = _first(data)
        if isinstance(first, (str, bytes)):
            raise ValueError("too many dimensions '%s'" % type(first).__name__)
        _check_leaves(data)
        if arr.dtype != object:
            raise RuntimeError("Could not infer dtype of %s" % type(first).__name__)
        ints = all(isinstance(x, (numbers.Integral, np.integer)) for x in _leaves(data))
    if not ints:  # a float among them: PyTorch reads every number as a double
        return arr if arr.dtype.kind == "f" else np.array(data, dtype=np.float64)
    if dtype is None or dtype.category == 1:
        raise ValueError("Overflow when unpacking long long")
    return np.array(data, dtype=np.float64)  # an explicit float or bool dtype takes any int


def _check_leaves(data):
    """PyTorch's error for the first element that is not a number (a str is a type error)."""
    for x in _leaves(data):
        if not isinstance(x, (numbers.Number, np.generic, Tensor)):
            if isinstance(x, (str, bytes)):
                raise TypeError("new(): invalid data type '%s'" % type(x).__name__)
            raise RuntimeError("Could not infer dtype of %s" % type(x).__name__)


def _leaves(data):
    return _flat(data) if isinstance(data, (list, tuple)) else (data,)


def _flat(data):
    for x in data:
        if isinstance(x, (list, tuple)):
            yield from _flat(x)
        else:
            yield x


def _first(data):
    while isinstance(data, (list, tuple)) and data:
        data = data[0]
    return data


def _tensors_to_lists(data):
    if isinstance(data, Tensor):
        return data.item() if data.ndim == 0 else data.tolist()
    if isinstance(data, (list, tuple)):
        return [_tensors_to_lists(x) for x in data]
    return data


def tensor(data, *, dtype=None, device=None, requires_grad=False, pin_memory=False):
    """A new leaf tensor holding a copy of ``data`` (a number, nested sequence, array or tensor)."""
    dtype = D.to_dtype(dtype) if dtype is not None else None
    arr = _infer_array(data, dtype)
    arr = np.array(arr, dtype=dtype.np if dtype is not None else D.from_np(arr.dtype).np, copy=True)
    return _leaf(arr, None, requires_grad, device)


def as_tensor(data, dtype=None, device=None):
    """Like tensor(), but shares memory when no conversion is needed: with a NumPy array, a tensor, or a
    GPU array of another library (CuPy, PyTorch, numba) through ``__cuda_array_interface__``."""
    if isinstance(data, Tensor):
        return data.to(device=device, dtype=dtype)
    if _is_gpu_array(data):
        return _from_cuda_array(data).to(device=device, dtype=dtype)
    if isinstance(data, np.ndarray) and data.dtype in D.FROM_NP and (dtype is None or D.to_dtype(dtype).np == data.dtype):
        return _leaf(_shared(data), None, False, device)
    return tensor(data, dtype=dtype, device=device)


def _shared(ndarray):
    """A user's array to hold without a copy: a subclass (np.memmap) as the plain CPU array it is;
    PyTorch's warning if it is not writable (in-place ops on the tensor then raise, see _inplace)."""
    if not ndarray.flags.writeable:
        warnings.warn("The given NumPy array is not writable, and jitgrad does not support non-writable tensors. "
                      "This means writing to this tensor will result in an error. You may want to copy the array "
                      "to protect its data or make it writable before converting it to a tensor.",
                      UserWarning, stacklevel=3)
    return np.asarray(ndarray)


asarray = as_tensor


def _is_gpu_array(obj):
    return not isinstance(obj, np.ndarray) and (hasattr(obj, "__cuda_array_interface__") or
                                                 hasattr(obj, "copy_to_host"))  # numba's own device arrays


def _from_cuda_array(obj):
    """A CUDA tensor on the memory of a foreign GPU array (no copy)."""
    to_device("cuda")
    from numba import cuda
    arr = obj if hasattr(obj, "copy_to_host") else cuda.as_cuda_array(obj)
    if np.dtype(arr.dtype) not in D.FROM_NP:
        raise TypeError("can't convert a CUDA array of type %s. The only supported types are: float64, float32, "
                        "float16, complex64, complex128, int64, int32, and bool." % np.dtype(arr.dtype).name)
    return Tensor._wrap(arr)


def from_dlpack(ext_tensor):
    """A tensor sharing memory with another library's array: GPU arrays through
    ``__cuda_array_interface__``, host arrays through DLPack (``__dlpack__``)."""
    if _is_gpu_array(ext_tensor):
        return _from_cuda_array(ext_tensor)
    if not hasattr(ext_tensor, "__dlpack__"):
        raise TypeError("from_dlpack expects an object with __dlpack__ or __cuda_array_interface__, got "
                        + type(ext_tensor).__name__)
    return from_numpy(np.from_dlpack(ext_tensor))


def from_numpy(ndarray):
    """A tensor sharing memory with ``ndarray`` (no copy): writes to either show in both."""
    if not isinstance(ndarray, np.ndarray):
        raise TypeError("expected np.ndarray (got %s)" % type(ndarray).__name__)
    if ndarray.dtype not in D.FROM_NP:
        if not ndarray.dtype.isnative and ndarray.dtype.newbyteorder("=") in D.FROM_NP:
            raise ValueError("given numpy array has byte order different from the native byte order. Conversion "
                             "between byte orders is currently not supported.")
        raise TypeError("can't convert np.ndarray of type numpy.%s. The only supported types are: float64, float32, "
                        "float16, complex64, complex128, int64, int32, and bool." % ndarray.dtype.name)
    return Tensor._wrap(_shared(ndarray))


def _size(size, name="zeros", itemsize=8):
    if not size:
        raise TypeError('%s() missing 1 required positional arguments: "size"' % name)
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    for pos, s in enumerate(size, 1):
        if not isinstance(s, (numbers.Integral, np.integer)) or isinstance(s, bool):
            raise TypeError("%s(): argument 'size' (position 1) must be tuple of ints, not %s"
                            % (name, type(s).__name__))
        if not -2 ** 63 <= s < 2 ** 63:
            raise TypeError("%s(): argument 'size' failed to unpack the object at pos %d with error "
                            "\"Overflow when unpacking long long\"" % (name, pos))
        if s < 0 and name == "zeros":
            raise RuntimeError("zeros: Dimension size must be non-negative.")
        if s < 0:
            raise RuntimeError("Trying to create tensor with negative dimension %d: [%s]"
                               % (s, ", ".join(map(str, size))))
    size = tuple(int(s) for s in size)
    if math.prod(size) * itemsize > 2 ** 63 - 1:  # PyTorch's bound, and NumPy's (bytes in an intp)
        raise RuntimeError("Storage size calculation overflowed with sizes=[%s]" % ", ".join(map(str, size)))
    return size


def _dt(dtype, default=None):
    return D.to_dtype(dtype) if dtype is not None else (default or D.get_default_dtype())


def zeros(*size, dtype=None, device=None, requires_grad=False, out=None):
    return _leaf(np.zeros(_size(size, "zeros", _dt(dtype).itemsize), _dt(dtype).np), None, requires_grad, device)


def ones(*size, dtype=None, device=None, requires_grad=False, out=None):
    return _leaf(np.ones(_size(size, "ones", _dt(dtype).itemsize), _dt(dtype).np), None, requires_grad, device)


def empty(*size, dtype=None, device=None, requires_grad=False, memory_format=MF.contiguous_format, out=None):
    shape = _size(size, "empty", _dt(dtype).itemsize)
    if MF.check(memory_format, "empty") is MF.preserve_format:
        raise RuntimeError("unsupported memory format Preserve")
    return _laid_out(shape, MF.dim_order(memory_format, len(shape)), lambda shape: _leaf(
        np.empty(shape, _dt(dtype).np), None, requires_grad, device))


def full(size, fill_value, *, dtype=None, device=None, requires_grad=False):
    if dtype is None:
        dtype = D.scalar_dtype(fill_value)
    if not isinstance(size, (tuple, list)):
        raise TypeError("full(): argument 'size' (position 1) must be tuple of ints, not " + type(size).__name__)
    d = _dt(dtype)
    return _leaf(np.full(_size((size,), "full", d.itemsize), D.check_scalar(fill_value, d), d.np), None, requires_grad, device)


def _like(input, memory_format, name, make):
    """``make(shape)``'s tensor for a ``*_like`` factory, laid out in ``memory_format`` (preserve_format: as
    ``input`` is, where its elements are dense): made in the layout's dim order, then permuted back, so its
    elements are filled in memory order, as PyTorch fills them."""
    shape = input.shape
    if memory_format is MF.preserve_format and len(shape) < 2:
        return make(shape)
    if MF.check(memory_format, name) is MF.preserve_format:
        return _laid_out(shape, MF.preserved_order(shape, input._data.strides, input.is_contiguous()), make)
    return _laid_out(shape, MF.dim_order(memory_format, len(shape)), make)


def _laid_out(shape, order, make):
    """``make(shape)``'s tensor with its dims laid out in ``order``, outermost first."""
    if order == tuple(range(len(shape))):
        return make(shape)
    t = make(tuple(shape[d] for d in order))
    t._data = backend(t._data).transpose(t._data, MF.unpermute(order))
    return t


def zeros_like(input, *, dtype=None, device=None, requires_grad=False, memory_format=MF.preserve_format):
    return _like(input, memory_format, "zeros_like", lambda shape: zeros(
        shape, dtype=dtype or input.dtype, device=device or input.device, requires_grad=requires_grad))


def ones_like(input, *, dtype=None, device=None, requires_grad=False, memory_format=MF.preserve_format):
    return _like(input, memory_format, "ones_like", lambda shape: ones(
        shape, dtype=dtype or input.dtype, device=device or input.device, requires_grad=requires_grad))


def empty_like(input, *, dtype=None, device=None, requires_grad=False, memory_format=MF.preserve_format):
    return _like(input, memory_format, "empty_like", lambda shape: empty(
        shape, dtype=dtype or input.dtype, device=device or input.device, requires_grad=requires_grad))


def full_like(input, fill_value, *, dtype=None, device=None, requires_grad=False, memory_format=MF.preserve_format):
    return _like(input, memory_format, "full_like", lambda shape: full(
        shape, fill_value, dtype=dtype or input.dtype, device=device or input.device, requires_grad=requires_grad))


def rand_like(input, *, generator=None, dtype=None, device=None, requires_grad=False,
              memory_format=MF.preserve_format):
    return _like(input, memory_format, "rand_like", lambda shape: rand(
        shape, generator=generator, dtype=dtype or input.dtype, device=device or input.device,
        requires_grad=requires_grad))


def randn_like(input, *, generator=None, dtype=None, device=None, requires_grad=False,
               memory_format=MF.preserve_format):
    return _like(input, memory_format, "randn_like", lambda shape: randn(
        shape, generator=generator, dtype=dtype or input.dtype, device=device or input.device,
        requires_grad=requires_grad))


def randint_like(input, low=0, high=None, *, generator=None, dtype=None, device=None, requires_grad=False,
                 memory_format=MF.preserve_format):
    if high is None:
        low, high = 0, low
    return _like(input, memory_format, "randint_like", lambda shape: randint(
        low, high, shape, generator=generator, dtype=dtype or input.dtype, device=device or input.device,
        requires_grad=requires_grad))


def arange(start, end=None, step=1, *, dtype=None, device=None, requires_grad=False):
    if end is None:
        start, end = 0, start
    if step == 0:
        raise RuntimeError("step must be nonzero")
    if (end - start) / step < 0:
        raise RuntimeError("upper bound and lower bound inconsistent with step sign")
    vals = (start, end, step)
    if dtype is None:
        is_float = any(isinstance(v, float) or (isinstance(v, Tensor) and v.dtype.is_floating_point) for v in vals)
        dtype = D.get_default_dtype() if is_float else D.int64
    n = max(0, math.ceil((float(end) - float(start)) / float(step)))
    data = (start + np.arange(n, dtype=np.float64) * step) if _dt(dtype).is_floating_point else \
        np.arange(int(start), int(end), int(step), dtype=np.int64)
    return _leaf(data.astype(_dt(dtype).np), None, requires_grad, device)


def linspace(start, end, steps, *, dtype=None, device=None, requires_grad=False):
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")
    return _leaf(np.linspace(float(start), float(end), int(steps)).astype(_dt(dtype).np), None, requires_grad, device)


def logspace(start, end, steps, base=10.0, *, dtype=None, device=None, requires_grad=False):
    return _leaf((base ** np.linspace(float(start), float(end), int(steps))).astype(_dt(dtype).np), None,
                 requires_grad, device)


def eye(n, m=None, *, dtype=None, device=None, requires_grad=False):
    return _leaf(np.eye(n, n if m is None else m, dtype=_dt(dtype).np), None, requires_grad, device)


def _float_only(d, kernel):
    if not d.is_inexact:
        raise NotImplementedError("\"%s\" not implemented for '%s'" % (kernel, d.scalar_type))
    return d


def _random(draw, size, name, generator, dtype, device, requires_grad, out=None):
    """A leaf of ``draw(numpy_rng, shape)`` (a host array, moved to ``device``, in ``dtype``), or ``out`` holding it."""
    shape = _size(size, name, dtype.itemsize)
    if SPECIAL[0] and STATE.vmap is not None and generator is None and out is None:
        # inside jitgrad.vmap: drawn by the table's fill entries, so that vmap's ``randomness`` applies
        return STATE.vmap.factory(name, shape, dtype, device).requires_grad_(requires_grad)
    rng = numpy_rng(generator, device or (out.device if out is not None else "cpu"))
    return write_out(_leaf(draw(rng, shape), dtype, requires_grad, device), out)


def write_out(result, out):
    """``result``, or ``out`` (a tensor of the same shape) with ``result`` copied into it; jitgrad does not
    resize an ``out=`` tensor as PyTorch does, so another shape is an error."""
    if out is None:
        return result
    if not isinstance(out, Tensor):
        raise TypeError("argument 'out' must be Tensor, not %s" % type(out).__name__)
    if tuple(out.shape) != tuple(result.shape):
        raise RuntimeError("out= tensor of shape [%s] cannot hold the result of shape [%s] (jitgrad does not resize "
                           "out= tensors)" % (", ".join(map(str, out.shape)), ", ".join(map(str, result.shape))))
    out.copy_(result.to(device=out.device))
    return out


def _out_dtype(dtype, out):
    return dtype if dtype is not None or out is None else out.dtype


def rand(*size, generator=None, dtype=None, device=None, requires_grad=False, out=None, layout=None,
         pin_memory=False):
    """Uniform samples on [0, 1)."""
    d = _float_only(_dt(_out_dtype(dtype, out)), "check_uniform_bounds")
    if d.compute is not d:  # float16/bfloat16: multiples of 2^-digits below 1, as PyTorch draws them (exact in d)
        digits = ml_dtypes.finfo(d.np).nmant + 1
        return _random(lambda r, s: r.integers(0, 1 << digits, s) * 2.0 ** -digits, size, "rand", generator, d, device,
                       requires_grad, out)
    if d.is_complex:  # real and imaginary parts each uniform on [0, 1), as PyTorch draws them
        return _random(lambda r, s: _complex_draw(r.random(s + (2,), dtype=d.to_real().np)), size, "rand", generator,
                       d, device, requires_grad, out)
    return _random(lambda r, s: r.random(s, dtype=d.np), size, "rand", generator, d, device, requires_grad, out)


def randn(*size, generator=None, dtype=None, device=None, requires_grad=False, out=None, layout=None,
          pin_memory=False):
    """Standard normal samples."""
    d = _float_only(_dt(_out_dtype(dtype, out)), "normal_kernel_cpu")
    if d.is_complex:  # real and imaginary parts each of variance 1/2 (E|z|^2 = 1), as PyTorch draws them
        return _random(lambda r, s: _complex_draw(r.standard_normal(s + (2,), dtype=d.to_real().np) * np.sqrt(0.5)),
                       size, "randn", generator, d, device, requires_grad, out)
    return _random(lambda r, s: r.standard_normal(s, dtype=d.compute.np), size, "randn", generator, d, device, requires_grad,
                   out)


def _complex_draw(parts):
    """Complex values from a real array of shape (..., 2): (real, imaginary) pairs."""
    parts = np.ascontiguousarray(parts)
    return parts.view(np.complex64 if parts.dtype == np.float32 else np.complex128)[..., 0]


def randint(low=0, high=None, size=None, *, generator=None, dtype=None, device=None, requires_grad=False,
            out=None, layout=None, pin_memory=False):
    """Integers drawn uniformly from [low, high), as int64 unless ``dtype`` says otherwise."""
    if size is None:
        low, high, size = 0, low, high
    if high is None:
        low, high = 0, low
    if size is None:
        raise TypeError("randint() missing 1 required positional arguments: \"size\"")
    low, high = int(low), int(high)
    if low >= high:
        raise RuntimeError("random_ expects 'from' to be less than 'to', but got from=%d >= to=%d" % (low, high))
    d = _dt(_out_dtype(dtype, out), D.int64)
    return _random(lambda r, s: r.integers(low, high, s).astype(d.np), (size,), "randint", generator, d, device,
                   requires_grad, out)


def randperm(n, *, generator=None, dtype=None, device=None, requires_grad=False, out=None, layout=None,
             pin_memory=False):
    """A random permutation of 0 .. n-1."""
    d = _dt(_out_dtype(dtype, out), D.int64)
    n = int(n)
    if n < 0:
        raise RuntimeError("Trying to create tensor with negative dimension %d: [%d]" % (n, n))
    return _random(lambda r, s: r.permutation(n).astype(d.np), (n,), "randperm", generator, d, device, requires_grad,
                   out)


def normal_factory(mean, std, size, generator=None, dtype=None, device=None, requires_grad=False, out=None):
    """normal(mean: float, std: float, size): samples of one normal distribution."""
    if std < 0:
        raise RuntimeError("normal expects std >= 0.0, but found std %s" % _num(std))
    d = _float_only(_dt(_out_dtype(dtype, out)), "normal_kernel_cpu")
    return _random(lambda r, s: (r.standard_normal(s, dtype=d.np) * d.np.type(std) + d.np.type(mean)).astype(d.np),
                   (size,), "normal", generator, d, device, requires_grad, out)


def _num(x):
    """A number as PyTorch prints it in messages (-1.0 as -1)."""
    return "%g" % x if isinstance(x, float) else str(x)


def scalar_tensor(value, *, dtype=None, device=None, requires_grad=False):
    return full((), value, dtype=dtype or D.get_default_dtype(), device=device, requires_grad=requires_grad)


# ------------------------------------------------------------------ Tensor.new_* (same dtype as self by default)
def _new(fn):
    def method(self, *args, dtype=None, device=None, requires_grad=False, **kwargs):
        return fn(*args, dtype=dtype or self.dtype, device=device or self.device, requires_grad=requires_grad, **kwargs)
    method.__name__ = "new_" + fn.__name__
    return method


METHODS = {"new_zeros": _new(zeros), "new_ones": _new(ones), "new_empty": _new(empty), "new_full": _new(full),
           "new_tensor": lambda self, data, dtype=None, device=None, requires_grad=False:
           tensor(data, dtype=dtype or self.dtype, device=device, requires_grad=requires_grad)}

__all__ = ["tensor", "as_tensor", "asarray", "from_numpy", "from_dlpack", "zeros", "ones", "empty", "full", "zeros_like", "ones_like",
           "empty_like", "full_like", "rand_like", "randn_like", "randint_like", "arange", "linspace", "logspace", "eye",
           "rand", "randn", "randint", "randperm", "scalar_tensor", "manual_seed", "seed", "initial_seed",
           "get_rng_state", "set_rng_state", "default_generator"]
