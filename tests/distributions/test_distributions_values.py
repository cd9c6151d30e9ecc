"""jitgrad.distributions against scipy.stats: log_prob, entropy, cdf, icdf, mean, variance, mode; sample moments
on a fixed seed; reparameterized gradients by gradcheck and against analytic ones; shapes; validation errors."""
import math

import numpy as np
import pytest

import jitgrad as jg
from jitgrad import distributions as D
from jitgrad.autograd import gradcheck

stats = pytest.importorskip("scipy.stats")
special = pytest.importorskip("scipy.special")


def T(*v):
    return jg.tensor(np.asarray(v, dtype=np.float64))


# family -> (distribution, scipy frozen distribution with the same batch of parameters, values inside the support)
CASES = {
    "Normal": (lambda: D.Normal(T(0.0, 1.5), T(1.0, 0.5)), stats.norm([0.0, 1.5], [1.0, 0.5]), T(0.3, 2.0)),
    "LogNormal": (lambda: D.LogNormal(T(0.0, 0.5), T(1.0, 0.3)), stats.lognorm([1.0, 0.3], scale=np.exp([0.0, 0.5])),
                  T(0.7, 1.9)),
    "HalfNormal": (lambda: D.HalfNormal(T(1.0, 2.5)), stats.halfnorm(scale=[1.0, 2.5]), T(0.4, 3.0)),
    "Uniform": (lambda: D.Uniform(T(-1.0, 2.0), T(3.0, 2.5)), stats.uniform([-1.0, 2.0], [4.0, 0.5]), T(0.5, 2.2)),
    "Exponential": (lambda: D.Exponential(T(0.5, 3.0)), stats.expon(scale=[2.0, 1 / 3.0]), T(1.2, 0.1)),
    "Laplace": (lambda: D.Laplace(T(0.0, -1.0), T(1.0, 2.0)), stats.laplace([0.0, -1.0], [1.0, 2.0]), T(0.5, -3.0)),
    "Cauchy": (lambda: D.Cauchy(T(0.0, 1.0), T(1.0, 0.5)), stats.cauchy([0.0, 1.0], [1.0, 0.5]), T(0.5, -2.0)),
    "Gumbel": (lambda: D.Gumbel(T(0.0, 1.0), T(1.0, 2.0)), stats.gumbel_r([0.0, 1.0], [1.0, 2.0]), T(0.5, -1.0)),
    "StudentT": (lambda: D.StudentT(T(3.0, 10.0), T(0.0, 1.0), T(1.0, 2.0)), stats.t([3.0, 10.0], [0.0, 1.0],
                                                                                     [1.0, 2.0]), T(0.4, -1.5)),
    "Gamma": (lambda: D.Gamma(T(0.5, 3.0), T(1.0, 2.0)), stats.gamma([0.5, 3.0], scale=[1.0, 0.5]), T(0.3, 1.7)),
    "Chi2": (lambda: D.Chi2(T(1.0, 4.0)), stats.chi2([1.0, 4.0]), T(0.5, 3.0)),
    "Beta": (lambda: D.Beta(T(0.5, 2.0), T(0.7, 5.0)), stats.beta([0.5, 2.0], [0.7, 5.0]), T(0.3, 0.25)),
    "Bernoulli": (lambda: D.Bernoulli(T(0.3, 0.8)), stats.bernoulli([0.3, 0.8]), T(1.0, 0.0)),
    "Binomial": (lambda: D.Binomial(T(10.0, 4.0), T(0.3, 0.8)), stats.binom([10, 4], [0.3, 0.8]), T(3.0, 4.0)),
    "Poisson": (lambda: D.Poisson(T(0.5, 7.0)), stats.poisson([0.5, 7.0]), T(0.0, 9.0)),
    "Geometric": (lambda: D.Geometric(T(0.3, 0.8)), stats.geom([0.3, 0.8], loc=-1), T(2.0, 0.0)),
}
METHODS = {"cdf": ("Normal", "LogNormal", "HalfNormal", "Uniform", "Exponential", "Laplace", "Cauchy", "Gumbel"),
           "icdf": ("Normal", "LogNormal", "HalfNormal", "Uniform", "Exponential", "Laplace", "Cauchy", "Gumbel"),
           "entropy": tuple(n for n in CASES if n not in ("Binomial", "Poisson", "Gumbel")) + ("Gumbel",)}


