"""The general (non-symmetric) eigenproblem: torch.linalg.eig and eigvals, complex results with PyTorch's
conventions (LAPACK's geev: unit-norm eigenvectors as columns) and gradients (PyTorch's linalg_eig_backward,
written over table ops, so double backward follows)."""
import numpy as np

from .._grad_mode import is_grad_enabled
from .._op import Op, dispatch
from .._tensor import Tensor
from ._linalg_args import LinAlgError, check_square, diag_embed, eye_like, is_zero_grad, result_type
from ._table import register
from .complex import complex
from .join import cat
from .solvers import solve

Eig = result_type("linalg_eig", ("eigenvalues", "eigenvectors"))

# a complex loss must not depend on the phase of the eigenvectors: PyTorch's tolerance for that check
_GAUGE_TOL = 1e-2


def _eig_forward(xp, dt, a, vectors, real_input, fname):
    out = xp.linalg.eig(a, vectors)
    if out is None:
        raise LinAlgError("torch.%s: input tensor should not contain infs or NaNs." % fname)
    w, v = out
    return w, (v if vectors else np.empty((0,), w.dtype))


def _solve_adjoint(V, B):
    """V^-H B for complex V and B: LAPACK's real solver on the real form [[P, Q], [-Q, P]] of V^H = P - iQ."""
    P, Q = V.mT.real, V.mT.imag
    n = P.shape[-1]
    M = cat([cat([P, Q], -1), cat([-Q, P], -1)], -2)
    XY = solve(M, cat([B.real, B.imag], -2))
    return complex(XY[..., :n, :], XY[..., n:, :])


def eig_grad(gL, gV, L, V, real_input):
    """gA = V^-H (diag(gL) + (V^H gV - V^H V Re(diag(V^H gV))) / E*) V^H, E_ij = L_j - L_i (1 on the diagonal);
    its real part for a real A. A loss that depends on the eigenvectors' phases raises PyTorch's error."""
    Vh = V.mT.conj()
    if is_zero_grad(gV):
        gA = _solve_adjoint(V, gL.unsqueeze(-1) * Vh)
    else:
        VhgV = Vh @ gV
        diag = VhgV.diagonal(0, -2, -1)
        if not np.allclose(diag.imag.detach().numpy(), 0, rtol=_GAUGE_TOL, atol=_GAUGE_TOL):
            raise RuntimeError("linalg_eig_backward: The eigenvectors in the complex case are specified up to "
                               "multiplication by e^{i phi}. The specified loss function depends on this quantity, so "
                               "it is ill-defined.")
        VhgV = VhgV - Vh @ (V * diag.real.unsqueeze(-2))
        Lc = L.conj()
        E = Lc.unsqueeze(-2) - Lc.unsqueeze(-1) + eye_like(L, L.shape[-1])
        gA = VhgV / E
        if not is_zero_grad(gL):
            gA = gA + diag_embed(gL)
        gA = _solve_adjoint(V, gA @ Vh)
    return gA.real if real_input else gA


def _eig_grad(g, s):
    return eig_grad(g[0], g[1], s.eigenvalues, s.eigenvectors, s.real_input)


def _eigvals_grad(g, s):
    return eig_grad(g[0], g[1], s.result, s.eigenvectors, s.real_input)


def _check(A, fname):
    check_square(A, fname, float_input=not A.dtype.is_complex)
    return {"real_input": not A.dtype.is_complex, "fname": fname}


def eig(A):
    params = _check(A, "linalg.eig")
    return Eig(*dispatch(EIG, (A,), dict(params, vectors=True)))


def eigvals(A):
    params = _check(A, "linalg.eigvals")
    wants = isinstance(A, Tensor) and (A.requires_grad and is_grad_enabled() or A._fw_grad is not None)
    return dispatch(EIGVALS, (A,), dict(params, vectors=wants))[0]


# ---------------------------------------------------------------------- samples and references
def _gauge_invariant(fn):
    """``fn`` with the eigenvectors' absolute values: what the generated tests call (PyTorch's OpInfo does the same),
    since the eigenvectors are unique up to a phase each and finite differences follow LAPACK's choice of it."""
    def call(A):
        L, V = fn(A)
        return L, V.abs()
    return call


def _samples(rng, dtype):
    """Well-separated eigenvalues (a diagonal plus a perturbation: well-conditioned gradients, an order LAPACK keeps
    under finite differences), a real matrix with a complex pair, a batch; complex matrices in the complex dtypes."""
    kind = np.dtype(dtype).kind
    if kind not in "fc":
        return []

    def m(*shape):
        a = 0.3 * rng.uniform(-1, 1, shape)
        return a + 0.2j * rng.uniform(-1, 1, shape) if kind == "c" else a
    pair = np.array([[0.0, -2.0, 0.3], [2.0, 0.1, 0.2], [0.1, 0.4, 3.0]])
    return [((np.asarray(a, dtype),), {}) for a in (np.diag([1.0, 2.5, 4.0, 5.5]) + m(4, 4), pair + m(3, 3),
                                                   np.diag([1.0, -2.0]) + m(3, 2, 2))]


def _complex_of(a):
    return np.complex64 if a.dtype in (np.float32, np.complex64) else np.complex128


def _np_eig(a):
    w, v = np.linalg.eig(a)
    return w.astype(_complex_of(a)), np.abs(v).astype(np.float32 if _complex_of(a) == np.complex64 else np.float64)


EIG = register(Op("linalg_eig", _eig_forward, reduced_precision="refused", complex=True, vjp=[_eig_grad], n_outputs=2,
                  outputs=("eigenvalues", "eigenvectors"), node="LinalgEigBackward0", call=_gauge_invariant(eig),
                  samples=_samples, ref=_np_eig))
EIGVALS = register(Op("linalg_eigvals", _eig_forward, reduced_precision="refused", complex=True, vjp=[_eigvals_grad], n_outputs=2,
                      outputs=("result", "eigenvectors"), node="LinalgEigBackward0",
                      call=lambda A: eigvals(A), samples=_samples,
                      ref=lambda a: (np.linalg.eigvals(a).astype(_complex_of(a)),)))
