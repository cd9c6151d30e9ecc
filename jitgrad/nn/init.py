"""Parameter initialisation (PyTorch's nn.init): functions that fill a tensor in place.

Each runs under no_grad and draws from jitgrad's random generator (``jitgrad.manual_seed`` makes it
reproducible)."""
import math
import warnings

import numpy as np

from .._generator import numpy_rng
from .._grad_mode import no_grad
from .._tensor import Tensor


def _fill(tensor, values):
    """Write ``values`` (a NumPy array or number) into ``tensor`` in place, without recording it."""
    with no_grad():
        src = values if isinstance(values, Tensor) else Tensor._wrap(np.asarray(values, dtype=tensor.dtype.np))
        tensor.copy_(src)
    return tensor


def _rng(gen):
    return numpy_rng(gen)


def calculate_gain(nonlinearity, param=None):
    """The recommended gain for an activation (the scale of kaiming/xavier init)."""
    linear = ["linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d"]
    if nonlinearity in linear or nonlinearity == "sigmoid":
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif not isinstance(param, bool) and isinstance(param, (int, float)):
            slope = param
        else:
            raise ValueError("negative_slope %s not a valid number" % param)
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError("Unsupported nonlinearity %s" % nonlinearity)


def _calculate_fan_in_and_fan_out(tensor):
    if tensor.ndim < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 dimensions")
    receptive = math.prod(tensor.shape[2:]) if tensor.ndim > 2 else 1
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _calculate_correct_fan(tensor, mode):
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError("Mode %s not supported, please use one of fan_in, fan_out" % mode)
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def uniform_(tensor, a=0.0, b=1.0, generator=None):
    return _fill(tensor, _rng(generator).uniform(a, b, tensor.shape))


def normal_(tensor, mean=0.0, std=1.0, generator=None):
    return _fill(tensor, _rng(generator).normal(mean, std, tensor.shape))


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """Normal(mean, std) truncated to [a, b] (by rejection: out-of-range draws are drawn again)."""
    cdf = lambda x: (1.0 + math.erf((x - mean) / (std * math.sqrt(2.0)))) / 2.0  # noqa: E731
    if cdf(b) - cdf(a) < 1e-6:
        raise ValueError("trunc_normal_: [a, b] = [%g, %g] holds almost none of N(%g, %g^2)" % (a, b, mean, std))
    rng = _rng(generator)
    out = rng.normal(mean, std, tensor.shape)
    bad = (out < a) | (out > b)
    while bad.any():
        out[bad] = rng.normal(mean, std, int(bad.sum()))
        bad = (out < a) | (out > b)
    return _fill(tensor, out)


def constant_(tensor, val):
    with no_grad():
        tensor.fill_(val)
    return tensor


def ones_(tensor):
    return constant_(tensor, 1.0)


def zeros_(tensor):
    return constant_(tensor, 0.0)


def eye_(tensor):
    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    return _fill(tensor, np.eye(*tensor.shape))


def xavier_uniform_(tensor, gain=1.0, generator=None):
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    a = math.sqrt(3.0) * gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return uniform_(tensor, -a, a, generator)


def xavier_normal_(tensor, gain=1.0, generator=None):
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)), generator)


def kaiming_uniform_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    if 0 in tensor.shape:
        return tensor
    std = calculate_gain(nonlinearity, a) / math.sqrt(_calculate_correct_fan(tensor, mode))
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    if 0 in tensor.shape:
        return tensor
    std = calculate_gain(nonlinearity, a) / math.sqrt(_calculate_correct_fan(tensor, mode))
    return normal_(tensor, 0.0, std, generator)


def orthogonal_(tensor, gain=1, generator=None):
    """A (semi-)orthogonal matrix (the tensor flattened to rows x rest): Q of the QR decomposition of a normal draw,
    with the signs of R's diagonal, times ``gain``."""
    if tensor.ndim < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0:
        return tensor
    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    flat = _rng(generator).normal(0.0, 1.0, (rows, cols))
    if rows < cols:
        flat = flat.T
    q, r = np.linalg.qr(flat)
    q = q * np.sign(np.diag(r))
    if rows < cols:
        q = q.T
    return _fill(tensor, (q * gain).reshape(tuple(tensor.shape)))


def sparse_(tensor, sparsity, std=0.01, generator=None):
    """A 2-D tensor drawn from N(0, std^2) with a ``sparsity`` fraction of each column's rows set to zero."""
    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    rows, cols = tensor.shape
    num_zeros = int(math.ceil(sparsity * rows))
    rng = _rng(generator)
    values = rng.normal(0.0, std, (rows, cols))
    for col in range(cols):
        values[rng.permutation(rows)[:num_zeros], col] = 0
    return _fill(tensor, values)


def dirac_(tensor, groups=1):
    """The identity of a convolution (3-, 4- or 5-D weight): a 1 at the centre of each kernel (out channel d of a
    group, in channel d), per group."""
    if tensor.ndim not in (3, 4, 5):
        raise ValueError("Only tensors with 3, 4, or 5 dimensions are supported")
    sizes = tuple(tensor.shape)
    if sizes[0] % groups != 0:
        raise ValueError("dim 0 must be divisible by groups")
    per_group = sizes[0] // groups
    values = np.zeros(sizes)
    centre = tuple(s // 2 for s in sizes[2:])
    for g in range(groups):
        for d in range(min(per_group, sizes[1])):
            values[(g * per_group + d, d) + centre] = 1
    return _fill(tensor, values)


def _deprecated(fn):
    """The old name without the trailing underscore (PyTorch's FutureWarning)."""
    name = fn.__name__[:-1]

    def old(*args, **kwargs):
        warnings.warn("`nn.init.%s` is now deprecated in favor of `nn.init.%s`." % (name, fn.__name__), FutureWarning,
                      stacklevel=2)
        return fn(*args, **kwargs)
    old.__name__ = old.__qualname__ = name
    return old


(uniform, normal, constant, xavier_uniform, xavier_normal, kaiming_uniform, kaiming_normal, orthogonal, sparse, dirac,
 eye) = (_deprecated(f) for f in (uniform_, normal_, constant_, xavier_uniform_, xavier_normal_, kaiming_uniform_,
                                   kaiming_normal_, orthogonal_, sparse_, dirac_, eye_))
