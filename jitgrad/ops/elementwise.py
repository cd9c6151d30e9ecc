"""Elementwise ops: one entry each. VJP formulas are HIPS-style one-liners over tensor ops
(``g`` is the output gradient, ``s`` the node with the saved values ``s.self``, ``s.other``,
``s.result`` and params); ``fused`` names the kernel in kernels/elementwise.py that computes
the same formula in one pass when no graph of the backward is being built."""
import math

import numpy as np

from .. import _dtype as D
from .._op import Op, _result_dtypes, broadcast_shapes, dispatch
from .._tensor import Tensor
from ._table import (INTS, OPS, _arr, _noncontig, binary_samples, export, joined, no_kernel, register, rejects,
                     unary_samples)


def _ew(kernel, out=None):
    """Forward of an elementwise op: run scalar ``kernel``; params become trailing scalar args."""
    def forward(xp, dt, *arrays, **params):
        if params:
            arrays += tuple(dt.type(v) for v in params.values())
        return xp.run(kernel, out or dt, *arrays)
    forward.kernel = kernel
    return forward


def _unary(name, vjp, needs, fused=None, *, dtype="float", ref, domain=(-2.0, 2.0), kernel=None,
           params=None, node=None, **kw):
    op = register(Op(name, _ew(kernel or name, np.bool_ if dtype == "bool" else None), vjp=[(vjp, needs)] if vjp else [],
                     fused=[fused] if fused else [], dtype=dtype, ref=ref, node=node,
                     samples=unary_samples(*domain, **(params or {})), broadcast=False,
                     bench={"sizes": [(16,), (1 << 22,)]}, **kw))
    op.params = params or {}
    return op


def _binary(name, vjps, fused=(), *, dtype="promote", ref, a=(-2.0, 2.0), b=(-2.0, 2.0), kernel=None,
            out=None, scalar=1.5, node=None, **kw):
    return register(Op(name, _ew(kernel or name, out), inputs=("self", "other"), vjp=vjps, fused=fused,
                       dtype=dtype, ref=ref, broadcast=True, node=node,
                       samples=binary_samples(a, b, scalar), bench={"sizes": [(16,), (1 << 22,)]}, **kw))


def _zero(g, s):
    return g.new_zeros(g.shape)  # not g * 0: that is NaN where g is infinite


def _on(mask, g):
    """g where ``mask`` holds, else 0: a select, as PyTorch's masks are (not g * mask, NaN for an infinite g)."""
    return where(mask, g, 0.0)


def _sign(x):
    return (x > 0).to(x.dtype) - (x < 0).to(x.dtype)


POS = (0.5, 2.0)

# ---------------------------------------------------------------------- unary
NEG = _unary("neg", lambda g, s: -g, (), dtype="same", ref=np.negative)
ABS = _unary("abs", lambda g, s: g * _sign(s.self), ("self",), ("abs_vjp", ("g", "self")), dtype="same",
             ref=np.abs)
SIGN = _unary("sign", _zero, (), dtype="same", ref=lambda x: x.copy() if x.dtype == bool else np.sign(np.where(np.isnan(x), 0, x)).astype(x.dtype))
EXP = _unary("exp", lambda g, s: g * s.result, ("result",), ("mul", ("g", "result")), ref=np.exp)
EXPM1 = _unary("expm1", lambda g, s: g * (s.result + 1), ("result",), ("expm1_vjp", ("g", "result")),
               ref=np.expm1)
LOG = _unary("log", lambda g, s: g / s.self, ("self",), ("div", ("g", "self")), ref=np.log, domain=POS)
LOG1P = _unary("log1p", lambda g, s: g / (s.self + 1), ("self",), ("log1p_vjp", ("g", "self")), ref=np.log1p,
               domain=(-0.5, 2.0))
SQRT = _unary("sqrt", lambda g, s: g / (2 * s.result), ("result",), ("sqrt_vjp", ("g", "result")), ref=np.sqrt,
              domain=POS)
