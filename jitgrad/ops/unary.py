"""Unary elementwise ops and activations: one entry each, with its public function generated from
the entry's scalar params. VJP formulas are HIPS-style one-liners over tensor ops (``g`` is the
output gradient, ``s`` the node with the saved values ``s.self``, ``s.result`` and params);
``fused`` names the kernel in kernels/scalars.py that computes the same formula in one pass
when no graph of the backward is being built."""
import math

import numpy as np

from .._grad_mode import STATE
from .._op import Op, dispatch
from .._tensor import Tensor
from ._derive import derive
from ..kernels.scalars import COMPLEX, SELU_ALPHA, SELU_SCALE
from ._table import COMPLEX as COMPLEX_DTYPES, CUDA_FP32, EMPTY, INTS, autocasts, export, no_complex, no_kernel, \
    register, rejects, unary_samples


def ew_forward(kernel, out=None):
    """Forward of an elementwise op: run scalar ``kernel``; params become trailing scalar args."""
    def forward(xp, dt, *arrays, **params):
        if params:
            arrays += tuple(dt.type(v) for v in params.values())
        if dt.kind == "c":  # complex operands: the kernel's complex twin, if its math is real
            return xp.run(COMPLEX.get(kernel, kernel), out or dt, *arrays)
        return xp.run(kernel, out or dt, *arrays)
    forward.kernel, forward.out = kernel, out  # read by dispatch, which calls the kernel directly
    return forward


def _unary(name, vjp=None, fused=None, *, dtype="float", domain=(-2.0, 2.0), kernel=None, params=EMPTY,
           call=None, api=None, **kw):
    """An entry of one input. Unless ``call`` is given, its public function is generated from ``params``
    (name -> default, also positional), published as jitgrad.<name> and Tensor.<name> (``api``)."""
    names = list(params)

    def fn(input, *args, **kwargs):
        p = dict(params)
        for k, v in zip(names, args):
            p[k] = v
        for k, v in kwargs.items():
            if k == "inplace":
                continue
            if k not in p:
                raise TypeError("%s() got an unexpected keyword argument '%s'" % (name, k))
            p[k] = v
        return dispatch(op, (input,), p)

    def fn0(input):
        return dispatch(op, (input,))
    fn = fn if params else fn0
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = "Elementwise %s (op table entry %r)." % (name, name)
    if kw.get("autocast"):
        fn = autocasts(name)(fn)
    kw.setdefault("samples", unary_samples(*domain, **params))
    op = register(Op(name, ew_forward(kernel or name, np.bool_ if dtype == "bool" else None), vjp=[vjp],
                     fused=[fused], dtype=dtype, params=params, call=call or fn, api=(name,) if api is None else api,
                     bench={"sizes": [(16,), (1 << 22,)]}, **kw))
    return op


def _c(x):
    """conj() in VJP formulas: of a tensor, a Python number, or a symbol of a derived real kernel (itself: the
    fused kernels are real math, and complex gradients run the formulas)."""
    if isinstance(x, Tensor):
        return dispatch(CONJ_PHYSICAL, (x,)) if x._data.dtype.kind == "c" else x
    return x.conjugate() if isinstance(x, complex) else x


def _is_complex(x):
    return isinstance(x, Tensor) and x._data.dtype.kind == "c"


@export()
def sgn(input):
    """z / |z| (0 at 0): ``sign`` extended to complex numbers; ``sign`` of a real tensor."""
    if not input.dtype.is_complex:
        return dispatch(SIGN, (input,))
    a = input.abs()
    return (input / a.masked_fill(a == 0, 1.0)).masked_fill(a == 0, 0.0)


def _abs_grad(g, x):
    return g * sgn(x) if _is_complex(x) else g * _sign(x)


def _angle_grad(g, x):
    """PyTorch's angle_backward: g * i z / |z|^2 (0 at 0) for complex z, none for a real input."""
    if not _is_complex(x):
        return zero_grad(g, None)
    d = x.real * x.real + x.imag * x.imag
    return (g * x * 1j / d.masked_fill(d == 0, 1.0)).masked_fill(d == 0, 0.0)


