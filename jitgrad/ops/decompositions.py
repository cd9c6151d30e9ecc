"""Matrix decompositions (torch.linalg): Cholesky, LU, QR and its Householder form, the symmetric eigenproblem
and the SVD, with PyTorch's names, named-tuple results, errors and gradients. Each VJP is PyTorch's formula
written over table ops (triangular solves, matmuls), so double backward follows; the kernels are LAPACK's
(kernels/linalg.py)."""
import numpy as np

from .._device import backend
from .._factories import arange
from .._grad_mode import is_grad_enabled
from .._op import Op, dispatch
from .._tensor import Tensor
from ._linalg_args import (LinAlgError, broadcast_batch, check_float, check_matrix, check_same_dtype, check_square,
                           diag_embed, eye_like, is_zero_grad, raise_for_info, real_diag, result_type)
from ._table import _arr, export, register
from .indexing import gather
from .join import cat, stack
from .unary import _c

_NOT_PD = ("The factorization could not be completed because the input is not positive-definite (the leading minor "
           "of order %d is not positive-definite).")

CholeskyEx = result_type("linalg_cholesky_ex", ("L", "info"))
LUFactor = result_type("linalg_lu_factor", ("LU", "pivots"))
LUFactorEx = result_type("linalg_lu_factor_ex", ("LU", "pivots", "info"))
LU = result_type("linalg_lu", ("P", "L", "U"))
LUUnpack = result_type("lu_unpack", ("P", "L", "U"))
QR = result_type("linalg_qr", ("Q", "R"))
Geqrf = result_type("geqrf", ("a", "tau"))
Eigh = result_type("linalg_eigh", ("eigenvalues", "eigenvectors"))
SVD = result_type("linalg_svd", ("U", "S", "Vh"))
SVDOld = result_type("svd", ("U", "S", "V"))


def _wants_grad(*tensors):
    """Whether a derivative will be taken: a gradient (backward) or a tangent (forward mode), which need the
    vectors of eigvalsh and svdvals."""
    return any(isinstance(t, Tensor) and (t.requires_grad and is_grad_enabled() or t._fw_grad is not None)
               for t in tensors)


# ---------------------------------------------------------------------- Cholesky
def _cholesky_forward(xp, dt, a, upper, check):
    L, info = xp.linalg.cholesky(a, upper)
    if check:
        raise_for_info(check, info, _NOT_PD)
    return L, info


def _cholesky_grad(g, s):
    """gA = L^-H Phi L^-1, Phi the Hermitian matrix of tril(L^H gL) with its diagonal halved (PyTorch's)."""
    L, gL = s.result, g[0]
    if s.upper:
        L, gL = L.mH, gL.mH
    phi = (L.mH @ gL).tril()
    phi = (phi + phi.tril(-1).mH) * 0.5
    if phi.dtype.is_complex:  # (its diagonal's real part only: Hermitian)
        phi = phi - diag_embed(phi.diagonal(0, -2, -1).imag) * 1j
    gA = solve_triangular(L.mH, phi, upper=True)
    return solve_triangular(L, gA, upper=False, left=False)


def _cholesky_fused(g, s):
    """The formula without a graph, on the CPU in one buffer (kernels.linalg.cholesky_grad)."""
    L = s.result._data
    k = backend(L).linalg
    real = L.dtype.kind != "c"  # (complex: the formula)
    return Tensor._wrap(k.cholesky_grad(L, g[0]._data, s.upper)) if k.name == "cpu" and real else _cholesky_grad(g, s)


def cholesky_ex(A, *, upper=False, check_errors=False):
    check_square(A, "linalg.cholesky_ex" if check_errors else "linalg.cholesky")
    L, info = dispatch(CHOLESKY, (A,), {"upper": bool(upper), "check": "linalg.cholesky_ex" if check_errors else None})
    return CholeskyEx(L, info)


def cholesky(A, *, upper=False):
    check_square(A, "linalg.cholesky")
    return dispatch(CHOLESKY, (A,), {"upper": bool(upper), "check": "linalg.cholesky"})[0]


@export(method=True)
def cholesky_inverse(input, upper=False):
    """(L L^H)^-1 from its Cholesky factor: two triangular solves of the identity."""
    check_square(input, "cholesky_inverse")
    L = input.mH if upper else input
    Linv = solve_triangular(L, eye_like(L).expand(L.shape), upper=False)
    return Linv.mH @ Linv


# ---------------------------------------------------------------------- triangular solves
def _triangular_forward(xp, dt, a, b, upper, left, unitriangular):
    return xp.linalg.solve_triangular(a, b, upper, left, unitriangular)


def _triangular_grad_b(g, s):
    return solve_triangular(s.self.mH, g, upper=not s.upper, left=s.left, unitriangular=s.unitriangular)


def _triangular_grad_a(g, s):
    gB = _triangular_grad_b(g, s)
    X = s.result
    gA = -(gB @ X.mH) if s.left else -(X.mH @ gB)
    return gA.triu(int(s.unitriangular)) if s.upper else gA.tril(-int(s.unitriangular))


