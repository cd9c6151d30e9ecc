"""MultivariateNormal (by covariance, precision or Cholesky factor) and LowRankMultivariateNormal
(cov_factor @ cov_factor.T + diag(cov_diag)). They factor and solve with jitgrad.linalg's ``cholesky`` and
``solve_triangular``."""
import math

from .._op import broadcast_shapes
from .._tensor import Size
from . import constraints
from .distribution import Distribution
from .utils import _standard_normal, jg, lazy_property

from .. import linalg

__all__ = ["LowRankMultivariateNormal", "MultivariateNormal"]


def _diag_embed(v):
    return v.unsqueeze(-1) * jg.eye(v.shape[-1], dtype=v.dtype, device=v.device)


def _batch_mv(bmat, bvec):
    return (bmat @ bvec.unsqueeze(-1)).squeeze(-1)


def _batch_mahalanobis(bL, bx):
    """x^T (L L^T)^-1 x for batches of lower triangular L and vectors x (broadcast together)."""
    n = bx.shape[-1]
    batch = broadcast_shapes(tuple(bL.shape[:-2]), tuple(bx.shape[:-1]))  # (the batch dims only: L is n x n)
    L, x = bL.expand(batch + (n, n)), bx.expand(batch + (n,)).unsqueeze(-1)
    y = linalg.solve_triangular(L, x, upper=False)
    return y.squeeze(-1).pow(2).sum(-1)


def _precision_to_scale_tril(P):
    Lf = linalg.cholesky(P.flip((-2, -1)))
    L_inv = Lf.flip((-2, -1)).mT
    Id = jg.eye(P.shape[-1], dtype=P.dtype, device=P.device)
    return linalg.solve_triangular(L_inv, Id, upper=False)


class MultivariateNormal(Distribution):
    """N(loc, covariance_matrix), given exactly one of covariance_matrix, precision_matrix and scale_tril."""
    arg_constraints = {"loc": constraints.real_vector, "covariance_matrix": constraints.positive_definite,
                       "precision_matrix": constraints.positive_definite, "scale_tril": constraints.lower_cholesky}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc, covariance_matrix=None, precision_matrix=None, scale_tril=None, validate_args=None):
        if loc.ndim < 1:
            raise ValueError("loc must be at least one-dimensional.")
        if (covariance_matrix is not None) + (scale_tril is not None) + (precision_matrix is not None) != 1:
            raise ValueError("Exactly one of covariance_matrix or precision_matrix or scale_tril may be specified.")
        given = scale_tril if scale_tril is not None else covariance_matrix if covariance_matrix is not None \
            else precision_matrix
        if given.ndim < 2:
            name = "scale_tril" if scale_tril is not None else "covariance_matrix" if covariance_matrix is not None \
                else "precision_matrix"
            raise ValueError("%s matrix must be at least two-dimensional, with optional leading batch dimensions"
                             % name)
        batch_shape = jg.broadcast_tensors(jg.empty(tuple(given.shape[:-2])), jg.empty(tuple(loc.shape[:-1])))[0].shape
        mat_shape = tuple(batch_shape) + (loc.shape[-1], loc.shape[-1])
        if scale_tril is not None:
            self.scale_tril = scale_tril.expand(mat_shape)
        elif covariance_matrix is not None:
            self.covariance_matrix = covariance_matrix.expand(mat_shape)
        else:
            self.precision_matrix = precision_matrix.expand(mat_shape)
        self.loc = loc.expand(tuple(batch_shape) + (-1,))
        super().__init__(batch_shape, self.loc.shape[-1:], validate_args=validate_args)
        if scale_tril is not None:
            self._unbroadcasted_scale_tril = scale_tril
        elif covariance_matrix is not None:
            self._unbroadcasted_scale_tril = linalg.cholesky(covariance_matrix)
        else:
            self._unbroadcasted_scale_tril = _precision_to_scale_tril(precision_matrix)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(MultivariateNormal, _instance)
        batch_shape = Size(batch_shape)
        loc_shape = tuple(batch_shape) + tuple(self.event_shape)
        cov_shape = loc_shape + tuple(self.event_shape)
        new.loc = self.loc.expand(loc_shape)
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril
        for name in ("covariance_matrix", "scale_tril", "precision_matrix"):
            if name in self.__dict__:
                setattr(new, name, getattr(self, name).expand(cov_shape))
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @lazy_property
    def scale_tril(self):
        return self._unbroadcasted_scale_tril.expand(tuple(self._batch_shape) + tuple(self._event_shape) * 2)

    @lazy_property
    def covariance_matrix(self):
        L = self._unbroadcasted_scale_tril
        return (L @ L.mT).expand(tuple(self._batch_shape) + tuple(self._event_shape) * 2)

    @lazy_property
    def precision_matrix(self):
        Id = jg.eye(self._event_shape[-1], dtype=self.loc.dtype, device=self.loc.device)
        Linv = linalg.solve_triangular(self._unbroadcasted_scale_tril, Id, upper=False)
        return (Linv.mT @ Linv).expand(tuple(self._batch_shape) + tuple(self._event_shape) * 2)

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        return self._unbroadcasted_scale_tril.pow(2).sum(-1).expand(tuple(self._batch_shape) + tuple(self._event_shape))

    def rsample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        eps = _standard_normal(shape, dtype=self.loc.dtype, device=self.loc.device)
        return self.loc + _batch_mv(self._unbroadcasted_scale_tril, eps)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        diff = value - self.loc
        M = _batch_mahalanobis(self._unbroadcasted_scale_tril, diff)
        half_log_det = self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)
        return -0.5 * (self._event_shape[0] * math.log(2 * math.pi) + M) - half_log_det

    def entropy(self):
        half_log_det = self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)
        H = 0.5 * self._event_shape[0] * (1.0 + math.log(2 * math.pi)) + half_log_det
        return H if len(self._batch_shape) == 0 else H.expand(self._batch_shape)


