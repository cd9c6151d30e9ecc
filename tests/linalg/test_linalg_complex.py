"""jitgrad.linalg on complex64/complex128 inputs: values against NumPy/SciPy (batched), gradients by gradcheck on
complex inputs (the conjugate Wirtinger convention, as PyTorch's), PyTorch's phase checks of the SVD and eigh
gradients, and values and gradients side by side with PyTorch (torch-marked)."""
import numpy as np
import pytest
import scipy.linalg as sl

import jitgrad as jg
from jitgrad.autograd import gradcheck

RNG = np.random.default_rng(7)


def _z(*shape, dtype=np.complex128):
    return (RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)).astype(dtype)


def _adj(a):
    return np.swapaxes(a, -1, -2).conj()


def _hpd(a):
    return a @ _adj(a) + a.shape[-1] * np.eye(a.shape[-1])


TOL = {np.complex64: dict(rtol=2e-4, atol=2e-5), np.complex128: dict(rtol=1e-10, atol=1e-12)}


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_values_against_numpy(dtype):
    a, b, w = _z(2, 4, 4, dtype=dtype), _z(2, 4, 2, dtype=dtype), _z(2, 5, 3, dtype=dtype)
    h = _hpd(a).astype(dtype)
    A, B, W, H = (jg.tensor(x) for x in (a, b, w, h))
    close = lambda got, want: np.testing.assert_allclose(got.numpy(), want, **TOL[dtype])  # noqa: E731
    real = np.float32 if dtype == np.complex64 else np.float64
    close(jg.linalg.det(A), np.linalg.det(a))
    sign, logabs = jg.linalg.slogdet(A)
    assert sign.dtype.np == dtype and logabs.dtype.np == real
    close(sign, np.linalg.slogdet(a)[0])
    close(logabs, np.linalg.slogdet(a)[1])
    close(jg.linalg.inv(A), np.linalg.inv(a))
    close(jg.linalg.solve(A, B), np.linalg.solve(a, b))
    close(jg.linalg.cholesky(H), np.linalg.cholesky(h))
    close(jg.linalg.cholesky(H, upper=True), _adj(np.linalg.cholesky(h)))
    close(jg.cholesky_solve(B, jg.linalg.cholesky(H)), np.linalg.solve(h, b))
    L, V = jg.linalg.eigh(H)
    assert L.dtype.np == real
    close(L, np.linalg.eigvalsh(h))
    close(V @ (L.to(A.dtype).unsqueeze(-1) * V.mH), h)
    U, S, Vh = jg.linalg.svd(W, full_matrices=False)
    assert S.dtype.np == real
    close(S, np.linalg.svd(w, compute_uv=False))
    close((U * S.to(W.dtype).unsqueeze(-2)) @ Vh, w)
    Q, R = jg.linalg.qr(W)
    close(Q @ R, w)
    close(Q.mH @ Q, np.broadcast_to(np.eye(3), (2, 3, 3)))
    close(jg.linalg.pinv(W), np.linalg.pinv(w))
    close(jg.linalg.matrix_exp(A), np.stack([sl.expm(m) for m in a]))
    close(jg.linalg.solve_triangular(A.triu(), B, upper=True), np.linalg.solve(np.triu(a), b))
    lu, piv = jg.linalg.lu_factor(A)
    want = [sl.lu_factor(m) for m in a]
    close(lu, np.stack([x[0] for x in want]))
    close(jg.linalg.lu_solve(lu, piv, B, adjoint=True), np.linalg.solve(_adj(a), b))
    close(jg.linalg.matrix_norm(W, "nuc"), np.linalg.norm(w, "nuc", axis=(-2, -1)))
    close(jg.linalg.matrix_norm(W, 2), np.linalg.norm(w, 2, axis=(-2, -1)))
    close(jg.linalg.cond(A), np.linalg.cond(a))
    assert jg.linalg.matrix_rank(W).tolist() == [3, 3]
    close(jg.logdet(A), np.log(np.linalg.det(a)))