def solve_triangular(A, B, *, upper, left=True, unitriangular=False):
    fname = "linalg.solve_triangular"
    check_matrix(A, fname, "A")
    check_matrix(B, fname, "B")
    check_square(A, fname)
    check_same_dtype(A, B, fname)
    if (A.shape[-1] != B.shape[-2]) if left else (A.shape[-1] != B.shape[-1]):
        raise RuntimeError("%s: Incompatible shapes of A and B for the equation %s (%dx%d and %dx%d)"
                           % (fname, "AX = B" if left else "XA = B", A.shape[-2], A.shape[-1], B.shape[-2],
                              B.shape[-1]))
    A, B = broadcast_batch(A, B)
    return dispatch(SOLVE_TRIANGULAR, (A, B), {"upper": bool(upper), "left": bool(left),
                                               "unitriangular": bool(unitriangular)})


# ---------------------------------------------------------------------- LU
def _lu_forward(xp, dt, a, check):
    lu, piv, info = xp.linalg.lu_factor(a)
    if check:
        raise_for_info(check, info, _LU_SINGULAR)
    return lu, piv, info


class _LUSingular(str):
    """The message of a singular lu_factor (the pivot named twice: U[k,k])."""

    def __mod__(self, k):
        return str.__mod__(self, (k, k))


_LU_SINGULAR = _LUSingular("U[%d,%d] is zero and using it on lu_solve would result in a division by zero. If you still "
                           "want to perform the factorization, consider calling linalg.lu(A, pivot) or "
                           "linalg.lu_factor_ex(A, pivot)")


def _permutation_forward(xp, dt, pivots, m):
    """The row order perm (..., m) with P^T A = A[perm], from LAPACK's 1-based pivots (row swaps in turn)."""
    piv = np.asarray(xp.to_host(pivots), np.int64) - 1
    k = piv.shape[-1]
    flat = piv.reshape(-1, k)
    perm = np.tile(np.arange(m), (flat.shape[0], 1))
    rows = np.arange(flat.shape[0])
    for i in range(k):
        j = flat[:, i]
        a, b = perm[rows, i].copy(), perm[rows, j].copy()
        perm[rows, i], perm[rows, j] = b, a
    return xp.from_host(perm.reshape(piv.shape[:-1] + (m,)))


def permutation(pivots, m=None):
    """An entry of its own, so that jitgrad.compile records it (the pivots change from call to call)."""
    return dispatch(PERMUTATION, (pivots,), {"m": pivots.shape[-1] if m is None else m})


def permute_rows(M, perm, inverse=False):
    """P^T M (M's rows in ``perm`` order), or P M with ``inverse``; perm an int64 tensor (..., m)."""
    if inverse:
        perm = perm.argsort(-1)
    idx = perm.unsqueeze(-1).expand(tuple(M.shape[:-1]) + (M.shape[-1],))
    return gather(M, -2, idx)


def _lu_factor_grad(g, s):
    """A = P L U (square): gA = P L^-H (tril(L^H gL, -1) + triu(gU U^H)) U^-H."""
    LU, gLU = s.result, g[0]
    m, n = LU.shape[-2:]
    if m != n:
        raise NotImplementedError("jitgrad: the gradient of lu_factor is implemented for square matrices only")
    L = LU.tril(-1) + eye_like(LU)
    U = LU.triu()
    phi = (L.mH @ gLU.tril(-1)).tril(-1) + (gLU.triu() @ U.mH).triu()
    gA = solve_triangular(L.mH, phi, upper=True, unitriangular=True)
    gA = solve_triangular(U.mH, gA, upper=False, left=False)
    return permute_rows(gA, permutation(s.pivots), inverse=True)


def lu_factor_ex(A, *, pivot=True, check_errors=False):
    _check_lu(A, "linalg.lu_factor_ex", pivot)
    LUm, piv, info = dispatch(LU_FACTOR, (A,), {"check": "torch.linalg.lu_factor_ex" if check_errors else None})
    return LUFactorEx(LUm, piv, info)


def lu_factor(A, *, pivot=True):
    _check_lu(A, "linalg.lu_factor", pivot)
    LUm, piv, _ = dispatch(LU_FACTOR, (A,), {"check": "torch.linalg.lu_factor"})
    return LUFactor(LUm, piv)


def _check_lu(A, fname, pivot):
    check_matrix(A, fname)
    check_float(A, fname)
    if not pivot:
        raise RuntimeError("%s: LU without pivoting is not implemented on the CPU" % fname)


@export(method=False)
def lu_unpack(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True):
    """(P, L, U) from a packed LU (L unit lower m x k, U upper k x n, k = min(m, n)); L and U are
    tril/triu of the packed factors, so their gradients reach it."""
    m, n = LU_data.shape[-2:]
    k = min(m, n)
    P = L = U = Tensor._wrap(np.empty((0,), LU_data.dtype.np))
    if unpack_data:
        L = LU_data[..., :, :k].tril(-1) + eye_like(LU_data, m)[:, :k]
        U = LU_data[..., :k, :].triu()
    if unpack_pivots:
        full = permutation(LU_pivots, m)
        P = (full.unsqueeze(-1) == arange(m, device=LU_data.device)).to(LU_data.dtype).mT
    return LUUnpack(P, L, U)


