"""``jitgrad.func`` (``torch.func``): composable function transforms.

vmap (vmap.py, with the batching rules of batching.py), grad, grad_and_value, vjp, jvp, linearize, jacrev,
jacfwd, hessian (transforms.py), functional_call and stack_module_state (module.py).
"""
from .vmap import vmap

__all__ = ["vmap"]