def zero_grad(g, s):
    return g.new_zeros(g.shape)  # not g * 0: that is NaN where g is infinite


def _on(mask, g):
    """g where ``mask`` holds, else 0: a select, as PyTorch's masks are (not g * mask, NaN for an infinite g)."""
    return g.where(mask, 0.0)


def _sign(x):
    return (x > 0).to(x.dtype) - (x < 0).to(x.dtype)


def _np_erf(x):
    return np.vectorize(math.erf, otypes=[x.dtype if x.dtype.kind == "f" else np.float64])(x)


_SQRT1_2, _INV_SQRT_2PI = 1 / math.sqrt(2), 1 / math.sqrt(2 * math.pi)


def _gelu_tanh_grad(g, x):
    t = ((x + 0.044715 * x * x * x) * math.sqrt(2 / math.pi)).tanh()
    return g * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * math.sqrt(2 / math.pi) * (1 + 3 * 0.044715 * x * x))


def square(input):
    """input * input; a bool tensor squares to int64, as in PyTorch."""
    return dispatch(SQUARE, (input.long() if isinstance(input, Tensor) and input.dtype.name == "bool" else input,))


def gelu(input, approximate="none"):
    if approximate == "tanh":
        return dispatch(GELU_TANH, (input,))
    if approximate != "none":
        raise RuntimeError("approximate argument must be either none or tanh.")
    return dispatch(GELU, (input,))


POS = (0.5, 2.0)
_NO_CLAMP = no_complex(NotImplementedError, "clamp is not supported for complex types")  # (relu, hardtanh)
NEG = _unary("neg", lambda g, s: -g, dtype="same", ref=np.negative, inplace=True, operators=("__neg__",), complex=True,
             unsupported=rejects(RuntimeError, "Negation, the `-` operator, on a bool tensor is not supported. If you "
                                 "are trying to invert a mask, use the `~` or `logical_not()` operator instead.", "bool"))
ABS = _unary("abs", lambda g, s: _abs_grad(g, s.self), derive("abs_vjp"), dtype="real", ref=np.abs,
             inplace=True, operators=("__abs__",), unsupported=no_kernel("abs_cpu", "bool"), complex=True)
ANGLE = _unary("angle", lambda g, s: _angle_grad(g, s.self), dtype="float_real", complex=True,
               ref=lambda x: np.angle(x) if x.dtype.kind == "c" else np.where(x < 0, np.pi, np.where(np.isnan(x), x, 0.0)).astype(x.dtype if x.dtype.kind == "f" else np.float32),
               unsupported=no_kernel("angle_cpu", "bool"))
CONJ_PHYSICAL = _unary("conj_physical", lambda g, s: _c(g), dtype="same", inplace=True, complex=True,
                       ref=lambda x: np.conj(x) if x.dtype.kind == "c" else x.copy())
SIGN = _unary("sign", zero_grad, dtype="same", inplace=True,
              unsupported=rejects(NotImplementedError, "Unlike NumPy, torch.sign is not intended to support complex "
                                  "numbers. Please use torch.sgn instead.", *COMPLEX_DTYPES),
              ref=lambda x: x.copy() if x.dtype == bool else np.sign(np.where(np.isnan(x), 0, x)).astype(x.dtype))
EXP = _unary("exp", lambda g, s: g * _c(s.result), ("mul", ("g", "result")), ref=np.exp, inplace=True,
             autocast=CUDA_FP32, complex=True)
EXPM1 = _unary("expm1", lambda g, s: g * _c(s.result + 1), derive("expm1_vjp"), ref=np.expm1, inplace=True,
               autocast=CUDA_FP32, complex=True)
LOG = _unary("log", lambda g, s: g / _c(s.self), ("div", ("g", "self")), ref=np.log, domain=POS, inplace=True,
             autocast=CUDA_FP32, complex=True)