def lu(A, *, pivot=True):
    _check_lu(A, "linalg.lu", pivot)
    LUm, piv, _ = dispatch(LU_FACTOR, (A,), {"check": None})
    P, L, U = lu_unpack(LUm, piv)
    return LU(P, L, U)


# ---------------------------------------------------------------------- QR
def _geqrf_forward(xp, dt, a):
    return xp.linalg.geqrf(a)


def _householder_forward(xp, dt, a, tau):
    return xp.linalg.householder_product(a, tau)


_MODES = ("reduced", "complete", "r")


def qr(A, mode="reduced"):
    fname = "linalg.qr"
    check_matrix(A, fname)
    check_float(A, fname)
    if mode not in _MODES:
        raise RuntimeError("qr received unrecognized mode '%s' but expected one of 'reduced' (default), 'r', or "
                           "'complete'" % mode)
    return QR(*dispatch(QR_OP, (A,), {"mode": mode}))


def _qr_forward(xp, dt, a, mode):
    q, r = xp.linalg.qr(a, mode)
    return (q if q is not None else np.empty((0,), dt)), r


def _qr_grad(g, s):
    gQ, gR = g
    Q, R = s.Q, s.R
    if s.mode == "r":
        raise RuntimeError("The derivative of linalg.qr depends on Q, which is not computed when mode='r'. Please use "
                           "linalg.qr(A, mode='reduced') if you are going to differentiate through linalg.qr.")
    m, n = Q.shape[-2], R.shape[-1]
    if s.mode == "complete" and m > n:
        raise RuntimeError("The QR decomposition is not differentiable when mode='complete' and nrows > ncols.")
    if m >= n:
        return _qr_square_grad(gQ, gR, Q, R)
    U, V = R[..., :m], R[..., m:]
    gU, gV = gR[..., :m], gR[..., m:]
    gX = _qr_square_grad(gQ + (Q @ V) @ gV.mH, gU, Q, U)
    return cat([gX, Q @ gV], -1)


def _qr_square_grad(gQ, gR, Q, R):
    """m >= n: gA = (gQ + Q copyltu(M)) R^-H, M = R gR^H - gQ^H Q (copyltu: the Hermitian matrix of M's lower
    triangle, its diagonal's real part)."""
    M = R @ gR.mH - gQ.mH @ Q
    low = M.tril(-1)
    sym = low + low.mH + real_diag(M)
    return solve_triangular(R.mH, gQ + Q @ sym, upper=False, left=False)


@export(method=True)
def geqrf(input):
    if input.ndim < 2:
        raise RuntimeError("torch.geqrf: input must have at least 2 dimensions.")
    check_float(input, "torch.geqrf")
    if input.dtype.is_complex and input.requires_grad and is_grad_enabled():  # (PyTorch records no complex geqrf)
        raise RuntimeError("geqrf does not support automatic differentiation for outputs with complex dtype.")
    return Geqrf(*dispatch(GEQRF, (input,)))


def householder_product(A, tau):
    fname = "torch.linalg.householder_product"
    if A.ndim < 2:
        raise RuntimeError("%s: input must have at least 2 dimensions." % fname)
    if A.shape[-2] < A.shape[-1]:
        raise RuntimeError("%s: input.shape[-2] must be greater than or equal to input.shape[-1]" % fname)
    if A.shape[-1] < tau.shape[-1]:
        raise RuntimeError("%s: input.shape[-1] must be greater than or equal to tau.shape[-1]" % fname)
    check_float(A, fname)
    return dispatch(HOUSEHOLDER, (A, tau))


@export(method=True)
def orgqr(input, tau):
    return householder_product(input, tau)


def _reflectors(A, k):
    """The Householder vectors v_i (1 at i, zeros above, A's column i below) as table ops."""
    batch = tuple(A.shape[:-2])
    return [cat([A.new_zeros(batch + (i,)), A.new_ones(batch + (1,)), A[..., i + 1:, i]], -1) for i in range(k)]


