"""The scalar functions of elementwise math, written once, registered in SCALARS.

Every forward op of an elementwise op is one scalar function below; the fused vector-Jacobian products
(VJPs) are scalar functions too, derived from the op table's formulas into derived.py, which registers
them here when kernels/elementwise.py imports it. The CPU loops (kernels/elementwise.py), jitgrad.compile's fused loops and the CUDA kernels
(kernels/cuda/elementwise.py) are generated from them. They read vexp, vtanh, vsigmoid, like and np as
globals of this module, which device backends swap for their own versions.
"""
import hashlib
import math
import os

import numpy as np
from numba import njit

from . import config, vmath
from .vmath import like, vexp, vsigmoid, vtanh  # noqa: F401  (like: the derived VJPs read it from here)

SQRT1_2 = 0.7071067811865476
SQRT_2_OVER_PI = 0.7978845608028654
INV_SQRT_2PI = 0.3989422804014327
# SELU's constants (Klambauer et al. 2017), as PyTorch's
SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946

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
def celu(x, alpha): return x if x > 0 else alpha * math.expm1(x / alpha)
@scalar
def selu(x): return SELU_SCALE * (x if x > 0 else SELU_ALPHA * math.expm1(x))
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
# shrinkage and thresholds (ops/shrink.py): NaN passes through, as PyTorch's comparisons let it
@scalar
def hardshrink(x, lambd): return 0.0 * x if -lambd <= x <= lambd else x
@scalar
def softshrink(x, lambd): return x - lambd if x > lambd else (x + lambd if x < -lambd else x * 0.0)
@scalar
def threshold(x, threshold, value): return value if x <= threshold else x


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
def hardswish(x):
    return 0.0 * x if x <= -3 else (x if x >= 3 else x * (x + 3) / 6)  # 0 * x: NaN stays NaN
@scalar
def hardsigmoid(x): return 0.0 * x if x <= -3 else (1.0 + 0.0 * x if x >= 3 else (x + 3) / 6)
@scalar
def mish(x):
    sp = x if x > 20 else math.log1p(math.exp(x))  # softplus, threshold 20 as PyTorch's mish
    return x * math.tanh(sp)
@scalar
def logsigmoid(x): return min(x, 0.0) - math.log1p(math.exp(-abs(x)))
@scalar
def logaddexp(a, b):
    if a == b and (a == math.inf or a == -math.inf):
        return a  # both -inf (or both +inf): the sum of two zeros (two infinities) is that
    m = a if a > b else b
    return m + math.log1p(math.exp(-abs(a - b)))
@scalar
def lerp(a, b, w): return a + w * (b - a) if abs(w) < 0.5 else b - (b - a) * (1 - w)


def _sources_stamp(*files):
    digest = hashlib.sha1()
    for path in files:
        with open(path, "rb") as f:
            digest.update(f.read())
    return digest.hexdigest()[:12]


# A hash of the sources the scalar functions compile from (this file and the math they inline): the loops
# generated from them carry it in their names, so numba's on-disk cache never serves a loop built from older ones.
STAMP = _sources_stamp(__file__, vmath.__file__, config.__file__, os.path.join(os.path.dirname(__file__), "derived.py"))
