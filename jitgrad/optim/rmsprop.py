"""RMSprop, plain or centered, with momentum, weight decay and maximize."""
from .optimizer import (Optimizer, advance, as_float, check_lr, check_nonnegative, fused_update,
                        implementation_options, new_state, param_state, state_data, unused)


class RMSprop(Optimizer):
    """RMSprop, PyTorch's update::

        g = -grad if maximize else grad;  g += weight_decay * p
        v = alpha * v + (1 - alpha) * g * g
        avg = sqrt(v - gavg^2) + eps with gavg = lerp(gavg, g, 1 - alpha) (centered), else sqrt(v) + eps
        b = momentum * b + g / avg; p -= lr * b   (momentum > 0)   or   p -= lr * g / avg
    """
    _param_shaped_state = ("square_avg", "momentum_buffer", "grad_avg")

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0, centered=False,
                 capturable=False, foreach=None, maximize=False, differentiable=False):
        check_lr(lr)
        check_nonnegative(epsilon=eps, momentum=momentum, weight_decay=weight_decay, alpha=alpha)
        implementation_options(foreach, None, capturable, differentiable)
        defaults = dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps, centered=centered, weight_decay=weight_decay,
                        capturable=capturable, foreach=foreach, maximize=maximize, differentiable=differentiable)
        super().__init__(params, defaults)

    def _update(self, p, param, grad, group):
        state = param_state(self.state[p], p, "square_avg")
        momentum, centered = float(group["momentum"]), bool(group["centered"])
        if momentum > 0 and "momentum_buffer" not in state:
            state["momentum_buffer"] = new_state(p)
        if centered and "grad_avg" not in state:
            state["grad_avg"] = new_state(p)
        advance(state["step"])
        fused_update("rmsprop", param, grad, state_data(state["square_avg"]),
                     state_data(state["grad_avg"]) if centered else unused(param),
                     state_data(state["momentum_buffer"]) if momentum > 0 else unused(param),
                     as_float(group["lr"]), float(group["alpha"]), float(group["eps"]),
                     float(group["weight_decay"]), momentum, centered, bool(group["maximize"]))
