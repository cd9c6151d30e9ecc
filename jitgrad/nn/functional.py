"""nn.functional: the stateless forms of the layers. Convolution, pooling, linear, embedding and
pad are op-table entries (jitgrad/ops/conv.py, pool.py, layers.py); normalisation, dropout and the
losses (_loss_functions.py) are composed from table ops, so their gradients of any order follow."""
import math
import warnings

import numpy as np

from .._factories import generator
from .._grad_mode import STATE, no_grad
from .._tensor import Tensor
from ..ops import NN as _NN
from ..ops._table import autocast_policy
from ..ops import softmax as _S
from ..ops import shrink as _shrink
from ..ops.shrink import softshrink  # noqa: F401
from ..ops.conv import conv1d, conv2d, conv_transpose1d, conv_transpose2d  # noqa: F401
from ..ops.pool import adaptive_avg_pool2d, avg_pool2d, max_pool2d  # noqa: F401
from ..ops.indexing import one_hot  # noqa: F401
from ..ops.random import bernoulli_fill
from ..ops.layers import embedding, linear  # noqa: F401
from ..ops.padding import pad  # noqa: F401  (constant, reflect, replicate, circular)
from ..ops.resampling import interpolate  # noqa: F401
from ..ops.fold import fold, unfold  # noqa: F401
from ..ops.grid_sample import affine_grid, grid_sample  # noqa: F401
from ..ops.pixel_shuffle import pixel_shuffle, pixel_unshuffle  # noqa: F401
from ..ops.special import glu  # noqa: F401
from ..ops.attention import scaled_dot_product_attention  # noqa: F401
from ..ops.normalization import layer_norm  # noqa: F401
from ._attention_functions import multi_head_attention_forward  # noqa: F401
from ._loss_functions import (binary_cross_entropy, binary_cross_entropy_with_logits, cross_entropy,  # noqa: F401
                              huber_loss, kl_div, l1_loss, mse_loss, nll_loss, smooth_l1_loss)


# ---------------------------------------------------------------------- activations
def gelu(input, approximate="none"):
    return input.gelu(approximate=approximate)


def softplus(input, beta=1.0, threshold=20.0):
    return input.softplus(beta, threshold)


def tanh(input):
    return input.tanh()


def sigmoid(input):
    return input.sigmoid()


def _activation(op):
    """F.<name>(input, *params, inplace=False) and F.<name>_ for an op-table entry that names an nn module."""
    n = len(op.exposure.params)

    def fn(input, *args, **kwargs):
        inplace = args[n] if len(args) > n else kwargs.pop("inplace", False)
        args = args[:n]
        return getattr(input, op.name + "_")(*args, **kwargs) if inplace else op.exposure.call(input, *args, **kwargs)

    def fn_(input, *args, **kwargs):
        return getattr(input, op.name + "_")(*args, **kwargs)
    fn.__name__, fn_.__name__ = op.name, op.name + "_"
    return fn, fn_


_ACTIVATIONS = {}
for _op in _NN.values():
    _ACTIVATIONS[_op.name], _ACTIVATIONS[_op.name + "_"] = _activation(_op)
globals().update(_ACTIVATIONS)


def hardshrink(input, lambd=0.5):
    return _shrink.HARDSHRINK.exposure.call(input, lambd)


def threshold(input, threshold, value, inplace=False):
    """``value`` where input <= threshold, else input."""
    return input.threshold_(threshold, value) if inplace else _shrink.threshold(input, threshold, value)


def threshold_(input, threshold, value):
    return input.threshold_(threshold, value)


def relu6(input, inplace=False):
    """min(max(0, x), 6): PyTorch's hardtanh(0, 6) (HardtanhBackward0)."""
    return hardtanh(input, 0.0, 6.0, inplace)  # noqa: F821  (generated above from the hardtanh entry)


def softsign(input):
    """x / (1 + |x|), composed as PyTorch's (DivBackward0)."""
    return input / (input.abs() + 1)


def tanhshrink(input):
    """x - tanh(x), composed as PyTorch's (SubBackward0)."""
    return input - input.tanh()


def softmin(input, dim=None, _stacklevel=3, dtype=None):
    """softmax(-input) along dim."""
    return _S.softmax(-input, _implicit_dim("softmin", input, dim), dtype=dtype)


