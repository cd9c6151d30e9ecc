"""Activation modules: thin wrappers of nn.functional with PyTorch's reprs."""
from ... import _factories as Fa
from ...ops import NN
from .. import functional as F
from .. import init as nn_init
from ..module import Module
from ..parameter import Parameter


class GELU(Module):
    def __init__(self, approximate="none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, input):
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self):
        return "approximate={!r}".format(self.approximate)


class Tanh(Module):
    def forward(self, input):
        return input.tanh()


class Sigmoid(Module):
    def forward(self, input):
        return input.sigmoid()


class Softplus(Module):
    def __init__(self, beta=1.0, threshold=20.0):
        super().__init__()
        self.beta = beta
        self.threshold = threshold

    def forward(self, input):
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self):
        return "beta={}, threshold={}".format(self.beta, self.threshold)


class Softmax(Module):
    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.softmax(input, self.dim, _stacklevel=5)

    def extra_repr(self):
        return "dim={dim}".format(dim=self.dim)


class LogSoftmax(Module):
    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.log_softmax(input, self.dim, _stacklevel=5)

    def extra_repr(self):
        return "dim={dim}".format(dim=self.dim)


class GLU(Module):
    def __init__(self, dim=-1):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.glu(input, self.dim)

    def extra_repr(self):
        return "dim={}".format(self.dim)


class Hardshrink(Module):
    def __init__(self, lambd=0.5):
        super().__init__()
        self.lambd = lambd

    def forward(self, input):
        return F.hardshrink(input, self.lambd)

    def extra_repr(self):
        return "{}".format(self.lambd)


class Softshrink(Hardshrink):
    def forward(self, input):
        return F.softshrink(input, self.lambd)


class Threshold(Module):
    def __init__(self, threshold, value, inplace=False):
        super().__init__()
        self.threshold = threshold
        self.value = value
        self.inplace = inplace

    def forward(self, input):
        return F.threshold(input, self.threshold, self.value, self.inplace)

    def extra_repr(self):
        return "threshold={}, value={}{}".format(self.threshold, self.value, ", inplace=True" if self.inplace else "")


class ReLU6(Module):
    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return F.relu6(input, self.inplace)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class RReLU(Module):
    def __init__(self, lower=1.0 / 8, upper=1.0 / 3, inplace=False):
        super().__init__()
        self.lower = lower
        self.upper = upper
        self.inplace = inplace

    def forward(self, input):
        return F.rrelu(input, self.lower, self.upper, self.training, self.inplace)

    def extra_repr(self):
        return "lower={}, upper={}{}".format(self.lower, self.upper, ", inplace=True" if self.inplace else "")


class PReLU(Module):
    def __init__(self, num_parameters=1, init=0.25, device=None, dtype=None):
        super().__init__()
        self.num_parameters = num_parameters
        self.init = init
        self.weight = Parameter(Fa.empty(num_parameters, dtype=dtype, device=device))
        self.reset_parameters()

    def reset_parameters(self):
        nn_init.constant_(self.weight, self.init)

    def forward(self, input):
        return F.prelu(input, self.weight)

    def extra_repr(self):
        return "num_parameters={}".format(self.num_parameters)


class Softsign(Module):
    def forward(self, input):
        return F.softsign(input)


class Tanhshrink(Module):
    def forward(self, input):
        return F.tanhshrink(input)


class Softmin(Module):
    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.softmin(input, self.dim, _stacklevel=5)

    def extra_repr(self):
        return "dim={dim}".format(dim=self.dim)


class Softmax2d(Module):
    def forward(self, input):
        if input.ndim not in (3, 4):
            raise ValueError("Softmax2d: expected input to be 3D or 4D, got {}D instead".format(input.ndim))
        return F.softmax(input, -3, _stacklevel=5)


def _module(name, op):
    """nn.<name>(*params, inplace=False), applying F.<op.name>: the module of an op-table entry that names one."""
    def __init__(self, *args, inplace=False, **kwargs):
        Module.__init__(self)
        values = dict(op.exposure.params)
        values.update(zip(values, args))
        values.update(kwargs)
        for k, v in values.items():
            setattr(self, k, v)
        self.inplace = args[len(values)] if len(args) > len(values) else inplace

    def forward(self, input):
        return getattr(F, op.name)(input, *(getattr(self, k) for k in op.exposure.params), inplace=self.inplace)

    def extra_repr(self):
        return ", ".join(["%s=%s" % (k, getattr(self, k)) for k in op.exposure.params] + (["inplace=True"] if self.inplace else []))
    return type(name, (Module,), {"__init__": __init__, "forward": forward, "extra_repr": extra_repr,
                                  "__module__": __name__, "__doc__": "Applies %s elementwise." % op.name})


GENERATED = {name: _module(name, op) for name, op in NN.items()}
globals().update(GENERATED)

from .attention import MultiheadAttention  # noqa: E402,F401  (PyTorch's module path for it)