RSQRT = _unary("rsqrt", lambda g, s: -0.5 * g * s.result ** 3, ("result",), ("rsqrt_vjp", ("g", "result")),
               ref=lambda x: 1 / np.sqrt(x), domain=POS)
RECIPROCAL = _unary("reciprocal", lambda g, s: -g * s.result * s.result, ("result",),
                    ("reciprocal_vjp", ("g", "result")), ref=lambda x: 1 / x, domain=POS)
SQUARE = _unary("square", lambda g, s: 2 * g * s.self, ("self",), ("square_vjp", ("g", "self")), dtype="same",
                ref=np.square, node="PowBackward0")
SIN = _unary("sin", lambda g, s: g * s.self.cos(), ("self",), ("sin_vjp", ("g", "self")), ref=np.sin)
COS = _unary("cos", lambda g, s: -g * s.self.sin(), ("self",), ("cos_vjp", ("g", "self")), ref=np.cos)
TAN = _unary("tan", lambda g, s: g * (1 + s.result * s.result), ("result",), ("tan_vjp", ("g", "result")),
             ref=np.tan, domain=(-1.0, 1.0))
TANH = _unary("tanh", lambda g, s: g * (1 - s.result * s.result), ("result",), ("tanh_vjp", ("g", "result")),
              ref=np.tanh)
SIGMOID = _unary("sigmoid", lambda g, s: g * s.result * (1 - s.result), ("result",),
                 ("sigmoid_vjp", ("g", "result")), ref=lambda x: 1 / (1 + np.exp(-x)))
RELU = _unary("relu", lambda g, s: _on(s.result > 0, g), ("result",), ("relu_vjp", ("g", "result")), dtype="same",
              ref=lambda x: np.maximum(x, 0))
LEAKY_RELU = _unary("leaky_relu", lambda g, s: where(s.self > 0, g, g * s.negative_slope),
                    ("self",), ("leaky_relu_vjp", ("g", "self", "negative_slope")),
                    ref=lambda x, negative_slope=0.01: np.where(x > 0, x, x * negative_slope),
                    params={"negative_slope": 0.01})
ELU = _unary("elu", lambda g, s: where(s.self > 0, g, g * s.alpha * s.self.exp()), ("self",),
             ("elu_vjp", ("g", "self", "alpha")), ref=lambda x, alpha=1.0: np.where(x > 0, x, alpha * np.expm1(x)),
             params={"alpha": 1.0})
_SQRT1_2, _INV_SQRT_2PI = 1 / math.sqrt(2), 1 / math.sqrt(2 * math.pi)
GELU = _unary("gelu", lambda g, s: g * (0.5 * (1 + (s.self * _SQRT1_2).erf())
                                        + s.self * _INV_SQRT_2PI * (-0.5 * s.self * s.self).exp()),
              ("self",), ("gelu_vjp", ("g", "self")), ref=lambda x: 0.5 * x * (1 + _np_erf(x / np.sqrt(2))))
GELU_TANH = _unary("gelu_tanh", lambda g, s: _gelu_tanh_grad(g, s.self), ("self",), ("gelu_tanh_vjp", ("g", "self")),
                   node="GeluBackward0", ref=lambda x, approximate="tanh": 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3))),
                   differentiable=True)


def _gelu_tanh_grad(g, x):
    t = ((x + 0.044715 * x * x * x) * math.sqrt(2 / math.pi)).tanh()
    return g * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * math.sqrt(2 / math.pi) * (1 + 3 * 0.044715 * x * x))


SILU = _unary("silu", lambda g, s: g * s.self.sigmoid() * (1 + s.self * (1 - s.self.sigmoid())), ("self",),
              ("silu_vjp", ("g", "self")), ref=lambda x: x / (1 + np.exp(-x)))
