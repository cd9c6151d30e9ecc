"""Dense linear algebra on CUDA: batches of small matrices by direct code, one thread a matrix: det, slogdet, inv
and solve of 2x2 and 3x3 matrices, Cholesky and triangular solves of orders up to small_matrix.ORDER.

The math of one matrix is kernels/small_matrix.py's, compiled unchanged as device functions (the CPU loops of
kernels/linalg.py run the same), on the same layouts (factors column-major, as LAPACK's). What needs a
factorization of a larger matrix (LU, Cholesky, QR, eigh, SVD, least squares) needs cuSOLVER, which is not bound:
each such function raises a NotImplementedError that names it.
Nothing raises on a singular matrix: ``info`` is getrf's (which pivot is zero), and the op table words the error.
"""
import re

import numpy as np
from numba import cuda

from .. import _jit, linalg as _cpu, small_matrix as S
from . import _launch as L
from .array import ascontiguous, broadcast_to, copy, empty, full, reshape, swapaxes
from .elementwise import run

name = "cuda"
DRIVERS = _cpu.DRIVERS

NEEDS_CUSOLVER = ("lu_factor", "lu_solve", "solve", "eigh", "eig", "svd", "geqrf", "householder_product", "ormqr",
                  "lstsq", "qr", "cholesky_grad")


def _missing(fname):
    def fn(*args, **kwargs):
        raise NotImplementedError("jitgrad: linalg %s is not implemented on CUDA: it needs cuSOLVER (CuPy's binding); "
                                  "move the tensors to the CPU for it" % fname)
    fn.__name__ = fname
    return fn


globals().update({f: _missing(f) for f in NEEDS_CUSOLVER})


# ---------------------------------------------------------------------- one thread a matrix
_det_at = L.device_jit(S.det_at)
_inv_at = L.device_jit(S.inv_at)
_pivoted_inv_at = L.device_jit(S.pivoted_inv_at)
_solve_at = L.device_jit(S.solve_at)
_inv_grad_at = L.device_jit(S.inv_grad_at)
_solve_grad_at = L.device_jit(L.function_with_globals(S.solve_grad_at, _inv_at=_inv_at))
_det_grad_at = L.device_jit(S.det_grad_at)
_pick = L.device_jit(S.pick)
_cholesky_at = L.device_jit(L.function_with_globals(S.cholesky_at, _pick=_pick))
_triangular_at = L.device_jit(L.function_with_globals(S.triangular_at, _pick=_pick))


def _batch_kernel(body, statement=None, params=None):
    """The CUDA twin of kernels/linalg.py's _batch_loop: a grid-stride kernel over the batch, a thread a matrix,
    running ``statement`` (a call of ``at``, small_matrix's ``body`` as the device function ``_<name>`` of this
    module; small_matrix.BATCH gives statement and parameters where not given). Its compiled name carries a hash
    of small_matrix's source, so numba's disk cache never serves one built from an older version."""
    statement, params = (statement, params) if statement else S.BATCH[body]
    src = "def {name}(%s):\n    for b in range(cuda.grid(1), %s.shape[0], cuda.gridsize(1)):\n        %s\n" % (
        params, params.split(",")[0], re.sub(r"\bat\(", "_%s(" % body.__name__, statement))
    return L.generate(src, "_%s_kernel" % body.__name__, globals(), __file__, salt=_SMALL_STAMP)


_SMALL_STAMP = _jit.sources_stamp(S.__file__)
_det = _batch_kernel(S.det_at)
# where the adjugate fails (the determinant rounds to zero), Gauss-Jordan with getrf's pivots and info (scratch: A)
_inv = _batch_kernel(S.inv_at, "info[b] = 0 if at(a, b, out) else _pivoted_inv_at(a, b, scratch, out)",
                     "a, out, info, scratch")
_solve = _batch_kernel(S.solve_at)
_inv_grad = _batch_kernel(S.inv_grad_at)
_solve_grad = _batch_kernel(S.solve_grad_at)
_det_grad = _batch_kernel(S.det_grad_at)
_cholesky = _batch_kernel(S.cholesky_at)
_triangular = _batch_kernel(S.triangular_at)
_small = S.small


def _flat(a):
    """(..., m, n) as a C-contiguous (B, m, n) device array."""
    return reshape(ascontiguous(a), (_count(a),) + tuple(a.shape)[-2:])


def _count(a):
    n = 1
    for d in tuple(a.shape)[:-2]:
        n *= d
    return n


def _launch(kernel, count, *args):
    if count:
        L.launch(kernel, L.blocks_for(count), L.THREADS, *args)


def _require(ok, fname):
    """cuSOLVER's error where direct code does not take the batch (the CPU's rules: small_matrix.small, the
    triangular kernels' kernels/linalg.py _direct)."""
    if not ok:
        _missing(fname)()


def det(a):
    """The determinant of each 2x2 / 3x3 matrix (larger ones need cuSOLVER's LU)."""
    if tuple(a.shape)[-1] == 0:
        return full(tuple(a.shape)[:-2], 1, a.dtype)
    _require(_small(a), "det")
    f = _flat(a)
    out = empty((f.shape[0],), a.dtype)
    _launch(_det, f.shape[0], f, out)
    return reshape(out, tuple(a.shape)[:-2])


