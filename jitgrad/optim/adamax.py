"""Adamax (Adam with the infinity norm), with weight decay and maximize."""
from .optimizer import (Optimizer, advance, as_float, check_betas, check_lr, check_nonnegative, fused_update,
                        implementation_options, param_state, state_data)


class Adamax(Optimizer):
    """Adamax, PyTorch's update (t counts this parameter's steps)::

        g = -grad if maximize else grad;  g += weight_decay * p
        m = lerp(m, g, 1 - beta1);  u = max(beta2 * u, |g| + eps);  p -= lr / (1 - beta1^t) * m / u
    """
    _param_shaped_state = ("exp_avg", "exp_inf")

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, foreach=None, *, maximize=False,
                 differentiable=False, capturable=False):
        check_lr(lr)
        check_nonnegative(epsilon=eps)
        betas = check_betas(betas)
        check_nonnegative(weight_decay=weight_decay)
        options = implementation_options(foreach, None, capturable, differentiable)
        del options["fused"]
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, maximize=maximize, **options)
        super().__init__(params, defaults)

    def _update(self, p, param, grad, group):
        state = param_state(self.state[p], p, "exp_avg", "exp_inf")
        step = advance(state["step"])
        beta1, beta2 = (as_float(b) for b in group["betas"])
        fused_update("adamax", param, grad, state_data(state["exp_avg"]), state_data(state["exp_inf"]),
                     as_float(group["lr"]) / (1 - beta1 ** step), beta1, beta2, float(group["eps"]),
                     float(group["weight_decay"]), bool(group["maximize"]))
