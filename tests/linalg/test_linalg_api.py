"""jitgrad.linalg beyond the generated op tests: PyTorch's errors and edge cases, double backward, gauge
behaviour, the compositions, and programs (GP regression, least squares, PCA) against NumPy/SciPy and PyTorch."""
import math
import re

import numpy as np
import pytest
import scipy.linalg as sl

import jitgrad as jg
from jitgrad.autograd import gradcheck, gradgradcheck

L = jg.linalg
RNG = np.random.default_rng(0)


def t(a, grad=False):
    return jg.tensor(np.asarray(a, np.float64), requires_grad=grad)


def spd(n, batch=()):
    a = RNG.standard_normal(batch + (n, n))
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


def general(n, batch=()):
    return RNG.standard_normal(batch + (n, n)) + 3 * np.eye(n)


# ------------------------------------------------------------------ errors, as PyTorch words them
SINGULAR = [[1.0, 2.0], [2.0, 4.0]]


@pytest.mark.parametrize("call,exc,message", [
    (lambda: L.inv(t(SINGULAR)), L.LinAlgError, "linalg.inv: The diagonal element 2 is zero, the inversion could not be "
                                                "completed because the input matrix is singular."),
    (lambda: L.inv(t([[[1, 0], [0, 1]], SINGULAR])), L.LinAlgError, "linalg.inv: (Batch element 1): The diagonal "
                                                                     "element 2 is zero"),
    (lambda: L.cholesky(t([[1.0, 2.0], [2.0, 1.0]])), L.LinAlgError, "linalg.cholesky: The factorization could not be "
     "completed because the input is not positive-definite (the leading minor of order 2 is not positive-definite)."),
    (lambda: L.solve(t(SINGULAR), t([1.0, 1.0])), L.LinAlgError, "torch.linalg.solve: The solver failed because the "
                                                                  "input matrix is singular."),
    (lambda: L.inv(t(np.ones((2, 3)))), RuntimeError, "linalg.inv: A must be batches of square matrices, but they are 2 "
                                                       "by 3 matrices"),
    (lambda: L.inv(jg.ones(2, 2, dtype=jg.int64)), RuntimeError, "linalg.inv: Expected a floating point or complex "
                                                                 "tensor as input. Got Long"),
    (lambda: L.det(t(np.ones(3))), RuntimeError, "linalg.det: The input tensor A must have at least 2 dimensions."),
    (lambda: L.solve(t(np.eye(2)), t(np.ones(3))), RuntimeError, "linalg.solve: Incompatible shapes of A and B for the "
                                                                  "equation AX = B (2x2 and 3x1)"),
    (lambda: L.solve(jg.eye(2), t(np.ones(2))), RuntimeError, "linalg.solve: Expected A and B to have the same dtype, "
                                                              "but found A of type Float and B of type Double instead"),
    (lambda: L.eigh(t(np.eye(2)), UPLO="X"), RuntimeError, "Expected UPLO argument to be 'L' or 'U', but got X"),
    (lambda: L.qr(t(np.eye(2)), mode="bad"), RuntimeError, "qr received unrecognized mode 'bad'"),
    (lambda: L.lstsq(t(np.eye(2)), t(np.ones((2, 1))), driver="bad"), RuntimeError,
     "torch.linalg.lstsq: parameter `driver` should be one of (gels, gelsy, gelsd, gelss)"),
    (lambda: L.lu_factor(t(SINGULAR)), RuntimeError, "torch.linalg.lu_factor: U[2,2] is zero"),
    (lambda: L.matrix_norm(t(np.eye(2)), ord=3), RuntimeError, "linalg.matrix_norm: Order 3 not supported."),
    (lambda: L.cross(t(np.ones(2)), t(np.ones(2))), RuntimeError, "linalg.cross: inputs dimension -1 must have length 3. "
                                                                  "Got 2 and 2"),
    (lambda: L.multi_dot([t(np.ones(3))]), RuntimeError, "multi_dot(): expected at least 2 tensors but got 1"),
    (lambda: L.svd(t([[float("nan"), 0], [0, 1]])), L.LinAlgError, "linalg.svd: The algorithm failed to converge"),
    (lambda: L.matrix_power(t(np.eye(2)), 1.5), TypeError, "linalg_matrix_power(): argument 'n' (position 2) must be "
                                                           "int, not float"),
])
def test_errors(call, exc, message):
    with pytest.raises(exc, match="^" + re.escape(message)):
        call()
    assert issubclass(L.LinAlgError, RuntimeError)


