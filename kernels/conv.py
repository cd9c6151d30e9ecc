"""Convolution kernels over NCHW arrays: im2col / col2im, the GEMM blocks and the small-kernel loops.

Convolution is im2col + one BLAS GEMM per group: ``cols[C*kh*kw, N*oh*ow]`` holds, for every
output pixel, the input values its kernel window sees (zero where the window hangs over the
padding). The three products of a convolution are then

    forward       out[g]  = W[g] @ cols[g]
    input grad    cols[g] = W[g].T @ gout[g]   then col2im adds the columns back into the image
    weight grad   gW[g]   = gout[g] @ cols[g].T

taken a block of images at a time (columns of a few MB, which stay in cache between the GEMM
and im2col or col2im). Convolutions with tiny kernels (a first layer over one or two channels),
whose GEMMs would be all memory traffic, run as plain loops over cached columns instead.

Geometry is always explicit (stride, top/left padding, dilation, and both image sizes), so
asymmetric padding ('same' with an even kernel) and conv_transpose's output_padding need no
special cases. Pooling is in pool.py.
"""
import numpy as np
from numba import njit, prange

from . import blas, config
from ._jit import twins


# ---------------------------------------------------------------- im2col / col2im
@njit(error_model="numpy", fastmath=config.FOLD_FASTMATH)
def _valid_span(off, stride, size, n):
    """[j0, j1): the outputs j < n whose input column j*stride + off lies in [0, size)."""
    j0 = 0 if off >= 0 else (stride - 1 - off) // stride
    j1 = 0 if size - 1 - off < 0 else (size - 1 - off) // stride + 1
    j1 = min(j1, n)
    return min(j0, j1), j1


# Indices cast to _ix (unsigned) skip numba's wrap-around test for negative indices: that test,
# one select per element, keeps LLVM from seeing consecutive addresses, and the loops over image
# rows (~14 elements) from vectorizing; every index so cast is >= 0 by construction.
_ix = np.uint64


# The columns of an input plane loop over output rows in three spans (left padding, the columns
# inside the image, right padding), so that the inner loops are plain indexed copies with no
# bounds test per element.
@njit(error_model="numpy", fastmath=config.FOLD_FASTMATH)
def _plane_cols(x, kh, kw, sh, sw, ph, pw, dh, dw, i0, i1, ow, cols, row0, start):
    """The im2col rows of one input plane x[H, W] for output rows [i0, i1):
    cols[row0 + ki*kw + kj, start + (i - i0)*ow + j] = x[i*sh - ph + ki*dh, j*sw - pw + kj*dw] (0 off the plane)."""
    H, W = x.shape
    zero = cols.dtype.type(0)
    for ki in range(kh):
        for kj in range(kw):
            off = kj * dw - pw
            j0, j1 = _valid_span(off, sw, W, ow)
            dst = cols[row0 + ki * kw + kj]
            for i in range(i0, i1):
                h = i * sh - ph + ki * dh
                o = start + (i - i0) * ow
                if h < 0 or h >= H:
                    for j in range(ow):
                        dst[_ix(o + j)] = zero
                    continue
                src = x[h]
                for j in range(j0):
                    dst[_ix(o + j)] = zero
                if sw == 1:  # a plain copy (strided reads do not vectorize)
                    for j in range(j0, j1):
                        dst[_ix(o + j)] = src[_ix(j + off)]
                else:
                    for j in range(j0, j1):
                        dst[_ix(o + j)] = src[_ix(j * sw + off)]
                for j in range(j1, ow):
                    dst[_ix(o + j)] = zero


def _im2col(x, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow, cols):
    N, C = x.shape[0], x.shape[1]
    for t in prange(N * C):
        n, c = t // C, t % C
        _plane_cols(x[n, c], kh, kw, sh, sw, ph, pw, dh, dw, 0, oh, ow, cols, c * kh * kw, n * oh * ow)


def _col2im(cols, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow, x):
    """x[n, c] += the columns of ``cols`` folded back (x starts at zero; planes are independent)."""
    N, C, H, W = x.shape
    L = oh * ow
    for t in prange(N * C):
        n, c = t // C, t % C
        xc = x[n, c]
        for ki in range(kh):
            for kj in range(kw):
                src = cols[(c * kh + ki) * kw + kj]
                off = kj * dw - pw
                j0, j1 = _valid_span(off, sw, W, ow)
                for i in range(oh):
                    h = i * sh - ph + ki * dh
                    if h < 0 or h >= H:
                        continue
                    o = n * L + i * ow
                    dst = xc[h]
                    if sw == 1:
                        for j in range(j0, j1):
                            dst[_ix(j + off)] += src[_ix(o + j)]
                    else:
                        for j in range(j0, j1):
                            dst[_ix(j * sw + off)] += src[_ix(o + j)]


