"""A program written for torch that runs unchanged on jitgrad: variational Bayesian linear regression (Normal
weights, a LogNormal noise precision under a Gamma prior, a Dirichlet-weighted Categorical likelihood for a class
label), its reparameterized ELBO maximized by SGD. The noise comes from NumPy, so both libraries see the same
numbers; losses, gradients and fitted parameters must agree."""
import numpy as np
import pytest


def fit(torch, steps=25):
    D = torch.distributions
    rng = np.random.default_rng(0)
    X = torch.tensor(rng.normal(size=(40, 3)), dtype=torch.float64)
    w_true = torch.tensor([1.5, -2.0, 0.5], dtype=torch.float64)
    y = X @ w_true + 0.3 * torch.tensor(rng.normal(size=40), dtype=torch.float64)
    labels = torch.tensor(rng.integers(0, 3, size=40))
    eps_w = torch.tensor(rng.normal(size=(steps, 8, 3)), dtype=torch.float64)
    eps_t = torch.tensor(rng.normal(size=(steps, 8)), dtype=torch.float64)

    mu = torch.zeros(3, dtype=torch.float64, requires_grad=True)
    rho = torch.full((3,), -1.0, dtype=torch.float64, requires_grad=True)
    m = torch.zeros((), dtype=torch.float64, requires_grad=True)
    s = torch.full((), -1.0, dtype=torch.float64, requires_grad=True)
    conc = torch.ones(3, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.SGD([mu, rho, m, s, conc], lr=0.002)
    prior_w = D.Independent(D.Normal(torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64)), 1)
    prior_tau = D.Gamma(torch.tensor(2.0, dtype=torch.float64), torch.tensor(1.0, dtype=torch.float64))
    losses = []
    for t in range(steps):
        q_w = D.Independent(D.Normal(mu, torch.nn.functional.softplus(rho)), 1)
        q_tau = D.LogNormal(m, s.exp())
        w = mu + torch.nn.functional.softplus(rho) * eps_w[t]          # (the rsample with given noise)
        tau = (m + s.exp() * eps_t[t]).exp()
        lik = D.Normal(w @ X.T, tau.unsqueeze(-1).rsqrt()).log_prob(y).sum(-1)
        probs = D.Dirichlet(torch.nn.functional.softplus(conc)).mean
        lik = lik + D.Categorical(probs=probs).log_prob(labels).sum()
        elbo = (lik + prior_tau.log_prob(tau) - q_tau.log_prob(tau)).mean() - D.kl_divergence(q_w, prior_w)
        loss = -elbo
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    entropy = (q_w.entropy() + q_tau.entropy()).item()
    return np.array(losses), mu.detach().numpy(), rho.detach().numpy(), float(m), float(s), \
        conc.detach().numpy(), entropy


def test_the_program_fits_on_jitgrad():
    import jitgrad
    losses, mu, *_ = fit(jitgrad)
    assert losses[-1] < 0.7 * losses[0] and (np.sign(mu) == [1, -1, 1]).all()  # on its way to w_true


@pytest.mark.torch
def test_the_program_matches_pytorch():
    torch = pytest.importorskip("torch")
    import jitgrad
    ours, theirs = fit(jitgrad), fit(torch)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
