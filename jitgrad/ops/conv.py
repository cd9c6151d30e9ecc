"""Convolution ops (kernels in kernels/conv.py).

Convolution is three ops that are each other's VJPs, so gradients of any order are ordinary
graph nodes: with ``P`` the geometry of a convolution (stride, top/left padding, dilation,
groups, input and output image sizes, kernel size),

    conv2d(x, w)            x-grad: conv_transpose2d(g, w)   w-grad: conv2d_weight(x, g)
    conv_transpose2d(y, w)  y-grad: conv2d(g, w)             w-grad: conv2d_weight(g, y)
    conv2d_weight(x, y)     x-grad: conv_transpose2d(y, g)   y-grad: conv2d(x, g)

(all with the same ``P``). 1-d convolutions are the same ops on arrays with a height of 1.
"""
import numpy as np

from .._device import backend
from .._op import Op, dispatch
from .._tensor import Tensor
from ._table import LOWER, _arr, autocasts, export, register


def _kernels(xp):
    """The backend's conv kernels (kernels/conv.py or kernels/cuda/conv.py)."""
    return xp.conv


def _to4(xp, a, nd):
    """A 1-d (N, C, L) array as the 2-d (N, C, 1, L) the kernels take."""
    return a if nd == 2 or a is None else xp.expand_dims(a, 2)


def _from4(xp, a, nd):
    return a if nd == 2 else xp.reshape(a, a.shape[:2] + a.shape[3:])


# conv2d's second output is a workspace: the im2col columns of its input (an empty array where the kernels
# build none at once), which the fused weight gradient reads instead of building them again.
def _conv_forward(xp, dt, x, w, b, stride, padding, dilation, groups, in_hw, out_hw, k_hw, nd):
    out, cols = _kernels(xp).conv2d(_to4(xp, x, nd), _to4(xp, w, nd), b, stride, padding, dilation, groups, out_hw)
    return _from4(xp, out, nd), cols


def _conv_t_forward(xp, dt, y, w, b, stride, padding, dilation, groups, in_hw, out_hw, k_hw, nd):
    out = _kernels(xp).conv2d_input_grad(_to4(xp, y, nd), _to4(xp, w, nd), b, stride, padding, dilation, groups, in_hw)
    return _from4(xp, out, nd)


def _conv_w_forward(xp, dt, x, y, stride, padding, dilation, groups, in_hw, out_hw, k_hw, nd, cols=None):
    out = _kernels(xp).conv2d_weight_grad(_to4(xp, x, nd), _to4(xp, y, nd), stride, padding, dilation, groups, k_hw,
                                          cols)
    return _from4(xp, out, nd)


def _conv(x, w, b, params):
    """conv2d's result, without its workspace."""
    return dispatch(CONV, (x, w, b), params)[0]


_GEOMETRY = ("stride", "padding", "dilation", "groups", "in_hw", "out_hw", "k_hw", "nd")


def _geometry_of(s):
    """The params of a conv2d node (which also holds its outputs' metadata) that the other two ops take."""
    return {k: s.params[k] for k in _GEOMETRY}


def _weight_grad_fused(g, s):
    """conv2d's weight gradient (the formula's conv2d_weight) from the columns its forward built."""
    x = s.self._data
    return Tensor._wrap(_conv_w_forward(backend(x), None, x, g[0]._data, cols=s.columns._data, **_geometry_of(s)))


def _bias_grad(g, s):
    return g.sum((0, 2, 3) if s.nd == 2 else (0, 2))


def _conv_bias_grad(g, s):
    return _bias_grad(g[0], s)


# ---------------------------------------------------------------------- argument checks
def _dims(shape):
    return ", ".join(map(str, shape))


def _ntuple(v, n, name, what):
    """int or sequence -> n-tuple of ints, with PyTorch's message for a wrong length."""
    t = tuple(v) if isinstance(v, (tuple, list)) else (v,)
    if len(t) == 1:
        t = t * n
    if len(t) != n:
        raise RuntimeError("expected %s to be a single integer value or a list of %d values to match the %s "
                           "dimensions, but got %s=[%s]" % (name, n, what, name, _dims(t)))
    return tuple(int(x) for x in t)