SOFTPLUS = _unary("softplus", lambda g, s: where(s.self * s.beta > s.threshold, g, g * (s.self * s.beta).sigmoid()),
                  ("self",), ("softplus_vjp", ("g", "self", "beta", "threshold")),
                  ref=lambda x, beta=1.0, threshold=20.0: np.where(x * beta > threshold, x, np.log1p(np.exp(beta * x)) / beta),
                  params={"beta": 1.0, "threshold": 20.0})
FLOOR = _unary("floor", _zero, (), dtype="same", ref=np.floor)
CEIL = _unary("ceil", _zero, (), dtype="same", ref=np.ceil)
ROUND = _unary("round", _zero, (), dtype="same", ref=np.round)
TRUNC = _unary("trunc", _zero, (), dtype="same", ref=np.trunc)
ERF = _unary("erf", lambda g, s: g * (2 / math.sqrt(math.pi)) * (-s.self * s.self).exp(), ("self",), ref=None,
             kernel="erf")
LOGICAL_NOT = _unary("logical_not", None, (), dtype="bool", ref=np.logical_not)
ISNAN = _unary("isnan", None, (), dtype="bool", ref=np.isnan)


def _np_erf(x):
    return np.vectorize(math.erf, otypes=[x.dtype if x.dtype.kind == "f" else np.float64])(x)


ERF.ref = _np_erf

# ---------------------------------------------------------------------- binary
ADD = _binary("add", [(lambda g, s: g, ()), (lambda g, s: g * s.alpha if s.alpha != 1 else g, ())],
              ref=lambda a, b, alpha=1: a + b if alpha == 1 else a + alpha * b)  # bool + bool stays bool
SUB = _binary("sub", [(lambda g, s: g, ()), (lambda g, s: -g * s.alpha, ())],
              ref=lambda a, b, alpha=1: a - alpha * b)
MUL = _binary("mul", [(lambda g, s: g * s.other, ("other",)), (lambda g, s: g * s.self, ("self",))],
              [("mul", ("g", "other")), ("mul", ("g", "self"))], ref=np.multiply)
DIV = _binary("div", [(lambda g, s: g / s.other, ("other",)), (lambda g, s: -g * s.self / (s.other * s.other),
                                                             ("self", "other"))],
              [("div", ("g", "other")), ("div_vjp_other", ("g", "self", "other"))], dtype="float",
              ref=np.true_divide, b=POS)
DIV_ROUNDED = _binary("div_rounded", [(_zero, ()), (_zero, ())], ref=None, kernel="div_trunc", node="DivBackward2", b=POS)
POW = _binary("pow", [(lambda g, s: _pow_grad_self(g, s.self, s.other), ("self", "other")),
                      (lambda g, s: _pow_grad_other(g, s.self, s.other, s.result), ("self", "other", "result"))],
              [("pow_vjp_self", ("g", "self", "other")), ("pow_vjp_other", ("g", "self", "other", "result"))],
              kernel="pow", ref=np.power, a=POS, b=(-2.0, 2.0))
# ties split the gradient; a NaN on either side passes it to both inputs (PyTorch's formulas)
MAXIMUM = _binary("maximum", [(lambda g, s: _extreme_grad(g, s.self, s.other), ("self", "other")),
                              (lambda g, s: _extreme_grad(g, s.other, s.self), ("self", "other"))],
                  [("maximum_vjp", ("g", "self", "other")), ("maximum_vjp", ("g", "other", "self"))],
                  ref=np.maximum, scalar=None)
MINIMUM = _binary("minimum", [(lambda g, s: _extreme_grad(g, s.other, s.self), ("self", "other")),
                              (lambda g, s: _extreme_grad(g, s.self, s.other), ("self", "other"))],
                  [("maximum_vjp", ("g", "other", "self")), ("maximum_vjp", ("g", "self", "other"))],
                  ref=np.minimum, scalar=None)
