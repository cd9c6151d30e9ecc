"""Linear systems and inverses (torch.linalg): solve, inv, lu_solve, lstsq, pinv as entries on LAPACK kernels,
and what composes from them (the _ex forms, cholesky_solve, triangular_solve, tensorinv, tensorsolve,
matrix_power), with PyTorch's signatures, errors and gradients."""
import warnings

import numpy as np

from .._device import backend
from .._grad_mode import is_grad_enabled
from .._op import Op, dispatch
from .._trace_hooks import ValueUnavailable
from .._tensor import Tensor
from ._linalg_args import (broadcast_batch, check_float, check_matrix, check_same_dtype, check_square, default_rtol,
                           eye_like, needs_grad, raise_for_info, result_type, shared, tolerance)
from ._table import _arr, export, register
from .join import cat
from .decompositions import (_general, _np_lu_factor_ex, _floats, _spd, eigh, permutation, permute_rows, qr,
                             solve_triangular, svd, triangular_input)

_SINGULAR_INV = "The diagonal element %d is zero, the inversion could not be completed because the input matrix is singular."
_SINGULAR_SOLVE = "The solver failed because the input matrix is singular."

InvEx = result_type("linalg_inv_ex", ("inverse", "info"))
SolveEx = result_type("linalg_solve_ex", ("result", "info"))
Lstsq = result_type("linalg_lstsq", ("solution", "residuals", "rank", "singular_values"))
TriangularSolve = result_type("triangular_solve", ("solution", "cloned_coefficient"))


# ---------------------------------------------------------------------- inverse
def _inv_forward(xp, dt, a, check):
    out, info = xp.linalg.inv(a)
    if check:
        raise_for_info(check, info, _SINGULAR_INV)
    return out, info


def _inv_grad(g, s):
    R = s.result
    return -(R.mH @ (g[0] @ R.mH))


def small_kernels(a):
    """The device's kernels where the array ``a`` holds 2x2 / 3x3 real matrices (direct code for their gradients),
    else None."""
    k = backend(a).linalg
    return k if a.size and k._small(a) else None


def _inv_fused(g, s):
    R = s.result
    k = small_kernels(R._data)  # (2x2, 3x3 of real dtypes)
    return Tensor._wrap(k.small_inv_grad(R._data, g[0]._data)) if k else _inv_grad(g, s)


def inv_ex(A, *, check_errors=False):
    check_square(A, "linalg.inv_ex")
    return InvEx(*dispatch(INV, (A,), {"check": "linalg.inv_ex" if check_errors else None}))


def inv(A):
    check_square(A, "linalg.inv")
    return dispatch(INV, (A,), {"check": "linalg.inv"})[0]


# ---------------------------------------------------------------------- solve
def _solve_forward(xp, dt, a, b, check):
    if xp.linalg._small(a):  # 2x2, 3x3: the adjugate (the gradient needs no LU)
        x, info = xp.linalg.small_solve(a, b)
        lu = piv = xp.empty((0,), dt)
    else:
        x, lu, piv, info = xp.linalg.solve(a, b)
    if check:
        raise_for_info(check, info, _SINGULAR_SOLVE)
    return x, lu, piv, info


def _solve_grads(g, s):
    """(gA, gB) of X = A^-1 B: gB = A^-H g, gA = -gB X^H, computed once for both inputs (shared)."""
    gB = _solve(s.self.mH, g[0], None)[0]
    return (-gB @ s.result.mH if needs_grad(s, 0) else None), gB  # (the minus on the n x k factor)


