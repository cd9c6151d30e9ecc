"""``jitgrad.func`` (``torch.func``): composable function transforms.

vmap (vmap.py, with the batching rules of batching.py), grad, grad_and_value, vjp, jvp, linearize, jacrev,
jacfwd, hessian (transforms.py), functional_call and stack_module_state (module.py).
"""
from .vmap import vmap
from .transforms import grad, grad_and_value, hessian, jacfwd, jacrev, jvp, linearize, vjp
from .module import functional_call, stack_module_state

__all__ = ["vmap", "grad", "grad_and_value", "vjp", "jvp", "linearize", "jacrev", "jacfwd", "hessian",
           "functional_call", "stack_module_state"]
