"""jitgrad.linalg on device='cuda': batches of small matrices by direct code (kernels/cuda/linalg.py: 2x2 and 3x3
det, slogdet, inv, solve; Cholesky and triangular solves up to order 8) against the CPU (LAPACK's infos, the CPU's
direct code), values and gradients, singular and indefinite inputs and their errors, and training programs; what
needs a factorization of a larger matrix raises naming cuSOLVER.

numba swaps in its CUDA simulator only if NUMBA_ENABLE_CUDASIM=1 is set before numba.cuda is first imported, so
without a GPU these checks run in a child pytest process with the simulator on; set JITGRAD_CUDA_TESTS=gpu on a
machine with a GPU to run them on it for real.
"""
import os
import subprocess
import sys

import numpy as np
import pytest

# (the simulator runs the kernels on NumPy scalars, which warn about the infs of a singular matrix's adjugate)
pytestmark = [pytest.mark.cuda, pytest.mark.filterwarnings("ignore::RuntimeWarning")]

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the checkout
IN_CHILD = os.environ.get("NUMBA_ENABLE_CUDASIM") == "1" or os.environ.get("JITGRAD_CUDA_TESTS") == "gpu"
GPU = os.environ.get("JITGRAD_CUDA_TESTS") == "gpu"

if not IN_CHILD:
    def test_cuda_linalg_under_the_simulator():
        env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
        proc = subprocess.run([sys.executable, "-m", "pytest", __file__, "-q", "-p", "no:cacheprovider"], env=env,
                              capture_output=True, text=True, timeout=1200, cwd=ROOT)
        assert proc.returncode == 0, "CUDA simulator tests failed:\n" + proc.stdout[-8000:] + proc.stderr[-4000:]

