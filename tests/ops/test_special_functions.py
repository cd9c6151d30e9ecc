"""jitgrad.special beyond the generated op tests: values at the edges (poles, zeros, negative integers,
infinities, NaN, large arguments) against SciPy, float32, the gradients PyTorch defines at special points, the
functions without a gradient, errors, and the torch.special spellings."""
import math

import numpy as np
import pytest

import jitgrad as jg
from jitgrad import special as S

sp = pytest.importorskip("scipy.special")

INF, NAN = math.inf, math.nan
EDGES = np.array([0.0, -0.0, -1.0, -2.0, -2.5, 1.0, 1e-300, 1e-8, 30.0, 170.0, 1e10, 1e300, INF, -INF, NAN])


@pytest.mark.parametrize("name,ref", [
    ("gammaln", sp.gammaln), ("digamma", sp.psi), ("i0", sp.i0), ("i0e", sp.i0e), ("i1", sp.i1), ("i1e", sp.i1e),
    ("erfcx", sp.erfcx), ("ndtr", sp.ndtr), ("log_ndtr", sp.log_ndtr), ("sinc", np.sinc), ("entr", sp.entr),
    ("bessel_j0", sp.j0), ("bessel_j1", sp.j1), ("expit", sp.expit)])
def test_values_at_the_edges_against_scipy(name, ref):
    x = EDGES if name not in ("i0", "i1") else EDGES[np.abs(np.nan_to_num(EDGES)) < 700]
    got = getattr(S, name)(jg.tensor(x, dtype=jg.float64)).numpy()
    with np.errstate(all="ignore"):
        want = ref(x)
    if name == "gammaln":
        want[x == -INF] = INF  # C's lgamma(-inf) is +inf, as PyTorch's (SciPy says -inf)
    if name == "digamma":
        want[(x == 0) & np.signbit(x)] = got[(x == 0) & np.signbit(x)]  # (fast-math may drop -0's sign)
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-300, equal_nan=True)


def test_float32_within_a_few_ulp_of_scipy():
    x = np.linspace(0.05, 20, 400)
    for name, ref in [("gammaln", sp.gammaln), ("digamma", sp.psi), ("i0e", sp.i0e), ("i1e", sp.i1e),
                      ("erfcx", sp.erfcx), ("log_ndtr", lambda v: sp.log_ndtr(-v))]:
        arg = -x if name == "log_ndtr" else x
        got = getattr(S, name)(jg.tensor(arg, dtype=jg.float32))
        assert got.dtype is jg.float32
        np.testing.assert_allclose(got.numpy(), ref(x.astype(np.float32).astype(np.float64)), rtol=2e-6, atol=1e-7)
    p = np.linspace(0.001, 0.999, 300)
    np.testing.assert_allclose(S.ndtri(jg.tensor(p, dtype=jg.float32)).numpy(), sp.ndtri(p.astype(np.float32)),
                               rtol=1e-5, atol=1e-6)


def test_gamma_family_poles_and_large_arguments():
    x = jg.tensor([0.0, -1.0, -3.0, -0.5, 1e6], dtype=jg.float64)
    assert jg.lgamma(x).tolist()[:3] == [INF, INF, INF]
    d = jg.digamma(x).numpy()
    assert d[0] == -INF and np.isnan(d[1]) and np.isnan(d[2])
    np.testing.assert_allclose(d[3:], sp.psi([-0.5, 1e6]), rtol=1e-14)
    for n in (1, 2, 3, 5):
        v = np.array([-2.5, -0.3, 0.01, 0.7, 4.0, 60.0])
        np.testing.assert_allclose(jg.polygamma(n, jg.tensor(v)).numpy(), sp.polygamma(n, v), rtol=1e-11)
    assert jg.polygamma(1, jg.tensor([0.0, -2.0])).tolist() == [INF, INF]
    np.testing.assert_allclose(S.multigammaln(jg.tensor([2.5, 7.0], dtype=jg.float64), 4).numpy(),
                               [sp.multigammaln(2.5, 4), sp.multigammaln(7.0, 4)], rtol=1e-13)
    np.testing.assert_allclose(S.zeta(jg.tensor([2.0, 3.0, 4.5], dtype=jg.float64),
                                      jg.tensor([1.0, -2.5, 0.2], dtype=jg.float64)).numpy(),
                               sp.zeta([2.0, 3.0, 4.5], [1.0, -2.5, 0.2]), rtol=1e-13)
    assert S.zeta(jg.tensor([1.0, 0.5, 2.0]), jg.tensor([1.0, 1.0, -1.0])).numpy().tolist()[0] == INF


def test_xlogy_family_at_zero():
    x = jg.tensor([0.0, 0.0, 0.0, 2.0], requires_grad=True)
    y = jg.tensor([0.0, 3.0, NAN, 0.0], requires_grad=True)
    out = jg.xlogy(x, y)
    assert out.tolist()[:2] == [0.0, 0.0] and math.isnan(out.tolist()[2]) and out.tolist()[3] == -INF
    out[:3].sum().backward()
    # PyTorch: d/dx = xlogy(x != 0, y): 0 at x = 0 unless y is NaN; d/dy = x / y
    assert x.grad.tolist()[:2] == [0.0, 0.0] and math.isnan(x.grad.tolist()[2])
    assert S.xlog1py(jg.tensor([0.0, 2.0], dtype=jg.float64), jg.tensor([-1.0, 1.0], dtype=jg.float64)).tolist() \
        == [0.0, 2 * math.log(2)]
    assert jg.xlogy(2.0, jg.tensor([math.e], dtype=jg.float64)).tolist() == [2.0]
    assert jg.tensor([3.0]).xlogy(1.0).tolist() == [0.0]
    assert S.entr(jg.tensor([0.0, -1.0])).tolist() == [0.0, -INF]


