"""Random ops: multinomial, bernoulli, poisson, normal of tensors, and the in-place fills (uniform_, normal_, random_,
exponential_, geometric_, cauchy_, log_normal_, bernoulli_).

The numbers come from a jitgrad.Generator (``generator=``, else the default one), drawn on the host with
NumPy's PCG64 and moved to the tensor's device; categorical sampling runs in kernels/random.py. Each op
is an entry; as in PyTorch, a sample takes a zero gradient where it is differentiable at all (its
node names the distribution: NormalBackward1, UniformBackward0, ...).
"""
import numpy as np

from .. import _dtype as D
from .._device import backend
from .._factories import _num, normal_factory, write_out
from .._generator import numpy_rng
from .._op import Op, broadcast_shapes, dispatch
from .._tensor import Tensor
from ._table import INTS, export, no_kernel, register, rejects


def _zero(g, s):
    return g.new_zeros(g.shape)  # broadcast inputs get it summed to their shape by the engine


def _rng(generator, input):
    return numpy_rng(generator, input.device)


# ------------------------------------------------------------------ fills: a tensor like self, of new samples
def _fill_forward(draw):
    def forward(xp, dt, x, rng, **params):
        return xp.from_host(np.asarray(draw(rng, x.shape, **params), dtype=x.dtype))
    return forward


def _fill_op(name, draw, node, unsupported):
    return register(Op(name, _fill_forward(draw), vjp=[_zero], dtype="keep", node=node, unsupported=unsupported))


_NOT_FLOAT = ("bool",) + INTS
_C_TYPES = {"bool": "bool", "int32": "int", "int64": "long int"}  # as PyTorch's messages name them
UNIFORM = _fill_op("uniform", lambda r, s, low, high: r.uniform(low, high, s), "UniformBackward0",
                   no_kernel("check_uniform_bounds", *_NOT_FLOAT))
NORMAL_FILL = _fill_op("normal_fill", lambda r, s, mean, std: r.normal(mean, std, s), "NormalBackward0",
                       no_kernel("normal_kernel_cpu", *_NOT_FLOAT))
LOG_NORMAL = _fill_op("log_normal", lambda r, s, mean, std: r.lognormal(mean, std, s), "LogNormalBackward0",
                      no_kernel("log_normal_cpu", *_NOT_FLOAT))
CAUCHY = _fill_op("cauchy", lambda r, s, median, sigma: median + sigma * r.standard_cauchy(s), "CauchyBackward0",
                  {d: (RuntimeError, "Cauchy distribution is a continuous probability distribution. dtype must be a "
                       "floating point but you specified " + c) for d, c in _C_TYPES.items()})
EXPONENTIAL = _fill_op("exponential", lambda r, s, lambd: r.exponential(1.0 / lambd, s), "ExponentialBackward0",
                       rejects(RuntimeError, "Exponential distribution is a continuous probability distribution. "
                               "dtype must be a floating point but you specified %(type)s", *_NOT_FLOAT))
GEOMETRIC = _fill_op("geometric", lambda r, s, p: r.geometric(p, s), "GeometricBackward0",
                     no_kernel("geometric_cpu", "bool"))
RANDOM = _fill_op("random", lambda r, s, low, high: r.integers(low, high, s), "RandomBackward2", {})
BERNOULLI_FILL = _fill_op("bernoulli_fill", lambda r, s, p: r.random(s) < p, "BernoulliBackward2", {})


def uniform(input, from_=0.0, to=1.0, *, generator=None):
    """The out-of-place form of Tensor.uniform_(from, to): samples of U[from, to)."""
    if input.dtype.is_floating_point:
        if from_ > to:
            raise RuntimeError("uniform_ expects to return a [from, to) range, but found from=%s > to=%s"
                               % (_num(from_), _num(to)))
        limit = float(np.finfo(input.dtype.np).max)
        for name, v in (("from", from_), ("to", to)):
            if not -limit <= v <= limit:
                raise RuntimeError("%s is out of bounds for %s" % (name, D._C_NAMES[input.dtype.name]))
    return dispatch(UNIFORM, (input,), {"rng": _rng(generator, input), "low": float(from_), "high": float(to)})


def _check_std(std):
    if std < 0:
        raise RuntimeError("normal expects std >= 0.0, but found std %s" % _num(std))


def normal_fill(input, mean=0.0, std=1.0, *, generator=None):
    """The out-of-place form of Tensor.normal_(mean, std)."""
    _check_std(std)
    return dispatch(NORMAL_FILL, (input,), {"rng": _rng(generator, input), "mean": float(mean), "std": float(std)})


