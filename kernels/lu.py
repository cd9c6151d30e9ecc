"""The LU factorization of one large matrix on numba's threads.

SciPy's OpenBLAS getrf gains little from its second thread on two cores (order 256: 0.41 ms on one thread, 0.59 on
two; order 1024: 19 and 17 ms), and its pool is a second one beside numba's. Here a right-looking blocked LU runs
its trailing updates as blocks of columns in a prange, each block one-thread laswp + trsm + gemm calls of SciPy's
LAPACK and BLAS; the block that holds the next panel also factors it (getrf on one thread), so that the panel's
factorization, the serial part, overlaps the other blocks' updates. The row swaps of the columns left of a panel
are applied at the end, in one pass. The blocks are fixed, so the values do not depend on the thread count.

The routines are given to the kernel by address (kernels/fortran.py).
"""
import numpy as np
from numba import njit, prange

from . import config, fortran
from ._jit import Building, not_yet, twins
from .fortran import address, call

PANEL = 32  # columns of a panel (factored by getrf on one thread) and of a block of a trailing update
LARGE = 512  # matrices of at least this many rows and columns: panels of 2 * PANEL columns
SMALLEST = 256  # matrices of fewer rows or columns: getrf (their blocked LU is no faster)


_L, _N, _U = ord("L"), ord("N"), ord("U")


@njit(nogil=True, cache=config.CACHE)
def _factor_panel(getrf, a, at, m, c0, c1, piv, info):
    """getrf of rows c0.. and columns c0..c1 of the column-major m-row matrix ``a`` (address ``at``): its pivots
    made global (1-based rows), the first zero pivot into info[0]."""
    d = np.empty(4, np.int32)
    d[0], d[1], d[2], d[3] = m - c0, c1 - c0, m, 0
    p = address(d)
    call(getrf, (p, p + 4, at + (c0 * m + c0) * a.itemsize, p + 8, address(piv) + c0 * 4, p + 12), (d, a, piv))
    for i in range(c0, c1):
        piv[i] += c0
    if d[3] > 0 and info[0] == 0:
        info[0] = d[3] + c0


@njit(nogil=True, cache=config.CACHE)
def _update(laswp, trsm, gemm, a, at, m, j0, j1, c0, c1, piv, one):
    """Columns c0..c1 of the trailing matrix after the panel j0..j1: its row swaps, U's rows (a unit-lower
    triangular solve with the panel's L) and the Schur complement's columns (a GEMM)."""
    size = a.itemsize
    d = np.empty(8, np.int32)
    d[0], d[1], d[2], d[3], d[4], d[5], d[6] = c1 - c0, m, j0 + 1, j1, 1, j1 - j0, m - j1
    c = np.empty(3, np.uint8)
    c[0], c[1], c[2] = _L, _N, _U
    alpha = np.empty(2, a.dtype)
    alpha[0], alpha[1] = one, -one
    p, ch, al = address(d), address(c), address(alpha)
    top = at + c0 * m * size  # (row 0 of column c0)
    call(laswp, (p, top, p + 4, p + 8, p + 12, address(piv), p + 16), (d, a, piv))
    call(trsm, (ch, ch, ch + 1, ch + 2, p + 20, p, al, at + (j0 * m + j0) * size, p + 4, top + j0 * size, p + 4),
         (d, c, alpha, a))
    if m > j1:
        call(gemm, (ch + 1, ch + 1, p + 24, p, p + 20, al + size, at + (j0 * m + j1) * size, p + 4, top + j0 * size,
                    p + 4, al, top + j1 * size, p + 4), (d, c, alpha, a))


@njit(nogil=True, cache=config.CACHE)
def _swap_left(laswp, a, at, m, p0, p1, k, piv):
    """The row swaps of the panels after the one of columns p0..p1, applied to its columns."""
    d = np.empty(5, np.int32)
    d[0], d[1], d[2], d[3], d[4] = p1 - p0, m, p1 + 1, k, 1
    p = address(d)
    call(laswp, (p, at + p0 * m * a.itemsize, p + 4, p + 8, p + 12, address(piv), p + 16), (d, a, piv))


def _lu_blocked(getrf, laswp, trsm, gemm, a, piv, info, one, panel):
    """getrf of ``a``, an (n, m) array holding an m x n matrix column-major, in place: ``piv`` (int32, 1-based rows)
    and ``info`` (int32, 1 element) as getrf gives them; ``one``: a one of a's dtype."""
    n, m = a.shape
    k = min(m, n)
    at = address(a)
    _factor_panel(getrf, a, at, m, 0, min(panel, k), piv, info)
    for j0 in range(0, k, panel):
        j1 = min(j0 + panel, k)
        for t in prange(-(-(n - j1) // panel)):
            c0 = j1 + t * panel
            c1 = min(c0 + panel, n)
            _update(laswp, trsm, gemm, a, at, m, j0, j1, c0, c1, piv, one)
            if t == 0 and c0 < k:  # (look-ahead: the next panel, as soon as its columns are up to date)
                _factor_panel(getrf, a, at, m, c0, min(c0 + panel, k), piv, info)
    for q in prange(-(-k // panel)):
        p0 = q * panel
        p1 = min(p0 + panel, k)
        if p1 < k:
            _swap_left(laswp, a, at, m, p0, p1, k, piv)


_LU_BLOCKED = twins(_lu_blocked, meanwhile=not_yet)  # (getrf's own call runs while it builds)
_ROUTINES = (("lapack", "getrf"), ("lapack", "laswp"), ("blas", "trsm"), ("blas", "gemm"))


def applies(a):
    """Whether ``factor`` takes the batch ``a`` (B, n, m): one real matrix of at least SMALLEST rows and columns,
    with numba's threads to share out or of fewer than LARGE (on one thread the blocked LU of order 256 took 400 us
    against getrf's 428, of order 512 2.80 ms against 2.70)."""
    return a.shape[0] == 1 and SMALLEST <= min(a.shape[1:]) and a.dtype in (np.float32, np.float64) and \
        (config.threads() > 1 or min(a.shape[1:]) < LARGE)


def factor(a, piv, info):
    """getrf of the one matrix of ``a`` (1, n, m) in place, as kernels/linalg.py's lu_factor does (pivots and info
    into ``piv`` (1, min(m, n)) and ``info`` (1,), int32); False where its parallel build is not ready yet. The
    caller keeps SciPy's OpenBLAS on one thread."""
    try:
        _LU_BLOCKED[1](*fortran.scipy(a.dtype, _ROUTINES), a[0], piv[0], info, a.dtype.type(1),
                       PANEL * (1 + (min(a.shape[1:]) >= LARGE)))
    except Building:
        return False
    return True


def precompile(dtypes):
    """Ask for the blocked LU's builds in ``dtypes`` (jitgrad.precompile: no table sample is large enough)."""
    for dtype in dtypes:
        a = np.eye(SMALLEST, dtype=dtype)[None]
        factor(a, np.zeros((1, SMALLEST), np.int32), np.zeros(1, np.int32))