def _solve_fused(g, s):
    """_solve_grads without a graph: one getrs with the forward's LU, or the direct code of 2x2 / 3x3 systems."""
    A, X, g0 = s.self._data, s.result._data, g[0]._data
    if A.dtype.kind == "c":  # (the forward's LU is of A itself there: the formula)
        return _solve_grads(g, s)
    k = small_kernels(A)
    if k:
        gA, gB = k.small_solve_grad(A, X, g0)
        return Tensor._wrap(gA), Tensor._wrap(gB)
    LU = s.LU._data
    xp = backend(LU)
    gB = xp.linalg.lu_solve(LU, s.pivots._data, g0, False)  # (LU: the factors of A^T)
    # (the backend's GEMM: on one BLAS thread where the product is small, as the formula's matmul runs)
    return (Tensor._wrap(xp.matmul(-gB, np.swapaxes(X, -1, -2))) if needs_grad(s, 0) else None), Tensor._wrap(gB)


def _solve(A, B, check):
    return dispatch(SOLVE, (A, B), {"check": check})


def _solve_args(A, B, left, fname):
    check_matrix(A, fname, "A")
    check_square(A, fname)
    check_float(B, fname)
    check_same_dtype(A, B, fname)
    vector = B.ndim == 1 or (B.ndim == A.ndim - 1 and tuple(B.shape) == tuple(A.shape[:-1]))
    if B.ndim < 1 or (not vector and B.ndim < 2):
        raise RuntimeError("%s: The input tensor B must have at least 2 dimensions." % fname)
    if vector:
        B = B.unsqueeze(-1)
    if not left:
        A, B = A.mT, B.mT
    if B.shape[-2] != A.shape[-1]:
        raise RuntimeError("%s: Incompatible shapes of A and B for the equation %s (%dx%d and %dx%d)"
                           % (fname, "AX = B" if left else "XA = B", A.shape[-2], A.shape[-1],
                              *((B.shape[-2], B.shape[-1]) if left else (B.shape[-1], B.shape[-2]))))
    A, B = broadcast_batch(A, B)
    return A, B, vector


def _solve_result(X, vector, left):
    X = X.mT if not left else X
    return X.squeeze(-1) if vector else X


def solve_ex(A, B, *, left=True, check_errors=False):
    A2, B2, vector = _solve_args(A, B, left, "linalg.solve_ex")
    X, _, _, info = _solve(A2, B2, "torch.linalg.solve_ex" if check_errors else None)
    return SolveEx(_solve_result(X, vector, left), info)


def solve(A, B, *, left=True):
    A2, B2, vector = _solve_args(A, B, left, "linalg.solve")
    return _solve_result(_solve(A2, B2, "torch.linalg.solve")[0], vector, left)


# ---------------------------------------------------------------------- lu_solve
def _lu_solve_forward(xp, dt, lu, piv, b, adjoint):
    return xp.linalg.lu_solve(lu, piv, b, adjoint)


def _lu_solve_grad_b(g, s):
    return lu_solve(s.LU, s.pivots, g, adjoint=not s.adjoint)


def _lu_solve_grad_lu(g, s):
    """Through A = P L U: gA = -A^-T g X^T (or -X (A^-1 g)^T for the adjoint system), then
    gLU = tril(P^T gA U^T, -1) + triu(L^T P^T gA)."""
    LU, X = s.LU, s.result
    gB = _lu_solve_grad_b(g, s)
    gA = -(X @ gB.mH) if s.adjoint else -(gB @ X.mH)
    PtgA = permute_rows(gA, permutation(s.pivots))
    L = LU.tril(-1) + eye_like(LU)
    U = LU.triu()
    return (PtgA @ U.mH).tril(-1) + (L.mH @ PtgA).triu()


def lu_solve(LU, pivots, B, *, left=True, adjoint=False):
    fname = "linalg.lu_solve"
    check_square(LU, fname, "LU")
    check_matrix(B, fname, "B")
    if not left:  # X A = B: A^H X^H = B^H
        return lu_solve(LU, pivots, B.mH, adjoint=not adjoint).mH
    if B.shape[-2] != LU.shape[-1]:
        raise RuntimeError("%s: Incompatible shapes of A and B for the equation AX = B (%dx%d and %dx%d)"
                           % (fname, LU.shape[-2], LU.shape[-1], B.shape[-2], B.shape[-1]))
    LU2, B2 = broadcast_batch(LU, B)
    piv = pivots.expand(tuple(LU2.shape[:-1])) if tuple(pivots.shape) != tuple(LU2.shape[:-1]) else pivots
    return dispatch(LU_SOLVE, (LU2, piv, B2), {"adjoint": bool(adjoint)})


