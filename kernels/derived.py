"""The fused VJP scalar functions, derived from the op table's VJP formulas (jitgrad/ops/_derive.py).

Written by ``python -m jitgrad.ops``: do not edit; change the formula in its entry.
"""
import math  # noqa: F401  (math.nan, math.inf: read by the functions)

from .scalars import SCALARS, like, scalar  # noqa: F401  (like: read by the functions)

S_cos = SCALARS['cos']
S_digamma = SCALARS['digamma']
S_erf = SCALARS['erf']
S_exp = SCALARS['exp']
S_i0 = SCALARS['i0']
S_i0e = SCALARS['i0e']
S_i1 = SCALARS['i1']
S_i1e = SCALARS['i1e']
S_log = SCALARS['log']
S_log1p = SCALARS['log1p']
S_polygamma = SCALARS['polygamma']
S_sigmoid = SCALARS['sigmoid']
S_sign = SCALARS['sign']
S_sin = SCALARS['sin']
S_softplus = SCALARS['softplus']
S_tanh = SCALARS['tanh']


@scalar
def abs_vjp(g, x):
    return (g * ((like(g, 1) if (x > like(g, 0)) else like(g, 0)) - (like(g, 1) if (x < like(g, 0)) else like(g, 0))))


@scalar
def expm1_vjp(g, out):
    return (g * (out + like(g, 1)))


@scalar
def log1p_vjp(g, x):
    return (g / (x + like(g, 1)))


@scalar
def sqrt_vjp(g, out):
    return (g / (like(g, 2) * out))


@scalar
def rsqrt_vjp(g, out):
    return ((like(g, -0.5) * g) * (out * out * out))


@scalar
def reciprocal_vjp(g, out):
    return (((-g) * out) * out)


@scalar
def square_vjp(g, x):
    return ((like(g, 2) * g) * x)


@scalar
def sin_vjp(g, x):
    return (g * S_cos(x))


@scalar
def cos_vjp(g, x):
    return ((-g) * S_sin(x))


@scalar
def tan_vjp(g, out):
    return (g * (like(g, 1) + (out * out)))


@scalar
def tanh_vjp(g, out):
    return (g * (like(g, 1) - (out * out)))


@scalar
def sigmoid_vjp(g, out):
    return ((g * out) * (like(g, 1) - out))


@scalar
def relu_vjp(g, out):
    return (g if (out > like(g, 0)) else like(g, 0.0))


@scalar
def leaky_relu_vjp(g, x, negative_slope):
    return (g if (x > like(g, 0)) else (g * negative_slope))


@scalar
def elu_vjp(g, x, alpha):
    return (g if (x > like(g, 0)) else ((g * alpha) * S_exp(x)))


@scalar
def celu_vjp(g, x, alpha):
    return (g if (x > like(g, 0)) else (g * S_exp((x / alpha))))


@scalar
def selu_vjp(g, x):
    return ((g * like(g, 1.0507009873554805)) if (x > like(g, 0)) else ((g * like(g, 1.7580993408473766)) * S_exp(x)))


@scalar
def hardtanh_vjp(g, x, min_val, max_val):
    return (g if (not ((x <= min_val) or (x >= max_val))) else like(g, 0.0))


@scalar
def gelu_vjp(g, x):
    return (g * ((like(g, 0.5) * (like(g, 1) + S_erf((x * like(g, 0.7071067811865475))))) + ((x * like(g, 0.3989422804014327)) * S_exp(((like(g, -0.5) * x) * x)))))


@scalar
def gelu_tanh_vjp(g, x):
    t0 = S_tanh(((x + (((like(g, 0.044715) * x) * x) * x)) * like(g, 0.7978845608028654)))
    return (g * ((like(g, 0.5) * (like(g, 1) + t0)) + ((((like(g, 0.5) * x) * (like(g, 1) - (t0 * t0))) * like(g, 0.7978845608028654)) * (like(g, 1) + ((like(g, 0.134145) * x) * x)))))


@scalar
def silu_vjp(g, x):
    t0 = S_sigmoid(x)
    return ((g * t0) * (like(g, 1) + (x * (like(g, 1) - t0))))


@scalar
def softplus_vjp(g, x, beta, threshold):
    t0 = (x * beta)
    return (g if (t0 > threshold) else (g * S_sigmoid(t0)))


@scalar
def div_vjp_other(g, x, y):
    return (((-g) * x) / (y * y))


@scalar
def pow_vjp_self(g, x, y):
    return (like(g, 0.0) if (y == like(g, 0)) else ((g * y) * (x ** (y - like(g, 1)))))


@scalar
def pow_vjp_other(g, x, y, out):
    return (like(g, 0.0) if ((x == like(g, 0)) and (y >= like(g, 0))) else ((g * out) * S_log(x)))


@scalar
def maximum_vjp(g, x, y):
    return ((g if (x != y) else (g / like(g, 2))) if (not (x < y)) else like(g, 0.0))


@scalar
def maximum_vjp_other(g, y, x):
    return ((g if (y != x) else (g / like(g, 2))) if (not (y < x)) else like(g, 0.0))


@scalar
def minimum_vjp(g, y, x):
    return ((g if (y != x) else (g / like(g, 2))) if (not (y < x)) else like(g, 0.0))


