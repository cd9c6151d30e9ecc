"""Identity, Linear and Bilinear."""
import math

from ... import _factories as Fa
from .. import functional as F
from .. import init
from ..module import Module
from ..parameter import Parameter


def _weight_and_bias(module, weight_shape, out_features, bias, dtype, device):
    """Registers an uninitialised weight and bias (None when ``bias`` is off) for reset_parameters to fill."""
    module.weight = Parameter(Fa.empty(weight_shape, dtype=dtype, device=device))
    module.register_parameter("bias", Parameter(Fa.empty(out_features, dtype=dtype, device=device)) if bias else None)


def _kaiming_default_(weight, bias):
    """PyTorch's default init of Linear and Conv: kaiming_uniform_ with a=sqrt(5) is
    U(-1/sqrt(fan_in), 1/sqrt(fan_in)); the bias (if any) gets the same bound."""
    init.kaiming_uniform_(weight, a=math.sqrt(5))
    if bias is not None:
        fan_in, _ = init._calculate_fan_in_and_fan_out(weight)
        bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
        init.uniform_(bias, -bound, bound)


class Identity(Module):
    """Returns its input (any constructor arguments are ignored)."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):
        return input


class Linear(Module):
    """y = x W^T + b, with W of shape (out_features, in_features) and PyTorch's default init."""

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        _weight_and_bias(self, (out_features, in_features), out_features, bias, dtype, device)
        self.reset_parameters()

    def reset_parameters(self):
        _kaiming_default_(self.weight, self.bias)

    def forward(self, input):
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self):
        return "in_features=%d, out_features=%d, bias=%s" % (self.in_features, self.out_features,
                                                            self.bias is not None)


class Bilinear(Module):
    """y = x1^T A x2 + b, with A of shape (out_features, in1_features, in2_features)."""

    def __init__(self, in1_features, in2_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        self.in1_features = in1_features
        self.in2_features = in2_features
        self.out_features = out_features
        _weight_and_bias(self, (out_features, in1_features, in2_features), out_features, bias, dtype, device)
        self.reset_parameters()

    def reset_parameters(self):
        bound = 1 / math.sqrt(self.weight.shape[1])
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1, input2):
        return F.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self):
        return "in1_features=%d, in2_features=%d, out_features=%d, bias=%s" % (
            self.in1_features, self.in2_features, self.out_features, self.bias is not None)


class NonDynamicallyQuantizableLinear(Linear):
    """The Linear of MultiheadAttention's output projection (PyTorch's class name, for its repr and for the
    programs that import it from nn.modules.linear)."""
