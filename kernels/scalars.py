"""The scalar functions of elementwise math, written once, registered in SCALARS.

Every forward op of an elementwise op is one scalar function below; the fused vector-Jacobian products
(VJPs) are scalar functions too, derived from the op table's formulas into derived.py, which registers
them here when kernels/elementwise.py imports it. The CPU loops (kernels/elementwise.py), jitgrad.compile's fused loops and the CUDA kernels
(kernels/cuda/elementwise.py) are generated from them. They read vexp, vtanh, vsigmoid, like and np as
globals of this module, which device backends swap for their own versions.
"""
import cmath
import math
import os

import numpy as np
from numba import njit

from . import config, vmath
from ._jit import sources_stamp
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


# Cephes' coefficient tables (as PyTorch's ATen/native/Math.h carries them), read by the functions below
_I0E_A = (-4.4153416464793395e-18, 3.3307945188222384e-17, -2.431279846547955e-16, 1.715391285555133e-15,
    -1.1685332877993451e-14, 7.676185498604936e-14, -4.856446783111929e-13, 2.95505266312964e-12,
    -1.726826291441556e-11, 9.675809035373237e-11, -5.189795601635263e-10, 2.6598237246823866e-09,
    -1.300025009986248e-08, 6.046995022541919e-08, -2.670793853940612e-07, 1.1173875391201037e-06,
    -4.4167383584587505e-06, 1.6448448070728896e-05, -5.754195010082104e-05, 0.00018850288509584165,
    -0.0005763755745385824, 0.0016394756169413357, -0.004324309995050576, 0.010546460394594998, -0.02373741480589947,
    0.04930528423967071, -0.09490109704804764, 0.17162090152220877, -0.3046826723431984, 0.6767952744094761)
_I0E_B = (-7.233180487874754e-18, -4.830504485944182e-18, 4.46562142029676e-17, 3.461222867697461e-17,
    -2.8276239805165836e-16, -3.425485619677219e-16, 1.7725601330565263e-15, 3.8116806693526224e-15,
    -9.554846698828307e-15, -4.150569347287222e-14, 1.54008621752141e-14, 3.8527783827421426e-13,
    7.180124451383666e-13, -1.7941785315068062e-12, -1.3215811840447713e-11, -3.1499165279632416e-11,
    1.1889147107846439e-11, 4.94060238822497e-10, 3.3962320257083865e-09, 2.266668990498178e-08,
    2.0489185894690638e-07, 2.8913705208347567e-06, 6.889758346916825e-05, 0.0033691164782556943, 0.8044904110141088)
_I1E_A = (2.7779141127610464e-18, -2.111421214358166e-17, 1.5536319577362005e-16, -1.1055969477353862e-15,
    7.600684294735408e-15, -5.042185504727912e-14, 3.223793365945575e-13, -1.9839743977649436e-12,
    1.1736186298890901e-11, -6.663489723502027e-11, 3.625590281552117e-10, -1.8872497517228294e-09,
    9.381537386495773e-09, -4.445059128796328e-08, 2.0032947535521353e-07, -8.568720264695455e-07,
    3.4702513081376785e-06, -1.3273163656039436e-05, 4.781565107550054e-05, -0.00016176081582589674,
    0.0005122859561685758, -0.0015135724506312532, 0.004156422944312888, -0.010564084894626197, 0.024726449030626516,
    -0.05294598120809499, 0.1026436586898471, -0.17641651835783406, 0.25258718644363365)
_I1E_B = (7.517296310842105e-18, 4.414348323071708e-18, -4.6503053684893586e-17, -3.209525921993424e-17,
    2.96262899764595e-16, 3.3082023109209285e-16, -1.8803547755107825e-15, -3.8144030724370075e-15,
    1.0420276984128802e-14, 4.272440016711951e-14, -2.1015418427726643e-14, -4.0835511110921974e-13,
    -7.198551776245908e-13, 2.0356285441470896e-12, 1.4125807436613782e-11, 3.2526035830154884e-11,
    -1.8974958123505413e-11, -5.589743462196584e-10, -3.835380385964237e-09, -2.6314688468895196e-08,
    -2.512236237870209e-07, -3.882564808877691e-06, -0.00011058893876262371, -0.009761097491361469,
    0.7785762350182801)
