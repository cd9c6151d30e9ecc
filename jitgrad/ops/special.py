"""Special functions and the activations built on them: erfc, erfinv, logaddexp, lerp, hardswish,
hardsigmoid, mish, logsigmoid and glu. One entry each; scalar kernels in kernels/scalars.py."""
import math

import numpy as np

from .._op import Op, dispatch
from .._tensor import Tensor
from ._derive import derive
from ._table import _TYPE_NAMES, COMPLEX, INTS, _arr, _noncontig, binary_samples, no_kernel, register, rejects
from .join import cat
from .unary import _c, _np_erf, _unary, ew_forward


def _np_erfinv(y):
    """erfinv by Newton's method on erf from 0 (erf is concave above 0: the iterates rise monotonically)."""
    y = np.asarray(y, dtype=np.float64)
    r = np.zeros_like(y)
    with np.errstate(all="ignore"):
        for _ in range(60):
            r = r - (_np_erf(r) - y) / (2 / math.sqrt(math.pi) * np.exp(-r * r))
    return np.where(np.abs(y) == 1, np.copysign(np.inf, y), np.where(np.abs(y) > 1, np.nan, r))


def _np_logsigmoid(x):
    return np.minimum(x, 0) - np.log1p(np.exp(-np.abs(x)))


def _np_softplus(x):
    return np.where(x > 20, x, np.log1p(np.exp(np.minimum(x, 20))))


_FLOAT_ACTIVATION = ("bool",) + INTS


def _activation(name, vjp, fused, ref, module, kernel_name, **kw):
    """An activation with F.<name>, its in-place form (F.<name>(x, inplace=True)) and nn.<module>, no
    jitgrad.<name> or Tensor.<name>, as in PyTorch."""
    kw.setdefault("api", (name,))
    return _unary(name, vjp, fused, ref=ref, module=module, method=False, function=False,
                  unsupported=no_kernel(kernel_name, *_FLOAT_ACTIVATION), **kw)


def _hardswish_grad(g, s):
    x = s.self
    return g.where(x >= 3, (g * (x / 3 + 0.5)).where(x > -3, 0.0))


def _mish_grad(g, s):
    x = s.self
    t = x.softplus().tanh()
    return g * (t + x * x.sigmoid() * (1 - t * t))


def _glu_grad(g, s):
    a, b = s.self.chunk(2, s.dim)
    sb = b.sigmoid()
    return cat([g * sb, g * a * sb * (1 - sb)], s.dim)


def _glu_forward(xp, dt, x, dim):
    n = x.shape[dim] // 2
    a = xp.getitem(x, (slice(None),) * dim + (slice(0, n),))
    b = xp.getitem(x, (slice(None),) * dim + (slice(n, 2 * n),))
    return xp.run("mul", dt, a, xp.run("sigmoid", dt, b))


# ---------------------------------------------------------------------- API
def glu(input, dim=-1):
    if input.ndim == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    d = input._wrap_dim(dim)
    if input.shape[d] % 2:
        raise RuntimeError("Halving dimension must be even, but dimension %d is size %d" % (d, input.shape[d]))
    return dispatch(GLU, (input,), {"dim": d})


def logaddexp(input, other):
    if not isinstance(other, Tensor):
        raise TypeError("logaddexp(): argument 'other' (position 2) must be Tensor, not " + type(other).__name__)
    return dispatch(LOGADDEXP, (input, other))


_C_NAMES = {"float32": "float", "float64": "double", "int64": "long int", "int32": "int", "bool": "bool",
            "complex64": "c10::complex<float>", "complex128": "c10::complex<double>"}


def lerp(input, end, weight):
    if isinstance(input, Tensor) and not (input.dtype.is_floating_point or input.dtype.is_complex):
        # (a float weight would promote)
        raise NotImplementedError("\"lerp_kernel_%s\" not implemented for '%s'" % (
            "tensor" if isinstance(weight, Tensor) else "scalar", _TYPE_NAMES[input.dtype.name]))
    if isinstance(end, Tensor) and end.dtype is not input.dtype:
        raise RuntimeError("expected dtype %s for `end` but got dtype %s"
                           % (_C_NAMES[input.dtype.name], _C_NAMES[end.dtype.name]))
    if isinstance(weight, Tensor) and weight.ndim and weight.dtype is not input.dtype:
        raise RuntimeError("expected dtype %s for `weight` but got dtype %s"
                           % (_C_NAMES[input.dtype.name], _C_NAMES[weight.dtype.name]))
    return dispatch(LERP, (input, end, weight))


# ---------------------------------------------------------------------- samples
def _glu_samples(rng, dtype):
    A = lambda *s: _arr(rng, s, -2.0, 2.0, dtype)  # noqa: E731
    return [((A(2, 4),), {}), ((A(4, 3),), {"dim": 0}), ((A(2, 2, 6),), {"dim": 1}),
            ((_noncontig(rng, (4, 2), -2.0, 2.0, dtype),), {"dim": 0}), ((A(2),), {})]


def _np_glu(x, dim=-1):
    a, b = np.split(x, 2, axis=dim)
    return a / (1 + np.exp(-b))


