"""``Variable``: PyTorch's pre-0.4 wrapper, kept for old programs. Calling it returns a tensor (the same
data, detached, with ``requires_grad`` as given); every tensor is an instance of it."""
import warnings

from .._factories import zeros
from .._dtype import get_default_dtype
from .._tensor import Tensor


class _VariableMeta(type):
    def __instancecheck__(cls, other):
        return isinstance(other, Tensor)

    def __call__(cls, data=None, requires_grad=False, volatile=None):
        if volatile is not None:
            warnings.warn("volatile was removed and now has no effect. Use `with jitgrad.no_grad():` instead.",
                          UserWarning, stacklevel=2)
        if data is None:
            t = zeros(0, dtype=get_default_dtype())
        elif not isinstance(data, Tensor):
            raise TypeError("Variable data has to be a tensor, but got " + type(data).__name__)
        else:
            t = data.detach()
        if requires_grad:
            t._set_requires_grad(True, "Only Tensors of floating point and complex dtype can require gradients")
        return t


class Variable(metaclass=_VariableMeta):
    """``Variable(tensor, requires_grad=False)``: returns a tensor; ``isinstance(t, Variable)`` holds for tensors."""
