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
from numba import njit, prange, types  # noqa: F401  (prange: used by the generated loops)
from numba.core.extending import intrinsic

from . import config
from ._jit import compiled

SQRT1_2 = 0.7071067811865476
SQRT_2_OVER_PI = 0.7978845608028654
INV_SQRT_2PI = 0.3989422804014327

_scalar = njit(error_model="numpy", fastmath=config.FASTMATH)


# ---------------------------------------------------------------- vectorizable math
# numba lowers math.exp/math.tanh to scalar libm calls, which LLVM cannot vectorize (no SVML).
# vexp is exp written as arithmetic (range reduction, degree-13 polynomial, 2^k from its bits):
# within 1 ulp in float64, and the loops that use it run on SIMD lanes. Device backends swap these
# names for their native functions (see DEVICE_MATH).
@intrinsic
def _f64_from_bits(typingctx, bits):
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], context.get_value_type(types.float64))
    return types.float64(types.int64), codegen


_LOG2E, _LN2_HI, _LN2_LO = 1.4426950408889634, 6.93147180369123816490e-01, 1.90821492927058770002e-10
(_C2, _C3, _C4, _C5, _C6, _C7, _C8, _C9, _C10, _C11, _C12, _C13) = [1.0 / math.factorial(i) for i in range(2, 14)]


@_scalar
def vexp(x):
    x = float(x)
    xc = min(max(x, -746.0), 710.0)
    k = math.floor(xc * _LOG2E + 0.5)
    r = xc - k * _LN2_HI - k * _LN2_LO
    p = 1.0 + r * (1.0 + r * (_C2 + r * (_C3 + r * (_C4 + r * (_C5 + r * (_C6 + r * (_C7 + r * (
        _C8 + r * (_C9 + r * (_C10 + r * (_C11 + r * (_C12 + r * _C13))))))))))))
    k1 = np.int64(k) >> 1  # 2^k as two factors, so that subnormal results and k = 1024 stay exact
    y = p * _f64_from_bits((k1 + 1023) << 52) * _f64_from_bits((np.int64(k) - k1 + 1023) << 52)
    y = y if x <= 709.782712893384 else math.inf
    y = y if x >= -745.1332191019412 else 0.0
    return y if x == x else x


@_scalar
def vtanh(x):
    a = abs(float(x))
    e = vexp(-2.0 * a)
    t = (1.0 - e) / (1.0 + e)
    a2 = a * a  # near 0, (1 - e) cancels: the series to x^9 is exact to double precision below 0.02
    t = t if a > 0.02 else a * (1.0 + a2 * (-1.0 / 3.0 + a2 * (2.0 / 15.0 + a2 * (-17.0 / 315.0 + a2 * 62.0 / 2835.0))))
    t = t if x >= 0 else -t
    return t if x == x else x


DEVICE_MATH = {"vexp": math.exp, "vtanh": math.tanh}

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
def sigmoid(x): return 1 / (1 + vexp(-x))
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
def silu(x): return x / (1 + vexp(-x))
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
    s = 1 / (1 + vexp(-x))
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
