"""The scalar functions of elementwise math (forwards and fused VJPs), written once, registered in SCALARS.

Every forward op and every vector-Jacobian product (VJP) of an elementwise op is one scalar function
below. The CPU loops (kernels/elementwise.py), jitgrad.compile's fused loops and the CUDA kernels
(kernels/cuda/elementwise.py) are generated from them. They read vexp, vtanh, vsigmoid, like and np as
globals of this module, which device backends swap for their own versions.
"""
import hashlib
import math

import numpy as np
from numba import njit

from . import config, vmath
from .vmath import like, vexp, vsigmoid, vtanh

SQRT1_2 = 0.7071067811865476
SQRT_2_OVER_PI = 0.7978845608028654
INV_SQRT_2PI = 0.3989422804014327

# Inlined where they are called, by numba: LLVM declines to inline the larger ones (tanh) into the
# serial loops, which then call them once per element instead of running on vector lanes.
_scalar = njit(error_model="numpy", fastmath=config.FASTMATH, inline="always")


# Scalar functions: name -> numba function. The op table names them.
SCALARS = {}


def scalar(fn):
    """Register ``fn`` as a scalar kernel named after it (a trailing '_' is dropped)."""
    name = fn.__name__.rstrip("_")
    SCALARS[name] = _scalar(fn)
    return SCALARS[name]


# ---------------------------------------------------------------- unary forward
@scalar
def neg(x): return -x
@scalar
def abs_(x): return abs(x)
@scalar
def sign(x): return int(x > 0) - int(x < 0)  # 0 for NaN, as PyTorch
@scalar
def exp(x): return vexp(x)
@scalar
def expm1(x): return math.expm1(x)
@scalar
def log(x): return math.log(x) if x > 0 else (-math.inf if x == 0 else math.nan)
@scalar
def log1p(x): return math.log1p(x) if x > -1 else (-math.inf if x == -1 else math.nan)
@scalar
def sqrt(x): return math.sqrt(x) if x >= 0 else math.nan
@scalar
def rsqrt(x): return 1 / math.sqrt(x) if x > 0 else (math.inf if x == 0 else math.nan)  # fastmath's rsqrt gives nan at 0
@scalar
def reciprocal(x): return 1 / x
@scalar
def square(x): return x * x
@scalar
def sin(x): return math.sin(x)
@scalar
def cos(x): return math.cos(x)
@scalar
def tan(x): return math.tan(x)
@scalar
def tanh(x): return vtanh(x)
@scalar
def sigmoid(x): return vsigmoid(x)
@scalar
def relu(x): return x if x > 0 or x != x else 0  # not x * 0: that is -0. for x < 0 and nan for -inf
@scalar
def leaky_relu(x, slope): return x if x > 0 else x * slope
@scalar
def elu(x, alpha): return x if x > 0 else alpha * math.expm1(x)
@scalar
def hardtanh(x, lo, hi):
    t = lo if x < lo else x  # as clamp: NaN stays NaN
    return hi if t > hi else t
@scalar
def gelu(x): return 0.5 * x * (1 + math.erf(x * SQRT1_2))
@scalar
def gelu_tanh(x): return 0.5 * x * (1 + math.tanh(SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)))
@scalar
def silu(x): return x * vsigmoid(x)
@scalar
def softplus(x, beta, threshold):
    return x if x * beta > threshold else math.log1p(math.exp(x * beta)) / beta
@scalar
def floor(x): return np.floor(x)
@scalar
def ceil(x): return np.ceil(x)
@scalar
def round_(x): return np.rint(x)
@scalar
def trunc(x): return np.trunc(x)
@scalar
def erf(x): return math.erf(x)
@scalar
def identity(x): return x
@scalar
def logical_not(x): return not x
@scalar
def isnan(x): return x != x
@scalar
def isinf(x): return x == math.inf or x == -math.inf
@scalar
def isposinf(x): return x == math.inf
@scalar
def isneginf(x): return x == -math.inf
@scalar
def isfinite(x): return x == x and x != math.inf and x != -math.inf
# inverse trigonometric and hyperbolic functions: NaN outside their domains, infinite at its poles (the
# explicit branches keep libm's domain errors out)
@scalar
def asin(x): return math.asin(x) if -1 <= x <= 1 else math.nan
@scalar
def acos(x): return math.acos(x) if -1 <= x <= 1 else math.nan
@scalar
def atan(x): return math.atan(x)
@scalar
def sinh(x): return math.sinh(x)
@scalar
def cosh(x): return math.cosh(x)
@scalar
def asinh(x): return math.asinh(x)
@scalar
def acosh(x): return math.acosh(x) if x >= 1 else math.nan
@scalar
def atanh(x):
    if -1 < x < 1:
        return math.atanh(x)
    return math.inf if x == 1 else (-math.inf if x == -1 else math.nan)