_NDTRI_P0 = (-59.96335010141079, 98.00107541859997, -56.67628574690703, 13.931260938727968, -1.2391658386738125)
_NDTRI_Q0 = (1.0, 1.9544885833814176, 4.676279128988815, 86.36024213908905, -225.46268785411937, 200.26021238006066,
    -82.03722561683334, 15.90562251262117, -1.1833162112133)
_NDTRI_P1 = (4.0554489230596245, 31.525109459989388, 57.16281922464213, 44.08050738932008, 14.684956192885803,
    2.1866330685079025, -0.1402560791713545, -0.03504246268278482, -0.0008574567851546854)
_NDTRI_Q1 = (1.0, 15.779988325646675, 45.39076351288792, 41.3172038254672, 15.04253856929075, 2.504649462083094,
    -0.14218292285478779, -0.03808064076915783, -0.0009332594808954574)
_NDTRI_P2 = (3.2377489177694603, 6.915228890689842, 3.9388102529247444, 1.3330346081580755, 0.20148538954917908,
    0.012371663481782003, 0.00030158155350823543, 2.6580697468673755e-06, 6.239745391849833e-09)
_NDTRI_Q2 = (1.0, 6.02427039364742, 3.6798356385616087, 1.3770209948908132, 0.21623699359449663,
    0.013420400608854318, 0.00032801446468212774, 2.8924786474538068e-06, 6.790194080099813e-09)
_J0_PP = (0.0007969367292973471, 0.08283523921074408, 1.239533716464143, 5.447250030587687, 8.74716500199817,
    5.303240382353949, 1.0)
_J0_PQ = (0.0009244088105588637, 0.08562884743544745, 1.2535274390105895, 5.470977403304171, 8.761908832370695,
    5.306052882353947, 1.0)
_J0_QP = (-0.011366383889846916, -1.2825271867050931, -19.553954425773597, -93.20601521237683, -177.68116798048806,
    -147.07750515495118, -51.41053267665993, -6.050143506007285)
_J0_QQ = (64.3178256118178, 856.4300259769806, 3882.4018360540163, 7240.467741956525, 5930.727011873169,
    2062.0933166032783, 242.0057402402914)
_J0_RP = (-4794432209.782018, 1956174919465.5657, -249248344360967.72, 9708622510473064.0)
_J0_RQ = (499.563147152651, 173785.4016763747, 48440965.83399621, 11185553704.535683, 2112775201154.892,
    310518229857422.56, 3.1812195594320496e+16, 1.7108629408104315e+18)
_J1_PP = (0.0007621256162081731, 0.07313970569409176, 1.1271960812968493, 5.112079511468076, 8.424045901417724,
    5.214515986823615, 1.0)
_J1_PQ = (0.0005713231280725487, 0.06884559087544954, 1.105142326340617, 5.073863861286015, 8.399855543276042,
    5.209828486823619, 1.0)
_J1_QP = (0.05108625947501766, 4.982138729512334, 75.82382841325453, 366.7796093601508, 710.8563049989261,
    597.4896124006136, 211.68875710057213, 25.207020585802372)
_J1_QQ = (74.23732770356752, 1056.4488603826283, 4986.410583376536, 9562.318924047562, 7997.041604473507,
    2826.1927851763908, 336.0936078106983)
_J1_RP = (-899971225.7055594, 452228297998.19403, -72749424522181.83, 3682957328638529.0)
_J1_RQ = (620.8364781180543, 256987.25675774884, 83514679.14319493, 22151159547.97925, 4749141220799.914,
    784369607876235.9, 8.952223361846274e+16, 5.322786203326801e+18)
_ZETA_A = (12.0, -720.0, 30240.0, -1209600.0, 47900160.0, -1892437580.3183792, 74724249600.0, -2950130727918.164,
    116467828143500.67, -4597978722407473.0, 1.8152105401943546e+17, -7.166165256175667e+18)
_PSI_A = (0.08333333333333333, -0.021092796092796094, 0.007575757575757576, -0.004166666666666667,
    0.003968253968253968, -0.008333333333333333, 0.08333333333333333)
_PI = math.pi
_SQRT_2PI = 2.5066282746310002
_INV_SQRT_PI = 0.5641895835477563
_MACHEP = 1.11022302462515654042e-16


@scalar
def lgamma(x):
    if x <= 0 and x == np.floor(x):
        return math.inf  # the poles (libm's answer; Python's math.lgamma raises there)
    return math.lgamma(x)