ATAN2 = _binary("atan2", [(lambda g, s: _atan2_grad(g, s.other, s.self, s.other), ("self", "other")),
                          (lambda g, s: _atan2_grad(-g, s.self, s.self, s.other), ("self", "other"))],
                [("atan2_vjp_self", ("g", "self", "other")), ("atan2_vjp_other", ("g", "self", "other"))],
                dtype="float", ref=np.arctan2, scalar=None)


def _extreme_grad(g, a, b):
    """The gradient maximum(a, b) passes to a (minimum's: with a and b swapped)."""
    return where(a < b, 0.0, where(a == b, g / 2, g))


def _atan2_grad(g, num, a, b):
    """g * num / (a^2 + b^2), 0 at the origin as in PyTorch (the masked denominator keeps higher orders finite)."""
    d = a * a + b * b
    origin = d == 0
    return where(origin, 0.0, g * num / d.masked_fill(origin, 1.0))


def _pow_grad_self(g, a, b):
    if not isinstance(b, Tensor):
        return g * b * a ** (b - 1) if b != 0 else _zero(g, None)
    return (g * b * a ** (b - 1)).masked_fill(b == 0, 0.0)


def _pow_grad_other(g, a, b, result):
    a = a if isinstance(a, Tensor) else Tensor._wrap(np.asarray(a, dtype=result.dtype.np))
    return (g * result * a.log()).masked_fill((a == 0) & (b >= 0), 0.0)


for _name, _ref in [("eq", np.equal), ("ne", np.not_equal), ("lt", np.less), ("le", np.less_equal),
                    ("gt", np.greater), ("ge", np.greater_equal), ("logical_and", np.logical_and),
                    ("logical_or", np.logical_or), ("logical_xor", np.logical_xor)]:
    _binary(_name, [], dtype="bool", ref=_ref, out=np.bool_, differentiable=False)

WHERE = register(Op("where", _ew("where"), inputs=("condition", "self", "other"), dtype="promote",
                    vjp=[None, (lambda g, s: where(s.condition, g, 0.0), ("condition",)),
                         (lambda g, s: where(s.condition, 0.0, g), ("condition",))],
                    fused=[None, ("where", ("condition", "g", "zero")), ("where", ("condition", "zero", "g"))],
                    broadcast=True, ref=np.where, node="WhereBackward0", keep_inputs=(0,)))
CLAMP = register(Op("clamp", _ew("clamp"), inputs=("self", "min", "max"), dtype="promote",
                    vjp=[(lambda g, s: _on((s.self >= s.min) & (s.self <= s.max), g), ("self", "min", "max")),
                         # min > max makes the result max: then only max gets the gradient
                         (lambda g, s: _on((s.self < s.min) & (s.min < s.max), g), ("self", "min", "max")),
                         (lambda g, s: _on((s.self > s.max) | (s.max < s.min), g), ("self", "min", "max"))],
                    fused=[("clamp_vjp", ("g", "self", "min", "max"))],
                    broadcast=True, ref=lambda x, lo, hi: np.minimum(np.maximum(x, lo), hi), node="ClampBackward1"))


# ---------------------------------------------------------------------- API
def _make_unary_api(op):
    params = op.params

    if not params:
        def fn(input):
            return dispatch(op, (input,))
    else:
        names = list(params)

        def fn(input, *args, **kwargs):
            p = dict(params)
            for k, v in zip(names, args):
                p[k] = v
            for k, v in kwargs.items():
                if k == "inplace":
                    continue
                if k not in p:
                    raise TypeError("%s() got an unexpected keyword argument '%s'" % (op.name, k))
                p[k] = v
            return dispatch(op, (input,), p)
    fn.__name__ = fn.__qualname__ = op.name
    fn.__doc__ = "Elementwise %s (op table entry %r)." % (op.name, op.name)
    return fn