LOG1P = _unary("log1p", lambda g, s: g / _c(s.self + 1), derive("log1p_vjp"), ref=np.log1p,
               domain=(-0.5, 2.0), inplace=True, autocast=CUDA_FP32, complex=True)
SQRT = _unary("sqrt", lambda g, s: g / _c(2 * s.result), derive("sqrt_vjp"), ref=np.sqrt, domain=POS,
              inplace=True, complex=True)
RSQRT = _unary("rsqrt", lambda g, s: -0.5 * g * _c(s.result ** 3), derive("rsqrt_vjp"),
               ref=lambda x: 1 / np.sqrt(x), domain=POS, inplace=True, autocast=CUDA_FP32, complex=True)
RECIPROCAL = _unary("reciprocal", lambda g, s: -g * _c(s.result) * _c(s.result), derive("reciprocal_vjp"),
                    ref=lambda x: 1 / x, domain=POS, inplace=True, autocast=CUDA_FP32, complex=True)
SQUARE = _unary("square", lambda g, s: 2 * g * _c(s.self), derive("square_vjp"), dtype="same",
                ref=np.square, node="PowBackward0", call=square, inplace=True, complex=True)
SIN = _unary("sin", lambda g, s: g * _c(s.self.cos()), derive("sin_vjp"), ref=np.sin, inplace=True, complex=True)
COS = _unary("cos", lambda g, s: -g * _c(s.self.sin()), derive("cos_vjp"), ref=np.cos, inplace=True, complex=True)
TAN = _unary("tan", lambda g, s: g * _c(1 + s.result * s.result), derive("tan_vjp"), ref=np.tan,
             domain=(-1.0, 1.0), inplace=True, autocast=CUDA_FP32, complex=True)
TANH = _unary("tanh", lambda g, s: g * _c(1 - s.result * s.result), derive("tanh_vjp"), ref=np.tanh,
              inplace=True, complex=True)
SIGMOID = _unary("sigmoid", lambda g, s: g * _c(s.result) * _c(1 - s.result), derive("sigmoid_vjp"),
                 ref=lambda x: 1 / (1 + np.exp(-x)), inplace=True, complex=True)
RELU = _unary("relu", lambda g, s: _on(s.result > 0, g), derive("relu_vjp"), dtype="same",
              ref=lambda x: np.maximum(x, 0), inplace=True, module="ReLU",
              unsupported=rejects(RuntimeError, "Boolean inputs not supported for relu", "bool") | _NO_CLAMP)
LEAKY_RELU = _unary("leaky_relu", lambda g, s: g.where(s.self > 0, g * s.negative_slope),
                    derive("leaky_relu_vjp"),
                    ref=lambda x, negative_slope=0.01: np.where(x > 0, x, x * negative_slope),
                    params={"negative_slope": 0.01}, inplace=True, module="LeakyReLU",
                    unsupported=no_kernel("leaky_relu_cpu", "bool", *INTS, *COMPLEX_DTYPES))
ELU = _unary("elu", lambda g, s: g.where(s.self > 0, g * s.alpha * s.self.exp()), derive("elu_vjp"),
             ref=lambda x, alpha=1.0: np.where(x > 0, x, alpha * np.expm1(x)), params={"alpha": 1.0}, inplace=True,
             module="ELU", unsupported=no_kernel("elu_cpu", "bool", *INTS, *COMPLEX_DTYPES))


def celu(input, alpha=1.0):
    """``torch.celu``: max(0, x) + min(0, alpha * (exp(x / alpha) - 1))."""
    if alpha == 0:
        raise RuntimeError("ZeroDivisionError: alpha cannot be 0 for CELU")
    return dispatch(CELU, (input,), {"alpha": alpha})


