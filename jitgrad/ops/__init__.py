"""The op table (one entry per op, grouped by kind) and what is generated from it:
Tensor methods, operators, in-place variants and the ``jitgrad.*`` functions."""
from .._dtype import check_scalar
from .._inplace import inplace, setitem
from .._op import broadcast_shapes
from .._tensor import Tensor
from . import unary, elementwise, indexing, linalg, reduction, extrema, shape, join, softmax  # noqa: F401  (the entries)
from . import conv, pool, layers, loss  # noqa: F401,E402  (nn ops: convolution, pooling, linear, embedding, pad, losses)
from . import rnn, attention  # noqa: F401,E402  (recurrent cell steps, scaled dot-product attention)
from . import normalization  # noqa: F401,E402  (layer normalization)
from . import random  # noqa: F401,E402  (sampling: multinomial, bernoulli, normal, the in-place fills)
from . import special, sorting, scans, selection, linalg_extra, padding  # noqa: F401,E402  (special functions, sorting,
# scans, selections, the addmm family and einsum, non-constant padding)
from . import resampling, fold  # noqa: F401,E402  (interpolate, unfold and fold)
from . import special_functions  # noqa: F401,E402  (torch.special's gamma, Bessel and normal-distribution functions)
from . import grid_sample  # noqa: F401,E402  (affine_grid and grid_sample)
from . import shrink, pixel_shuffle  # noqa: F401,E402  (hardshrink, softshrink, threshold; pixel (un)shuffle)
from . import searching  # noqa: F401,E402  (searchsorted, bucketize, histc, histogram, take_along_dim, dist)
from . import composite  # noqa: F401,E402  (functions composed of table ops: isclose, addcmul, meshgrid, ...)
from . import complex  # noqa: F401,E402  (real/imag views, view_as_real/view_as_complex, complex, polar)
from . import decompositions, solvers, matrix_functions, products  # noqa: F401,E402  (torch.linalg)
from . import fft  # noqa: F401,E402  (torch.fft)
from . import eig  # noqa: F401,E402  (torch.linalg.eig, eigvals)
from ._table import FUNCTIONS, INPLACE, METHODS, NN, OPERATORS, OPS  # noqa: F401  (derived from the entries)
from .shape import cast, copy_from, fill, move  # noqa: F401


def _inplace_method(fn):
    def method(self, *args, **kwargs):
        return inplace(self, fn, args, kwargs)
    method.__name__ = fn.__name__ + "_"
    return method


def _swap(fn):
    def method(self, other):
        return fn(other, self)
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
    """Tensor methods, in-place forms and operators, as the entries and exported functions declare them."""
    for name, fn in METHODS.items():
        setattr(Tensor, name, fn)
    for name, fn in INPLACE.items():
        METHODS_INPLACE[name + "_"] = _inplace_method(fn)
    METHODS_INPLACE.update(zero_=_zero_, fill_=_fill_, copy_=_copy_)
    for name, fn in METHODS_INPLACE.items():
        setattr(Tensor, name, fn)
    for name, fn in OPERATORS.items():  # __rX__: the operands swapped; __iX__: the in-place form
        if name.startswith("__r") and name not in ("__radd__", "__rmul__"):  # (1 + x is x + 1, as PyTorch records it)
            fn = _swap(fn)
        elif name.startswith("__i") and name != "__invert__":
            fn = _inplace_method(fn)
        setattr(Tensor, name, fn)
    Tensor.__setitem__ = _setitem
    Tensor.__hash__ = lambda self: id(self)


install()
