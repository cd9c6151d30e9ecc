"""Dense linear algebra on the CPU: LAPACK (SciPy's, through its Cython function pointers; eigh's gradients on NumPy's
OpenBLAS, see _numpy_routines) called from numba loops that run parallel over the batch, and direct numba code for
batches of 2x2 and 3x3 matrices.

Every function takes arrays of shape (..., m, n) in any layout (the op table broadcasts the batch dims
first) and returns new arrays: matrices come back in LAPACK's column-major layout (the last two dims
F-contiguous, as PyTorch's CPU results are), pivots and infos as int32 (LAPACK's 1-based pivots). Nothing
raises on a singular or indefinite matrix: ``info`` says what LAPACK said, and the op table words the error.
"""
import ctypes
import math
import re

import numpy as np
from numba import njit, prange
from numba.extending import get_cython_function_address

from . import _jit, config, layout_copy, small_matrix
from . import eigh as threaded_eigh, lu as blocked_lu

name = "cpu"
_P = ctypes.c_void_p


INT = np.int32  # LAPACK's integer (pivots, infos, work sizes)


def _fn(module, name, nargs):
    address = get_cython_function_address("scipy.linalg.cython_" + module, name)
    return ctypes.CFUNCTYPE(None, *([_P] * nargs))(address)


# routine -> (module, number of arguments); s... for float32, d... for float64
_ROUTINES = {"getrf": ("lapack", 6), "getrs": ("lapack", 9), "getri": ("lapack", 7), "potrf": ("lapack", 5),
             "syevd": ("lapack", 11), "gesdd": ("lapack", 14), "geqrf": ("lapack", 8), "orgqr": ("lapack", 9),
             "ormqr": ("lapack", 13), "gelsy": ("lapack", 13), "gelsd": ("lapack", 14), "gelss": ("lapack", 13),
             "gels": ("lapack", 11), "trsm": ("blas", 11), "trmm": ("blas", 11),
             "gemm": ("blas", 13), "syr2k": ("blas", 12), "syrk": ("blas", 10)}


def _col(a):
    """``a`` (..., m, n) as a C-contiguous (B, n, m) copy: each [b] is matrix b in column-major order."""
    m, n = a.shape[-2:]
    if a.flags.c_contiguous and m * n >= layout_copy.SMALLEST and a.dtype in layout_copy.TRANSPOSABLE:  # (row-major:
        # a transposing copy)
        return layout_copy.into(a, np.empty((_count(a), n, m), a.dtype))
    return np.array(a.swapaxes(-1, -2), order="C").reshape((_count(a), n, m))


_TILE = layout_copy.TILE  # (the tiles of the loops over triangles below)


def _col_read(a):
    """Like ``_col``, for an input LAPACK only reads: no copy where ``a`` is column-major already."""
    m, n = a.shape[-2:]
    return np.ascontiguousarray(a.swapaxes(-1, -2)).reshape((_count(a), n, m))


def _count(a):
    """The number of matrices in a batch."""
    return math.prod(a.shape[:-2])


def _back(f, batch):
    """The inverse of ``_col``: (B, n, m) -> (*batch, m, n), a view whose last two dims are F-contiguous."""
    return f.reshape(tuple(batch) + f.shape[1:]).swapaxes(-1, -2)


_KERNELS = {}


def _kernels(dtype):
    """The numba kernels of one dtype (float32 or float64), made and compiled on first use. They hold the
    LAPACK function pointers, which change from process to process, so they are not cached on disk."""
    dtype = np.dtype(dtype)
    k = _KERNELS.get(dtype)
    if k is None:
        k = _KERNELS[dtype] = _make(dtype)
    return k


def _jitted(fn, parallel=True):
    d = njit(parallel=parallel, nogil=True, error_model="numpy")(fn)
    _jit.DISPATCHERS.append(d)
    return _jit._serialised(d) if parallel and config.SERIALISE_PARALLEL else d


def _by_batch(parallel, serial, rhs=None, numpy_lib=False):
    """The parallel loop for a batch, the serial build for one matrix (a parallel region for one item only costs
    its launch). A batch's per-matrix LAPACK calls run on one OpenBLAS thread (numba's threads share the cores
    out), and so does a single small problem: a factorization (or eigh's gradient) of a matrix of order up to
    config.SMALL_LAPACK, or
    a triangular product or solve (the kernels with a right-hand side, argument ``rhs``) of fewer than
    config.SMALL_GEMM multiply-adds, as a GEMM. LAPACK's own threads serve the larger ones. The OpenBLAS is SciPy's,
    or NumPy's for the kernels that call it (``numpy_lib``)."""
    def run(*args):
        a = args[0]  # (the batch of matrices)
        fn = parallel if a.shape[0] > 1 else serial
        threads = config.lapack_threads("numpy") if numpy_lib else config.lapack_threads()
        if threads is None:
            return fn(*args)
        if fn is serial:
            if rhs is None:
                large = max(a.shape[1:]) > config.SMALL_LAPACK
            else:
                x = args[rhs]
                large = a.shape[1] * x.shape[1] * x.shape[2] >= config.SMALL_GEMM
            if large:
                return fn(*args)
        return config.on_one_thread(threads, fn, *args)
    run.parallel = parallel
    return run


_RHS = {"lu_solve": 2, "triangular": 1, "cholesky_grad": 1}  # (_by_batch: the kernels that are BLAS-3 products)


def _numpy_routines(dtype, names):
    """({name: routine}, integer dtype) of NumPy's OpenBLAS (Fortran interface, 64-bit integers in NumPy's wheels),
    by the real names (as _routines), or None where NumPy is not linked to OpenBLAS. eigh's gradient kernels run
    there: on one thread (the rule of factorizations, SMALL_LAPACK) NumPy's build (0.3.31, SciPy's 0.3.30) is the
    faster at order 256 (eigvalsh_grad 0.53 ms against 0.69, eigh_grad 1.5 against 2.4; equal at 1024), and a
    one-thread call wakes no OpenBLAS pool beside numba's, which the step's GEMMs run on (blas.split_gemm): SciPy's
    two-thread syrk took the eigvalsh_256 step from 12-15 ms to 20-23 at load average 4. (eigh and the SVD stay
    on SciPy's: gesdd of order 1024 on two threads of NumPy's took 11.7-11.9 s in two of three svd_1024 steps at
    load 4, SciPy's 2.7 each time.)"""
    if config.OPENBLAS is None:
        return None
    lib, prefix, suffix = config.OPENBLAS
    ch = {"float32": "s", "float64": "d", "complex64": "c", "complex128": "z"}[dtype.name]
    fns = {}
    for r in names:
        name, n = r, _ROUTINES[r][1]
        if dtype.kind == "c" and r in _COMPLEX_ROUTINES:
            name, _, n = _COMPLEX_ROUTINES[r]
        fn = getattr(lib, prefix[:-len("openblas")] + ch + name + "_" + suffix, None)
        if fn is None:
            return None
        fns[r] = ctypes.CFUNCTYPE(None, *([_P] * n))(ctypes.cast(fn, _P).value)
    return fns, (np.int64 if suffix == "64_" else np.int32)


_NUMPY_KERNELS = ("eigh_grad", "eigvalsh_grad")  # (the kernels on NumPy's OpenBLAS, where it is one)


# complex routines whose names or arguments differ from the real ones' (the Hermitian and unitary forms; the rest
# take one more real workspace, rwork)
_COMPLEX_ROUTINES = {"syevd": ("heevd", "lapack", 13), "gesdd": ("gesdd", "lapack", 15), "orgqr": ("ungqr", "lapack", 9),
                     "ormqr": ("unmqr", "lapack", 13), "gelsy": ("gelsy", "lapack", 14),
                     "gelsd": ("gelsd", "lapack", 15), "gelss": ("gelss", "lapack", 14)}


