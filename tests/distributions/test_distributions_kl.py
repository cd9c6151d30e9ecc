"""kl_divergence: every registered pair against Monte Carlo on a fixed seed (E_p[log p - log q]) or a closed form
from SciPy; register_kl dispatch; MultivariateNormal."""
import math

import numpy as np
import pytest

import jitgrad as jg
from jitgrad import distributions as D

stats = pytest.importorskip("scipy.stats")


def T(*v):
    return jg.tensor(np.asarray(v, dtype=np.float64))


PAIRS = {
    "normal": (lambda: D.Normal(T(0.0, 1.0), T(1.0, 0.5)), lambda: D.Normal(T(0.5, -1.0), T(2.0, 1.5))),
    "gamma": (lambda: D.Gamma(T(2.0, 0.7), T(1.0, 3.0)), lambda: D.Gamma(T(3.0, 1.5), T(2.0, 1.0))),
    "beta": (lambda: D.Beta(T(2.0, 0.8), T(3.0, 1.5)), lambda: D.Beta(T(1.0, 2.0), T(1.5, 0.5))),
    "exponential": (lambda: D.Exponential(T(1.0, 3.0)), lambda: D.Exponential(T(2.0, 0.5))),
    "laplace": (lambda: D.Laplace(T(0.0, 1.0), T(1.0, 2.0)), lambda: D.Laplace(T(1.0, -1.0), T(2.0, 0.5))),
    "gumbel": (lambda: D.Gumbel(T(0.0, 1.0), T(1.0, 2.0)), lambda: D.Gumbel(T(1.0, 0.0), T(1.5, 1.0))),
    "lognormal": (lambda: D.LogNormal(T(0.0, 1.0), T(1.0, 0.5)), lambda: D.LogNormal(T(0.5, 0.0), T(0.8, 1.0))),
    "halfnormal": (lambda: D.HalfNormal(T(1.0, 2.0)), lambda: D.HalfNormal(T(2.0, 0.7))),
    "dirichlet": (lambda: D.Dirichlet(T(1.0, 2.0, 3.0)), lambda: D.Dirichlet(T(2.0, 2.0, 1.0))),
    "independent": (lambda: D.Independent(D.Normal(T(0.0, 1.0), T(1.0, 0.5)), 1),
                    lambda: D.Independent(D.Normal(T(0.5, -1.0), T(2.0, 1.5)), 1)),
    "exponential_gamma": (lambda: D.Exponential(T(1.0, 3.0)), lambda: D.Gamma(T(2.0, 0.5), T(1.0, 2.0))),
    "gamma_exponential": (lambda: D.Gamma(T(2.0, 0.5), T(1.0, 2.0)), lambda: D.Exponential(T(1.0, 3.0))),
    "normal_laplace": (lambda: D.Normal(T(0.0, 1.0), T(1.0, 0.5)), lambda: D.Laplace(T(1.0, -1.0), T(2.0, 0.5))),
    "normal_gumbel": (lambda: D.Normal(T(0.0, 1.0), T(1.0, 0.5)), lambda: D.Gumbel(T(1.0, 0.0), T(1.5, 1.0))),
    "uniform_normal": (lambda: D.Uniform(T(0.0, -1.0), T(1.0, 3.0)), lambda: D.Normal(T(0.5, 0.0), T(2.0, 1.0))),
    "uniform_exponential": (lambda: D.Uniform(T(0.0, 1.0), T(1.0, 3.0)), lambda: D.Exponential(T(2.0, 0.5))),
    "uniform": (lambda: D.Uniform(T(0.0, 1.0), T(1.0, 2.0)), lambda: D.Uniform(T(-1.0, 0.0), T(2.0, 5.0))),
}


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_kl_against_monte_carlo(name):
    p, q = PAIRS[name][0](), PAIRS[name][1]()
    kl = D.kl_divergence(p, q).numpy()
    jg.manual_seed(0)
    x = p.sample((200000,))
    mc = (p.log_prob(x) - q.log_prob(x)).numpy()
    se = mc.std(axis=0) / math.sqrt(mc.shape[0])
    assert kl.shape == mc.shape[1:]
    assert (np.abs(mc.mean(axis=0) - kl) < 5 * se + 1e-3).all(), (mc.mean(axis=0), kl)