def log_normal(input, mean=1.0, std=2.0, *, generator=None):
    if std <= 0:
        raise RuntimeError("log_normal_ expects std > 0.0, but found std=%s" % _num(std))
    return dispatch(LOG_NORMAL, (input,), {"rng": _rng(generator, input), "mean": float(mean), "std": float(std)})


def cauchy(input, median=0.0, sigma=1.0, *, generator=None):
    if sigma <= 0:
        raise RuntimeError("cauchy_ expects sigma > 0.0, but found sigma=%s" % _num(sigma))
    return dispatch(CAUCHY, (input,), {"rng": _rng(generator, input), "median": float(median), "sigma": float(sigma)})


def exponential(input, lambd=1.0, *, generator=None):
    if input.dtype.is_floating_point and not lambd > 0:
        raise RuntimeError("exponential_ expects lambda > 0.0, but found lambda=%s" % _num(lambd))
    return dispatch(EXPONENTIAL, (input,), {"rng": _rng(generator, input), "lambd": float(lambd)})


def geometric(input, p, *, generator=None):
    if not 0 < p < 1:
        raise RuntimeError("geometric_ expects p to be in (0, 1), but got p=%s" % _num(p))
    return dispatch(GEOMETRIC, (input,), {"rng": _rng(generator, input), "p": float(p)})


# random_()'s default upper bounds: the integers a float dtype holds exactly, or the dtype's maximum + 1
_RANDOM_TO = {"float32": 2 ** 24 + 1, "float64": 2 ** 53 + 1, "int32": 2 ** 31, "int64": 2 ** 63, "bool": 2}


def random(input, from_=None, to=None, *, generator=None):
    """The out-of-place form of Tensor.random_(): random_(), random_(to), random_(from, to)."""
    if from_ is not None and to is None:
        from_, to = 0, from_
    for v in (from_, to):
        if v is not None and not -2 ** 63 <= int(v) < 2 ** 63:
            raise ValueError("Overflow when unpacking long long")
    low = 0 if from_ is None else int(from_)
    high = _RANDOM_TO[input.dtype.name] if to is None else int(to)
    if low >= high:
        raise RuntimeError("random_ expects 'from' to be less than 'to', but got from=%d >= to=%d" % (low, high))
    if not input.dtype.is_floating_point and input.dtype.name != "bool" and to is not None:
        info = np.iinfo(input.dtype.np)
        if not info.min <= high - 1 <= info.max:
            raise RuntimeError("to - 1 is out of bounds for %s" % D._C_NAMES[input.dtype.name])
        if not info.min <= low <= info.max:
            raise RuntimeError("from is out of bounds for %s" % D._C_NAMES[input.dtype.name])
    return dispatch(RANDOM, (input,), {"rng": _rng(generator, input), "low": low, "high": high})


def _values(t):
    """``t``'s values on the host for an argument check. Not Tensor._host, which a trace takes for a value
    read: a traced function that draws random numbers runs eagerly anyway, checks included."""
    d = t._data
    return d if d.__class__ is np.ndarray else backend(d).to_host(d)


# ------------------------------------------------------------------ bernoulli
def _check_probabilities(p):
    host = _values(p)
    if host.size and not ((host >= 0) & (host <= 1)).all():
        raise RuntimeError("Expected p_in >= 0 && p_in <= 1 to be true, but got false.  (Could this error message be "
                           "improved?  If so, please report an enhancement request to PyTorch.)")


def _bernoulli_forward(xp, dt, x, rng):
    return xp.from_host((rng.random(x.shape) < xp.to_host(x)).astype(x.dtype))


def _bernoulli_like_forward(xp, dt, x, p, rng):
    shape = x.shape
    return xp.from_host((rng.random(shape) < np.broadcast_to(xp.to_host(p), shape)).astype(x.dtype))


BERNOULLI = register(Op("bernoulli", _bernoulli_forward, vjp=[_zero], dtype="keep",
                        unsupported=no_kernel("bernoulli_tensor_cpu_p_", "bool", *INTS)))
BERNOULLI_TENSOR_FILL = register(Op("bernoulli_tensor_fill", _bernoulli_like_forward, inputs=("self", "p"),
                                    vjp=[_zero, _zero], dtype="keep", keep_inputs=(1,), node="BernoulliBackward1"))


def _bernoulli_p(input, p, generator):
    if not 0 <= p <= 1:
        raise RuntimeError("bernoulli_ expects p to be in [0, 1], but got p=%s" % _num(p))
    return dispatch(BERNOULLI_FILL, (input,), {"rng": _rng(generator, input), "p": float(p)})


