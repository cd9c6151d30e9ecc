"""torch.fft: discrete Fourier transforms, with PyTorch's signatures, normalizations, errors and gradients.

Three entries do the transforms, as ATen's ``_fft_c2c``, ``_fft_r2c`` and ``_fft_c2r`` (kernels/fft.py:
pocketfft inside numba); every public function is one or two of them plus padding or slicing for ``n``/``s``
and a conjugate, composed as PyTorch's own reference implementation (torch/_refs/fft.py) composes them.

An entry's ``normalization`` belongs to the transform, not to its direction (0 none, 1 1/sqrt(n), 2 1/n), so
each VJP is the adjoint transform: the same transform the other way with the same normalization. rfft's (a
onesided r2c) fills the missing half of the gradient with zeros; irfft's (c2r) doubles the bins whose mirror
images the onesided input stands for. FFTs are linear, so each JVP is the entry on the tangent, and a batch
dim is one more leading dim (batching.py shifts ``dim``).
"""
import numpy as np

from .. import _dtype as D
from .._factories import arange, tensor
from .._op import Op, dispatch
from ._table import register
from .layers import pad as _pad
from .selection import roll

# the normalization of a transform (ATen's fft_norm_mode): applied by the kernel
NONE, ORTHO, BY_N = 0, 1, 2


def _mode(norm, forward):
    """The normalization of the transform a public function runs, from its ``norm`` and direction."""
    if norm is None or norm == "backward":
        return NONE if forward else BY_N
    if norm == "forward":
        return BY_N if forward else NONE
    if norm == "ortho":
        return ORTHO
    raise RuntimeError("Invalid normalization mode: \"%s\"" % (norm,))


# ---------------------------------------------------------------------- the transforms (entries)
def _c2c_forward(xp, dt, x, dim, forward, normalization):
    return xp.fft.c2c(x, dim, forward, normalization)


def _r2c_forward(xp, dt, x, dim, normalization, onesided, signal_size):
    return xp.fft.r2c(x, dim, normalization, onesided)


def _c2r_forward(xp, dt, x, dim, normalization, last_dim_size):
    return xp.fft.c2r(x, dim, normalization, last_dim_size)


def fft_c2c(x, dim, forward, normalization):
    return dispatch(C2C, (x,), {"dim": tuple(dim), "forward": bool(forward), "normalization": normalization})


def fft_r2c(x, dim, normalization, onesided):
    return dispatch(R2C, (x,), {"dim": tuple(dim), "normalization": normalization, "onesided": bool(onesided),
                                "signal_size": x.shape[dim[-1]] if dim else 0})


def fft_c2r(x, dim, normalization, last_dim_size):
    return dispatch(C2R, (x,), {"dim": tuple(dim), "normalization": normalization,
                                "last_dim_size": int(last_dim_size)})


def _c2c_grad(g, s):
    return fft_c2c(g, s.dim, not s.forward, s.normalization)


def _r2c_grad(g, s):
    """The onesided output is the full transform with the upper bins dropped: zeros for them, then the adjoint
    of the full transform, whose real part is the gradient of the real input."""
    d = s.dim[-1]
    missing = s.signal_size - g.shape[d]
    if s.onesided and missing > 0:
        pads = [0] * (2 * (g.ndim - d))
        pads[-1] = missing
        g = _pad(g, pads)
    return fft_c2c(g, s.dim, False, s.normalization).real


def _c2r_grad(g, s):
    """c2r reads bin k of the last dim for itself and for its mirror n - k: the r2c of the gradient, with the
    bins 1 .. n - (n // 2 + 1) (those whose mirrors lie outside the onesided half) doubled."""
    gI = fft_r2c(g, s.dim, s.normalization, True)
    d = s.dim[-1]
    double = g.shape[d] - gI.shape[d]
    if double > 0:
        k = arange(gI.shape[d], device=g.device, dtype=g.dtype).reshape((-1,) + (1,) * (g.ndim - 1 - d))
        gI = gI * (((k >= 1) & (k <= double)).to(g.dtype) + 1)
    return gI


# ---------------------------------------------------------------------- argument handling
def _promote(x, require_complex):
    """PyTorch's promote_type_fft: integers compute in the default float dtype; float16 and bfloat16 have no CPU
    kernel; real inputs become complex where the transform is complex-to-something."""
    dt = x.dtype
    if dt.is_complex:
        return x
    if not dt.is_floating_point:
        dt = D.get_default_dtype()
    elif dt.compute is not dt:
        raise RuntimeError("Unsupported dtype %s" % dt.scalar_type)
    if require_complex:
        dt = dt.to_complex()
    return x if dt is x.dtype else x.to(dt)