def prelu(input, weight):
    """max(0, x) + weight * min(0, x), with one weight or one per channel (dim 1)."""
    channels = input.shape[1] if input.ndim >= 2 else 1
    if weight.numel() != 1 and weight.numel() != channels:
        raise RuntimeError("Mismatch of parameter numbers and input channel size. Found parameter numbers = %d and "
                           "channel size = %d." % (weight.numel(), channels))
    if weight.ndim > 1:
        raise RuntimeError("prelu: Expected `weight` to be a scalar or 1D tensor, but got: ndim = %d" % weight.ndim)
    w = weight.reshape((1, -1) + (1,) * (input.ndim - 2)) if input.ndim >= 2 and weight.numel() > 1 else \
        weight.reshape(())
    return input.where(input > 0, w * input)


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):
    """Randomized leaky ReLU: in training, each negative element's slope drawn from U(lower, upper); in
    evaluation, the slope (lower + upper) / 2."""
    if not training:
        return leaky_relu(input, (lower + upper) / 2, inplace)  # noqa: F821  (generated from the entry)
    slopes = generator().uniform(lower, upper, tuple(input.shape))
    noise = Tensor._wrap(np.where(input.detach().cpu().numpy() >= 0, 1.0, slopes).astype(input.dtype.np))
    noise = noise.to(input.device)
    return input.mul_(noise) if inplace else input * noise


def rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False):
    return rrelu(input, lower, upper, training, True)


def _implicit_dim(name, input, dim):
    if dim is None:
        warnings.warn("Implicit dimension choice for %s has been deprecated. Change the call to include dim=X as an "
                      "argument." % name, UserWarning, stacklevel=3)
    return dim


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    return _S.softmax(input, _implicit_dim("softmax", input, dim), dtype=dtype)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    return _S.log_softmax(input, _implicit_dim("log_softmax", input, dim), dtype=dtype)


# ---------------------------------------------------------------------- linear layers
def bilinear(input1, input2, weight, bias=None):
    """y[..., o] = input1[..., i] * weight[o, i, j] * input2[..., j] + bias[o]."""
    if input1.shape[-1] != weight.shape[1]:
        raise RuntimeError("bilinear(): input1 size does not match weight size: got %d but expected %d"
                           % (input1.shape[-1], weight.shape[1]))
    if input2.shape[-1] != weight.shape[2]:
        raise RuntimeError("bilinear(): input2 size does not match weight size: got %d but expected %d"
                           % (input2.shape[-1], weight.shape[2]))
    for d in range(input1.ndim - 1):
        if input1.shape[d] != input2.shape[d]:
            raise RuntimeError("bilinear(): input batch dimensions do not match at dim %d: got %d and %d"
                               % (d, input1.shape[d], input2.shape[d]))
    O, I1, I2 = weight.shape
    t = input1.matmul(weight.permute(1, 0, 2).reshape(I1, O * I2))  # (..., O*I2)
    out = (t.reshape(tuple(t.shape[:-1]) + (O, I2)) * input2.unsqueeze(-2)).sum(-1)
    return out if bias is None else out + bias


# ---------------------------------------------------------------------- dropout
def dropout(input, p=0.5, training=True, inplace=False):
    """Zero each element with probability p and scale the rest by 1/(1-p) (identity when not training)."""
    if p < 0.0 or p > 1.0:
        raise ValueError("dropout probability has to be between 0 and 1, but got %s" % p)
    if not 0.0 <= p <= 1.0:  # NaN passes the comparisons above; PyTorch's kernel rejects it, also in eval mode
        raise RuntimeError("dropout probability has to be between 0 and 1, but got %s" % p)
    if not training or p == 0.0:
        return input
    if STATE.vmap is not None:  # inside jitgrad.vmap: the mask drawn by a table entry, as ``randomness`` says
        keep = bernoulli_fill(input.detach(), 1.0 - p)
        scale = keep * (1.0 / (1.0 - p)) if p < 1.0 else keep * 0.0
        return input.mul_(scale) if inplace else input * scale
    keep = generator().random(input.shape) >= p
    scale = Tensor._wrap((keep * (1.0 / (1.0 - p)) if p < 1.0 else np.zeros(input.shape)).astype(input.dtype.np))
    scale = scale.to(input.device)  # the mask is drawn on the host, from the default generator
    return input.mul_(scale) if inplace else input * scale


def _keep_mask(input, shape, p, scale):
    """``scale`` where a draw keeps (probability 1 - p), 0 elsewhere, of ``shape``, on input's device and dtype."""
    keep = generator().random(shape) >= p
    return Tensor._wrap((keep * scale).astype(input.dtype.np)).to(input.device)


def _check_p(p):
    if p < 0.0 or p > 1.0 or p != p:
        raise ValueError("dropout probability has to be between 0 and 1, but got %s" % p)


def _feature_dropout(input, p, training, inplace):
    """Zero whole channels (dim 1 of a batched input), scaling the rest by 1 / (1 - p)."""
    _check_p(p)
    if not training or p == 0.0:
        return input
    mask = _keep_mask(input, tuple(input.shape[:2]) + (1,) * (input.ndim - 2), p, 1.0 / (1.0 - p) if p < 1 else 0.0)
    return input.mul_(mask) if inplace else input * mask


