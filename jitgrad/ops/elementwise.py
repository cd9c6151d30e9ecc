"""Binary elementwise ops (arithmetic, comparisons, maximum/minimum, atan2) and the selections where,
masked_fill and clamp: one entry each. VJP formulas are HIPS-style one-liners over tensor ops
(``g`` is the output gradient, ``s`` the node with the saved values ``s.self``, ``s.other``,
``s.result`` and params); ``fused`` names the kernel in kernels/scalars.py that computes
the same formula in one pass when no graph of the backward is being built."""
import math

import numpy as np

from .. import _dtype as D
from .._op import Op, _result_dtypes, broadcast_shapes, dispatch
from .._tensor import Tensor
from ._derive import derive
from ._table import COMPLEX, _arr, _noncontig, binary_samples, export, joined, no_complex, no_kernel, register
from .unary import LOGICAL_NOT, POS, _c, _is_complex, _on, ew_forward, square, zero_grad


def _binary(name, vjps=(), fused=(), *, dtype="promote", a=(-2.0, 2.0), b=(-2.0, 2.0), kernel=None, out=None,
            scalar=1.5, forward=None, **kw):
    kw.setdefault("samples", binary_samples(a, b, scalar))
    return register(Op(name, forward or ew_forward(kernel or name, out), inputs=("self", "other"), vjp=vjps,
                       fused=fused, dtype=dtype, broadcast=True, bench={"sizes": [(16,), (1 << 22,)]}, **kw))


def _extreme_grad(g, a, b):
    """The gradient maximum(a, b) passes to a (minimum's: with a and b swapped): g, half of it at a tie, none
    where a < b (a NaN on either side passes g)."""
    return g.where(a != b, g / 2).where(~(a < b), 0.0)


def _atan2_grad(g, num, a, b):
    """g * num / (a^2 + b^2), 0 at the origin as in PyTorch (the masked denominator keeps higher orders finite)."""
    d = a * a + b * b
    origin = d == 0
    return (g * num / d.masked_fill(origin, 1.0)).where(~origin, 0.0)


def _pow_grad_self(g, a, b):
    if isinstance(b, (int, float, complex, np.number)):  # (a number exponent: x ** 2)
        return g * _c(b * a ** (b - 1)) if b != 0 else zero_grad(g, None)
    return (g * _c(b) * _c(a ** (b - 1))).masked_fill(b == 0, 0.0)


def _pow_grad_other(g, a, b, result):
    a = Tensor._wrap(np.asarray(a, dtype=result.dtype.np)) if isinstance(a, (int, float, complex, np.number)) else a
    if _is_complex(result):  # 0 ** b: no gradient where b's real part is >= 0 (PyTorch's)
        return (g * _c(result * a.log())).masked_fill((a == 0) & (b.real >= 0 if _is_complex(b) else b >= 0), 0.0)
    return (g * result * a.log()).masked_fill((a == 0) & (b >= 0), 0.0)


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
            ((A((2, 3)),), {"max": A((3,), -1.0, 1.0)}),  # one tensor bound: integers stay integers
            ((A((2, 3)), A((2, 3), 0.5, 2.0), A((2, 3), -2.0, 0.0)), {})]  # min > max: the result is max


def _masked_fill_samples(rng, dtype):
    A = lambda s: _arr(rng, s, -2.0, 2.0, dtype)  # noqa: E731
    m = lambda s: np.asarray(rng.random(s) > 0.5)  # noqa: E731
    return [((A((2, 3)), m((2, 3))), {"value": 0.5}), ((A((2, 3)), m((3,))), {"value": -1}),
            ((A(()), m(())), {"value": 2.0}), ((_noncontig(rng, (3, 2), -2.0, 2.0, dtype), m((3, 2))), {"value": 0})]


def _alpha_samples(rng, dtype):
    alpha = {"f": -0.5, "i": 2, "b": True, "c": 0.5 - 1j}[np.dtype(dtype).kind]  # alpha must fit the tensors' kind
    return binary_samples(scalar=None, alpha=alpha)(rng, dtype)


# ---------------------------------------------------------------------- API
def add(input, other, *, alpha=1):
    return dispatch(ADD, (input, other)) if alpha == 1 and alpha is not True else \
        dispatch(ADD, (input, other), _alpha(input, other, alpha))