def _lerp_samples(rng, dtype):
    if np.dtype(dtype).kind not in "fc":
        return []  # (rejected: tests/ops/test_ops_against_torch.py)
    A = lambda s, lo=-2.0, hi=2.0: _arr(rng, s, lo, hi, dtype)  # noqa: E731
    return [((A((2, 3)), A((2, 3)), 0.3), {}), ((A((2, 3)), A((3,)), 0.8), {}), ((A(()), A(()), -0.25), {}),
            ((A((2, 3)), A((2, 3)), A((2, 3), -0.5, 1.5)), {}), ((A((2, 1)), A((3,)), A((), 0.0, 1.0)), {}),
            ((_noncontig(rng, (3, 2), -2.0, 2.0, dtype), A((3, 2)), A((2,), 0.0, 1.0)), {})]


def _np_logaddexp(a, b):
    if np.result_type(a, b).kind != "c":
        return np.logaddexp(a, b)
    m, d = np.where(a.real >= b.real, a, b), np.where(a.real >= b.real, b - a, a - b)  # (NumPy's has no complex loop)
    return m + np.log(1 + np.exp(d))


def _np_lerp(a, b, w):
    w = np.asarray(w, dtype=np.result_type(a, b))
    return np.where(np.abs(w) < 0.5, a + w * (b - a), b - (b - a) * (1 - w)).astype(np.result_type(a, b))


# ---------------------------------------------------------------------- the entries
ERFC = _unary("erfc", lambda g, s: -g * (2 / math.sqrt(math.pi)) * (-s.self * s.self).exp(), derive("erfc_vjp"),
              ref=lambda x: 1 - _np_erf(x), inplace=True, unsupported=no_kernel("erfc_vml_cpu", *COMPLEX))
ERFINV = _unary("erfinv", lambda g, s: g * (0.5 * math.sqrt(math.pi)) * (s.result * s.result).exp(),
                derive("erfinv_vjp"), ref=_np_erfinv, domain=(-0.9, 0.9), inplace=True,
                unsupported=no_kernel("erfinv_vml_cpu", *COMPLEX))
HARDSWISH = _activation("hardswish", _hardswish_grad, derive("hardswish_vjp"),
                        lambda x: x * np.clip(x + 3, 0, 6) / 6, "Hardswish", "hardswish_cpu", domain=(-4.0, 4.0),
                        inplace=True)
HARDSIGMOID = _activation("hardsigmoid", lambda g, s: (g / 6).where((s.self > -3) & (s.self < 3), 0.0),
                          derive("hardsigmoid_vjp"), lambda x: np.clip(x + 3, 0, 6) / 6, "Hardsigmoid",
                          "hardsigmoid_cpu", domain=(-4.0, 4.0), inplace=True)
MISH = _activation("mish", _mish_grad, derive("mish_vjp"), lambda x: x * np.tanh(_np_softplus(x)), "Mish",
                   "mish_cpu", inplace=True)
LOGSIGMOID = _activation("logsigmoid", lambda g, s: g * (-s.self).sigmoid(), derive("logsigmoid_vjp"),
                         _np_logsigmoid, "LogSigmoid", "log_sigmoid_cpu", node="LogSigmoidBackward0", api=())
GLU = register(Op("glu", _glu_forward, vjp=[_glu_grad], dtype="same", ref=_np_glu, samples=_glu_samples, call=glu,
                  unsupported=no_kernel("glu_cpu", *_FLOAT_ACTIVATION), bench={"sizes": [(16, 16), (2048, 2048)]}))
LOGADDEXP = register(Op("logaddexp", ew_forward("logaddexp"), inputs=("self", "other"),
                        vjp=[lambda g, s: g / _c(1 + (s.other - s.self).exp()),
                             lambda g, s: g / _c(1 + (s.self - s.other).exp())], complex=True,
                        fused=[derive("logaddexp_vjp"), derive("logaddexp_vjp_other")],
                        dtype="promote", broadcast=True, ref=_np_logaddexp, samples=binary_samples(scalar=None),
                        unsupported=no_kernel("logaddexp_cpu", *_FLOAT_ACTIVATION), call=logaddexp,
                        api=("logaddexp",), bench={"sizes": [(16,), (1 << 22,)]}))
LERP = register(Op("lerp", lambda xp, dt, a, b, w: xp.run("lerp", dt, a, b, w), inputs=("self", "end", "weight"),
                   vjp=[lambda g, s: g * _c(1 - s.weight), lambda g, s: g * _c(s.weight),
                        lambda g, s: g * _c(s.end - s.self)], complex=True,
                   fused=[derive("lerp_vjp_self"), ("mul", ("g", "weight")),
                          derive("lerp_vjp_weight")],
                   dtype="promote", broadcast=True, original_scalars=True, ref=_np_lerp, samples=_lerp_samples, node="LerpBackward0",
                   unsupported=rejects(NotImplementedError, "\"lerp_kernel_scalar\" not implemented for '%(type)s'",
                                       *_FLOAT_ACTIVATION), call=lerp, api=("lerp",), inplace=True,
                   bench={"sizes": [(16,), (1 << 22,)]}))
