"""RAdam (Adam with a rectified adaptive learning rate), with decoupled weight decay and maximize."""
from .optimizer import (Optimizer, advance, as_float, check_betas, check_lr, check_nonnegative, fused_update,
                        implementation_options, param_state, state_data)


class RAdam(Optimizer):
    """RAdam, PyTorch's update (t counts this parameter's steps)::

        g = -grad if maximize else grad;  p *= 1 - lr * wd (decoupled)  or  g += wd * p
        m = lerp(m, g, 1 - beta1);  v = beta2 v + (1 - beta2) g^2
        rho_inf = 2 / (1 - beta2) - 1;  rho_t = rho_inf - 2 t beta2^t / (1 - beta2^t)
        p -= lr m / (1 - beta1^t) * (sqrt(1 - beta2^t) / (sqrt(v) + eps) * rect if rho_t > 5 else 1)
        with rect = sqrt((rho_t - 4)(rho_t - 2) rho_inf / ((rho_inf - 4)(rho_inf - 2) rho_t))
    """
    _param_shaped_state = ("exp_avg", "exp_avg_sq")

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, decoupled_weight_decay=False, *,
                 foreach=None, maximize=False, capturable=False, differentiable=False):
        check_lr(lr)
        check_nonnegative(epsilon=eps)
        betas = check_betas(betas)
        check_nonnegative(weight_decay=weight_decay)
        implementation_options(foreach, None, capturable, differentiable)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, maximize=maximize, foreach=foreach,
                        capturable=capturable, decoupled_weight_decay=decoupled_weight_decay,
                        differentiable=differentiable)
        super().__init__(params, defaults)

    def _update(self, p, param, grad, group):
        state = param_state(self.state[p], p, "exp_avg", "exp_avg_sq")
        step = advance(state["step"])
        beta1, beta2 = (as_float(b) for b in group["betas"])
        bias_correction2 = 1 - beta2 ** step
        rho_inf = 2 / (1 - beta2) - 1
        rho_t = rho_inf - 2 * step * beta2 ** step / bias_correction2
        rect = (((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)) ** 0.5
                if rho_t > 5.0 else 0.0)
        fused_update("radam", param, grad, state_data(state["exp_avg"]), state_data(state["exp_avg_sq"]),
                     as_float(group["lr"]), beta1, beta2, float(group["eps"]), float(group["weight_decay"]),
                     bool(group["decoupled_weight_decay"]), bool(group["maximize"]), 1 - beta1 ** step,
                     bias_correction2 ** 0.5, rect)