def _householder_grad(which):
    """Reverse mode through Q = H_0 ... H_{k-1} I[:, :n], H_i = I - tau_i v_i v_i^H, applied to I right to left
    (PyTorch's householder_product_backward differentiates the same product): the states are recomputed, then
    each reflector passes gQ on as H_i^H gQ and takes its share in tau_i and in v_i (A's column i below row i)."""
    def formula(g, s):
        A, tau = s.self, s.tau
        m, n = A.shape[-2:]
        k = tau.shape[-1]
        batch = tuple(A.shape[:-2])
        vs = _reflectors(A, k)
        Q = eye_like(A, m)[:, :n].expand(batch + (m, n))
        states = []  # the state each reflector is applied to
        for i in reversed(range(k)):
            states.append(Q)
            Q = Q - tau[..., i, None, None] * vs[i].unsqueeze(-1) * (_c(vs[i].unsqueeze(-2)) @ Q)
        states.reverse()
        columns, gtau = [], []
        for i in range(k):
            v, t, Qi = vs[i], tau[..., i, None, None], states[i]
            vh = _c(v.unsqueeze(-2))
            vg = vh @ g  # v^H gQ
            vQ = vh @ Qi  # v^H Q_i
            gtau.append(-(vg * _c(vQ)).sum((-2, -1)))
            t1 = t.squeeze(-1)
            gv = -(_c(t1) * (g @ vQ.mH).squeeze(-1) + t1 * (Qi @ vg.mH).squeeze(-1))
            columns.append(cat([A.new_zeros(batch + (i + 1,)), gv[..., i + 1:]], -1))
            g = g - _c(t) * v.unsqueeze(-1) * vg
        if which == 1:
            return stack(gtau, -1)
        columns += [A.new_zeros(batch + (m,))] * (n - k)
        return stack(columns, -1)
    return formula


@export(method=True)
def ormqr(input, input2, input3, left=True, transpose=False):
    """op(Q) C or C op(Q), Q (m x m) the product of the reflectors in (input, input2): householder_product of
    the reflectors padded to m columns, then a matmul, so the gradients reach all three."""
    m = input.shape[-2]
    if input3.shape[-2 if left else -1] != m:
        raise RuntimeError("torch.ormqr: other.shape[%d] must be equal to input.shape[-2]" % (-2 if left else -1))
    check_float(input, "torch.ormqr")
    a = input[..., :min(m, input.shape[-1])]
    if a.shape[-1] < m:
        a = cat([a, a.new_zeros(tuple(a.shape[:-1]) + (m - a.shape[-1],))], -1)
    Q = householder_product(a, input2)
    Q = Q.mH if transpose else Q
    return Q @ input3 if left else input3 @ Q


# ---------------------------------------------------------------------- symmetric eigenproblem
def _eigh_forward(xp, dt, a, lower, vectors):
    w, v = xp.linalg.eigh(a, lower, vectors)
    return w, (v if vectors else np.empty((0,), dt))


def _eigvalsh_forward(xp, dt, a, lower, vectors):
    """As eigh's; the eigenvectors, which only the gradient reads, may be those of A^T's other triangle (the same
    matrix): a row-major input is not transposed for LAPACK."""
    w, v = xp.linalg.eigh(a, lower, vectors, True)
    return w, (v if vectors else np.empty((0,), dt))


def eigh_grad(gL, gV, L, V):
    """gA = V (diag(gL) + skew(V^H gV) / E) V^H, E_ij = L_j - L_i (PyTorch's; inf/nan at repeated
    eigenvalues where the loss depends on the eigenvectors, as PyTorch's). A complex loss that depends on the
    eigenvectors' phases raises PyTorch's error."""
    if is_zero_grad(gV):
        return V @ (gL.unsqueeze(-1) * V.mH)
    VhgV = V.mH @ gV
    if VhgV.dtype.is_complex:
        check_gauge(VhgV.diagonal(0, -2, -1).imag, "linalg_eigh_backward: The eigenvectors in the complex case are "
                    "specified up to multiplication by e^{i phi}. The specified loss function depends on this quantity, "
                    "so it is ill-defined.")
    VhgV = (VhgV - VhgV.mH) * 0.5
    if VhgV.dtype.is_complex:  # (the diagonal is gL's: drop the phases' imaginary part)
        VhgV = VhgV - diag_embed(VhgV.diagonal(0, -2, -1))
    E = L.unsqueeze(-2) - L.unsqueeze(-1) + eye_like(L, L.shape[-1])
    gA = VhgV / E + diag_embed(gL)
    return V @ (gA @ V.mH)


# a complex loss must not depend on the phases of eigenvectors or singular vectors: PyTorch's tolerance
_GAUGE_TOL = 1e-2


def check_gauge(imag, message, other=None):
    """PyTorch's check that ``imag`` (the imaginary diagonal of V^H gV) is zero (or -``other``'s, for the SVD)."""
    a = imag.detach().numpy()
    b = -other.detach().numpy() if other is not None else np.zeros_like(a)
    if not np.allclose(a, b, rtol=_GAUGE_TOL, atol=_GAUGE_TOL):
        raise RuntimeError(message)


def _eigh_grad(g, s):
    return eigh_grad(g[0], g[1], s.eigenvalues, s.eigenvectors)


def _eigh_fused(g, s):
    """The formula without a graph on the CPU for real matrices (kernels.linalg): V diag(gL) V^T by two symmetric
    rank-k updates where only the eigenvalues have a gradient, else V M V^T by a triangular product and a symmetric
    rank-2k update."""
    return _eigh_vjp(g[0], g[1], s.eigenvalues, s.eigenvectors, lambda: _eigh_grad(g, s))