def test_lstsq_against_numpy():
    w, b = _z(6, 3), _z(6, 2)
    for driver in ("gels", "gelsy", "gelsd", "gelss"):
        got = jg.linalg.lstsq(jg.tensor(w), jg.tensor(b), driver=driver).solution.numpy()
        np.testing.assert_allclose(got, np.linalg.lstsq(w, b, rcond=None)[0], rtol=1e-10, atol=1e-12)


def _herm(A):
    return A @ A.mH + 3 * jg.eye(A.shape[-1], dtype=A.dtype)


B0 = _z(2, 3, 2)
GRADS = {
    "det": lambda A: jg.linalg.det(A),
    "slogdet": lambda A: jg.linalg.slogdet(A),
    "inv": lambda A: jg.linalg.inv(A),
    "solve": lambda A: jg.linalg.solve(A, jg.tensor(B0)),
    "solve_right": lambda A: jg.linalg.solve(A, jg.tensor(B0).mT, left=False),
    "cholesky": lambda A: jg.linalg.cholesky(_herm(A)),
    "cholesky_upper": lambda A: jg.linalg.cholesky(_herm(A), upper=True),
    "cholesky_solve": lambda A: jg.cholesky_solve(jg.tensor(B0), jg.linalg.cholesky(_herm(A))),
    "qr": lambda A: jg.linalg.qr(A),
    "qr_wide": lambda A: jg.linalg.qr(A[..., :2, :]),
    "eigvalsh": lambda A: jg.linalg.eigvalsh(_herm(A)),
    "eigh": lambda A: (lambda L, V: (L, V.abs()))(*jg.linalg.eigh(_herm(A))),
    "svdvals": lambda A: jg.linalg.svdvals(A),
    "svd": lambda A: (lambda U, S, Vh: (U.abs(), S, Vh.abs(), U @ Vh))(*jg.linalg.svd(A[..., :2], full_matrices=False)),
    "pinv": lambda A: jg.linalg.pinv(A[..., :2]),
    "lstsq": lambda A: jg.linalg.lstsq(A, jg.tensor(B0)).solution,
    "matrix_exp": lambda A: jg.linalg.matrix_exp(A),
    "lu_factor": lambda A: jg.linalg.lu_factor(A).LU,
    "lu_solve_adjoint": lambda A: jg.linalg.lu_solve(*jg.linalg.lu_factor(A), jg.tensor(B0), adjoint=True),
    "solve_triangular": lambda A: jg.linalg.solve_triangular(A.tril() + 2 * jg.eye(3), jg.tensor(B0), upper=False),
    "householder_product": lambda A: jg.linalg.householder_product(A, A[..., 0, :2] * 0.5),
    "matrix_norm_nuc": lambda A: jg.linalg.matrix_norm(A, "nuc"),
    "cond": lambda A: jg.linalg.cond(A),
    "logdet": lambda A: jg.logdet(A),
}


@pytest.mark.parametrize("name", sorted(GRADS))
def test_gradcheck_on_complex_batches(name):
    A = jg.tensor(_z(2, 3, 3) + 2 * np.eye(3), requires_grad=True)
    assert gradcheck(GRADS[name], (A,))


@pytest.mark.parametrize("fn,message", [
    (lambda A: jg.linalg.svd(A)[0].sum().abs(), "^svd_backward: The singular vectors in the complex case are specified "
     r"up to multiplication by e\^\{i phi\}. The specified loss function depends on this phase term, making it "
     "ill-defined.$"),
    (lambda A: jg.linalg.eigh(_herm(A))[1].sum().abs(), r"^linalg_eigh_backward: The eigenvectors in the complex case "
     r"are specified up to multiplication by e\^\{i phi\}. The specified loss function depends on this quantity, so "
     "it is ill-defined.$")])
def test_phase_dependent_losses_raise_pytorch_s_error(fn, message):
    A = jg.tensor(_z(3, 3), requires_grad=True)
    with pytest.raises(RuntimeError, match=message):
        fn(A).backward()


