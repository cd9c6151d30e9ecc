"""Distribution: the base class of every family (PyTorch's torch.distributions.Distribution)."""
import warnings

from .._tensor import Size, Tensor
from . import constraints
from .utils import jg, lazy_property

__all__ = ["Distribution"]


class Distribution:
    """A probability distribution: parameters batched over ``batch_shape``, samples of ``event_shape``.

    With ``validate_args`` (the default outside ``python -O``, see ``set_default_validate_args``), the
    parameters are checked against ``arg_constraints`` when it is built and the values given to ``log_prob``,
    ``cdf`` and ``icdf`` against its ``support``, raising PyTorch's ValueError.
    """
    has_rsample = False
    has_enumerate_support = False
    _validate_args = __debug__

    @staticmethod
    def set_default_validate_args(value):
        if value not in [True, False]:
            raise ValueError
        Distribution._validate_args = value

    def __init__(self, batch_shape=Size(), event_shape=Size(), validate_args=None):
        self._batch_shape = Size(batch_shape)
        self._event_shape = Size(event_shape)
        if validate_args is not None:
            self._validate_args = validate_args
        if self._validate_args:
            try:
                arg_constraints = self.arg_constraints
            except NotImplementedError:
                arg_constraints = {}
                warnings.warn("%s does not define `arg_constraints`. Please set `arg_constraints = {}` or initialize "
                              "the distribution with `validate_args=False` to turn off validation." % self.__class__,
                              stacklevel=2)
            for param, constraint in arg_constraints.items():
                if constraints.is_dependent(constraint):
                    continue  # constraints that cannot be checked
                if param not in self.__dict__ and isinstance(getattr(type(self), param), lazy_property):
                    continue  # lazily made parameters (probs of a distribution given logits)
                value = getattr(self, param)
                if not bool(constraint.check(value).all()):
                    raise ValueError("Expected parameter %s (%s of shape %s) of distribution %r to satisfy the "
                                     "constraint %r, but found invalid values:\n%s"
                                     % (param, type(value).__name__, tuple(value.shape), self, constraint, value))
        super().__init__()

    def expand(self, batch_shape, _instance=None):
        raise NotImplementedError

    @property
    def batch_shape(self):
        return self._batch_shape

    @property
    def event_shape(self):
        return self._event_shape

    @property
    def arg_constraints(self):
        raise NotImplementedError

    @property
    def support(self):
        raise NotImplementedError

    @property
    def mean(self):
        raise NotImplementedError

    @property
    def mode(self):
        raise NotImplementedError("%s does not implement mode" % self.__class__)

    @property
    def variance(self):
        raise NotImplementedError

    @property
    def stddev(self):
        return self.variance.sqrt()

    def sample(self, sample_shape=Size()):
        with jg.no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape=Size()):
        raise NotImplementedError

    def sample_n(self, n):
        warnings.warn("`sample_n(n)` will be deprecated. Use `sample((n,))` instead.", FutureWarning, stacklevel=2)
        return self.sample(Size((n,)))

    def log_prob(self, value):
        raise NotImplementedError

    def cdf(self, value):
        raise NotImplementedError

    def icdf(self, value):
        raise NotImplementedError

    def enumerate_support(self, expand=True):
        raise NotImplementedError

    def entropy(self):
        raise NotImplementedError

    def perplexity(self):
        return self.entropy().exp()

    def _extended_shape(self, sample_shape=Size()):
        return Size(tuple(sample_shape) + tuple(self._batch_shape) + tuple(self._event_shape))

    def _validate_sample(self, value):
        if not isinstance(value, Tensor):
            raise ValueError("The value argument to log_prob must be a Tensor")
        event_dim_start = value.ndim - len(self._event_shape)
        if tuple(value.shape[event_dim_start:]) != tuple(self._event_shape):
            raise ValueError("The right-most size of value must match event_shape: %s vs %s."
                             % (value.size(), self._event_shape))
        actual_shape = value.size()
        expected_shape = Size(tuple(self._batch_shape) + tuple(self._event_shape))
        for i, j in zip(reversed(actual_shape), reversed(expected_shape)):
            if i != 1 and j != 1 and i != j:
                raise ValueError("Value is not broadcastable with batch_shape+event_shape: %s vs %s."
                                 % (actual_shape, expected_shape))
        try:
            support = self.support
        except NotImplementedError:
            warnings.warn("%s does not define `support` to enable sample validation. Please initialize the "
                          "distribution with `validate_args=False` to turn off validation." % self.__class__,
                          stacklevel=2)
            return
        if not bool(support.check(value).all()):
            raise ValueError("Expected value argument (%s of shape %s) to be within the support (%r) of the "
                             "distribution %r, but found invalid values:\n%s"
                             % (type(value).__name__, tuple(value.shape), support, self, value))

    def _get_checked_instance(self, cls, _instance=None):
        if _instance is None and type(self).__init__ != cls.__init__:
            raise NotImplementedError("Subclass %s of %s that defines a custom __init__ method must also define a "
                                      "custom .expand() method." % (self.__class__.__name__, cls.__name__))
        return self.__new__(type(self)) if _instance is None else _instance

    def __repr__(self):
        names = [k for k in self.arg_constraints if k in self.__dict__]
        return self.__class__.__name__ + "(" + ", ".join(
            "%s: %s" % (p, self.__dict__[p] if self.__dict__[p].numel() == 1 else self.__dict__[p].size())
            for p in names) + ")"
