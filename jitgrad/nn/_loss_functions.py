"""The loss functions of nn.functional, composed from table ops.

Log-sum-exp goes through log_softmax, BCE-with-logits through its softplus form; reductions,
checks and messages are PyTorch's.
"""
import warnings

from .._factories import ones, tensor
from ..ops.elementwise import where
from ..ops import softmax as _S
from ..ops.layers import binary_cross_entropy_elementwise
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


def _warn_size(input, target):
    if target.shape != input.shape:
        warnings.warn("Using a target size (%r) that is different to the input size (%r). This will likely lead to "
                      "incorrect results due to broadcasting. Please ensure they have the same size."
                      % (target.shape, input.shape), UserWarning, stacklevel=3)


# ---------------------------------------------------------------------- regression losses
@_FP32
def mse_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    reduction = _reduction(reduction, size_average, reduce)
    _warn_size(input, target)
    d = input - target
    return _reduce(d * d, reduction)


@_FP32
def l1_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    reduction = _reduction(reduction, size_average, reduce)
    _warn_size(input, target)
    return _reduce((input - target).abs(), reduction)


@_FP32
def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    """0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta (L1 when beta is 0)."""
    reduction = _reduction(reduction, size_average, reduce)
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    _warn_size(input, target)
    d = (input - target).abs()
    if beta == 0:
        return _reduce(d, reduction)
    return _reduce(where(d < beta, d * d * (0.5 / beta), d - 0.5 * beta), reduction)


@_FP32
def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    """0.5 d^2 where |d| < delta, else delta (|d| - 0.5 delta)."""
    reduction = _reduction(reduction, None, None)
    if delta <= 0:
        raise RuntimeError("huber_loss does not support non-positive values for delta.")
    _warn_size(input, target)
    d = (input - target).abs()
    loss = where(d < delta, d * d * 0.5, (d - 0.5 * delta) * delta)
    return _reduce(loss if weight is None else loss * weight, reduction)


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


def _picked(logp, target, weight, ignore_index):
    """Per-element -logp[target] * w and the weights w (zero where target == ignore_index)."""
    C = logp.shape[1] if logp.ndim > 1 else logp.shape[0]
    t = target._host()  # targets are checked on the host, before any kernel runs
    ignored = t == ignore_index
    bad = (t < 0) | (t >= C)
    bad &= ~ignored
    if bad.any():
        raise IndexError("Target %d is out of bounds." % t[bad].reshape(-1)[0])
    x, tgt = (logp, target) if logp.ndim > 1 else (logp.unsqueeze(0), target.reshape(1))
    has_ignored = bool(ignored.any())
    if has_ignored:
        tgt = tgt.masked_fill(tgt == ignore_index, 0)
    loss = -x.gather(1, tgt.unsqueeze(1)).squeeze(1)
    if weight is None and not has_ignored:
        w = None
    else:
        w = weight[tgt] if weight is not None else ones(tgt.shape, dtype=loss.dtype, device=loss.device)
        if has_ignored:
            w = w.masked_fill(tensor(ignored.reshape(w.shape), device=loss.device), 0.0)
        loss = loss * w
    if logp.ndim == 1:
        loss = loss.squeeze(0)
        w = None if w is None else w.squeeze(0)
    return loss, w


def _weighted_mean(loss, w):
    return loss.mean() if w is None else loss.sum() / w.sum()


@_FP32
def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
    """-input[target] per sample (input holds log-probabilities along dim 1); the weighted mean by default."""
    reduction = _reduction(reduction, size_average, reduce)
    _check_target(input, target)
    _check_weight(weight, input.shape[1] if input.ndim > 1 else input.shape[0])
    loss, w = _picked(input, target, weight, ignore_index)
    return _weighted_mean(loss, w) if reduction == "mean" else _reduce(loss, reduction)


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
    _check_target(input, target)
    loss, w = _picked(logp, target, weight, ignore_index)
    nll = _weighted_mean(loss, w) if reduction == "mean" else _reduce(loss, reduction)
    if label_smoothing == 0:
        return nll
    # PyTorch's label smoothing: mix in the (weighted) mean of -log p over all classes
    lw = logp if weight is None else logp * _class_dim_shape(weight, input.ndim)
    smooth = -lw.sum(class_dim)
    ignored = target._host() == ignore_index
    if ignored.any():
        smooth = smooth.masked_fill(tensor(ignored, device=smooth.device), 0.0)
    if reduction == "mean":
        smooth = smooth.sum() / (w.sum() if w is not None else smooth.numel())
    else:
        smooth = _reduce(smooth, reduction)
    return nll * (1 - label_smoothing) + smooth * (label_smoothing / C)


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    reduction = _reduction(reduction, size_average, reduce)
    if target.shape != input.shape:
        raise ValueError("Using a target size (%r) that is different to the input size (%r) is deprecated. Please "
                         "ensure they have the same size." % (target.shape, input.shape))
    loss = binary_cross_entropy_elementwise(input, target)
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


@_FP32
def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None, reduction="mean",
                                     pos_weight=None):
    """BCE of sigmoid(input), computed stably: (1 - t) x + (1 + (pw - 1) t) softplus(-x)."""
    reduction = _reduction(reduction, size_average, reduce)
    if target.shape != input.shape:
        raise ValueError("Target size (%r) must be the same as input size (%r)" % (target.shape, input.shape))
    # log(1 + exp(-x)) = m + log(exp(-m) + exp(-x - m)) for any m; m = max(-x, 0) keeps both exps <= 1, and
    # since the identity holds for every m, its gradient is exact even at x = 0
    m = (-input).clamp_min(0)
    softplus_neg = m + ((-m).exp() + (-input - m).exp()).log()
    coef = 1 if pos_weight is None else (pos_weight - 1) * target + 1
    loss = (1 - target) * input + coef * softplus_neg
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


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