for _op in (NEG, ABS, SIGN, EXP, EXPM1, LOG, LOG1P, SQRT, RSQRT, RECIPROCAL, SQUARE, SIN, COS, TAN, TANH,
            SIGMOID, RELU, LEAKY_RELU, ELU, SILU, SOFTPLUS, FLOOR, CEIL, ROUND, TRUNC, ERF, LOGICAL_NOT, ISNAN):
    export(_op.name)(_make_unary_api(_op))


@export()
def square(input):
    """input * input; a bool tensor squares to int64, as in PyTorch."""
    return dispatch(SQUARE, (input.long() if _is_bool(input) else input,))


# input dtypes PyTorch has no kernel for (checked once per operand-type pattern, see Op.unsupported)
NEG.unsupported = rejects(RuntimeError, "Negation, the `-` operator, on a bool tensor is not supported. If you are "
                          "trying to invert a mask, use the `~` or `logical_not()` operator instead.", "bool")
RELU.unsupported = rejects(RuntimeError, "Boolean inputs not supported for relu", "bool")
ABS.unsupported, POW.unsupported, CLAMP.unsupported = no_kernel("abs_cpu", "bool"), no_kernel("pow", "bool"), \
    no_kernel("clamp_cpu", "bool")
for _op, _kernel in [(FLOOR, "floor_vml_cpu"), (CEIL, "ceil_vml_cpu"), (ROUND, "round_vml_cpu"), (TRUNC, "trunc_vml_cpu")]:
    _op.unsupported = no_kernel(_kernel, "bool")
for _op, _kernel in [(LEAKY_RELU, "leaky_relu_cpu"), (ELU, "elu_cpu"), (GELU, "GeluKernelImpl"),
                     (GELU_TANH, "GeluKernelImpl"), (SILU, "silu_cpu"), (SOFTPLUS, "softplus_cpu")]:
    _op.unsupported = no_kernel(_kernel, "bool", *INTS)


@export()
def gelu(input, approximate="none"):
    if approximate == "tanh":
        return dispatch(GELU_TANH, (input,))
    if approximate != "none":
        raise RuntimeError("approximate argument must be either none or tanh.")
    return dispatch(GELU, (input,))


@export()
def add(input, other, *, alpha=1):
    return dispatch(ADD, (input, other), _ALPHA1 if alpha == 1 and alpha is not True else _alpha(input, other, alpha))


def _alpha(input, other, alpha):
    """add/sub params for alpha != 1, which must suit the result dtype as in PyTorch."""
    t = _result_dtypes("promote", (input, other))[1]
    if isinstance(alpha, bool) and t is not D.bool_:
        raise RuntimeError("Boolean alpha only supported for Boolean results.")
    if not t.is_floating_point and not isinstance(alpha, (int, np.integer)):
        raise RuntimeError("For integral input tensors, argument alpha must not be a floating point number.")
    return {"alpha": D.check_scalar(alpha, t)}


_ALPHA1 = {"alpha": 1}
ADD.forward = lambda xp, dt, a, b, alpha=1: xp.run("add", dt, a, b) if alpha == 1 else xp.run("add_alpha", dt, a, b, dt.type(alpha))
SUB.forward = lambda xp, dt, a, b, alpha=1: xp.run("sub", dt, a, b) if alpha == 1 else xp.run("add_alpha", dt, a, b, dt.type(-alpha))


@export("sub", "subtract")
def sub(input, other, *, alpha=1):
    a, b = _is_bool(input), _is_bool(other)
    if a and b:
        raise RuntimeError("Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or "
                           "`logical_xor()` operator instead.")
    if a or b:
        raise RuntimeError("Subtraction, the `-` operator, with a bool tensor is not supported. If you are trying to "
                           "invert a mask, use the `~` or `logical_not()` operator instead.")
    return dispatch(SUB, (input, other), _ALPHA1 if alpha == 1 and alpha is not True else _alpha(input, other, alpha))


