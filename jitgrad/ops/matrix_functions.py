"""Functions of a matrix (torch.linalg): det and slogdet as entries on one LU (their gradients PyTorch's,
through the SVD where the matrix is singular), logdet, matrix_exp (scaling and squaring of a Pade
approximant, composed of matmuls and a solve, so every order of derivative follows), norms, cond and
matrix_rank."""
import math

import numpy as np

from .._grad_mode import is_grad_enabled
from .._op import Op, dispatch
from .._tensor import Tensor
from ._linalg_args import check_float, check_matrix, check_square, eye_like, result_type, tolerance
from ._table import export, register
from .decompositions import _floats, _general, eigvalsh, svd, svdvals
from .join import cat
from .reduction import norm as _vector_norm
from .solvers import _solve, inv, inv_ex, small_kernels
from .unary import _c

Slogdet = result_type("linalg_slogdet", ("sign", "logabsdet"))


# ---------------------------------------------------------------------- det, slogdet, logdet
def _det_forward(xp, dt, a):
    return xp.linalg.det(a)


def _prod_others(S):
    """prod_{j != i} S_j for each i, without dividing (zeros allowed): exclusive cumulative products."""
    one = S[..., :1] * 0 + 1
    left = cat([one, S[..., :-1]], -1).cumprod(-1)
    right = cat([one, S.flip(-1)[..., :-1]], -1).cumprod(-1).flip(-1)
    return left * right


def _det_grad(g, s):
    """g det A^-T where A is invertible (no graph of the backward); else, and for double backward, PyTorch's
    formula through the SVD, which holds at singular matrices: U diag(g alpha prod_{j != i} S_j) V^H."""
    A = s.self
    if not is_grad_enabled():
        Ainv, info = inv_ex(A)
        if not bool((info != 0).any()):
            return (g * _c(s.result)).unsqueeze(-1).unsqueeze(-2) * Ainv.mH
    U, S, Vh = svd(A, full_matrices=False)
    alpha = _c(det(U) * det(Vh))
    D = _prod_others(S) * (g * alpha).unsqueeze(-1)
    return (U * D.unsqueeze(-2)) @ Vh


def _det_fused(g, s):
    """2x2 / 3x3 matrices: g times the cofactor matrix, by direct code; else the formula."""
    A = s.self._data
    k = small_kernels(A)
    return Tensor._wrap(k.small_det_grad(A, g._data)) if k else _det_grad(g, s)


def det(A):
    check_square(A, "linalg.det")
    return dispatch(DET, (A,))


def _slogdet_forward(xp, dt, a):
    return xp.linalg.slogdet(a)


def _slogdet_grad(g, s):
    """g_logabsdet A^-H; complex: the sign's phase adds i Im(g_sign conj(sign))."""
    gl = g[1]
    if s.sign.dtype.is_complex:
        gl = gl + (g[0] * s.sign.conj()).imag * 1j
    return gl.unsqueeze(-1).unsqueeze(-2) * inv(s.self).mH


def slogdet(A):
    check_square(A, "linalg.slogdet")
    return Slogdet(*dispatch(SLOGDET, (A,)))


@export(method=True)
def logdet(input):
    """log det A: NaN where the determinant is negative, -inf where it is zero."""
    check_square(input, "linalg.logdet")
    sign, logabs = slogdet(input)
    if sign.dtype.is_complex:  # (complex: log det, the sign's phase its imaginary part)
        return sign.log() + logabs
    return logabs.masked_fill(sign < 0, float("nan"))


# ---------------------------------------------------------------------- matrix_exp
# Pade [13/13] coefficients and the 1-norm up to which it is exact to double precision (Higham 2005)
_B13 = (64764752532480000., 32382376266240000., 7771770303897600., 1187353796428800., 129060195264000.,
        10559470521600., 670442572800., 33522128640., 1323241920., 40840800., 960960., 16380., 182., 1.)
_THETA13 = 5.371920351148152


def matrix_exp(A):
    check_square(A, "linalg.matrix_exp")
    if A.shape[-1] == 0:
        return A.clone()
    norm1 = float(np.abs(A.detach().cpu().numpy()).sum(-2).max()) if A.numel() else 0.0
    s = max(0, int(math.ceil(math.log2(norm1 / _THETA13)))) if norm1 > _THETA13 else 0
    X = A / (2 ** s) if s else A
    b = _B13
    I = eye_like(X)
    X2 = X @ X
    X4 = X2 @ X2
    X6 = X4 @ X2
    U = X @ (X6 @ (b[13] * X6 + b[11] * X4 + b[9] * X2) + b[7] * X6 + b[5] * X4 + b[3] * X2 + b[1] * I)
    V = X6 @ (b[12] * X6 + b[10] * X4 + b[8] * X2) + b[6] * X6 + b[4] * X4 + b[2] * X2 + b[0] * I
    R = _solve(V - U, V + U, None)[0]
    for _ in range(s):
        R = R @ R
    return R