def _routines(dtype):
    """LAPACK's routines of one dtype by their real names (s, d, c, z: float32 ... complex128)."""
    ch = {"float32": "s", "float64": "d", "complex64": "c", "complex128": "z"}[dtype.name]
    L = {}
    for r, (mod, n) in _ROUTINES.items():
        name = r
        if dtype.kind == "c" and r in _COMPLEX_ROUTINES:
            name, mod, n = _COMPLEX_ROUTINES[r]
        L[r] = _fn(mod, ch + name, n)
    return L


@njit(nogil=True, error_model="numpy", cache=config.CACHE)
def _zero_triangle(m, below):
    """Zero the strictly lower (``below``) or strictly upper triangle of the square matrix ``m`` in place."""
    n = m.shape[0]
    for p in range(n):
        if below:
            m[p, :p] = 0
        else:
            m[p, p + 1:] = 0


@njit(nogil=True, error_model="numpy", cache=config.CACHE)
def _mirror(m, scale):
    """The upper triangle of the square matrix ``m`` times ``scale``, onto both triangles, in place, in tiles (as
    layout_copy.into)."""
    n = m.shape[0]
    for i0 in range(0, n, _TILE):
        for j0 in range(i0, n, _TILE):
            for i in range(i0, min(i0 + _TILE, n)):
                for j in range(max(j0, i + 1), min(j0 + _TILE, n)):
                    v = scale * m[i, j]
                    m[i, j] = v
                    m[j, i] = v


@njit(nogil=True, error_model="numpy", cache=config.CACHE)
def _phi(m):
    """m := (triu(m) + triu(m, 1)^T) / 2 in place (PyTorch's Phi of the Cholesky gradient, for a matrix held
    column-major: its upper triangle in memory is the lower one of the matrix)."""
    for i in range(m.shape[0]):
        m[i, i] *= 0.5
    _mirror(m, 0.5)


@njit(nogil=True, error_model="numpy", cache=config.CACHE)
def _eigh_inner(m, w, gw, s):
    """S (column-major, zero below its diagonal) with S + S^T = M, M = skew(m) / E + diag(gw), the symmetric middle
    factor of eigh's gradient V M V^T (m = V^T gV, E_ij = w_j - w_i): the formula's values, in tiles."""
    n = m.shape[0]
    for i in range(n):
        s[i, i] = gw[i] * 0.5
    for i0 in range(0, n, _TILE):
        for j0 in range(i0, n, _TILE):
            for i in range(i0, min(i0 + _TILE, n)):
                for j in range(max(j0, i + 1), min(j0 + _TILE, n)):
                    s[j, i] = (m[i, j] - m[j, i]) * 0.5 / (w[j] - w[i])



