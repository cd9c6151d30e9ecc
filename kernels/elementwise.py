"""Elementwise math, written once as scalar functions, and the loops generated from them.

Every forward op and every vector-Jacobian product (VJP) of an elementwise op is one scalar
function below. ``run(name, out_dtype, *args)`` applies it over arrays: it picks (and on first
use generates) a flat loop for the argument pattern -- which arguments are arrays and which
are broadcast scalars -- serial or ``prange``-parallel by size. The CUDA twins
(``kernels.cuda``) are generated from the same scalar functions.

The generated loops are compiled into this module's namespace with this file as their source,
so numba's on-disk cache keys them on this file: editing a scalar function here invalidates
the cached loops that inline it.
"""
import math

import numpy as np
from llvmlite import ir
from numba import njit, prange, types  # noqa: F401  (prange: used by the generated loops)
from numba.core.extending import intrinsic, overload

from . import config
from ._jit import compiled

SQRT1_2 = 0.7071067811865476
SQRT_2_OVER_PI = 0.7978845608028654
INV_SQRT_2PI = 0.3989422804014327

# Inlined where they are called, by numba: LLVM declines to inline the larger ones (tanh) into the
# serial loops, which then call them once per element instead of running on vector lanes.
_scalar = njit(error_model="numpy", fastmath=config.FASTMATH, inline="always")


# ---------------------------------------------------------------- vectorizable math
# numba lowers math.exp/math.tanh to scalar libm calls, which LLVM cannot vectorize (no SVML).
# vexp, vtanh and vsigmoid are written as arithmetic instead (range reduction, a polynomial, 2^k
# from its bits), so the loops that use them run on SIMD lanes. Each has a float64 version (within
# 1 ulp) and a float32 one (within a few ulp, as float32 libraries are) that computes in float32
# and int32 throughout, twice the lanes of float64; numba picks by the argument's type, and Python
# calls (the CUDA simulator) do the same. Device backends swap these names for their own functions
# (DEVICE_MATH, DEVICE_FUNCTIONS).
_OPTS = {"error_model": "numpy", "fastmath": config.FASTMATH}


def _ldexp(float_type, int_type, bits, low):
    """p * 2.0**k for p in [0.5, 2) and an integral float k no greater than the largest exponent
    (the caller selects inf above it), by adding k to p's exponent bits. Where the result may be
    subnormal (k < low) it adds k + 64 and multiplies by 2**-64, which rounds once. Not written as
    p * 2**k1 * 2**k2: numba's fast-math flags would let LLVM multiply the factors first, and
    overflow. (The float -> int32 conversion has vector forms for both widths.)"""
    @intrinsic
    def ldexp(typingctx, p, k):
        def codegen(context, builder, signature, args):
            ity, fty = context.get_value_type(int_type), context.get_value_type(float_type)
            i = builder.fptosi(args[1], ir.IntType(32))
            i = builder.sext(i, ity) if int_type.bitwidth > 32 else i
            small = builder.icmp_signed("<", i, ir.Constant(ity, low))
            i = builder.select(small, builder.add(i, ir.Constant(ity, 64)), i)
            y = builder.add(builder.bitcast(args[0], ity), builder.shl(i, ir.Constant(ity, bits)))
            scale = builder.select(small, ir.Constant(fty, 2.0 ** -64), ir.Constant(fty, 1.0))
            return builder.fmul(builder.bitcast(y, fty), scale)
        return float_type(float_type, float_type), codegen
    return ldexp


_ldexp_f64 = _ldexp(types.float64, types.int64, 52, -1020)
_ldexp_f32 = _ldexp(types.float32, types.int32, 23, -124)

@intrinsic
def _sub_mul(typingctx, a, k, c):
    """a - k * c in the arguments' float type, as written: the step of a range reduction that
    fast-math's reassociation would fold (a - k*c1 - k*c2 into a - k*(c1 + c2)). Its instructions
    carry 'contract' alone (numba adds its fast-math flags only where there are none)."""
    ty = typingctx.unify_types(a, k, c)
    if not isinstance(ty, types.Float):
        return None

    def codegen(context, builder, signature, args):
        a, k, c = (context.cast(builder, v, s, ty) for v, s in zip(args, signature.args))
        return builder.fsub(a, builder.fmul(k, c, flags=("contract",)), flags=("contract",))
    return ty(a, k, c), codegen


@intrinsic
def _select(typingctx, c, a, b):
    """a if c else b, as one LLVM select: no branch, so that numba inlines these functions into
    their callers (inline='always') without the control flow its inliner handles poorly."""
    ty = typingctx.unify_types(a, b)

    def codegen(context, builder, signature, args):
        c, a, b = args[0], context.cast(builder, args[1], signature.args[1], ty), \
            context.cast(builder, args[2], signature.args[2], ty)
        return builder.select(context.cast(builder, c, signature.args[0], types.boolean), a, b)
    return ty(c, a, b), codegen


