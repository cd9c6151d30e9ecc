"""Activation modules: thin wrappers of nn.functional with PyTorch's reprs."""
from ...ops import NN
from .. import functional as F
from ..module import Module


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
