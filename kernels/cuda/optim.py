"""CUDA twins of kernels/optim.py: the fused optimizer updates as grid-stride kernels.

The per-element math is kernels/optim.py's ``*_step`` functions, compiled unchanged as device
functions; the kernels below have the CPU loops' names and signatures (flat C-contiguous device
arrays of the parameter's dtype, an empty array for an unused buffer, Python scalars).
``update(kernel, p, *args)`` launches one.
"""
from numba import cuda

from .. import optim as cpu
from . import _launch as L

# The helpers first: the step functions call them as _lerp, _maximum and _adam_moments.
_lerp = L.device_jit(cpu.lerp)
_maximum = L.device_jit(cpu.maximum)
_adam_moments = L.device_jit(L.function_with_globals(cpu.adam_moments, _lerp=_lerp))
(_sgd_step, _adam_step, _rmsprop_step, _adagrad_step, _adadelta_step, _adamax_step, _nadam_step,
 _radam_step) = (L.device_jit(L.function_with_globals(fn, _lerp=_lerp, _maximum=_maximum, _adam_moments=_adam_moments))
                 for fn in (cpu.sgd_step, cpu.adam_step, cpu.rmsprop_step, cpu.adagrad_step, cpu.adadelta_step,
                            cpu.adamax_step, cpu.nadam_step, cpu.radam_step))


@L.jit
def _sgd(p, grad, buf, lr, momentum, dampening, weight_decay, nesterov, maximize, first_step):
    has_buf = buf.shape[0] != 0
    for i in range(cuda.grid(1), p.shape[0], cuda.gridsize(1)):
        b = buf[i] if has_buf else 0.0
        p[i], b = _sgd_step(p[i], grad[i], b, lr, momentum, dampening, weight_decay, nesterov, maximize, first_step)
        if has_buf:
            buf[i] = b


@L.jit
def _adam(p, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, lr, beta1, beta2, eps, weight_decay, decoupled, amsgrad,
          maximize, bias_correction1, bias_correction2_sqrt):
    for i in range(cuda.grid(1), p.shape[0], cuda.gridsize(1)):
        v_max = max_exp_avg_sq[i] if amsgrad else 0.0
        p[i], exp_avg[i], exp_avg_sq[i], v_max = _adam_step(
            p[i], grad[i], exp_avg[i], exp_avg_sq[i], v_max, lr, beta1, beta2, eps, weight_decay, decoupled, amsgrad,
            maximize, bias_correction1, bias_correction2_sqrt)
        if amsgrad:
            max_exp_avg_sq[i] = v_max


@L.jit
def _rmsprop(p, grad, square_avg, grad_avg, buf, lr, alpha, eps, weight_decay, momentum, centered, maximize):
    for i in range(cuda.grid(1), p.shape[0], cuda.gridsize(1)):
        ga = grad_avg[i] if centered else 0.0
        b = buf[i] if momentum > 0 else 0.0
        p[i], square_avg[i], ga, b = _rmsprop_step(p[i], grad[i], square_avg[i], ga, b, lr, alpha, eps,
                                                   weight_decay, momentum, centered, maximize)
        if centered:
            grad_avg[i] = ga
        if momentum > 0:
            buf[i] = b


@L.jit
def _adagrad(p, grad, state_sum, clr, eps, weight_decay, maximize):
    for i in range(cuda.grid(1), p.shape[0], cuda.gridsize(1)):
        p[i], state_sum[i] = _adagrad_step(p[i], grad[i], state_sum[i], clr, eps, weight_decay, maximize)


@L.jit
def _adadelta(p, grad, square_avg, acc_delta, lr, rho, eps, weight_decay, maximize):
    for i in range(cuda.grid(1), p.shape[0], cuda.gridsize(1)):
        p[i], square_avg[i], acc_delta[i] = _adadelta_step(p[i], grad[i], square_avg[i], acc_delta[i], lr, rho, eps,
                                                           weight_decay, maximize)


@L.jit
def _adamax(p, grad, exp_avg, exp_inf, clr, beta1, beta2, eps, weight_decay, maximize):
    for i in range(cuda.grid(1), p.shape[0], cuda.gridsize(1)):
        p[i], exp_avg[i], exp_inf[i] = _adamax_step(p[i], grad[i], exp_avg[i], exp_inf[i], clr, beta1, beta2, eps,
                                                    weight_decay, maximize)


@L.jit
def _nadam(p, grad, exp_avg, exp_avg_sq, lr, beta1, beta2, eps, weight_decay, decoupled, maximize, bias_correction2,
           grad_coef, avg_coef):
    for i in range(cuda.grid(1), p.shape[0], cuda.gridsize(1)):
        p[i], exp_avg[i], exp_avg_sq[i] = _nadam_step(p[i], grad[i], exp_avg[i], exp_avg_sq[i], lr, beta1, beta2, eps,
                                                      weight_decay, decoupled, maximize, bias_correction2, grad_coef,
                                                      avg_coef)


@L.jit
def _radam(p, grad, exp_avg, exp_avg_sq, lr, beta1, beta2, eps, weight_decay, decoupled, maximize, bias_correction1,
           bias_correction2_sqrt, rect):
    for i in range(cuda.grid(1), p.shape[0], cuda.gridsize(1)):
        p[i], exp_avg[i], exp_avg_sq[i] = _radam_step(p[i], grad[i], exp_avg[i], exp_avg_sq[i], lr, beta1, beta2, eps,
                                                      weight_decay, decoupled, maximize, bias_correction1,
                                                      bias_correction2_sqrt, rect)


KERNELS = {"sgd": _sgd, "adam": _adam, "rmsprop": _rmsprop, "adagrad": _adagrad, "adadelta": _adadelta,
           "adamax": _adamax, "nadam": _nadam, "radam": _radam}


def update(kernel, p, *args):
    """Launch the fused update ``kernel`` over the flat device parameter ``p`` (asynchronous)."""
    n = p.shape[0]
    if n:
        L.launch(KERNELS[kernel], L.blocks_for(n), L.THREADS, p, *args)