_LOG2E, _LN2_HI, _LN2_LO = 1.4426950408889634, 6.93147180369123816490e-01, 1.90821492927058770002e-10
(_C2, _C3, _C4, _C5, _C6, _C7, _C8, _C9, _C10, _C11, _C12, _C13) = [1.0 / math.factorial(i) for i in range(2, 14)]
# float32: ln 2 split so that k * _LN2_HI_F is exact for the k of any float32 argument
_F = np.float32
_LOG2E_F, _LN2_HI_F, _LN2_LO_F = _F(_LOG2E), _F(0.693359375), _F(math.log(2) - 0.693359375)
(_F0, _F1, _F2, _HALF_F) = _F(0), _F(1), _F(2), _F(0.5)
(_F3, _F4, _F5, _F6, _F7) = [_F(1.0 / math.factorial(i)) for i in range(3, 8)]
# odd Taylor series of tanh to x^13: below 0.4, within 4e-9 relative (where (1 - e) / (1 + e) cancels)
(_T3, _T5, _T7, _T9, _T11, _T13) = [_F(c) for c in (-1 / 3, 2 / 15, -17 / 315, 62 / 2835, -1382 / 155925,
                                                      21844 / 6081075)]


@njit(**_OPTS)
def _vexp64(x):
    x = float(x)
    xc = min(max(x, -746.0), 710.0)
    k = np.floor(xc * _LOG2E + 0.5)
    r = _sub_mul(_sub_mul(xc, k, _LN2_HI), k, _LN2_LO)
    p = 1.0 + r * (1.0 + r * (_C2 + r * (_C3 + r * (_C4 + r * (_C5 + r * (_C6 + r * (_C7 + r * (
        _C8 + r * (_C9 + r * (_C10 + r * (_C11 + r * (_C12 + r * _C13))))))))))))
    y = _ldexp_f64(p, k)
    y = _select(x <= 709.782712893384, y, math.inf)
    y = _select(x >= -745.1332191019412, y, 0.0)
    return _select(x == x, y, x)


@njit(**_OPTS)
def _vexp32(x):
    # |r| <= ln2/2 after the reduction: the degree-7 Taylor polynomial is within 6e-9 there
    xc = min(max(x, _F(-104.0)), _F(89.0))  # exp(-104) rounds to 0 by itself
    k = np.floor(xc * _LOG2E_F + _HALF_F)
    r = _sub_mul(_sub_mul(xc, k, _LN2_HI_F), k, _LN2_LO_F)
    p = _F1 + r * (_F1 + r * (_HALF_F + r * (_F3 + r * (_F4 + r * (_F5 + r * (_F6 + r * _F7))))))
    y = _ldexp_f32(p, k)
    y = _select(x <= _F(88.72283172607422), y, _F(math.inf))  # the largest float32 whose exp is finite
    return _select(x == x, y, x)


@njit(inline="always", **_OPTS)  # LLVM declines to inline it whole
def _vtanh64(x):
    a = abs(float(x))
    e = _vexp64(-2.0 * a)
    t = (1.0 - e) / (1.0 + e)
    a2 = a * a  # near 0, (1 - e) cancels: the series to x^9 is exact to double precision below 0.02
    t = _select(a > 0.02, t, a * (1.0 + a2 * (-1.0 / 3.0 + a2 * (2.0 / 15.0 + a2 * (-17.0 / 315.0 + a2 * 62.0 / 2835.0)))))
    t = np.copysign(t, x)  # odd: -0.0 stays -0.0
    return _select(x == x, t, x)


@njit(inline="always", **_OPTS)  # LLVM declines to inline it whole
def _vtanh32(x):
    a = abs(x)
    e = _vexp32(-_F2 * a)
    t = (_F1 - e) / (_F1 + e)
    a2 = a * a
    s = a * (_F1 + a2 * (_T3 + a2 * (_T5 + a2 * (_T7 + a2 * (_T9 + a2 * (_T11 + a2 * _T13))))))
    t = _select(a > _F(0.4), t, s)
    t = np.copysign(t, x)
    return _select(x == x, t, x)


@njit(**_OPTS)
def _vsigmoid64(x):
    return 1.0 / (1.0 + _vexp64(-float(x)))


@njit(**_OPTS)
def _vsigmoid32(x):
    return _F1 / (_F1 + _vexp32(-x))


def _typed(name, f32, f64, doc):
    """A function of one number running ``f32`` on float32 arguments and ``f64`` on any other, from
    Python and from numba-compiled code alike."""
    def fn(x):
        return f32(x) if isinstance(x, np.float32) else f64(x)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc

    @overload(fn, inline="always", jit_options=_OPTS)
    def _typed_overload(x):
        if x == types.float32:
            return lambda x: f32(x)
        return lambda x: f64(x)
    return fn