def test_phase_free_losses_pass():
    A = jg.tensor(_z(3, 3), requires_grad=True)
    U, S, Vh = jg.linalg.svd(A)
    (U @ Vh).abs().sum().backward()
    L, V = jg.linalg.eigh(_herm(A))
    (V @ V.mH * 2).real.sum().backward()
    assert np.isfinite(A.grad.numpy()).all()


# ---------------------------------------------------------------------- side by side with PyTorch
TORCH = {
    "det": lambda L, A, B, W: L.linalg.det(A),
    "slogdet": lambda L, A, B, W: (lambda s, l: s * 2 + l)(*L.linalg.slogdet(A)),
    "logdet": lambda L, A, B, W: L.logdet(A),
    "inv": lambda L, A, B, W: L.linalg.inv(A),
    "solve": lambda L, A, B, W: L.linalg.solve(A, B),
    "solve_right": lambda L, A, B, W: L.linalg.solve(A, B.mT, left=False),
    "cholesky": lambda L, A, B, W: L.linalg.cholesky(A @ A.mH + L.eye(3)),
    "cholesky_upper": lambda L, A, B, W: L.linalg.cholesky(A @ A.mH + L.eye(3), upper=True),
    "cholesky_inverse": lambda L, A, B, W: L.cholesky_inverse(L.linalg.cholesky(A @ A.mH + L.eye(3))),
    "qr": lambda L, A, B, W: (lambda q, r: q.sum(-2) * 3 + r.sum(-2))(*L.linalg.qr(W)),
    "qr_wide": lambda L, A, B, W: (lambda q, r: q.sum(-1) * 3 + r[..., :3].sum(-2))(*L.linalg.qr(W.mT)),
    "eigvalsh": lambda L, A, B, W: L.linalg.eigvalsh(A + A.mH),
    "eigh": lambda L, A, B, W: (lambda w, v: v.abs().sum(-1) + w)(*L.linalg.eigh(A + A.mH, UPLO="U")),
    "svdvals": lambda L, A, B, W: L.linalg.svdvals(W),
    "svd": lambda L, A, B, W: (lambda u, s, v: u.abs().sum(-1)[..., :3] + s + v.abs().sum(-1))(
        *L.linalg.svd(W, full_matrices=False)),
    "svd_wide": lambda L, A, B, W: (lambda u, s, v: (u @ v[..., :3]).sum(-1) + s)(*L.linalg.svd(W.mT, full_matrices=False)),
    "svd_full": lambda L, A, B, W: (lambda u, s, v: u @ v)(*L.linalg.svd(A)),
    "svd_legacy": lambda L, A, B, W: (lambda u, s, v: u @ v.mH)(*L.svd(A)),
    "pinv": lambda L, A, B, W: L.linalg.pinv(W),
    "pinv_hermitian": lambda L, A, B, W: L.linalg.pinv(A @ A.mH, hermitian=True),
    "lstsq": lambda L, A, B, W: L.linalg.lstsq(W, L.cat([B, B[:, :1]], 1)).solution,
    "matrix_exp": lambda L, A, B, W: L.linalg.matrix_exp(A),
    "lu_factor": lambda L, A, B, W: L.linalg.lu_factor(A).LU,
    "lu": lambda L, A, B, W: (lambda p, l, u: l * 2 + u)(*L.linalg.lu(A)),
    "lu_solve": lambda L, A, B, W: L.linalg.lu_solve(*L.linalg.lu_factor(A), B),
    "lu_solve_adjoint": lambda L, A, B, W: L.linalg.lu_solve(*L.linalg.lu_factor(A), B, adjoint=True),
    "lu_solve_right": lambda L, A, B, W: L.linalg.lu_solve(*L.linalg.lu_factor(A), B.mT, left=False),
    "solve_triangular": lambda L, A, B, W: L.linalg.solve_triangular(A.triu() + 2 * L.eye(3), B, upper=True),
    "solve_triangular_right": lambda L, A, B, W: L.linalg.solve_triangular(A.tril() + 2 * L.eye(3), B.mT, upper=False,
                                                                          left=False, unitriangular=True),
    "cholesky_solve": lambda L, A, B, W: L.cholesky_solve(B, L.linalg.cholesky(A @ A.mH + L.eye(3))),
    "cholesky_solve_upper": lambda L, A, B, W: L.cholesky_solve(B, L.linalg.cholesky(A @ A.mH + L.eye(3), upper=True),
                                                                upper=True),
    "matrix_norm": lambda L, A, B, W: L.linalg.matrix_norm(W),
    "matrix_norm_nuc": lambda L, A, B, W: L.linalg.matrix_norm(W, "nuc"),
    "matrix_norm_2": lambda L, A, B, W: L.linalg.matrix_norm(W, 2),
    "matrix_norm_1": lambda L, A, B, W: L.linalg.matrix_norm(W, 1),
    "cond": lambda L, A, B, W: L.linalg.cond(A),
    "matrix_rank": lambda L, A, B, W: L.linalg.matrix_rank(W),
    "matrix_power": lambda L, A, B, W: L.linalg.matrix_power(A, -2),
    "tensorinv": lambda L, A, B, W: L.linalg.tensorinv(A[0], 1),
    "householder_product": lambda L, A, B, W: (lambda a, t: L.linalg.householder_product(a + W * 0, t + W[:, 0] * 0))(
        *L.geqrf(W.detach())),
    "ormqr": lambda L, A, B, W: L.ormqr(*L.geqrf(W.detach()), W),
    "geqrf_records_nothing": lambda L, A, B, W: L.geqrf(W)[0],
    "triangular_solve": lambda L, A, B, W: L.triangular_solve(B, A.triu() + 2 * L.eye(3), transpose=True)[0],
}


