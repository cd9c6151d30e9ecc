"""nn.utils.parametrizations: orthogonal, spectral_norm and weight_norm, as parametrizations (PyTorch's
modules, buffers, state-dict layout and errors).

The orthogonal maps are jitgrad.linalg's ``matrix_exp``, the Cayley map's ``solve`` and
``householder_product``, differentiable as PyTorch's; ``right_inverse`` makes a matrix orthogonal with ``qr``
and ``geqrf``, as PyTorch does.
"""
from enum import Enum, auto

import numpy as np

from ... import linalg
from ..._factories import eye, zeros_like
from ..._grad_mode import no_grad
from ..._tensor import Tensor
from ...ops.decompositions import geqrf
from ...ops.join import cat
from .. import functional as F
from ..module import Module
from ..modules.conv import ConvTranspose1d, ConvTranspose2d
from . import parametrize

__all__ = ["orthogonal", "spectral_norm", "weight_norm"]


def _identity_like(a, n):
    return eye(n, dtype=a.dtype, device=a.device)


def _make_orthogonal(a):
    """The Q of a's QR decomposition with the signs of R's diagonal (PyTorch's _make_orthogonal), no grad."""
    q, r = linalg.qr(a)
    return q * r.diagonal(0, -2, -1).sign().unsqueeze(-2)


def _is_orthogonal(q):
    n, k = q.shape[-2], q.shape[-1]
    eps = 10.0 * n * np.finfo(q.dtype.np).eps
    return bool(q.mT.matmul(q).allclose(_identity_like(q, k), atol=eps))


# ---------------------------------------------------------------------- orthogonal
class _OrthMaps(Enum):
    matrix_exp = auto()
    cayley = auto()
    householder = auto()


class _Orthogonal(Module):
    def __init__(self, weight, orthogonal_map, *, use_trivialization=True):
        super().__init__()
        self.shape = weight.shape
        self.orthogonal_map = orthogonal_map
        if use_trivialization:
            self.register_buffer("base", None)

    def forward(self, X):
        n, k = X.shape[-2], X.shape[-1]
        transposed = n < k
        if transposed:
            X = X.mT
            n, k = k, n
        if self.orthogonal_map in (_OrthMaps.matrix_exp, _OrthMaps.cayley):
            X = X.tril()
            if n != k:
                X = cat([X, X.new_zeros((n, n - k)).expand(tuple(X.shape[:-2]) + (n, n - k))], -1)
            A = X - X.mT
            if self.orthogonal_map == _OrthMaps.matrix_exp:
                Q = linalg.matrix_exp(A)
            else:
                ident = _identity_like(A, n)
                Q = linalg.solve(ident - 0.5 * A, ident + 0.5 * A)
            if n != k:
                Q = Q[..., :k]
        else:
            A = X.tril(-1)
            tau = 2.0 / (1.0 + (A * A).sum(-2))
            Q = linalg.householder_product(A, tau)
            Q = Q * X.diagonal(0, -2, -1).int().unsqueeze(-2)
        if hasattr(self, "base"):
            Q = self.base.matmul(Q)
        return Q.mT if transposed else Q

    def right_inverse(self, Q):
        with no_grad():
            if Q.shape != self.shape:
                raise ValueError("Expected a matrix or batch of matrices of shape %s. Got a tensor of shape %s."
                                 % (self.shape, Q.shape))
            Q_init = Q
            n, k = Q.shape[-2], Q.shape[-1]
            transpose = n < k
            if transpose:
                Q = Q.mT
                n, k = k, n
            if not hasattr(self, "base"):
                if self.orthogonal_map in (_OrthMaps.cayley, _OrthMaps.matrix_exp):
                    raise NotImplementedError("It is not possible to assign to the matrix exponential or the Cayley "
                                              "parametrizations when use_trivialization=False.")
                # geqrf's reflectors below the diagonal, the signs of R on it (PyTorch's right_inverse)
                A, tau = geqrf(Q)
                sign = A.diagonal(0, -2, -1).sign()
                A.diagonal(0, -2, -1).copy_(sign.where(tau != 0.0, -sign))
                return A.mT if transpose else A
            if n == k:
                Q = _make_orthogonal(Q) if not _is_orthogonal(Q) else Q.clone()
            else:
                N = Q.new_empty(tuple(Q.shape[:-2]) + (n, n - k)).normal_()
                Q = _make_orthogonal(cat([Q, N], -1))
            self.base = Q
            neg_id = zeros_like(Q_init)
            neg_id.diagonal(0, -2, -1).fill_(-1.0)
            return neg_id