@pytest.mark.parametrize("name", sorted(CASES))
def test_log_prob_mean_variance_against_scipy(name):
    make, ref, values = CASES[name]
    d = make()
    x = values.numpy()
    want = ref.logpmf(x) if hasattr(ref, "logpmf") else ref.logpdf(x)
    np.testing.assert_allclose(d.log_prob(values).numpy(), want, rtol=1e-10, atol=1e-12)
    if name != "Cauchy":
        np.testing.assert_allclose(d.mean.numpy(), ref.mean(), rtol=1e-10)
        np.testing.assert_allclose(d.variance.numpy(), ref.var(), rtol=1e-10)
    assert d.batch_shape == (2,) and d.event_shape == ()


@pytest.mark.parametrize("name", METHODS["entropy"])
def test_entropy_against_scipy(name):
    make, ref, _ = CASES[name]
    np.testing.assert_allclose(make().entropy().numpy(), ref.entropy(), rtol=1e-9)


@pytest.mark.parametrize("name", METHODS["cdf"])
def test_cdf_and_icdf_against_scipy(name):
    make, ref, values = CASES[name]
    d = make()
    np.testing.assert_allclose(d.cdf(values).numpy(), ref.cdf(values.numpy()), rtol=1e-10)
    q = T(0.2, 0.9)
    np.testing.assert_allclose(d.icdf(q).numpy(), ref.ppf(q.numpy()), rtol=1e-9)


def test_categorical_family():
    p = np.array([[0.2, 0.5, 0.3], [0.1, 0.1, 0.8]])
    c = D.Categorical(probs=jg.tensor(p * 4))  # (normalized by the distribution)
    v = jg.tensor([2, 0])
    np.testing.assert_allclose(c.log_prob(v).numpy(), np.log(p[[0, 1], [2, 0]]), rtol=1e-6)
    np.testing.assert_allclose(c.entropy().numpy(), stats.entropy(p, axis=1), rtol=1e-6)
    assert c.batch_shape == (2,) and c.mode.tolist() == [1, 2]
    logits = D.Categorical(logits=jg.tensor(np.log(p)))
    np.testing.assert_allclose(logits.probs.numpy(), p, rtol=1e-6)
    oh = D.OneHotCategorical(jg.tensor(p))
    assert oh.event_shape == (3,) and oh.sample((4,)).shape == (4, 2, 3)
    np.testing.assert_allclose(oh.log_prob(jg.tensor([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]])).numpy(),
                               np.log(p[[0, 1], [2, 0]]), rtol=1e-6)
    m = D.Multinomial(5, jg.tensor(p, dtype=jg.float64))
    counts = np.array([[1.0, 3.0, 1.0], [0.0, 0.0, 5.0]])
    np.testing.assert_allclose(m.log_prob(jg.tensor(counts)).numpy(), stats.multinomial(5, p).logpmf(counts),
                               rtol=1e-10)
    np.testing.assert_allclose(m.entropy().numpy(), stats.multinomial(5, p).entropy(), rtol=1e-9)
    s = m.sample((7,))
    assert s.shape == (7, 2, 3) and (s.sum(-1).numpy() == 5).all()


def test_dirichlet():
    a = np.array([0.5, 2.0, 3.0])
    d = D.Dirichlet(jg.tensor(a))
    x = np.array([0.2, 0.3, 0.5])
    np.testing.assert_allclose(d.log_prob(jg.tensor(x)).numpy(), stats.dirichlet(a).logpdf(x), rtol=1e-10)
    np.testing.assert_allclose(d.entropy().numpy(), stats.dirichlet(a).entropy(), rtol=1e-10)
    np.testing.assert_allclose(d.mean.numpy(), stats.dirichlet(a).mean(), rtol=1e-12)
    np.testing.assert_allclose(d.variance.numpy(), stats.dirichlet(a).var(), rtol=1e-12)
    assert d.event_shape == (3,) and d.batch_shape == ()