def test_ex_variants_return_info_and_check_errors_raises():
    r = L.inv_ex(t(SINGULAR))
    assert r.info.item() == 2 and r.info.dtype is jg.int32 and r._fields == ("inverse", "info")
    c = L.cholesky_ex(t([[1.0, 2.0], [2.0, 1.0]]))
    assert c.info.item() == 2 and np.allclose(c.L.numpy(), [[1, 0], [2, -3]])
    assert L.solve_ex(t(SINGULAR), t([1.0, 1.0])).info.item() == 2
    assert L.lu_factor_ex(t(SINGULAR)).info.item() == 2
    with pytest.raises(L.LinAlgError, match=re.escape("linalg.cholesky_ex: The factorization could not be completed")):
        L.cholesky_ex(t(-np.eye(2)), check_errors=True)
    with pytest.raises(L.LinAlgError, match=re.escape("linalg.inv_ex: The diagonal element 2 is zero")):
        L.inv_ex(t(SINGULAR), check_errors=True)


def test_empty_and_batched_shapes():
    assert L.inv(t(np.ones((0, 0)))).shape == (0, 0)
    assert L.det(t(np.ones((2, 0, 0)))).tolist() == [1.0, 1.0]
    assert L.cholesky(t(np.ones((0, 0)))).shape == (0, 0)
    U, S, Vh = L.svd(t(np.ones((0, 3))))
    assert U.shape == (0, 0) and S.shape == (0,) and np.allclose(Vh.numpy(), np.eye(3))
    w, v = L.eigh(t(np.ones((0, 0))))
    assert w.shape == (0,) and v.shape == (0, 0)
    A, B = general(3, (4, 1)), RNG.standard_normal((5, 3, 2))  # batch dims broadcast: (4, 1) with (5,)
    X = L.solve(t(A), t(B))
    np.testing.assert_allclose(X.numpy(), np.linalg.solve(A, B), rtol=1e-10)
    assert X.shape == (4, 5, 3, 2)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_values_against_numpy_and_scipy(dtype):
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == np.float32 else dict(rtol=1e-9, atol=1e-10)
    A, P, G = general(4, (3,)).astype(dtype), spd(4, (3,)).astype(dtype), RNG.standard_normal((3, 5, 4)).astype(dtype)
    T = lambda a: jg.tensor(a)  # noqa: E731
    np.testing.assert_allclose(L.det(T(A)).numpy(), np.linalg.det(A), **tol)
    np.testing.assert_allclose(L.slogdet(T(A)).logabsdet.numpy(), np.linalg.slogdet(A)[1], **tol)
    np.testing.assert_allclose(jg.logdet(T(P)).numpy(), np.linalg.slogdet(P)[1], **tol)
    np.testing.assert_allclose(L.matrix_exp(T(A[0] / 3)).numpy(), sl.expm(A[0] / 3), **tol)
    np.testing.assert_allclose(L.pinv(T(G)).numpy(), np.linalg.pinv(G), **tol)
    np.testing.assert_allclose(L.matrix_power(T(A), -2).numpy(), np.linalg.matrix_power(A[0], -2)[None].repeat(1, 0)
                               if False else np.linalg.inv(A) @ np.linalg.inv(A), **tol)
    np.testing.assert_allclose(L.matrix_norm(T(G), "nuc").numpy(), np.linalg.norm(G, "nuc", axis=(-2, -1)), **tol)
    for o in (1, -1, 2, -2, math.inf, -math.inf, "fro"):
        np.testing.assert_allclose(L.matrix_norm(T(G), o).numpy(), np.linalg.norm(G, o, axis=(-2, -1)), **tol)
    np.testing.assert_allclose(L.norm(T(G[0])).numpy(), np.linalg.norm(G[0]), **tol)
    np.testing.assert_allclose(L.vector_norm(T(G), 3, dim=-1).numpy(), np.linalg.norm(G, 3, axis=-1), **tol)
    np.testing.assert_allclose(L.cond(T(A)).numpy(), np.linalg.cond(A), **tol)
    np.testing.assert_allclose(L.cond(T(A), 1).numpy(), np.linalg.cond(A, 1), rtol=1e-3 if dtype == np.float32 else 1e-9)
    assert L.matrix_rank(T(np.ones((3, 3), dtype))).item() == 1
    np.testing.assert_allclose(L.cholesky_ex(T(P)).L.numpy(), np.linalg.cholesky(P), **tol)
    Lc = np.linalg.cholesky(P)
    B = RNG.standard_normal((3, 4, 2)).astype(dtype)
    np.testing.assert_allclose(jg.cholesky_solve(T(B), T(Lc)).numpy(), np.linalg.solve(P, B), **tol)
    np.testing.assert_allclose(jg.cholesky_inverse(T(Lc)).numpy(), np.linalg.inv(P), **tol)
    np.testing.assert_allclose(L.tensorinv(T(np.eye(6, dtype=dtype).reshape(6, 2, 3) * 2), ind=1).numpy(),
                               np.linalg.tensorinv(np.eye(6).reshape(6, 2, 3) * 2, ind=1), **tol)
    LU, piv = L.lu_factor(T(A))
    np.testing.assert_allclose(L.lu_solve(LU, piv, T(B)).numpy(), np.linalg.solve(A, B), **tol)
    np.testing.assert_allclose(L.lu_solve(LU, piv, T(np.swapaxes(B, -1, -2)), left=False).numpy(),
                               np.swapaxes(np.linalg.solve(np.swapaxes(A, -1, -2), B), -1, -2), **tol)
    Pm, Lm, Um = L.lu(T(G))
    np.testing.assert_allclose((Pm @ Lm @ Um).numpy(), G, **tol)
    np.testing.assert_allclose(L.vander(T(np.array([1, 2, 3], dtype)), N=4).numpy(), np.vander([1, 2, 3], 4, True), **tol)
    np.testing.assert_allclose(jg.kron(T(A[0]), T(A[1])).numpy(), np.kron(A[0], A[1]), **tol)
    np.testing.assert_allclose(jg.tensordot(T(G), T(A), dims=([0, 2], [0, 1])).numpy(),
                               np.tensordot(G, A, axes=([0, 2], [0, 1])), **tol)
    np.testing.assert_allclose(jg.cdist(T(G[0]), T(G[1])).numpy(), sl.norm(G[0][:, None] - G[1][None], axis=-1), **tol)
    y = G[0, 0]
    np.testing.assert_allclose(jg.trapezoid(T(y), dx=0.5).numpy(), np.trapezoid(y, dx=0.5), **tol)
    np.testing.assert_allclose(jg.cumulative_trapezoid(T(y)).numpy(), np.cumsum((y[1:] + y[:-1]) / 2), **tol)
    np.testing.assert_allclose(L.multi_dot([T(G[0]), T(A[0]), T(A[1])]).numpy(), G[0] @ A[0] @ A[1], **tol)
    np.testing.assert_allclose(L.cross(T(G[..., :3]), T(G[..., 1:])).numpy(), np.cross(G[..., :3], G[..., 1:]), **tol)
    Q, R = L.qr(T(G), mode="r")
    assert Q.shape == (0,) and np.allclose(np.abs(R.numpy()), np.abs(np.linalg.qr(G, mode="r")), **tol)
    U, S, V = jg.svd(T(G))
    np.testing.assert_allclose((U * S.unsqueeze(-2) @ V.mT).numpy(), G, **tol)
    X = L.lstsq(T(G), T(B[:, :, :1].repeat(1, 0)[:, :4].reshape(3, 4, 1)[:, :4] if False else G[..., :1] * 2 + 1))
    np.testing.assert_allclose(X.solution.numpy(), np.linalg.pinv(G) @ (G[..., :1] * 2 + 1), **tol)


