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

# The helpers first: the step functions call them as _lerp, _maximum and _adam_moments.
_lerp = L.device_jit(cpu.lerp)
_maximum = L.device_jit(cpu.maximum)
_adam_moments = L.device_jit(L.function_with_globals(cpu.adam_moments, _lerp=_lerp))
(_sgd_step, _adam_step, _rmsprop_step, _adagrad_step, _adadelta_step, _adamax_step, _nadam_step,
 _radam_step) = (L.device_jit(L.function_with_globals(fn, _lerp=_lerp, _maximum=_maximum, _adam_moments=_adam_moments))
                 for fn in (cpu.sgd_step, cpu.adam_step, cpu.rmsprop_step, cpu.adagrad_step, cpu.adadelta_step,
                            cpu.adamax_step, cpu.nadam_step, cpu.radam_step))


_STEPS_SOURCE = "".join(inspect.getsource(fn) for fn in cpu.STEPS.values())
_NAMESPACE = {"cuda": cuda, "_sgd_step": _sgd_step, "_adam_step": _adam_step, "_rmsprop_step": _rmsprop_step,
              "_adagrad_step": _adagrad_step, "_adadelta_step": _adadelta_step, "_adamax_step": _adamax_step,
              "_nadam_step": _nadam_step, "_radam_step": _radam_step}
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