@pytest.mark.parametrize("name,make,mean,var", [
    ("Normal", lambda: D.Normal(T(1.0), T(2.0)), 1.0, 4.0),
    ("Gamma", lambda: D.Gamma(T(2.5), T(2.0)), 1.25, 0.625),
    ("Beta", lambda: D.Beta(T(2.0), T(3.0)), 0.4, 0.04),
    ("StudentT", lambda: D.StudentT(T(5.0)), 0.0, 5 / 3),
    ("Laplace", lambda: D.Laplace(T(0.5), T(1.5)), 0.5, 4.5),
    ("Gumbel", lambda: D.Gumbel(T(0.0), T(1.0)), 0.5772156649, math.pi ** 2 / 6),
    ("Poisson", lambda: D.Poisson(T(3.0)), 3.0, 3.0),
    ("Binomial", lambda: D.Binomial(T(8.0), T(0.25)), 2.0, 1.5),
    ("Geometric", lambda: D.Geometric(T(0.4)), 1.5, 3.75),
    ("Exponential", lambda: D.Exponential(T(2.0)), 0.5, 0.25),
])
def test_sample_moments(name, make, mean, var):
    jg.manual_seed(0)
    s = make().sample((40000,)).numpy()
    assert s.shape == (40000, 1)
    assert abs(s.mean() - mean) < 4 * math.sqrt(var / 40000) + 1e-9
    assert abs(s.var() - var) < 0.05 * var


def test_sampling_follows_the_seed():
    jg.manual_seed(3)
    a = D.Normal(0.0, 1.0).sample((5,))
    jg.manual_seed(3)
    assert D.Normal(0.0, 1.0).sample((5,)).tolist() == a.tolist()
    assert D.Normal(0.0, 1.0).sample((5,)).tolist() != a.tolist()


# ------------------------------------------------------------------ reparameterized gradients
def test_rsample_gradients_by_gradcheck_with_fixed_noise():
    def normal(loc, scale):
        jg.manual_seed(1)
        return D.Normal(loc, scale).rsample((3,))

    def laplace(loc, scale):
        jg.manual_seed(1)
        return D.Laplace(loc, scale).rsample((3,))

    def lognormal(loc, scale):
        jg.manual_seed(1)
        return D.LogNormal(loc, scale).rsample((3,))
    for fn in (normal, laplace, lognormal):
        assert gradcheck(fn, (T(0.5, -1.0).requires_grad_(), T(1.0, 2.0).requires_grad_()))


def test_gamma_rsample_gradient_matches_the_implicit_derivative():
    """d x / d alpha for x ~ Gamma(alpha, rate) = (standard gamma's gradient at fixed CDF) / rate: checked against
    -(dF/dalpha) / pdf from SciPy's regularized incomplete gamma function."""
    jg.manual_seed(0)
    alpha = T(0.7, 2.0, 9.0).requires_grad_()
    rate = T(2.0, 1.0, 0.5).requires_grad_()
    x = D.Gamma(alpha, rate).rsample()
    x.sum().backward()
    a, r, z = alpha.detach().numpy(), rate.detach().numpy(), x.detach().numpy() * rate.detach().numpy()
    h = 1e-6
    dF = (special.gammainc(a + h, z) - special.gammainc(a - h, z)) / (2 * h)
    np.testing.assert_allclose(alpha.grad.numpy(), -dF / stats.gamma(a).pdf(z) / r, rtol=5e-3)
    np.testing.assert_allclose(rate.grad.numpy(), -z / r ** 2, rtol=1e-6)


def test_beta_and_dirichlet_rsample_are_differentiable_and_on_the_support():
    jg.manual_seed(0)
    c = T(2.0, 0.5, 3.0).requires_grad_()
    s = D.Dirichlet(c).rsample((100,))
    assert s.shape == (100, 3) and np.allclose(s.detach().numpy().sum(-1), 1)
    (s[:, 0]).sum().backward()
    assert c.grad[0] > 0 and c.grad[1] < 0 and c.grad[2] < 0  # more mass to the first coordinate
    a, b = T(2.0).requires_grad_(), T(3.0).requires_grad_()
    x = D.Beta(a, b).rsample((2000,))
    x.mean().backward()
    # d E[x] / d a = b / (a + b)^2 = 0.12, d / d b = -a / (a + b)^2 = -0.08 (Monte Carlo, fixed seed)
    assert abs(a.grad.item() - 0.12) < 0.02 and abs(b.grad.item() + 0.08) < 0.02