@scalar
def digamma(x):
    # Cephes' psi, as PyTorch: reflection below 0, recurrence up to 10, then the asymptotic series
    if x == 0:
        return math.copysign(math.inf, -x)
    if x != x or x == math.inf:
        return x
    result = 0.0
    if x < 0:
        if x == np.floor(x):
            return math.nan
        result = -_PI / math.tan(_PI * (x - np.floor(x)))  # tan of the fraction: pi * x itself rounds
        x = 1 - x
    while x < 10:
        result -= 1 / x
        x += 1
    if x == 10:
        return result + 2.25175258906672110764
    y = 0.0
    if x < 1e17:
        z = 1 / (x * x)
        p = 0.0
        for c in _PSI_A:
            p = p * z + c
        y = z * p
    return result + math.log(x) - 0.5 / x - y
@scalar
def zeta(x, q):
    # the Hurwitz zeta function: Cephes' Euler-Maclaurin summation, as PyTorch
    if x == 1:
        return math.inf
    if x < 1:
        return math.nan
    if q <= 0:
        if q == np.floor(q):
            return math.inf
        if x != np.floor(x):
            return math.nan
    odd = x % 2 == 1  # a ** -x of a negative a: x is an integer there (C's pow, which NumPy's ** is not)
    s = abs(q) ** -x
    s = -s if q < 0 and odd else s
    a = q
    b = 0.0 * s
    i = 0
    while i < 9 or a <= 9:
        i += 1
        a += 1
        b = abs(a) ** -x
        b = -b if a < 0 and odd else b
        s += b
        if -_MACHEP * s < b < _MACHEP * s:
            return s
    w = a
    s += b * w / (x - 1)
    s -= 0.5 * b
    a = 1.0
    k = 0.0
    for j in range(12):
        a *= x + k
        b /= w
        t = a * b / _ZETA_A[j]
        s = s + t
        if abs(t / s) < _MACHEP:
            return s
        k += 1
        a *= x + k
        b /= w
        k += 1
    return s
@scalar
def polygamma(x, n):
    # n = 0: digamma; n >= 1: (-1)^(n+1) n! zeta(n + 1, x) (PyTorch's trigamma has a series of its own, within
    # 1e-9; Cephes' zeta is within an ulp or two, and takes negative x for the integer order n + 1)
    m = int(n)
    if m == 0:
        return S_digamma(x)
    return (1.0 if m % 2 else -1.0) * math.exp(math.lgamma(m + 1.0)) * S_zeta(m + 1.0, x)
@scalar
def mvlgamma(x, p):
    # the multivariate log-gamma: p(p-1)/4 log(pi) + sum_i lgamma(x - i/2)
    m = int(p)
    out = m * (m - 1) * 0.28618247146235004  # log(pi) / 4
    for i in range(m):
        out += S_lgamma(x - 0.5 * i)
    return out
@scalar
def i0e(x):
    # Cephes' Chebyshev expansions over [0, 8] and (8, inf) of exp(-|x|) I0(x)
    a = abs(x)
    b0, b1, b2 = 0.0, 0.0, 0.0
    if a <= 8:
        y = a / 2 - 2
        for c in _I0E_A:
            b2, b1 = b1, b0
            b0 = y * b1 - b2 + c
        return 0.5 * (b0 - b2)
    y = 32 / a - 2
    for c in _I0E_B:
        b2, b1 = b1, b0
        b0 = y * b1 - b2 + c
    return 0.5 * (b0 - b2) / math.sqrt(a)
@scalar
def i1e(x):
    a = abs(x)
    b0, b1, b2 = 0.0, 0.0, 0.0
    if a <= 8:
        y = a / 2 - 2
        for c in _I1E_A:
            b2, b1 = b1, b0
            b0 = y * b1 - b2 + c
        r = 0.5 * (b0 - b2) * a
    else:
        y = 32 / a - 2
        for c in _I1E_B:
            b2, b1 = b1, b0
            b0 = y * b1 - b2 + c
        r = 0.5 * (b0 - b2) / math.sqrt(a)
    return -r if x < 0 else r
