"""Rprop (resilient backpropagation): a step size per element, adapted by the gradient's sign."""
from .optimizer import (Optimizer, advance, as_float, check_lr, fused_update, implementation_options, new_state,
                        param_state, state_data)


class Rprop(Optimizer):
    """Rprop, PyTorch's update::

        g = -grad if maximize else grad;  eta = etaplus, etaminus or 1 as sign(g * prev) is +, - or 0
        step_size = clamp(step_size * eta, *step_sizes);  g = 0 where eta == etaminus
        p -= sign(g) * step_size;  prev = g
    """
    _param_shaped_state = ("prev", "step_size")

    def __init__(self, params, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), *, capturable=False, foreach=None,
                 maximize=False, differentiable=False):
        check_lr(lr)
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f"Invalid eta values: {etas[0]}, {etas[1]}")
        options = implementation_options(foreach, None, capturable, differentiable)
        del options["fused"]
        defaults = dict(lr=lr, etas=etas, step_sizes=step_sizes, maximize=maximize, **options)
        super().__init__(params, defaults)

    def _update(self, p, param, grad, group):
        state = self.state[p]
        if len(state) == 0:
            param_state(state, p, "prev")
            state["step_size"] = new_state(p, as_float(group["lr"]))
        advance(state["step"])
        etaminus, etaplus = (as_float(e) for e in group["etas"])
        lo, hi = (as_float(s) for s in group["step_sizes"])
        fused_update("rprop", param, grad, state_data(state["prev"]), state_data(state["step_size"]), etaminus,
                     etaplus, lo, hi, bool(group["maximize"]))