def test_relaxed_distributions():
    jg.manual_seed(0)
    logits = T(0.3, -1.0, 2.0).requires_grad_()
    d = D.RelaxedOneHotCategorical(jg.tensor(0.5, dtype=jg.float64), logits=logits)
    s = d.rsample((5,))
    assert s.shape == (5, 3) and np.allclose(s.detach().numpy().sum(-1), 1)
    d.log_prob(s.detach()).sum().backward()
    assert logits.grad is not None and np.isfinite(logits.grad.numpy()).all()
    b = D.RelaxedBernoulli(jg.tensor(0.3, dtype=jg.float64), probs=T(0.2, 0.7))
    x = b.rsample((4,))
    assert x.shape == (4, 2) and ((x > 0) & (x < 1)).all()
    # log_prob of the Concrete density at a point: the logit density plus the sigmoid's Jacobian
    y = T(0.25, 0.6)
    t, lg = 0.3, np.log([0.2 / 0.8, 0.7 / 0.3])
    z = np.log(y.numpy() / (1 - y.numpy()))
    diff = lg - z * t
    want = np.log(t) + diff - 2 * np.log1p(np.exp(diff)) - np.log(y.numpy() * (1 - y.numpy()))
    np.testing.assert_allclose(b.log_prob(y).numpy(), want, rtol=1e-10)


# ------------------------------------------------------------------ shapes
def test_batch_event_and_sample_shapes_and_expand():
    n = D.Normal(jg.zeros(3, 1), jg.ones(4))
    assert n.batch_shape == (3, 4) and n.sample((2, 5)).shape == (2, 5, 3, 4)
    e = n.expand((6, 3, 4))
    assert e.batch_shape == (6, 3, 4) and e.sample().shape == (6, 3, 4)
    i = D.Independent(D.Normal(jg.zeros(3, 2), jg.ones(3, 2)), 1)
    assert i.batch_shape == (3,) and i.event_shape == (2,) and i.log_prob(jg.zeros(3, 2)).shape == (3,)
    np.testing.assert_allclose(i.log_prob(jg.zeros(3, 2)).numpy(), 2 * stats.norm.logpdf(0) * np.ones(3), rtol=1e-6)
    assert i.expand((5, 3)).batch_shape == (5, 3)
    c = D.Categorical(logits=jg.zeros(2, 3))
    assert c.sample((4,)).shape == (4, 2) and c.expand((7, 2)).sample().shape == (7, 2)
    assert c.enumerate_support().shape == (3, 2)
    assert D.Bernoulli(0.3).sample((3,)).shape == (3,) and D.Normal(0.0, 1.0).batch_shape == ()
    g = D.Gamma(T(1.0, 2.0), 1.0).expand((3, 2))
    assert g.rsample((4,)).shape == (4, 3, 2)
    assert D.Dirichlet(jg.ones(2, 4)).expand((5, 2)).sample().shape == (5, 2, 4)


def test_mixture_same_family():
    mix = D.Categorical(T(0.3, 0.7))
    comp = D.Normal(T(-1.0, 2.0), T(0.5, 1.0))
    gmm = D.MixtureSameFamily(mix, comp)
    x = T(0.0, 1.5, -1.0)
    want = np.log(0.3 * stats.norm(-1, 0.5).pdf(x.numpy()) + 0.7 * stats.norm(2, 1).pdf(x.numpy()))
    np.testing.assert_allclose(gmm.log_prob(x).numpy(), want, rtol=1e-10)
    np.testing.assert_allclose(gmm.mean.numpy(), 0.3 * -1 + 0.7 * 2, rtol=1e-12)
    np.testing.assert_allclose(gmm.cdf(x).numpy(), 0.3 * stats.norm(-1, 0.5).cdf(x.numpy())
                               + 0.7 * stats.norm(2, 1).cdf(x.numpy()), rtol=1e-10)
    jg.manual_seed(0)
    s = gmm.sample((20000,)).numpy()
    assert s.shape == (20000,) and abs(s.mean() - 1.1) < 0.05
    assert abs(s.var() - gmm.variance.item()) < 0.1


