"""Constraints: what values a parameter or a sample may take (PyTorch's torch.distributions.constraints).
``constraint.check(value)`` is a bool tensor, True where ``value`` satisfies it, over its batch shape."""
import numpy as np

from .utils import finfo, jg

__all__ = ["Constraint", "boolean", "cat", "corr_cholesky", "dependent", "dependent_property", "greater_than",
           "greater_than_eq", "independent", "integer_interval", "interval", "half_open_interval", "is_dependent",
           "less_than", "lower_cholesky", "lower_triangular", "multinomial", "nonnegative", "nonnegative_integer",
           "one_hot", "positive", "positive_semidefinite", "positive_definite", "positive_integer", "real",
           "real_vector", "simplex", "square", "stack", "symmetric", "unit_interval"]


class Constraint:
    """A region over which a variable is valid. ``event_dim``: the rightmost dims that make one event."""
    is_discrete = False
    event_dim = 0

    def check(self, value):
        raise NotImplementedError

    def __repr__(self):
        return self.__class__.__name__[1:] + "()"


class _Dependent(Constraint):
    """A placeholder for a constraint that depends on other variables (Uniform's support); it cannot be checked."""

    def __init__(self, *, is_discrete=NotImplemented, event_dim=NotImplemented):
        self._is_discrete = is_discrete
        self._event_dim = event_dim
        super().__init__()

    @property
    def is_discrete(self):
        if self._is_discrete is NotImplemented:
            raise NotImplementedError(".is_discrete cannot be determined statically")
        return self._is_discrete

    @property
    def event_dim(self):
        if self._event_dim is NotImplemented:
            raise NotImplementedError(".event_dim cannot be determined statically")
        return self._event_dim

    def __call__(self, *, is_discrete=NotImplemented, event_dim=NotImplemented):
        if is_discrete is NotImplemented:
            is_discrete = self._is_discrete
        if event_dim is NotImplemented:
            event_dim = self._event_dim
        return _Dependent(is_discrete=is_discrete, event_dim=event_dim)

    def check(self, x):
        raise ValueError("Cannot determine validity of dependent constraint")


def is_dependent(constraint):
    return isinstance(constraint, _Dependent)


class _DependentProperty(property, _Dependent):
    """A property of a distribution whose value is a constraint made from its parameters (Uniform's support)."""

    def __init__(self, fn=None, *, is_discrete=NotImplemented, event_dim=NotImplemented):
        property.__init__(self, fn)
        _Dependent.__init__(self, is_discrete=is_discrete, event_dim=event_dim)

    def __call__(self, fn):
        return _DependentProperty(fn, is_discrete=self._is_discrete, event_dim=self._event_dim)


class _IndependentConstraint(Constraint):
    """``base_constraint`` with ``reinterpreted_batch_ndims`` more dims in its event."""

    def __init__(self, base_constraint, reinterpreted_batch_ndims):
        self.base_constraint = base_constraint
        self.reinterpreted_batch_ndims = reinterpreted_batch_ndims
        super().__init__()

    @property
    def is_discrete(self):
        return self.base_constraint.is_discrete

    @property
    def event_dim(self):
        return self.base_constraint.event_dim + self.reinterpreted_batch_ndims

    def check(self, value):
        result = self.base_constraint.check(value)
        if result.ndim < self.reinterpreted_batch_ndims:
            expected = self.base_constraint.event_dim + self.reinterpreted_batch_ndims
            raise ValueError("Expected value.dim() >= %d but got %d" % (expected, value.ndim))
        return result.reshape(tuple(result.shape[:result.ndim - self.reinterpreted_batch_ndims]) + (-1,)).all(-1)

    def __repr__(self):
        return "%s(%r, %d)" % (self.__class__.__name__[1:], self.base_constraint, self.reinterpreted_batch_ndims)


class _Boolean(Constraint):
    is_discrete = True

    def check(self, value):
        return (value == 0) | (value == 1)


class _OneHot(Constraint):
    is_discrete = True
    event_dim = 1

    def check(self, value):
        return ((value == 0) | (value == 1)).all(-1) & (value.sum(-1) == 1)


class _IntegerInterval(Constraint):
    is_discrete = True

    def __init__(self, lower_bound, upper_bound):
        self.lower_bound, self.upper_bound = lower_bound, upper_bound
        super().__init__()

    def check(self, value):
        return (value % 1 == 0) & (self.lower_bound <= value) & (value <= self.upper_bound)

    def __repr__(self):
        return "%s(lower_bound=%s, upper_bound=%s)" % (self.__class__.__name__[1:], self.lower_bound, self.upper_bound)


class _IntegerLessThan(Constraint):
    is_discrete = True

    def __init__(self, upper_bound):
        self.upper_bound = upper_bound
        super().__init__()

    def check(self, value):
        return (value % 1 == 0) & (value <= self.upper_bound)

    def __repr__(self):
        return "%s(upper_bound=%s)" % (self.__class__.__name__[1:], self.upper_bound)


class _IntegerGreaterThan(Constraint):
    is_discrete = True

    def __init__(self, lower_bound):
        self.lower_bound = lower_bound
        super().__init__()

    def check(self, value):
        return (value % 1 == 0) & (value >= self.lower_bound)

    def __repr__(self):
        return "%s(lower_bound=%s)" % (self.__class__.__name__[1:], self.lower_bound)


class _Real(Constraint):
    def check(self, value):
        return value == value  # False for NaN