# ------------------------------------------------------------------ gradients
GRADGRAD = {
    "inv": lambda A: L.inv(A),
    "det": lambda A: L.det(A),
    "slogdet": lambda A: L.slogdet(A).logabsdet,
    "solve": lambda A: L.solve(A, A[..., :1] * 2 + 1),
    "cholesky": lambda A: L.cholesky(A @ A.mT + 3 * jg.eye(3, dtype=jg.float64)),
    "eigh": lambda A: L.eigh(A + A.mT).eigenvectors.abs().sum(-1) + L.eigvalsh(A + A.mT),
    "svd": lambda A: (L.svd(A, full_matrices=False).U ** 2) @ L.svdvals(A).unsqueeze(-1),
    "qr": lambda A: L.qr(A).R.abs(),
    "lstsq": lambda A: L.lstsq(A, A[..., :1] * 0.5 + 1).solution,
    "pinv": lambda A: L.pinv(A),
    "matrix_exp": lambda A: L.matrix_exp(A * 0.3),
    "lu": lambda A: L.lu(A).U,
    "solve_triangular": lambda A: L.solve_triangular(A.triu() + 3 * jg.eye(3, dtype=jg.float64), A, upper=True),
}


@pytest.mark.parametrize("name", sorted(GRADGRAD))
def test_gradcheck_and_gradgradcheck(name):
    rng = np.random.default_rng(1)  # separated eigen- and singular values: finite differences stay on one branch
    A = t(0.3 * rng.standard_normal((2, 3, 3)) + np.diag([1.0, 3.0, 6.0]), grad=True)
    assert gradcheck(GRADGRAD[name], (A,))
    assert gradgradcheck(GRADGRAD[name], (A,))