def test_gradients_at_special_points():
    x = jg.tensor([0.0, 1.0], dtype=jg.float64, requires_grad=True)
    S.i1(x).sum().backward()
    assert x.grad.tolist()[0] == 0.5  # PyTorch's value at 0
    x.grad = None
    S.i1e(x).sum().backward()
    assert x.grad.tolist()[0] == 0.5
    x.grad = None
    jg.sinc(x).sum().backward()
    assert x.grad.tolist() == [0.0, -1.0]
    p = jg.tensor([0.05, 0.5, 0.97], requires_grad=True)
    jg.logit(p, eps=0.1).sum().backward()
    assert p.grad.tolist()[0] == 0.0 and p.grad.tolist()[2] == 0.0 and p.grad.tolist()[1] == 4.0
    q = jg.tensor([-0.5, 1.5], requires_grad=True)
    jg.logit(q).sum().backward()
    assert np.isnan(q.grad.numpy()).all()


def test_second_derivatives_through_the_formulas():
    from jitgrad.autograd import gradgradcheck
    for f in (jg.lgamma, jg.digamma, lambda t: jg.polygamma(2, t), jg.i0, S.i1e, S.ndtri, S.log_ndtr, S.erfcx,
              lambda t: jg.mvlgamma(t, 3)):
        x = jg.tensor([1.3, 2.7], dtype=jg.float64, requires_grad=True)
        arg = (x / 4) if f is S.ndtri else x
        assert gradgradcheck(lambda t: f(t / 4 if f is S.ndtri else t), (x,)), f
        del arg


def test_functions_without_a_gradient_and_errors():
    x = jg.tensor([1.5, 2.0], requires_grad=True)
    for y in (S.bessel_j0(x), S.bessel_j1(x), S.zeta(x + 1, x)):
        assert not y.requires_grad and y.grad_fn is None
    with pytest.raises(RuntimeError, match="polygamma\\(n, x\\) does not support negative n."):
        jg.polygamma(-1, x)
    with pytest.raises(RuntimeError, match="All elements must be greater than \\(p-1\\)/2"):
        jg.mvlgamma(jg.tensor([1.0]), 3)
    with pytest.raises(RuntimeError, match="p has to be greater than or equal to 1"):
        jg.mvlgamma(jg.tensor([1.0]), 0)


def test_spellings_methods_and_in_place_forms():
    x = jg.tensor([0.3, 1.7])
    assert S.psi is S.digamma and S.gammaln(x).tolist() == jg.lgamma(x).tolist()
    assert S.expit(x).tolist() == jg.sigmoid(x).tolist()
    assert x.polygamma(1).tolist() == jg.polygamma(1, x).tolist() == S.polygamma(1, x).tolist()
    np.testing.assert_allclose(x.mvlgamma(1).numpy(), x.lgamma().numpy(), rtol=1e-6)
    assert x.digamma().tolist() == S.digamma(x).tolist()
    assert x.i0().tolist() == S.i0(x).tolist() and x.sinc().tolist() == S.sinc(x).tolist()
    assert x.logit(0.4).tolist() == S.logit(x, eps=0.4).tolist()
    for name, args in [("lgamma_", ()), ("digamma_", ()), ("polygamma_", (2,)), ("mvlgamma_", (1,)), ("i0_", ()),
                       ("sinc_", ()), ("logit_", ()), ("xlogy_", (2.0,))]:
        t = x.clone()
        want = getattr(x, name[:-1])(*args)
        assert getattr(t, name)(*args) is t
        np.testing.assert_array_equal(t.numpy(), want.numpy())
    assert S.softmax(x, 0).tolist() == jg.softmax(x, 0).tolist() and S.log_softmax(x, dim=0).shape == (2,)
    assert S.logsumexp(x, 0).item() == pytest.approx(np.log(np.exp(x.numpy()).sum()), rel=1e-6)
    assert S.multigammaln(x + 2, 2).shape == (2,) and S.erfinv(jg.tensor([0.0])).tolist() == [0.0]
    for n in ("erf", "erfc", "exp2", "expm1", "log1p", "round", "ndtr", "entr", "i1", "xlog1py"):
        assert callable(getattr(S, n))
    assert jg.lgamma(jg.tensor([3])).dtype is jg.float32


@pytest.mark.torch
def test_values_and_gradients_match_pytorch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    x = rng.uniform(0.1, 6.0, 20)
    for name, kw in [("gammaln", {}), ("digamma", {}), ("i0", {}), ("i0e", {}), ("i1", {}), ("i1e", {}),
                     ("erfcx", {}), ("ndtr", {}), ("log_ndtr", {}), ("sinc", {}), ("entr", {}), ("bessel_j1", {})]:
        ours = jg.tensor(x, requires_grad=True)
        theirs = torch.tensor(x, requires_grad=True)
        a, b = getattr(S, name)(ours, **kw), getattr(torch.special, name)(theirs, **kw)
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-12 if name != "bessel_j1" else 1e-6)
        if b.requires_grad:
            a.sum().backward()
            b.sum().backward()
            np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-9)
    for n in (0, 1, 2, 4):
        np.testing.assert_allclose(jg.polygamma(n, jg.tensor(x)).numpy(), torch.polygamma(n, torch.tensor(x)).numpy(),
                                   rtol=1e-8)
    np.testing.assert_allclose(jg.mvlgamma(jg.tensor(x + 2), 3).numpy(), torch.mvlgamma(torch.tensor(x + 2), 3).numpy(),
                               rtol=1e-13)
    np.testing.assert_allclose(S.ndtri(jg.tensor(x / 7)).numpy(), torch.special.ndtri(torch.tensor(x / 7)).numpy(),
                               rtol=1e-13)