# ---------------------------------------------------------------------- compositions
@export(method=True)
def inverse(input):
    return inv(input)


def _cholesky_solve_forward(xp, dt, b, l, upper):
    return xp.linalg.cholesky_solve(l, b, upper)


def _cholesky_solve_grads(g, s):
    """(gB, gL) of X = (L L^H)^-1 B (PyTorch's cholesky_solve_backward): gB = (L L^H)^-1 g, gL = -(gB X^H + X gB^H) L
    (-U (...) with upper); for few columns as two thin products (no n x n x n one): [gB, X] [X, gB]^H L, the factor
    read once and the n x n result written once. Computed once for both."""
    L, X = s.input2, s.result
    gB = cholesky_solve(g, L, s.upper)
    if not needs_grad(s, 1):
        return gB, None
    n, k = X.shape[-2:]
    if 4 * k < n:
        left, right = -cat([gB, X], -1), cat([X, gB], -1).mH  # (n x 2k, 2k x n; the minus on the thin factor)
        gL = (L @ left) @ right if s.upper else left @ (right @ L)
    else:
        common = gB @ X.mH
        common = common + common.mH
        gL = -L @ common if s.upper else -common @ L
    return gB, gL


@export(method=True)
def cholesky_solve(input, input2, upper=False):
    """X with (L L^H) X = B for the Cholesky factor L (input2) of A (U^H U with ``upper``): potrs, two triangular
    solves on the CPU."""
    B, L = input, input2
    check_float(B, "torch.cholesky_solve")
    if B.shape[-2] != L.shape[-1]:
        raise RuntimeError("Incompatible matrix sizes for cholesky_solve: each A matrix is %d by %d but each b matrix "
                           "is %d by %d" % (L.shape[-2], L.shape[-1], B.shape[-2], B.shape[-1]))
    B, L = broadcast_batch(B, L)
    return dispatch(CHOLESKY_SOLVE, (B, L), {"upper": bool(upper)})


@export(method=True)
def triangular_solve(input, A, upper=True, transpose=False, unitriangular=False):
    warnings.warn("torch.triangular_solve is deprecated in favor of torch.linalg.solve_triangularand will be removed "
                  "in a future PyTorch release.", UserWarning, stacklevel=2)
    M = A.mT if transpose else A  # (PyTorch's transpose: not conjugated)
    X = solve_triangular(M, input, upper=upper != transpose, unitriangular=unitriangular)
    return TriangularSolve(X, A.clone())


def matrix_power(A, n):
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise TypeError("linalg_matrix_power(): argument 'n' (position 2) must be int, not %s" % type(n).__name__)
    check_matrix(A, "linalg.matrix_power")
    if A.shape[-1] != A.shape[-2]:
        raise RuntimeError("linalg.matrix_power: A must be batches of square matrices, but they are %d by %d matrices"
                           % (A.shape[-2], A.shape[-1]))
    if n == 0:
        return eye_like(A).expand(A.shape).clone()
    if n < 0:
        A, n = inv(A), -n
    result, base = None, A
    while n:  # binary powering
        if n & 1:
            result = base if result is None else result @ base
        n >>= 1
        if n:
            base = base @ base
    return result


def tensorinv(A, ind=2):
    if ind <= 0:
        raise RuntimeError("Expected a strictly positive integer for 'ind', but got %d" % ind)
    out_shape = tuple(A.shape[ind:]) + tuple(A.shape[:ind])
    rows, cols = int(np.prod(A.shape[:ind])), int(np.prod(A.shape[ind:]))
    if rows != cols:
        raise RuntimeError("Expected self to satisfy the requirement prod(self.shape[ind:]) == prod(self.shape[:ind]), "
                           "but got %d != %d" % (cols, rows))
    return dispatch(INV, (A.reshape(rows, cols),), {"check": "inv"})[0].reshape(out_shape)


