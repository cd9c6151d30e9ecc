"""Fused optimizer updates: one pass over a parameter's elements per step.

Each update reads the gradient once, updates the optimizer's state buffers and the parameter in
place, following PyTorch's update equations (``torch.optim`` single-tensor path) term by term.
The math of one element is written once, as the ``*_step`` functions below; the CPU loops here and
the CUDA kernels (kernels/cuda/optim.py, same names and signatures) apply them over flat,
C-contiguous arrays of the parameter's dtype. A buffer an option does not use is passed as an
empty array. ``maximize`` negates the gradient before weight decay, as PyTorch does.

The loops index every array with the parameter's indices and check nothing: ``prepare`` is the one
gate in front of them (for every device), raising PyTorch's errors for arrays that do not fit.
``update(kernel, p, *args)`` runs a kernel on the CPU through it, serial or ``prange`` by size.
"""
import math

import numpy as np
from numba import njit, prange

from . import config
from . import cpu as _cpu
from ._jit import twins

EMPTY = {}


# ---------------------------------------------------------------- one element (shared with CUDA)
def lerp(start, end, weight):
    """``torch.lerp``: the two-sided formula that keeps the result exact at weight 0 and 1."""
    if weight < 0.5:
        return start + weight * (end - start)
    return end - (end - start) * (1 - weight)


def maximum(a, b):
    """``torch.maximum``: NaN in either input gives NaN."""
    if a != a:
        return a
    return a if a > b else b


def sgd_step(p, g, b, lr, momentum, dampening, weight_decay, nesterov, maximize, first_step):
    """(p, momentum buffer): d = g + wd*p; b = d on the first step, else momentum*b + (1-dampening)*d;
    p -= lr * (d + momentum*b if nesterov else b)."""
    d = -g if maximize else g
    if weight_decay != 0:
        d = d + weight_decay * p
    if momentum != 0:
        b = d if first_step else b * momentum + (1 - dampening) * d
        d = d + momentum * b if nesterov else b
    return p - lr * d, b


def adam_moments(p, g, m, v, lr, beta1, beta2, weight_decay, decoupled, maximize):
    """What Adam, NAdam and RAdam share: (p, d, m, v) after weight decay (decoupled: p *= 1 - lr*wd; else
    d = g + wd*p, with g negated first when maximizing) and the two moment updates."""
    d = -g if maximize else g
    if weight_decay != 0:
        if decoupled:
            p = p * (1 - lr * weight_decay)
        else:
            d = d + weight_decay * p
    return p, d, _lerp(m, d, 1 - beta1), v * beta2 + (1 - beta2) * d * d


def adam_step(p, g, m, v, v_max, lr, beta1, beta2, eps, weight_decay, decoupled, amsgrad, maximize,
              bias_correction1, bias_correction2_sqrt):
    """(p, m, v, v_max) of Adam, or AdamW when ``decoupled`` (p *= 1 - lr*wd instead of g += wd*p)."""
    p, d, m, v = _adam_moments(p, g, m, v, lr, beta1, beta2, weight_decay, decoupled, maximize)
    if amsgrad:
        v_max = _maximum(v_max, v)
    denom = math.sqrt(v_max if amsgrad else v) / bias_correction2_sqrt + eps
    return p - (lr / bias_correction1) * (m / denom), m, v, v_max


def rmsprop_step(p, g, square_avg, grad_avg, b, lr, alpha, eps, weight_decay, momentum, centered, maximize):
    """(p, square_avg, grad_avg, momentum buffer) of RMSprop."""
    d = -g if maximize else g
    if weight_decay != 0:
        d = d + weight_decay * p
    square_avg = square_avg * alpha + (1 - alpha) * d * d
    v = square_avg
    if centered:
        grad_avg = _lerp(grad_avg, d, 1 - alpha)
        v = v - grad_avg * grad_avg
    avg = (math.sqrt(v) if v >= 0 else math.nan) + eps
    if momentum > 0:
        b = b * momentum + d / avg
        return p - lr * b, square_avg, grad_avg, b
    return p - lr * (d / avg), square_avg, grad_avg, b