# ---------------------------------------------------------------- small kernels, GEMM output
# A convolution whose GEMMs would have a tiny inner dimension K = C/groups*kh*kw (a first layer
# over 1 or 2 input channels) spends its time writing and reading columns and GEMM outputs, not
# multiplying. These work by tasks of (image, group, band of ``rows`` output rows): the task's
# columns (K rows) go to a buffer the cache holds, and plain loops multiply them, writing NCHW.
@njit(error_model="numpy", fastmath=config.FOLD_FASTMATH)
def _band_cols(x, n, gi, kh, kw, sh, sw, ph, pw, dh, dw, i0, i1, ow, K):
    """The columns of image n's channels of group gi, output rows [i0, i1): (K, (i1 - i0)*ow)."""
    cols = np.empty((K, (i1 - i0) * ow), x.dtype)
    per_group = K // (kh * kw)
    for cg in range(per_group):
        _plane_cols(x[n, gi * per_group + cg], kh, kw, sh, sw, ph, pw, dh, dw, i0, i1, ow, cols, cg * kh * kw, 0)
    return cols


@njit(error_model="numpy", fastmath=config.FOLD_FASTMATH)
def _tasks(window_rows, K, O, oh, rows):
    """(groups, outputs per group, bands of ``rows`` output rows) of the loops below (C*kh*kw = window_rows)."""
    groups = window_rows // K
    return groups, O // groups, -(-oh // rows)


@njit(error_model="numpy", fastmath=config.FOLD_FASTMATH)
def _task_cols(x, t, groups, bands, rows, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw, K):
    """Task t of the loops below: (image n, group gi, first output row i0, the band's columns)."""
    n, gi, band = t // (groups * bands), (t // bands) % groups, t % bands
    i0, i1 = band * rows, min(oh, band * rows + rows)
    return n, gi, i0, _band_cols(x, n, gi, kh, kw, sh, sw, ph, pw, dh, dw, i0, i1, ow, K)


def _conv_small(x, w, b, kh, kw, sh, sw, ph, pw, dh, dw, rows, out):
    """out[n, o] = b[o] + w[o] @ (image n's columns of o's group); w is (O, K)."""
    N, O, oh, ow = out.shape
    K = w.shape[1]
    groups, per_group, bands = _tasks(x.shape[1] * kh * kw, K, O, oh, rows)
    for t in prange(N * groups * bands):
        n, gi, i0, cols = _task_cols(x, t, groups, bands, rows, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw, K)
        m = cols.shape[1]
        for o in range(gi * per_group, (gi + 1) * per_group):
            dst = out[n, o].reshape(oh * ow)[i0 * ow:]
            bias = b[o]
            for p in range(m):
                dst[_ix(p)] = bias
            for k in range(K):
                wv = w[o, k]
                src = cols[k]
                for p in range(m):
                    dst[_ix(p)] += wv * src[_ix(p)]


def _conv_small_weight_grad(x, g, kh, kw, sh, sw, ph, pw, dh, dw, rows, part):
    """part[t, o % (O/groups), k] = the sum over task t's band of g[n, o] * row k of its columns, for
    the outputs o of the task's group (the weight gradient is the sum over the tasks of each group)."""
    N, O, oh, ow = g.shape
    K = part.shape[2]
    groups, per_group, bands = _tasks(x.shape[1] * kh * kw, K, O, oh, rows)
    for t in prange(N * groups * bands):
        n, gi, i0, cols = _task_cols(x, t, groups, bands, rows, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw, K)
        m = cols.shape[1]
        for og in range(per_group):
            gr = g[n, gi * per_group + og].reshape(oh * ow)[i0 * ow:]
            for k in range(K):
                src = cols[k]
                s = part.dtype.type(0)
                for p in range(m):
                    s += gr[_ix(p)] * src[_ix(p)]
                part[t, og, k] = s


def _to_nchw(y, b, out):
    """out[n, o] = y[o, n*L:(n+1)*L] + b[o]: a GEMM output in NCHW order, with the bias."""
    N, O = out.shape[0], out.shape[1]
    L = out.shape[2] * out.shape[3]
    for t in prange(N * O):
        n, o = t // O, t % O
        src, dst, bias = y[o], out[n, o].reshape(L), b[o]
        for p in range(L):
            dst[_ix(p)] = src[_ix(n * L + p)] + bias