def _unbatched(input, p, training, inplace, batched_ndim):
    """A channel-wise dropout of an input without its batch dim: as a batch of one."""
    if input.ndim == batched_ndim or not training or p == 0.0:
        return _feature_dropout(input, p, training, inplace)
    out = _feature_dropout(input.unsqueeze(0), p, training, False).squeeze(0)
    return input.copy_(out) if inplace else out


def dropout1d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of an (N, C, L) or (C, L) input."""
    if input.ndim not in (2, 3):
        raise RuntimeError("dropout1d: Expected 2D or 3D input, but received a %dD input. Note that dropout1d exists to "
                           "provide channel-wise dropout on inputs with 1 spatial dimension, a channel dimension, and an "
                           "optional batch dimension (i.e. 2D or 3D inputs)." % input.ndim)
    return _unbatched(input, p, training, inplace, 3)


def dropout2d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of an (N, C, H, W) input (a 3-D input is taken as (N, C, L), with PyTorch's warning)."""
    if input.ndim not in (3, 4):
        warnings.warn("dropout2d: Received a %d-D input to dropout2d, which is deprecated and will result in an error "
                      "in a future release. To retain the behavior and silence this warning, please use dropout instead. "
                      "Note that dropout2d exists to provide channel-wise dropout on inputs with 2 spatial dimensions, a "
                      "channel dimension, and an optional batch dimension (i.e. 3D or 4D inputs)." % input.ndim,
                      UserWarning, stacklevel=2)
    if input.ndim == 3:
        warnings.warn("dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D dropout behavior is "
                      "desired - input is interpreted as shape (N, C, L), where C is the channel dim. This behavior will "
                      "change in a future release to interpret the input as one without a batch dimension, i.e. shape "
                      "(C, H, W). To maintain the 1D channel-wise dropout behavior, please switch to using dropout1d "
                      "instead.", UserWarning, stacklevel=2)
    return _feature_dropout(input, p, training, inplace)