def adagrad_step(p, g, state_sum, clr, eps, weight_decay, maximize):
    """(p, sum) of Adagrad; ``clr`` = lr / (1 + (step - 1) * lr_decay)."""
    d = -g if maximize else g
    if weight_decay != 0:
        d = d + weight_decay * p
    state_sum = state_sum + d * d
    return p - clr * (d / (math.sqrt(state_sum) + eps)), state_sum


def adadelta_step(p, g, square_avg, acc_delta, lr, rho, eps, weight_decay, maximize):
    """(p, square_avg, acc_delta) of Adadelta."""
    d = -g if maximize else g
    if weight_decay != 0:
        d = d + weight_decay * p
    square_avg = square_avg * rho + (1 - rho) * d * d
    delta = math.sqrt(acc_delta + eps) / math.sqrt(square_avg + eps) * d
    acc_delta = acc_delta * rho + (1 - rho) * delta * delta
    return p - lr * delta, square_avg, acc_delta


def adamax_step(p, g, m, u, clr, beta1, beta2, eps, weight_decay, maximize):
    """(p, exp_avg, exp_inf) of Adamax; ``clr`` = lr / (1 - beta1^t)."""
    d = -g if maximize else g
    if weight_decay != 0:
        d = d + weight_decay * p
    m = _lerp(m, d, 1 - beta1)
    u = _maximum(u * beta2, abs(d) + eps)
    return p - clr * (m / u), m, u


def nadam_step(p, g, m, v, lr, beta1, beta2, eps, weight_decay, decoupled, maximize, bias_correction2, grad_coef,
               avg_coef):
    """(p, exp_avg, exp_avg_sq) of NAdam: p += grad_coef * g / denom + avg_coef * m / denom, with the momentum
    schedule folded into the two coefficients."""
    p, d, m, v = _adam_moments(p, g, m, v, lr, beta1, beta2, weight_decay, decoupled, maximize)
    denom = math.sqrt(v / bias_correction2) + eps
    p = p + grad_coef * (d / denom)
    return p + avg_coef * (m / denom), m, v


def radam_step(p, g, m, v, lr, beta1, beta2, eps, weight_decay, decoupled, maximize, bias_correction1,
               bias_correction2_sqrt, rect):
    """(p, exp_avg, exp_avg_sq) of RAdam: the rectified adaptive step when ``rect`` > 0, else SGD with momentum."""
    p, d, m, v = _adam_moments(p, g, m, v, lr, beta1, beta2, weight_decay, decoupled, maximize)
    step = m / bias_correction1 * lr
    if rect > 0:
        step = step * (bias_correction2_sqrt / (math.sqrt(v) + eps)) * rect
    return p - step, m, v


def rprop_step(p, g, prev, step_size, etaminus, etaplus, step_size_min, step_size_max, maximize):
    """(p, prev, step_size) of Rprop: the step size grows by etaplus where the gradient kept its sign, shrinks
    by etaminus where it flipped (and that element skips its update and forgets its gradient)."""
    d = -g if maximize else g
    s = d * prev
    eta = etaplus if s > 0 else (etaminus if s < 0 else (1.0 if s == 0 else s))  # (NaN stays NaN, as sign())
    step_size = step_size * eta
    if step_size == step_size:  # clamp, NaN through
        step_size = step_size_min if step_size < step_size_min else (
            step_size_max if step_size > step_size_max else step_size)
    if eta == etaminus:
        d = 0.0 * d
    sign = 1.0 if d > 0 else (-1.0 if d < 0 else (0.0 if d == 0 else d))
    return p - sign * step_size, d, step_size


# The functions the step functions call (as _lerp, _maximum, _adam_moments), and each optimizer's step.
HELPERS = {"lerp": lerp, "maximum": maximum, "adam_moments": adam_moments}
STEPS = {"sgd": sgd_step, "adam": adam_step, "rmsprop": rmsprop_step, "adagrad": adagrad_step,
         "adadelta": adadelta_step, "adamax": adamax_step, "nadam": nadam_step, "radam": radam_step,
         "rprop": rprop_step}


def device_functions():
    """(global name, function) of the helpers and steps as the step functions and loops call them, helpers first."""
    return [("_" + n, f) for n, f in HELPERS.items()] + [("_%s_step" % n, f) for n, f in STEPS.items()]


# CPU builds, inlined into the loops.
globals().update((name, njit(inline="always")(fn)) for name, fn in device_functions())