def test_transforms_and_their_jacobians():
    x = T(-1.5, 0.3, 2.0)
    for t in (D.ExpTransform(), D.SigmoidTransform(), D.TanhTransform(), D.SoftplusTransform(),
              D.AffineTransform(1.0, -2.0), D.PowerTransform(T(2.0)).inv,
              D.ComposeTransform([D.AffineTransform(0.5, 3.0), D.SigmoidTransform()])):
        xs = x.abs() if isinstance(t.inv, D.PowerTransform) else x
        y = t(xs)
        np.testing.assert_allclose(t.inv(y).numpy(), xs.numpy(), rtol=1e-6, atol=1e-9)
        h = 1e-6
        numeric = np.log(np.abs((t(xs + h).numpy() - t(xs - h).numpy()) / (2 * h)))
        np.testing.assert_allclose(t.log_abs_det_jacobian(xs, y).numpy(), numeric, rtol=1e-5, atol=1e-6)
    sb = D.StickBreakingTransform()
    y = sb(T(0.2, -0.4, 1.0))
    assert y.shape == (4,) and abs(y.sum().item() - 1) < 1e-12
    np.testing.assert_allclose(sb.inv(y).numpy(), [0.2, -0.4, 1.0], rtol=1e-9)
    np.testing.assert_allclose(D.SoftmaxTransform()(T(1.0, 2.0)).numpy(), special.softmax([1.0, 2.0]))
    assert D.biject_to(D.constraints.positive)(T(0.0)).item() == 1.0
    assert isinstance(D.transform_to(D.constraints.simplex), D.SoftmaxTransform)
    assert D.constraints.interval(0.0, 1.0).check(T(0.5, 2.0)).tolist() == [True, False]
    assert repr(D.constraints.greater_than(0.5)) == "GreaterThan(lower_bound=0.5)"


def test_transformed_distribution_matches_its_closed_form():
    base = D.Normal(T(0.2), T(0.7))
    d = D.TransformedDistribution(base, [D.AffineTransform(1.0, 2.0), D.ExpTransform()])
    y = T(3.0)
    want = stats.lognorm(0.7 * 2, scale=np.exp(1.0 + 2 * 0.2)).logpdf(3.0)
    np.testing.assert_allclose(d.log_prob(y).numpy(), [want], rtol=1e-10)
    np.testing.assert_allclose(d.cdf(y).numpy(), stats.lognorm(1.4, scale=np.exp(1.4)).cdf(3.0), rtol=1e-10)


# ------------------------------------------------------------------ validation
def test_validate_args_errors():
    with pytest.raises(ValueError, match=r"Expected parameter scale \(Tensor of shape \(2,\)\) of distribution "
                                         r"Normal\(loc: jitgrad.Size\(\[2\]\), scale: jitgrad.Size\(\[2\]\)\) to "
                                         r"satisfy the constraint GreaterThan\(lower_bound=0.0\), but found invalid "
                                         r"values"):
        D.Normal(jg.zeros(2), jg.tensor([1.0, -1.0]))
    D.Normal(jg.zeros(2), jg.tensor([1.0, -1.0]), validate_args=False)
    with pytest.raises(ValueError, match="Expected value argument .* to be within the support "
                                         r"\(GreaterThanEq\(lower_bound=0.0\)\)"):
        D.Exponential(jg.tensor(1.0)).log_prob(jg.tensor(-1.0))
    with pytest.raises(ValueError, match="Either `probs` or `logits` must be specified, but not both."):
        D.Bernoulli(probs=jg.tensor(0.5), logits=jg.tensor(0.0))
    with pytest.raises(ValueError, match="The value argument to log_prob must be a Tensor"):
        D.Normal(0.0, 1.0).log_prob(0.5)
    with pytest.raises(ValueError, match="The right-most size of value must match event_shape"):
        D.Dirichlet(jg.ones(3)).log_prob(jg.ones(2) / 2)
    with pytest.raises(ValueError, match="Value is not broadcastable with batch_shape\\+event_shape"):
        D.Normal(jg.zeros(3), 1.0).log_prob(jg.zeros(4))
    with pytest.raises(ValueError, match="Uniform is not defined when low>= high"):
        D.Uniform(jg.tensor(1.0), jg.tensor(0.0))
    with pytest.raises(NotImplementedError, match="No KL\\(p \\|\\| q\\) is implemented for p type Normal and q "
                                                  "type Cauchy"):
        D.kl_divergence(D.Normal(0.0, 1.0), D.Cauchy(0.0, 1.0))
    try:
        D.Distribution.set_default_validate_args(False)
        D.Normal(jg.zeros(1), -jg.ones(1))  # not checked
    finally:
        D.Distribution.set_default_validate_args(True)
    with pytest.raises(ValueError):
        D.Distribution.set_default_validate_args("yes")
