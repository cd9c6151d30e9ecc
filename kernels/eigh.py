"""The eigenvectors of one symmetric matrix of order 256-512 on two threads.

syevd is three steps: sytrd reduces A to a tridiagonal T = Q^T A Q, stedc finds T's eigenvectors Z, and ormtr
forms A's, Q Z (at order 256 on one thread: 1.45, 2.3-2.7 and 1.7 ms). Here the last step is split: orgtr forms Q
while stedc runs (the two only share sytrd's output; two numba threads), then Q Z is one GEMM on numba's threads
(kernels/blas.py). Larger matrices keep syevd on OpenBLAS's threads (config.SMALL_LAPACK), whose sytrd gains from
them there (order 1024: 49 ms on two threads, 86 on one); a matrix that syevd would scale first (its largest element
outside [sqrt(safe min / eps), its inverse], or not finite) goes to syevd too.
"""
import numpy as np
from numba import njit, prange

from . import blas, config, fortran
from ._jit import Building, not_yet, twins
from .fortran import address, call

SMALLEST = 256  # matrices of lower order: syevd's own call


@njit(nogil=True, cache=config.CACHE)
def _largest(a, lower):
    """The largest |element| of the triangle of ``a`` (an (n, n) array holding a matrix column-major) that syevd
    reads; NaN where one is NaN."""
    n = a.shape[0]
    big = abs(a[0, 0]) * 0
    for j in range(n):
        lo, hi = (j, n) if lower else (0, j + 1)
        for i in range(lo, hi):
            v = abs(a[j, i])
            if v != v:
                return v
            if v > big:
                big = v
    return big


@njit(nogil=True, cache=config.CACHE)
def _stedc(stedc, w, e, z):
    """Z, the eigenvectors of the tridiagonal matrix (diagonal ``w``, off-diagonal ``e``), into ``z``; the
    eigenvalues into ``w``; LAPACK's info."""
    n = w.shape[0]
    d = np.empty(4, np.int32)
    d[0], d[1], d[2], d[3] = n, 1 + 4 * n + n * n, 3 + 5 * n, 0
    c = np.empty(1, np.uint8)
    c[0] = ord("I")
    work, iwork = np.empty(d[1], w.dtype), np.empty(d[2], np.int32)
    p = address(d)
    call(stedc, (address(c), p, address(w), address(e), address(z), p, address(work), p + 4, address(iwork), p + 8,
                 p + 12), (c, d, w, e, z, work, iwork))
    return d[3]


@njit(nogil=True, cache=config.CACHE)
def _orgtr(orgtr, q, tau, uplo):
    """Q from sytrd's reflectors in ``q`` (in place); LAPACK's info."""
    n = q.shape[0]
    d = np.empty(4, np.int32)
    d[0], d[1], d[2], d[3] = n, n, max(n, 1) * 64, 0
    c = np.empty(1, np.uint8)
    c[0] = uplo
    work = np.empty(d[2], q.dtype)
    p = address(d)
    call(orgtr, (address(c), p, address(q), p + 4, address(tau), address(work), p + 8, p + 12), (c, d, q, tau, work))
    return d[3]


def _reduce_and_solve(sytrd, stedc, orgtr, syevd, a, w, z, q, uplo, low, high):
    """syevd ('V') of ``a`` (an (n, n) array holding a symmetric matrix column-major) but its last product: the
    eigenvalues into ``w``, Z into ``z`` and Q into ``q``, for V = Q Z; returns 0, LAPACK's info, or -1 where the
    matrix went to syevd's own call instead (``a`` then holds V)."""
    n = a.shape[0]
    d = np.empty(8, np.int32)
    c = np.empty(2, np.uint8)
    c[0], c[1] = uplo, ord("V")
    p, ch = address(d), address(c)
    big = _largest(a, uplo == ord("L"))
    if not (big == 0 or low <= big <= high):
        d[0], d[1], d[2], d[3], d[4] = n, n, -1, -1, 0
        qw, qi = np.empty(1, a.dtype), np.empty(1, np.int32)
        call(syevd, (ch + 1, ch, p, address(a), p + 4, address(w), address(qw), p + 8, address(qi), p + 12, p + 16),
             (c, d, a, w, qw, qi))
        d[2], d[3] = max(int(qw[0]), 1), max(int(qi[0]), 1)
        work, iwork = np.empty(d[2], a.dtype), np.empty(d[3], np.int32)
        call(syevd, (ch + 1, ch, p, address(a), p + 4, address(w), address(work), p + 8, address(iwork), p + 12,
                     p + 16), (c, d, a, w, work, iwork))
        return -1 if d[4] == 0 else d[4]
    e, tau = np.zeros(n, a.dtype), np.zeros(n, a.dtype)
    work = np.empty(max(n, 1) * 64, a.dtype)
    d[0], d[1], d[2], d[3] = n, n, max(n, 1) * 64, 0
    call(sytrd, (ch, p, address(a), p + 4, address(w), address(e), address(tau), address(work), p + 8, p + 12),
         (c, d, a, w, e, tau, work))
    q[:] = a
    infos = np.zeros(2, np.int64)
    for t in prange(2):  # (the two only read sytrd's output: stedc its tridiagonal, orgtr its reflectors)
        if t == 0:
            infos[0] = _stedc(stedc, w, e, z)
        else:
            infos[1] = _orgtr(orgtr, q, tau, uplo)
    return infos[0] if infos[0] != 0 else infos[1]


_REDUCE_AND_SOLVE = twins(_reduce_and_solve, meanwhile=not_yet)  # (syevd runs while it builds)
_ROUTINES = (("lapack", "sytrd"), ("lapack", "stedc"), ("lapack", "orgtr"), ("lapack", "syevd"))


def applies(a):
    """Whether ``eigh`` takes the batch ``a`` (B, n, n): one real matrix of order SMALLEST to config.SMALL_LAPACK,
    with numba's threads to share out."""
    return a.shape[0] == 1 and SMALLEST <= a.shape[1] <= config.SMALL_LAPACK and \
        a.dtype in (np.float32, np.float64) and config.threads() > 1


def eigh(a, w, uplo):
    """syevd ('V') of the one matrix of ``a`` (1, n, n) in place, the eigenvalues into ``w`` (1, n), as
    kernels/linalg.py's eigh does; LAPACK's info, or None where the parallel build is not ready yet. The caller
    keeps SciPy's OpenBLAS on one thread."""
    n = a.shape[1]
    z, q = np.empty((n, n), a.dtype), np.empty((n, n), a.dtype)
    low = np.sqrt(np.finfo(a.dtype).tiny / np.finfo(a.dtype).eps)  # (syevd's rmin; rmax is its inverse)
    try:
        info = _REDUCE_AND_SOLVE[1](*fortran.scipy(a.dtype, _ROUTINES), a[0], w[0], z, q, uplo, low, 1 / low)
    except Building:
        return None
    if info == 0:  # V = Q Z; held column-major, V^T = Z^T Q^T: the row-major product of the two arrays
        blas.matmul(z, q, out=a[0])
    return max(int(info), 0)


def precompile(dtypes):
    """Ask for the parallel builds in ``dtypes`` (jitgrad.precompile: no table sample is large enough)."""
    for dtype in dtypes:
        a = np.eye(SMALLEST, dtype=dtype)[None].copy()
        eigh(a, np.zeros((1, SMALLEST), dtype), ord("L"))