CELU = _unary("celu", lambda g, s: g.where(s.self > 0, g * (s.self / s.alpha).exp()), derive("celu_vjp"),
              ref=lambda x, alpha=1.0: np.where(x > 0, x, alpha * np.expm1(x / alpha)), params={"alpha": 1.0},
              call=celu, method=False, inplace=True, module="CELU", unsupported=no_kernel("elu_cpu", "bool", *INTS, *COMPLEX_DTYPES))
SELU = _unary("selu", lambda g, s: (g * SELU_SCALE).where(s.self > 0, g * (SELU_SCALE * SELU_ALPHA) * s.self.exp()),
              derive("selu_vjp"), ref=lambda x: SELU_SCALE * np.where(x > 0, x, SELU_ALPHA * np.expm1(x)),
              node="EluBackward0", method=False, inplace=True, module="SELU",
              unsupported=no_kernel("elu_cpu", "bool", *INTS, *COMPLEX_DTYPES))
# PyTorch's hardtanh keeps integer dtypes (its bounds cut to integers) and passes g strictly inside the bounds
HARDTANH = _unary("hardtanh", lambda g, s: _on(~((s.self <= s.min_val) | (s.self >= s.max_val)), g),
                  derive("hardtanh_vjp"), dtype="same",
                  ref=lambda x, min_val=-1.0, max_val=1.0: np.clip(x, min_val, max_val).astype(x.dtype),
                  params={"min_val": -1.0, "max_val": 1.0}, inplace=True, module="Hardtanh",
                  unsupported=rejects(RuntimeError, "Bool inputs not supported for hardtanh", "bool") | _NO_CLAMP)
GELU = _unary("gelu", lambda g, s: g * (0.5 * (1 + (s.self * _SQRT1_2).erf())
                                        + s.self * _INV_SQRT_2PI * (-0.5 * s.self * s.self).exp()),
              derive("gelu_vjp"), ref=lambda x: 0.5 * x * (1 + _np_erf(x / np.sqrt(2))), call=gelu,
              inplace=True, unsupported=no_kernel("GeluKernelImpl", "bool", *INTS, *COMPLEX_DTYPES))
GELU_TANH = _unary("gelu_tanh", lambda g, s: _gelu_tanh_grad(g, s.self), derive("gelu_tanh_vjp"),
                   node="GeluBackward0", call=gelu, api=(), samples=unary_samples(approximate="tanh"),
                   ref=lambda x, approximate="tanh": 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3))),
                   unsupported=no_kernel("GeluKernelImpl", "bool", *INTS, *COMPLEX_DTYPES))


def silu(input):
    """x * sigmoid(x). PyTorch computes it on complex tensors but refuses to record it (no complex derivative)."""
    if isinstance(input, Tensor) and input._requires_grad and input._data.dtype.kind == "c" and STATE.grad_enabled:
        raise RuntimeError("silu does not support automatic differentiation for outputs with complex dtype.")
    return dispatch(SILU, (input,))


SILU = _unary("silu", lambda g, s: g * _c(s.self.sigmoid()) * _c(1 + s.self * (1 - s.self.sigmoid())),
              derive("silu_vjp"), ref=lambda x: x / (1 + np.exp(-x)), inplace=True, module="SiLU", call=silu,
              unsupported=no_kernel("silu_cpu", "bool", *INTS), complex=True)
SOFTPLUS = _unary("softplus", lambda g, s: g.where(s.self * s.beta > s.threshold, g * (s.self * s.beta).sigmoid()),
                  derive("softplus_vjp"), params={"beta": 1.0, "threshold": 20.0},
                  ref=lambda x, beta=1.0, threshold=20.0: np.where(x * beta > threshold, x, np.log1p(np.exp(beta * x)) / beta),
                  unsupported=no_kernel("softplus_cpu", "bool", *INTS, *COMPLEX_DTYPES), autocast=CUDA_FP32)
FLOOR = _unary("floor", zero_grad, dtype="same", ref=np.floor, inplace=True, unsupported=no_kernel("floor_vml_cpu", "bool")
               | no_complex(NotImplementedError, "floor is not supported for complex inputs"))