def tensorsolve(A, B, dims=None):
    if dims is not None:
        dims = [d % A.ndim for d in dims]
        A = A.permute([d for d in range(A.ndim) if d not in dims] + dims)
    rest = tuple(A.shape[B.ndim:])
    rows, cols = int(np.prod(A.shape[:B.ndim])), int(np.prod(rest))
    if rows != cols:
        raise RuntimeError("Expected self to satisfy the requirement prod(self.shape[other.ndim:]) == "
                           "prod(self.shape[:other.ndim]), but got %d != %d" % (cols, rows))
    return solve(A.reshape(rows, cols), B.reshape(rows)).reshape(rest)


# ---------------------------------------------------------------------- pinv
def _pinv_forward(xp, dt, a, atol, rtol):
    u, s, vh = xp.linalg.svd(a, False, True)
    smax = s.max(-1, keepdims=True, initial=0.0)
    tol = np.maximum(atol, rtol * smax)
    keep = s > tol
    inv_s = np.where(keep, 1 / np.where(keep, s, 1), 0).astype(dt)
    return np.asarray(np.swapaxes(vh, -1, -2).conj() @ (inv_s[..., :, None] * np.swapaxes(u, -1, -2).conj()), dt)


def pinv_grad(g, P, A):
    """PyTorch's pinv_backward, over matmuls: finite where the singular values repeat."""
    m, n = A.shape[-2:]
    Pt, gt = P.mH, g.mH
    if m <= n:
        K = gt @ P
        KPt = K @ Pt
        return -(P @ K).mH + KPt - (A @ P) @ KPt + (Pt @ P) @ (gt - K @ A)
    K = P @ gt
    PtK = Pt @ K
    return -(K @ P).mH + ((gt - A @ K) @ P) @ Pt + PtK - (PtK @ P) @ A


def _pinv_grad(g, s):
    return pinv_grad(g, s.result, s.self)


def pinv(A, *, atol=None, rtol=None, hermitian=False, rcond=None):
    check_matrix(A, "linalg.pinv")
    check_float(A, "linalg.pinv")
    if rcond is not None:
        rtol = rcond
    if hermitian or isinstance(atol, Tensor) or isinstance(rtol, Tensor):
        return _pinv_by_parts(A, atol, rtol, hermitian)
    if rtol is None:
        rtol = default_rtol(A) if atol is None or atol <= 0 else 0.0
    return dispatch(PINV, (A,), {"atol": float(atol or 0.0), "rtol": float(rtol)})


def _pinv_by_parts(A, atol, rtol, hermitian):
    """pinv of a Hermitian matrix (its lower triangle, through eigh) or with tolerances given as tensors (one
    per matrix of the batch, broadcast), composed of the decomposition's entries as PyTorch composes it."""
    if hermitian:
        L, Q = eigh(A)
        S, U, Vh = L, Q, Q.mH
        mag = L.abs()
    else:
        U, S, Vh = svd(A, full_matrices=False)
        mag = S
    smax = mag.amax(-1, keepdim=True) if mag.shape[-1] else mag.sum(-1, keepdim=True)
    keep = mag > tolerance(A, smax, atol, rtol)
    inv = (1.0 / S.masked_fill(keep.logical_not(), 1.0)) * keep.to(S.dtype)
    return (Vh.mH * inv.unsqueeze(-2)) @ U.mH


@export(method=True)
def pinverse(input, rcond=1e-15):
    return pinv(input, rtol=rcond)


# ---------------------------------------------------------------------- lstsq
_DRIVERS = ("gels", "gelsy", "gelsd", "gelss")