# ---------------------------------------------------------------- the loops, from one template
# An update's loop applies its step function to each element: it reads the parameter, the gradient and
# the state arrays, and writes the parameter and the state back. The loop is generated from the step's
# signature, step(p, g, *states, *options), and the state arrays' names (ARRAYS), once per target: the CPU
# loops here (prange) and the CUDA kernels (kernels/cuda/optim.py, a grid-stride range). A state array
# gated by an option is read and written only where it is not empty (the gate passes an unused buffer
# empty), and then enters the step as 0.
_LOOP = """
def {name}(p, {arrays}, {options}):
    for i in {indices}:
{body}
"""

# The arrays each loop takes after the parameter, named as the optimizer state they hold (the
# gradient first), each with the option under which the loop reads it (None: always). An empty
# array whose option is off (not > 0) reaches the loop as an empty array of the parameter's dtype;
# every other array is checked (SGD's loop reads its buffer whenever it is not empty).
ARRAYS = {
    "sgd": (("grad", None), ("momentum_buffer", "momentum")),
    "adam": (("grad", None), ("exp_avg", None), ("exp_avg_sq", None), ("max_exp_avg_sq", "amsgrad")),
    "rmsprop": (("grad", None), ("square_avg", None), ("grad_avg", "centered"), ("momentum_buffer", "momentum")),
    "adagrad": (("grad", None), ("sum", None)),
    "adadelta": (("grad", None), ("square_avg", None), ("acc_delta", None)),
    "adamax": (("grad", None), ("exp_avg", None), ("exp_inf", None)),
    "nadam": (("grad", None), ("exp_avg", None), ("exp_avg_sq", None)),
    "radam": (("grad", None), ("exp_avg", None), ("exp_avg_sq", None)),
    "rprop": (("grad", None), ("prev", None), ("step_size", None)),
}

# The usual steps get loops of their own, with their options constant, so that LLVM drops the branches and
# vectorizes the loop (SGD with momentum: 0.06 instead of 0.2 ms for 400k float32 on two threads; Adam 0.4
# instead of 0.6 ms): (loop name, optimizer, options fixed to constants, gated arrays read unconditionally).
# Each is a kernel of its own, compiled when a step first takes it (a parallel build costs about half a second).
USUAL_LOOPS = (
    ("sgd_momentum", "sgd", dict(weight_decay=0.0, nesterov=False, maximize=False, first_step=False),
     ("momentum_buffer",)),
    ("sgd_plain", "sgd", dict(momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False, maximize=False,
                              first_step=False), ()),
    ("adam_plain", "adam", dict(amsgrad=False, maximize=False), ()),
)


def options(optimizer):
    """The names of the options of ``optimizer``'s step function (its parameters after the state)."""
    code = STEPS[optimizer].__code__
    return code.co_varnames[1 + len(ARRAYS[optimizer]):code.co_argcount]


def loop_source(name, optimizer, indices, fixed=EMPTY, present=()):
    """The source of the loop ``name`` applying ``optimizer``'s step over ``indices`` (the target's range
    expression over p's elements); ``fixed`` options are constants, ``present`` gated arrays always read."""
    arrays = ARRAYS[optimizer]
    gates = {n: o for n, o in arrays[1:] if o is not None and n not in present}
    unused = {n for n, o in gates.items() if o in fixed and not fixed[o]}
    body = []
    for k, (n, _) in enumerate(arrays[1:]):
        if n in unused:
            body.append("v%d = 0.0" % k)
        else:
            body.append("v%d = %s[i]%s" % (k, n, " if %s.shape[0] != 0 else 0.0" % n if n in gates else ""))
    values = ", ".join("v%d" % k for k in range(len(arrays) - 1))
    args = ", ".join(repr(fixed[o]) if o in fixed else o for o in options(optimizer))
    body.append("p[i], %s = _%s_step(p[i], grad[i], %s, %s)" % (values, optimizer, values, args))
    for k, (n, _) in enumerate(arrays[1:]):
        if n in gates and n not in unused:
            body.append("if %s.shape[0] != 0:\n    %s[i] = v%d" % (n, n, k))
        elif n not in unused:
            body.append("%s[i] = v%d" % (n, k))
    body = "\n".join(" " * 8 + line.replace("\n", "\n" + " " * 8) for line in body)
    return _LOOP.format(name=name, arrays=", ".join(n for n, _ in arrays), options=", ".join(options(optimizer)),
                        indices=indices, body=body)