CEIL = _unary("ceil", zero_grad, dtype="same", ref=np.ceil, inplace=True, unsupported=no_kernel("ceil_vml_cpu", "bool")
              | no_complex(NotImplementedError, "ceil is not supported for complex inputs"))
ROUND = _unary("round", zero_grad, dtype="same", ref=np.round, inplace=True,
               unsupported=no_kernel("round_vml_cpu", "bool", *COMPLEX_DTYPES))
TRUNC = _unary("trunc", zero_grad, dtype="same", ref=np.trunc, inplace=True, unsupported=no_kernel("trunc_vml_cpu", "bool")
               | no_complex(NotImplementedError, "trunc is not supported for complex inputs"))
ERF = _unary("erf", lambda g, s: g * (2 / math.sqrt(math.pi)) * (-s.self * s.self).exp(), ref=_np_erf, inplace=True,
             unsupported=no_kernel("erf_vml_cpu", *COMPLEX_DTYPES))
LOGICAL_NOT = _unary("logical_not", dtype="bool", ref=np.logical_not, inplace=True, complex=True)
ISNAN = _unary("isnan", dtype="bool", ref=np.isnan, complex=True)
ISINF = _unary("isinf", dtype="bool", ref=np.isinf, complex=True)
ISPOSINF = _unary("isposinf", dtype="bool", ref=np.isposinf,
                  unsupported=no_complex(RuntimeError, "isposinf does not support complex inputs."))
ISNEGINF = _unary("isneginf", dtype="bool", ref=np.isneginf,
                  unsupported=no_complex(RuntimeError, "isneginf does not support complex inputs."))
ISFINITE = _unary("isfinite", dtype="bool", ref=np.isfinite, complex=True)
# inverse trigonometric and hyperbolic functions, base-2 and base-10 logs and powers (PyTorch's formulas)
ASIN = _unary("asin", lambda g, s: g * _c((1 - s.self * s.self).rsqrt()), ref=np.arcsin, domain=(-0.9, 0.9),
              api=("asin", "arcsin"), inplace=True, complex=True)
ACOS = _unary("acos", lambda g, s: -g * _c((1 - s.self * s.self).rsqrt()), ref=np.arccos, domain=(-0.9, 0.9),
              api=("acos", "arccos"), inplace=True, complex=True)
ATAN = _unary("atan", lambda g, s: g / _c(s.self * s.self + 1), ref=np.arctan, domain=(-0.9, 0.9),
              api=("atan", "arctan"), inplace=True, complex=True)
SINH = _unary("sinh", lambda g, s: g * _c(s.self.cosh()), ref=np.sinh, inplace=True, complex=True)
COSH = _unary("cosh", lambda g, s: g * _c(s.self.sinh()), ref=np.cosh, inplace=True, complex=True)
ASINH = _unary("asinh", lambda g, s: g * _c((s.self * s.self + 1).rsqrt()), ref=np.arcsinh, domain=(-0.9, 0.9),
               api=("asinh", "arcsinh"), inplace=True, complex=True)
ACOSH = _unary("acosh", lambda g, s: g * _c((s.self - 1).rsqrt() * (s.self + 1).rsqrt()), ref=np.arccosh,
               domain=(1.1, 3.0), api=("acosh", "arccosh"), inplace=True, complex=True)
ATANH = _unary("atanh", lambda g, s: g / _c(1 - s.self * s.self), ref=np.arctanh, domain=(-0.9, 0.9),
               api=("atanh", "arctanh"), inplace=True, complex=True)
LOG2 = _unary("log2", lambda g, s: g / _c(s.self * math.log(2.0)), ref=np.log2, domain=POS, inplace=True,
              complex=True)
LOG10 = _unary("log10", lambda g, s: g / _c(s.self * math.log(10.0)), ref=np.log10, domain=POS, inplace=True,
               complex=True)
EXP2 = _unary("exp2", lambda g, s: g * _c(s.result) * math.log(2.0), ref=np.exp2, inplace=True, complex=True)
