"""nn.Parameter: a leaf tensor that a Module registers as one of its parameters."""
import numpy as np

from .._device import backend
from .._tensor import Tensor


class Parameter(Tensor):
    """A Tensor that requires grad by default and is registered by ``Module.__setattr__``.

    ``Parameter(t)`` shares ``t``'s data (and version counter) but none of its history.
    """

    def __new__(cls, data=None, requires_grad=True):
        if data is None:
            data = Tensor._wrap(np.empty((0,), np.float32))
        if not isinstance(data, Tensor):
            raise TypeError("Parameter(): argument 'data' must be Tensor, not %s" % type(data).__name__)
        p = cls._wrap(data._data)
        p._vc = data._vc
        p.requires_grad_(requires_grad)
        return p

    def __init__(self, data=None, requires_grad=True):
        pass

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()

    __str__ = __repr__

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        p = type(self)(Tensor._wrap(backend(self._data).copy(self._data)), self._requires_grad)
        if self._grad is not None:
            p._grad = self._grad._owned_copy()
        memo[id(self)] = p
        return p

    def __reduce_ex__(self, proto):
        return (_rebuild_parameter, (backend(self._data).copy(self._data), self._requires_grad))


def _rebuild_parameter(data, requires_grad):
    return Parameter(Tensor._wrap(data), requires_grad)
