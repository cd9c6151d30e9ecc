"""dtypes and PyTorch's type promotion."""
import builtins

import ml_dtypes
import numpy as np


class dtype:
    """A tensor element type (``jitgrad.float32`` ...), wrapping a NumPy dtype."""
    __slots__ = ("name", "np", "is_floating_point", "is_complex", "is_inexact", "is_signed", "itemsize", "category", "tensor_type",
                 "scalar_type", "compute", "_real")

    def __init__(self, name, np_dtype, category, tensor_type, compute=None):
        self.name = name
        self.np = np.dtype(np_dtype)
        self.category = category  # 0 bool, 1 integer, 2 floating point, 3 complex: promotion goes up
        self.is_floating_point = category == 2
        self.is_complex = category == 3
        self.is_inexact = category >= 2  # floating point or complex: the dtypes that can require grad
        self.is_signed = category != 0
        self.itemsize = self.np.itemsize
        self.tensor_type = tensor_type  # legacy name used in error messages: FloatTensor
        self.scalar_type = tensor_type[:-len("Tensor")]  # PyTorch's ScalarType name in error messages: Float
        # the dtype arithmetic on this one is computed in: float16 and bfloat16 are storage formats whose ops
        # run in float32 and round the result back (as PyTorch's CPU kernels do); the kernels never see them
        self.compute = self if compute is None else compute
        self._real = self

    def __repr__(self):
        return "jitgrad." + self.name

    def __reduce__(self):
        return (_by_name, (self.name,))

    def to_real(self):
        """The dtype of a complex dtype's real and imaginary parts (complex64 -> float32); others: itself."""
        return self._real

    def to_complex(self):
        """The complex dtype whose parts are this floating dtype (float64 -> complex128; float32 and the reduced
        floats -> complex64, since there is no complex32 here)."""
        if self.is_complex:
            return self
        return complex128 if self is float64 else complex64


bool_ = dtype("bool", np.bool_, 0, "BoolTensor")
int32 = dtype("int32", np.int32, 1, "IntTensor")
int64 = dtype("int64", np.int64, 1, "LongTensor")
float32 = dtype("float32", np.float32, 2, "FloatTensor")
float64 = dtype("float64", np.float64, 2, "DoubleTensor")
float16 = dtype("float16", np.float16, 2, "HalfTensor", compute=float32)
bfloat16 = dtype("bfloat16", ml_dtypes.bfloat16, 2, "BFloat16Tensor", compute=float32)  # NumPy has none: ml_dtypes'
complex64 = dtype("complex64", np.complex64, 3, "ComplexFloatTensor")
complex128 = dtype("complex128", np.complex128, 3, "ComplexDoubleTensor")
complex64._real, complex128._real = float32, float64

ALL = (bool_, int32, int64, float32, float64, float16, bfloat16, complex64, complex128)
COMPLEX_NP = frozenset((complex64.np, complex128.np))
REDUCED = tuple(d for d in ALL if d.compute is not d)  # the reduced-precision floats
REDUCED_NP = frozenset(d.np for d in REDUCED)
FLOATING_NP = frozenset(d.np for d in ALL if d.is_floating_point)
INEXACT_NP = FLOATING_NP | COMPLEX_NP  # the dtypes whose tensors carry gradients
# uint8 holds byte data (a generator's state, as PyTorch's ByteTensor); the ops are not built for it
uint8 = dtype("uint8", np.uint8, 1, "ByteTensor")
FROM_NP = {d.np: d for d in ALL + (uint8,)}
_NAMES = {d.name: d for d in ALL + (uint8,)}


def _by_name(name):
    return _NAMES[name]


_default_float = [float32]


def get_default_dtype():
    return _default_float[0]


def set_default_dtype(d):
    """Set the default float dtype (``jitgrad.set_default_dtype`` also clears the ops' cached result dtypes)."""
    if not isinstance(d, dtype) or not d.is_floating_point:
        raise TypeError("only floating-point types are supported as the default type")
    _default_float[0] = d


