"""Conv1d, Conv2d (every padding_mode), ConvTranspose1d, ConvTranspose2d (zero padding), with PyTorch's
default init."""
from .. import functional as F
from ..module import Module
from .linear import _kaiming_default_, _weight_and_bias


def _ntuple(v, n):
    return tuple(v) if isinstance(v, (tuple, list)) else (v,) * n


class _ConvNd(Module):
    _nd = 2

    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, dilation, transposed, output_padding,
                 groups, bias, padding_mode, device=None, dtype=None):
        super().__init__()
        n = self._nd
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups != 0:
            raise ValueError("out_channels must be divisible by groups")
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError("Invalid padding string %r, should be one of {'valid', 'same'}" % padding)
            if padding == "same" and any(s != 1 for s in _ntuple(stride, n)):
                raise ValueError("padding='same' is not supported for strided convolutions")
        if padding_mode not in ("zeros", "reflect", "replicate", "circular"):
            raise ValueError("padding_mode must be one of {'zeros', 'reflect', 'replicate', 'circular'}, but got "
                             "padding_mode='%s'" % padding_mode)
        if padding_mode != "zeros" and transposed:
            raise ValueError('Only "zeros" padding mode is supported for %s' % type(self).__name__)
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = _ntuple(kernel_size, n)
        self.stride = _ntuple(stride, n)
        self.padding = padding if isinstance(padding, str) else _ntuple(padding, n)
        self.dilation = _ntuple(dilation, n)
        self.transposed = transposed
        self.output_padding = _ntuple(output_padding, n)
        self.groups = groups
        self.padding_mode = padding_mode
        shape = (in_channels, out_channels // groups) if transposed else (out_channels, in_channels // groups)
        _weight_and_bias(self, shape + self.kernel_size, out_channels, bias, dtype, device)
        self.reset_parameters()

    def reset_parameters(self):
        _kaiming_default_(self.weight, self.bias)

    def _padded(self, input):
        """(input, padding) for the convolution: a non-zero padding_mode pads with F.pad first (PyTorch's
        _reversed_padding_repeated_twice: 'same' splits the total, the extra element on the right)."""
        if self.padding_mode == "zeros":
            return input, self.padding
        pads = []
        for d in reversed(range(self._nd)):
            if self.padding == "valid":
                lo = hi = 0
            elif self.padding == "same":
                total = self.dilation[d] * (self.kernel_size[d] - 1)
                lo, hi = total // 2, total - total // 2
            else:
                lo = hi = self.padding[d]
            pads += [lo, hi]
        return F.pad(input, pads, mode=self.padding_mode), 0

    def extra_repr(self):
        n = len(self.kernel_size)
        s = "%d, %d, kernel_size=%s, stride=%s" % (self.in_channels, self.out_channels, self.kernel_size, self.stride)
        if self.padding != (0,) * n:
            s += ", padding=%s" % (self.padding,)
        if self.dilation != (1,) * n:
            s += ", dilation=%s" % (self.dilation,)
        if self.output_padding != (0,) * n:
            s += ", output_padding=%s" % (self.output_padding,)
        if self.groups != 1:
            s += ", groups=%d" % self.groups
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += ", padding_mode=%s" % self.padding_mode
        return s


class Conv1d(_ConvNd):
    _nd = 1

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 padding_mode="zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, False, 0, groups, bias,
                         padding_mode, device, dtype)

    def forward(self, input):
        input, padding = self._padded(input)
        return F.conv1d(input, self.weight, self.bias, self.stride, padding, self.dilation, self.groups)


class Conv2d(_ConvNd):
    """2-d convolution over (N, C, H, W) inputs (im2col + BLAS kernels)."""
    _nd = 2

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 padding_mode="zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, False, 0, groups, bias,
                         padding_mode, device, dtype)

    def forward(self, input):
        input, padding = self._padded(input)
        return F.conv2d(input, self.weight, self.bias, self.stride, padding, self.dilation, self.groups)


class _ConvTransposeNd(_ConvNd):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1,
                 bias=True, dilation=1, padding_mode="zeros", device=None, dtype=None):
        if isinstance(padding, str):
            raise TypeError("%s(): argument 'padding' must be tuple of ints, not str" % type(self).__name__)
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, True, output_padding,
                         groups, bias, padding_mode, device, dtype)

    def _output_padding(self, input, output_size):
        """output_padding that makes the output exactly ``output_size`` (PyTorch's rule)."""
        if output_size is None:
            return self.output_padding
        n = self._nd
        output_size = tuple(output_size)[-n:]
        if len(output_size) != n:
            raise ValueError("ConvTranspose%dD: for %dD input, output_size must have %d or %d elements (got %d)"
                             % (n, input.ndim, n, n + 2, len(output_size)))
        pads = []
        for d in range(n):
            size = input.shape[input.ndim - n + d]
            lo = (size - 1) * self.stride[d] - 2 * self.padding[d] + self.dilation[d] * (self.kernel_size[d] - 1) + 1
            hi = lo + self.stride[d] - 1
            if not lo <= output_size[d] <= hi:
                raise ValueError("requested an output size of %s, but valid sizes range from %s to %s (for an input "
                                 "of %s)" % (list(output_size), lo, hi, list(input.shape[2:])))
            pads.append(output_size[d] - lo)
        return tuple(pads)


class ConvTranspose1d(_ConvTransposeNd):
    _nd = 1

    def forward(self, input, output_size=None):
        return F.conv_transpose1d(input, self.weight, self.bias, self.stride, self.padding,
                                  self._output_padding(input, output_size), self.groups, self.dilation)


class ConvTranspose2d(_ConvTransposeNd):
    """The adjoint of Conv2d (a 'deconvolution'); weight is (in_channels, out_channels // groups, kh, kw)."""
    _nd = 2

    def forward(self, input, output_size=None):
        return F.conv_transpose2d(input, self.weight, self.bias, self.stride, self.padding,
                                  self._output_padding(input, output_size), self.groups, self.dilation)
