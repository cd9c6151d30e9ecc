"""Adam and AdamW (decoupled weight decay), with amsgrad and maximize."""
from .._tensor import Tensor
from .optimizer import (Optimizer, advance, as_float, check_betas, check_lr, check_nonnegative, fused_update,
                        implementation_options, new_state, param_state, state_data, unused)


class Adam(Optimizer):
    """Adam, PyTorch's update (t counts this parameter's steps)::

        g = -grad if maximize else grad
        p *= 1 - lr * weight_decay  (decoupled)   or   g += weight_decay * p
        m = lerp(m, g, 1 - beta1);  v = beta2 * v + (1 - beta2) * g * g;  v_max = max(v_max, v) (amsgrad)
        p -= lr / (1 - beta1^t) * m / (sqrt(v or v_max) / sqrt(1 - beta2^t) + eps)
    """
    _param_shaped_state = ("exp_avg", "exp_avg_sq", "max_exp_avg_sq")

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False, *, foreach=None,
                 maximize=False, capturable=False, differentiable=False, fused=None, decoupled_weight_decay=False):
        check_lr(lr)
        check_nonnegative(epsilon=eps)
        floats = check_betas(betas)
        check_nonnegative(weight_decay=weight_decay)
        if not (all(isinstance(b, float) for b in betas) or all(isinstance(b, Tensor) for b in betas)):
            raise ValueError("betas must be either both floats or both Tensors")
        betas = floats
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad, maximize=maximize,
                        **implementation_options(foreach, fused, capturable, differentiable),
                        decoupled_weight_decay=decoupled_weight_decay)
        super().__init__(params, defaults)

    def _update(self, p, param, grad, group):
        amsgrad_buffer = ("max_exp_avg_sq",) if group["amsgrad"] else ()
        state = param_state(self.state[p], p, "exp_avg", "exp_avg_sq", *amsgrad_buffer)
        amsgrad = bool(group["amsgrad"])
        if amsgrad and "max_exp_avg_sq" not in state:
            state["max_exp_avg_sq"] = new_state(p)
        step = advance(state["step"])
        beta1, beta2 = (as_float(b) for b in group["betas"])
        fused_update("adam", param, grad, state_data(state["exp_avg"]), state_data(state["exp_avg_sq"]),
                     state_data(state["max_exp_avg_sq"]) if amsgrad else unused(param),
                     as_float(group["lr"]), beta1, beta2, float(group["eps"]), float(group["weight_decay"]),
                     bool(group["decoupled_weight_decay"]), amsgrad, bool(group["maximize"]),
                     1 - beta1 ** step, (1 - beta2 ** step) ** 0.5)


class AdamW(Adam):
    """Adam with decoupled weight decay: ``p *= 1 - lr * weight_decay`` before the Adam step."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False, *,
                 maximize=False, foreach=None, capturable=False, differentiable=False, fused=None):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach, maximize=maximize,
                         capturable=capturable, differentiable=differentiable, fused=fused, decoupled_weight_decay=True)
