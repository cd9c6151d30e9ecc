"""CUDA twins of kernels/conv.py: im2col / col2im and the convolutions, over numba device arrays.

Convolution is the CPU's im2col + GEMM with the same column layout, ``cols[C*kh*kw, N*oh*ow]``,
and its GEMMs go to matmul.py's tiled kernel (batched over groups). im2col writes one column
entry per thread. col2im is a gather: one thread per image element sums the column entries
that fold onto it, so overlapping windows need no atomics and the sum does not depend on
thread timing. Every kernel is a grid-stride loop over its output and indexes 4-D arrays of
any strides. Pooling is in pool.py.
"""
from numba import cuda

from . import _launch as L
from .array import reshape, transpose
from .elementwise import run
from .matmul import matmul


# ---------------------------------------------------------------- kernels
@L.device_jit
def _unravel_nchw(e, C, H, W):
    """The (n, c, h, w) of flat index ``e`` into a C-ordered (N, C, H, W) array."""
    return e // (W * H * C), (e // (W * H)) % C, (e // W) % H, e % W


@L.jit
def _im2col(x, k, stride, pad, dil, out_hw, cols):
    """cols[(c*kh + ki)*kw + kj, (n*oh + i)*ow + j] = x[n, c, i*sh - ph + ki*dh, j*sw - pw + kj*dw], 0 off the image."""
    H, W = x.shape[2], x.shape[3]
    kh, kw = k
    oh, ow = out_hw
    width = cols.shape[1]
    for e in range(cuda.grid(1), cols.size, cuda.gridsize(1)):
        row = e // width
        col = e % width
        c = row // (kh * kw)
        ki = (row // kw) % kh
        kj = row % kw
        n = col // (oh * ow)
        i = (col // ow) % oh
        j = col % ow
        h = i * stride[0] - pad[0] + ki * dil[0]
        w = j * stride[1] - pad[1] + kj * dil[1]
        if 0 <= h < H and 0 <= w < W:
            cols[row, col] = x[n, c, h, w]
        else:
            cols[row, col] = 0


@L.jit
def _col2im(cols, k, stride, pad, dil, out_hw, zero, x):
    """x[n, c, h, w] = the sum of the column entries that im2col would have read from (h, w)."""
    C, H, W = x.shape[1], x.shape[2], x.shape[3]
    kh, kw = k
    oh, ow = out_hw
    for e in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        n, c, h, w = _unravel_nchw(e, C, H, W)
        s = zero
        for ki in range(kh):
            t = h + pad[0] - ki * dil[0]  # = i * stride for the output row i that reads h
            if t < 0:
                break  # t only decreases with ki
            i = t // stride[0]
            if t % stride[0] != 0 or i >= oh:
                continue
            for kj in range(kw):
                u = w + pad[1] - kj * dil[1]
                if u < 0:
                    break
                j = u // stride[1]
                if u % stride[1] == 0 and j < ow:
                    s += cols[(c * kh + ki) * kw + kj, (n * oh + i) * ow + j]
        x[n, c, h, w] = s


# ---------------------------------------------------------------- helpers
def _pair(t):
    return int(t[0]), int(t[1])


def _launch(kernel, n, *args):
    if n:
        L.launch(kernel, L.blocks_for(n), L.THREADS, *args)


# ---------------------------------------------------------------- convolution
def im2col(x, k, stride, padding, dilation, out_hw):
    N, C = x.shape[:2]
    k, out_hw = _pair(k), _pair(out_hw)
    cols = L.empty((C * k[0] * k[1], N * out_hw[0] * out_hw[1]), x.dtype)
    _launch(_im2col, cols.size, x, k, _pair(stride), _pair(padding), _pair(dilation), out_hw, cols)
    return cols


def col2im(cols, shape, k, stride, padding, dilation, out_hw):
    x = L.empty(tuple(shape), cols.dtype)
    _launch(_col2im, x.size, cols, _pair(k), _pair(stride), _pair(padding), _pair(dilation), _pair(out_hw),
            cols.dtype.type(0), x)
    return x


def _grouped(a, groups):
    """(rows, cols) -> (groups, rows // groups, cols)."""
    return reshape(a, (groups, a.shape[0] // groups, a.shape[1]))


def _channels_first(g):
    """(N, O, oh, ow) -> contiguous (O, N*oh*ow), the GEMM layout of an output gradient."""
    N, O, oh, ow = g.shape
    return reshape(transpose(g, (1, 0, 2, 3)), (O, N * oh * ow))


def conv2d(x, w, b, stride, padding, dilation, groups, out_hw):
    """(out[N, O, oh, ow], cols) of a convolution of x[N, C, H, W] with w[O, C/groups, kh, kw] (+ b[O]);
    cols, x's columns (C*kh*kw, N*oh*ow), for the weight gradient."""
    N = x.shape[0]
    O = w.shape[0]
    k = tuple(w.shape[2:])
    cols = im2col(x, k, stride, padding, dilation, out_hw)
    out = matmul(_grouped(reshape(w, (O, w.size // O)), groups), _grouped(cols, groups))
    out = transpose(reshape(out, (O, N) + tuple(out_hw)), (1, 0, 2, 3))
    # the copy into NCHW order, adding the bias on the way
    if b is None:
        return run("identity", x.dtype, out), cols
    return run("add", x.dtype, out, reshape(b, (1, O, 1, 1))), cols


def conv2d_input_grad(g, w, b, stride, padding, dilation, groups, in_hw):
    """The adjoint of conv2d in its input (= conv_transpose2d): g[N, O, oh, ow] -> [N, C, H, W] (+ b[C])."""
    N, O = g.shape[:2]
    C = w.shape[1] * groups
    k = tuple(w.shape[2:])
    wt = transpose(_grouped(reshape(w, (O, w.size // O)), groups), (0, 2, 1))
    cols = matmul(wt, _grouped(_channels_first(g), groups))
    cols = reshape(cols, (C * k[0] * k[1], cols.size // (C * k[0] * k[1])))
    out = col2im(cols, (N, C) + tuple(in_hw), k, stride, padding, dilation, tuple(g.shape[2:]))
    if b is not None:
        run("add", out.dtype, out, reshape(b, (1, C, 1, 1)), out=out)
    return out


def conv2d_weight_grad(x, g, stride, padding, dilation, groups, k, cols=None):
    """The adjoint of conv2d in its weight: x[N, C, H, W], g[N, O, oh, ow] -> [O, C/groups, kh, kw]
    (with x's columns ``cols`` where conv2d gave them: None or empty where it did not)."""
    C = x.shape[1]
    O = g.shape[1]
    if cols is None or not cols.size:
        cols = im2col(x, k, stride, padding, dilation, tuple(g.shape[2:]))
    gw = matmul(_grouped(_channels_first(g), groups), transpose(_grouped(cols, groups), (0, 2, 1)))
    return reshape(gw, (O, C // groups, k[0], k[1]))