vexp = _typed("vexp", _vexp32, _vexp64, "exp(x), vectorizable")
vtanh = _typed("vtanh", _vtanh32, _vtanh64, "tanh(x), vectorizable")
vsigmoid = _typed("vsigmoid", _vsigmoid32, _vsigmoid64, "1 / (1 + exp(-x)), vectorizable")


def device_sigmoid(x):
    return 1 / (1 + math.exp(-x))


DEVICE_MATH = {"vexp": math.exp, "vtanh": math.tanh}
# Python functions that device backends compile in place of these names
DEVICE_FUNCTIONS = {"vsigmoid": device_sigmoid}

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
def square_vjp(g, x): return 2 * g * x
@scalar
def sin_vjp(g, x): return g * math.cos(x)
@scalar
def cos_vjp(g, x): return -g * math.sin(x)
@scalar
def tan_vjp(g, y): return g * (1 + y * y)
@scalar
def tanh_vjp(g, y): return g * (1 - y * y)
@scalar
def sigmoid_vjp(g, y): return g * y * (1 - y)
@scalar
def relu_vjp(g, y): return g if y > 0 else 0.0
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


# ---------------------------------------------------------------- loop generation
_LOOP = """
def {name}({params}out):
    for i in {rng}(out.size):
        out[i] = {fn}({call})
"""


def _make_loop(fn, pattern, parallel):
    """Generate the flat loop applying scalar ``fn``; pattern[k] says whether arg k is an array."""
    name = "_loop_%s_%s_%s" % (fn, "".join("a" if p else "s" for p in pattern), "par" if parallel else "ser")
    params = "".join("x%d, " % k for k in range(len(pattern)))
    call = ", ".join(("x%d[i]" if p else "x%d") % k for k, p in enumerate(pattern))
    src = _LOOP.format(name=name, params=params, rng="prange" if parallel else "range", fn="SCALARS_%s" % fn, call=call)
    namespace = globals()
    namespace["SCALARS_%s" % fn] = SCALARS[fn]
    exec(compile(src, __file__, "exec"), namespace)
    return compiled(namespace[name], parallel=parallel)


# An operand broadcast along the leading dims of the output (a bias row) or along its trailing
# dims (a per-row value) is read in place by a loop over (rows, cols), instead of being expanded
# to the output's size first. Per operand: "a" full (a 2-D view, [i, j]), "t" repeated per row
# ([j]), "h" one value per row ([i]), "s" a scalar. (2-D indexing, not i * cols + j: numba cannot
# tell that a computed flat index is non-negative, and the wraparound check stops vectorization.)
_LOOP2D = """
def {name}({params}out):
    for i in {rng}(out.shape[0]):
        for j in range(out.shape[1]):
            out[i, j] = {fn}({call})
"""
_INDEX2D = {"a": "x%d[i, j]", "t": "x%d[j]", "h": "x%d[i]", "s": "x%d"}


def _make_loop2d(fn, kinds, parallel):
    name = "_loop2d_%s_%s_%s" % (fn, "".join(kinds), "par" if parallel else "ser")
    params = "".join("x%d, " % k for k in range(len(kinds)))
    call = ", ".join(_INDEX2D[c] % k for k, c in enumerate(kinds))
    src = _LOOP2D.format(name=name, params=params, rng="prange" if parallel else "range", fn="SCALARS_%s" % fn,
                         call=call)
    namespace = globals()
    namespace["SCALARS_%s" % fn] = SCALARS[fn]
    exec(compile(src, __file__, "exec"), namespace)
    return compiled(namespace[name], parallel=parallel)


def _scalar_like(a):
    """A NumPy scalar, or an array of one value, maybe broadcast (sum's gradient): passed as a scalar."""
    return a.__class__ is not np.ndarray or a.size == 1 or not any(a.strides)


def _split(args, shape):
    """(s, kinds): a split of ``shape`` at dim s into rows x cols such that every array operand is
    full, a row repeated (its dims before s are 1, after s the output's) or one value per row (the
    reverse); None when there is none."""
    nd = len(shape)
    padded = [None if _scalar_like(a) else (1,) * (nd - a.ndim) + a.shape for a in args]
    for s in range(1, nd):
        kinds = []
        for p in padded:
            if p is None:
                kinds.append("s")
            elif p == shape:
                kinds.append("a")
            elif all(d == 1 for d in p[:s]) and p[s:] == shape[s:]:
                kinds.append("t")
            elif p[:s] == shape[:s] and all(d == 1 for d in p[s:]):
                kinds.append("h")
            else:
                break
        else:
            return s, kinds
    return None


