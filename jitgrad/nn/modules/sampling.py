"""Upsample, Fold/Unfold and the padding layers (reflection, replication, circular, constant, zero)."""
from .. import functional as F
from ..module import Module


class Upsample(Module):
    def __init__(self, size=None, scale_factor=None, mode="nearest", align_corners=None, recompute_scale_factor=None):
        super().__init__()
        self.name = type(self).__name__
        self.size = size
        self.scale_factor = float(scale_factor) if isinstance(scale_factor, (int, float)) else \
            (tuple(float(s) for s in scale_factor) if scale_factor else None)
        self.mode = mode
        self.align_corners = align_corners
        self.recompute_scale_factor = recompute_scale_factor

    def forward(self, input):
        return F.interpolate(input, self.size, self.scale_factor, self.mode, self.align_corners,
                             recompute_scale_factor=self.recompute_scale_factor)

    def extra_repr(self):
        info = "scale_factor=" + repr(self.scale_factor) if self.scale_factor is not None else "size=" + repr(self.size)
        return info + ", mode=" + repr(self.mode)


class Unfold(Module):
    def __init__(self, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.kernel_size, self.dilation, self.padding, self.stride = kernel_size, dilation, padding, stride

    def forward(self, input):
        return F.unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self):
        return "kernel_size={kernel_size}, dilation={dilation}, padding={padding}, stride={stride}".format(**self.__dict__)


class Fold(Module):
    def __init__(self, output_size, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.output_size = output_size
        self.kernel_size, self.dilation, self.padding, self.stride = kernel_size, dilation, padding, stride

    def forward(self, input):
        return F.fold(input, self.output_size, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self):
        return ("output_size={output_size}, kernel_size={kernel_size}, dilation={dilation}, padding={padding}, "
                "stride={stride}".format(**self.__dict__))


def _padding_module(name, mode, k, constant=False):
    """nn.<name>(padding[, value]): F.pad over the last k dims; an int pads every side by it."""
    def __init__(self, padding, value=0.0):
        Module.__init__(self)
        self.padding = (padding,) * (2 * k) if isinstance(padding, int) else tuple(padding)
        if constant:
            self.value = value

    def forward(self, input):
        return F.pad(input, self.padding, mode, self.value if constant else None)

    def extra_repr(self):
        return "padding={}, value={}".format(self.padding, self.value) if constant else "{}".format(self.padding)
    if not constant:
        __init__ = (lambda init: lambda self, padding: init(self, padding))(__init__)
    return type(name, (Module,), {"__init__": __init__, "forward": forward, "extra_repr": extra_repr,
                                  "__module__": __name__, "__doc__": "Pads the last %d dims (%s)." % (k, mode)})


PADDING = {}
for _k in (1, 2, 3):
    for _name, _mode in (("ReflectionPad", "reflect"), ("ReplicationPad", "replicate"), ("CircularPad", "circular")):
        PADDING["%s%dd" % (_name, _k)] = _padding_module("%s%dd" % (_name, _k), _mode, _k)
    PADDING["ConstantPad%dd" % _k] = _padding_module("ConstantPad%dd" % _k, "constant", _k, constant=True)
PADDING["ZeroPad1d"] = _padding_module("ZeroPad1d", "constant", 1)
PADDING["ZeroPad2d"] = _padding_module("ZeroPad2d", "constant", 2)
PADDING["ZeroPad3d"] = _padding_module("ZeroPad3d", "constant", 3)
globals().update(PADDING)