def _lstsq_forward(xp, dt, a, b, rcond, driver):
    x, rank, sv = xp.linalg.lstsq(a, b, rcond, driver)
    if driver == "gels":
        rank = np.empty((0,), np.int64)
    if driver not in ("gelsd", "gelss"):
        sv = np.empty((0,), dt)
    return x, rank, sv


def _lstsq_grads(g, s):
    """(gA, gB) of X = A^+ B, computed once for both inputs (shared). A tall or square A of full rank: through
    its R (A = Q R): Z = R^-1 R^-H gX = (A^H A)^-1 gX, gB = A Z (= Q R^-H gX) and gA = -gB X^H + (B - A X) Z^H;
    Q itself is not needed (mode 'r') unless a graph of the backward is. Otherwise through pinv's gradient, as
    PyTorch computes it."""
    A, B, X = s.self, s.other, s.solution
    gX = g[0]
    m, n = A.shape[-2:]
    rank = s.rank
    full = m >= n and (rank.numel() == 0 or bool((rank == n).all()))
    if full:
        R = qr(A, mode="reduced" if is_grad_enabled() else "r").R
        Z = solve_triangular(R, solve_triangular(R.mH, gX, upper=False), upper=True)
        gB = A @ Z
        gA = -gB @ X.mH
        return (gA if m == n else gA + (B - A @ X) @ Z.mH), gB  # (square: no residual, A X = B)
    P = pinv(A)
    return pinv_grad(gX @ B.mH, P, A), P.mH @ gX


def lstsq(A, B, rcond=None, *, driver=None):
    fname = "torch.linalg.lstsq"
    if A.ndim < 2:
        raise RuntimeError("%s: input must have at least 2 dimensions." % fname)
    check_float(A, "linalg.lstsq")
    if driver is None:
        driver = "gelsy"
    if driver not in _DRIVERS:
        raise RuntimeError("%s: parameter `driver` should be one of (gels, gelsy, gelsd, gelss)" % fname)
    vector = B.ndim == 1 or (B.ndim == A.ndim - 1 and tuple(B.shape) == tuple(A.shape[:-1]))
    B2 = B.unsqueeze(-1) if vector else B
    if B2.shape[-2] != A.shape[-2]:
        raise RuntimeError("%s: input.size(-2) should match other.size(-2)" % fname)
    check_same_dtype(A, B2, "torch.linalg.lstsq", ("input", "other"))
    A2, B2 = broadcast_batch(A, B2)
    m, n = A.shape[-2:]
    if rcond is None:
        rcond = float(np.finfo(A.dtype.np).eps * max(m, n))
    X, rank, sv = dispatch(LSTSQ, (A2, B2), {"rcond": float(rcond), "driver": driver})
    residuals = Tensor._wrap(np.empty((0,), A.dtype.np))
    try:
        full = driver == "gels" or bool((rank == min(m, n)).all())
    except ValueUnavailable:  # (inside vmap: the residuals of every sample, full rank or not)
        full = True
    if m > n and driver != "gelsy" and full:  # the squared residual norms, per column
        residuals = ((A2 @ X - B2).abs() ** 2).sum(-2)
        residuals = residuals.squeeze(-1) if vector else residuals
    return Lstsq(X.squeeze(-1) if vector else X, residuals, rank, sv)


# ---------------------------------------------------------------------- samples and references
def _inv_samples(rng, dtype):
    return [((_general(rng, s, dtype),), {}) for s in ((2, 2), (3, 3), (4, 3, 3), (5, 5), (0, 0))]


def _np_inv_ex(a, check_errors=False):
    return np.linalg.inv(a) if a.size else a.copy(), np.zeros(a.shape[:-2], np.int32)


