"""RMSprop, plain or centered, with momentum, weight decay and maximize."""
from .._tensor import Tensor
from .optimizer import Optimizer, advance, as_float, flat, fused_update, new_state, step_state, unused


class RMSprop(Optimizer):
    """RMSprop, PyTorch's update::

        g = -grad if maximize else grad;  g += weight_decay * p
        v = alpha * v + (1 - alpha) * g * g
        avg = sqrt(v - gavg^2) + eps with gavg = lerp(gavg, g, 1 - alpha) (centered), else sqrt(v) + eps
        b = momentum * b + g / avg; p -= lr * b   (momentum > 0)   or   p -= lr * g / avg
    """
    _param_shaped_state = ("square_avg", "momentum_buffer", "grad_avg")

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0, centered=False, *,
                 maximize=False):
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= momentum:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not 0.0 <= alpha:
            raise ValueError(f"Invalid alpha value: {alpha}")
        defaults = dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps, centered=centered, weight_decay=weight_decay,
                        maximize=maximize)
        super().__init__(params, defaults)

    def _update(self, p, param, grad, group):
        state = self.state[p]
        if len(state) == 0:
            state["step"] = step_state()
            state["square_avg"] = new_state(p)
        momentum, centered = float(group["momentum"]), bool(group["centered"])
        if momentum > 0 and "momentum_buffer" not in state:
            state["momentum_buffer"] = new_state(p)
        if centered and "grad_avg" not in state:
            state["grad_avg"] = new_state(p)
        advance(state["step"])
        fused_update("rmsprop", param, grad, flat(state["square_avg"]),
                     flat(state["grad_avg"]) if centered else unused(param),
                     flat(state["momentum_buffer"]) if momentum > 0 else unused(param),
                     as_float(group["lr"]), float(group["alpha"]), float(group["eps"]),
                     float(group["weight_decay"]), momentum, centered, bool(group["maximize"]))