def _alpha(input, other, alpha):
    """add/sub params for alpha != 1, which must suit the result dtype as in PyTorch."""
    t = _result_dtypes("promote", (input, other))[1]
    if isinstance(alpha, bool) and t is not D.bool_:
        raise RuntimeError("Boolean alpha only supported for Boolean results.")
    if t.category < 2 and not isinstance(alpha, (int, np.integer)):
        raise RuntimeError("For integral input tensors, argument alpha must not be a floating point number.")
    return {"alpha": D.check_scalar(alpha, t)}


def sub(input, other, *, alpha=1):
    a, b = _is_bool(input), _is_bool(other)
    if a and b:
        raise RuntimeError("Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or "
                           "`logical_xor()` operator instead.")
    if a or b:
        raise RuntimeError("Subtraction, the `-` operator, with a bool tensor is not supported. If you are trying to "
                           "invert a mask, use the `~` or `logical_not()` operator instead.")
    return dispatch(SUB, (input, other)) if alpha == 1 and alpha is not True else \
        dispatch(SUB, (input, other), _alpha(input, other, alpha))


@export(method=False)
def rsub(input, other, *, alpha=1):
    """other - alpha * input (torch.rsub). Two tensors record RsubBackward0 (inputs in this order), a number
    ``other`` RsubBackward1 (sub's Scalar overload)."""
    if not (isinstance(input, Tensor) and isinstance(other, Tensor)) or _is_bool(input) or _is_bool(other):
        return sub(other, input, alpha=alpha)
    return dispatch(RSUB, (input, other)) if alpha == 1 and alpha is not True else \
        dispatch(RSUB, (input, other), _alpha(input, other, alpha))


def _is_bool(x):
    return x.__class__ is bool or (isinstance(x, Tensor) and x._data.dtype == np.bool_)


def mul(input, other):
    return dispatch(MUL, (input, other))


def div(input, other, *, rounding_mode=None):
    if rounding_mode is None:
        return dispatch(DIV, (input, other))
    if rounding_mode not in ("trunc", "floor"):
        raise RuntimeError("div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '%s'"
                           % rounding_mode)
    t = _result_dtypes("promote", (input, other))[1]
    if t.is_complex:
        raise NotImplementedError("\"div_%s_cpu\" not implemented for '%s'" % (rounding_mode, t.scalar_type))
    return dispatch(DIV_ROUNDED, (input, other), {"rounding_mode": rounding_mode})


def _div_rounded_forward(xp, dt, a, b, rounding_mode):
    if dt.kind == "b":  # (the message names the rounding mode: not an entry's ``unsupported``)
        raise NotImplementedError("\"div_%s_cpu\" not implemented for 'Bool'" % rounding_mode)
    if dt.kind in "iu":
        if np.any(np.asarray(xp.to_host(b)) == 0):
            raise RuntimeError("ZeroDivisionError")
        return xp.run("int_div_trunc" if rounding_mode == "trunc" else "int_div_floor", dt, a, b)
    return xp.run("div_trunc" if rounding_mode == "trunc" else "div_floor", dt, a, b)


@export(inplace=True, operators=("__floordiv__", "__rfloordiv__"))
def floor_divide(input, other):
    return div(input, other, rounding_mode="floor")


def pow(input, exponent):
    if isinstance(input, Tensor) and input.dtype.category < 2 and isinstance(exponent, int) and exponent < 0:
        raise RuntimeError("Integers to negative integer powers are not allowed.")
    if exponent.__class__ in (int, float) and exponent == 2 and isinstance(input, Tensor) and \
            (exponent.__class__ is int or input.dtype.is_floating_point):
        return square(input)  # x ** 2: one multiply instead of a libm pow per element
    return dispatch(POW, (input, exponent))


@export()
def float_power(input, exponent):
    """pow in double precision: float64, or complex128 if either operand is complex."""
    to = D.complex128 if any(isinstance(a, complex) or isinstance(a, Tensor) and a.dtype.is_complex
                             for a in (input, exponent)) else D.float64
    return pow(input.to(to) if isinstance(input, Tensor) else input,
               exponent.to(to) if isinstance(exponent, Tensor) else exponent)


def maximum(input, other):
    return dispatch(MAXIMUM, (input, other))


def minimum(input, other):
    return dispatch(MINIMUM, (input, other))


