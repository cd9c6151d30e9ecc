"""Discrete Fourier transforms on the CPU: pocketfft (SciPy's), called from numba through rocket-fft, which
makes ``scipy.fft`` callable inside ``@njit`` code.

Three transforms, as PyTorch's ATen has them (``_fft_c2c``, ``_fft_r2c``, ``_fft_c2r``): every other FFT of
jitgrad.fft is one of them plus padding, slicing or a conjugate. Each takes the dims to transform (``axes``, a
tuple) and a normalization that belongs to the transform, not to its direction (ATen's enum): 0 none, 1 by
1/sqrt(n), 2 by 1/n, n the product of the signal sizes. So the adjoint of a transform is the transform the other
way with the same normalization, which is how the op table writes the gradients. Single precision stays single
(complex64), as pocketfft computes it.
"""
import numba
import numpy as np

from . import _jit, config

# scipy.fft, imported by the first transform: importing it (with the array-API layer it brings) took about a fifth
# of the package's import time. The kernels below read it as a global when numba compiles them, after that import.
sfft = None


def _scipy_fft():
    global sfft
    if sfft is None:
        import scipy.fft
        sfft = scipy.fft

name = "cpu"

# normalization -> scipy's norm string for a forward transform, an inverse one
_NORMS = (("backward", "forward"), ("ortho", "ortho"), ("forward", "backward"))


def _norm(normalization, forward):
    return _NORMS[normalization][0 if forward else 1]


def _workers(x):
    """pocketfft's threads (it splits the lines of a multi-dim transform among them): one for small arrays."""
    return numba.get_num_threads() if x.size >= config.PARALLEL_THRESHOLD else 1


def _c2c(x, axes, forward, norm, workers):
    if forward:
        return sfft.fftn(x, None, axes, norm, False, workers)
    return sfft.ifftn(x, None, axes, norm, False, workers)


def _r2c(x, axes, norm, workers):
    return sfft.rfftn(x, None, axes, norm, False, workers)


def _c2r(x, s, axes, norm, workers):
    return sfft.irfftn(x, s, axes, norm, False, workers)


_c2c_kernel = _jit.compiled(_c2c)
_r2c_kernel = _jit.compiled(_r2c)
_c2r_kernel = _jit.compiled(_c2r)

_COMPLEX = {np.dtype(np.float32): np.dtype(np.complex64), np.dtype(np.float64): np.dtype(np.complex128)}


def complex_of(dtype):
    """The complex dtype of a real one's precision (complex dtypes map to themselves)."""
    return _COMPLEX.get(np.dtype(dtype), np.dtype(dtype))


def c2c(x, axes, forward, normalization):
    """The complex transform of complex ``x`` over ``axes`` (forward: exp(-2 pi i jk/n), inverse: its conjugate)."""
    if not axes:
        return x.copy()
    if x.size == 0:
        return np.zeros(x.shape, x.dtype)
    _scipy_fft()
    return _c2c_kernel(x, tuple(axes), forward, _norm(normalization, forward), _workers(x))


def r2c(x, axes, normalization, onesided):
    """The forward transform of real ``x``: the last dim of ``axes`` halved to n // 2 + 1 when ``onesided`` (the
    other bins are the conjugates of these), the full spectrum otherwise."""
    if not onesided:
        return c2c(x.astype(complex_of(x.dtype)), axes, True, normalization)
    if x.size == 0:
        shape = list(x.shape)
        shape[axes[-1]] = shape[axes[-1]] // 2 + 1
        return np.zeros(tuple(shape), complex_of(x.dtype))
    _scipy_fft()
    return _r2c_kernel(x, tuple(axes), _norm(normalization, True), _workers(x))


def c2r(x, axes, normalization, last_size):
    """The inverse transform of a onesided Hermitian spectrum ``x``: a real result with ``last_size`` points
    along the last dim of ``axes`` (the imaginary parts that symmetry sets to zero are ignored)."""
    s = tuple(last_size if i == len(axes) - 1 else x.shape[a] for i, a in enumerate(axes))
    real = np.float32 if x.dtype == np.complex64 else np.float64
    shape = list(x.shape)
    shape[axes[-1]] = last_size
    if x.size == 0:
        return np.zeros(tuple(shape), real)
    _scipy_fft()
    return _c2r_kernel(x, s, tuple(axes), _norm(normalization, False), _workers(x))