def dropout3d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of an (N, C, D, H, W) or (C, D, H, W) input."""
    if input.ndim not in (4, 5):
        warnings.warn("dropout3d: Received a %d-D input to dropout3d, which is deprecated and will result in an error "
                      "in a future release. To retain the behavior and silence this warning, please use dropout instead. "
                      "Note that dropout3d exists to provide channel-wise dropout on inputs with 3 spatial dimensions, a "
                      "channel dimension, and an optional batch dimension (i.e. 4D or 5D inputs)." % input.ndim,
                      UserWarning, stacklevel=2)
        return _feature_dropout(input, p, training, inplace)
    return _unbatched(input, p, training, inplace, 5)


_SELU_ALPHA_SCALED = 1.7580993408473766  # SELU's scale * alpha: the value a dropped unit takes, negated


def _alpha_dropout(input, p, training, inplace, shape):
    """PyTorch's alpha dropout: dropped units set to SELU's saturation value, then an affine map that keeps the
    mean and variance (a * (x * keep + alpha' * (1 - keep)) + b)."""
    _check_p(p)
    if not training or p == 0.0:
        return input
    if p == 1.0:
        return input.mul_(0.0) if inplace else input * 0.0
    keep = _keep_mask(input, shape, p, 1.0)
    alpha = _SELU_ALPHA_SCALED
    a = 1.0 / math.sqrt((alpha * alpha * p + 1) * (1 - p))
    b = (keep - 1) * (alpha * a) + alpha * a * p
    noise = keep * a
    return input.mul_(noise).add_(b) if inplace else input * noise + b


def alpha_dropout(input, p=0.5, training=False, inplace=False):
    """Dropout that keeps a SELU network's self-normalization (mean 0, variance 1)."""
    return _alpha_dropout(input, p, training, inplace, tuple(input.shape))


def feature_alpha_dropout(input, p=0.5, training=False, inplace=False):
    """Alpha dropout of whole channels (dim 1)."""
    return _alpha_dropout(input, p, training, inplace, tuple(input.shape[:2]) + (1,) * (input.ndim - 2))


# ---------------------------------------------------------------------- normalisation
def _check_affine(name, t, n):
    if t is not None and t.numel() != n:
        raise RuntimeError("%s should contain %d elements not %d" % (name, n, t.numel()))


def _normalize(x, dims, eps):
    """(x - mean) / sqrt(var + eps) over ``dims`` (biased variance), and the statistics."""
    mean = x.mean(dims, keepdim=True)
    xc = x - mean
    var = (xc * xc).mean(dims, keepdim=True)
    return xc * (var + eps).rsqrt(), mean, var


def _affine(y, weight, bias, shape):
    if weight is not None:
        y = y * weight.reshape(shape)
    if bias is not None:
        y = y + bias.reshape(shape)
    return y


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-5):
    """Normalise each channel (dim 1) over the batch and spatial dims; in training, update the running stats."""
    C = input.shape[1] if input.ndim > 1 else 0
    for name, t in (("running_mean", running_mean), ("running_var", running_var), ("weight", weight),
                    ("bias", bias)):
        _check_affine(name, t, C)
    shape = (1, C) + (1,) * (input.ndim - 2)
    dims = (0,) + tuple(range(2, input.ndim))
    if training:
        n = input.numel() // C
        if n == 1:
            raise ValueError("Expected more than 1 value per channel when training, got input size %r" % (input.shape,))
        y, mean, var = _normalize(input, dims, eps)
        if running_mean is not None:
            with no_grad():
                running_mean.mul_(1 - momentum).add_(mean.reshape(-1) * momentum)
        if running_var is not None:
            with no_grad():
                running_var.mul_(1 - momentum).add_(var.reshape(-1) * (momentum * n / (n - 1)))
    else:
        if running_mean is None or running_var is None:
            raise RuntimeError("running_%s must be defined in evaluation mode" % ("mean" if running_mean is None
                                                                               else "var"))
        y = (input - running_mean.reshape(shape)) * (running_var.reshape(shape) + eps).rsqrt()
    return _affine(y, weight, bias, shape)


@autocast_policy(cuda="fp32")
def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    """Normalise each of num_groups groups of channels (with their spatial dims) per sample."""
    if input.ndim < 2:
        raise RuntimeError("Expected at least 2 dimensions for input tensor but received %d" % input.ndim)
    N, C = input.shape[:2]
    if C % num_groups:
        raise RuntimeError("Expected number of channels in input to be divisible by num_groups, but got input of "
                           "shape [%s] and num_groups=%d" % (", ".join(map(str, input.shape)), num_groups))
    for name, t in (("weight", weight), ("bias", bias)):
        _check_affine(name, t, C)
    y, _, _ = _normalize(input.reshape(N, num_groups, -1), (2,), eps)
    return _affine(y.reshape(input.shape), weight, bias, (1, C) + (1,) * (input.ndim - 2))


# ---------------------------------------------------------------------- normalising and distances
def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    """input / max(||input||_p along dim, eps), as PyTorch."""
    if out is not None:
        raise TypeError("normalize(): out= is not supported")
    denom = input.norm(p, dim, keepdim=True).clamp_min(eps).expand_as(input)
    return input / denom


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """sum(x1 / max(||x1||, eps) * x2 / max(||x2||, eps)) along dim: PyTorch's formula, whose clamp of the
    norms is made without recording (the gradient flows through the unclamped norm)."""
    for t in (x1, x2):
        if not t.dtype.is_floating_point:
            raise RuntimeError("expected common dtype to be floating point, yet common dtype is "
                               + t.dtype.scalar_type)
    shape = tuple(np.broadcast_shapes(tuple(x1.shape), tuple(x2.shape)))
    x1, x2 = x1.expand(shape), x2.expand(shape)

    def scaled(x):
        n = x.norm(2, dim, keepdim=True)
        with no_grad():
            lift = n.clamp_min(eps) - n
        return x / (n + lift)
    return (scaled(x1) * scaled(x2)).sum(dim)


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """||x1 - x2 + eps||_p over the last dim (of the broadcast shape)."""
    d = max(x1.ndim, x2.ndim)
    return (x1 - x2 + eps).norm(p, d - 1 if d else None, keepdim)


__all__ = ["adaptive_avg_pool2d", "avg_pool2d", "batch_norm", "bilinear", "binary_cross_entropy",
           "binary_cross_entropy_with_logits", "conv1d", "conv2d", "conv_transpose1d", "conv_transpose2d",
           "cosine_similarity", "cross_entropy", "dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout",
           "feature_alpha_dropout", "affine_grid", "grid_sample", "hardshrink", "softshrink", "threshold",
           "threshold_", "pixel_shuffle", "pixel_unshuffle", "relu6", "softsign", "tanhshrink", "softmin", "prelu", "rrelu", "rrelu_", "elu", "embedding", "fold", "gelu", "glu", "group_norm",
           "huber_loss", "interpolate", "kl_div", "l1_loss", "layer_norm", "leaky_relu", "linear", "log_softmax",
           "max_pool2d", "mse_loss", "multi_head_attention_forward", "nll_loss", "normalize", "one_hot", "pad",
           "pairwise_distance", "relu", "relu_", "scaled_dot_product_attention", "sigmoid", "silu", "smooth_l1_loss",
           "softmax", "softplus", "tanh", "unfold"] + sorted(_ACTIVATIONS)