def atan2(input, other):
    return dispatch(ATAN2, (input, other))


def _where_forward(xp, dt, c, a, b):
    return xp.run("where", dt, c, a, b)


def where(condition, input=None, other=None):
    if input is None and other is None:
        return condition.nonzero(as_tuple=True)
    if isinstance(condition, Tensor) and condition.dtype.name != "bool":
        raise RuntimeError("where expected condition to be a boolean tensor, but got a tensor with dtype "
                           + condition.dtype.scalar_type)
    return dispatch(WHERE, (condition, input, other))


@export("where", function=False)
def _where_method(self, condition, other):
    """Tensor.where(condition, y) == where(condition, self, y)."""
    if not isinstance(condition, Tensor):
        condition = Tensor._wrap(np.asarray(condition, dtype=bool))
    return where(condition, self, other) if condition.dtype.name == "bool" else where(self.bool(), condition, other)


_C_TYPE_NAMES = {"int64": "long int", "int32": "int", "float32": "float", "float64": "double",
                 "float16": "c10::Half", "bfloat16": "c10::BFloat16"}


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


def clamp(input, min=None, max=None):
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    if isinstance(input, Tensor) and input.dtype.is_complex:
        raise NotImplementedError("clamp is not supported for complex types")
    lo = -math.inf if min is None else min
    hi = math.inf if max is None else max
    if isinstance(min, Tensor) != isinstance(max, Tensor) and (min is None or max is None):
        # one tensor bound: the missing one must not promote an integer result to float
        t = _result_dtypes("promote", (input, max if min is None else min))[1]
        if t is D.bool_:
            lo, hi = (False, hi) if min is None else (lo, True)
        elif not t.is_floating_point:
            lo, hi = (_int_bound(lo, t), hi) if min is None else (lo, _int_bound(hi, t))
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


@export(inplace=True)
def clamp_min(input, min):
    return clamp(input, min=min)


@export(inplace=True)
def clamp_max(input, max):
    return clamp(input, max=max)


@export(inplace=True, operators=("__mod__", "__rmod__"))
def remainder(input, other):
    """Python's modulo: the result has the sign of the divisor."""
    t = _result_dtypes("promote", (input, other))[1]
    if t.is_complex:
        raise NotImplementedError("\"remainder_cpu\" not implemented for '%s'" % t.scalar_type)
    return input - div(input, other, rounding_mode="floor") * other


# ---------------------------------------------------------------------- operators that are not one entry
@export(method=False, function=False, operators=("__pos__",))
def _positive(self):
    return self


@export(method=False, function=False, operators=("__invert__",))
def _invert(self):
    if self.dtype.name != "bool":
        raise TypeError("~ (bitwise_not) is only supported on bool tensors here, got " + self.dtype.name)
    return LOGICAL_NOT.exposure.call(self)


def _bitwise(name, fn):
    def method(self, other):
        for t in (self, other):
            if isinstance(t, Tensor) and t.dtype.name != "bool":
                raise TypeError("bitwise operators (&, |, ^) are supported on bool tensors only, got " + t.dtype.name)
        return fn(self, other)
    method.__name__ = name
    return method


def _compare(name, ref, api=None, operators=(), **kw):
    """A comparison or logical entry; its public function dispatches it as is."""
    def fn(input, other):
        return dispatch(op, (input, other))
    fn.__name__ = name
    op = _binary(name, dtype="bool", ref=ref, out=np.bool_, differentiable=False, call=fn, api=api or (name,),
                 operators=operators, **kw)
    return op


# ---------------------------------------------------------------------- the entries
def _add_forward(xp, dt, a, b, alpha=1):
    return xp.run("add", dt, a, b) if alpha == 1 else xp.run("add_alpha", dt, a, b, dt.type(alpha))


def _sub_forward(xp, dt, a, b, alpha=1):
    return xp.run("sub", dt, a, b) if alpha == 1 else xp.run("add_alpha", dt, a, b, dt.type(-alpha))


# the kernels dispatch calls directly when alpha is left at 1 (no params given)
_add_forward.kernel, _add_forward.out = "add", None
_sub_forward.kernel, _sub_forward.out = "sub", None