@scalar
def log2(x): return math.log2(x) if x > 0 else (-math.inf if x == 0 else math.nan)
@scalar
def log10(x): return math.log10(x) if x > 0 else (-math.inf if x == 0 else math.nan)
@scalar
def exp2(x): return 2.0 ** x


# ---------------------------------------------------------------- binary / ternary forward
@scalar
def add(a, b): return a + b
@scalar
def add_alpha(a, b, alpha): return a + alpha * b
@scalar
def sub(a, b): return a - b
@scalar
def mul(a, b): return a * b
@scalar
def div(a, b): return a / b
@scalar
def div_trunc(a, b): return np.trunc(a / b)
@scalar
def div_floor(a, b): return np.floor(a / b)
@scalar
def int_div_floor(a, b): return a // b
@scalar
def int_div_trunc(a, b):
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q
@scalar
def remainder(a, b): return a - b * np.floor(a / b)
@scalar
def int_remainder(a, b): return a % b
@scalar
def pow_(a, b): return a ** b
@scalar
def maximum(a, b): return a if (a > b or a != a) else b
@scalar
def minimum(a, b): return a if (a < b or a != a) else b
@scalar
def atan2(a, b): return math.atan2(a, b)
@scalar
def eq(a, b): return a == b
@scalar
def ne(a, b): return a != b
@scalar
def lt(a, b): return a < b
@scalar
def le(a, b): return a <= b
@scalar
def gt(a, b): return a > b
@scalar
def ge(a, b): return a >= b
@scalar
def logical_and(a, b): return bool(a) and bool(b)
@scalar
def logical_or(a, b): return bool(a) or bool(b)
@scalar
def logical_xor(a, b): return bool(a) != bool(b)
@scalar
def where(c, a, b): return a if c else b
@scalar
def binary_cross_entropy(x, t):
    # each log clamped at -100 as PyTorch does, so x = 0 or 1 gives a finite loss
    lx = max(math.log(x), -100.0) if x > 0 else -100.0
    l1x = max(math.log1p(-x), -100.0) if x < 1 else -100.0
    return -(t * lx + (1 - t) * l1x)
@scalar
def clamp(x, lo, hi):
    t = lo if x < lo else x
    return hi if t > hi else t


# ---------------------------------------------------------------- fused VJPs
# Each is one op's gradient formula for one input, fused into one pass. The op table holds the
# same formula over tensor ops (for create_graph); the generated tests hold these to it. Where a
# mask switches the gradient off, they select 0 rather than multiply by 0 (g * 0 is NaN for an
# infinite g, e.g. from sqrt or log downstream at 0), as PyTorch does.
@scalar
def abs_vjp(g, x): return g * (int(x > 0) - int(x < 0))
@scalar
def exp_vjp(g, y): return g * y
@scalar
def expm1_vjp(g, y): return g * (y + 1)
@scalar
def log_vjp(g, x): return g / x
@scalar
def log1p_vjp(g, x): return g / (x + 1)
@scalar
def sqrt_vjp(g, y): return g / (2 * y)
@scalar
def rsqrt_vjp(g, y): return -0.5 * g * y * y * y
@scalar
def reciprocal_vjp(g, y): return -g * y * y
@scalar
def square_vjp(g, x): return like(x, 2) * g * x
@scalar
def sin_vjp(g, x): return g * math.cos(x)
@scalar
def cos_vjp(g, x): return -g * math.sin(x)
@scalar
def tan_vjp(g, y): return g * (1 + y * y)
@scalar
def tanh_vjp(g, y): return g * (like(y, 1) - y * y)
@scalar
def sigmoid_vjp(g, y): return g * y * (like(y, 1) - y)
@scalar
def relu_vjp(g, y): return g if y > 0 else like(g, 0)
@scalar
def leaky_relu_vjp(g, x, slope): return g if x > 0 else g * slope
@scalar
def hardtanh_vjp(g, x, lo, hi): return 0.0 if x <= lo or x >= hi else g  # a NaN input passes g, as PyTorch
@scalar
def elu_vjp(g, x, alpha): return g if x > 0 else g * alpha * vexp(x)
@scalar
def gelu_vjp(g, x):
    return g * (0.5 * (1 + math.erf(x * SQRT1_2)) + x * INV_SQRT_2PI * vexp(-0.5 * x * x))
@scalar
def gelu_tanh_vjp(g, x):
    inner = SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)
    t = math.tanh(inner)
    return g * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * SQRT_2_OVER_PI * (1 + 3 * 0.044715 * x * x))
@scalar
def silu_vjp(g, x):
    s = vsigmoid(x)
    return g * s * (1 + x * (1 - s))
@scalar
def softplus_vjp(g, x, beta, threshold):
    return g if x * beta > threshold else g / (1 + vexp(-x * beta))
