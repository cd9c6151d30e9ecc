"""F.unfold (im2col: sliding blocks as columns) and F.fold (col2im: columns summed back into an image),
each the other's VJP, on the im2col/col2im kernels that convolution uses."""
import numpy as np

from .._op import Op, dispatch
from ._table import _arr, _noncontig, register, rejects


def _pair(v):
    return tuple(v) if isinstance(v, (tuple, list)) else (v, v)


def _blocks(hw, k, dilation, padding, stride):
    return tuple((hw[i] + 2 * padding[i] - dilation[i] * (k[i] - 1) - 1) // stride[i] + 1 for i in range(2))


def _unfold_forward(xp, dt, x, k, dilation, padding, stride, out_hw):
    N, C = x.shape[:2]
    cols = xp.conv.im2col(x, k, stride, padding, dilation, out_hw)  # (C k k, N L)
    L = out_hw[0] * out_hw[1]
    return xp.copy(xp.transpose(xp.reshape(cols, (cols.shape[0], N, L)), (1, 0, 2)))


def _fold_forward(xp, dt, x, k, dilation, padding, stride, out_hw, output_size):
    N, CK, L = x.shape
    cols = xp.reshape(xp.transpose(x, (1, 0, 2)), (CK, N * L))
    return xp.conv.col2im(cols, (N, CK // (k[0] * k[1])) + tuple(output_size), k, stride, padding, dilation, out_hw)


def _params(kernel_size, dilation, padding, stride):
    return {"k": _pair(kernel_size), "dilation": _pair(dilation), "padding": _pair(padding), "stride": _pair(stride)}


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    if input.ndim not in (3, 4):
        raise RuntimeError("Expected 3D or 4D (batch mode) tensor with possibly 0 batch size and other non-zero "
                           "dimensions for input, but got: [%s]" % ", ".join(map(str, input.shape)))
    p = _params(kernel_size, dilation, padding, stride)
    batched = input.ndim == 4
    x = input if batched else input.unsqueeze(0)
    hw = tuple(x.shape[2:])
    p["out_hw"] = _blocks(hw, p["k"], p["dilation"], p["padding"], p["stride"])
    if min(p["out_hw"]) < 1:
        raise RuntimeError("Given input with spatial size %s, kernel_size=%s, dilation=%s, padding=%s, calculated shape "
                           "of the array of sliding blocks as %s, but its components must be at least one."
                           % (hw, p["k"], p["dilation"], p["padding"], p["out_hw"]))
    out = dispatch(UNFOLD, (x,), p)
    return out if batched else out.squeeze(0)


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    if input.ndim not in (2, 3):
        raise RuntimeError("Expected 2D or 3D (batch mode) tensor for input with possibly 0 batch size and non-zero "
                           "dimensions for input, but got: [%s]" % ", ".join(map(str, input.shape)))
    p = _params(kernel_size, dilation, padding, stride)
    batched = input.ndim == 3
    x = input if batched else input.unsqueeze(0)
    k = p["k"]
    if x.shape[1] % (k[0] * k[1]):
        raise RuntimeError("Expected size of input's dimension 1 to be divisible by the product of kernel_size, but got "
                           "input.size(1)=%d and kernel_size=%s." % (x.shape[1], k))
    size = _pair(output_size)
    p["out_hw"] = _blocks(size, k, p["dilation"], p["padding"], p["stride"])
    if p["out_hw"][0] * p["out_hw"][1] != x.shape[2]:
        raise RuntimeError("Given output_size=%s, kernel_size=%s, dilation=%s, padding=%s, stride=%s, expected size of "
                           "input's dimension 2 to match the calculated number of sliding blocks %d * %d = %d, but got "
                           "input.size(2)=%d." % (size, k, p["dilation"], p["padding"], p["stride"], p["out_hw"][0],
                                                  p["out_hw"][1], p["out_hw"][0] * p["out_hw"][1], x.shape[2]))
    p["output_size"] = size
    out = dispatch(FOLD, (x,), p)
    return out if batched else out.squeeze(0)


def _unfold_grad(g, s):
    return dispatch(FOLD, (g,), {"k": s.k, "dilation": s.dilation, "padding": s.padding, "stride": s.stride,
                                 "out_hw": s.out_hw, "output_size": tuple(s.self_shape[2:])})


def _fold_grad(g, s):
    return dispatch(UNFOLD, (g,), {"k": s.k, "dilation": s.dilation, "padding": s.padding, "stride": s.stride,
                                   "out_hw": s.out_hw})


# ---------------------------------------------------------------------- references and samples (see _table.py)
def _np_unfold(x, kernel_size, dilation=1, padding=0, stride=1):
    k, d, p, s = _pair(kernel_size), _pair(dilation), _pair(padding), _pair(stride)
    batched = x.ndim == 4
    x = x if batched else x[None]
    xp = np.pad(x, ((0, 0), (0, 0), (p[0], p[0]), (p[1], p[1])))
    oh, ow = _blocks(x.shape[2:], k, d, p, s)
    out = np.empty((x.shape[0], x.shape[1], k[0], k[1], oh, ow), x.dtype)
    for i in range(k[0]):
        for j in range(k[1]):
            out[:, :, i, j] = xp[:, :, i * d[0]: i * d[0] + s[0] * oh: s[0], j * d[1]: j * d[1] + s[1] * ow: s[1]]
    out = out.reshape(x.shape[0], -1, oh * ow)
    return out if batched else out[0]


def _np_fold(c, output_size, kernel_size, dilation=1, padding=0, stride=1):
    k, d, p, s = _pair(kernel_size), _pair(dilation), _pair(padding), _pair(stride)
    size = _pair(output_size)
    batched = c.ndim == 3
    c = c if batched else c[None]
    oh, ow = _blocks(size, k, d, p, s)
    C = c.shape[1] // (k[0] * k[1])
    cols = c.reshape(c.shape[0], C, k[0], k[1], oh, ow)
    out = np.zeros((c.shape[0], C, size[0] + 2 * p[0], size[1] + 2 * p[1]), c.dtype)
    for i in range(k[0]):
        for j in range(k[1]):
            out[:, :, i * d[0]: i * d[0] + s[0] * oh: s[0], j * d[1]: j * d[1] + s[1] * ow: s[1]] += cols[:, :, i, j]
    out = out[:, :, p[0]: p[0] + size[0], p[1]: p[1] + size[1]]
    return out if batched else out[0]


def _unfold_samples(rng, dtype):
    if np.dtype(dtype).kind != "f":
        return []
    A = lambda *s: _arr(rng, s, -2.0, 2.0, dtype)  # noqa: E731
    return [((A(1, 2, 4, 4), 2), {}), ((A(2, 3, 3), (2, 1)), {"stride": (1, 2), "padding": 1}),
            ((A(1, 1, 5, 4), 2), {"dilation": (2, 1), "padding": (0, 1), "stride": 2}),
            ((_noncontig(rng, (1, 2, 3, 4), -2.0, 2.0, dtype), 3), {"padding": 1})]


def _fold_samples(rng, dtype):
    if np.dtype(dtype).kind != "f":
        return []
    A = lambda *s: _arr(rng, s, -2.0, 2.0, dtype)  # noqa: E731
    return [((A(1, 8, 9), (4, 4), 2), {}), ((A(12, 4), (3, 2), (2, 3)), {"padding": 1, "stride": (1, 2)}),
            ((A(2, 4, 4), 3, 2), {"dilation": (1, 2), "padding": 1, "stride": 2}),
            ((_noncontig(rng, (1, 4, 9), -2.0, 2.0, dtype), (4, 4), 2), {})]


# ---------------------------------------------------------------------- the entries
_REJECT = ("bool", "int32", "int64")
UNFOLD = register(Op("im2col", _unfold_forward, vjp=[_unfold_grad], dtype="keep", node="Im2ColBackward0", call=unfold,
                     ref=_np_unfold, samples=_unfold_samples, bench={"sizes": [(1, 3, 16, 16), (8, 64, 64, 64)]},
                     unsupported=rejects(NotImplementedError, "\"im2col_out_cpu\" not implemented for '%(type)s'",
                                         *_REJECT)))
FOLD = register(Op("col2im", _fold_forward, vjp=[_fold_grad], dtype="keep", node="Col2ImBackward0", call=fold,
                   ref=_np_fold, samples=_fold_samples,
                   unsupported=rejects(NotImplementedError, "\"col2im_out_cpu\" not implemented for '%(type)s'",
                                       *_REJECT)))