@scalar
def i0(x): return math.exp(abs(x)) * S_i0e(x)
@scalar
def i1(x): return math.exp(abs(x)) * S_i1e(x)
@scalar
def erfcx(x):
    # exp(x^2) erfc(x): directly below 3, else by erfc's continued fraction (exp(x^2) would overflow and
    # erfc underflow); within 2 ulp of SciPy's
    if x < 3 or x != x:
        return math.exp(x * x) * math.erfc(x)
    f = x
    for k in range(40, 0, -1):
        f = x + 0.5 * k / f
    return _INV_SQRT_PI / f
@scalar
def ndtr(x): return 0.5 * math.erfc(-x * SQRT1_2)
@scalar
def ndtri(y0):
    # Cephes' ndtri: a rational approximation around 1/2, two in z = sqrt(-2 log y) in the tails
    if y0 == 0:
        return -math.inf
    if y0 == 1:
        return math.inf
    if not (0 < y0 < 1):
        return math.nan
    negate = True
    y = y0
    if y > 1 - 0.13533528323661269189:
        y = 1 - y
        negate = False
    if y > 0.13533528323661269189:
        y = y - 0.5
        y2 = y * y
        p, q = 0.0, 0.0
        for c in _NDTRI_P0:
            p = p * y2 + c
        for c in _NDTRI_Q0:
            q = q * y2 + c
        return (y + y * (y2 * p / q)) * _SQRT_2PI
    x = math.sqrt(-2 * math.log(y))
    x0 = x - math.log(x) / x
    z = 1 / x
    p, q = 0.0, 0.0
    if x < 8:
        for c in _NDTRI_P1:
            p = p * z + c
        for c in _NDTRI_Q1:
            q = q * z + c
    else:
        for c in _NDTRI_P2:
            p = p * z + c
        for c in _NDTRI_Q2:
            q = q * z + c
    x = x0 - z * p / q
    return -x if negate else x
@scalar
def log_ndtr(x):
    t = x * SQRT1_2
    return math.log(S_erfcx(-t) / 2) - t * t if x < -1 else math.log1p(-math.erfc(t) / 2)
@scalar
def sinc(x):
    if x == 0:
        return 1.0 + 0.0 * x
    t = _PI * x
    return math.sin(t) / t
@scalar
def entr(x):
    if x > 0:
        return -x * math.log(x)
    return 0.0 * x if x == 0 else (x if x != x else -math.inf)
@scalar
def logit(x): return math.log(x / (1 - x)) if 0 < x < 1 else (math.nan if not (0 <= x <= 1) else (2 * x - 1) * math.inf)
@scalar
def logit_eps(x, eps):
    x = eps if x < eps else (1 - eps if x > 1 - eps else x)  # (NaN stays NaN)
    return math.log(x / (1 - x)) if 0 < x < 1 else (math.nan if not (0 <= x <= 1) else (2 * x - 1) * math.inf)
@scalar
def xlogy(x, y):
    if y != y:
        return y
    return 0.0 if x == 0 else x * (math.log(y) if y > 0 else (-math.inf if y == 0 else math.nan))
@scalar
def xlog1py(x, y):
    if y != y:
        return y
    return 0.0 if x == 0 else x * (math.log1p(y) if y > -1 else (-math.inf if y == -1 else math.nan))
@scalar
def bessel_j0(x):
    # Cephes' j0: a rational function up to 5, Hankel's asymptotic form beyond. (PyTorch's port drops the implied
    # leading 1 of RQ and QQ, which puts its values up to 4e-7 off near 5; these are Cephes' and SciPy's.)
    x = abs(x)
    if x <= 5:
        if x < 1e-5:
            return 1 - x * x / 4
        z = x * x
        rp, rq = 0.0, 1.0  # RQ's leading coefficient, 1, is implied (Cephes' p1evl)
        for c in _J0_RP:
            rp = rp * z + c
        for c in _J0_RQ:
            rq = rq * z + c
        return (z - 5.78318596294678452118) * (z - 30.4712623436620863991) * rp / rq
    z = 25 / (x * x)
    pp, pq, qp, qq = 0.0, 0.0, 0.0, 1.0  # as QQ's
    for c in _J0_PP:
        pp = pp * z + c
    for c in _J0_PQ:
        pq = pq * z + c
    for c in _J0_QP:
        qp = qp * z + c
    for c in _J0_QQ:
        qq = qq * z + c
    w = x - 0.785398163397448309615660845819875721
    return (pp / pq * math.cos(w) - 5 / x * (qp / qq) * math.sin(w)) * SQRT_2_OVER_PI / math.sqrt(x)
