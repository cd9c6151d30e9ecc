"""Fused optimizer updates: one pass over a parameter's elements per step.

Each kernel reads the gradient once, updates the optimizer's state buffers and the parameter in
place, following PyTorch's update equations (``torch.optim`` single-tensor path) term by term.
Arrays are flat and C-contiguous, all of the parameter's dtype; a buffer an option does not use
is passed as an empty array. ``maximize`` negates the gradient before weight decay, as PyTorch does.

``update(kernel, p, *args)`` picks the serial or the ``prange`` build by size.
"""
import math

from numba import njit, prange

from . import config
from ._jit import twins


@njit(inline="always")
def _lerp(start, end, weight):
    """``torch.lerp``: the two-sided formula that keeps the result exact at weight 0 and 1."""
    if weight < 0.5:
        return start + weight * (end - start)
    return end - (end - start) * (1 - weight)


@njit(inline="always")
def _maximum(a, b):
    """``torch.maximum``: NaN in either input gives NaN."""
    if a != a:
        return a
    return a if a > b else b


def _sgd(p, grad, buf, lr, momentum, dampening, weight_decay, nesterov, maximize, first_step):
    """SGD: d = g + wd*p; b = d (first step) or momentum*b + (1-dampening)*d; p -= lr*(d + momentum*b | b)."""
    for i in prange(p.shape[0]):
        d = -grad[i] if maximize else grad[i]
        if weight_decay != 0:
            d = d + weight_decay * p[i]
        if momentum != 0:
            if first_step:
                b = d
            else:
                b = buf[i] * momentum + (1 - dampening) * d
            buf[i] = b
            d = d + momentum * b if nesterov else b
        p[i] = p[i] - lr * d


def _adam(p, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, lr, beta1, beta2, eps, weight_decay, decoupled, amsgrad,
          maximize, bias_correction1, bias_correction2_sqrt):
    """Adam / AdamW (decoupled weight decay); bias corrections are computed once per step by the caller."""
    step_size = lr / bias_correction1
    for i in prange(p.shape[0]):
        d = -grad[i] if maximize else grad[i]
        if weight_decay != 0:
            if decoupled:
                p[i] = p[i] * (1 - lr * weight_decay)
            else:
                d = d + weight_decay * p[i]
        m = _lerp(exp_avg[i], d, 1 - beta1)
        v = exp_avg_sq[i] * beta2 + (1 - beta2) * d * d
        exp_avg[i] = m
        exp_avg_sq[i] = v
        if amsgrad:
            v = _maximum(max_exp_avg_sq[i], v)
            max_exp_avg_sq[i] = v
        denom = math.sqrt(v) / bias_correction2_sqrt + eps
        p[i] = p[i] - step_size * (m / denom)


def _rmsprop(p, grad, square_avg, grad_avg, buf, lr, alpha, eps, weight_decay, momentum, centered, maximize):
    """RMSprop: v = alpha*v + (1-alpha)*d^2; avg = sqrt(v - gavg^2 | v) + eps; p -= lr * (buf | d/avg)."""
    for i in prange(p.shape[0]):
        d = -grad[i] if maximize else grad[i]
        if weight_decay != 0:
            d = d + weight_decay * p[i]
        v = square_avg[i] * alpha + (1 - alpha) * d * d
        square_avg[i] = v
        if centered:
            ga = _lerp(grad_avg[i], d, 1 - alpha)
            grad_avg[i] = ga
            v = v - ga * ga
        avg = (math.sqrt(v) if v >= 0 else math.nan) + eps
        if momentum > 0:
            b = buf[i] * momentum + d / avg
            buf[i] = b
            p[i] = p[i] - lr * b
        else:
            p[i] = p[i] - lr * (d / avg)


def _adagrad(p, grad, state_sum, clr, eps, weight_decay, maximize):
    """Adagrad: s += d^2; p -= clr * d / (sqrt(s) + eps), with clr = lr / (1 + (step-1)*lr_decay)."""
    for i in prange(p.shape[0]):
        d = -grad[i] if maximize else grad[i]
        if weight_decay != 0:
            d = d + weight_decay * p[i]
        s = state_sum[i] + d * d
        state_sum[i] = s
        p[i] = p[i] - clr * (d / (math.sqrt(s) + eps))


KERNELS = {name: twins(fn) for name, fn in
           (("sgd", _sgd), ("adam", _adam), ("rmsprop", _rmsprop), ("adagrad", _adagrad))}


def update(kernel, p, *args):
    """Run the fused update ``kernel`` over the flat parameter ``p`` (and its flat state ``args``)."""
    serial, parallel = KERNELS[kernel]
    (parallel if p.shape[0] >= config.PARALLEL_THRESHOLD else serial)(p, *args)
