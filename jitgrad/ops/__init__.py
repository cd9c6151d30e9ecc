"""The op table (one entry per op, grouped by kind) and what is generated from it:
Tensor methods, operators, in-place variants and the ``jitgrad.*`` functions."""
from .._dtype import check_scalar
from .._inplace import inplace, setitem
from .._op import broadcast_shapes
from .._tensor import Tensor
from . import elementwise, indexing, linalg, reduction, shape, softmax  # noqa: F401  (registers the entries)
from . import conv, layers  # noqa: F401,E402  (nn ops: convolution, pooling, linear, embedding, pad)
from ._table import FUNCTIONS, METHODS, OPS  # noqa: F401  (OPS, FUNCTIONS: the public registry)
from .shape import cast, copy_from, fill, move  # noqa: F401

# Ops with an in-place form (name_): run out of place on a stand-in, then write back (see _inplace).
INPLACE = ["add", "sub", "mul", "div", "pow", "clamp", "clamp_min", "clamp_max", "clip", "relu", "sigmoid", "tanh",
           "exp", "expm1", "log", "log1p", "sqrt", "rsqrt", "reciprocal", "neg", "abs", "sign", "square", "sin", "cos",
           "tan", "floor", "ceil", "round", "trunc", "masked_fill", "leaky_relu", "elu", "silu", "gelu", "remainder",
           "scatter_add", "floor_divide", "maximum", "minimum", "atan2", "logical_not", "subtract", "multiply",
           "divide", "true_divide", "erf"]


def _inplace_method(fn):
    def method(self, *args, **kwargs):
        return inplace(self, fn, args, kwargs)
    method.__name__ = fn.__name__ + "_"
    return method


def _swap(fn):
    def method(self, other):
        return fn(other, self)
    return method


def _operators():
    e = elementwise
    ops = {
        "__add__": e.add, "__radd__": _swap(e.add), "__sub__": e.sub, "__rsub__": _swap(e.sub),
        "__mul__": e.mul, "__rmul__": _swap(e.mul), "__truediv__": e.div, "__rtruediv__": _swap(e.div),
        "__floordiv__": e.floor_divide, "__rfloordiv__": _swap(e.floor_divide), "__mod__": e.remainder,
        "__rmod__": _swap(e.remainder), "__pow__": e.pow, "__rpow__": _swap(e.pow),
        "__matmul__": _tensor_operand(linalg.matmul), "__rmatmul__": _tensor_operand(_swap(linalg.matmul)),
        "__neg__": METHODS["neg"], "__abs__": METHODS["abs"],
        "__pos__": lambda self: self, "__invert__": _invert,
        "__eq__": METHODS["eq"], "__ne__": METHODS["ne"], "__lt__": METHODS["lt"], "__le__": METHODS["le"],
        "__gt__": METHODS["gt"], "__ge__": METHODS["ge"],
        "__and__": _bitwise("logical_and"), "__or__": _bitwise("logical_or"), "__xor__": _bitwise("logical_xor"),
        "__rand__": _bitwise("logical_and"), "__ror__": _bitwise("logical_or"), "__rxor__": _bitwise("logical_xor"),
        "__iadd__": METHODS_INPLACE["add_"], "__isub__": METHODS_INPLACE["sub_"], "__imul__": METHODS_INPLACE["mul_"],
        "__itruediv__": METHODS_INPLACE["div_"], "__ipow__": METHODS_INPLACE["pow_"],
    }
    return ops


def _tensor_operand(fn):
    """An operator taking tensors only: anything else gets Python's TypeError (unsupported operand type(s))."""
    def method(self, other):
        return fn(self, other) if isinstance(other, Tensor) else NotImplemented
    return method


def _invert(self):
    if self.dtype.name != "bool":
        raise TypeError("~ (bitwise_not) is only supported on bool tensors here, got " + self.dtype.name)
    return METHODS["logical_not"](self)


def _bitwise(name):
    def method(self, other):
        for t in (self, other):
            if isinstance(t, Tensor) and t.dtype.name != "bool":
                raise TypeError("bitwise operators (&, |, ^) are supported on bool tensors only, got " + t.dtype.name)
        return METHODS[name](self, other)
    return method


def _setitem(self, key, value):
    setitem(self, key, value)


def _zero_(self):
    return _fill_(self, 0)


def _fill_(self, value):
    if isinstance(value, Tensor):
        if value.ndim:
            raise RuntimeError("fill_ only supports 0-dimension value tensor but got tensor with %d dimensions."
                               % value.ndim)
    else:
        check_scalar(value, self.dtype)
    return inplace(self, fill, (value,), {})


def _copy_(self, src, non_blocking=False):
    if not isinstance(src, Tensor):
        raise TypeError("copy_(): argument 'other' (position 1) must be Tensor, not " + type(src).__name__)
    out_shape = broadcast_shapes(tuple(self.shape), tuple(src.shape))  # PyTorch's messages for what can't broadcast
    if out_shape != tuple(self.shape):
        raise RuntimeError("output with shape [%s] doesn't match the broadcast shape [%s]"
                           % (", ".join(map(str, self.shape)), ", ".join(map(str, out_shape))))
    return inplace(self, copy_from, (src,), {})


METHODS_INPLACE = {}


def install():
    for name, fn in METHODS.items():
        setattr(Tensor, name, fn)
    for name in INPLACE:
        if name in METHODS:
            METHODS_INPLACE[name + "_"] = _inplace_method(METHODS[name])
    METHODS_INPLACE.update(zero_=_zero_, fill_=_fill_, copy_=_copy_)
    for name, fn in METHODS_INPLACE.items():
        setattr(Tensor, name, fn)
    for name, fn in _operators().items():
        setattr(Tensor, name, fn)
    Tensor.__setitem__ = _setitem
    Tensor.__hash__ = lambda self: id(self)


install()