ADD = _binary("add", [lambda g, s: g, lambda g, s: g * _c(s.params["alpha"]) if s.params else g], forward=_add_forward,
              complex=True,
              params={"alpha": 1},
              ref=lambda a, b, alpha=1: a + b if alpha == 1 else a + alpha * b,  # bool + bool stays bool
              samples=joined(binary_samples(), _alpha_samples), call=add, api=("add",), inplace=True,
              operators=("__add__", "__radd__", "__iadd__"))
SUB = _binary("sub", [lambda g, s: g, lambda g, s: -g * _c(s.params["alpha"]) if s.params else -g], forward=_sub_forward,
              complex=True,
              params={"alpha": 1},
              ref=lambda a, b, alpha=1: a - alpha * b, samples=joined(binary_samples(), _alpha_samples), call=sub,
              api=("sub", "subtract"), inplace=True, operators=("__sub__", "__rsub__", "__isub__"),
              scalar_nodes=("RsubBackward1", None))
RSUB = _binary("rsub", [lambda g, s: -g * _c(s.params["alpha"]) if s.params else -g, lambda g, s: g],
               forward=lambda xp, dt, a, b, alpha=1: _sub_forward(xp, dt, b, a, alpha), complex=True, params={"alpha": 1},
               ref=lambda a, b, alpha=1: b - alpha * a, call=rsub, node="RsubBackward0",
               samples=lambda rng, dtype: [] if np.dtype(dtype).kind == "b" else joined(binary_samples(), _alpha_samples)(rng, dtype))
MUL = _binary("mul", [lambda g, s: g * _c(s.other), lambda g, s: g * _c(s.self)],
              [("mul", ("g", "other")), ("mul", ("g", "self"))], complex=True, ref=np.multiply, call=mul,
              api=("mul", "multiply"),
              inplace=True, operators=("__mul__", "__rmul__", "__imul__"), original_scalars=True)
DIV = _binary("div", [lambda g, s: g / _c(s.other), lambda g, s: -g * _c(s.self) / _c(s.other * s.other)],
              [("div", ("g", "other")), derive("div_vjp_other")], complex=True, dtype="float",
              ref=np.true_divide, b=POS, call=div, api=("div", "divide", "true_divide"), inplace=True,
              operators=("__truediv__", "__rtruediv__", "__itruediv__"), original_scalars=True)
DIV_ROUNDED = _binary("div_rounded", [zero_grad, zero_grad], forward=_div_rounded_forward, ref=_div_rounded_ref,
                      node="DivBackward2", call=div,
                      samples=joined(binary_samples(b=POS, rounding_mode="trunc"),
                                     binary_samples(b=POS, rounding_mode="floor")))
POW = _binary("pow", [lambda g, s: _pow_grad_self(g, s.self, s.other),
                      lambda g, s: _pow_grad_other(g, s.self, s.other, s.result)],
              [derive("pow_vjp_self"), derive("pow_vjp_other")],
              ref=np.power, samples=_pow_samples, unsupported=no_kernel("pow", "bool"), call=pow, api=("pow",),
              inplace=True, operators=("__pow__", "__rpow__", "__ipow__"), node="PowBackward1",
              scalar_nodes=("PowBackward2", "PowBackward0"), complex=True)
# ties split the gradient; a NaN on either side passes it to both inputs (PyTorch's formulas)
MAXIMUM = _binary("maximum", [lambda g, s: _extreme_grad(g, s.self, s.other),
                              lambda g, s: _extreme_grad(g, s.other, s.self)],
                  [derive("maximum_vjp"), derive("maximum_vjp_other")],
                  ref=np.maximum, scalar=None, call=maximum, api=("maximum",), inplace=True,
                  unsupported=no_complex(RuntimeError, "maximum not implemented for complex tensors."))
MINIMUM = _binary("minimum", [lambda g, s: _extreme_grad(g, s.other, s.self),
                              lambda g, s: _extreme_grad(g, s.self, s.other)],
                  [derive("minimum_vjp"), derive("minimum_vjp_other")],
                  ref=np.minimum, scalar=None, call=minimum, api=("minimum",), inplace=True,
                  unsupported=no_complex(RuntimeError, "minimum not implemented for complex tensors."))