def _check_types(input, weight, bias):
    if not isinstance(input, Tensor) or not isinstance(weight, Tensor):
        bad = input if not isinstance(input, Tensor) else weight
        raise TypeError("conv(): argument '%s' must be Tensor, not %s"
                        % ("input" if bad is input else "weight", type(bad).__name__))
    if bias is not None and bias.dtype is not input.dtype:
        raise RuntimeError("Input type (%s) and bias type (%s) should be the same"
                           % (_scalar_name(input), _scalar_name(bias)))
    if weight.dtype is not input.dtype:
        raise RuntimeError("Input type (%s) and weight type (%s) should be the same"
                           % (input.type(), weight.type()))


_TYPE_NAMES = {"float32": "Float", "float64": "Double", "int64": "Long", "int32": "Int", "bool": "Bool",
               "float16": "Half", "bfloat16": "BFloat16"}


def _no_kernel(input, kernel, kinds="b"):
    """PyTorch's error for a dtype it has no kernel for (bool: kinds 'b'; integers too: 'biu')."""
    if input.dtype.np.kind in kinds:
        raise NotImplementedError("\"%s\" not implemented for '%s'" % (kernel, _TYPE_NAMES[input.dtype.name]))


def _scalar_name(t):
    return {"float32": "float", "float64": "double", "int64": "long", "int32": "int", "bool": "bool",
            "float16": "c10::Half", "bfloat16": "c10::BFloat16"}[t.dtype.name]


def _geometry(nd, stride, padding, dilation, groups, in_size, k, out_size):
    """Op params for an nd-convolution (1-d convolutions run as 2-d ones with a height of 1)."""
    lift = (lambda t: t) if nd == 2 else (lambda t, one=1: (one,) + tuple(t))
    return {"stride": lift(stride), "padding": (lambda t: t if nd == 2 else (0,) + tuple(t))(padding),
            "dilation": lift(dilation), "groups": groups, "in_hw": lift(in_size), "out_hw": lift(out_size),
            "k_hw": lift(k), "nd": nd}