def _is_bool(x):
    return x.__class__ is bool or (isinstance(x, Tensor) and x._data.dtype == np.bool_)


@export("mul", "multiply")
def mul(input, other):
    return dispatch(MUL, (input, other))


@export("div", "divide", "true_divide")
def div(input, other, *, rounding_mode=None):
    if rounding_mode is None:
        return dispatch(DIV, (input, other))
    if rounding_mode not in ("trunc", "floor"):
        raise RuntimeError("div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '%s'"
                           % rounding_mode)
    return dispatch(DIV_ROUNDED, (input, other), {"rounding_mode": rounding_mode})


def _div_rounded_forward(xp, dt, a, b, rounding_mode):
    if dt.kind == "b":
        raise NotImplementedError("\"div_%s_cpu\" not implemented for 'Bool'" % rounding_mode)
    if dt.kind in "iu":
        if np.any(np.asarray(xp.to_host(b)) == 0):
            raise RuntimeError("ZeroDivisionError")
        return xp.run("int_div_trunc" if rounding_mode == "trunc" else "int_div_floor", dt, a, b)
    return xp.run("div_trunc" if rounding_mode == "trunc" else "div_floor", dt, a, b)


DIV_ROUNDED.forward = _div_rounded_forward


@export()
def floor_divide(input, other):
    return div(input, other, rounding_mode="floor")




@export("pow")
def pow(input, exponent):
    if isinstance(input, Tensor) and not input.dtype.is_floating_point and isinstance(exponent, int) and exponent < 0:
        raise RuntimeError("Integers to negative integer powers are not allowed.")
    if exponent.__class__ in (int, float) and exponent == 2 and isinstance(input, Tensor) and \
            (exponent.__class__ is int or input.dtype.is_floating_point):
        return square(input)  # x ** 2: one multiply instead of a libm pow per element
    return dispatch(POW, (input, exponent))


@export()
def float_power(input, exponent):
    return pow(input.double() if isinstance(input, Tensor) else input,
               exponent.double() if isinstance(exponent, Tensor) else exponent)


@export()
def maximum(input, other):
    return dispatch(MAXIMUM, (input, other))


@export()
def minimum(input, other):
    return dispatch(MINIMUM, (input, other))


@export("atan2", "arctan2")
def atan2(input, other):
    return dispatch(ATAN2, (input, other))


def _cmp_api(name):
    op = _table_op(name)

    def fn(input, other):
        return dispatch(op, (input, other))
    fn.__name__ = name
    return fn


def _table_op(name):
    return OPS[name]


for _name, _aliases in [("eq", ()), ("ne", ("not_equal",)), ("lt", ("less",)), ("le", ("less_equal",)),
                        ("gt", ("greater",)), ("ge", ("greater_equal",)), ("logical_and", ()), ("logical_or", ()),
                        ("logical_xor", ())]:
    export(_name, *_aliases)(_cmp_api(_name))


def _where_forward(xp, dt, c, a, b):
    return xp.run("where", dt, c, a, b)


WHERE.forward = _where_forward


@export("where", method=False)
def where(condition, input=None, other=None):
    if input is None and other is None:
        return condition.nonzero(as_tuple=True)
    if isinstance(condition, Tensor) and condition.dtype.name != "bool":
        raise RuntimeError("where expected condition to be a boolean tensor, but got a tensor with dtype "
                           + condition.dtype.tensor_type[:-len("Tensor")])
    return dispatch(WHERE, (condition, input, other))


@export("where", function=False)
def _where_method(self, condition, other):
    """Tensor.where(condition, y) == where(condition, self, y)."""
    if not isinstance(condition, Tensor):
        condition = Tensor._wrap(np.asarray(condition, dtype=bool))
    return where(condition, self, other) if condition.dtype.name == "bool" else where(self.bool(), condition, other)


_C_TYPE_NAMES = {"int64": "long int", "int32": "int", "float32": "float", "float64": "double"}