def _solve_samples(rng, dtype):
    B = lambda s: _arr(rng, s, -1, 1, dtype)  # noqa: E731
    return [((_general(rng, (3, 3), dtype), B((3,))), {}), ((_general(rng, (2, 4, 4), dtype), B((4, 2))), {}),
            ((_general(rng, (2, 2, 2), dtype), B((3, 1, 2, 1))), {}), ((_general(rng, (3, 3), dtype), B((2, 3))),
                                                                       {"left": False}),
            ((_general(rng, (5, 5), dtype), B((5, 2))), {})]


def _np_solve_ex(a, b, left=True, check_errors=False):
    vector = b.ndim == 1 or (b.ndim == a.ndim - 1 and b.shape == a.shape[:-1])
    if not left:
        x = np.swapaxes(np.linalg.solve(np.swapaxes(a, -1, -2), np.swapaxes(b, -1, -2)), -1, -2)
    else:
        bb = b[..., None] if vector else b
        batch = np.broadcast_shapes(a.shape[:-2], bb.shape[:-2])
        x = np.linalg.solve(np.broadcast_to(a, batch + a.shape[-2:]), np.broadcast_to(bb, batch + bb.shape[-2:]))
        x = x[..., 0] if vector else x
    return x, np.zeros(np.broadcast_shapes(a.shape[:-2], (b[..., None] if vector else b).shape[:-2]), np.int32)


def _lu_solve_samples(rng, dtype):
    out = []
    for shape, bs, kw in (((3, 3), (3, 2), {}), ((2, 4, 4), (4, 1), {"adjoint": True})):
        a = _general(rng, shape, np.complex128 if np.dtype(dtype).kind == "c" else np.float64)
        lu_, piv, _ = _np_lu_factor_ex(a)
        out.append(((np.asarray(lu_, dtype), piv, _arr(rng, bs, -1, 1, dtype)), kw))
    return out


def _np_lu_solve(lu_, piv, b, adjoint=False):
    import scipy.linalg as sl
    flat, fp = lu_.reshape((-1,) + lu_.shape[-2:]), piv.reshape(-1, piv.shape[-1]) - 1
    fb = np.broadcast_to(b, lu_.shape[:-2] + b.shape[-2:]).reshape((-1,) + b.shape[-2:])
    trans = (2 if b.dtype.kind == "c" else 1) if adjoint else 0  # (A^H)
    return np.asarray([sl.lu_solve((m, p), c, trans=trans) for m, p, c in zip(flat, fp, fb)],
                      b.dtype).reshape(lu_.shape[:-2] + b.shape[-2:])


def _cholesky_solve_samples(rng, dtype):
    B = lambda s: _arr(rng, s, -1, 1, dtype)  # noqa: E731
    L = lambda s: np.asarray(np.linalg.cholesky(_spd(rng, s, dtype)), dtype)  # noqa: E731
    U = lambda s: np.swapaxes(L(s), -1, -2).conj().copy()  # noqa: E731
    return [((B((3, 2)), L((3, 3))), {}), ((B((2, 4, 1)), L((4, 4))), {}),
            ((B((9, 1)), L((2, 9, 9))), {}), ((B((3, 2)), U((3, 3))), {"upper": True}),
            ((B((9, 1)), U((9, 9))), {"upper": True})]


def _np_cholesky_solve(b, l, upper=False):
    l = np.swapaxes(l, -1, -2).conj() if upper else l
    a = np.tril(l) @ np.swapaxes(np.tril(l), -1, -2).conj()
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    return np.linalg.solve(np.broadcast_to(a, batch + a.shape[-2:]), np.broadcast_to(b, batch + b.shape[-2:]))


def _pinv_samples(rng, dtype):
    return [((_general(rng, s, dtype),), {}) for s in ((3, 3), (4, 2), (2, 2, 4))]


def _np_pinv(a, **kw):
    return np.linalg.pinv(a)