def _eigh_vjp(gL, gV, L, V, formula):
    v = V._data
    k = backend(v).linalg
    if k.name != "cpu" or v.dtype.kind == "c":
        return formula()
    gl = gL._data if gL is not None else np.zeros(v.shape[:-1], v.dtype)
    if is_zero_grad(gV):
        return Tensor._wrap(k.eigvalsh_grad(v, gl))
    return Tensor._wrap(k.eigh_grad(v, backend(v).matmul(np.swapaxes(v, -1, -2), gV._data), L._data, gl))


def _eigvalsh_grad(g, s):
    """The eigenvectors stay inside, but a double backward reaches them: the whole formula."""
    return eigh_grad(g[0], g[1], s.result, s.eigenvectors)


def _eigvalsh_fused(g, s):
    return _eigh_vjp(g[0], g[1], s.result, s.eigenvectors, lambda: _eigvalsh_grad(g, s))


def _check_uplo(UPLO):
    if UPLO not in ("L", "U"):
        raise RuntimeError("Expected UPLO argument to be 'L' or 'U', but got %s" % UPLO)


def eigh(A, UPLO="L"):
    check_square(A, "linalg.eigh")
    _check_uplo(UPLO)
    return Eigh(*dispatch(EIGH, (A,), {"lower": UPLO == "L", "vectors": True}))


def eigvalsh(A, UPLO="L"):
    check_square(A, "linalg.eigvalsh")
    _check_uplo(UPLO)
    return dispatch(EIGVALSH, (A,), {"lower": UPLO == "L", "vectors": _wants_grad(A)})[0]


# ---------------------------------------------------------------------- SVD
def _svd(xp, a, full_matrices, vectors):
    u, s, vh = xp.linalg.svd(a, full_matrices, vectors)
    if not (np.isfinite(xp.to_host(s)).all() and np.isfinite(xp.to_host(a)).all()):
        raise LinAlgError("linalg.svd: The algorithm failed to converge because the input matrix contained non-finite "
                          "values.")
    return u, s, vh


def _svd_forward(xp, dt, a, full_matrices):
    return _svd(xp, a, full_matrices, True)


def _svdvals_forward(xp, dt, a, vectors):
    u, s, vh = _svd(xp, a, False, vectors)
    return (s, u, vh) if vectors else (s, np.empty((0,), dt), np.empty((0,), dt))


def svd_grad(gU, gS, gVh, U, S, Vh):
    """PyTorch's svd_backward (real): gA = U [(skew(U^H gU) S + S skew(V^H gV)) / E + diag(gS)] V^H plus the
    projections of gU, gVh off the column/row spaces where A is not square; E_ij = S_j^2 - S_i^2."""
    m, n = U.shape[-2], Vh.shape[-1]
    no_u, no_v = is_zero_grad(gU), is_zero_grad(gVh)
    if no_u and no_v:
        return (U * gS.unsqueeze(-2)) @ Vh
    S2 = S * S
    E = S2.unsqueeze(-2) - S2.unsqueeze(-1) + eye_like(S, S.shape[-1])
    UhgU = None if no_u else U.mH @ gU
    VhgV = None if no_v else Vh @ gVh.mH
    if U.dtype.is_complex:  # (the phases: U^H gU's imaginary diagonal must be -V^H gV's)
        zero = (UhgU if VhgV is None else VhgV).diagonal(0, -2, -1).imag * 0
        check_gauge(zero if UhgU is None else UhgU.diagonal(0, -2, -1).imag,
                    "svd_backward: The singular vectors in the complex case are specified up to multiplication by "
                    "e^{i phi}. The specified loss function depends on this phase term, making it ill-defined.",
                    zero if VhgV is None else VhgV.diagonal(0, -2, -1).imag)
    gA = None
    if not no_u:
        UhgU = UhgU - UhgU.mH
        gA = UhgU * S.unsqueeze(-2)
    if not no_v:
        term = S.unsqueeze(-1) * (VhgV - VhgV.mH)
        gA = term if gA is None else gA + term
    gA = gA / E
    if not is_zero_grad(gS):
        gA = gA + diag_embed(gS)
    if U.dtype.is_complex and not no_u:  # (U^H gU's imaginary diagonal, which the real part of E's cannot carry)
        gA = gA + diag_embed(UhgU.diagonal(0, -2, -1) / (2 * S))
    if m > n and not no_u:
        gA = U @ gA
        gUSinv = gU / S.unsqueeze(-2)
        gA = gA + gUSinv - U @ (U.mH @ gUSinv)
        return gA @ Vh
    if m < n and not no_v:
        gA = gA @ Vh
        SinvgVh = gVh / S.unsqueeze(-1)
        gA = gA + SinvgVh - (SinvgVh @ Vh.mH) @ Vh
        return U @ gA
    return U @ (gA @ Vh)


def _svd_grad(g, s):
    gU, gS, gVh = g
    U, S, Vh = s.U, s.S, s.Vh
    if s.full_matrices:
        k = S.shape[-1]
        U, Vh, gU, gVh = U[..., :k], Vh[..., :k, :], gU[..., :k], gVh[..., :k, :]
    return svd_grad(gU, gS, gVh, U, S, Vh)


def _svdvals_grad(g, s):
    """The vectors stay inside, but a double backward reaches them: the whole formula."""
    return svd_grad(g[1], g[0], g[2], s.U, s.result, s.Vh)


