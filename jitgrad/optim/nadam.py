"""NAdam (Adam with Nesterov momentum and a momentum schedule), with decoupled weight decay and maximize."""
import numpy as np

from .._tensor import Tensor
from .optimizer import (Optimizer, advance, as_float, check_betas, check_lr, check_nonnegative, fused_update,
                        implementation_options, new_state, state_data, step_state)


class NAdam(Optimizer):
    """NAdam, PyTorch's update (t counts this parameter's steps)::

        g = -grad if maximize else grad;  p *= 1 - lr * wd (decoupled)  or  g += wd * p
        mu_t = beta1 (1 - 0.96^(t momentum_decay) / 2);  mu_product *= mu_t  (a float32 tensor, as PyTorch)
        m = lerp(m, g, 1 - beta1);  v = beta2 v + (1 - beta2) g^2;  denom = sqrt(v / (1 - beta2^t)) + eps
        p -= lr (1 - mu_t) / (1 - mu_product) g / denom + lr mu_{t+1} / (1 - mu_product mu_{t+1}) m / denom
    """
    _param_shaped_state = ("exp_avg", "exp_avg_sq")

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, momentum_decay=4e-3,
                 decoupled_weight_decay=False, *, foreach=None, maximize=False, capturable=False, differentiable=False):
        check_lr(lr)
        check_nonnegative(epsilon=eps)
        betas = check_betas(betas)
        check_nonnegative(weight_decay=weight_decay, momentum_decay=momentum_decay)
        options = implementation_options(foreach, None, capturable, differentiable)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, momentum_decay=momentum_decay,
                        decoupled_weight_decay=decoupled_weight_decay, maximize=maximize, foreach=foreach,
                        capturable=capturable, differentiable=options["differentiable"])
        super().__init__(params, defaults)

    def _update(self, p, param, grad, group):
        state = self.state[p]
        if len(state) == 0:
            state["step"] = step_state()
            state["mu_product"] = Tensor._wrap(np.ones((), dtype=np.float32))
            state["exp_avg"] = new_state(p)
            state["exp_avg_sq"] = new_state(p)
        step = advance(state["step"])
        lr = as_float(group["lr"])
        beta1, beta2 = (as_float(b) for b in group["betas"])
        decay = float(group["momentum_decay"])
        mu = beta1 * (1.0 - 0.5 * 0.96 ** (step * decay))
        mu_next = beta1 * (1.0 - 0.5 * 0.96 ** ((step + 1) * decay))
        product = state["mu_product"]
        product._data *= mu  # in float32, as PyTorch's state tensor
        product._vc[0] += 1
        mu_product = float(product._data)
        fused_update("nadam", param, grad, state_data(state["exp_avg"]), state_data(state["exp_avg_sq"]), lr, beta1,
                     beta2, float(group["eps"]), float(group["weight_decay"]), bool(group["decoupled_weight_decay"]),
                     bool(group["maximize"]), 1 - beta2 ** step, -lr * (1.0 - mu) / (1.0 - mu_product),
                     -lr * mu_next / (1.0 - mu_product * mu_next))