def _real_input(x, fname):
    if x.dtype.is_complex:
        raise RuntimeError("%s expects a real input tensor, but got %s" % (fname, x.dtype.scalar_type))


def _points(n):
    if n < 1:
        raise RuntimeError("Invalid number of data points (%d) specified" % n)


def _one_dim(x, dim):
    if x.ndim == 0:
        raise IndexError("Dimension specified as %d but tensor has no dimensions" % dim)
    return x._wrap_dim(dim)


def _resize(x, dims, sizes):
    """``x`` sliced or zero-padded at the end of each dim in ``dims`` to the size in ``sizes`` (-1: as it is)."""
    pads = [0] * (2 * x.ndim)
    for d, n in zip(dims, sizes):
        if n == -1:
            continue
        if x.shape[d] > n:
            x = x.narrow(d, 0, n)
        elif x.shape[d] < n:
            pads[2 * (x.ndim - 1 - d) + 1] = n - x.shape[d]
    return _pad(x, pads) if any(pads) else x


def _shape_and_dims(x, s, dim):
    """PyTorch's canonicalize_fft_shape_and_dim_args: the signal sizes and the (non-negative) dims."""
    dims = None
    if dim is not None:
        dim = (dim,) if isinstance(dim, (int, np.integer)) else tuple(dim)
        dims = tuple(x._wrap_dim(d) for d in dim)
        if len(set(dims)) != len(dims):
            raise RuntimeError("FFT dims must be unique")
    if s is not None:
        s = (s,) if isinstance(s, (int, np.integer)) else tuple(s)
        if dim is not None and len(dim) != len(s):
            raise RuntimeError("When given, dim and shape arguments must have the same length")
        if len(s) > x.ndim:
            raise RuntimeError("Got shape with %d values but input tensor only has %d dimensions."
                               % (len(s), x.ndim))
        if dims is None:
            dims = tuple(range(x.ndim - len(s), x.ndim))
        shape = tuple(int(n) if n != -1 else x.shape[d] for n, d in zip(s, dims))
    elif dims is None:
        dims, shape = tuple(range(x.ndim)), tuple(x.shape)
    else:
        shape = tuple(x.shape[d] for d in dims)
    for n in shape:
        _points(n)
    return shape, dims


