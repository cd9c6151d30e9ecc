"""eigh with vectors of one matrix of order 256-512 on two threads (kernels/eigh.py: sytrd, then stedc beside orgtr,
then Q Z as one GEMM) against syevd's own call: the same eigenvalues, the same eigenvectors to rounding (signs
included), repeated calls bitwise equal (the two threads' LAPACK calls share no arrays), matrices syevd would scale
or that hold NaNs left to syevd, and the public eigh / eigvalsh with their gradients."""
import numba
import numpy as np
import pytest

import jitgrad as jg
from jitgrad.kernels import _background, config
from jitgrad.kernels import eigh as threaded
from jitgrad.kernels import linalg as K


@pytest.fixture(scope="module")
def built():
    """The parallel build in the cache (on an empty cache it compiles in the background, syevd running meanwhile),
    or a skip where the split does not apply here."""
    probe = np.eye(threaded.SMALLEST)[None]
    if config.lapack_threads() is None or not threaded.applies(probe):
        pytest.skip("one numba thread, or SciPy's LAPACK not on OpenBLAS: syevd's own call runs")
    threaded.precompile(("float32", "float64"))
    assert _background.wait(600)


def _syevd(s, lower, monkeypatch):
    """eigh of ``s`` by syevd's own call (the split turned off)."""
    with monkeypatch.context() as m:
        m.setattr(threaded, "SMALLEST", 10 ** 9)
        return K.eigh(s, lower, True)


def _symmetric(n, dtype, seed, scale=1.0):
    x = np.random.default_rng(seed).standard_normal((n, n))
    return ((x.T @ x / n + np.eye(n)) * scale).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n,lower", [(256, True), (300, False), (512, True)])
def test_split_eigh_matches_syevd(n, lower, dtype, built, monkeypatch):
    s = _symmetric(n, dtype, n)
    calls = []
    real = threaded.eigh
    monkeypatch.setattr(threaded, "eigh", lambda *args: calls.append(1) or real(*args))
    w, v = K.eigh(s, lower, True)
    assert calls == [1]
    w0, v0 = _syevd(s, lower, monkeypatch)
    tol = 2e-4 if dtype == np.float32 else 1e-11
    assert w.dtype == v.dtype == dtype and v.flags.f_contiguous
    np.testing.assert_array_equal(w, w0)  # (sytrd and stedc as syevd runs them)
    np.testing.assert_allclose(v, v0, atol=tol)  # (the same signs: Q Z is ormtr's product)
    big = s.astype(np.float64)
    np.testing.assert_allclose((v * w) @ v.T, big, atol=tol * np.abs(big).max())
    np.testing.assert_allclose(v.T @ v, np.eye(n), atol=tol)


def test_split_eigh_is_the_same_every_call(built):
    for dtype in (np.float32, np.float64):
        s = _symmetric(256, dtype, 3)
        first = K.eigh(s, True, True)
        for _ in range(40):
            w, v = K.eigh(s, True, True)
            assert np.array_equal(w, first[0]) and np.array_equal(v, first[1])


def test_what_syevd_would_scale_goes_to_syevd(built, monkeypatch):
    """A matrix whose largest element lies below syevd's rmin (or holds a NaN) takes syevd's own call, as the
    scaling it needs is syevd's: no Q Z product is formed for it."""
    calls = []
    real = threaded.blas.matmul
    monkeypatch.setattr(threaded.blas, "matmul", lambda *args, **kw: calls.append(1) or real(*args, **kw))
    tiny = _symmetric(256, np.float64, 5, 1e-160)
    w, v = K.eigh(tiny, True, True)
    w0, v0 = _syevd(tiny, True, monkeypatch)
    np.testing.assert_array_equal(w, w0)
    np.testing.assert_allclose(v, v0, atol=1e-11)
    nan = _symmetric(256, np.float64, 6)
    nan[7, 7] = np.nan
    w, v = K.eigh(nan, True, True)
    w0, v0 = _syevd(nan, True, monkeypatch)
    np.testing.assert_array_equal(np.isnan(w), np.isnan(w0))
    assert not calls
    K.eigh(_symmetric(256, np.float64, 7), True, True)  # (an ordinary one is split: one Q Z product)
    assert calls == [1]


def test_public_eigh_and_eigvalsh_gradients(built):
    """jitgrad.linalg.eigh and eigvalsh of order 256 with gradients: NumPy's values, the formulas' gradients."""
    s = _symmetric(256, np.float64, 8)
    c = np.random.default_rng(9).standard_normal(256)
    A = jg.tensor(s, requires_grad=True)
    w = jg.linalg.eigvalsh(A)
    np.testing.assert_allclose(w.detach().numpy(), np.linalg.eigvalsh(s), rtol=1e-12, atol=1e-12)
    (w * jg.tensor(c)).sum().backward()
    w0, v0 = np.linalg.eigh(s)
    np.testing.assert_allclose(A.grad.numpy(), (v0 * c) @ v0.T, atol=1e-10)
    B = jg.tensor(s, requires_grad=True)
    w, v = jg.linalg.eigh(B)
    np.testing.assert_allclose(np.abs(v.detach().numpy().T @ v0), np.eye(256), atol=1e-8)
    ((v ** 2)[:, :8].sum() + w.sum()).backward()  # (gauge-invariant: squares of the vectors)
    eps = 1e-6
    d = np.zeros((256, 256))
    d[3, 5] = d[5, 3] = 1.0
    f = lambda m: (np.linalg.eigh(m)[1] ** 2)[:, :8].sum() + np.linalg.eigvalsh(m).sum()  # noqa: E731
    numeric = (f(s + eps * d) - f(s - eps * d)) / (2 * eps)
    assert abs((B.grad.numpy() * d).sum() - numeric) < 1e-5
    assert numba.get_num_threads() > 1