def loops():
    """(loop name, optimizer, fixed options, present arrays) of every loop: each optimizer's own, then the usual ones."""
    return tuple((name, name, EMPTY, ()) for name in ARRAYS) + USUAL_LOOPS


def _cpu_loop(name, optimizer, fixed, present):
    exec(compile(loop_source(name, optimizer, "prange(p.shape[0])", fixed, present), __file__, "exec"), globals())
    return globals()[name]


_LOOPS = {name: _cpu_loop("_" + name, *spec) for name, *spec in loops()}
KERNELS = {name: twins(fn) for name, fn in _LOOPS.items()}


def _sgd_usual(grad, buf, lr, momentum, dampening, weight_decay, nesterov, maximize, first_step):
    """The loop of SGD's usual step for these options, or None."""
    if nesterov or maximize or first_step or weight_decay != 0:
        return None
    return "sgd_momentum" if buf.shape[0] else "sgd_plain"


def _adam_usual(grad, exp_avg, exp_avg_sq, max_exp_avg_sq, lr, beta1, beta2, eps, weight_decay, decoupled, amsgrad,
                maximize, bias_correction1, bias_correction2_sqrt):
    return None if amsgrad or maximize else "adam_plain"


USUAL = {"sgd": _sgd_usual, "adam": _adam_usual}  # the loop of an optimizer's usual step, by its options

# ---------------------------------------------------------------- the gate in front of the loops
def _layout(optimizer):
    """(position in args, state name, position of its option or None) for each array of ``optimizer``'s loop."""
    names = tuple(n for n, _ in ARRAYS[optimizer]) + options(optimizer)  # the loop's parameters after p
    return tuple((i, name, None if option is None else names.index(option))
                 for i, (name, option) in enumerate(ARRAYS[optimizer]))


_LAYOUT = {name: _layout(name) for name in ARRAYS}

SIZE_MISMATCH = "The size of tensor a (%d) must match the size of tensor b (%d) at non-singleton dimension %d"
OVERLAP = ("unsupported operation: more than one element of the written-to tensor refers to a single memory "
           "location. Please clone() the tensor before performing the operation.")
# PyTorch's names of dtypes: c10's in casting errors, C's in its dtype checks.
_SCALAR_TYPE = {"float16": "Half", "float32": "Float", "float64": "Double", "int8": "Char", "uint8": "Byte",
                "int16": "Short", "int32": "Int", "int64": "Long", "bool": "Bool"}
_C_TYPE = {"float16": "c10::Half", "float32": "float", "float64": "double", "int32": "int", "int64": "long int"}


def _shape(s):
    return ", ".join(str(n) for n in s)


def _check_shape(x, g):
    """PyTorch's error for an in-place update of ``x`` from gradient ``g`` (tensor a is x, b is g)."""
    xs, gs = tuple(x.shape), tuple(g.shape)
    nd = max(len(xs), len(gs))
    xs1, gs1 = (1,) * (nd - len(xs)) + xs, (1,) * (nd - len(gs)) + gs
    for i in range(nd - 1, -1, -1):  # PyTorch reports the last mismatching dimension
        a, b = xs1[i], gs1[i]
        if a != b and a != 1 and b != 1:
            raise RuntimeError(SIZE_MISMATCH % (a, b, i))
    out = tuple(b if a == 1 else a for a, b in zip(xs1, gs1))
    if out != xs:
        raise RuntimeError("output with shape [%s] doesn't match the broadcast shape [%s]" % (_shape(xs), _shape(out)))
    # x has the broadcast shape and g is smaller: PyTorch broadcasts g; a fused loop takes one shape
    raise RuntimeError("a gradient of shape [%s] cannot update a tensor of shape [%s] in a fused step"
                       % (_shape(gs), _shape(xs)))


def _check_dtype(x, name, dtype):
    if x.dtype.kind in "biu":
        raise RuntimeError("result type %s can't be cast to the desired output type %s"
                           % (_SCALAR_TYPE.get(dtype.name, dtype.name), _SCALAR_TYPE.get(x.dtype.name, x.dtype.name)))
    raise RuntimeError("expected dtype %s for `%s` but got dtype %s"
                       % (_C_TYPE.get(dtype.name, dtype.name), name, _C_TYPE.get(x.dtype.name, x.dtype.name)))