def test_discrete_kl_in_closed_form():
    p, q = np.array([0.2, 0.5, 0.3]), np.array([0.4, 0.4, 0.2])
    kl = (p * np.log(p / q)).sum()
    np.testing.assert_allclose(D.kl_divergence(D.Categorical(jg.tensor(p)), D.Categorical(jg.tensor(q))).item(), kl)
    np.testing.assert_allclose(D.kl_divergence(D.OneHotCategorical(jg.tensor(p)),
                                               D.OneHotCategorical(jg.tensor(q))).item(), kl)
    b = D.kl_divergence(D.Bernoulli(T(0.3)), D.Bernoulli(T(0.6))).item()
    assert b == pytest.approx(0.3 * math.log(0.3 / 0.6) + 0.7 * math.log(0.7 / 0.4), rel=1e-10)
    k = np.arange(0, 60)
    po = D.kl_divergence(D.Poisson(T(3.0)), D.Poisson(T(5.0))).item()
    pp, pq = stats.poisson(3), stats.poisson(5)
    assert po == pytest.approx((pp.pmf(k) * (pp.logpmf(k) - pq.logpmf(k))).sum())
    g = D.kl_divergence(D.Geometric(T(0.3)), D.Geometric(T(0.6))).item()
    gp, gq = stats.geom(0.3, loc=-1), stats.geom(0.6, loc=-1)
    k = np.arange(0, 300)
    assert g == pytest.approx((gp.pmf(k) * (gp.logpmf(k) - gq.logpmf(k))).sum(), rel=1e-8)
    bi = D.kl_divergence(D.Binomial(T(10.0), T(0.3)), D.Binomial(T(10.0), T(0.5))).item()
    k = np.arange(11)
    bp, bq = stats.binom(10, 0.3), stats.binom(10, 0.5)
    assert bi == pytest.approx((bp.pmf(k) * (bp.logpmf(k) - bq.logpmf(k))).sum(), rel=1e-10)
    assert D.kl_divergence(D.Uniform(T(0.0), T(2.0)), D.Uniform(T(0.5), T(1.0))).item() == math.inf


def test_kl_is_differentiable():
    loc = T(0.3).requires_grad_()
    D.kl_divergence(D.Normal(loc, T(1.0)), D.Normal(T(0.0), T(1.0))).sum().backward()
    assert loc.grad.item() == pytest.approx(0.3)


def test_register_kl_picks_the_most_specific_pair():
    class MyNormal(D.Normal):
        pass

    @D.register_kl(MyNormal, D.Normal)
    def _kl(p, q):
        return jg.tensor(-1.0)
    assert D.kl_divergence(MyNormal(0.0, 1.0), D.Normal(0.0, 1.0)).item() == -1.0
    assert D.kl_divergence(D.Normal(0.0, 1.0), MyNormal(0.0, 1.0)).item() == 0.0
    with pytest.raises(TypeError):
        D.register_kl("Normal", D.Normal)


# ------------------------------------------------------------------ MultivariateNormal


def test_multivariate_normal_against_scipy():
    loc = T(0.5, -1.0, 2.0)
    A = np.array([[2.0, 0.3, 0.1], [0.3, 1.0, -0.2], [0.1, -0.2, 0.5]])
    x = np.array([[0.1, 0.2, 0.3], [1.0, -1.0, 2.5]])
    ref = stats.multivariate_normal(loc.numpy(), A)
    for d in (D.MultivariateNormal(loc, covariance_matrix=jg.tensor(A)),
              D.MultivariateNormal(loc, precision_matrix=jg.tensor(np.linalg.inv(A))),
              D.MultivariateNormal(loc, scale_tril=jg.tensor(np.linalg.cholesky(A)))):
        np.testing.assert_allclose(d.log_prob(jg.tensor(x)).numpy(), ref.logpdf(x), rtol=1e-10)
        np.testing.assert_allclose(d.entropy().numpy(), ref.entropy(), rtol=1e-10)
        np.testing.assert_allclose(d.covariance_matrix.numpy(), A, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(d.precision_matrix.numpy(), np.linalg.inv(A), rtol=1e-9)
        np.testing.assert_allclose(d.variance.numpy(), np.diag(A), rtol=1e-10)
    W, dg = np.array([[1.0], [0.5], [-0.3]]), np.array([0.5, 1.0, 0.2])
    lr = D.LowRankMultivariateNormal(loc, jg.tensor(W), jg.tensor(dg))
    cov = W @ W.T + np.diag(dg)
    np.testing.assert_allclose(lr.log_prob(jg.tensor(x)).numpy(), stats.multivariate_normal(loc.numpy(), cov).logpdf(x),
                               rtol=1e-10)
    np.testing.assert_allclose(lr.covariance_matrix.numpy(), cov, rtol=1e-12)
    p = D.MultivariateNormal(loc, covariance_matrix=jg.tensor(A))
    q = D.MultivariateNormal(loc * 0, covariance_matrix=jg.tensor(cov))
    kl = 0.5 * (np.trace(np.linalg.solve(cov, A)) + loc.numpy() @ np.linalg.solve(cov, loc.numpy()) - 3
                + np.log(np.linalg.det(cov) / np.linalg.det(A)))
    np.testing.assert_allclose(D.kl_divergence(p, q).item(), kl, rtol=1e-10)
    jg.manual_seed(0)
    s = p.rsample((20000,)).numpy()
    np.testing.assert_allclose(np.cov(s.T), A, atol=0.06)


def test_multivariate_normal_arguments_are_checked_before_any_factorization():
    with pytest.raises(ValueError, match="Exactly one of covariance_matrix or precision_matrix or scale_tril may be "
                                         "specified."):
        D.MultivariateNormal(jg.zeros(2))
    with pytest.raises(ValueError, match="loc must be at least one-dimensional."):
        D.MultivariateNormal(jg.tensor(0.0), scale_tril=jg.eye(1))