def test_det_gradient_at_singular_matrices():
    A = t(np.zeros((2, 2)), grad=True)
    L.det(A).backward()
    assert A.grad.tolist() == [[0.0, 0.0], [0.0, 0.0]]
    S = t([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]], grad=True)
    L.det(S).backward()  # the adjugate: d det / dA = adj(A)^T, finite at a singular A
    M = S.detach().numpy()
    cof = np.array([[np.linalg.det(np.delete(np.delete(M, i, 0), j, 1)) * (-1) ** (i + j) for j in range(3)]
                    for i in range(3)])
    np.testing.assert_allclose(S.grad.numpy(), cof, atol=1e-12)
    assert gradcheck(L.det, (S,))


def test_repeated_eigenvalues_and_singular_values_give_pytorch_s_nan_only_for_vectors():
    A = t(np.eye(3), grad=True)
    L.eigh(A).eigenvectors.sum().backward()
    assert np.isnan(A.grad.numpy()).all()  # PyTorch's: the loss depends on a vector of a repeated eigenvalue
    A = t(np.eye(3), grad=True)
    L.eigh(A).eigenvalues.sum().backward()  # the eigenvalues alone stay finite
    np.testing.assert_allclose(A.grad.numpy(), np.eye(3), atol=1e-12)
    A = t(np.eye(3), grad=True)
    L.svd(A).S.sum().backward()
    np.testing.assert_allclose(A.grad.numpy(), np.eye(3), atol=1e-12)
    A = t(np.eye(3), grad=True)
    U, S, Vh = L.svd(A)
    (U.sum() + Vh.sum()).backward()
    assert np.isnan(A.grad.numpy()).all()


def test_gauge_invariant_svd_loss_has_the_finite_difference_gradient():
    A = t(RNG.standard_normal((4, 3)), grad=True)

    def loss(A):
        U, S, Vh = L.svd(A, full_matrices=False)
        return (U @ Vh).sum() + (U * S.unsqueeze(-2) @ U.mT).sum()  # invariant under U, V column sign flips
    assert gradcheck(loss, (A,)) and gradgradcheck(loss, (A,))


def test_grad_fn_names():
    A = t(general(3), grad=True)
    assert L.inv(A).grad_fn.name() == "LinalgInvExBackward0"
    assert L.det(A).grad_fn.name() == "LinalgDetBackward0"
    assert L.cholesky(A @ A.mT).grad_fn.name() == "LinalgCholeskyExBackward0"
    assert L.svd(A).U.grad_fn.name() == "LinalgSvdBackward0"


def test_cuda_functions_raise_naming_cusolver():
    from jitgrad.kernels.cuda import linalg as cuda_linalg
    with pytest.raises(NotImplementedError, match="linalg inv is not implemented on CUDA: it needs cuSOLVER"):
        cuda_linalg.inv(np.eye(4))  # (2x2 and 3x3 run on CUDA: tests/cuda/test_cuda_linalg.py)


# ------------------------------------------------------------------ programs
def _gp_nll(lib, X, y, log_ell, log_sf, log_sn):
    """The negative log marginal likelihood of GP regression with an RBF kernel."""
    d2 = lib.cdist(X, X) ** 2
    K = lib.exp(2 * log_sf) * lib.exp(-0.5 * d2 / lib.exp(2 * log_ell)) + lib.exp(2 * log_sn) * lib.eye(
        X.shape[0], dtype=X.dtype)
    Lk = lib.linalg.cholesky(K)
    alpha = lib.cholesky_solve(y.unsqueeze(-1), Lk)
    return 0.5 * (y.unsqueeze(-1) * alpha).sum() + lib.log(lib.diagonal(Lk)).sum() + 0.5 * X.shape[0] * math.log(
        2 * math.pi)


def _gp_data(n=40):
    X = RNG.uniform(-2, 2, (n, 2))
    y = np.sin(X).sum(1) + 0.1 * RNG.standard_normal(n)
    return X, y


