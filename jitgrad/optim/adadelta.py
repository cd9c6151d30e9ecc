"""Adadelta, with weight decay and maximize."""
from .optimizer import (Optimizer, advance, as_float, check_lr, check_nonnegative, fused_update,
                        implementation_options, param_state, state_data)


class Adadelta(Optimizer):
    """Adadelta, PyTorch's update::

        g = -grad if maximize else grad;  g += weight_decay * p
        v = rho * v + (1 - rho) * g * g;  delta = sqrt(u + eps) / sqrt(v + eps) * g
        u = rho * u + (1 - rho) * delta * delta;  p -= lr * delta
    """
    _param_shaped_state = ("square_avg", "acc_delta")

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, foreach=None, *, capturable=False,
                 maximize=False, differentiable=False):
        check_lr(lr)
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        check_nonnegative(epsilon=eps, weight_decay=weight_decay)
        options = implementation_options(foreach, None, capturable, differentiable)
        del options["fused"]
        defaults = dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize, **options)
        super().__init__(params, defaults)

    def _update(self, p, param, grad, group):
        state = param_state(self.state[p], p, "square_avg", "acc_delta")
        advance(state["step"])
        fused_update("adadelta", param, grad, state_data(state["square_avg"]), state_data(state["acc_delta"]),
                     as_float(group["lr"]), float(group["rho"]), float(group["eps"]), float(group["weight_decay"]),
                     bool(group["maximize"]))
