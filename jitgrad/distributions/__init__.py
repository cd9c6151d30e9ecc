"""jitgrad.distributions: PyTorch's torch.distributions on jitgrad tensors.

Distributions with ``sample``/``rsample`` (reparameterized: differentiable in the parameters), ``log_prob``,
``entropy``, ``cdf``/``icdf``, moments, batch and event shapes, ``expand`` and argument validation;
``constraints``, ``transforms`` and ``biject_to``/``transform_to``; ``kl_divergence`` with ``register_kl``.
Samples draw from jitgrad's default generator (``jitgrad.manual_seed``).
"""
from . import constraints, transforms  # noqa: F401
from .constraint_registry import biject_to, transform_to  # noqa: F401
from .continuous import (Beta, Cauchy, Chi2, Dirichlet, Exponential, Gamma, Laplace, Normal, StudentT,  # noqa: F401
                         Uniform)
from .discrete import Bernoulli, Binomial, Categorical, Geometric, Multinomial, OneHotCategorical, Poisson  # noqa: F401
from .distribution import Distribution  # noqa: F401
from .independent import Independent, MixtureSameFamily  # noqa: F401
from .kl import kl_divergence, register_kl  # noqa: F401
from .multivariate_normal import LowRankMultivariateNormal, MultivariateNormal  # noqa: F401
from .transformed import (ExpRelaxedCategorical, Gumbel, HalfNormal, LogitRelaxedBernoulli, LogNormal,  # noqa: F401
                          RelaxedBernoulli, RelaxedOneHotCategorical, TransformedDistribution)
from .transforms import *  # noqa: F401,F403

__all__ = ["Bernoulli", "Beta", "Binomial", "Categorical", "Cauchy", "Chi2", "Dirichlet", "Distribution",
           "ExpRelaxedCategorical", "Exponential", "Gamma", "Geometric", "Gumbel", "HalfNormal", "Independent",
           "Laplace", "LogNormal", "LogitRelaxedBernoulli", "LowRankMultivariateNormal", "MixtureSameFamily",
           "Multinomial", "MultivariateNormal", "Normal", "OneHotCategorical", "Poisson", "RelaxedBernoulli",
           "RelaxedOneHotCategorical", "StudentT", "TransformedDistribution", "Uniform", "biject_to",
           "kl_divergence", "register_kl", "transform_to"] + transforms.__all__