def svd(A, full_matrices=True, *, driver=None):
    check_matrix(A, "linalg.svd")
    check_float(A, "linalg.svd")
    return SVD(*dispatch(SVD_OP, (A,), {"full_matrices": bool(full_matrices)}))


def svdvals(A, *, driver=None):
    check_matrix(A, "linalg.svdvals")
    check_float(A, "linalg.svdvals")
    return dispatch(SVDVALS, (A,), {"vectors": _wants_grad(A)})[0]


@export("svd", method=True)
def svd_legacy(input, some=True, compute_uv=True):
    """torch.svd: (U, S, V) with V (not V^H); ``some`` the reduced factors; without ``compute_uv``, zeros."""
    if not compute_uv:
        S = svdvals(input)
        m, n = input.shape[-2:]
        z = lambda r, c: Tensor._wrap(np.zeros(tuple(input.shape[:-2]) + (r, c), input.dtype.np))  # noqa: E731
        return SVDOld(z(m, m if not some else min(m, n)), S, z(n, n if not some else min(m, n)))
    U, S, Vh = svd(input, full_matrices=not some)
    return SVDOld(U, S, Vh.mH)


# ---------------------------------------------------------------------- samples and references
def hermitian_input(fn):
    """``fn`` applied to (A + A^H) / 2: what the generated tests call for the entries that read one triangle of a
    symmetric input (PyTorch's OpInfo wraps them the same way), so finite differences see the symmetric function."""
    def call(A, *args, **kwargs):
        return fn((A + A.mH) * 0.5, *args, **kwargs)
    return call


def phase_free(fn, vectors):
    """``fn`` with the outputs at positions ``vectors`` (eigenvectors, singular vectors) replaced by their absolute
    values for a complex input: what the generated tests call (PyTorch's OpInfo does the same), since complex vectors
    are unique up to a phase each and a loss of them must not depend on it. Real inputs: ``fn`` itself."""
    def call(A, *args, **kwargs):
        out = fn(A, *args, **kwargs)
        complex_input = A.dtype.is_complex if isinstance(A, Tensor) else A.dtype.kind == "c"
        return tuple(abs(o) if k in vectors else o for k, o in enumerate(out)) if complex_input else out
    return call


def triangular_input(fn):
    """``fn`` with its second argument cut to its lower triangle (upper with ``upper=True``): what the generated
    tests call for an entry that reads one triangle of a factor (PyTorch's OpInfo wraps cholesky_solve so)."""
    def call(B, L, *args, **kwargs):
        return fn(B, L.triu() if kwargs.get("upper") else L.tril(), *args, **kwargs)
    return call


def _floats(fn, complex=True):
    """The samples of an entry of floating (and ``complex``) dtypes: none in the others."""
    def samples(rng, dtype):
        return fn(rng, dtype) if np.dtype(dtype).kind in ("fc" if complex else "f") else []
    return samples


def _normal(rng, shape, dtype):
    """Standard normal values, complex ones (both parts) in a complex dtype."""
    a = rng.standard_normal(shape)
    return a + 1j * rng.standard_normal(shape) if np.dtype(dtype).kind == "c" else a


def _adj(a):
    return np.swapaxes(a, -1, -2).conj()


def _spd(rng, shape, dtype):
    a = rng.uniform(-1, 1, shape)
    if np.dtype(dtype).kind == "c":
        a = a + 1j * rng.uniform(-1, 1, shape)
    return np.asarray(a @ _adj(a) + shape[-1] * np.eye(shape[-1]), dtype)


def _sym(rng, shape, dtype):
    """A symmetric (Hermitian) matrix with well-separated eigenvalues (finite differences stay on one branch)."""
    n = shape[-1]
    q, _ = np.linalg.qr(_normal(rng, shape, dtype))
    w = np.arange(1, n + 1) * 1.5 + rng.uniform(0, 0.3, shape[:-1])
    return np.asarray((q * w[..., None, :]) @ _adj(q), dtype)


def _general(rng, shape, dtype):
    """A well-conditioned general matrix with separated singular values."""
    m, n = shape[-2:]
    k = min(m, n)
    u, _ = np.linalg.qr(_normal(rng, shape[:-2] + (m, m), dtype))
    v, _ = np.linalg.qr(_normal(rng, shape[:-2] + (n, n), dtype))
    s = np.zeros(shape)
    idx = np.arange(k)
    s[..., idx, idx] = np.arange(k, 0, -1) + 1.0 + rng.uniform(0, 0.2, shape[:-2] + (k,))
    return np.asarray(u @ s @ v, dtype)


def _chol_samples(rng, dtype):
    return [((_spd(rng, (3, 3), dtype),), {}), ((_spd(rng, (2, 4, 4), dtype),), {"upper": True}),
            ((_spd(rng, (3, 3), dtype).T.copy().T,), {}), ((np.zeros((0, 0), dtype),), {})]


def _np_cholesky(a, upper=False):
    L = np.linalg.cholesky(a) if a.size else a.copy()
    return _adj(L) if upper else L