def orthogonal(module, name="weight", orthogonal_map=None, *, use_trivialization=True):
    """Parametrize ``module.<name>`` (a matrix or batch of matrices) to be orthogonal (or to have orthonormal
    rows or columns) through ``orthogonal_map``: "matrix_exp" (square default), "cayley" or "householder"."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError("Module '%s' has no parameter or buffer with name '%s'" % (module, name))
    if weight.ndim < 2:
        raise ValueError("Expected a matrix or batch of matrices. Got a tensor of %d dimensions." % weight.ndim)
    if orthogonal_map is None:
        orthogonal_map = "matrix_exp" if weight.shape[-2] == weight.shape[-1] else "householder"
    orth_enum = getattr(_OrthMaps, orthogonal_map, None)
    if orth_enum is None:
        raise ValueError('orthogonal_map has to be one of "matrix_exp", "cayley", "householder". Got: %s'
                         % orthogonal_map)
    orth = _Orthogonal(weight, orth_enum, use_trivialization=use_trivialization)
    parametrize.register_parametrization(module, name, orth, unsafe=True)
    return module


# ---------------------------------------------------------------------- weight norm
def norm_except_dim(v, pow=2, dim=0):
    """||v||_pow over every dim but ``dim`` (keeping them as size 1); over all of v when dim is -1."""
    if dim == -1:
        return v.norm(pow)
    dim = dim % v.ndim
    return v.norm(pow, tuple(d for d in range(v.ndim) if d != dim), keepdim=True)


def _weight_norm(v, g, dim=0):
    """v * (g / ||v||) with the norm over every dim but ``dim`` (torch._weight_norm)."""
    return v * (g / norm_except_dim(v, 2, dim))


class _WeightNorm(Module):
    def __init__(self, dim=0):
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, weight_g, weight_v):
        return _weight_norm(weight_v, weight_g, self.dim)

    def right_inverse(self, weight):
        return norm_except_dim(weight, 2, self.dim), weight


def weight_norm(module, name="weight", dim=0):
    """Parametrize ``module.<name>`` as ``g * v / ||v||``: ``parametrizations.<name>.original0`` is g (the norms
    over every dim but ``dim``; ``dim=None``: one norm), ``original1`` is v."""
    parametrize.register_parametrization(module, name, _WeightNorm(dim), unsafe=True)
    return module


# ---------------------------------------------------------------------- spectral norm
class _SpectralNorm(Module):
    def __init__(self, weight, n_power_iterations=1, dim=0, eps=1e-12):
        super().__init__()
        ndim = weight.ndim
        if dim >= ndim or dim < -ndim:
            raise IndexError("Dimension out of range (expected to be in range of [-%d, %d] but got %d)"
                             % (ndim, ndim - 1, dim))
        if n_power_iterations <= 0:
            raise ValueError("Expected n_power_iterations to be positive, but got n_power_iterations=%d"
                             % n_power_iterations)
        self.dim = dim if dim >= 0 else dim + ndim
        self.eps = eps
        if ndim > 1:
            self.n_power_iterations = n_power_iterations
            weight_mat = self._reshape_weight_to_matrix(weight)
            h, w = weight_mat.shape
            with no_grad():
                u = weight_mat.new_empty((h,)).normal_(0, 1)
                v = weight_mat.new_empty((w,)).normal_(0, 1)
            self.register_buffer("_u", F.normalize(u, dim=0, eps=self.eps))
            self.register_buffer("_v", F.normalize(v, dim=0, eps=self.eps))
            self._power_method(weight_mat, 15)

    def _reshape_weight_to_matrix(self, weight):
        if self.dim != 0:
            weight = weight.permute(self.dim, *(d for d in range(weight.ndim) if d != self.dim))
        return weight.flatten(1)

    def _power_method(self, weight_mat, n_power_iterations):
        # u and v are updated in place (as PyTorch's out=), so a module copied before keeps sharing them
        with no_grad():
            for _ in range(n_power_iterations):
                self._u.copy_(F.normalize(weight_mat.mv(self._v), dim=0, eps=self.eps))
                self._v.copy_(F.normalize(weight_mat.mT.mv(self._u), dim=0, eps=self.eps))

    def forward(self, weight):
        if weight.ndim == 1:
            return F.normalize(weight, dim=0, eps=self.eps)
        weight_mat = self._reshape_weight_to_matrix(weight)
        if self.training:
            self._power_method(weight_mat, self.n_power_iterations)
        u, v = self._u.clone(), self._v.clone()
        sigma = (u * weight_mat.mv(v)).sum()
        return weight / sigma

    def right_inverse(self, value):
        return value


def spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None):
    """Parametrize ``module.<name>`` as W / sigma(W), sigma the largest singular value estimated by power
    iteration (buffers ``_u``, ``_v`` of the parametrization; one iteration per training-mode access)."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError("Module '%s' has no parameter or buffer with name '%s'" % (module, name))
    if dim is None:
        dim = 1 if isinstance(module, (ConvTranspose1d, ConvTranspose2d)) else 0
    parametrize.register_parametrization(module, name, _SpectralNorm(weight, n_power_iterations, dim, eps))
    return module