def from_np(np_dtype):
    """The jitgrad dtype of a NumPy dtype; other NumPy types map to the nearest supported one."""
    d = FROM_NP.get(np_dtype)
    if d is not None:
        return d
    np_dtype = np.dtype(np_dtype).newbyteorder("=")  # the values, in native byte order
    d = FROM_NP.get(np_dtype)
    if d is not None:
        return d
    if np_dtype.kind == "f":
        return float64 if np_dtype.itemsize > 4 else float32
    if np_dtype.kind in "iu":
        return int64 if np_dtype.itemsize >= 4 else int32
    if np_dtype.kind == "b":
        return bool_
    if np_dtype.kind == "c":
        return complex128 if np_dtype.itemsize > 8 else complex64
    raise TypeError(
        "can't convert np.ndarray of type numpy.%s. The only supported types are: float64, float32, "
        "float16, complex64, complex128, int64, int32, and bool." % np_dtype.name)


def to_dtype(d):
    """Accept a jitgrad dtype, a NumPy dtype or a Python type (``float``, ``int``, ``bool``)."""
    if isinstance(d, dtype):
        return d
    if d is builtins.float:
        return float64
    if d is builtins.int:
        return int64
    if d is builtins.bool:
        return bool_
    if d is builtins.complex:
        return complex128
    try:
        return from_np(np.dtype(d))
    except TypeError:
        raise TypeError("unsupported dtype %r" % (d,)) from None


def promote_types(a, b):
    if a is b:
        return a
    if a.category != b.category:
        hi, lo = (a, b) if a.category > b.category else (b, a)
        if hi.is_complex and lo.is_floating_point:  # complex64 with float64: complex128, as PyTorch
            return hi if hi.itemsize >= 2 * lo.itemsize else lo.to_complex()
        return hi
    if a.is_complex:
        return a if a.itemsize > b.itemsize else b
    if a.itemsize == b.itemsize:  # float16 and bfloat16: neither holds the other's values
        return float32
    return a if a.itemsize > b.itemsize else b


_C_NAMES = {"bool": "bool", "int32": "int", "int64": "int64_t", "float32": "float", "float64": "double",
            "float16": "c10::Half", "bfloat16": "c10::BFloat16", "complex64": "c10::complex<float>",
            "complex128": "c10::complex<double>"}
_RANGES = {int32: (-2 ** 31, 2 ** 31 - 1), int64: (-2 ** 63, 2 ** 63 - 1)}
_RANGES.update({d: (-float(ml_dtypes.finfo(d.np).max), float(ml_dtypes.finfo(d.np).max)) for d in (float32,) + REDUCED})


def check_scalar(value, d):
    """``value`` as a number stored into a ``d`` tensor (a fill value, a bound, alpha), or PyTorch's
    error where it does not fit: integers must be in range (NaN never is), floats finite or not."""
    if value.__class__ is complex or isinstance(value, np.complexfloating):
        if d.is_complex:
            return value
        raise RuntimeError("value cannot be converted to type %s without overflow" % _C_NAMES[d.name])
    r = _RANGES.get(d)
    if r is None or not (value.__class__ in (int, float) or isinstance(value, np.number)) or r[0] <= value <= r[1]:
        return value
    if d.category == 1 or value == value and abs(value) != float("inf"):
        raise RuntimeError("value cannot be converted to type %s without overflow" % _C_NAMES[d.name])
    return value


def scalar_dtype(value):
    """The dtype a Python number stands for when it is the only operand of its kind."""
    if isinstance(value, builtins.bool):
        return bool_
    if isinstance(value, builtins.int):
        return int64
    if isinstance(value, (builtins.complex, np.complexfloating)):
        return get_default_dtype().to_complex()
    return get_default_dtype()


def result_type(dims, zero_dims, scalars):
    """PyTorch's result type: tensors with dims, then 0-d tensors, then Python numbers.

    A lower tier only changes the result when it is of a higher category (bool < int < float < complex):
    ``float32_tensor * 2.5`` stays float32, ``int_tensor * 2.5`` becomes the default float; a complex lower
    tier keeps a floating result's precision (``float64_tensor * 1j`` is complex128, PyTorch's
    combine_categories).
    """
    result = None
    for tier in (dims, zero_dims, scalars):
        t = None
        for d in tier:
            t = d if t is None else promote_types(t, d)
        if t is None:
            continue
        if result is None or t.category > result.category:
            result = result.to_complex() if t.is_complex and result is not None and result.is_floating_point else t
    return result