def _np_cholesky_ex(a, upper=False, check_errors=False):
    return _np_cholesky(a, upper), np.zeros(a.shape[:-2], np.int32)


def _triangular_samples(rng, dtype):
    A = lambda s: np.asarray(_arr(rng, s, -1, 1, dtype) + 3 * np.eye(s[-1]), dtype)  # noqa: E731
    B = lambda s: _arr(rng, s, -1, 1, dtype)  # noqa: E731
    return [((A((3, 3)), B((3, 2))), {"upper": True}), ((A((2, 3, 3)), B((3, 1))), {"upper": False}),
            ((A((3, 3)), B((2, 3))), {"upper": False, "left": False}),
            ((A((3, 3)), B((3, 2))), {"upper": True, "unitriangular": True})]


def _np_triangular(a, b, upper, left=True, unitriangular=False):
    t = np.triu(a) if upper else np.tril(a)
    if unitriangular:
        t = t - np.eye(t.shape[-1]) * np.diagonal(t, 0, -2, -1)[..., None, :] + np.eye(t.shape[-1])
    if left:
        return np.linalg.solve(t, np.broadcast_to(b, np.broadcast_shapes(t.shape[:-2], b.shape[:-2]) + b.shape[-2:]))
    return np.swapaxes(np.linalg.solve(np.swapaxes(t, -1, -2), np.swapaxes(b, -1, -2)), -1, -2)


def _lu_samples(rng, dtype):
    return [((_general(rng, (3, 3), dtype),), {}), ((_general(rng, (2, 4, 4), dtype),), {})]


def _np_lu_factor_ex(a, pivot=True, check_errors=False):
    import scipy.linalg as sl  # (references for the tests: SciPy's Python layer is not imported with jitgrad)
    flat = a.reshape((-1,) + a.shape[-2:])
    lus, pivs = zip(*[sl.lu_factor(m) for m in flat]) if flat.shape[0] else ((), ())
    lu_ = np.asarray(lus, a.dtype).reshape(a.shape)
    piv = (np.asarray(pivs, np.int32) + 1).reshape(a.shape[:-1])
    return lu_, piv, np.zeros(a.shape[:-2], np.int32)


def _qr_samples(rng, dtype):
    return [((_general(rng, (4, 3), dtype),), {}), ((_general(rng, (2, 3, 3), dtype),), {"mode": "complete"}),
            ((_general(rng, (3, 5), dtype),), {}), ((_general(rng, (3, 4), dtype),), {"mode": "complete"})]


def _np_qr(a, mode="reduced"):
    q, r = np.linalg.qr(a, mode="complete" if mode == "complete" else "reduced")
    return (np.empty((0,), a.dtype) if mode == "r" else q), r


def _eigh_samples(rng, dtype):
    return [((_sym(rng, (3, 3), dtype),), {}), ((_sym(rng, (2, 4, 4), dtype),), {"UPLO": "U"})]


def _np_eigh(a, UPLO="L"):
    return np.linalg.eigh(a, UPLO=UPLO)


def _np_eigvalsh(a, UPLO="L"):
    return (np.linalg.eigvalsh(a, UPLO=UPLO),)  # (the first output: the eigenvectors stay inside)


def _svd_samples(rng, dtype):
    return [((_general(rng, (3, 3), dtype),), {"full_matrices": False}),
            ((_general(rng, (2, 4, 3), dtype),), {"full_matrices": False}),
            ((_general(rng, (3, 5), dtype),), {"full_matrices": False})] + \
        ([((_general(rng, (3, 3), dtype),), {})] if dtype == np.float64 else [])  # (float32: NumPy picks other signs)


def _np_svd(a, full_matrices=True):
    u, s, vh = np.linalg.svd(a, full_matrices=full_matrices)
    return u, s, vh


def _svdvals_samples(rng, dtype):
    return [((_general(rng, s, dtype),), {}) for s in ((3, 3), (2, 4, 3), (3, 5))]


def _np_permutation(piv):
    out = []
    for p in piv.reshape(-1, piv.shape[-1]) - 1:
        perm = list(range(len(p)))
        for i, j in enumerate(p):
            perm[i], perm[j] = perm[j], perm[i]
        out.append(perm)
    return np.asarray(out, np.int64).reshape(piv.shape)


def _geqrf_samples(rng, dtype):
    return [((_general(rng, (4, 3), dtype),), {}), ((_general(rng, (2, 3, 3), dtype),), {})]


def _np_geqrf(a):
    import scipy.linalg as sl
    flat = a.reshape((-1,) + a.shape[-2:])
    outs = [sl.lapack.get_lapack_funcs("geqrf", (m,))(m)[:2] for m in flat]
    return (np.asarray([o[0] for o in outs], a.dtype).reshape(a.shape),
            np.asarray([o[1] for o in outs], a.dtype).reshape(a.shape[:-2] + (min(a.shape[-2:]),)))