@scalar
def bessel_j1(x):
    a = abs(x)
    if a <= 5:
        z = a * a
        rp, rq = 0.0, 1.0
        for c in _J1_RP:
            rp = rp * z + c
        for c in _J1_RQ:
            rq = rq * z + c
        r = rp / rq * a * (z - 14.6819706421238932572) * (z - 49.2184563216946036703)
    else:
        z = 25 / (a * a)
        pp, pq, qp, qq = 0.0, 0.0, 0.0, 1.0
        for c in _J1_PP:
            pp = pp * z + c
        for c in _J1_PQ:
            pq = pq * z + c
        for c in _J1_QP:
            qp = qp * z + c
        for c in _J1_QQ:
            qq = qq * z + c
        w = a - 2.356194490192344928846982537459627163
        r = (pp / pq * math.cos(w) - 5 / a * (qp / qq) * math.sin(w)) * SQRT_2_OVER_PI / math.sqrt(a)
    return -r if x < 0 else r
@scalar
def standard_gamma_grad(alpha, x):
    # d(sample)/d(alpha) of a standard gamma sample x with concentration alpha, holding its CDF fixed: PyTorch's
    # standard_gamma_grad_one (a series for small x, Rice's saddle point for large alpha, else a fitted
    # bivariate rational function)
    alpha, x = np.float64(alpha), np.float64(x)  # in double, as PyTorch's accumulate type (branches at 0.9, 1.1 alpha)
    if not (alpha > 0 and x > 0):
        return 0.0 if x == 0 and alpha > 0 else math.nan  # (PyTorch's series gives NaN at 0, which it returns as 0)
    if x < 0.8:
        numer = 1.0
        denom = alpha
        series1 = numer / denom
        series2 = numer / (denom * denom)
        for i in range(1, 6):
            numer *= -x / i
            denom += 1
            series1 += numer / denom
            series2 += numer / (denom * denom)
        pow_x_alpha = x ** alpha
        gamma_pdf = x ** (alpha - 1) * math.exp(-x)
        gamma_cdf = pow_x_alpha * series1
        gamma_cdf_alpha = (math.log(x) - S_digamma(alpha)) * gamma_cdf - pow_x_alpha * series2
        result = -gamma_cdf_alpha / gamma_pdf
        return 0.0 * x if result != result else result
    if alpha > 8:
        if 0.9 * alpha <= x <= 1.1 * alpha:
            numer_1 = 1 + 24 * alpha * (1 + 12 * alpha)
            numer_2 = 1440 * (alpha * alpha) + 6 * x * (53 - 120 * x) - 65 * x * x / alpha + alpha * (107 + 3600 * x)
            return numer_1 * numer_2 / (1244160 * (alpha * alpha) * (alpha * alpha))
        denom = math.sqrt(8 * alpha)
        term2 = denom / (alpha - x)
        term3 = (x - alpha - alpha * math.log(x / alpha)) ** -1.5
        term23 = term2 - term3 if x < alpha else term2 + term3
        term1 = math.log(x / alpha) * term23 - math.sqrt(2 / alpha) * (alpha + x) / ((alpha - x) * (alpha - x))
        stirling = 1 + 1 / (12 * alpha) * (1 + 1 / (24 * alpha))
        return -stirling * x * term1 / denom
    u = math.log(x / alpha)
    v = math.log(alpha)
    p, q = 0.0, 0.0
    for i in range(3, -1, -1):
        p = p * v + _GAMMA_UV0[i] + u * (_GAMMA_UV1[i] + u * _GAMMA_UV2[i])
        q = q * v + _GAMMA_UV0[i + 4] + u * (_GAMMA_UV1[i + 4] + u * _GAMMA_UV2[i + 4])
    return math.exp(p / q)


_GAMMA_UV0 = (0.16009398, -0.094634809, 0.025146376, -0.0030648343, 1.0, 0.32668115, 0.10406089, 0.0014179084)
_GAMMA_UV1 = (0.53487893, 0.1298071, 0.065735949, -0.0015649758, 0.16639465, 0.020070113, -0.0035938915,
              -0.00058392623)