@export("bernoulli")
def bernoulli(input, p=None, *, generator=None, out=None):
    """Samples of Bernoulli(input) (input holds the probabilities); with ``p``, samples of Bernoulli(p) shaped
    like input."""
    if p is not None:
        return write_out(_bernoulli_p(input, p, generator), out)
    _check_probabilities(input)
    return write_out(dispatch(BERNOULLI, (input,), {"rng": _rng(generator, input)}), out)


def bernoulli_fill(input, p=0.5, *, generator=None):
    """The out-of-place form of Tensor.bernoulli_(p): p a probability or a tensor of them (broadcast to input)."""
    if not isinstance(p, Tensor):
        return _bernoulli_p(input, p, generator)
    _check_probabilities(p)
    if p.shape != input.shape:
        p.expand(input.shape)  # PyTorch's error for a p that does not expand to input
    return dispatch(BERNOULLI_TENSOR_FILL, (input, p), {"rng": _rng(generator, input)})


# ------------------------------------------------------------------ poisson
def _poisson_forward(xp, dt, rates, rng):
    return xp.from_host(rng.poisson(xp.to_host(rates)).astype(dt))


POISSON = register(Op("poisson", _poisson_forward, vjp=[_zero], dtype="keep",
                      unsupported=no_kernel("poisson_cpu", "bool", *INTS)))


@export("poisson", method=False)
def poisson(input, generator=None):
    """Samples of Poisson(input), elementwise (input holds the rates)."""
    if input.dtype.is_floating_point:
        host = _values(input)
        if host.size and not (host >= 0).all():
            raise RuntimeError("invalid Poisson rate, expected rate to be non-negative")
    return dispatch(POISSON, (input,), {"rng": _rng(generator, input)})


# ------------------------------------------------------------------ gamma and binomial (jitgrad.distributions)
def _standard_gamma_grad_forward(xp, dt, alpha, x):
    return xp.run("standard_gamma_grad", dt, alpha, x)


# d(sample)/d(concentration) of standard gamma samples at fixed CDF: the reparameterized gradient (PyTorch's
# approximation, kernels/scalars.py); it has no derivative of its own, as in PyTorch
STANDARD_GAMMA_GRAD = register(Op("_standard_gamma_grad", _standard_gamma_grad_forward, inputs=("self", "output"),
                                  dtype="float", broadcast=True, differentiable=False,
                                  unsupported=no_kernel("_standard_gamma_grad_cpu", "bool", *INTS)))


def _standard_gamma_forward(xp, dt, alpha, rng):
    return xp.from_host(rng.standard_gamma(np.asarray(xp.to_host(alpha), np.float64)).astype(dt))


STANDARD_GAMMA = register(Op("_standard_gamma", _standard_gamma_forward, dtype="keep", node="StandardGammaBackward0",
                             vjp=[lambda g, s: g * dispatch(STANDARD_GAMMA_GRAD, (s.self, s.result))],
                             unsupported=no_kernel("gamma_cpu", "bool", *INTS)))


@export("_standard_gamma", method=False)
def _standard_gamma(input, generator=None):
    """Samples of Gamma(input, 1), elementwise, differentiable in ``input`` (the concentrations)."""
    return dispatch(STANDARD_GAMMA, (input,), {"rng": _rng(generator, input)})


@export("_standard_gamma_grad", method=False)
def _standard_gamma_grad(input, output):
    return dispatch(STANDARD_GAMMA_GRAD, (input, output))


def _binomial_forward(xp, dt, count, prob, rng):
    n, p = np.broadcast_arrays(xp.to_host(count), xp.to_host(prob))
    return xp.from_host(rng.binomial(n.astype(np.int64), p).astype(dt))


BINOMIAL = register(Op("binomial", _binomial_forward, inputs=("count", "prob"), dtype="float", differentiable=False,
                       unsupported=no_kernel("binomial_cpu", "bool", *INTS)))


@export("binomial", method=False)
def binomial(count, prob, generator=None):
    """Samples of Binomial(count, prob), elementwise (count and prob broadcast together), in their dtype."""
    if count.dtype is not prob.dtype:
        raise RuntimeError("Found dtype %s but expected %s" % (prob.dtype.scalar_type, count.dtype.scalar_type))
    return dispatch(BINOMIAL, (count, prob), {"rng": _rng(generator, count)})