@export("masked_fill")
def masked_fill(input, mask, value):
    if not isinstance(mask, Tensor) or mask.dtype.name != "bool":
        if not isinstance(mask, Tensor):
            raise TypeError("masked_fill(): argument 'mask' (position 1) must be Tensor, not " + type(mask).__name__)
        raise RuntimeError("masked_fill_ only supports boolean masks, but got mask with dtype "
                           + _C_TYPE_NAMES[mask.dtype.name])
    if isinstance(value, Tensor) and value.ndim != 0:
        raise RuntimeError("masked_fill_ only supports a 0-dimensional value tensor, but got tensor with %d "
                           "dimension(s)." % value.ndim)
    if isinstance(value, Tensor) and not value._requires_grad:
        value = value.item()
    if isinstance(input, Tensor) and isinstance(value, float) and not input.dtype.is_floating_point:
        value = input.dtype.np.type(D.check_scalar(value, input.dtype)).item()
    return dispatch(WHERE, (mask, value, input)) if isinstance(value, Tensor) else _masked_fill_scalar(input, mask, value)


def _masked_fill_scalar(input, mask, value):
    if mask.shape != input.shape:
        broadcast_shapes(mask.shape, input.shape)  # PyTorch names the mask tensor a
    D.check_scalar(value, input.dtype)
    if not input.dtype.is_floating_point and isinstance(value, float):
        value = int(value)
    return dispatch(MASKED_FILL, (input, mask), {"value": value})


MASKED_FILL = register(Op("masked_fill", lambda xp, dt, x, m, value: xp.run("where", dt, m, dt.type(value), x),
                          inputs=("self", "mask"), dtype="keep", broadcast=True, keep_inputs=(1,),
                          vjp=[(lambda g, s: g.masked_fill(s.mask, 0.0), ("mask",))],
                          fused=[("where", ("mask", "zero", "g"))], ref=lambda x, m, value: np.where(m, value, x).astype(x.dtype),
                          node="MaskedFillBackward0"))


@export("clamp", "clip")
def clamp(input, min=None, max=None):
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    lo = -math.inf if min is None else min
    hi = math.inf if max is None else max
    if not input.dtype.is_floating_point and not isinstance(lo, Tensor) and not isinstance(hi, Tensor):
        lo = _int_bound(lo, input.dtype)
        hi = _int_bound(hi, input.dtype)
    elif input.dtype is D.float32:  # a bound beyond float32's range is an error, as in PyTorch
        D.check_scalar(lo, D.float32)  # (tensors pass through)
        D.check_scalar(hi, D.float32)
    return dispatch(CLAMP, (input, lo, hi))


def _int_bound(v, dtype):
    info = np.iinfo(dtype.np) if dtype.name != "bool" else None
    if info is None:
        return v
    if v == math.inf:
        return int(info.max)
    if v == -math.inf:
        return int(info.min)
    return int(D.check_scalar(v, dtype)) if float(v).is_integer() else v


@export("clamp_min", function=True)
def clamp_min(input, min):
    return clamp(input, min=min)


@export("clamp_max", function=True)
def clamp_max(input, max):
    return clamp(input, max=max)


@export("remainder")
def remainder(input, other):
    """Python's modulo: the result has the sign of the divisor."""
    return input - div(input, other, rounding_mode="floor") * other


# ---------------------------------------------------------------------- test metadata (see _table.py)
def _div_rounded_ref(a, b, rounding_mode):
    q = np.true_divide(a, b)
    q = np.trunc(q) if rounding_mode == "trunc" else np.floor(q)
    return q.astype(np.result_type(a, b)) if np.result_type(a, b).kind in "iu" else q