def test_gp_regression_nll_and_gradient_against_scipy():
    X, y = _gp_data()
    params = [t(0.1, grad=True), t(0.2, grad=True), t(-1.0, grad=True)]
    nll = _gp_nll(jg, t(X), t(y), *params)
    nll.backward()
    ell, sf, sn = np.exp([0.1, 0.2, -1.0])

    def ref(ell, sf, sn):
        K = sf ** 2 * np.exp(-0.5 * np.linalg.norm(X[:, None] - X[None], axis=-1) ** 2 / ell ** 2) + sn ** 2 * np.eye(len(y))
        c = sl.cho_factor(K, lower=True)
        return 0.5 * y @ sl.cho_solve(c, y) + np.log(np.diag(c[0])).sum() + 0.5 * len(y) * np.log(2 * np.pi)
    np.testing.assert_allclose(nll.item(), ref(ell, sf, sn), rtol=1e-10)
    h = 1e-6
    for k, p in enumerate(params):
        e = np.zeros(3)
        e[k] = h
        fd = (ref(*np.exp(np.array([0.1, 0.2, -1.0]) + e)) - ref(*np.exp(np.array([0.1, 0.2, -1.0]) - e))) / (2 * h)
        np.testing.assert_allclose(p.grad.item(), fd, rtol=1e-6)


def test_least_squares_and_pca_whitening():
    A, b = RNG.standard_normal((30, 4)), RNG.standard_normal(30)
    At = t(A, grad=True)
    x = L.lstsq(At, t(b).unsqueeze(-1)).solution.squeeze(-1)
    np.testing.assert_allclose(x.detach().numpy(), np.linalg.lstsq(A, b, rcond=None)[0], rtol=1e-10)
    ((At @ x - t(b)) ** 2).sum().backward()  # d/dA of the residual at the optimum: 2 r x^T (x depends on A too)
    r = A @ x.detach().numpy() - b
    np.testing.assert_allclose(At.grad.numpy(), 2 * np.outer(r, x.detach().numpy()), atol=1e-10)
    data = RNG.standard_normal((200, 3)) @ np.array([[2.0, 0.3, 0], [0, 1.0, 0.2], [0, 0, 0.5]])
    Xc = t(data - data.mean(0))
    cov = Xc.mT @ Xc / (Xc.shape[0] - 1)
    w, V = L.eigh(cov)
    W = V / w.sqrt().unsqueeze(0)
    Z = Xc @ W
    np.testing.assert_allclose((Z.mT @ Z / (Z.shape[0] - 1)).numpy(), np.eye(3), atol=1e-10)
    np.testing.assert_allclose(w.numpy(), np.linalg.eigvalsh(np.cov(data.T)), rtol=1e-10)