ATAN2 = _binary("atan2", [lambda g, s: _atan2_grad(g, s.other, s.self, s.other),
                          lambda g, s: _atan2_grad(-g, s.self, s.self, s.other)],
                [derive("atan2_vjp_self"), derive("atan2_vjp_other")],
                dtype="float", ref=np.arctan2, scalar=None, call=atan2, api=("atan2", "arctan2"), inplace=("atan2",),
                unsupported=no_kernel("atan2_cpu", *COMPLEX))

# PyTorch takes a Python number as the second operand of a comparison only, and none in a logical op
_COMPARE_SAMPLES = joined(binary_samples(scalar=None), lambda rng, dt: [
    ((_arr(rng, (2, 3), -2.0, 2.0, dt), 1), {}), ((_arr(rng, (3,), -2.0, 2.0, dt), 0.5), {})])
EQ = _compare("eq", np.equal, operators=("__eq__",), samples=_COMPARE_SAMPLES, complex=True)
NE = _compare("ne", np.not_equal, ("ne", "not_equal"), ("__ne__",), samples=_COMPARE_SAMPLES, complex=True)
# complex numbers have no order: PyTorch has no kernel of these for them
LT = _compare("lt", np.less, ("lt", "less"), ("__lt__",), samples=_COMPARE_SAMPLES,
              unsupported=no_kernel("lt_cpu", *COMPLEX))
LE = _compare("le", np.less_equal, ("le", "less_equal"), ("__le__",), samples=_COMPARE_SAMPLES,
              unsupported=no_kernel("le_cpu", *COMPLEX))
GT = _compare("gt", np.greater, ("gt", "greater"), ("__gt__",), samples=_COMPARE_SAMPLES,
              unsupported=no_kernel("gt_cpu", *COMPLEX))
GE = _compare("ge", np.greater_equal, ("ge", "greater_equal"), ("__ge__",), samples=_COMPARE_SAMPLES,
              unsupported=no_kernel("ge_cpu", *COMPLEX))
LOGICAL_AND = _compare("logical_and", np.logical_and, samples=binary_samples(scalar=None), complex=True)
LOGICAL_OR = _compare("logical_or", np.logical_or, samples=binary_samples(scalar=None), complex=True)
LOGICAL_XOR = _compare("logical_xor", np.logical_xor, samples=binary_samples(scalar=None), complex=True)
for _name, _op in [("and", LOGICAL_AND), ("or", LOGICAL_OR), ("xor", LOGICAL_XOR)]:
    export(method=False, function=False, operators=("__%s__" % _name, "__r%s__" % _name))(
        _bitwise("__%s__" % _name, _op.exposure.call))

WHERE = register(Op("where", _where_forward, inputs=("condition", "self", "other"), dtype="promote",
                    vjp=[None, lambda g, s: where(s.condition, g, 0.0), lambda g, s: where(s.condition, 0.0, g)],
                    fused=[None, ("where", ("condition", "g", "zero")), ("where", ("condition", "zero", "g"))],
                    broadcast=True, ref=np.where, node="WhereBackward0", keep_inputs=(0,), samples=_where_samples,
                    call=where, api=("where",), method=False, complex=True))
CLAMP = register(Op("clamp", ew_forward("clamp"), inputs=("self", "min", "max"), dtype="promote",
                    vjp=[lambda g, s: _on((s.self >= s.min) & (s.self <= s.max), g),
                         # min > max makes the result max: then only max gets the gradient
                         lambda g, s: _on((s.self < s.min) & (s.min < s.max), g),
                         lambda g, s: _on((s.self > s.max) | (s.max < s.min), g)],
                    fused=[derive("clamp_vjp")], broadcast=True, ref=_clamp_ref,
                    samples=_clamp_samples, node="ClampBackward1", unsupported=no_kernel("clamp_cpu", "bool"),
                    call=clamp, api=("clamp", "clip"), inplace=True))
MASKED_FILL = register(Op("masked_fill", lambda xp, dt, x, m, value: xp.run("where", dt, m, dt.type(value), x),
                          inputs=("self", "mask"), dtype="keep", broadcast=True, keep_inputs=(1,),
                          vjp=[lambda g, s: g.masked_fill(s.mask, 0.0)], fused=[("where", ("mask", "zero", "g"))],
                          ref=lambda x, m, value: np.where(m, value, x).astype(x.dtype), node="MaskedFillBackward0",
                          samples=_masked_fill_samples, call=masked_fill, api=("masked_fill",), inplace=True,
                          complex=True))