def _c2r_shape_and_dims(fname, x, s, dim):
    """The onesided input sizes, the dims and the output's last signal size of an irfftn/hfftn."""
    shape, dims = _shape_and_dims(x, s, dim)
    if not shape:
        raise RuntimeError("%s must transform at least one axis" % fname)
    s = (s,) if isinstance(s, (int, np.integer)) else s
    last = 2 * (x.shape[dims[-1]] - 1) if s is None or s[-1] == -1 else shape[-1]
    _points(last)
    return shape[:-1] + (last // 2 + 1,), dims, last


# ---------------------------------------------------------------------- one dim
def _c2c(x, n, dim, norm, forward):
    d = _one_dim(x, dim)
    mode = _mode(norm, forward)
    if n is not None:
        _points(n)
        x = _resize(x, (d,), (n,))
    _points(x.shape[d])
    return fft_c2c(x, (d,), forward, mode)


def _r2c(fname, x, n, dim, norm, forward, onesided):
    _real_input(x, fname)
    x = _promote(x, False)
    d = _one_dim(x, dim)
    mode = _mode(norm, forward)
    if n is not None:
        _points(n)
        x = _resize(x, (d,), (n,))
    _points(x.shape[d])
    out = fft_r2c(x, (d,), mode, onesided)
    return out if forward else out.conj()


def _c2r(x, n, dim, norm, forward):
    x = _promote(x, True)
    d = _one_dim(x, dim)
    mode = _mode(norm, forward)
    last = n if n is not None else 2 * (x.shape[d] - 1)
    _points(last)
    if n is not None:
        x = _resize(x, (d,), (last // 2 + 1,))
    if forward:
        x = x.conj()
    return fft_c2r(x, (d,), mode, last)


def fft(input, n=None, dim=-1, norm=None):
    if input.dtype.is_complex:
        return _c2c(input, n, dim, norm, True)
    return _r2c("fft", input, n, dim, norm, True, False)


def ifft(input, n=None, dim=-1, norm=None):
    if input.dtype.is_complex:
        return _c2c(input, n, dim, norm, False)
    return _r2c("ifft", input, n, dim, norm, False, False)


def rfft(input, n=None, dim=-1, norm=None):
    return _r2c("rfft", input, n, dim, norm, True, True)


def irfft(input, n=None, dim=-1, norm=None):
    return _c2r(input, n, dim, norm, False)


def hfft(input, n=None, dim=-1, norm=None):
    return _c2r(input, n, dim, norm, True)


def ihfft(input, n=None, dim=-1, norm=None):
    return _r2c("ihfft", input, n, dim, norm, False, True)


# ---------------------------------------------------------------------- n dims
def _fftn(x, s, dim, norm, forward):
    shape, dims = _shape_and_dims(x, s, dim)
    mode = _mode(norm, forward)
    x = _resize(_promote(x, True), dims, shape)
    return fft_c2c(x, dims, forward, mode)


def fftn(input, s=None, dim=None, norm=None):
    return _fftn(input, s, dim, norm, True)


def ifftn(input, s=None, dim=None, norm=None):
    return _fftn(input, s, dim, norm, False)


def rfftn(input, s=None, dim=None, norm=None):
    _real_input(input, "rfftn")
    shape, dims = _shape_and_dims(input, s, dim)
    if not shape:
        raise RuntimeError("rfftn must transform at least one axis")
    mode = _mode(norm, True)
    x = _resize(_promote(input, False), dims, shape)
    return fft_r2c(x, dims, mode, True)


def irfftn(input, s=None, dim=None, norm=None):
    shape, dims, last = _c2r_shape_and_dims("irfftn", input, s, dim)
    mode = _mode(norm, False)
    x = _resize(_promote(input, True), dims, shape)
    return fft_c2r(x, dims, mode, last)


def hfftn(input, s=None, dim=None, norm=None):
    shape, dims, last = _c2r_shape_and_dims("hfftn", input, s, dim)
    mode = _mode(norm, True)
    x = _resize(_promote(input, True), dims, shape)
    if len(dims) > 1:
        x = fft_c2c(x, dims[:-1], True, mode)
    return fft_c2r(x.conj(), dims[-1:], mode, last)


def ihfftn(input, s=None, dim=None, norm=None):
    _real_input(input, "ihfftn")
    shape, dims = _shape_and_dims(input, s, dim)
    if not shape:
        raise RuntimeError("ihfftn must transform at least one axis")
    mode = _mode(norm, False)
    x = _resize(_promote(input, False), dims, shape)
    out = fft_r2c(x, dims[-1:], mode, True).conj()
    return fft_c2c(out, dims[:-1], False, mode) if len(dims) > 1 else out


def fft2(input, s=None, dim=(-2, -1), norm=None):
    return fftn(input, s, dim, norm)


def ifft2(input, s=None, dim=(-2, -1), norm=None):
    return ifftn(input, s, dim, norm)


def rfft2(input, s=None, dim=(-2, -1), norm=None):
    return rfftn(input, s, dim, norm)


def irfft2(input, s=None, dim=(-2, -1), norm=None):
    return irfftn(input, s, dim, norm)


def hfft2(input, s=None, dim=(-2, -1), norm=None):
    return hfftn(input, s, dim, norm)


def ihfft2(input, s=None, dim=(-2, -1), norm=None):
    return ihfftn(input, s, dim, norm)


# ---------------------------------------------------------------------- helpers
def _frequencies(fname, k, n, d, dtype, device, requires_grad):
    dtype = D.get_default_dtype() if dtype is None else dtype
    if not (dtype.is_floating_point or dtype.is_complex):
        raise RuntimeError("%s requires a floating point or complex dtype" % fname)
    return tensor(np.asarray(k, np.float64) / (n * d), dtype=dtype, device=device, requires_grad=requires_grad)


def fftfreq(n, d=1.0, *, dtype=None, layout=None, device=None, requires_grad=False):
    """The sample frequencies of an n-point transform with spacing d: [0, 1, ..., -(n // 2), ..., -1] / (d n)."""
    k = np.concatenate([np.arange((n + 1) // 2), np.arange(-(n // 2), 0)]) if n > 0 else np.zeros(0)
    return _frequencies("fftfreq", k, n, d, dtype, device, requires_grad)


def rfftfreq(n, d=1.0, *, dtype=None, layout=None, device=None, requires_grad=False):
    """The sample frequencies of rfft's n // 2 + 1 bins: [0, 1, ..., n // 2] / (d n)."""
    return _frequencies("rfftfreq", np.arange(n // 2 + 1) if n > 0 else np.zeros(0), n, d, dtype, device,
                        requires_grad)


def _shift(x, dim, inverse):
    dims = tuple(range(x.ndim)) if dim is None else (dim,) if isinstance(dim, (int, np.integer)) else tuple(dim)
    if not dims:
        return x.clone() if x.ndim == 0 else x
    shifts = tuple((x.shape[x._wrap_dim(d)] + inverse) // 2 for d in dims)
    return roll(x, shifts, dims)


def fftshift(input, dim=None):
    """The zero frequency moved to the middle: a roll by n // 2 along each of ``dim`` (all dims if None)."""
    return _shift(input, dim, False)


def ifftshift(input, dim=None):
    """The inverse of fftshift: a roll by (n + 1) // 2."""
    return _shift(input, dim, True)


# ---------------------------------------------------------------------- samples and references
def _values(rng, shape, dtype):
    """Sample values in ``dtype``: complex ones where it is complex (the matrix's complex dtypes), real otherwise."""
    a = rng.uniform(-1, 1, shape)
    return np.asarray(a + 1j * rng.uniform(-1, 1, shape) if np.dtype(dtype).kind == "c" else a, dtype)


def _inexact(fn, kinds="fc"):
    def samples(rng, dtype):
        return fn(rng, dtype) if np.dtype(dtype).kind in kinds else []
    return samples


def _fftn_samples(rng, dtype):
    x = lambda *s: _values(rng, s, dtype)  # noqa: E731
    return [((x(7),), {}), ((x(8),), {"norm": "ortho"}), ((x(3, 6),), {"dim": (-1,), "norm": "forward"}),
            ((x(2, 5, 4),), {"s": (6, 3)}), ((x(4, 5),), {"dim": 0, "s": 3}), ((x(5, 4),), {"dim": (0,)}),
            ((x(4, 5).T,), {})]


def _rfftn_samples(rng, dtype):
    r = lambda *s: _values(rng, s, dtype)  # noqa: E731
    return [((r(7),), {}), ((r(8),), {"norm": "ortho"}), ((r(3, 6),), {"dim": -1, "norm": "forward"}),
            ((r(2, 5, 4),), {"s": (3, 6)}), ((r(5, 4),), {"dim": 0, "s": 9}), ((r(4, 5).T,), {})]


def _irfftn_samples(rng, dtype):
    x = lambda *s: _values(rng, s, dtype)  # noqa: E731
    return [((x(5),), {}), ((x(5),), {"s": 9, "norm": "ortho"}), ((x(3, 4),), {"dim": -1, "norm": "forward"}),
            ((x(2, 5, 4),), {"s": (3, 7)}), ((x(4, 3),), {"dim": (1, 0), "s": (4, 5)})]


def _np_s(s):
    return (s,) if isinstance(s, int) else s


def _np_fftn(x, s=None, dim=None, norm=None):
    return np.fft.fftn(x, _np_s(s), _np_axes(x, s, dim), norm)


def _np_rfftn(x, s=None, dim=None, norm=None):
    return np.fft.rfftn(x, _np_s(s), _np_axes(x, s, dim), norm)


def _np_irfftn(x, s=None, dim=None, norm=None):
    axes, s = _np_axes(x, s, dim), _np_s(s)
    if s is None:
        s = [x.shape[a] for a in axes[:-1]] + [2 * (x.shape[axes[-1]] - 1)]
    return np.fft.irfftn(x, s, axes, norm)


def _np_axes(x, s, dim):
    if dim is not None:
        return (dim,) if isinstance(dim, int) else tuple(dim)
    if s is not None:
        k = 1 if isinstance(s, int) else len(s)
        return tuple(range(x.ndim - k, x.ndim))
    return tuple(range(x.ndim))


C2C = register(Op("fft_c2c", _c2c_forward, vjp=[_c2c_grad], linear=(0,), dtype="keep", complex=True, node="FftC2CBackward0",
                  reduced_precision="refused", call=fftn, samples=_inexact(_fftn_samples), ref=_np_fftn))
R2C = register(Op("fft_r2c", _r2c_forward, vjp=[_r2c_grad], linear=(0,), dtype="keep", node="FftR2CBackward0",
                  reduced_precision="refused", call=rfftn, samples=_inexact(_rfftn_samples, "f"), ref=_np_rfftn))
C2R = register(Op("fft_c2r", _c2r_forward, vjp=[_c2r_grad], linear=(0,), dtype="keep", complex=True, node="FftC2RBackward0",
                  reduced_precision="refused", call=irfftn, samples=_inexact(_irfftn_samples), ref=_np_irfftn))

__all__ = ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fft2", "ifft2", "rfft2", "irfft2", "hfft2", "ihfft2",
           "fftn", "ifftn", "rfftn", "irfftn", "hfftn", "ihfftn", "fftfreq", "rfftfreq", "fftshift", "ifftshift"]