# ------------------------------------------------------------------ normal(mean, std)
def _normal_forward(xp, dt, mean, std, rng):
    shape = broadcast_shapes(np.shape(mean), np.shape(std))
    z = xp.from_host(rng.standard_normal(shape, dtype=dt))
    return xp.run("add", dt, mean, xp.run("mul", dt, std, z))


def _normal_op(name, node, inputs):
    return register(Op(name, _normal_forward, inputs=inputs, vjp=[_zero, _zero], dtype="float", node=node))


NORMAL_TENSOR_TENSOR = _normal_op("normal_tensor_tensor", "NormalBackward3", ("mean", "std"))
NORMAL_TENSOR_FLOAT = _normal_op("normal_tensor_float", "NormalBackward1", ("mean", "std"))
NORMAL_FLOAT_TENSOR = _normal_op("normal_float_tensor", "NormalBackward2", ("mean", "std"))


@export("normal", method=False)
def normal(mean, std=1.0, size=None, *, generator=None, out=None, dtype=None, layout=None, device=None,
           pin_memory=False, requires_grad=False):
    """Samples of N(mean, std): tensors of means and/or standard deviations (broadcast together), or two
    numbers and a ``size``."""
    mt, st = isinstance(mean, Tensor), isinstance(std, Tensor)
    if not mt and not st:
        if size is None:
            raise TypeError("normal() received an invalid combination of arguments - got (%s, %s), but expected a "
                            "Tensor mean or std, or a size" % (type(mean).__name__, type(std).__name__))
        return normal_factory(mean, std, size, generator, dtype, device, requires_grad, out)
    ref = mean if mt else std
    if not D.result_type([t.dtype for t in (mean, std) if isinstance(t, Tensor)], [], []).is_floating_point:
        raise NotImplementedError("\"normal_kernel_cpu\" not implemented for '%s'"
                                  % ref.dtype.scalar_type)
    if st:
        host = _values(std)
        if host.size and (host < 0).any():
            raise RuntimeError("normal expects all elements of std >= 0.0")
    else:
        _check_std(std)
    op = NORMAL_TENSOR_TENSOR if mt and st else NORMAL_TENSOR_FLOAT if mt else NORMAL_FLOAT_TENSOR
    return write_out(dispatch(op, (mean if mt else float(mean), std if st else float(std)),
                              {"rng": _rng(generator, ref)}), out)


# ------------------------------------------------------------------ multinomial
def _multinomial_forward(xp, dt, probs, n, replacement, rng):
    rows, k = (probs.shape[0], probs.shape[1]) if probs.ndim == 2 else (1, probs.shape[0])
    p = xp.reshape(xp.astype(probs, np.float64), (rows, k))
    draws = rng.random((rows, n)) if replacement else rng.standard_exponential((rows, k))
    out = xp.multinomial(p, xp.from_host(draws), n, replacement)
    return out if probs.ndim == 2 else xp.reshape(out, (n,))


MULTINOMIAL = register(Op("multinomial", _multinomial_forward, dtype="keep", differentiable=False))


@export("multinomial")
def multinomial(input, num_samples, replacement=False, *, generator=None, out=None):
    """``num_samples`` category indices per row of ``input`` (1-D or 2-D, non-negative weights, not necessarily
    summing to one), drawn with or without replacement; int64."""
    if not input.dtype.is_floating_point:
        raise RuntimeError("multinomial only supports floating-point dtypes for input, got: "
                           + input.dtype.scalar_type)
    if input.ndim not in (1, 2):
        raise RuntimeError("prob_dist must be 1 or 2 dim")
    n = int(num_samples)
    if n <= 0:
        raise RuntimeError("cannot sample n_sample <= 0 samples")
    if not replacement and n > input.shape[-1]:
        raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without replacement")
    host = _values(input)
    if host.size:
        if not (np.isfinite(host).all() and (host >= 0).all()):
            raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
        if (host.sum(axis=-1) <= 0).any():
            raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
    elif input.ndim == 1:
        raise RuntimeError("cannot sample from an empty probability distribution")
    return write_out(dispatch(MULTINOMIAL, (input,), {"n": n, "replacement": bool(replacement),
                                                      "rng": _rng(generator, input)}), out)


# ------------------------------------------------------------------ Tensor.<dist>_ (in place, see _inplace)
for _fn in (uniform, normal_fill, log_normal, cauchy, exponential, geometric, random, bernoulli_fill):
    _fn.__name__ = _fn.__name__.replace("_fill", "")  # Tensor.<name>_ runs it in place
    export(_fn.__name__, method=False, function=False, inplace=True)(_fn)