def _householder_samples(rng, dtype):
    out = []
    for shape, k in (((4, 3), 3), ((2, 3, 3), 2)):
        a = _general(rng, shape, np.complex128 if np.dtype(dtype).kind == "c" else np.float64)
        qr_, tau = _np_geqrf(a)
        out.append(((np.asarray(qr_, dtype), np.asarray(tau[..., :k], dtype)), {}))
    return out


def _np_householder(a, tau):
    flat, ft = a.reshape((-1,) + a.shape[-2:]), tau.reshape(-1, tau.shape[-1])
    outs = []
    for m, t in zip(flat, ft):
        q = np.eye(m.shape[0])
        for i in range(t.shape[0]):
            v = np.concatenate([np.zeros(i), [1.0], m[i + 1:, i]])
            q = q @ (np.eye(m.shape[0]) - t[i] * np.outer(v, v.conj()))
        outs.append(q[:, :m.shape[1]])
    return np.asarray(outs, a.dtype).reshape(a.shape)


# ---------------------------------------------------------------------- the entries
CHOLESKY = register(Op("linalg_cholesky", _cholesky_forward, reduced_precision="refused", complex=True, vjp=[_cholesky_grad],
                       fused=[_cholesky_fused], n_outputs=2,
                       outputs=("result", "info"), node="LinalgCholeskyExBackward0", params={"upper": False},
                       call=hermitian_input(cholesky_ex), samples=_floats(_chol_samples), ref=_np_cholesky_ex))
SOLVE_TRIANGULAR = register(Op("linalg_solve_triangular", _triangular_forward, reduced_precision="refused", complex=True, inputs=("self", "other"),
                               vjp=[_triangular_grad_a, _triangular_grad_b], node="LinalgSolveTriangularBackward0",
                               call=solve_triangular, samples=_floats(_triangular_samples), ref=_np_triangular))
LU_FACTOR = register(Op("linalg_lu_factor", _lu_forward, reduced_precision="refused", complex=True, vjp=[_lu_factor_grad], n_outputs=3,
                        outputs=("result", "pivots", "info"), node="LinalgLuFactorExBackward0", call=lu_factor_ex,
                        samples=_floats(_lu_samples), ref=_np_lu_factor_ex))
QR_OP = register(Op("linalg_qr", _qr_forward, reduced_precision="refused", complex=True, vjp=[_qr_grad], n_outputs=2, outputs=("Q", "R"),
                    node="LinalgQrBackward0", call=qr, samples=_floats(_qr_samples), ref=_np_qr,
                    params={"mode": "reduced"}))
PERMUTATION = register(Op("lu_pivots_to_permutation", _permutation_forward, inputs=("pivots",), dtype="int64",
                          differentiable=False, call=permutation, keep_inputs=(0,), samples=_floats(
                              lambda rng, dt: [((_np_lu_factor_ex(_general(rng, (2, 4, 4), np.float64))[1],), {})]),
                          ref=_np_permutation))
GEQRF = register(Op("geqrf", _geqrf_forward, reduced_precision="refused", complex=True, n_outputs=2, outputs=("a", "tau"), differentiable=False, call=geqrf,
                    samples=_floats(_geqrf_samples), ref=_np_geqrf))
HOUSEHOLDER = register(Op("linalg_householder_product", _householder_forward, reduced_precision="refused", complex=True, inputs=("self", "tau"),
                          vjp=[_householder_grad(0), _householder_grad(1)], node="LinalgHouseholderProductBackward0",
                          call=householder_product, samples=_floats(_householder_samples), ref=_np_householder))
EIGH = register(Op("linalg_eigh", _eigh_forward, reduced_precision="refused", complex=True, vjp=[_eigh_grad],
                   fused=[_eigh_fused], n_outputs=2,
                   outputs=("eigenvalues", "eigenvectors"), node="LinalgEighBackward0", call=phase_free(hermitian_input(eigh), (1,)),
                   samples=_floats(_eigh_samples), ref=phase_free(_np_eigh, (1,))))
EIGVALSH = register(Op("linalg_eigvalsh", _eigvalsh_forward, reduced_precision="refused", complex=True, vjp=[_eigvalsh_grad],
                       fused=[_eigvalsh_fused], n_outputs=2,
                       outputs=("result", "eigenvectors"), node="LinalgEighBackward0", call=hermitian_input(eigvalsh),
                       samples=_floats(_eigh_samples), ref=_np_eigvalsh))
SVD_OP = register(Op("linalg_svd", _svd_forward, reduced_precision="refused", complex=True, vjp=[_svd_grad], n_outputs=3, outputs=("U", "S", "Vh"),
                     node="LinalgSvdBackward0", call=phase_free(svd, (0, 2)), samples=_floats(_svd_samples),
                     ref=phase_free(_np_svd, (0, 2))))
SVDVALS = register(Op("linalg_svdvals", _svdvals_forward, reduced_precision="refused", complex=True, vjp=[_svdvals_grad], n_outputs=3, outputs=("result", "U", "Vh"),
                      node="LinalgSvdBackward0", call=svdvals, samples=_floats(_svdvals_samples),
                      ref=lambda a: (np.linalg.svd(a, compute_uv=False),)))