@scalar
def minimum_vjp_other(g, x, y):
    return ((g if (x != y) else (g / like(g, 2))) if (not (x < y)) else like(g, 0.0))


@scalar
def atan2_vjp_self(g, y, x):
    t0 = ((x * x) + (y * y))
    t1 = (t0 == like(g, 0))
    return (((g * y) / (like(g, 1.0) if t1 else t0)) if (not t1) else like(g, 0.0))


@scalar
def atan2_vjp_other(g, x, y):
    t0 = ((x * x) + (y * y))
    t1 = (t0 == like(g, 0))
    return ((((-g) * x) / (like(g, 1.0) if t1 else t0)) if (not t1) else like(g, 0.0))


@scalar
def clamp_vjp(g, x, min, max):
    return (g if ((x >= min) and (x <= max)) else like(g, 0.0))


@scalar
def erfc_vjp(g, x):
    return (((-g) * like(g, 1.1283791670955126)) * S_exp(((-x) * x)))


@scalar
def erfinv_vjp(g, out):
    return ((g * like(g, 0.8862269254527579)) * S_exp((out * out)))


@scalar
def hardswish_vjp(g, x):
    return (g if (x >= like(g, 3)) else ((g * ((x / like(g, 3)) + like(g, 0.5))) if (x > like(g, -3)) else like(g, 0.0)))


@scalar
def hardsigmoid_vjp(g, x):
    return ((g / like(g, 6)) if ((x > like(g, -3)) and (x < like(g, 3))) else like(g, 0.0))


@scalar
def mish_vjp(g, x):
    t0 = S_tanh(S_softplus(x, like(g, 1.0), like(g, 20.0)))
    return (g * (t0 + ((x * S_sigmoid(x)) * (like(g, 1) - (t0 * t0)))))


@scalar
def logsigmoid_vjp(g, x):
    return (g * S_sigmoid((-x)))


@scalar
def logaddexp_vjp(g, y, x):
    return (g / (like(g, 1) + S_exp((y - x))))


@scalar
def logaddexp_vjp_other(g, x, y):
    return (g / (like(g, 1) + S_exp((x - y))))


@scalar
def lerp_vjp_self(g, weight):
    return (g * (like(g, 1) - weight))


@scalar
def lerp_vjp_weight(g, end, x):
    return (g * (end - x))


@scalar
def lgamma_vjp(g, x):
    return (g * S_digamma(x))


@scalar
def digamma_vjp(g, x):
    return (g * S_polygamma(x, like(g, 1)))


@scalar
def polygamma_vjp(g, x, n):
    return (g * S_polygamma(x, (n + like(g, 1))))


@scalar
def i0_vjp(g, x):
    return (g * S_i1(x))


@scalar
def i0e_vjp(g, x, out):
    return (g * (S_i1e(x) - (S_sign(x) * out)))


@scalar
def i1_vjp(g, x, out):
    return (g * ((S_i0(x) - (out / (like(g, 1.0) if (x == like(g, 0)) else x))) if (x != like(g, 0)) else like(g, 0.5)))


@scalar
def i1e_vjp(g, x, out):
    return (g * ((S_i0e(x) - (out * (S_sign(x) + (like(g, 1) / (like(g, 1.0) if (x == like(g, 0)) else x))))) if (x != like(g, 0)) else like(g, 0.5)))


@scalar
def erfcx_vjp(g, x, out):
    return (g * (((like(g, 2) * x) * out) - like(g, 1.1283791670955126)))


@scalar
def ndtr_vjp(g, x):
    return ((g * S_exp(((like(g, -0.5) * x) * x))) / like(g, 2.5066282746310002))


@scalar
def ndtri_vjp(g, out):
    return ((g * like(g, 2.5066282746310002)) * S_exp(((like(g, 0.5) * out) * out)))


@scalar
def log_ndtr_vjp(g, out, x):
    return ((g * S_exp((-(out + ((like(g, 0.5) * x) * x))))) / like(g, 2.5066282746310002))


@scalar
def sinc_vjp(g, x):
    t0 = (x * like(g, 3.141592653589793))
    return (g * ((((t0 * S_cos(t0)) - S_sin(t0)) / (t0 * x)) if (x != like(g, 0)) else like(g, 0.0)))


@scalar
def entr_vjp(g, x):
    return ((-g) * (like(g, 1) + S_log(x)))


@scalar
def logit_vjp(g, x):
    return ((g / (x * (like(g, 1) - x))) if ((x >= like(g, 0)) and (x <= like(g, 1))) else like(g, math.nan))


@scalar
def logit_eps_vjp(g, x, eps):
    return ((g / (x * (like(g, 1) - x))) if ((x >= eps) and (x <= (like(g, 1) - eps))) else like(g, 0.0))


@scalar
def xlogy_vjp_self(g, y, x):
    return ((g * S_log(y)) if ((x != like(g, 0)) or (y != y)) else like(g, 0.0))


@scalar
def xlogy_vjp_other(g, x, y):
    return ((g * x) / y)


@scalar
def xlog1py_vjp_self(g, y, x):
    return ((g * S_log1p(y)) if ((x != like(g, 0)) or (y != y)) else like(g, 0.0))


@scalar
def xlog1py_vjp_other(g, x, y):
    return ((g * x) / (y + like(g, 1)))