class _GreaterThan(Constraint):
    def __init__(self, lower_bound):
        self.lower_bound = lower_bound
        super().__init__()

    def check(self, value):
        return self.lower_bound < value

    def __repr__(self):
        return "%s(lower_bound=%s)" % (self.__class__.__name__[1:], self.lower_bound)


class _GreaterThanEq(_GreaterThan):
    def check(self, value):
        return self.lower_bound <= value


class _LessThan(Constraint):
    def __init__(self, upper_bound):
        self.upper_bound = upper_bound
        super().__init__()

    def check(self, value):
        return value < self.upper_bound

    def __repr__(self):
        return "%s(upper_bound=%s)" % (self.__class__.__name__[1:], self.upper_bound)


class _Interval(Constraint):
    def __init__(self, lower_bound, upper_bound):
        self.lower_bound, self.upper_bound = lower_bound, upper_bound
        super().__init__()

    def check(self, value):
        return (self.lower_bound <= value) & (value <= self.upper_bound)

    def __repr__(self):
        return "%s(lower_bound=%s, upper_bound=%s)" % (self.__class__.__name__[1:], self.lower_bound, self.upper_bound)


class _HalfOpenInterval(_Interval):
    def check(self, value):
        return (self.lower_bound <= value) & (value < self.upper_bound)


class _Simplex(Constraint):
    event_dim = 1

    def check(self, value):
        return (value >= 0).all(-1) & ((value.sum(-1) - 1).abs() < 1e-6)


class _Multinomial(Constraint):
    is_discrete = True
    event_dim = 1

    def __init__(self, upper_bound):
        self.upper_bound = upper_bound

    def check(self, x):
        return (x >= 0).all(-1) & (x.sum(-1) <= self.upper_bound)


class _LowerTriangular(Constraint):
    event_dim = 2

    def check(self, value):
        return (value.tril() == value).reshape(tuple(value.shape[:-2]) + (-1,)).min(-1)[0]


class _LowerCholesky(Constraint):
    event_dim = 2

    def check(self, value):
        lower = (value.tril() == value).reshape(tuple(value.shape[:-2]) + (-1,)).min(-1)[0]
        return lower & (value.diagonal(dim1=-2, dim2=-1) > 0).min(-1)[0]


class _CorrCholesky(Constraint):
    event_dim = 2

    def check(self, value):
        tol = 10 * float(finfo(value.dtype).eps) * value.shape[-1]
        row_norm = (value * value).sum(-1).sqrt()
        return _LowerCholesky().check(value) & ((row_norm - 1).abs() <= tol).all(-1)


class _Square(Constraint):
    event_dim = 2

    def check(self, value):
        return jg.full(tuple(value.shape[:-2]), value.shape[-2] == value.shape[-1], dtype=jg.bool, device=value.device)


class _Symmetric(_Square):
    def check(self, value):
        square = super().check(value)
        if not bool(square.all()):
            return square
        return ((value - value.mT).abs() <= 1e-6 * (1 + value.abs())).all(-1).all(-1)


class _PositiveDefinite(_Symmetric):
    def check(self, value):
        sym = super().check(value)
        if not bool(sym.all()):
            return sym
        return jg.tensor(np.linalg.eigvalsh(value.detach().double().numpy()).min(-1) > 0)


class _PositiveSemidefinite(_Symmetric):
    def check(self, value):
        sym = super().check(value)
        if not bool(sym.all()):
            return sym
        return jg.tensor(np.linalg.eigvalsh(value.detach().double().numpy()).min(-1) >= 0)


class _Cat(Constraint):
    """Constraints ``cseq`` on consecutive pieces (of ``lengths``) of dim ``dim``."""

    def __init__(self, cseq, dim=0, lengths=None):
        self.cseq = list(cseq)
        self.lengths = list(lengths) if lengths is not None else [1] * len(self.cseq)
        self.dim = dim
        super().__init__()

    @property
    def event_dim(self):
        return max(c.event_dim for c in self.cseq)

    def check(self, value):
        checks, start = [], 0
        for c, n in zip(self.cseq, self.lengths):
            checks.append(c.check(value.narrow(self.dim, start, n)))
            start += n
        return jg.cat(checks, self.dim)


class _Stack(Constraint):
    def __init__(self, cseq, dim=0):
        self.cseq = list(cseq)
        self.dim = dim
        super().__init__()

    @property
    def event_dim(self):
        return max(c.event_dim for c in self.cseq)

    def check(self, value):
        return jg.stack([c.check(v) for c, v in zip(self.cseq, value.unbind(self.dim))], self.dim)


dependent = _Dependent()
dependent_property = _DependentProperty
independent = _IndependentConstraint
boolean = _Boolean()
one_hot = _OneHot()
nonnegative_integer = _IntegerGreaterThan(0)
positive_integer = _IntegerGreaterThan(1)
integer_interval = _IntegerInterval
real = _Real()
real_vector = independent(real, 1)
positive = _GreaterThan(0.0)
nonnegative = _GreaterThanEq(0.0)
greater_than = _GreaterThan
greater_than_eq = _GreaterThanEq
less_than = _LessThan
multinomial = _Multinomial
unit_interval = _Interval(0.0, 1.0)
interval = _Interval
half_open_interval = _HalfOpenInterval
simplex = _Simplex()
lower_triangular = _LowerTriangular()
lower_cholesky = _LowerCholesky()
corr_cholesky = _CorrCholesky()
square = _Square()
symmetric = _Symmetric()
positive_semidefinite = _PositiveSemidefinite()
positive_definite = _PositiveDefinite()
cat = _Cat
stack = _Stack
