"""The loss functions of nn.functional: checks and messages are PyTorch's; each loss PyTorch computes
as one op is one fused entry of ops/loss.py (cross_entropy: log_softmax then nll_loss, as PyTorch),
and the compositions PyTorch writes in Python (an elementwise weight, label smoothing, probability
targets, kl_div) are composed from table ops here.
"""
import math
import warnings

import numpy as np

from .._device import value_range
from .._factories import tensor
from .._op import broadcast_shapes
from ..ops.elementwise import where
from ..ops import loss as _L
from ..ops import softmax as _S
from ..ops._table import autocast_policy

# PyTorch's autocast runs these losses in float32 (its "ops that can autocast to float32" lists)
_FP32 = autocast_policy(cpu="fp32", cuda="fp32")

_NAMES = {"float32": "Float", "float64": "Double", "int64": "Long", "int32": "Int", "bool": "Bool",
          "float16": "Half", "bfloat16": "BFloat16"}


def legacy_reduction(size_average, reduce, reduction):
    """The reduction string; the legacy size_average/reduce flags override it, with PyTorch's warning
    (pointed at the caller of the loss function or loss module constructor that calls this)."""
    if size_average is not None or reduce is not None:
        size_average = True if size_average is None else size_average
        reduce = True if reduce is None else reduce
        reduction = "mean" if size_average and reduce else "sum" if reduce else "none"
        warnings.warn("size_average and reduce args will be deprecated, please use reduction='%s' instead."
                      % reduction, UserWarning, stacklevel=4)
    return reduction


