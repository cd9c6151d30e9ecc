"""Vectorizable exp, tanh and sigmoid (float32, float64), the intrinsics they are built on, their device stand-ins."""
import math

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core.extending import intrinsic, overload

from . import config

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
    # tanh |x| = -m / (2 + m) with m = expm1(-2|x|): exp's reduction, its polynomial less the 1 (expm1 of r),
    # scaled back by 2^k without cancelling (2^k p + (2^k - 1)), so no series is needed near 0 (within 3 ulp)
    a = min(abs(x), _F(10.0))  # tanh(10) rounds to 1 in float32
    y = -_F2 * a
    k = np.floor(y * _LOG2E_F + _HALF_F)
    r = _sub_mul(_sub_mul(y, k, _LN2_HI_F), k, _LN2_LO_F)
    p = r + r * r * (_HALF_F + r * (_F3 + r * (_F4 + r * (_F5 + r * (_F6 + r * _F7)))))
    s = _ldexp_f32(_F1, k)
    m = s * p + (s - _F1)
    t = np.copysign(-m / (_F2 + m), x)  # odd: -0.0 stays -0.0
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


def like(x, c):
    """Constant ``c`` in float32 where ``x`` is float32, else as it is. A Python literal would make numba
    compute float32 math in float64 (int64 and float64 promote float32), at half the SIMD lanes and with
    conversions; PyTorch computes float32 math in float32."""
    return np.float32(c) if isinstance(x, np.float32) else c


@overload(like, inline="always", jit_options=_OPTS)
def _like_overload(x, c):
    if x == types.float32:
        return lambda x, c: np.float32(c)
    return lambda x, c: c


def device_like(x, c):
    return c


def device_sigmoid(x):
    return 1 / (1 + math.exp(-x))


DEVICE_MATH = {"vexp": math.exp, "vtanh": math.tanh}
# Python functions that device backends compile in place of these names
DEVICE_FUNCTIONS = {"vsigmoid": device_sigmoid, "like": device_like}