def _run(L, fn, arrays):
    A, B, W = (L.tensor(x, requires_grad=True) for x in arrays)
    try:
        y = fn(L, A, B, W)
    except RuntimeError as e:
        return "error", str(e)
    if y.requires_grad:
        (y.abs() + (y.real if y.dtype.is_complex else y) * 0.3).sum().backward()
    return y.detach().resolve_conj().numpy(), [None if t.grad is None else t.grad.resolve_conj().numpy()
                                               for t in (A, B, W)]


@pytest.mark.torch
@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("name", sorted(TORCH))
def test_values_and_gradients_as_pytorch(name):
    torch = pytest.importorskip("torch")
    arrays = (_z(2, 3, 3), _z(2, 3, 2), _z(2, 4, 3))
    want, got = _run(torch, TORCH[name], arrays), _run(jg, TORCH[name], arrays)
    if isinstance(want[0], str):  # (PyTorch's error: the same, word for word)
        assert got == want
        return
    assert got[0].dtype == want[0].dtype
    np.testing.assert_allclose(got[0], want[0], rtol=1e-8, atol=1e-10)
    for g, w in zip(got[1], want[1]):
        assert (g is None) == (w is None)
        if w is not None:
            np.testing.assert_allclose(g, w, rtol=1e-7, atol=1e-9)


def test_ormqr_adjoint_gradient_against_its_definition():
    """Q^H C's gradient in C is Q G for any complex G (PyTorch 2.13's differs for a G that is not real)."""
    w = _z(2, 4, 3)
    W = jg.tensor(w, requires_grad=True)
    a, tau = jg.geqrf(W.detach())
    Q = jg.linalg.householder_product(jg.cat([a, jg.zeros(2, 4, 1, dtype=a.dtype)], -1), tau).numpy()
    Y = jg.ormqr(a, tau, W, transpose=True)
    np.testing.assert_allclose(Y.detach().numpy(), _adj(Q) @ w, rtol=1e-12, atol=1e-12)
    Y.abs().sum().backward()
    np.testing.assert_allclose(W.grad.numpy(), Q @ (Y.detach().numpy() / np.abs(Y.detach().numpy())), rtol=1e-12,
                               atol=1e-12)