def _reduction(reduction, size_average, reduce, allowed=("none", "mean", "sum")):
    """The checked reduction string (see legacy_reduction)."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    if reduction not in allowed:
        raise ValueError("%s is not a valid value for reduction" % reduction)
    return reduction


def _reduce(loss, reduction):
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss


def _warn_size(input, target, stacklevel=3):
    if target.shape != input.shape:
        warnings.warn("Using a target size (%r) that is different to the input size (%r). This will likely lead to "
                      "incorrect results due to broadcasting. Please ensure they have the same size."
                      % (target.shape, input.shape), UserWarning, stacklevel=stacklevel)


# ---------------------------------------------------------------------- regression losses
def _pointwise(name, input, target, reduction, beta=0.0, weight=None):
    """A fused pointwise loss; an elementwise ``weight`` multiplies the unreduced loss, composed as
    PyTorch composes it (mse divides the weighted 'mean' by the weights' sum, huber by the count)."""
    _warn_size(input, target, stacklevel=4)
    if input.shape != target.shape:
        broadcast_shapes(tuple(input.shape), tuple(target.shape))  # PyTorch's message for shapes that don't
    if weight is None:
        return _L.pointwise_loss(name, input, target, reduction, beta)
    if weight.shape != input.shape:
        raise ValueError("Weights and input must have the same size.")
    loss = _L.pointwise_loss(name, input, target, "none", beta) * weight
    if reduction == "mean" and name != "huber_loss":
        return loss.sum() / weight.sum()
    return _reduce(loss, reduction)


@_FP32
def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    return _pointwise("mse_loss", input, target, _reduction(reduction, size_average, reduce), weight=weight)


@_FP32
def l1_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """|input - target|, composed from table ops as PyTorch composes it (its node is the reduction's)."""
    reduction = _reduction(reduction, size_average, reduce)
    _warn_size(input, target)
    loss = (input - target).abs()
    if weight is None:
        return _reduce(loss, reduction)
    if weight.shape != input.shape:
        raise ValueError("Weights and input must have the same size.")
    loss = loss * weight
    return loss.sum() / weight.sum() if reduction == "mean" else _reduce(loss, reduction)


@_FP32
@_FP32
def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    """0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta (l1_loss when beta is 0, as PyTorch)."""
    reduction = _reduction(reduction, size_average, reduce)
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    if beta == 0:
        return l1_loss(input, target, reduction=reduction)
    return _pointwise("smooth_l1_loss", input, target, reduction, beta)


@_FP32
@_FP32
def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    """0.5 d^2 where |d| < delta, else delta (|d| - 0.5 delta)."""
    reduction = _reduction(reduction, None, None)
    if delta <= 0:
        raise RuntimeError("huber_loss does not support non-positive values for delta.")
    return _pointwise("huber_loss", input, target, reduction, delta, weight)


# ---------------------------------------------------------------------- classification losses
def _check_target(input, target):
    """Shapes and dtype of a class-index target, with PyTorch's messages (in PyTorch's order)."""
    if input.ndim == 0:
        raise ValueError("Expected 1 or more dimensions (got 0)")
    if input.ndim == 1:
        if target.ndim > 1 or (target.ndim == 1 and target.shape[0] != 1):
            raise ValueError("For 1D input, 1D target must have size 1, but got target size: %d" % target.numel())
    elif input.ndim == 2 and target.ndim != 1:
        if target.ndim > 1 and target.shape[0] == input.shape[0]:
            raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
    if input.ndim >= 2 and (target.ndim == 0 or target.shape[0] != input.shape[0]):
        raise ValueError("Expected input batch_size (%d) to match target batch_size (%d)."
                         % (input.shape[0], target.shape[0] if target.ndim else 1))
    if input.ndim > 2:
        want = (input.shape[0],) + tuple(input.shape[2:])
        if tuple(target.shape) != want:
            raise RuntimeError("Expected target size [%s], got [%s]" % (", ".join(map(str, want)),
                                                                       ", ".join(map(str, target.shape))))
    if target.dtype.name != "int64":
        raise RuntimeError("expected target dtype to be Long or Byte, but got " + _NAMES[target.dtype.name])


def _check_weight(weight, C):
    if weight is not None and weight.numel() != C:
        raise RuntimeError("weight tensor should be defined either for all %d classes or no classes but got weight "
                           "tensor of shape: [%s]" % (C, ", ".join(map(str, weight.shape))))


def _class_dim_shape(weight, ndim):
    """weight viewed to broadcast along the class dim (1, or 0 for an unbatched input)."""
    return weight.reshape((-1,) if ndim == 1 else (1, -1) + (1,) * (ndim - 2))


def _nll(input, target, weight, ignore_index, reduction):
    """The checked, fused nll_loss."""
    _check_target(input, target)
    _check_weight(weight, input.shape[1] if input.ndim > 1 else input.shape[0])
    if weight is not None and weight.ndim != 1:
        weight = weight.reshape(-1)
    if input.ndim == 3 or input.ndim > 4:  # PyTorch views these as 4-D and runs nll_loss2d
        n, c = input.shape[0], input.shape[1]
        out_shape = (n,) + tuple(input.shape[2:])
        flat = math.prod(out_shape[1:])
        loss = _L.nll_loss(input.reshape(n, c, 1, flat), target.reshape(n, 1, flat), weight, ignore_index, reduction)
        return loss.reshape(out_shape) if reduction == "none" else loss
    return _L.nll_loss(input, target, weight, ignore_index, reduction)


@_FP32
@_FP32
def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
    """-weight[t] * input[t] per sample (input holds log-probabilities along dim 1); the weighted mean by default."""
    reduction = _reduction(reduction, size_average, reduce)
    return _nll(input, target, weight, ignore_index, reduction)


@_FP32
@_FP32
def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean",
                  label_smoothing=0.0):
    """log_softmax along the class dim then nll_loss (class indices), or -sum(p * log_softmax) (probabilities)."""
    reduction = _reduction(reduction, size_average, reduce)
    if not 0.0 <= label_smoothing <= 1.0:
        raise RuntimeError("label_smoothing must be between 0.0 and 1.0. Got: %s" % label_smoothing)
    if input.ndim == 0:
        raise ValueError("Expected 1 or more dimensions (got 0)")
    class_dim = 1 if input.ndim > 1 else 0
    C = input.shape[class_dim]
    _check_weight(weight, C)
    logp = _S.log_softmax(input, class_dim)
    if target.dtype.is_floating_point and target.shape == input.shape:
        if label_smoothing > 0:
            target = target * (1 - label_smoothing) + label_smoothing / C
        prod = logp * target
        if weight is not None:
            prod = prod * _class_dim_shape(weight, input.ndim)
        loss = -prod.sum(class_dim)
        if reduction == "mean":
            return loss.sum() / (input.numel() // C)
        return _reduce(loss, reduction)
    nll = _nll(logp, target, weight, ignore_index, reduction)
    if label_smoothing == 0:
        return nll
    # PyTorch's label smoothing: mix in the (weighted) mean of -log p over all classes, over the targets not
    # ignored (table ops on the targets: a compiled call reads each call's)
    lw = logp if weight is None else logp * _class_dim_shape(weight, input.ndim)
    kept = target != ignore_index
    smooth = -lw.sum(class_dim) * kept
    if reduction == "mean":
        counted = kept.to(smooth.dtype)
        if weight is not None:  # the summed weight of the targets, as nll_loss's mean divides by
            counted = counted * weight.reshape(-1).to(smooth.dtype)[target.clamp(0, C - 1)]
        smooth = smooth.sum() / counted.sum()
    else:
        smooth = _reduce(smooth, reduction)
    return nll * (1 - label_smoothing) + smooth * (label_smoothing / C)


@autocast_policy(cpu="fp32")  # (CUDA's autocast refuses it: not implemented here)
def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    """-w (t log x + (1 - t) log(1 - x)) of probabilities x, each log clamped at -100 (as PyTorch)."""
    reduction = _reduction(reduction, size_average, reduce)
    if target.shape != input.shape:
        raise ValueError("Using a target size (%r) that is different to the input size (%r) is deprecated. Please "
                         "ensure they have the same size." % (target.shape, input.shape))
    if not input.dtype.is_floating_point:
        raise NotImplementedError("\"binary_cross_entropy\" not implemented for '%s'" % input.dtype.scalar_type)
    lo, hi = value_range(input._data) if input.numel() else (0, 0)  # reduced where the data lives
    if not (lo >= 0 and hi <= 1):
        raise RuntimeError("all elements of input should be between 0 and 1")
    if weight is not None:
        broadcast_shapes(tuple(target.shape), tuple(weight.shape))
    return _L.pointwise_loss("binary_cross_entropy", input, target, reduction, weight=weight)


@_FP32
@_FP32
def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None, reduction="mean",
                                     pos_weight=None):
    """BCE of sigmoid(input), computed stably: w ((1 - t) x + (1 + (pw - 1) t) softplus(-x)), one fused op."""
    reduction = _reduction(reduction, size_average, reduce)
    if target.shape != input.shape:
        raise ValueError("Target size (%r) must be the same as input size (%r)" % (target.shape, input.shape))
    if pos_weight is not None:
        broadcast_shapes(tuple(pos_weight.shape), tuple(target.shape))
    if weight is not None:
        broadcast_shapes(tuple(input.shape), tuple(weight.shape))
    return _L.pointwise_loss("binary_cross_entropy_with_logits", input, target, reduction, weight=weight,
                             pos_weight=pos_weight)


@_FP32
@_FP32
def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    """Pointwise target * (log(target) - input) (input holds log-probabilities); 0 where target is 0."""
    reduction = _reduction(reduction, size_average, reduce, ("none", "mean", "sum", "batchmean"))
    if reduction == "mean":
        warnings.warn("reduction: 'mean' divides the total loss by both the batch size and the support size."
                      "'batchmean' divides only by the batch size, and aligns with the KL div math definition."
                      "'mean' will be changed to behave the same as 'batchmean' in the next major release.",
                      UserWarning, stacklevel=2)
    if log_target:
        loss = target.exp() * (target - input)
    else:
        positive = target > 0
        loss = where(positive, target * where(positive, target, 1.0).log(), 0.0) - target * input
    if reduction == "batchmean":
        return loss.sum() / input.shape[0] if input.ndim else loss.sum()
    return _reduce(loss, reduction)