def _make(dtype):
    L = _routines(dtype)
    getrf, getrs, getri, potrf, syevd, gesdd = L["getrf"], L["getrs"], L["getri"], L["potrf"], L["syevd"], L["gesdd"]
    geqrf, orgqr, ormqr, gelsy, gelsd, gelss, gels, trsm, trmm, gemm, syr2k, syrk = (L[r] for r in (
        "geqrf", "orgqr", "ormqr", "gelsy", "gelsd", "gelss", "gels", "trsm", "trmm", "gemm", "syr2k", "syrk"))
    dt = dtype.type
    it = INT  # LAPACK's integer
    numpy_lib = _numpy_routines(dtype, ("syrk", "syr2k", "trmm"))
    N, bi = numpy_lib or (L, it)  # (SciPy's where NumPy has no OpenBLAS)
    nsyrk, nsyr2k, ntrmm = N["syrk"], N["syr2k"], N["trmm"]

    @njit(nogil=True)
    def ints(a, b, c, d):
        out = np.empty(4, it)
        out[0], out[1], out[2], out[3] = a, b, c, d
        return out

    @njit(nogil=True)
    def bints(a, b, c, d):  # (the integers of the routines of N)
        out = np.empty(4, bi)
        out[0], out[1], out[2], out[3] = a, b, c, d
        return out

    @njit(nogil=True)
    def char(c):
        out = np.empty(1, np.uint8)
        out[0] = c
        return out

    def lu_factor(a, piv, info):  # a: (B, n, m) column-major m x n, in place
        m, n = a.shape[2], a.shape[1]
        for b in prange(a.shape[0]):
            d = ints(m, n, max(m, 1), 0)
            inf = np.zeros(1, it)
            getrf(d[0:].ctypes, d[1:].ctypes, a[b].ctypes, d[2:].ctypes, piv[b].ctypes, inf.ctypes)
            info[b] = inf[0]

    def lu_solve(lu, piv, x, trans, width):  # lu (B, n, n), x (B, k, n) in place, ``width`` right-hand sides a call
        n, k = lu.shape[1], x.shape[1]
        parts = max(-(-k // width), 1)
        for q in prange(lu.shape[0] * parts):
            b, c = q // parts, q % parts * width
            d = ints(n, min(width, k - c), max(n, 1), 0)
            inf = np.zeros(1, it)
            t = char(trans)
            getrs(t.ctypes, d[0:].ctypes, d[1:].ctypes, lu[b].ctypes, d[2:].ctypes, piv[b].ctypes, x[b, c:].ctypes,
                  d[2:].ctypes, inf.ctypes)

    def inv(a, info):  # getrf then getri, in place
        n = a.shape[1]
        piv0 = np.empty(max(n, 1), it)
        query = np.empty(1, a.dtype)
        d = ints(n, max(n, 1), -1, 0)
        inf = np.zeros(1, it)
        getri(d[0:].ctypes, a[0].ctypes, d[1:].ctypes, piv0.ctypes, query.ctypes, d[2:].ctypes, inf.ctypes)
        lwork = max(int(query[0].real), 1)
        for b in prange(a.shape[0]):
            d = ints(n, max(n, 1), lwork, 0)
            piv = np.empty(max(n, 1), it)
            inf = np.zeros(1, it)
            getrf(d[0:].ctypes, d[0:].ctypes, a[b].ctypes, d[1:].ctypes, piv.ctypes, inf.ctypes)
            info[b] = inf[0]
            if inf[0] == 0:
                work = np.empty(lwork, a.dtype)
                getri(d[0:].ctypes, a[b].ctypes, d[1:].ctypes, piv.ctypes, work.ctypes, d[2:].ctypes, inf.ctypes)

    def cholesky(a, info, uplo):  # potrf in place, the other triangle zeroed
        n = a.shape[1]
        for b in prange(a.shape[0]):
            d = ints(n, max(n, 1), 0, 0)
            inf = np.zeros(1, it)
            u = char(uplo)
            potrf(u.ctypes, d[0:].ctypes, a[b].ctypes, d[1:].ctypes, inf.ctypes)
            info[b] = inf[0]
            _zero_triangle(a[b], uplo == 76)  # (a[b] holds the factor column-major: its rows are its columns)

    def cholesky_grad(l, f, nb):  # l: L column-major, f: gL column-major in, gA out (symmetric); blocks of nb
        n = f.shape[1]
        one = np.ones(1, f.dtype)
        for b in prange(f.shape[0]):
            lf, ff = l[b].reshape(-1), f[b].reshape(-1)  # (element (r, c) of a matrix at c * n + r)
            t, nt, lo, left, right = char(84), char(78), char(76), char(76), char(82)
            ld = ints(n, n, 0, 0)
            # Phi's lower triangle, tril(L^T gL), by row blocks I = [i0, i1) from the top: L_II^T gL[I, :i1] + L[i1:,
            # I]^T gL[i1:, :i1] (a third of the full product's work), into gL's rows I, which later blocks no longer read
            for i0 in range(0, n, nb):
                i1 = min(i0 + nb, n)
                d = ints(i1 - i0, i1, n - i1, 0)
                trmm(left.ctypes, lo.ctypes, t.ctypes, nt.ctypes, d[0:].ctypes, d[1:].ctypes, one.ctypes,
                     lf[i0 * n + i0:].ctypes, ld.ctypes, ff[i0:].ctypes, ld.ctypes)
                if i1 < n:
                    gemm(t.ctypes, nt.ctypes, d[0:].ctypes, d[1:].ctypes, d[2:].ctypes, one.ctypes,
                         lf[i0 * n + i1:].ctypes, ld.ctypes, ff[i1:].ctypes, ld.ctypes, one.ctypes, ff[i0:].ctypes,
                         ld.ctypes)
            _phi(f[b])
            trsm(right.ctypes, lo.ctypes, nt.ctypes, nt.ctypes, ld[0:].ctypes, ld[1:].ctypes, one.ctypes, lf.ctypes,
                 ld.ctypes, ff.ctypes, ld.ctypes)  # Phi L^-1
            # L^-T (Phi L^-1), symmetric: its lower triangle only, column block J = [j0, j1) from row j0 on, which
            # reads rows j0.. of Phi L^-1 alone (about 40% of the full solve's work at nb = n / 8)
            for j0 in range(0, n, nb):
                d = ints(n - j0, min(nb, n - j0), 0, 0)
                trsm(left.ctypes, lo.ctypes, t.ctypes, nt.ctypes, d[0:].ctypes, d[1:].ctypes, one.ctypes,
                     lf[j0 * n + j0:].ctypes, ld.ctypes, ff[j0 * n + j0:].ctypes, ld.ctypes)
            _mirror(f[b], 1.0)  # (the lower triangle of the matrix is the upper one in memory)

    def eigh_grad(v, m, w, gw, out):  # v: V column-major, m: V^T gV, out: gA (symmetric)
        n = v.shape[1]
        one, zero = np.ones(1, v.dtype), np.zeros(1, v.dtype)
        for b in prange(v.shape[0]):
            s = np.zeros((n, n), v.dtype)
            _eigh_inner(m[b], w[b], gw[b], s)
            x = v[b].copy()
            d = bints(n, n, 0, 0)
            right, up, nt, lo = char(82), char(85), char(78), char(76)
            ntrmm(right.ctypes, up.ctypes, nt.ctypes, nt.ctypes, d[0:].ctypes, d[1:].ctypes, one.ctypes, s.ctypes,
                  d.ctypes, x.ctypes, d.ctypes)  # V S
            nsyr2k(lo.ctypes, nt.ctypes, d[0:].ctypes, d[1:].ctypes, one.ctypes, x.ctypes, d.ctypes, v[b].ctypes,
                  d.ctypes, zero.ctypes, out[b].ctypes, d.ctypes)  # (V S) V^T + V (V S)^T, its lower triangle
            _mirror(out[b], 1.0)  # (the lower triangle of the matrix is the upper one in memory)

    def eigvalsh_grad(v, gw, out):  # v: V column-major, out: V diag(gw) V^T (symmetric)
        n = v.shape[1]
        one, zero, minus = np.ones(1, v.dtype), np.zeros(1, v.dtype), -np.ones(1, v.dtype)
        for b in prange(v.shape[0]):
            x = np.empty((n, n), v.dtype)  # V's columns times sqrt|gw|, those of gw >= 0 first
            p = 0
            for c in range(n):
                if gw[b, c] >= 0:
                    p += 1
            i, j = 0, p
            for c in range(n):
                g = gw[b, c]
                if g >= 0:
                    x[i] = v[b, c] * np.sqrt(g)
                    i += 1
                else:
                    x[j] = v[b, c] * np.sqrt(-g)
                    j += 1
            xf = x.reshape(-1)
            d = bints(n, p, n - p, 0)
            lo, nt = char(76), char(78)
            nsyrk(lo.ctypes, nt.ctypes, d[0:].ctypes, d[1:].ctypes, one.ctypes, xf.ctypes, d[0:].ctypes, zero.ctypes,
                  out[b].ctypes, d[0:].ctypes)
            if p < n:
                nsyrk(lo.ctypes, nt.ctypes, d[0:].ctypes, d[2:].ctypes, minus.ctypes, xf[p * n:].ctypes, d[0:].ctypes,
                      one.ctypes, out[b].ctypes, d[0:].ctypes)
            _mirror(out[b], 1.0)  # (the lower triangle of the matrix is the upper one in memory)

    def triangular(a, x, side, uplo, trans, diag):  # trsm: x := op(a)^-1 x or x op(a)^-1, in place
        m, n = x.shape[2], x.shape[1]
        one = np.ones(1, a.dtype)
        for b in prange(x.shape[0]):
            d = ints(m, n, max(a.shape[1], 1), max(m, 1))
            s, u, t, g = char(side), char(uplo), char(trans), char(diag)
            trsm(s.ctypes, u.ctypes, t.ctypes, g.ctypes, d[0:].ctypes, d[1:].ctypes, one.ctypes, a[b].ctypes,
                 d[2:].ctypes, x[b].ctypes, d[3:].ctypes)

    def eigh(a, w, jobz, uplo):  # syevd in place: a gets the eigenvectors when jobz is 'V'
        n = a.shape[1]
        qw = np.empty(1, a.dtype)
        qi = np.empty(1, it)
        d = ints(n, max(n, 1), -1, -1)
        inf = np.zeros(1, it)
        j, u = char(jobz), char(uplo)
        syevd(j.ctypes, u.ctypes, d[0:].ctypes, a[0].ctypes, d[1:].ctypes, w[0].ctypes, qw.ctypes, d[2:].ctypes,
              qi.ctypes, d[3:].ctypes, inf.ctypes)
        lwork, liwork = max(int(qw[0].real), 1), max(int(qi[0]), 1)
        for b in prange(a.shape[0]):
            d = ints(n, max(n, 1), lwork, liwork)
            inf = np.zeros(1, it)
            j, u = char(jobz), char(uplo)
            work = np.empty(lwork, a.dtype)
            iwork = np.empty(liwork, it)
            syevd(j.ctypes, u.ctypes, d[0:].ctypes, a[b].ctypes, d[1:].ctypes, w[b].ctypes, work.ctypes,
                  d[2:].ctypes, iwork.ctypes, d[3:].ctypes, inf.ctypes)

    def svd(a, s, u, vt, jobz):  # gesdd: a (B, n, m) destroyed; u (B, ucol, m), vt (B, n, vrow)
        m, n = a.shape[2], a.shape[1]
        k = min(m, n)
        ldu, ldvt = max(m, 1), max(vt.shape[2], 1)
        qw = np.empty(1, a.dtype)
        iwork0 = np.empty(max(8 * k, 1), it)
        d = ints(m, n, max(m, 1), -1)
        dd = ints(ldu, ldvt, 0, 0)
        inf = np.zeros(1, it)
        j = char(jobz)
        gesdd(j.ctypes, d[0:].ctypes, d[1:].ctypes, a[0].ctypes, d[2:].ctypes, s[0].ctypes, u[0].ctypes,
              dd[0:].ctypes, vt[0].ctypes, dd[1:].ctypes, qw.ctypes, d[3:].ctypes, iwork0.ctypes, inf.ctypes)
        lwork = max(int(qw[0].real), 1)
        for b in prange(a.shape[0]):
            d = ints(m, n, max(m, 1), lwork)
            dd = ints(ldu, ldvt, 0, 0)
            inf = np.zeros(1, it)
            j = char(jobz)
            work = np.empty(lwork, a.dtype)
            iwork = np.empty(max(8 * k, 1), it)
            gesdd(j.ctypes, d[0:].ctypes, d[1:].ctypes, a[b].ctypes, d[2:].ctypes, s[b].ctypes, u[b].ctypes,
                  dd[0:].ctypes, vt[b].ctypes, dd[1:].ctypes, work.ctypes, d[3:].ctypes, iwork.ctypes, inf.ctypes)

    def qr_factor(a, tau):  # geqrf in place
        m, n = a.shape[2], a.shape[1]
        qw = np.empty(1, a.dtype)
        d = ints(m, n, max(m, 1), -1)
        inf = np.zeros(1, it)
        geqrf(d[0:].ctypes, d[1:].ctypes, a[0].ctypes, d[2:].ctypes, tau[0].ctypes, qw.ctypes, d[3:].ctypes,
              inf.ctypes)
        lwork = max(int(qw[0].real), 1)
        for b in prange(a.shape[0]):
            d = ints(m, n, max(m, 1), lwork)
            inf = np.zeros(1, it)
            work = np.empty(lwork, a.dtype)
            geqrf(d[0:].ctypes, d[1:].ctypes, a[b].ctypes, d[2:].ctypes, tau[b].ctypes, work.ctypes, d[3:].ctypes,
                  inf.ctypes)

    def householder(a, tau):  # orgqr in place: a (B, n, m) with m >= n >= k = tau's length
        m, n, k = a.shape[2], a.shape[1], tau.shape[1]
        qw = np.empty(1, a.dtype)
        d = ints(m, n, k, max(m, 1))
        q = ints(-1, 0, 0, 0)
        inf = np.zeros(1, it)
        orgqr(d[0:].ctypes, d[1:].ctypes, d[2:].ctypes, a[0].ctypes, d[3:].ctypes, tau[0].ctypes, qw.ctypes,
              q.ctypes, inf.ctypes)
        lwork = max(int(qw[0].real), 1)
        for b in prange(a.shape[0]):
            d = ints(m, n, k, max(m, 1))
            q = ints(lwork, 0, 0, 0)
            inf = np.zeros(1, it)
            work = np.empty(lwork, a.dtype)
            orgqr(d[0:].ctypes, d[1:].ctypes, d[2:].ctypes, a[b].ctypes, d[3:].ctypes, tau[b].ctypes, work.ctypes,
                  q.ctypes, inf.ctypes)

    def apply_q(a, tau, c, side, trans):  # ormqr: c (B, n, m) := op(Q) c or c op(Q), in place
        m, n, k = c.shape[2], c.shape[1], tau.shape[1]
        lda = max(a.shape[2], 1)
        qw = np.empty(1, a.dtype)
        d = ints(m, n, k, lda)
        q = ints(max(m, 1), -1, 0, 0)
        inf = np.zeros(1, it)
        s, t = char(side), char(trans)
        ormqr(s.ctypes, t.ctypes, d[0:].ctypes, d[1:].ctypes, d[2:].ctypes, a[0].ctypes, d[3:].ctypes,
              tau[0].ctypes, c[0].ctypes, q[0:].ctypes, qw.ctypes, q[1:].ctypes, inf.ctypes)
        lwork = max(int(qw[0].real), 1)
        for b in prange(c.shape[0]):
            d = ints(m, n, k, lda)
            q = ints(max(m, 1), lwork, 0, 0)
            inf = np.zeros(1, it)
            s, t = char(side), char(trans)
            work = np.empty(lwork, a.dtype)
            ormqr(s.ctypes, t.ctypes, d[0:].ctypes, d[1:].ctypes, d[2:].ctypes, a[b].ctypes, d[3:].ctypes,
                  tau[b].ctypes, c[b].ctypes, q[0:].ctypes, work.ctypes, q[1:].ctypes, inf.ctypes)

    def lstsq(a, x, rank, sv, rcond, driver):  # a (B, n, m), x (B, k, max(m, n)) in place
        m, n, nrhs = a.shape[2], a.shape[1], x.shape[1]
        ldb = max(x.shape[2], 1)
        rc = np.full(1, rcond, a.dtype)
        for b in prange(a.shape[0]):
            d = ints(m, n, nrhs, max(m, 1))
            q = ints(ldb, -1, 0, 0)
            inf = np.zeros(1, it)
            r = np.zeros(1, it)
            qw = np.empty(1, a.dtype)
            if driver == 0:  # gels
                t = char(78)
                gels(t.ctypes, d[0:].ctypes, d[1:].ctypes, d[2:].ctypes, a[b].ctypes, d[3:].ctypes, x[b].ctypes,
                     q[0:].ctypes, qw.ctypes, q[1:].ctypes, inf.ctypes)
                q[1] = max(int(qw[0].real), 1)
                work = np.empty(q[1], a.dtype)
                gels(t.ctypes, d[0:].ctypes, d[1:].ctypes, d[2:].ctypes, a[b].ctypes, d[3:].ctypes, x[b].ctypes,
                     q[0:].ctypes, work.ctypes, q[1:].ctypes, inf.ctypes)
            elif driver == 1:  # gelsy
                jpvt = np.zeros(max(n, 1), it)
                gelsy(d[0:].ctypes, d[1:].ctypes, d[2:].ctypes, a[b].ctypes, d[3:].ctypes, x[b].ctypes, q[0:].ctypes,
                      jpvt.ctypes, rc.ctypes, r.ctypes, qw.ctypes, q[1:].ctypes, inf.ctypes)
                q[1] = max(int(qw[0].real), 1)
                work = np.empty(q[1], a.dtype)
                gelsy(d[0:].ctypes, d[1:].ctypes, d[2:].ctypes, a[b].ctypes, d[3:].ctypes, x[b].ctypes, q[0:].ctypes,
                      jpvt.ctypes, rc.ctypes, r.ctypes, work.ctypes, q[1:].ctypes, inf.ctypes)
            elif driver == 2:  # gelsd
                iw = np.empty(1, it)
                gelsd(d[0:].ctypes, d[1:].ctypes, d[2:].ctypes, a[b].ctypes, d[3:].ctypes, x[b].ctypes, q[0:].ctypes,
                      sv[b].ctypes, rc.ctypes, r.ctypes, qw.ctypes, q[1:].ctypes, iw.ctypes, inf.ctypes)
                q[1] = max(int(qw[0].real), 1)
                work = np.empty(q[1], a.dtype)
                iwork = np.empty(max(iw[0], 1), it)
                gelsd(d[0:].ctypes, d[1:].ctypes, d[2:].ctypes, a[b].ctypes, d[3:].ctypes, x[b].ctypes, q[0:].ctypes,
                      sv[b].ctypes, rc.ctypes, r.ctypes, work.ctypes, q[1:].ctypes, iwork.ctypes, inf.ctypes)
            else:  # gelss
                gelss(d[0:].ctypes, d[1:].ctypes, d[2:].ctypes, a[b].ctypes, d[3:].ctypes, x[b].ctypes, q[0:].ctypes,
                      sv[b].ctypes, rc.ctypes, r.ctypes, qw.ctypes, q[1:].ctypes, inf.ctypes)
                q[1] = max(int(qw[0].real), 1)
                work = np.empty(q[1], a.dtype)
                gelss(d[0:].ctypes, d[1:].ctypes, d[2:].ctypes, a[b].ctypes, d[3:].ctypes, x[b].ctypes, q[0:].ctypes,
                      sv[b].ctypes, rc.ctypes, r.ctypes, work.ctypes, q[1:].ctypes, inf.ctypes)
            rank[b] = r[0]

    if dtype.kind == "c":
        eigh, svd, lstsq = _complex_parts(L, dtype, ints, char)

    ns = {k: _by_batch(_jitted(v), _jitted(v, parallel=False), _RHS.get(k),
                       numpy_lib is not None and k in _NUMPY_KERNELS) for k, v in locals().items() if callable(v) and k in (
        "lu_factor", "lu_solve", "inv", "cholesky", "cholesky_grad", "eigh_grad", "eigvalsh_grad", "triangular", "eigh", "svd", "qr_factor",
        "householder", "apply_q", "lstsq")}
    ns["lu_solve_parts"] = ns["lu_solve"].parallel  # (one system's right-hand sides in parts on numba's threads)
    ns["dtype"] = dt
    return ns


def _complex_parts(L, dtype, ints, char):
    """The complex twins of _make's eigh, svd and lstsq: heevd, gesdd and the least-squares drivers take a real
    workspace (rwork) more, and their eigenvalues, singular values and rcond are real."""
    heevd, gesdd, gelsy, gelsd, gelss, gels = L["syevd"], L["gesdd"], L["gelsy"], L["gelsd"], L["gelss"], L["gels"]

    def eigh(a, w, jobz, uplo):
        n = a.shape[1]
        qw = np.empty(1, a.dtype)
        qr = np.empty(1, w.dtype)
        qi = np.empty(1, np.int32)
        d = ints(n, max(n, 1), -1, -1)
        dr = ints(-1, 0, 0, 0)
        inf = np.zeros(1, np.int32)
        j, u = char(jobz), char(uplo)
        heevd(j.ctypes, u.ctypes, d[0:].ctypes, a[0].ctypes, d[1:].ctypes, w[0].ctypes, qw.ctypes, d[2:].ctypes,
              qr.ctypes, dr.ctypes, qi.ctypes, d[3:].ctypes, inf.ctypes)
        lwork, lrwork, liwork = max(int(qw[0].real), 1), max(int(qr[0]), 1), max(int(qi[0]), 1)
        for b in prange(a.shape[0]):
            d = ints(n, max(n, 1), lwork, liwork)
            dr = ints(lrwork, 0, 0, 0)
            inf = np.zeros(1, np.int32)
            j, u = char(jobz), char(uplo)
            work = np.empty(lwork, a.dtype)
            rwork = np.empty(lrwork, w.dtype)
            iwork = np.empty(liwork, np.int32)
            heevd(j.ctypes, u.ctypes, d[0:].ctypes, a[b].ctypes, d[1:].ctypes, w[b].ctypes, work.ctypes,
                  d[2:].ctypes, rwork.ctypes, dr.ctypes, iwork.ctypes, d[3:].ctypes, inf.ctypes)

    def svd(a, s, u, vt, jobz):
        m, n = a.shape[2], a.shape[1]
        k = min(m, n)
        ldu, ldvt = max(m, 1), max(vt.shape[2], 1)
        lrwork = max(5 * k * k + 5 * k, 2 * max(m, n) * k + 2 * k * k + k, 7 * k, 1)
        qw = np.empty(1, a.dtype)
        rwork0 = np.empty(lrwork, s.dtype)
        iwork0 = np.empty(max(8 * k, 1), np.int32)
        d = ints(m, n, max(m, 1), -1)
        dd = ints(ldu, ldvt, 0, 0)
        inf = np.zeros(1, np.int32)
        j = char(jobz)
        gesdd(j.ctypes, d[0:].ctypes, d[1:].ctypes, a[0].ctypes, d[2:].ctypes, s[0].ctypes, u[0].ctypes,
              dd[0:].ctypes, vt[0].ctypes, dd[1:].ctypes, qw.ctypes, d[3:].ctypes, rwork0.ctypes, iwork0.ctypes,
              inf.ctypes)
        lwork = max(int(qw[0].real), 1)
        for b in prange(a.shape[0]):
            d = ints(m, n, max(m, 1), lwork)
            dd = ints(ldu, ldvt, 0, 0)
            inf = np.zeros(1, np.int32)
            j = char(jobz)
            work = np.empty(lwork, a.dtype)
            rwork = np.empty(lrwork, s.dtype)
            iwork = np.empty(max(8 * k, 1), np.int32)
            gesdd(j.ctypes, d[0:].ctypes, d[1:].ctypes, a[b].ctypes, d[2:].ctypes, s[b].ctypes, u[b].ctypes,
                  dd[0:].ctypes, vt[b].ctypes, dd[1:].ctypes, work.ctypes, d[3:].ctypes, rwork.ctypes, iwork.ctypes,
                  inf.ctypes)

    def lstsq(a, x, rank, sv, rcond, driver):  # sv: real
        m, n, nrhs = a.shape[2], a.shape[1], x.shape[1]
        ldb = max(x.shape[2], 1)
        rc = np.full(1, rcond, sv.dtype)
        for b in prange(a.shape[0]):
            d = ints(m, n, nrhs, max(m, 1))
            q = ints(ldb, -1, 0, 0)
            inf = np.zeros(1, np.int32)
            r = np.zeros(1, np.int32)
            qw = np.empty(1, a.dtype)
            if driver == 0:  # gels
                t = char(78)
                gels(t.ctypes, d[0:].ctypes, d[1:].ctypes, d[2:].ctypes, a[b].ctypes, d[3:].ctypes, x[b].ctypes,
                     q[0:].ctypes, qw.ctypes, q[1:].ctypes, inf.ctypes)
                q[1] = max(int(qw[0].real), 1)
                work = np.empty(q[1], a.dtype)
                gels(t.ctypes, d[0:].ctypes, d[1:].ctypes, d[2:].ctypes, a[b].ctypes, d[3:].ctypes, x[b].ctypes,
                     q[0:].ctypes, work.ctypes, q[1:].ctypes, inf.ctypes)
            elif driver == 1:  # gelsy
                jpvt = np.zeros(max(n, 1), np.int32)
                rwork = np.empty(max(2 * n, 1), sv.dtype)
                gelsy(d[0:].ctypes, d[1:].ctypes, d[2:].ctypes, a[b].ctypes, d[3:].ctypes, x[b].ctypes, q[0:].ctypes,
                      jpvt.ctypes, rc.ctypes, r.ctypes, qw.ctypes, q[1:].ctypes, rwork.ctypes, inf.ctypes)
                q[1] = max(int(qw[0].real), 1)
                work = np.empty(q[1], a.dtype)
                gelsy(d[0:].ctypes, d[1:].ctypes, d[2:].ctypes, a[b].ctypes, d[3:].ctypes, x[b].ctypes, q[0:].ctypes,
                      jpvt.ctypes, rc.ctypes, r.ctypes, work.ctypes, q[1:].ctypes, rwork.ctypes, inf.ctypes)
            elif driver == 2:  # gelsd
                iw = np.empty(1, np.int32)
                rw = np.empty(1, sv.dtype)
                gelsd(d[0:].ctypes, d[1:].ctypes, d[2:].ctypes, a[b].ctypes, d[3:].ctypes, x[b].ctypes, q[0:].ctypes,
                      sv[b].ctypes, rc.ctypes, r.ctypes, qw.ctypes, q[1:].ctypes, rw.ctypes, iw.ctypes, inf.ctypes)
                q[1] = max(int(qw[0].real), 1)
                work = np.empty(q[1], a.dtype)
                rwork = np.empty(max(int(rw[0]), 1), sv.dtype)
                iwork = np.empty(max(iw[0], 1), np.int32)
                gelsd(d[0:].ctypes, d[1:].ctypes, d[2:].ctypes, a[b].ctypes, d[3:].ctypes, x[b].ctypes, q[0:].ctypes,
                      sv[b].ctypes, rc.ctypes, r.ctypes, work.ctypes, q[1:].ctypes, rwork.ctypes, iwork.ctypes,
                      inf.ctypes)
            else:  # gelss
                rwork = np.empty(max(5 * min(m, n), 1), sv.dtype)
                gelss(d[0:].ctypes, d[1:].ctypes, d[2:].ctypes, a[b].ctypes, d[3:].ctypes, x[b].ctypes, q[0:].ctypes,
                      sv[b].ctypes, rc.ctypes, r.ctypes, qw.ctypes, q[1:].ctypes, rwork.ctypes, inf.ctypes)
                q[1] = max(int(qw[0].real), 1)
                work = np.empty(q[1], a.dtype)
                gelss(d[0:].ctypes, d[1:].ctypes, d[2:].ctypes, a[b].ctypes, d[3:].ctypes, x[b].ctypes, q[0:].ctypes,
                      sv[b].ctypes, rc.ctypes, r.ctypes, work.ctypes, q[1:].ctypes, rwork.ctypes, inf.ctypes)
            rank[b] = r[0]

    return eigh, svd, lstsq


def _real(dtype):
    """The dtype of a complex dtype's parts (a real dtype itself): eigenvalues, singular values, log|det|."""
    return np.empty(0, dtype).real.dtype


def _adjoint(dtype):
    """LAPACK's trans character of op(A) = A^H: 'C' for complex (their 'T' transposes only), 'T' for real."""
    return ord("C" if np.dtype(dtype).kind == "c" else "T")


# ---------------------------------------------------------------------- small matrices: direct code
_SMALL_STAMP = _jit.sources_stamp(small_matrix.__file__)


def _batch_loop(body, statement=None, params=None):
    """A parallel loop over the matrices of a batch running ``statement`` (a call of ``at``, small_matrix's ``body``
    for one matrix, index b; small_matrix.BATCH gives both where not given) on each. Built in this module's
    namespace, as numba's on-disk cache wants, its name stamped with small_matrix's source."""
    statement, params = (statement, params) if statement else small_matrix.BATCH[body]
    at, name = "_%s" % body.__name__, "_%s_loop_%s" % (body.__name__, _SMALL_STAMP)
    globals()[at] = njit(inline="always")(body)
    src = "def %s(%s):\n    for b in prange(%s.shape[0]):\n        %s\n" % (
        name, params, params.split(",")[0], re.sub(r"\bat\(", at + "(", statement))
    exec(compile(src, __file__, "exec"), globals())
    return njit(parallel=True, nogil=True, error_model="numpy", cache=config.CACHE)(globals()[name])


_small_det = _batch_loop(small_matrix.det_at)
# ok[b]: whether the determinant is nonzero (LAPACK then says which pivot)
_small_inv = _batch_loop(small_matrix.inv_at, "ok[b] = at(a, b, out)", "a, out, ok")
_small_solve = _batch_loop(small_matrix.solve_at)
_small_inv_grad = _batch_loop(small_matrix.inv_grad_at)
_small_solve_grad = _batch_loop(small_matrix.solve_grad_at)
_small_det_grad = _batch_loop(small_matrix.det_grad_at)
_small_cholesky = _batch_loop(small_matrix.cholesky_at)
_small_triangular = _batch_loop(small_matrix.triangular_at)
_small_cholesky_grad = _batch_loop(small_matrix.cholesky_grad_at)
SMALL_RHS = 16  # right-hand sides a triangular solve of a small matrix takes by direct code (more: trsm's)


def _direct(a, rhs=0):
    """Whether the triangular kernels of real matrices of order up to small_matrix.ORDER (``a``: a batch of them,
    host or device arrays: the simulator's shapes take no negative index) take direct code: with at most SMALL_RHS
    right-hand sides each."""
    return tuple(a.shape)[-1] <= small_matrix.ORDER and a.dtype in (np.float32, np.float64) and rhs <= SMALL_RHS


def _triangular(a, x, left, upper, trans, unit):
    """trsm on the column-major batches ``a`` and ``x`` (in place): op(A)^-1 X (X op(A)^-1 where not ``left``),
    op(A) = A^H where ``trans``."""
    if _direct(a, x.shape[1] if left else x.shape[2]):
        _small_triangular(a, x, left, upper, trans, unit)
    else:
        _kernels(a.dtype)["triangular"](a, x, ord("L" if left else "R"), ord("U" if upper else "L"),
                                        _adjoint(a.dtype) if trans else ord("N"), ord("U" if unit else "N"))


_small = small_matrix.small


def _flat(a):
    return np.ascontiguousarray(a).reshape((_count(a),) + a.shape[-2:])


# ---------------------------------------------------------------------- the functions the op table calls
def lu_factor(a):
    """(LU, pivots, info) of ``a`` (..., m, n): getrf, partial pivoting; int32 pivots, as PyTorch's."""
    batch, (m, n) = a.shape[:-2], a.shape[-2:]
    f = _col(a)
    piv = np.zeros((f.shape[0], min(m, n)), INT)
    info = np.zeros(f.shape[0], np.int32)
    if f.size and not _on_threads(blocked_lu, blocked_lu.factor, f, piv, info):
        _kernels(a.dtype)["lu_factor"](f, piv, info)
    return _back(f, batch), piv.reshape(batch + (min(m, n),)), info.reshape(batch)


def _on_threads(module, fn, f, *args):
    """``fn(f, *args)`` of a kernel module for one large matrix on numba's threads (kernels/lu.py, kernels/eigh.py)
    with SciPy's OpenBLAS on one thread; None where ``module.applies(f)`` says it does not take ``f``."""
    threads = config.lapack_threads()
    if threads is None or not module.applies(f):
        return None
    return config.on_one_thread(threads, fn, f, *args)


# Right-hand sides of one system a thread solves at least: OpenBLAS's trsm works them in fours, so parts of a
# multiple of four columns leave every value as one call over all of them gives it (tests/linalg/test_lu_solve_parts.py)
RHS_PART = 4
RHS_SPLIT_WORK = 1 << 17  # multiply-adds (n^2 k) from which the parts are worth a parallel region


def _rhs_width(n, x):
    """Right-hand sides a call of getrs takes: all of them, but for one system of enough work below SMALL_GEMM (a
    single call on one OpenBLAS thread, which runs them one after another) they go to numba's threads in parts."""
    batch, k = x.shape[:2]
    threads = config.threads()
    if batch > 1 or threads < 2 or k < 2 * RHS_PART or not RHS_SPLIT_WORK <= n * n * k < config.SMALL_GEMM or \
            config.lapack_threads() is None:
        return k
    per = -(-k // min(threads, k // RHS_PART))
    return -(-per // RHS_PART) * RHS_PART


def lu_solve(lu, piv, b, adjoint):
    """X with A X = B (A^H X = B if ``adjoint``), A = P L U given as getrf gives it; b (..., n, k)."""
    batch = b.shape[:-2]
    x = _col(b)
    if x.size:
        args = (_col_read(lu), np.ascontiguousarray(piv, INT).reshape(_count(lu), piv.shape[-1]), x,
                _adjoint(lu.dtype) if adjoint else ord("N"))
        width = _rhs_width(lu.shape[-1], x)
        if width < x.shape[1]:
            config.on_one_thread(config.lapack_threads(), _kernels(lu.dtype)["lu_solve_parts"], *args, width)
        else:
            _kernels(lu.dtype)["lu_solve"](*args, x.shape[1])
    return _back(x, batch)


def solve(a, b):
    """(X, LU, pivots, info): A X = B through one LU, of A^T (kept for the gradient, whose A^-T g is then a plain
    getrs): a row-major A is A^T in LAPACK's column-major order, so its copy for getrf is a memcpy, not a
    transposing copy. info as getrf on A gives it (which pivot is zero). Complex: the LU of A itself (getrs's
    'T' of A^T would be the conjugate's)."""
    if a.dtype.kind == "c":
        lu, piv, info = lu_factor(a)
        return lu_solve(lu, piv, b, False), lu, piv, info
    lu, piv, info = lu_factor(a.swapaxes(-1, -2))
    if info.any():
        info = lu_factor(a)[2]
    return lu_solve(lu, piv, b, True), lu, piv, info


def inv(a):
    """(inverse, info): info > 0 names the zero diagonal element of U (1-based), as getrf does."""
    batch, n = a.shape[:-2], a.shape[-1]
    if _small(a) and a.size:
        f = _flat(a)
        out = np.empty_like(f)
        ok = np.empty(f.shape[0], np.bool_)
        _small_inv(f, out, ok)
        info = np.zeros(f.shape[0], np.int32)
        if not ok.all():  # LAPACK's answer for the singular ones (which pivot)
            bad = np.flatnonzero(~ok)
            out[bad], info[bad] = _lapack_inv(f[bad])
        return out.reshape(a.shape), info.reshape(batch)
    f = _col(a)
    info = np.zeros(f.shape[0], np.int32)
    if f.size:
        _kernels(a.dtype)["inv"](f, info)
    return _back(f, batch), info.reshape(batch)


def _lapack_inv(f):
    g = _col(f)
    info = np.zeros(g.shape[0], np.int32)
    _kernels(f.dtype)["inv"](g, info)
    return _back(g, (g.shape[0],)), info


def small_solve(a, b):
    """(X, info) for batches of 2x2 / 3x3 systems (a (..., n, n), b (..., n, k), same batch): by the adjugate."""
    inverse, info = inv(a)
    fb = _flat(b)
    out = np.empty(fb.shape, np.result_type(a.dtype, b.dtype))
    _small_solve(_flat(inverse), fb, out)
    return out.reshape(b.shape), info


def small_inv_grad(r, g):
    """-R^T g R^T for batches of 2x2 / 3x3 inverses R (g of R's shape)."""
    out = np.empty(r.shape, np.result_type(r.dtype, g.dtype))
    f = _flat(r)
    _small_inv_grad(f, _flat(g), out.reshape(f.shape), np.empty_like(f))
    return out


def small_solve_grad(a, x, g):
    """(gA, gB) of X = A^-1 B for batches of 2x2 / 3x3 systems (a, x and g of one batch shape)."""
    ga = np.empty(a.shape, np.result_type(a.dtype, g.dtype))
    gb = np.empty(g.shape, ga.dtype)
    f = _flat(a)
    _small_solve_grad(f, _flat(x), _flat(g), ga.reshape(f.shape), gb.reshape((-1,) + g.shape[-2:]), np.empty_like(f))
    return ga, gb


def small_det_grad(a, g):
    """g times the cofactor matrix of each 2x2 / 3x3 matrix: the gradient of det, singular matrices included."""
    out = np.empty(a.shape, np.result_type(a.dtype, g.dtype))
    gs = np.ascontiguousarray(np.broadcast_to(g, a.shape[:-2])).reshape(-1)
    _small_det_grad(_flat(a), gs, out.reshape((-1,) + a.shape[-2:]))
    return out


def det(a):
    """The determinant: direct for 2x2 and 3x3, else the product of U's diagonal with the pivots' sign."""
    batch = a.shape[:-2]
    if _small(a) and a.size:
        out = np.empty(int(np.prod(batch, dtype=np.int64)), a.dtype)
        _small_det(_flat(a), out)
        return out.reshape(batch)
    if a.shape[-1] == 0:
        return np.ones(batch, a.dtype)
    lu, piv, _ = lu_factor(a)
    return np.asarray(_pivot_sign(piv) * np.prod(np.diagonal(lu, 0, -2, -1), -1), a.dtype)


def _pivot_sign(piv):
    swaps = (piv != np.arange(1, piv.shape[-1] + 1, dtype=np.int32)).sum(-1)
    return np.where(swaps % 2 == 1, -1, 1)


def slogdet(a):
    """(sign, log|det|) from one LU."""
    n = a.shape[-1]
    if n == 0:
        return np.ones(a.shape[:-2], a.dtype), np.zeros(a.shape[:-2], _real(a.dtype))
    lu, piv, _ = lu_factor(a)
    d = np.diagonal(lu, 0, -2, -1)
    mag = np.abs(d)
    with np.errstate(divide="ignore", invalid="ignore"):  # (complex: the phase d / |d|, 0 where d is)
        unit = np.sign(d) if a.dtype.kind != "c" else np.where(mag == 0, 0, d / np.where(mag == 0, 1, mag))
        logabs = np.log(mag).sum(-1)
    sign = _pivot_sign(piv).astype(a.dtype) * np.prod(unit, -1)
    return np.asarray(sign, a.dtype), np.asarray(logabs, _real(a.dtype))


def cholesky(a, upper):
    """(L, info) (U with ``upper``): potrf; the other triangle zero."""
    batch = a.shape[:-2]
    f = _col(a)
    info = np.zeros(f.shape[0], np.int32)
    if f.size and _direct(a):
        _small_cholesky(f, info, upper)
    elif f.size:  # column-major lower of A = row-major upper of A^T: ask LAPACK for what we want
        _kernels(a.dtype)["cholesky"](f, info, ord("U" if upper else "L"))
    return _back(f, batch), info.reshape(batch)




def solve_triangular(a, b, upper, left, unitriangular):
    """X with A X = B (X A = B where not ``left``), A triangular: trsm (no check: a zero diagonal gives inf)."""
    batch = b.shape[:-2]
    x = _col(b)
    if x.size:
        _triangular(_col_read(a), x, left, upper, False, unitriangular)
    return _back(x, batch)


def cholesky_solve(l, b, upper):
    """X with L L^H X = B (U^H U X = B with ``upper``): two trsm on one copy of B, the factor read in place."""
    batch = b.shape[:-2]
    x = _col(b)
    if x.size:
        lf = _col_read(l)
        _triangular(lf, x, True, upper, upper, False)
        _triangular(lf, x, True, upper, not upper, False)
    return _back(x, batch)


def cholesky_grad(l, gl, upper):
    """The gradient of the Cholesky factor L (U = L^T with ``upper``): gA = L^-T Phi L^-1, Phi the symmetric
    matrix of tril(L^T gL) with its diagonal halved (PyTorch's cholesky_backward, after Murray 2016), in one
    column-major buffer and one kernel call, the factor read in place: Phi's triangle by blocks of a triangular
    product and GEMMs, one pass, a trsm, and the lower triangle of the symmetric result by blocks of trsm (about 60%
    of the work of the full products). gA comes back exactly symmetric, so its layout is free: C-contiguous, which
    the elementwise backward of whatever built A reads without a copy."""
    batch = l.shape[:-2]
    if l.size and _direct(l):  # (C-order: L, gL)
        lc, gc = (_flat(x.swapaxes(-1, -2) if upper else x) for x in (l, gl))
        out = np.empty_like(lc)
        _small_cholesky_grad(lc, gc, out)
        return out.reshape(l.shape)
    f = _col(gl.swapaxes(-1, -2) if upper else gl)  # gL (gU^T)
    if f.size:
        _kernels(l.dtype)["cholesky_grad"](_col_read(l.swapaxes(-1, -2) if upper else l), f, CHOLESKY_GRAD_BLOCK)
    return f.reshape(tuple(batch) + f.shape[1:])


CHOLESKY_GRAD_BLOCK = 64  # (cholesky_grad's block: smaller ones save work, larger ones run BLAS faster)


def eigh_grad(v, vhgv, w, gw):
    """The gradient of eigh where the eigenvectors have one (real): gA = V M V^T, M = skew(V^T gV) / E + diag(gw)
    (E_ij = w_j - w_i), in one kernel call per matrix: one tiled pass builds S = triu(M, 1) + diag(M) / 2, then
    (V S) V^T + V (V S)^T is a triangular product and a symmetric rank-2k update (3 n^3 flops against the formula's
    two GEMMs, 4 n^3), the result's other triangle mirrored. ``v`` as eigh gives it (column-major: read in place),
    ``vhgv`` = V^T gV. gA comes back exactly symmetric (C-contiguous)."""
    n = v.shape[-1]
    vc = _col_read(v)
    B = vc.shape[0]
    rows = lambda x: np.ascontiguousarray(np.broadcast_to(x, v.shape[:-1]), v.dtype).reshape(B, n)  # noqa: E731
    out = np.empty((B, n, n), v.dtype)
    if out.size:
        _kernels(v.dtype)["eigh_grad"](vc, np.ascontiguousarray(np.broadcast_to(vhgv, v.shape), v.dtype).reshape(
            B, n, n), rows(w), rows(gw), out)
    return out.reshape(v.shape)


def eigvalsh_grad(v, gw):
    """V diag(gw) V^T, the gradient of eigh in its eigenvalues alone (real): V's columns scaled by sqrt|gw| make it
    X+ X+^T - X- X-^T, two symmetric rank-k updates (syrk: n^3 flops, half the formula's GEMM), the other triangle
    mirrored. ``v`` as eigh gives it (column-major: read in place); gA comes back exactly symmetric."""
    n = v.shape[-1]
    vc = _col_read(v)
    out = np.empty((vc.shape[0], n, n), v.dtype)
    if out.size:
        _kernels(v.dtype)["eigvalsh_grad"](vc, np.ascontiguousarray(np.broadcast_to(gw, v.shape[:-1]), v.dtype).reshape(
            vc.shape[0], n), out)
    return out.reshape(v.shape)


def eigh(a, lower, vectors, transposed=False):
    """(eigenvalues ascending, eigenvectors as columns or None): syevd on the ``lower`` or upper triangle.
    ``transposed``: a real row-major ``a`` goes to syevd as it lies (a copy, not a transposing one), as A^T in
    LAPACK's order, the other triangle read: the same symmetric matrix, whose eigenvectors come back, but LAPACK
    reduces it from the other end, so they may differ in sign and the values in the last bits (for eigvalsh, whose
    vectors only its gradient V diag(gL) V^T reads)."""
    batch, n = a.shape[:-2], a.shape[-1]
    if transposed and a.dtype.kind == "f" and a.flags.c_contiguous:
        f = a.reshape((_count(a), n, n)).copy()
        lower = not lower
    else:
        f = _col(a)
    w = np.zeros((f.shape[0], n), _real(a.dtype))
    uplo = ord("L" if lower else "U")
    if f.size and not (vectors and _on_threads(threaded_eigh, threaded_eigh.eigh, f, w, uplo) is not None):
        _kernels(a.dtype)["eigh"](f, w, ord("V" if vectors else "N"), uplo)
    return w.reshape(batch + (n,)), (_back(f, batch) if vectors else None)


def eig(a, vectors):
    """(eigenvalues, right eigenvectors as unit-norm columns or None), complex, or None where the input holds infs or
    NaNs: geev through NumPy's LAPACK (a real input's conjugate pairs become complex columns, as in PyTorch's)."""
    if not np.isfinite(a).all():
        return None
    cdt = np.complex64 if a.dtype in (np.float32, np.complex64) else np.complex128
    if not a.size:
        return np.zeros(a.shape[:-1], cdt), (np.zeros(a.shape, cdt) if vectors else None)
    if vectors:
        w, v = np.linalg.eig(a)
        return w.astype(cdt, copy=False), v.astype(cdt, copy=False)
    return np.linalg.eigvals(a).astype(cdt, copy=False), None


def svd(a, full_matrices, vectors):
    """(U, S, Vh): gesdd; U and Vh None without ``vectors``."""
    batch, (m, n) = a.shape[:-2], a.shape[-2:]
    k = min(m, n)
    f = _col(a)
    B = f.shape[0]
    s = np.zeros((B, k), _real(a.dtype))
    ucols, vrows = (m, n) if full_matrices else (k, k)
    if not vectors:
        ucols = vrows = 1
    new = np.empty if vectors and f.size else np.zeros  # (gesdd writes all of U and V^T: no zeroing of 16 MB at 1024)
    u = new((B, ucols, m), a.dtype)
    vt = new((B, n, vrows), a.dtype)
    if f.size:
        _kernels(a.dtype)["svd"](f, s, u, vt, ord("N" if not vectors else "A" if full_matrices else "S"))
    elif vectors and full_matrices:  # an empty matrix: the identity of the other side
        u[:] = np.eye(m, dtype=a.dtype)
        vt[:] = np.eye(n, dtype=a.dtype)
    s = s.reshape(batch + (k,))
    if not vectors:
        return None, s, None
    return _back(u, batch), s, _back(vt, batch)


def geqrf(a):
    """(QR, tau): the Householder form of a QR factorisation."""
    batch, (m, n) = a.shape[:-2], a.shape[-2:]
    f = _col(a)
    tau = np.zeros((f.shape[0], min(m, n)), a.dtype)
    if f.size:
        _kernels(a.dtype)["qr_factor"](f, tau)
    return _back(f, batch), tau.reshape(batch + (min(m, n),))


def householder_product(a, tau):
    """The first n columns of the product of the Householder reflectors (orgqr); a (..., m, n), m >= n."""
    batch = a.shape[:-2]
    f = _col(a)
    if f.size:
        _kernels(a.dtype)["householder"](f, np.ascontiguousarray(tau).reshape(f.shape[0], -1))
    return _back(f, batch)


def ormqr(a, tau, c, left, transpose):
    """op(Q) C or C op(Q), Q the product of the reflectors in (a, tau) (ormqr)."""
    batch = c.shape[:-2]
    x = _col(c)
    if x.size and tau.shape[-1]:
        _kernels(a.dtype)["apply_q"](_col_read(a), np.ascontiguousarray(tau).reshape(x.shape[0], -1), x,
                                     ord("L" if left else "R"), _adjoint(a.dtype) if transpose else ord("N"))
    return _back(x, batch)


DRIVERS = ("gels", "gelsy", "gelsd", "gelss")


def lstsq(a, b, rcond, driver):
    """(solution (..., n, k), rank (...), singular values (..., min(m, n)) or empty) of min |A X - B|."""
    batch, (m, n), k = a.shape[:-2], a.shape[-2:], b.shape[-1]
    f = _col(a)
    B = f.shape[0]
    rows = max(m, n)
    x = np.zeros((B, k, rows), a.dtype)
    x[:, :, :m] = np.swapaxes(np.broadcast_to(b, batch + (m, k)).reshape(B, m, k), 1, 2)
    rank = np.zeros(B, np.int64)
    sv = np.zeros((B, min(m, n)), _real(a.dtype))
    r32 = np.zeros(B, np.int32)
    if f.size and k:
        _kernels(a.dtype)["lstsq"](f, x, r32, sv, rcond, DRIVERS.index(driver))
        rank[:] = r32
    elif driver != "gels":
        rank[:] = 0
    sol = _back(np.ascontiguousarray(x[:, :, :n]), batch)
    return sol, rank.reshape(batch), sv.reshape(batch + (min(m, n),))


def qr(a, mode):
    """(Q or None for mode 'r', R) of ``a`` (..., m, n): geqrf, then orgqr on the reflectors."""
    m, n = a.shape[-2:]
    k = min(m, n)
    f, tau = geqrf(a)
    R = np.triu(f[..., : (m if mode == "complete" else k), :])
    if mode == "r":
        return None, R
    cols = m if mode == "complete" else k
    base = np.zeros(a.shape[:-1] + (cols,), a.dtype)
    w = min(cols, n)
    base[..., :w] = f[..., :w]
    return householder_product(base, tau), R