_GAMMA_UV2 = (0.040121004, -0.0065914022, -0.0026286047, -0.0013441777, 0.017050642, -0.0021309326, 0.00085092367,
              -1.5247877e-07)
# the scalar functions the ones above call (S_<name>: a device backend compiles its own version of each)
S_digamma, S_zeta, S_lgamma, S_i0e, S_i1e, S_erfcx = (SCALARS[n] for n in ("digamma", "zeta", "lgamma", "i0e", "i1e",
                                                                            "erfcx"))


# ---------------------------------------------------------------- complex twins
# The scalar functions above whose math is real (libm's math.*, the vector exp and tanh) have a complex twin
# here; dispatch runs the twin on complex64/complex128 operands. The rest (add, mul, div, pow, neg, square,
# reciprocal, eq, ne, where, abs, isnan) are the same Python arithmetic on complex numbers, and run as they are.
@scalar
def complex_exp(x): return cmath.exp(x)
@scalar
def complex_expm1(x): return cmath.exp(x) - 1
@scalar
def complex_log(x): return cmath.log(x)
@scalar
def complex_log1p(x): return cmath.log(1 + x)
@scalar
def complex_log2(x): return cmath.log(x) / math.log(2.0)
@scalar
def complex_log10(x): return cmath.log10(x)
@scalar
def complex_sqrt(x): return cmath.sqrt(x)
@scalar
def complex_rsqrt(x): return 1 / cmath.sqrt(x)
@scalar
def complex_sin(x): return cmath.sin(x)
@scalar
def complex_cos(x): return cmath.cos(x)
@scalar
def complex_tan(x): return cmath.tan(x)
@scalar
def complex_sinh(x): return cmath.sinh(x)
@scalar
def complex_cosh(x): return cmath.cosh(x)
@scalar
def complex_tanh(x): return cmath.tanh(x)
@scalar
def complex_sigmoid(x): return 1 / (1 + cmath.exp(-x))
@scalar
def complex_asin(x): return cmath.asin(x)
@scalar
def complex_acos(x): return cmath.acos(x)
@scalar
def complex_atan(x): return -1j * S_complex_atanh(1j * x)  # (cmath's atan raises at +-i, where this is infinite)
@scalar
def complex_asinh(x): return cmath.asinh(x)
@scalar
def complex_acosh(x): return cmath.acosh(x)
@scalar
def complex_atanh(x):
    if x.imag == 0 and (x.real == 1 or x.real == -1):  # the poles: PyTorch's (C's) +-inf, where cmath raises
        return complex(math.copysign(math.inf, x.real), 0.0 * x.imag)
    return cmath.atanh(x)
@scalar
def complex_exp2(x): return cmath.exp(x * 0.6931471805599453)
@scalar
def complex_sinc(x):
    if x == 0:
        return 1.0 + 0.0 * x
    t = _PI * x
    return cmath.sin(t) / t
@scalar
def complex_silu(x): return x / (1 + cmath.exp(-x))
@scalar
def complex_logaddexp(a, b):
    m, d = (a, b - a) if a.real >= b.real else (b, a - b)  # the larger real part out front, as PyTorch's
    if d.real == -math.inf:  # exp(-inf + iy) is 0 for any y: the sum is the larger term
        return m
    return m + cmath.log(1 + cmath.exp(d))
@scalar
def complex_isfinite(x): return cmath.isfinite(x)
@scalar
def complex_isinf(x): return cmath.isinf(x)
@scalar
def complex_isnan(x): return cmath.isnan(x)
@scalar
def angle(x): return math.pi if x < 0 else (x if x != x else 0.0 * x)  # a real number's: 0 or pi, NaN stays
@scalar
def complex_angle(x): return cmath.phase(x)
@scalar
def conj_physical(x): return x  # a real number's conjugate
@scalar
def complex_conj_physical(x): return x.conjugate()


S_complex_atanh = SCALARS["complex_atanh"]  # (a device backend compiles its own)
COMPLEX = {n[len("complex_"):]: n for n in SCALARS if n.startswith("complex_")}  # kernel -> its complex twin


# A hash of the sources the scalar functions compile from (this file and the math they inline): the loops
# generated from them carry it in their names, so numba's on-disk cache never serves a loop built from older ones.
STAMP = sources_stamp(__file__, vmath.__file__, config.__file__, os.path.join(os.path.dirname(__file__), "derived.py"))