@pytest.mark.torch
def test_programs_match_pytorch():
    torch = pytest.importorskip("torch")
    X, y = _gp_data(30)
    grads = []
    for lib in (jg, torch):
        ps = [lib.tensor(v, dtype=lib.float64, requires_grad=True) for v in (0.1, 0.2, -1.0)]
        nll = _gp_nll(lib, lib.tensor(X), lib.tensor(y), *ps)
        nll.backward()
        grads.append([nll.item()] + [p.grad.item() for p in ps])
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-10)
    A = RNG.standard_normal((3, 4, 4))
    outs = []
    for lib in (jg, torch):
        a = lib.tensor(A, requires_grad=True)
        loss = (lib.linalg.det(a).sum() + lib.linalg.inv(a).sum() + lib.linalg.svdvals(a).sum()
                + lib.linalg.eigvalsh(a @ a.mT).sum() + lib.linalg.slogdet(a).logabsdet.sum()
                + lib.linalg.pinv(a[:, :3]).sum() + lib.linalg.matrix_exp(a * 0.2).sum()
                + lib.linalg.lstsq(a[:, :, :2], a[:, :, 2:]).solution.sum() + lib.linalg.qr(a).R.abs().sum())
        loss.backward()
        outs.append((loss.item(), a.grad.numpy()))
    np.testing.assert_allclose(outs[0][0], outs[1][0], rtol=1e-10)
    np.testing.assert_allclose(outs[0][1], outs[1][1], rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_low_precision_inputs_get_pytorch_s_error(dtype):
    """PyTorch's CPU kernels report float16/bfloat16 by name where they get them, or its dtype check says so."""
    name = {"float16": "Half", "bfloat16": "BFloat16"}[dtype]
    A = jg.eye(3).to(getattr(jg, dtype))
    for fn, kernel in ((jg.linalg.cholesky, "cholesky_cpu"), (jg.linalg.det, "lu_cpu"), (jg.linalg.eigh, "linalg_eigh_cpu"),
                       (jg.linalg.svdvals, "linalg_svd_cpu"), (jg.linalg.qr, "geqrf_cpu")):
        with pytest.raises(NotImplementedError, match="^\"%s\" not implemented for '%s'$" % (kernel, name)):
            fn(A)
    with pytest.raises(RuntimeError, match="^linalg.inv: Low precision dtypes not supported. Got %s$" % name):
        jg.linalg.inv(A)


# ------------------------------------------------------------------ pinv / matrix_rank tolerances and hermitian
def _np_pinv_tol(a, atol, rtol):
    """NumPy's pinv with PyTorch's threshold max(atol, rtol * smax), one (atol, rtol) pair per matrix."""
    u, s, vh = np.linalg.svd(a, full_matrices=False)
    keep = s > np.maximum(atol, rtol * s.max(-1, keepdims=True))
    inv = np.where(keep, 1 / np.where(keep, s, 1), 0)
    return np.swapaxes(vh, -1, -2) @ (inv[..., :, None] * np.swapaxes(u, -1, -2))


def _sym_rank3():
    rng = np.random.default_rng(31)
    b = rng.standard_normal((4, 3))
    a = rng.standard_normal((4, 4))
    return np.stack([a + a.T, b @ b.T])


@pytest.mark.parametrize("hermitian", [False, True])
def test_pinv_and_matrix_rank_take_tensor_tolerances(hermitian):
    A = _sym_rank3()
    s = np.linalg.svd(A, compute_uv=False)
    atol = np.array([s[0, -1] * 0.5, s[1, 1] * 1.01])  # the second matrix drops to rank 1
    P = L.pinv(t(A), atol=t(atol), hermitian=hermitian)
    want = _np_pinv_tol(A, atol[:, None], 0.0)  # a positive atol alone zeroes rtol
    np.testing.assert_allclose(P.numpy(), want, atol=1e-10)
    assert L.matrix_rank(t(A), atol=t(atol), hermitian=hermitian).tolist() == [4, 1]
    # rtol of shape (2, 1) broadcasts against the batch of two: ranks of shape (2, 2)
    rtol = np.array([[1e-3], [0.5]])
    ranks = L.matrix_rank(t(A), rtol=t(rtol), hermitian=hermitian).numpy()
    np.testing.assert_array_equal(ranks, (s[None] > rtol[..., None] * s.max(-1)[None, :, None]).sum(-1))
    assert L.pinv(t(A), rtol=t(rtol), hermitian=hermitian).shape == (2, 2, 4, 4)


def test_pinv_hermitian_reads_the_lower_triangle_and_differentiates():
    A = _sym_rank3()[0]
    N = np.tril(A) + np.triu(np.full_like(A, 5.0), 1)  # a different upper triangle must not matter
    np.testing.assert_allclose(L.pinv(t(N), hermitian=True).numpy(), np.linalg.pinv(A), atol=1e-10)
    assert gradcheck(lambda x: L.pinv(x + x.mT, hermitian=True), (t(A[:3, :3] * 0.5, True),))
    assert gradcheck(lambda x, a: L.pinv(x, atol=a), (t(np.random.default_rng(2).standard_normal((2, 3, 3)), True),
                                                        t([1e-3, 1e-3])))


@pytest.mark.torch
def test_pinv_tensor_tolerances_match_torch():
    torch = pytest.importorskip("torch")
    A = _sym_rank3()
    for kw in ({"atol": [0.3, 1.0]}, {"rtol": [[0.1], [0.4]]}, {"atol": [0.3], "rtol": [0.1, 0.0]}):
        for hermitian in (False, True):
            got = {}
            for lib in (jg, torch):
                x = lib.tensor(A, requires_grad=True)
                k = {n: lib.tensor(v, dtype=lib.float64) for n, v in kw.items()}
                P = lib.linalg.pinv(x, hermitian=hermitian, **k)
                (P * P).sum().backward()
                got[lib] = (P.detach().numpy(), x.grad.numpy(),
                            lib.linalg.matrix_rank(x.detach(), hermitian=hermitian, **k).numpy())
            for a, b in zip(got[jg], got[torch]):
                np.testing.assert_allclose(a, b, atol=1e-8)