def slogdet(a):
    """(sign, log|det|) of each 2x2 / 3x3 matrix, from the direct determinant (larger ones need cuSOLVER's LU)."""
    if tuple(a.shape)[-1] == 0:
        return full(tuple(a.shape)[:-2], 1, a.dtype), full(tuple(a.shape)[:-2], 0, a.dtype)
    _require(_small(a), "slogdet")
    d = det(a)
    return run("sign", a.dtype, d), run("log", a.dtype, run("abs", a.dtype, d))


def inv(a):
    """(inverse, info) of each 2x2 / 3x3 matrix: info > 0 names the zero diagonal element of U (1-based), as
    getrf does."""
    _require(_small(a), "inv")
    f = _flat(a)
    out = empty(f.shape, a.dtype)
    info = empty((f.shape[0],), np.int32)
    _launch(_inv, f.shape[0], f, out, info, empty(f.shape, a.dtype))
    return reshape(out, tuple(a.shape)), reshape(info, tuple(a.shape)[:-2])


def small_solve(a, b):
    """(X, info) for batches of 2x2 / 3x3 systems (a (..., n, n), b (..., n, k), same batch): by the adjugate."""
    inverse, info = inv(a)
    fb = _flat(b)
    out = empty(fb.shape, b.dtype)
    _launch(_solve, fb.shape[0], _flat(inverse), fb, out)
    return reshape(out, tuple(b.shape)), info


def small_inv_grad(r, g):
    """-R^T g R^T for batches of 2x2 / 3x3 inverses R (g of R's shape)."""
    f = _flat(r)
    out = empty(f.shape, r.dtype)
    _launch(_inv_grad, f.shape[0], f, _flat(g), out, empty(f.shape, r.dtype))
    return reshape(out, tuple(r.shape))


def small_solve_grad(a, x, g):
    """(gA, gB) of X = A^-1 B for batches of 2x2 / 3x3 systems (a, x and g of one batch shape)."""
    f, fg = _flat(a), _flat(g)
    ga, gb = empty(f.shape, a.dtype), empty(fg.shape, a.dtype)
    _launch(_solve_grad, f.shape[0], f, _flat(x), fg, ga, gb, empty(f.shape, a.dtype))
    return reshape(ga, tuple(a.shape)), reshape(gb, tuple(g.shape))


def small_det_grad(a, g):
    """g times the cofactor matrix of each 2x2 / 3x3 matrix: the gradient of det, singular matrices included."""
    f = _flat(a)
    out = empty(f.shape, a.dtype)
    batch = tuple(a.shape)[:-2]
    gs = reshape(ascontiguous(g if tuple(g.shape) == batch else broadcast_to(g, batch)), (f.shape[0],))
    _launch(_det_grad, f.shape[0], f, gs, out)
    return reshape(out, tuple(a.shape))


# ---------------------------------------------------------------------- triangular: orders up to small_matrix.ORDER
def _col(a):
    """(..., m, n) as a new C-contiguous (B, n, m) array: each [b] is matrix b in column-major order."""
    shape = tuple(a.shape)
    return reshape(copy(swapaxes(a, -1, -2)), (_count(a), shape[-1], shape[-2]))


def _back(f, batch):
    """The inverse of ``_col``: (B, n, m) -> (*batch, m, n), a view whose last two dims are F-contiguous."""
    return swapaxes(reshape(f, tuple(batch) + tuple(f.shape)[1:]), -1, -2)


def cholesky(a, upper):
    """(L, info) (U with ``upper``) of each matrix: potrf's factor and info, the other triangle zero."""
    _require(_cpu._direct(a), "cholesky")
    f = _col(a)
    info = empty((f.shape[0],), np.int32)
    _launch(_cholesky, f.shape[0], f, info, upper)
    batch = tuple(a.shape)[:-2]
    return _back(f, batch), reshape(info, batch)


def _triangular_solves(a, b, fname, passes):
    """X from ``passes`` in-place triangular solves ((left, upper, trans, unit) each) of the right-hand sides b."""
    shape = tuple(b.shape)
    _require(_cpu._direct(a, shape[-1] if passes[0][0] else shape[-2]), fname)
    x, af = _col(b), _col(a)  # (a's copy: the kernels read it in LAPACK's layout)
    for left, upper, trans, unit in passes:
        _launch(_triangular, x.shape[0], af, x, left, upper, trans, unit)
    return _back(x, shape[:-2])


def solve_triangular(a, b, upper, left, unitriangular):
    """X with A X = B (X A = B where not ``left``), A triangular (no check: a zero diagonal gives inf)."""
    return _triangular_solves(a, b, "solve_triangular", ((left, upper, False, unitriangular),))


def cholesky_solve(l, b, upper):
    """X with L L^T X = B (U^T U X = B with ``upper``): two triangular solves on one copy of B."""
    return _triangular_solves(l, b, "cholesky_solve", ((True, upper, upper, False), (True, upper, not upper, False)))
