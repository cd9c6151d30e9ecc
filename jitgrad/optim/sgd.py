"""SGD with momentum, dampening, weight decay, Nesterov momentum and maximize."""
from .optimizer import Optimizer, as_float, fused_update, implementation_options, new_state, state_data, unused


class SGD(Optimizer):
    """Stochastic gradient descent, PyTorch's update::

        g = -grad if maximize else grad;  g += weight_decay * p
        b = g on the first step, else momentum * b + (1 - dampening) * g
        g = g + momentum * b if nesterov else b;  p -= lr * g
    """
    _param_shaped_state = ("momentum_buffer",)

    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False, *, maximize=False,
                 foreach=None, differentiable=False, fused=None):
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        implementation_options(foreach, fused, False, differentiable)
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay, nesterov=nesterov,
                        maximize=maximize, foreach=foreach, differentiable=differentiable, fused=fused)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, defaults)

    def _update(self, p, param, grad, group):
        momentum = group["momentum"]
        buf, first = unused(param), False
        if momentum != 0:
            state = self.state[p]
            if "momentum_buffer" not in state:
                # The first step's b = g is the usual step's momentum * b + (1 - dampening) * g from a zero
                # buffer when dampening is 0: that step then takes the usual loop, one compile fewer.
                first = group["dampening"] != 0
                state["momentum_buffer"] = new_state(p, fill=None if first else 0)
            buf = state_data(state["momentum_buffer"])
        fused_update("sgd", param, grad, buf, as_float(group["lr"]), float(momentum), float(group["dampening"]),
                     float(group["weight_decay"]), bool(group["nesterov"]), bool(group["maximize"]), first)