def _pow_samples(rng, dtype):
    ints = np.dtype(dtype).kind != "f"  # integers to negative powers are an error
    x = _arr(rng, (2, 3), 0.5, 2.0, dtype)
    return binary_samples(a=POS, b=(0.0, 2.0) if ints else (-2.0, 2.0))(rng, dtype) + \
        [((x, 2), {}), ((x, 0), {}), ((x, 3.0), {}), ((2, _arr(rng, (3,), 0.0, 2.0, dtype)), {})]


def _where_samples(rng, dtype):
    c = lambda s: np.asarray(rng.random(s) > 0.5)  # noqa: E731
    A = lambda s: _arr(rng, s, -2.0, 2.0, dtype)  # noqa: E731
    return [((c((2, 3)), A((2, 3)), A((2, 3))), {}), ((c(()), A(()), A(())), {}),
            ((c((2, 1)), A((3,)), A((2, 3))), {}), ((c((3, 2)), _noncontig(rng, (3, 2), -2.0, 2.0, dtype), 1.5), {}),
            ((c((3,)), 0.5, A((2, 3))), {})]


def _clamp_ref(x, min=None, max=None):
    if min is not None:
        x = np.maximum(x, min)
    return x if max is None else np.minimum(x, max)


def _clamp_samples(rng, dtype):
    A = lambda s, lo=-2.0, hi=2.0: _arr(rng, s, lo, hi, dtype)  # noqa: E731
    return [((A((2, 3)), -0.5, 0.5), {}), ((A(()),), {"min": -0.5}), ((A((5,)),), {"max": 0.5}),
            ((_noncontig(rng, (3, 2), -2.0, 2.0, dtype), -1, 1), {}),
            ((A((2, 3)), A((3,), -2.0, 0.0), A((2, 1), 0.0, 2.0)), {}),
            ((A((2, 3)),), {"min": A((2, 3), -1.0, 1.0), "max": A((3,), -1.0, 1.0)}),
            ((A((2, 3)), A((2, 3), 0.5, 2.0), A((2, 3), -2.0, 0.0)), {})]  # min > max: the result is max


def _masked_fill_samples(rng, dtype):
    A = lambda s: _arr(rng, s, -2.0, 2.0, dtype)  # noqa: E731
    m = lambda s: np.asarray(rng.random(s) > 0.5)  # noqa: E731
    return [((A((2, 3)), m((2, 3))), {"value": 0.5}), ((A((2, 3)), m((3,))), {"value": -1}),
            ((A(()), m(())), {"value": 2.0}), ((_noncontig(rng, (3, 2), -2.0, 2.0, dtype), m((3, 2))), {"value": 0})]


def _alpha_samples(rng, dtype):
    alpha = {"f": -0.5, "i": 2, "b": True}[np.dtype(dtype).kind]  # alpha must fit the tensors' kind
    return binary_samples(scalar=None, alpha=alpha)(rng, dtype)


GELU_TANH.call, GELU_TANH.samples = gelu, unary_samples(approximate="tanh")
ADD.samples = SUB.samples = joined(binary_samples(), _alpha_samples)
DIV_ROUNDED.call, DIV_ROUNDED.ref = div, _div_rounded_ref
DIV_ROUNDED.samples = joined(binary_samples(b=POS, rounding_mode="trunc"), binary_samples(b=POS, rounding_mode="floor"))
POW.samples = _pow_samples
WHERE.samples = _where_samples
CLAMP.ref, CLAMP.samples = _clamp_ref, _clamp_samples
MASKED_FILL.samples = _masked_fill_samples
for _name in ("eq", "ne", "lt", "le", "gt", "ge"):  # PyTorch takes a Python number as the second operand only
    _table_op(_name).samples = joined(binary_samples(scalar=None), lambda rng, dt: [
        ((_arr(rng, (2, 3), -2.0, 2.0, dt), 1), {}), ((_arr(rng, (3,), -2.0, 2.0, dt), 0.5), {})])
for _name in ("logical_and", "logical_or", "logical_xor"):  # and no Python number at all
    _table_op(_name).samples = binary_samples(scalar=None)