_KERNELS = {f.__name__[1:]: twins(f, fastmath=config.FOLD_FASTMATH)
            for f in (_im2col, _col2im, _conv_small, _conv_small_weight_grad, _to_nchw)}


def kernel(name, size):
    """The serial or parallel build of kernel ``name`` for work on ``size`` elements."""
    return _KERNELS[name][size >= config.PARALLEL_THRESHOLD]


# ---------------------------------------------------------------- convolution
def _geometry(k, stride, padding, dilation):
    """The kernels' geometry arguments (kh, kw, sh, sw, ph, pw, dh, dw)."""
    return k[0], k[1], stride[0], stride[1], padding[0], padding[1], dilation[0], dilation[1]


def im2col(x, k, stride, padding, dilation, out_hw, cols=None):
    """The columns of x (into ``cols``, a (C*kh*kw, N*oh*ow) array, where given)."""
    N, C = x.shape[:2]
    if cols is None:
        cols = np.empty((C * k[0] * k[1], N * out_hw[0] * out_hw[1]), x.dtype)
    kernel("im2col", cols.size)(np.ascontiguousarray(x), *_geometry(k, stride, padding, dilation), out_hw[0],
                                out_hw[1], cols)
    return cols


def col2im(cols, shape, k, stride, padding, dilation, out_hw, x=None):
    """The columns folded back into an image of ``shape`` (added into ``x``, where given)."""
    if x is None:
        x = np.zeros(shape, cols.dtype)
    kernel("col2im", cols.size)(cols, *_geometry(k, stride, padding, dilation), out_hw[0], out_hw[1], x)
    return x


# The GEMM path works through the batch a block of images at a time, with columns of at most
# BLOCK_BYTES, so that they are still in cache when the GEMM reads them (and the GEMM's columns
# when col2im does): a whole batch's columns (7 MB for 64 images of 16 x 14 x 14 and a 3x3
# kernel) would go out to memory and back, into pages freshly mapped on every call.
BLOCK_BYTES = 2 << 20


