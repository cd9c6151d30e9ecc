"""What the distributions share: the functions they call (``jg``), broadcasting of parameters, probabilities and
logits, lazily computed parameters, sums over the rightmost dims."""
import math
import numbers
import types
from functools import update_wrapper

import numpy as np

from .. import _dtype as D
from .. import _factories
from .._grad_mode import enable_grad, no_grad
from .._tensor import Size, Tensor
from ..nn import functional as F
from ..ops import FUNCTIONS

# the jitgrad.* functions the distributions call, as ``jg.<name>`` (this package sits above jitgrad's namespace)
jg = types.SimpleNamespace(**FUNCTIONS, **{n: getattr(_factories, n) for n in _factories.__all__}, Size=Size,
                           no_grad=no_grad, enable_grad=enable_grad, F=F, bool=D.bool_, float32=D.float32,
                           float64=D.float64, int64=D.int64)

euler_constant = 0.57721566490153286060


def finfo(dtype):
    """The eps, tiny, min and max of a floating dtype (PyTorch's torch.finfo)."""
    return np.finfo(dtype.np if isinstance(dtype, D.dtype) else dtype)


def broadcast_all(*values):
    """Tensors and numbers broadcast to one shape: numbers become tensors of the tensors' dtype (the default
    float dtype if there is none), as PyTorch's."""
    if not all(isinstance(v, (Tensor, numbers.Number)) for v in values):
        raise ValueError("Input arguments must all be instances of numbers.Number, jitgrad.Tensor or objects "
                         "implementing __torch_function__.")
    if not all(isinstance(v, Tensor) for v in values):
        like = next((v for v in values if isinstance(v, Tensor)), None)
        dtype = like.dtype if like is not None else D.get_default_dtype()
        values = [v if isinstance(v, Tensor) else _factories.tensor(v, dtype=dtype, device=None if like is None
                                                                       else like.device) for v in values]
    return jg.broadcast_tensors(*values)


def _standard_normal(shape, dtype, device):
    return _factories.empty(shape, dtype=dtype, device=device).normal_()


def _sum_rightmost(value, dim):
    """Sum out the ``dim`` rightmost dims of ``value``."""
    if dim == 0:
        return value
    return value.reshape(tuple(value.shape[:value.ndim - dim]) + (-1,)).sum(-1)


def logits_to_probs(logits, is_binary=False):
    return logits.sigmoid() if is_binary else jg.softmax(logits, dim=-1)


def clamp_probs(probs):
    eps = float(finfo(probs.dtype).eps)
    return probs.clamp(min=eps, max=1 - eps)


def probs_to_logits(probs, is_binary=False):
    ps_clamped = clamp_probs(probs)
    if is_binary:
        return ps_clamped.log() - (-ps_clamped).log1p()
    return ps_clamped.log()


class lazy_property:
    """A property computed on first access and then stored on the instance (probs from logits and back)."""

    def __init__(self, wrapped):
        self.wrapped = wrapped
        update_wrapper(self, wrapped)

    def __get__(self, instance, obj_type=None):
        if instance is None:
            return _lazy_property_and_property(self.wrapped)
        with enable_grad():
            value = self.wrapped(instance)
        setattr(instance, self.wrapped.__name__, value)
        return value


class _lazy_property_and_property(lazy_property, property):
    def __init__(self, wrapped):
        property.__init__(self, wrapped)


class BinaryParams:
    """A family given by the probability of success or its logit (``_param``, whichever was given): the other
    is derived on first use."""

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits, is_binary=True)

    @property
    def param_shape(self):
        return self._param.size()


def tril_matrix_to_vec(mat, diag=0):
    n = mat.shape[-1]
    rows, cols = np.tril_indices(n, diag)
    return mat[..., _factories.tensor(rows), _factories.tensor(cols)]


def vec_to_tril_matrix(vec, diag=0):
    n = int(round((-(1 + 2 * diag) + math.sqrt((1 + 2 * diag) ** 2 + 8 * vec.shape[-1]
                                               + 4 * abs(diag) * (diag + 1))) / 2))
    rows, cols = np.tril_indices(n, diag)
    mat = vec.new_zeros(tuple(vec.shape[:-1]) + (n, n))
    mat[..., _factories.tensor(rows), _factories.tensor(cols)] = vec
    return mat