def _conv_padding(padding, nd, stride, dilation, k):
    """(top/left pads, bottom/right pads) from an int, a tuple or 'same'/'valid'."""
    if isinstance(padding, str):
        if padding == "valid":
            return (0,) * nd, (0,) * nd
        if padding != "same":
            raise RuntimeError("Invalid padding string: '%s'" % padding)
        if any(s != 1 for s in stride):
            raise RuntimeError("padding='same' is not supported for strided convolutions")
        total = [d * (kk - 1) for d, kk in zip(dilation, k)]
        left = tuple(t // 2 for t in total)
        return left, tuple(t - lo for t, lo in zip(total, left))
    p = _ntuple(padding, nd, "padding", "convolution")
    if any(x < 0 for x in p):
        raise RuntimeError("negative padding is not supported")
    return p, p


def _batched(input, nd, name):
    if input.ndim not in (nd + 1, nd + 2):
        raise RuntimeError("Expected %dD (unbatched) or %dD (batched) input to %s, but got input of size: [%s]"
                           % (nd + 1, nd + 2, name, _dims(input.shape)))
    return input.unsqueeze(0) if input.ndim == nd + 1 else input


def _check_weight(input, weight, nd, groups):
    if weight.ndim != nd + 2:
        raise RuntimeError("Expected %d-dimensional weight for %d-dimensional input [%s], but got %d-dimensional "
                           "weight of size [%s] instead" % (nd + 2, nd + 2, _dims(input.shape), weight.ndim,
                                                            _dims(weight.shape)))
    if groups <= 0:
        raise RuntimeError("non-positive groups is not supported")
    if weight.shape[0] % groups:
        raise RuntimeError("Given groups=%d, expected weight to be divisible by %d at dimension 0, but got weight of "
                           "size [[%s]] instead" % (groups, groups, _dims(weight.shape)))


def _check_bias(bias, weight, n, transposed=False):
    if bias is not None and (bias.ndim != 1 or bias.shape[0] != n):
        raise RuntimeError("Given %sweight of size [%s], expected bias to be 1-dimensional with %d elements, but got "
                           "bias of size [%s] instead" % ("transposed=1, " if transposed else "", _dims(weight.shape),
                                                          n, _dims(bias.shape)))


def _convnd(nd, input, weight, bias, stride, padding, dilation, groups):
    name = "conv%dd" % nd
    _check_types(input, weight, bias)
    _no_kernel(input, "slow_conv2d_cpu")
    unbatched = input.ndim == nd + 1
    x = _batched(input, nd, name)
    _check_weight(x, weight, nd, groups)
    stride = _ntuple(stride, nd, "stride", "convolution")
    dilation = _ntuple(dilation, nd, "dilation", "convolution")
    if any(s <= 0 for s in stride):
        raise RuntimeError("non-positive stride is not supported")
    if any(d <= 0 for d in dilation):
        raise RuntimeError("non-positive dilation is not supported")
    k = tuple(weight.shape[2:])
    lo, hi = _conv_padding(padding, nd, stride, dilation, k)
    C = x.shape[1]
    if C != weight.shape[1] * groups:
        raise RuntimeError("Given groups=%d, weight of size [%s], expected input[%s] to have %d channels, but got %d "
                           "channels instead" % (groups, _dims(weight.shape), _dims(x.shape), weight.shape[1] * groups,
                                                 C))
    _check_bias(bias, weight, weight.shape[0])
    size = tuple(x.shape[2:])
    padded = tuple(n + a + b for n, a, b in zip(size, lo, hi))
    dk = tuple(d * (kk - 1) + 1 for d, kk in zip(dilation, k))
    if any(p < kk for p, kk in zip(padded, dk)):
        raise RuntimeError("Calculated padded input size per channel: (%s). Kernel size: (%s). Kernel size can't be "
                           "greater than actual input size" % (" x ".join(map(str, padded)), " x ".join(map(str, dk))))
    out = tuple((p - kk) // s + 1 for p, kk, s in zip(padded, dk, stride))
    y = _conv(x, weight, bias, _geometry(nd, stride, lo, dilation, groups, size, k, out))
    return y.squeeze(0) if unbatched else y


def _conv_transposend(nd, input, weight, bias, stride, padding, output_padding, groups, dilation):
    name = "conv_transpose%dd" % nd
    if isinstance(padding, str):
        raise TypeError("%s(): argument 'padding' must be tuple of ints, not str" % name)
    _check_types(input, weight, bias)
    _no_kernel(input, "slow_conv_transpose2d_out_cpu")
    unbatched = input.ndim == nd + 1
    y = _batched(input, nd, name)
    _check_weight(y, weight, nd, groups)
    stride = _ntuple(stride, nd, "stride", "convolution")
    dilation = _ntuple(dilation, nd, "dilation", "convolution")
    padding = _ntuple(padding, nd, "padding", "convolution")
    output_padding = _ntuple(output_padding, nd, "output_padding", "convolution")
    if any(s <= 0 for s in stride):
        raise RuntimeError("non-positive stride is not supported")
    if any(d <= 0 for d in dilation):
        raise RuntimeError("non-positive dilation is not supported")
    if any(p < 0 for p in padding):
        raise RuntimeError("negative padding is not supported")
    if any(not 0 <= op < max(s, d) for op, s, d in zip(output_padding, stride, dilation)):
        hw = ("height", "width") if nd == 2 else ("width",)
        raise RuntimeError("output padding must be smaller than either stride or dilation, but got " + " ".join(
            ["output_padding_%s: %d" % (n, v) for n, v in zip(hw, output_padding)]
            + ["stride_%s: %d" % (n, v) for n, v in zip(hw, stride)]
            + ["dilation_%s: %d" % (n, v) for n, v in zip(hw, dilation)]))
    if y.shape[1] != weight.shape[0]:
        raise RuntimeError("Given transposed=1, weight of size [%s], expected input[%s] to have %d channels, but got "
                           "%d channels instead" % (_dims(weight.shape), _dims(y.shape), weight.shape[0], y.shape[1]))
    _check_bias(bias, weight, weight.shape[1] * groups, transposed=True)
    size = tuple(y.shape[2:])
    k = tuple(weight.shape[2:])
    out = tuple((n - 1) * s - 2 * p + d * (kk - 1) + op + 1
                for n, s, p, d, kk, op in zip(size, stride, padding, dilation, k, output_padding))
    if any(o <= 0 for o in out):
        raise RuntimeError("Given input size per channel: (%s). Calculated output size per channel: (%s). Output size "
                           "is too small" % (" x ".join(map(str, size)), " x ".join(map(str, out))))
    # the geometry of the convolution whose adjoint this is: its image is our output
    x = dispatch(CONV_T, (y, weight, bias), _geometry(nd, stride, padding, dilation, groups, out, k, size))
    return x.squeeze(0) if unbatched else x


@autocasts("conv2d")
def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return _convnd(2, input, weight, bias, stride, padding, dilation, groups)


@export("conv1d", method=False)
@autocasts("conv2d")
def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return _convnd(1, input, weight, bias, stride, padding, dilation, groups)


@autocasts("conv_transpose2d")
def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    return _conv_transposend(2, input, weight, bias, stride, padding, output_padding, groups, dilation)


@export("conv_transpose1d", method=False)
@autocasts("conv_transpose2d")
def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    return _conv_transposend(1, input, weight, bias, stride, padding, output_padding, groups, dilation)


def conv2d_weight(input, weight_size, grad_output, stride=1, padding=0, dilation=1, groups=1):
    """The gradient of conv2d with respect to its weight (``torch.nn.grad.conv2d_weight``)."""
    nd = len(weight_size) - 2
    stride, dilation = _ntuple(stride, nd, "stride", "convolution"), _ntuple(dilation, nd, "dilation", "convolution")
    padding = _ntuple(padding, nd, "padding", "convolution")
    expected = (grad_output.shape[0], weight_size[0]) + tuple(
        (n + 2 * p - d * (k - 1) - 1) // s + 1
        for n, p, d, k, s in zip(input.shape[2:], padding, dilation, weight_size[2:], stride))
    if tuple(grad_output.shape) != expected or input.shape[1] != weight_size[1] * groups:
        raise RuntimeError("conv%dd_weight: grad_output of size [%s] does not match input [%s] and weight size [%s]"
                           % (nd, _dims(grad_output.shape), _dims(input.shape), _dims(weight_size)))
    return dispatch(CONV_W, (input, grad_output),
                    _geometry(nd, stride, padding, dilation, groups, tuple(input.shape[2:]), tuple(weight_size[2:]),
                              tuple(grad_output.shape[2:])))


# ---------------------------------------------------------------------- references and samples (see _table.py)
def _np_conv2d(x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
    """Direct convolution with NumPy (sliding windows), the reference for the kernels."""
    nd = x.ndim - 2
    s = _ntuple(stride, nd, "stride", "convolution")
    d = _ntuple(dilation, nd, "dilation", "convolution")
    k = w.shape[2:]
    lo, hi = _conv_padding(padding, nd, s, d, k)
    xp = np.pad(x, [(0, 0), (0, 0)] + list(zip(lo, hi)))
    N, C = x.shape[:2]
    O, Cg = w.shape[:2]
    dk = [di * (kk - 1) + 1 for di, kk in zip(d, k)]
    win = np.lib.stride_tricks.sliding_window_view(xp, dk, axis=tuple(range(2, 2 + nd)))
    win = win[(Ellipsis,) + tuple(slice(None, None, di) for di in d)]  # dilation
    win = win[(slice(None), slice(None)) + tuple(slice(None, None, si) for si in s)]  # stride
    out = np.concatenate([np.einsum("nc...k,ock->no..." if nd == 1 else "nc...kl,ockl->no...",
                                    win[:, gi * Cg:(gi + 1) * Cg], w[gi * (O // groups):(gi + 1) * (O // groups)])
                          for gi in range(groups)], axis=1)
    return out if b is None else out + b.reshape((1, O) + (1,) * nd)


def _conv_samples(rng, dtype):
    A = lambda *s: _arr(rng, s, -1.0, 1.0, dtype)  # noqa: E731
    return [((A(2, 3, 5, 5), A(4, 3, 3, 3), A(4)), {}),
            ((A(1, 4, 6, 5), A(2, 2, 2, 3), None), {"stride": (2, 1), "padding": 1, "dilation": (1, 2), "groups": 2}),
            ((A(1, 2, 4, 4), A(3, 2, 2, 2), A(3)), {"padding": "same"}),
            ((A(3, 2, 4, 4), A(2, 2, 1, 1), None), {})]


def _conv_t_samples(rng, dtype):
    A = lambda *s: _arr(rng, s, -1.0, 1.0, dtype)  # noqa: E731
    return [((A(2, 3, 3, 3), A(3, 2, 3, 3), A(2)), {}),
            ((A(1, 4, 3, 2), A(4, 1, 2, 3), None), {"stride": 2, "padding": 1, "output_padding": 1, "groups": 2}),
            ((A(1, 2, 3, 3), A(2, 2, 2, 2), A(2)), {"dilation": 2})]


def _np_conv_transpose2d(y, w, b=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """Scatter form of conv_transpose2d: each input pixel adds a weighted kernel into the output."""
    s, p, op, d = (_ntuple(v, 2, "", "") for v in (stride, padding, output_padding, dilation))
    N, Ci, H, W = y.shape
    Cog, kh, kw = w.shape[1:]
    Co = Cog * groups
    Ho = (H - 1) * s[0] - 2 * p[0] + d[0] * (kh - 1) + op[0] + 1
    Wo = (W - 1) * s[1] - 2 * p[1] + d[1] * (kw - 1) + op[1] + 1
    full = np.zeros((N, Co, Ho + 2 * p[0] + s[0] * 2, Wo + 2 * p[1] + s[1] * 2), y.dtype)
    cig = Ci // groups
    for gi in range(groups):
        yy = y[:, gi * cig:(gi + 1) * cig]
        ww = w[gi * cig:(gi + 1) * cig]
        for i in range(kh):
            for j in range(kw):
                contrib = np.einsum("nchw,co->nohw", yy, ww[:, :, i, j])
                full[:, gi * Cog:(gi + 1) * Cog, i * d[0]:i * d[0] + (H - 1) * s[0] + 1:s[0],
                     j * d[1]:j * d[1] + (W - 1) * s[1] + 1:s[1]] += contrib
    out = full[:, :, p[0]:p[0] + Ho, p[1]:p[1] + Wo]
    return out if b is None else out + b.reshape(1, Co, 1, 1)


def _conv_w_samples(rng, dtype):
    A = lambda *s: _arr(rng, s, -1.0, 1.0, dtype)  # noqa: E731
    return [((A(2, 3, 5, 5), (4, 3, 3, 3), A(2, 4, 3, 3)), {}),
            ((A(1, 4, 5, 5), (2, 2, 2, 2), A(1, 2, 3, 3)), {"stride": 2, "padding": 1, "groups": 2})]


def _np_conv2d_weight(x, weight_size, g, stride=1, padding=0, dilation=1, groups=1):
    """By linearity: entry (o, c, i, j) is <conv2d(x, e_ocij), g>."""
    out = np.zeros(weight_size, x.dtype)
    for idx in np.ndindex(*weight_size):
        e = np.zeros(weight_size, x.dtype)
        e[idx] = 1
        out[idx] = (_np_conv2d(x, e, None, stride, padding, dilation, groups) * g).sum()
    return out


def _float_only(samples):
    """Samples for floating dtypes only (integer/bool behaviour is tested in tests/nn/test_nn_layers.py)."""
    def fn(rng, dtype):
        return samples(rng, dtype) if np.dtype(dtype).kind == "f" else []
    return fn


# ---------------------------------------------------------------------- the entries
def _conv_op(name, forward, inputs, vjp, node, **kw):
    # (no op-level bench sizes: convolutions are timed in benchmarks/ as part of a CNN step)
    return register(Op(name, forward, inputs=inputs, vjp=vjp, dtype="promote", node=node, **kw))


CONV = _conv_op("conv2d", _conv_forward, ("self", "weight", "bias"),
                [lambda g, s: dispatch(CONV_T, (g[0], s.weight, None), _geometry_of(s)),
                 lambda g, s: dispatch(CONV_W, (s.self, g[0]), _geometry_of(s)),
                 _conv_bias_grad], "ConvolutionBackward0", fused=[None, _weight_grad_fused],
                n_outputs=2, outputs=("result", "columns"), workspace=("columns",),
                call=conv2d, ref=_np_conv2d, samples=_float_only(_conv_samples), api=("conv2d",), method=False,
                autocast=LOWER)
CONV_T = _conv_op("conv_transpose2d", _conv_t_forward, ("self", "weight", "bias"),
                  [lambda g, s: _conv(g, s.weight, None, s.params),
                   lambda g, s: dispatch(CONV_W, (g, s.self), s.params),
                   _bias_grad], "ConvolutionBackward0",
                  call=conv_transpose2d, ref=_np_conv_transpose2d, samples=_float_only(_conv_t_samples),
                  api=("conv_transpose2d",), method=False, autocast=LOWER)
CONV_W = _conv_op("conv2d_weight", _conv_w_forward, ("self", "grad_output"),
                  [lambda g, s: dispatch(CONV_T, (s.grad_output, g, None), s.params),
                   lambda g, s: _conv(s.self, g, None, s.params)],
                  "ConvolutionBackwardWeight0", call=conv2d_weight, ref=_np_conv2d_weight,
                  samples=_float_only(_conv_w_samples))