else:
    import jitgrad as jg
    from jitgrad.kernels import linalg as CPU, small_matrix as S
    from jitgrad.kernels.cuda import linalg as DEV
    from numba import cuda

    # the device's FMA contraction rounds differently from the CPU's separate multiply and add
    TOL = {np.float32: dict(rtol=2e-5, atol=2e-6), np.float64: dict(rtol=1e-12, atol=1e-13)} if GPU else \
        {np.float32: dict(rtol=1e-6, atol=1e-7), np.float64: dict(rtol=1e-14, atol=1e-15)}

    def host(x):
        return x.copy_to_host() if hasattr(x, "copy_to_host") else np.asarray(x)

    def batch(rng, shape, n, dtype, shift=2.0):
        return (rng.standard_normal(shape + (n, n)) + shift * np.eye(n)).astype(dtype)

    @pytest.mark.parametrize("dtype", [np.float32, np.float64])
    @pytest.mark.parametrize("n", [2, 3])
    def test_kernels_match_the_cpu(n, dtype):
        rng = np.random.default_rng(n)
        for shape in [(5,), (2, 3), (0,)]:
            a, b = batch(rng, shape, n, dtype), rng.standard_normal(shape + (n, 2)).astype(dtype)
            g = rng.standard_normal(shape + (n, n)).astype(dtype)
            gx, gs = rng.standard_normal(shape + (n, 2)).astype(dtype), rng.standard_normal(shape).astype(dtype)
            da, db, dg, dgx, dgs = map(cuda.to_device, (a, b, g, gx, gs))
            tol = TOL[dtype]
            np.testing.assert_allclose(host(DEV.det(da)), CPU.det(a), **tol)
            (inv, info), (cinv, cinfo) = DEV.inv(da), CPU.inv(a)
            np.testing.assert_allclose(host(inv), cinv, **tol)
            assert host(info).dtype == np.int32 and (host(info) == cinfo).all() and host(info).shape == shape
            x, _ = DEV.small_solve(da, db)
            np.testing.assert_allclose(host(x), CPU.small_solve(a, b)[0], **tol)
            np.testing.assert_allclose(host(DEV.small_inv_grad(inv, dg)), CPU.small_inv_grad(cinv, g), **tol)
            ga, gb = DEV.small_solve_grad(da, x, dgx)
            cga, cgb = CPU.small_solve_grad(a, host(x), gx)
            np.testing.assert_allclose(host(ga), cga, **tol)
            np.testing.assert_allclose(host(gb), cgb, **tol)
            np.testing.assert_allclose(host(DEV.small_det_grad(da, dgs)), CPU.small_det_grad(a, gs), **tol)
            sign, logabs = DEV.slogdet(da)
            csign, clog = CPU.slogdet(a)
            assert (host(sign) == csign).all()
            np.testing.assert_allclose(host(logabs), clog, rtol=1e-5 if dtype == np.float32 else 1e-12, atol=1e-6)

    def singular(n):
        """Singular matrices of every rank below n, with zero rows and columns, ties in the pivot search, NaN."""
        out = [np.zeros((n, n)), np.ones((n, n)), np.diag([1.0] + [0.0] * (n - 1)), np.diag([0.0] + [1.0] * (n - 1))]
        rng = np.random.default_rng(7)
        for rank in range(1, n):
            for _ in range(6):
                u, v = rng.integers(-3, 4, (n, rank)), rng.integers(-3, 4, (rank, n))
                out.append((u @ v).astype(float))
        m = np.arange(1.0, n * n + 1).reshape(n, n)
        out += [m, -m.T, np.where(np.eye(n, dtype=bool), 0.0, 1.0)]  # (singular for n = 3; the last is not)
        return np.stack(out)

    @pytest.mark.parametrize("n", [2, 3])
    def test_singular_matrices_get_an_info_or_a_finite_inverse(n):
        """Where the adjugate fails (det rounds to zero), Gauss-Jordan with getrf's pivots decides: info > 0 at an
        exactly zero pivot (LAPACK's info where no rounding is involved), else LAPACK's kind of finite answer."""
        a = singular(n)
        inverse, info = map(host, DEV.inv(cuda.to_device(a)))
        rank_deficient = np.linalg.matrix_rank(a) < n  # (integer matrices: their rank is exact)
        assert ((info > 0) <= rank_deficient).all() and (info > 0).sum() >= rank_deficient.sum() - 2
        assert np.isfinite(inverse[info == 0]).all()
        assert (info[:4] == CPU.inv(a[:4])[1]).all()  # zero, ones, zero diagonal entries: exact eliminations

    @pytest.mark.parametrize("n", [2, 3])
    def test_pivoted_inverse_of_invertible_matrices(n):
        a = np.random.default_rng(n).standard_normal((20, n, n))
        a[::2, 0, 0] = 0.0  # (a pivot search that must swap)
        w, o = np.empty_like(a), np.empty_like(a)
        assert [S.pivoted_inv_at(a, b, w, o) for b in range(len(a))] == [0] * len(a)
        np.testing.assert_allclose(o, np.linalg.inv(a), rtol=1e-10, atol=1e-12)


    def program(lib, a, b, device):
        """Solve, inverse, determinants, with a batch broadcast, a vector right-hand side and left=False."""
        A = lib.tensor(a, device=device, requires_grad=True)
        B = lib.tensor(b, device=device, requires_grad=True)
        X = lib.linalg.solve(A, B)
        v = lib.linalg.solve(A, B[..., 0])
        Y = lib.linalg.solve(A[:1], B.mT[:, :1], left=False)
        s, l = lib.linalg.slogdet(A)
        loss = (X ** 2).sum() + v.sum() + (Y * Y).sum() + lib.linalg.inv(A).sum() + (lib.linalg.det(A) ** 2).sum() + \
            l.sum() + lib.inverse(A.mT).mean() + lib.det(A).sum() + lib.logdet(A @ A.mT).sum() + \
            lib.linalg.matrix_power(A, -2).sum() + lib.linalg.solve_ex(A, B).result.mean()
        loss.backward()
        return [loss, X, v, Y, s, l, A.grad, B.grad]

    @pytest.mark.parametrize("dtype", [np.float32, np.float64])
    def test_linalg_functions_with_gradients_match_the_cpu_as_inputs_change(dtype):
        rng = np.random.default_rng(3)
        cases = [(3, (4,)), (3, (4,)), (2, (2, 3)), (3, (1,))]  # new values each call, then new shapes
        for n, shape in cases if dtype == np.float64 else cases[1:3]:  # (float32: fewer, the simulator is slow)
            a, b = batch(rng, shape, n, dtype), rng.standard_normal(shape + (n, 2)).astype(dtype)
            for got, want in zip(program(jg, a, b, "cuda"), program(jg, a, b, "cpu")):
                assert got.device.type == "cuda"
                np.testing.assert_allclose(got.detach().cpu().numpy(), want.detach().numpy(),
                                           rtol=2e-4 if dtype == np.float32 else 1e-10, atol=1e-5)

    def test_errors_are_the_cpus():
        a = np.stack([np.eye(3), singular(3)[5]])
        for device in ("cpu", "cuda"):
            A = jg.tensor(a, device=device)
            with pytest.raises(jg.linalg.LinAlgError, match=r"linalg.inv: \(Batch element 1\): The diagonal element "
                                                           r"\d is zero, the inversion could not be completed"):
                jg.linalg.inv(A)
            with pytest.raises(jg.linalg.LinAlgError, match=r"linalg.solve: \(Batch element 1\): The solver failed "
                                                           "because the input matrix is singular."):
                jg.linalg.solve(A, A)
            inverse, info = jg.linalg.inv_ex(A)
            assert info.device.type == device and info.tolist() == [0, CPU.inv(a)[1][1]]
        with pytest.raises(NotImplementedError, match="linalg inv is not implemented on CUDA: it needs cuSOLVER"):
            jg.linalg.inv(jg.eye(4, device="cuda"))
        with pytest.raises(NotImplementedError, match="linalg cholesky is not implemented on CUDA: it needs cuSOLVER"):
            jg.linalg.cholesky(jg.eye(9, device="cuda"))
        with pytest.raises(jg.linalg.LinAlgError, match="linalg.cholesky: The factorization could not be completed "
                                                       "because the input is not positive-definite \\(the leading "
                                                       "minor of order 2 is not positive-definite\\)."):
            jg.linalg.cholesky(jg.tensor([[1.0, 2.0], [2.0, 1.0]], device="cuda"))
        assert jg.linalg.det(jg.zeros(2, 0, 0, device="cuda")).tolist() == [1.0, 1.0]

    @pytest.mark.parametrize("dtype", [np.float32, np.float64])
    def test_triangular_kernels_match_the_cpu(dtype):
        rng = np.random.default_rng(5)
        for n in (1, 3, 8):
            m = rng.standard_normal((3, n, n))
            a = (m @ m.transpose(0, 2, 1) + n * np.eye(n)).astype(dtype)
            a[1, n - 1, n - 1] = -1.0  # (not positive-definite: potrf's info and partial factor)
            b = rng.standard_normal((3, n, 2)).astype(dtype)
            for upper in (False, True):
                (l, info), (cl, cinfo) = DEV.cholesky(cuda.to_device(a), upper), CPU.cholesky(a, upper)
                np.testing.assert_allclose(host(l), cl, **TOL[dtype])
                assert (host(info) == cinfo).all() and cinfo[1] == n
                for left in (True, False):
                    rhs = b if left else b.transpose(0, 2, 1).copy()
                    got = DEV.solve_triangular(cuda.to_device(np.ascontiguousarray(cl)), cuda.to_device(rhs), upper,
                                               left, not left)
                    np.testing.assert_allclose(host(got), CPU.solve_triangular(cl, rhs, upper, left, not left), **TOL[dtype])
                got = DEV.cholesky_solve(cuda.to_device(np.ascontiguousarray(cl)), cuda.to_device(b), upper)
                np.testing.assert_allclose(host(got), CPU.cholesky_solve(cl, b, upper), rtol=1e-4 if dtype == np.float32
                                           else 1e-12, atol=1e-5 if dtype == np.float32 else 1e-12)

    def test_gaussian_likelihoods_with_cholesky_factors_match_the_cpu_as_inputs_change():
        rng = np.random.default_rng(4)

        def nll(A, x):
            L = jg.linalg.cholesky(A)
            z = jg.linalg.solve_triangular(L, x, upper=False)
            w = jg.linalg.solve_triangular(L.mT, x.mT, upper=True, left=False)
            out = 0.5 * ((z * z).sum() + (x * jg.cholesky_solve(x, L)).sum()) + jg.log(L.diagonal(dim1=-2, dim2=-1)).sum()
            return out + w.mean() + jg.cholesky_inverse(L).sum()

        for batch, n in [((6,), 3), ((6,), 3), ((2, 2), 5)]:  # new values, then a new shape
            m = rng.standard_normal(batch + (n, n))
            a, x = m @ m.swapaxes(-1, -2) + n * np.eye(n), rng.standard_normal(batch + (n, 2))
            got = {}
            for device in ("cpu", "cuda"):
                A, X = jg.tensor(a, device=device, requires_grad=True), jg.tensor(x, device=device, requires_grad=True)
                out = nll(A, X)
                out.backward()
                got[device] = [t.detach().cpu().numpy() for t in (out, A.grad, X.grad)]
            for c, g in zip(got["cpu"], got["cuda"]):
                np.testing.assert_allclose(g, c, rtol=1e-10, atol=1e-12)

    def test_a_gaussian_fit_with_3x3_covariances_trains_as_on_the_cpu():
        """Per-group 3x3 covariances Sigma = L L^T + eps I fitted by SGD on the Gaussian negative log-likelihood
        (solve and slogdet), new data each step: the CUDA run follows the CPU run."""
        rng = np.random.default_rng(0)
        groups, points = 4, 16
        init = rng.standard_normal((groups, 3, 3)) * 0.3 + np.eye(3)
        runs = {}
        for device in ("cpu", "cuda"):
            data = np.random.default_rng(1)
            L = jg.tensor(init, device=device, requires_grad=True)
            opt = jg.optim.SGD([L], lr=0.05)
            for _ in range(4):
                x = jg.tensor(data.standard_normal((groups, 3, points)) * 2, device=device)
                opt.zero_grad()
                tril = L.tril()
                sigma = tril @ tril.mT + 1e-3 * jg.eye(3, device=device)
                nll = 0.5 * ((x * jg.linalg.solve(sigma, x)).sum((-2, -1)) + points * jg.linalg.slogdet(sigma)[1])
                nll.mean().backward()
                opt.step()
            runs[device] = L.detach().cpu().numpy()
        assert not np.allclose(runs["cpu"], init)
        np.testing.assert_allclose(runs["cuda"], runs["cpu"], rtol=1e-10, atol=1e-12)