class _Blocks:
    """Image blocks [n0, n1) of a batch of N, with buffers for one block's worth of each GEMM
    operand of ``rows`` rows (views of the right size for each block)."""

    def __init__(self, N, L, dtype, **rows):
        self.N, self.L = N, L
        self.size = max(1, min(N, BLOCK_BYTES // (max(rows.values()) * L * np.dtype(dtype).itemsize)))
        self.buffers = {name: np.empty(r * self.size * L, dtype) for name, r in rows.items()}

    def __iter__(self):
        return ((n0, min(self.N, n0 + self.size)) for n0 in range(0, self.N, self.size))

    def __len__(self):
        return -(-self.N // self.size)

    def buffer(self, name, n, groups=1):
        """Buffer ``name`` for a block of n images, as (groups, rows // groups, n*L)."""
        buf = self.buffers[name]
        m = n * self.L
        return buf[:buf.size // (self.size * self.L) * m].reshape(groups, -1, m)


def _grouped(a, groups):
    """(rows, cols) -> (groups, rows // groups, cols)."""
    return a.reshape(groups, a.shape[0] // groups, a.shape[1])


def _matmul(a, b, out):
    """out = a @ b batched over groups (a single group as a plain 2-D GEMM)."""
    if a.shape[0] == 1:
        blas.matmul(a[0], b[0], out[0])
    else:
        blas.matmul(a, b, out)
    return out


def _channels_first(g, out):
    """g[N, O, oh, ow] -> out, (O, N*oh*ow): the GEMM layout of an output gradient."""
    N, O = g.shape[:2]
    np.copyto(out.reshape(O, N, -1), g.reshape(N, O, -1).transpose(1, 0, 2))
    return out


# The largest inner dimension (C/groups*kh*kw) of a convolution run by the small-kernel loops
# rather than im2col + GEMM (measured: 9 and 18 faster with the loops, 36 and up with BLAS).
SMALL_K = 18


def _small(w):
    return w[0].size <= SMALL_K


def _band(out_hw):
    """Output rows per task of the small-kernel loops: about 1024 output pixels."""
    return max(1, min(out_hw[0], 1024 // out_hw[1]))


def conv2d(x, w, b, stride, padding, dilation, groups, out_hw):
    """(out[N, O, oh, ow], cols) of a convolution of x[N, C, H, W] with w[O, C/groups, kh, kw] (+ b[O]):
    cols, x's columns (C*kh*kw, N*oh*ow) for the weight gradient, where the whole batch's are built at once
    (an empty array otherwise: the small-kernel loops build none, a batch of several blocks reuses its buffer)."""
    N, C = x.shape[:2]
    O = w.shape[0]
    k = w.shape[2:]
    out = np.empty((N, O) + tuple(out_hw), x.dtype)
    bias = np.zeros(O, x.dtype) if b is None else np.ascontiguousarray(b, x.dtype)
    xc = np.ascontiguousarray(x)
    if _small(w):
        kernel("conv_small", out.size)(xc, np.ascontiguousarray(w.reshape(O, -1)), bias,
                                       *_geometry(k, stride, padding, dilation), _band(out_hw), out)
        return out, np.empty((0, 0), x.dtype)
    wg = _grouped(w.reshape(O, -1), groups)
    blocks = _Blocks(N, out_hw[0] * out_hw[1], x.dtype, cols=C * k[0] * k[1], y=O)
    for n0, n1 in blocks:
        cols = blocks.buffer("cols", n1 - n0, groups)
        im2col(xc[n0:n1], k, stride, padding, dilation, out_hw, cols.reshape(C * k[0] * k[1], -1))
        y = _matmul(wg, cols, blocks.buffer("y", n1 - n0, groups))
        kernel("to_nchw", y.size)(y.reshape(O, -1), bias, out[n0:n1])  # into NCHW order, with the bias
    return out, (cols.reshape(C * k[0] * k[1], -1) if len(blocks) == 1 else np.empty((0, 0), x.dtype))


def conv2d_input_grad(g, w, b, stride, padding, dilation, groups, in_hw):
    """The adjoint of conv2d in its input (= conv_transpose2d): g[N, O, oh, ow] -> [N, C, H, W] (+ b[C])."""
    N, O = g.shape[:2]
    C = w.shape[1] * groups
    k = w.shape[2:]
    rows = C * k[0] * k[1]
    wt = _grouped(w.reshape(O, -1), groups).transpose(0, 2, 1)
    g = np.ascontiguousarray(g)
    out = np.zeros((N, C) + tuple(in_hw), g.dtype)
    blocks = _Blocks(N, g.shape[2] * g.shape[3], g.dtype, cols=rows, g=O)
    for n0, n1 in blocks:
        gb = _channels_first(g[n0:n1], blocks.buffer("g", n1 - n0, groups))
        cols = _matmul(wt, gb, blocks.buffer("cols", n1 - n0, groups))
        col2im(cols.reshape(rows, -1), None, k, stride, padding, dilation, g.shape[2:], out[n0:n1])
    if b is not None:
        out += b.reshape(1, C, 1, 1)
    return out


def conv2d_weight_grad(x, g, stride, padding, dilation, groups, k, cols=None):
    """The adjoint of conv2d in its weight: x[N, C, H, W], g[N, O, oh, ow] -> [O, C/groups, kh, kw]
    (with x's columns ``cols`` where conv2d gave them: None or empty where it did not)."""
    N, C = x.shape[:2]
    O = g.shape[1]
    rows = C * k[0] * k[1]
    xc, g = np.ascontiguousarray(x), np.ascontiguousarray(g)
    if rows // groups <= SMALL_K:
        band = _band(g.shape[2:])
        bands = -(-g.shape[2] // band)
        part = np.empty((N, groups, bands, O // groups, rows // groups), g.dtype)
        kernel("conv_small_weight_grad", g.size)(xc, g, *_geometry(k, stride, padding, dilation), band,
                                                 part.reshape(-1, O // groups, rows // groups))
        return part.sum((0, 2)).reshape(O, C // groups, k[0], k[1])
    blocks = _Blocks(N, g.shape[2] * g.shape[3], g.dtype, cols=rows, g=O)
    kept = cols is not None and cols.size and len(blocks) == 1
    gw = np.zeros((groups, O // groups, rows // groups), g.dtype)
    part = np.empty_like(gw)
    for n0, n1 in blocks:
        if not kept:
            cols = im2col(xc[n0:n1], k, stride, padding, dilation, g.shape[2:],
                          blocks.buffer("cols", n1 - n0).reshape(rows, -1))
        gb = _channels_first(g[n0:n1], blocks.buffer("g", n1 - n0, groups))
        gw += _matmul(gb, _grouped(cols, groups).transpose(0, 2, 1), part)
    return gw.reshape(O, C // groups, k[0], k[1])
