"""Fused optimizer updates: one pass over a parameter's elements per step.

Each update reads the gradient once, updates the optimizer's state buffers and the parameter in
place, following PyTorch's update equations (``torch.optim`` single-tensor path) term by term.
The math of one element is written once, as the ``*_step`` functions below; the CPU loops here and
the CUDA kernels (kernels/cuda/optim.py, same names and signatures) apply them over flat,
C-contiguous arrays of the parameter's dtype. A buffer an option does not use is passed as an
empty array. ``maximize`` negates the gradient before weight decay, as PyTorch does.

``update(kernel, p, *args)`` runs a kernel, picking the serial or the ``prange`` build by size.
"""
import math

from numba import njit, prange

from . import config
from ._jit import twins


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


def adam_step(p, g, m, v, v_max, lr, beta1, beta2, eps, weight_decay, decoupled, amsgrad, maximize,
              bias_correction1, bias_correction2_sqrt):
    """(p, m, v, v_max) of Adam, or AdamW when ``decoupled`` (p *= 1 - lr*wd instead of g += wd*p)."""
    d = -g if maximize else g
    if weight_decay != 0:
        if decoupled:
            p = p * (1 - lr * weight_decay)
        else:
            d = d + weight_decay * p
    m = _lerp(m, d, 1 - beta1)
    v = v * beta2 + (1 - beta2) * d * d
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


STEPS = {"lerp": lerp, "maximum": maximum, "sgd": sgd_step, "adam": adam_step, "rmsprop": rmsprop_step,
         "adagrad": adagrad_step}

# CPU builds, inlined into the loops (the step functions find the helpers as _lerp, _maximum).
_lerp = njit(inline="always")(lerp)
_maximum = njit(inline="always")(maximum)
_sgd_step = njit(inline="always")(sgd_step)
_adam_step = njit(inline="always")(adam_step)
_rmsprop_step = njit(inline="always")(rmsprop_step)
_adagrad_step = njit(inline="always")(adagrad_step)


# ---------------------------------------------------------------- CPU loops
def _sgd(p, grad, buf, lr, momentum, dampening, weight_decay, nesterov, maximize, first_step):
    has_buf = buf.shape[0] != 0
    for i in prange(p.shape[0]):
        b = buf[i] if has_buf else 0.0
        p[i], b = _sgd_step(p[i], grad[i], b, lr, momentum, dampening, weight_decay, nesterov, maximize, first_step)
        if has_buf:
            buf[i] = b


def _adam(p, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, lr, beta1, beta2, eps, weight_decay, decoupled, amsgrad,
          maximize, bias_correction1, bias_correction2_sqrt):
    for i in prange(p.shape[0]):
        v_max = max_exp_avg_sq[i] if amsgrad else 0.0
        p[i], exp_avg[i], exp_avg_sq[i], v_max = _adam_step(
            p[i], grad[i], exp_avg[i], exp_avg_sq[i], v_max, lr, beta1, beta2, eps, weight_decay, decoupled, amsgrad,
            maximize, bias_correction1, bias_correction2_sqrt)
        if amsgrad:
            max_exp_avg_sq[i] = v_max


def _rmsprop(p, grad, square_avg, grad_avg, buf, lr, alpha, eps, weight_decay, momentum, centered, maximize):
    for i in prange(p.shape[0]):
        ga = grad_avg[i] if centered else 0.0
        b = buf[i] if momentum > 0 else 0.0
        p[i], square_avg[i], ga, b = _rmsprop_step(p[i], grad[i], square_avg[i], ga, b, lr, alpha, eps,
                                                   weight_decay, momentum, centered, maximize)
        if centered:
            grad_avg[i] = ga
        if momentum > 0:
            buf[i] = b


def _adagrad(p, grad, state_sum, clr, eps, weight_decay, maximize):
    for i in prange(p.shape[0]):
        p[i], state_sum[i] = _adagrad_step(p[i], grad[i], state_sum[i], clr, eps, weight_decay, maximize)


KERNELS = {name: twins(fn) for name, fn in
           (("sgd", _sgd), ("adam", _adam), ("rmsprop", _rmsprop), ("adagrad", _adagrad))}


def update(kernel, p, *args):
    """Run the fused update ``kernel`` over the flat parameter ``p`` (and its flat state ``args``)."""
    serial, parallel = KERNELS[kernel]
    (parallel if p.shape[0] >= config.PARALLEL_THRESHOLD else serial)(p, *args)