_loops = {}  # (fn, parallel, *pattern) -> compiled loop


def flat_loop(fn, pattern):
    """The serial flat loop of scalar ``fn``, ``loop(*args, out)``: pattern[k] says whether arg k is
    an array (1-D, of out's length) or a scalar (compiled on first call, as every loop)."""
    key = (fn, False) + pattern
    loop = _loops.get(key)
    if loop is None:
        loop = _loops[key] = _make_loop(fn, pattern, False)
    return loop


def run(fn, out_dtype, *args, out=None):
    """Apply scalar function ``fn`` elementwise over ``args`` with NumPy broadcasting.

    ``args`` are NumPy arrays or NumPy scalars already in the dtype to compute in (a size-1 array
    is passed to the loop as a scalar). ``out`` may be given (in-place ops); it must have the
    broadcast shape and be C-contiguous. Returns the output array.
    """
    # Fast paths for the common calls: one array, or an array with an array of the same shape or a
    # scalar. Spelled out: on 16-element tensors this Python is most of an op's cost. A 1-D array
    # goes to the flat loop as it is (no reshape).
    if out is None:
        a = args[0]
        if a.__class__ is np.ndarray:
            nd = a.ndim
            if nd:
                n = len(args)
                shape = a.shape
                if n == 1:
                    loop = _loops.get((fn, a.size >= config.PARALLEL_THRESHOLD, True))
                    if loop is not None:
                        out = np.empty(shape, out_dtype)
                        if nd == 1:
                            loop(a, out)
                        else:
                            loop(a.reshape(-1), out.reshape(-1))
                        return out
                elif n == 2:
                    b = args[1]
                    if b.__class__ is not np.ndarray:
                        loop = _loops.get((fn, a.size >= config.PARALLEL_THRESHOLD, True, False))
                        if loop is not None:
                            out = np.empty(shape, out_dtype)
                            if nd == 1:
                                loop(a, b, out)
                            else:
                                loop(a.reshape(-1), b, out.reshape(-1))
                            return out
                    elif b.shape == shape:
                        loop = _loops.get((fn, a.size >= config.PARALLEL_THRESHOLD, True, True))
                        if loop is not None:
                            out = np.empty(shape, out_dtype)
                            if nd == 1:
                                loop(a, b, out)
                            else:
                                loop(a.reshape(-1), b.reshape(-1), out.reshape(-1))
                            return out
            elif len(args) <= 2 and (len(args) == 1 or args[1].__class__ is not np.ndarray or not args[1].ndim):
                # 0-d operands (and numbers): passed to the loop as scalars, as _run_general passes them
                loop = _loops.get((fn, False, False) if len(args) == 1 else (fn, False, False, False))
                if loop is not None:
                    out = np.empty((), out_dtype)
                    if len(args) == 1:
                        loop(a[()], out.reshape(1))
                    else:
                        b = args[1]
                        loop(a[()], b[()] if b.__class__ is np.ndarray else b, out.reshape(1))
                    return out
    return _run_general(fn, out_dtype, args, out)


def _run_general(fn, out_dtype, args, out):
    shapes = [a.shape for a in args if a.__class__ is np.ndarray]
    shape = np.broadcast_shapes(*shapes) if shapes else ()
    if out is None:
        out = np.empty(shape, out_dtype)
    size = out.size
    if size == 0:
        return out
    parallel = size >= config.PARALLEL_THRESHOLD
    if len(shape) > 1 and any(a.shape != shape for a in args if not _scalar_like(a)):
        split = _split(args, shape)
        if split is not None:
            s, kinds = split
            key = (fn, parallel, "2d") + tuple(kinds)
            loop = _loops.get(key)
            if loop is None:
                loop = _loops[key] = _make_loop2d(fn, kinds, parallel)
            rows = math.prod(shape[:s])
            cols = size // rows
            operands = [a.reshape(rows, cols) if k == "a" else a.reshape(-1) if k != "s" else
                        a if a.__class__ is not np.ndarray else a[(0,) * a.ndim] for a, k in zip(args, kinds)]
            loop(*operands, out.reshape(rows, cols))
            return out
    flat = []
    key = [fn, parallel]
    for a in args:
        if a.__class__ is not np.ndarray:
            flat.append(a)
            key.append(False)
        elif _scalar_like(a):
            flat.append(a[(0,) * a.ndim])
            key.append(False)
        elif a.shape == shape:
            flat.append(a.reshape(-1))  # a view when contiguous, else a C-ordered copy
            key.append(True)
        else:
            flat.append(np.broadcast_to(a, shape).reshape(-1))
            key.append(True)
    key = tuple(key)
    loop = _loops.get(key)
    if loop is None:
        loop = _loops[key] = _make_loop(fn, key[2:], key[1])
    loop(*flat, out.reshape(-1))
    return out
