"""BatchNorm1d/2d (running statistics as buffers), LayerNorm, GroupNorm."""
from ... import _dtype as D
from ... import _factories as Fa
from .. import functional as F
from .. import init
from ..module import Module
from ..parameter import Parameter


def _affine_parameters(module, shape, affine, bias, dtype, device):
    """Registers weight=1 and bias=0 of ``shape``, or None for those that ``affine``/``bias`` turn off."""
    has_bias = affine and bias
    module.register_parameter("weight", Parameter(Fa.ones(shape, dtype=dtype, device=device)) if affine else None)
    module.register_parameter("bias", Parameter(Fa.zeros(shape, dtype=dtype, device=device)) if has_bias else None)


def _reset_affine(module):
    if module.weight is not None:
        init.ones_(module.weight)
    if module.bias is not None:
        init.zeros_(module.bias)


class _BatchNorm(Module):
    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True, device=None,
                 dtype=None, *, bias=True):
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        _affine_parameters(self, num_features, affine, bias, dtype, device)
        if track_running_stats:
            self.register_buffer("running_mean", Fa.zeros(num_features, dtype=dtype, device=device))
            self.register_buffer("running_var", Fa.ones(num_features, dtype=dtype, device=device))
            self.register_buffer("num_batches_tracked", Fa.tensor(0, dtype=D.int64))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self):
        if self.track_running_stats:
            init.zeros_(self.running_mean)
            init.ones_(self.running_var)
            init.zeros_(self.num_batches_tracked)

    def reset_parameters(self):
        self.reset_running_stats()
        _reset_affine(self)

    def forward(self, input):
        self._check_input_dim(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            # momentum=None: a cumulative moving average over the batches seen
            factor = 1.0 / float(self.num_batches_tracked) if self.momentum is None else self.momentum
        use_batch_stats = self.training or (self.running_mean is None and self.running_var is None)
        track = not self.training or self.track_running_stats
        return F.batch_norm(input, self.running_mean if track else None, self.running_var if track else None,
                            self.weight, self.bias, use_batch_stats, factor, self.eps)

    def extra_repr(self):
        return "{}, eps={}, momentum={}, affine={}, bias={}, track_running_stats={}".format(
            self.num_features, self.eps, self.momentum, self.affine, self.bias is not None, self.track_running_stats)


class BatchNorm1d(_BatchNorm):
    """Batch normalisation of (N, C) or (N, C, L) inputs."""

    def _check_input_dim(self, input):
        if input.ndim not in (2, 3):
            raise ValueError("expected 2D or 3D input (got %dD input)" % input.ndim)


class BatchNorm2d(_BatchNorm):
    """Batch normalisation of (N, C, H, W) inputs."""

    def _check_input_dim(self, input):
        if input.ndim != 4:
            raise ValueError("expected 4D input (got %dD input)" % input.ndim)


class LayerNorm(Module):
    """Normalise over the trailing ``normalized_shape`` dims, with an elementwise affine map."""

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True, device=None, dtype=None):
        super().__init__()
        self.normalized_shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        _affine_parameters(self, self.normalized_shape, elementwise_affine, bias, dtype, device)

    def reset_parameters(self):
        _reset_affine(self)

    def forward(self, input):
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return "{}, eps={}, elementwise_affine={}, bias={}".format(self.normalized_shape, self.eps,
                                                                   self.elementwise_affine, self.bias is not None)


class GroupNorm(Module):
    """Normalise groups of channels per sample, then a per-channel affine map."""

    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True, device=None, dtype=None, *, bias=True):
        super().__init__()
        if num_channels % num_groups != 0:
            raise ValueError("num_channels (%d) must be divisible by num_groups (%d)" % (num_channels, num_groups))
        self.num_groups = num_groups
        self.num_channels = num_channels
        self.eps = eps
        self.affine = affine
        _affine_parameters(self, num_channels, affine, bias, dtype, device)

    def reset_parameters(self):
        _reset_affine(self)

    def forward(self, input):
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return "{}, {}, eps={}, affine={}, bias={}".format(self.num_groups, self.num_channels, self.eps, self.affine,
                                                           self.bias is not None)
