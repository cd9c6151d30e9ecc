"""CUDA twins of kernels/optim.py: the fused optimizer updates as grid-stride kernels.

The per-element math is kernels/optim.py's ``*_step`` functions, compiled unchanged as device
functions, and the kernels are kernels/optim.py's loop template over a grid-stride range, with the CPU
loops' names and signatures (flat C-contiguous device arrays of the parameter's dtype, an empty array
for an unused buffer, Python scalars).
``update(kernel, p, *args)`` launches one.
"""
import inspect

from numba import cuda

from .. import optim as cpu
from . import _launch as L

# The helpers and steps compiled as device functions, each seeing the ones compiled before it under the names
# it calls them by (helpers first).
_NAMESPACE = {"cuda": cuda}
for _name, _fn in cpu.device_functions():
    _NAMESPACE[_name] = L.device_jit(L.function_with_globals(_fn, **_NAMESPACE))
_STEPS_SOURCE = "".join(inspect.getsource(fn) for _, fn in cpu.device_functions())
# Each optimizer's own loop, from kernels/optim.py's template over a grid-stride range (the CPU's usual-step
# loops only help LLVM vectorize, so CUDA has none).
KERNELS = {name: L.generate(cpu.loop_source("{name}", optimizer, "range(cuda.grid(1), p.shape[0], cuda.gridsize(1))"),
                            "_" + name, _NAMESPACE, __file__, salt=_STEPS_SOURCE)
           for name, optimizer, _, _ in cpu.loops() if name == optimizer}


def update(kernel, p, *args):
    """Launch the fused update ``kernel`` over the flat device parameter ``p`` (asynchronous)."""
    n = p.shape[0]
    if n:
        L.launch(KERNELS[kernel], L.blocks_for(n), L.THREADS, p, *args)