@scalar
def div_vjp_other(g, a, b): return -g * a / (b * b)
@scalar
def pow_vjp_self(g, a, b): return 0.0 if b == 0 else g * b * a ** (b - 1)
@scalar
def pow_vjp_other(g, a, b, y): return g * 0 if (a == 0 and b >= 0) else g * y * np.log(a)
@scalar
def maximum_vjp(g, a, b): return 0.0 if a < b else (g / 2 if a == b else g)  # a NaN on either side passes g
@scalar
def atan2_vjp_self(g, a, b):
    d = a * a + b * b
    return g * b / d if d != 0 else 0.0
@scalar
def atan2_vjp_other(g, a, b):
    d = a * a + b * b
    return -g * a / d if d != 0 else 0.0
@scalar
def clamp_vjp(g, x, lo, hi): return g if (x >= lo and x <= hi) else 0.0
@scalar
def mask_vjp(g, keep): return g if keep else 0.0


# ---------------------------------------------------------------- special functions and activations (ops/special.py)
_TWO_OVER_SQRT_PI = 1.1283791670955126


@scalar
def erfc(x): return math.erfc(x)
@scalar
def erfinv(x):
    # Giles' single-precision approximation, then two Newton steps on erf(r) = x: double precision
    if not (-1.0 < x < 1.0):
        return math.copysign(math.inf, x) if (x == 1.0 or x == -1.0) else math.nan
    w = -math.log((1.0 - x) * (1.0 + x))
    if w < 5.0:
        w = w - 2.5
        p = 2.81022636e-08
        p = 3.43273939e-07 + p * w
        p = -3.5233877e-06 + p * w
        p = -4.39150654e-06 + p * w
        p = 0.00021858087 + p * w
        p = -0.00125372503 + p * w
        p = -0.00417768164 + p * w
        p = 0.246640727 + p * w
        p = 1.50140941 + p * w
    else:
        w = math.sqrt(w) - 3.0
        p = -0.000200214257
        p = 0.000100950558 + p * w
        p = 0.00134934322 + p * w
        p = -0.00367342844 + p * w
        p = 0.00573950773 + p * w
        p = -0.0076224613 + p * w
        p = 0.00943887047 + p * w
        p = 1.00167406 + p * w
        p = 2.83297682 + p * w
    r = p * x
    r = r - (math.erf(r) - x) / (_TWO_OVER_SQRT_PI * math.exp(-r * r))
    return r - (math.erf(r) - x) / (_TWO_OVER_SQRT_PI * math.exp(-r * r))
@scalar
def erfinv_vjp(g, y): return g * 0.5 * math.sqrt(math.pi) * math.exp(y * y)
@scalar
def erfc_vjp(g, x): return -g * _TWO_OVER_SQRT_PI * math.exp(-x * x)
@scalar
def hardswish(x):
    return 0.0 * x if x <= -3 else (x if x >= 3 else x * (x + 3) / 6)  # 0 * x: NaN stays NaN
@scalar
def hardswish_vjp(g, x): return 0.0 if x <= -3 else (g * (x / 3 + 0.5) if x < 3 else g)
@scalar
def hardsigmoid(x): return 0.0 * x if x <= -3 else (1.0 + 0.0 * x if x >= 3 else (x + 3) / 6)
@scalar
def hardsigmoid_vjp(g, x): return g / 6 if (x > -3 and x < 3) else 0.0
@scalar
def mish(x):
    sp = x if x > 20 else math.log1p(math.exp(x))  # softplus, threshold 20 as PyTorch's mish
    return x * math.tanh(sp)
@scalar
def mish_vjp(g, x):
    t = math.tanh(x if x > 20 else math.log1p(math.exp(x)))
    return g * (t + x * (1 - t * t) / (1 + math.exp(-x)))
@scalar
def logsigmoid(x): return min(x, 0.0) - math.log1p(math.exp(-abs(x)))
@scalar
def logsigmoid_vjp(g, x): return g / (1 + math.exp(x))
@scalar
def logaddexp(a, b):
    if a == b and (a == math.inf or a == -math.inf):
        return a  # both -inf (or both +inf): the sum of two zeros (two infinities) is that
    m = a if a > b else b
    return m + math.log1p(math.exp(-abs(a - b)))
@scalar
def logaddexp_vjp(g, a, b): return g / (1 + math.exp(b - a))
@scalar
def lerp(a, b, w): return a + w * (b - a) if abs(w) < 0.5 else b - (b - a) * (1 - w)
@scalar
def lerp_vjp_self(g, w): return g * (1 - w)
@scalar
def lerp_vjp_weight(g, a, b): return g * (b - a)


def _sources_stamp(*files):
    digest = hashlib.sha1()
    for path in files:
        with open(path, "rb") as f:
            digest.update(f.read())
    return digest.hexdigest()[:12]


# A hash of the sources the scalar functions compile from (this file and the math they inline): the loops
# generated from them carry it in their names, so numba's on-disk cache never serves a loop built from older ones.
STAMP = _sources_stamp(__file__, vmath.__file__, config.__file__)