# ---------------------------------------------------------------------- norms
def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None):
    check_float(x, "linalg.vector_norm")
    if dtype is not None:
        x = x.to(dtype)
    return _vector_norm(x, ord, dim, keepdim)


_MATRIX_ORDS = ("fro", "nuc", 1, -1, 2, -2, math.inf, -math.inf)


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None):
    fname = "linalg.matrix_norm"
    check_matrix(A, fname)
    check_float(A, fname)
    if ord not in _MATRIX_ORDS:
        raise RuntimeError("%s: Order %s not supported." % (fname, ord))
    if dtype is not None:
        A = A.to(dtype)
    d0, d1 = (A._wrap_dim(d) for d in dim)
    if ord == "fro":
        return _vector_norm(A, 2, (d0, d1), keepdim)
    A2 = A.movedim((d0, d1), (-2, -1))
    if ord in ("nuc", 2, -2):
        S = svdvals(A2)
        out = S.sum(-1) if ord == "nuc" else S.amax(-1) if ord == 2 else S.amin(-1)
    else:  # 1: the largest absolute column sum, inf: the largest row sum (-1, -inf: the smallest)
        sums = A2.abs().sum(-2 if abs(ord) == 1 else -1)
        out = sums.amax(-1) if ord > 0 else sums.amin(-1)
    if keepdim:
        for d in sorted((d0, d1)):
            out = out.unsqueeze(d)
    return out


def norm(A, ord=None, dim=None, keepdim=False, *, dtype=None):
    """torch.linalg.norm: a matrix norm where ``dim`` is a pair (or ord is given for a 2-D input), else a vector
    norm (of the flattened input where ``dim`` is None)."""
    if isinstance(dim, int):
        dim = (dim,)
    if dim is not None and len(dim) == 2 or (dim is None and ord is not None and (A.ndim == 2 or isinstance(ord, str))):
        return matrix_norm(A, "fro" if ord is None else ord, (-2, -1) if dim is None else dim, keepdim, dtype=dtype)
    if isinstance(ord, str):
        raise RuntimeError("linalg.norm: If dim is specified, it must be of length 1 or 2. Got %s" % (list(dim),))
    return vector_norm(A, 2 if ord is None else ord, dim, keepdim, dtype=dtype)


def cond(A, p=None):
    check_matrix(A, "linalg.cond")
    if p not in (None, "fro", "nuc", 1, -1, 2, -2, math.inf, -math.inf):
        raise RuntimeError("linalg.cond got an invalid norm type: %s" % p)
    if p in (None, 2, -2):
        S = svdvals(A)
        big, small = S.amax(-1), S.amin(-1)
        return big / small if p != -2 else small / big
    check_square(A, "linalg.cond(ord=%s)" % p)
    return matrix_norm(A, p) * matrix_norm(inv(A), p)


def matrix_rank(A, *, atol=None, rtol=None, hermitian=False, tol=None):
    check_matrix(A, "linalg.matrix_rank")
    check_float(A, "linalg.matrix_rank")
    # hermitian: the eigenvalues' magnitudes, from the lower triangle alone as PyTorch reads it
    S = eigvalsh(A.detach()).abs() if hermitian else svdvals(A.detach())
    if tol is not None:
        atol, rtol = tol, 0.0
    smax = S.amax(-1, keepdim=True) if S.shape[-1] else S.sum(-1, keepdim=True)
    return (S > tolerance(A, smax, atol, rtol)).sum(-1)


# ---------------------------------------------------------------------- samples and references
def _det_samples(rng, dtype):
    singular = np.asarray([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]], dtype)
    # (complex: no singular sample, whose second derivative through the SVD depends on the phases of the null
    # vectors; PyTorch's gradgradcheck fails there too)
    return [((_general(rng, s, dtype),), {}) for s in ((2, 2), (3, 3), (4, 3, 3), (5, 5))] + \
        ([((singular,), {})] if np.dtype(dtype).kind == "f" else [])


def _slogdet_samples(rng, dtype):
    return [((_general(rng, s, dtype) * np.asarray(-1.0, dtype),), {}) for s in ((2, 2), (3, 3), (2, 4, 4))]


DET = register(Op("linalg_det", _det_forward, reduced_precision="refused", complex=True, vjp=[_det_grad], fused=[_det_fused], node="LinalgDetBackward0", call=det,
                  samples=_floats(_det_samples), ref=lambda a: np.linalg.det(a) if a.size else np.ones(a.shape[:-2])))
SLOGDET = register(Op("linalg_slogdet", _slogdet_forward, reduced_precision="refused", complex=True, vjp=[_slogdet_grad], n_outputs=2,
                      outputs=("sign", "logabsdet"), node="LinalgSlogdetBackward0", call=slogdet,
                      samples=_floats(_slogdet_samples), ref=np.linalg.slogdet))


# the torch.* and Tensor spellings
export("det", method=True)(det)
export("slogdet", method=True)(slogdet)
export("matrix_exp", method=True)(matrix_exp)
