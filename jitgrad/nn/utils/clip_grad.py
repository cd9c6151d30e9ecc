"""Gradient clipping, in place on each parameter's .grad (no graph is recorded)."""
import math

from ... import _factories as Fa
from ..._grad_mode import no_grad
from ..._tensor import Tensor
from ...ops.shape import stack


def _grads(parameters):
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    return [p.grad for p in parameters if p.grad is not None]


@no_grad()
def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Scale all gradients together so that their joint ``norm_type``-norm is at most ``max_norm``.

    Returns the total norm before clipping (a 0-d tensor).
    """
    grads = _grads(parameters)
    norm_type = float(norm_type)
    if not grads:
        return Fa.tensor(0.0)
    norms = [g.abs().max() if norm_type == math.inf else g.norm(norm_type) for g in grads]
    total = stack(norms).max() if norm_type == math.inf else stack(norms).norm(norm_type)
    if error_if_nonfinite and not math.isfinite(total.item()):
        raise RuntimeError("The total norm of order %s for gradients from `parameters` is non-finite, so it cannot be "
                           "clipped. To disable this error and scale the gradients by the non-finite norm anyway, set "
                           "`error_if_nonfinite=False`" % norm_type)
    coef = float(max_norm) / (total.item() + 1e-6)
    if coef < 1.0:
        for g in grads:
            g.mul_(coef)
    return total


@no_grad()
def clip_grad_value_(parameters, clip_value, foreach=None):
    """Clamp every gradient element into [-clip_value, clip_value]."""
    clip_value = float(clip_value)
    for g in _grads(parameters):
        g.clamp_(-clip_value, clip_value)