def _contiguous(a):
    return a.flags.c_contiguous if a.__class__ is np.ndarray else a.is_c_contiguous()


def _check_writable(x):
    """An update writes every element of ``x`` once: none may alias another (a broadcast view), and
    (NumPy) the memory must be writeable."""
    if not _contiguous(x) and any(s == 0 and n > 1 for s, n in zip(x.strides, x.shape)):
        raise RuntimeError(OVERLAP)
    if x.__class__ is np.ndarray and not x.flags.writeable:
        raise RuntimeError("cannot update a read-only array in place")


def prepare(kernel, p, args, xp):
    """Check the arrays of an update and return the loop's arguments, with the copies to write back.

    ``p`` is the parameter and ``args`` the loop's arguments after it, arrays of any shape and
    strides (``xp``: their backend module, kernels.cpu or kernels.cuda.backend). Every array the loop
    writes (the parameter, its state) must take the gradient's shape as PyTorch's in-place ops
    would, have the parameter's dtype and no overlapping elements; otherwise PyTorch's RuntimeError
    is raised and nothing is written. Returns ``(flat, back)``: the flat C-contiguous arguments
    (a buffer whose option is off: empty) and the (array, contiguous copy) pairs whose copy the loop
    updates in place of a strided array, to be copied back after the launch.
    """
    layout = _LAYOUT[kernel]
    grad = args[0]
    dtype = p.dtype
    gshape = grad.shape
    used = []
    if p.shape != gshape:
        _check_shape(p, grad)
    _check_writable(p)
    for pos, name, option in layout:
        x = args[pos]
        if option is not None and x.size == 0 and not args[option] > 0:
            continue
        if pos and x.shape != gshape:
            _check_shape(x, grad)
        if x.dtype != dtype:
            _check_dtype(x, name, dtype)
        if pos:
            _check_writable(x)
        used.append(pos)
    back = []
    flat_p = _flat(p, xp, back)
    flat = list(args)
    for pos, _, _ in layout:
        flat[pos] = _flat(args[pos], xp, back if pos else None) if pos in used else flat_p[:0]
    return [flat_p] + flat, back


def _flat(a, xp, back):
    """``a`` as a flat C-contiguous array: a view, or a copy, noted in ``back`` (None: read only)."""
    if not _contiguous(a):
        c = xp.copy(a)
        if back is not None:
            back.append((a, c))
        a = c
    return xp.reshape(a, (a.size,))


def _ready(kernel, p, args):
    """The loop's arguments as ``prepare`` gives them where every array already fits (NumPy arrays of the
    parameter's shape and dtype, C-contiguous, writable): the usual case, checked without building the
    error messages' inputs; None otherwise (``prepare`` then checks, copies or raises)."""
    shape, dtype = p.shape, p.dtype
    if p.__class__ is not np.ndarray or not (p.flags.c_contiguous and p.flags.writeable):
        return None
    flat = list(args)
    for pos, _, option in _LAYOUT[kernel]:
        x = args[pos]
        if option is not None and x.size == 0 and not args[option] > 0:
            if x.__class__ is not np.ndarray or x.dtype != dtype:
                return None
            continue  # an unused buffer: passed as it is (empty)
        if (x.__class__ is not np.ndarray or x.shape != shape or x.dtype != dtype or not x.flags.c_contiguous
                or pos and not x.flags.writeable):
            return None
        flat[pos] = x.reshape(-1)
    return [p.reshape(-1)] + flat


def update(kernel, p, *args):
    """Run the fused update ``kernel`` on the CPU over parameter ``p`` and the loop's arguments ``args``
    (checked and flattened by ``prepare``)."""
    flat, back = _ready(kernel, p, args), ()
    if flat is None:
        flat, back = prepare(kernel, p, args, _cpu)
    usual = USUAL.get(kernel)
    serial, parallel = KERNELS[usual and usual(*flat[1:]) or kernel]
    (parallel if p.size >= config.PARALLEL_THRESHOLD else serial)(*flat)
    for dst, src in back:
        np.copyto(dst, src)