class LowRankMultivariateNormal(Distribution):
    """N(loc, cov_factor @ cov_factor.T + diag(cov_diag)): a covariance of low rank plus a diagonal."""
    arg_constraints = {"loc": constraints.real_vector, "cov_factor": constraints.independent(constraints.real, 2),
                       "cov_diag": constraints.independent(constraints.positive, 1)}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc, cov_factor, cov_diag, validate_args=None):
        if loc.ndim < 1:
            raise ValueError("loc must be at least one-dimensional.")
        event_shape = loc.shape[-1:]
        if cov_factor.ndim < 2:
            raise ValueError("cov_factor must be at least two-dimensional, with optional leading batch dimensions")
        if tuple(cov_factor.shape[-2:-1]) != tuple(event_shape):
            raise ValueError("cov_factor must be a batch of matrices with shape {} x m".format(event_shape[0]))
        if tuple(cov_diag.shape[-1:]) != tuple(event_shape):
            raise ValueError("cov_diag must be a batch of vectors with shape {}".format(tuple(event_shape)))
        loc_, cov_diag_ = loc.unsqueeze(-1), cov_diag.unsqueeze(-1)
        loc_, self.cov_factor, cov_diag_ = jg.broadcast_tensors(loc_, cov_factor, cov_diag_)
        self.loc = loc_[..., 0]
        self.cov_diag = cov_diag_[..., 0]
        batch_shape = self.loc.shape[:-1]
        self._unbroadcasted_cov_factor = cov_factor
        self._unbroadcasted_cov_diag = cov_diag
        self._capacitance_tril = self._capacitance(cov_factor, cov_diag)
        super().__init__(batch_shape, event_shape, validate_args=validate_args)

    @staticmethod
    def _capacitance(W, D):
        """The Cholesky factor of I + W^T D^-1 W (the capacitance matrix of the Woodbury identity)."""
        m = W.shape[-1]
        Wt_Dinv = W.mT / D.unsqueeze(-2)
        K = Wt_Dinv @ W
        K = K + jg.eye(m, dtype=W.dtype, device=W.device)
        return linalg.cholesky(K)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(LowRankMultivariateNormal, _instance)
        batch_shape = Size(batch_shape)
        loc_shape = tuple(batch_shape) + tuple(self.event_shape)
        new.loc = self.loc.expand(loc_shape)
        new.cov_diag = self.cov_diag.expand(loc_shape)
        new.cov_factor = self.cov_factor.expand(loc_shape + tuple(self.cov_factor.shape[-1:]))
        new._unbroadcasted_cov_factor = self._unbroadcasted_cov_factor
        new._unbroadcasted_cov_diag = self._unbroadcasted_cov_diag
        new._capacitance_tril = self._capacitance_tril
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @lazy_property
    def variance(self):
        return (self._unbroadcasted_cov_factor.pow(2).sum(-1) + self._unbroadcasted_cov_diag).expand(
            tuple(self._batch_shape) + tuple(self._event_shape))

    @lazy_property
    def scale_tril(self):
        n = self._event_shape[0]
        cov_diag_sqrt_unsqueeze = self._unbroadcasted_cov_diag.sqrt().unsqueeze(-1)
        Dinvsqrt_W = self._unbroadcasted_cov_factor / cov_diag_sqrt_unsqueeze
        K = Dinvsqrt_W @ Dinvsqrt_W.mT + jg.eye(n, dtype=self.loc.dtype, device=self.loc.device)
        scale_tril = cov_diag_sqrt_unsqueeze * linalg.cholesky(K)
        return scale_tril.expand(tuple(self._batch_shape) + tuple(self._event_shape) * 2)

    @lazy_property
    def covariance_matrix(self):
        W = self._unbroadcasted_cov_factor
        return (W @ W.mT + _diag_embed(self._unbroadcasted_cov_diag)).expand(
            tuple(self._batch_shape) + tuple(self._event_shape) * 2)

    @lazy_property
    def precision_matrix(self):
        Wt_Dinv = self._unbroadcasted_cov_factor.mT / self._unbroadcasted_cov_diag.unsqueeze(-2)
        A = linalg.solve_triangular(self._capacitance_tril, Wt_Dinv, upper=False)
        precision = _diag_embed(self._unbroadcasted_cov_diag.reciprocal()) - A.mT @ A
        return precision.expand(tuple(self._batch_shape) + tuple(self._event_shape) * 2)

    def rsample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        W_shape = tuple(shape[:-1]) + tuple(self.cov_factor.shape[-1:])
        eps_W = _standard_normal(W_shape, dtype=self.loc.dtype, device=self.loc.device)
        eps_D = _standard_normal(shape, dtype=self.loc.dtype, device=self.loc.device)
        return self.loc + _batch_mv(self._unbroadcasted_cov_factor, eps_W) + self._unbroadcasted_cov_diag.sqrt() * eps_D

    def _log_det(self):
        return 2 * self._capacitance_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1) + \
            self._unbroadcasted_cov_diag.log().sum(-1)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        diff = value - self.loc
        W, D = self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag
        Wt_Dinv = W.mT / D.unsqueeze(-2)
        Wt_Dinv_x = _batch_mv(Wt_Dinv, diff)
        mahalanobis_term1 = (diff.pow(2) / D).sum(-1)
        mahalanobis_term2 = _batch_mahalanobis(self._capacitance_tril, Wt_Dinv_x)
        M = mahalanobis_term1 - mahalanobis_term2
        return -0.5 * (self._event_shape[0] * math.log(2 * math.pi) + M + self._log_det())

    def entropy(self):
        H = 0.5 * (self._event_shape[0] * (1.0 + math.log(2 * math.pi)) + self._log_det())
        return H if len(self._batch_shape) == 0 else H.expand(self._batch_shape)
