"""How kernels are compiled: one decorator, so cache, error model and fastmath are set once."""
import types

from numba import njit

from . import config

# Every compiled kernel, for jitgrad.jit_stats().
DISPATCHERS = []


def compiled(fn, parallel=False, name=None):
    """Compile ``fn`` lazily with numba (on-disk cache, NumPy error model, safe fastmath).

    ``name`` gives the compiled copy its own qualified name, so that a serial and a parallel
    build of the same Python function keep separate on-disk cache entries.
    """
    if name is not None:
        code = fn.__code__.replace(co_name=name, co_qualname=name)
        fn = types.FunctionType(code, fn.__globals__, name, fn.__defaults__, fn.__closure__)
    d = njit(cache=config.CACHE, parallel=parallel, error_model="numpy", fastmath=config.FASTMATH, nogil=True)(fn)
    DISPATCHERS.append(d)
    return d


def twins(fn):
    """Serial and parallel builds of ``fn`` (whose loops use prange)."""
    return compiled(fn, name=fn.__name__ + "_ser"), compiled(fn, parallel=True, name=fn.__name__ + "_par")