def _lstsq_samples(rng, dtype):
    B = lambda s: _arr(rng, s, -1, 1, dtype)  # noqa: E731
    return [((_general(rng, (5, 3), dtype), B((5, 2))), {}), ((_general(rng, (4, 4), dtype), B((4, 1))), {}),
            ((_general(rng, (2, 5, 3), dtype), B((5, 2))), {"driver": "gelsd"}),
            ((_general(rng, (5, 3), dtype), B((5, 2))), {"driver": "gels"}),
            ((_general(rng, (3, 5), dtype), B((3, 2))), {"driver": "gelss"})]


def _np_lstsq(a, b, rcond=None, driver=None):
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    fa = np.broadcast_to(a, batch + a.shape[-2:]).reshape((-1,) + a.shape[-2:])
    fb = np.broadcast_to(b, batch + b.shape[-2:]).reshape((-1,) + b.shape[-2:])
    return np.asarray([np.linalg.lstsq(x, y, rcond=None)[0] for x, y in zip(fa, fb)],
                      a.dtype).reshape(batch + (a.shape[-1], b.shape[-1]))


def _np_lstsq_solution(a, b, rcond=None, driver=None):
    return (_np_lstsq(a, b, rcond, driver),)


# ---------------------------------------------------------------------- the entries
INV = register(Op("linalg_inv", _inv_forward, reduced_precision="refused", complex=True, vjp=[_inv_grad], fused=[_inv_fused], n_outputs=2, outputs=("result", "info"),
                  node="LinalgInvExBackward0", call=inv_ex, samples=_floats(_inv_samples), ref=_np_inv_ex))
SOLVE = register(Op("linalg_solve", _solve_forward, reduced_precision="refused", complex=True, inputs=("self", "other"),
                    vjp=[lambda g, s: shared(g, s, 0, _solve_grads)[0], lambda g, s: shared(g, s, 1, _solve_grads)[1]],
                    fused=[lambda g, s: shared(g, s, 0, _solve_fused)[0], lambda g, s: shared(g, s, 1, _solve_fused)[1]],
                    n_outputs=4, outputs=("result", "LU", "pivots", "info"), workspace=("LU", "pivots"),
                    node="LinalgSolveExBackward0",
                    call=solve_ex, samples=_floats(_solve_samples), ref=_np_solve_ex))
LU_SOLVE = register(Op("linalg_lu_solve", _lu_solve_forward, reduced_precision="refused", complex=True, inputs=("LU", "pivots", "other"),
                       vjp=[_lu_solve_grad_lu, None, _lu_solve_grad_b], node="LinalgLuSolveBackward0", call=lu_solve,
                       keep_inputs=(1,), samples=_floats(_lu_solve_samples), ref=_np_lu_solve))
CHOLESKY_SOLVE = register(Op("cholesky_solve", _cholesky_solve_forward, reduced_precision="refused", complex=True,
                             inputs=("self", "input2"),
                             vjp=[lambda g, s: shared(g, s, 0, _cholesky_solve_grads)[0],
                                  lambda g, s: shared(g, s, 1, _cholesky_solve_grads)[1]],
                             node="CholeskySolveBackward0", call=triangular_input(cholesky_solve),
                             samples=_floats(_cholesky_solve_samples), ref=_np_cholesky_solve, api=()))
PINV = register(Op("linalg_pinv", _pinv_forward, reduced_precision="refused", complex=True, vjp=[_pinv_grad], node="LinalgPinvBackward0", call=pinv,
                   samples=_floats(_pinv_samples), ref=_np_pinv))
LSTSQ = register(Op("linalg_lstsq", _lstsq_forward, reduced_precision="refused", complex=True, inputs=("self", "other"),
                    vjp=[lambda g, s: shared(g, s, 0, _lstsq_grads)[0], lambda g, s: shared(g, s, 1, _lstsq_grads)[1]], n_outputs=3,
                    outputs=("solution", "rank", "singular_values"), node="LinalgLstsqBackward0",
                    call=lambda A, B, **kw: lstsq(A, B, **kw)[:1], samples=_floats(_lstsq_samples),
                    ref=_np_lstsq_solution))
