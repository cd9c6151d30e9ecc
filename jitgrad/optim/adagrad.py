"""Adagrad with learning-rate decay, weight decay and maximize."""
from .optimizer import (Optimizer, advance, as_float, check_lr, check_nonnegative,
                        fused_update, implementation_options, new_state, state_data, step_state)


class Adagrad(Optimizer):
    """Adagrad, PyTorch's update (t counts this parameter's steps)::

        g = -grad if maximize else grad;  g += weight_decay * p
        s += g * g;  p -= lr / (1 + (t - 1) * lr_decay) * g / (sqrt(s) + eps)
    """
    _param_shaped_state = ("sum",)

    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0, eps=1e-10,
                 foreach=None, *, maximize=False, differentiable=False, fused=None):
        check_lr(lr)
        check_nonnegative(lr_decay=lr_decay, weight_decay=weight_decay,
                          initial_accumulator_value=initial_accumulator_value, epsilon=eps)
        defaults = dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                        initial_accumulator_value=initial_accumulator_value, foreach=foreach, maximize=maximize,
                        differentiable=differentiable, fused=fused)
        implementation_options(foreach, fused, False, differentiable)
        super().__init__(params, defaults)
        # PyTorch creates Adagrad's state up front (the accumulator starts at initial_accumulator_value).
        for group in self.param_groups:
            for p in group["params"]:
                self._init_state(p, group)

    def _init_state(self, p, group):
        state = self.state[p]
        state["step"] = step_state()
        state["sum"] = new_state(p, fill=group["initial_accumulator_value"])

    def _update(self, p, param, grad, group):
        state = self.state[p]
        if "sum" not in state:  # a group added after construction
            self._init_state(p, group)
        step = advance(state["step"])
        clr = as_float(group["lr"]) / (1 + (step - 1) * group["lr_decay"])
        fused_update("adagrad", param, grad, state_data(state["sum"]), clr, float(group["eps"]),
                     float(group["weight_decay"]), bool(group["maximize"]))
