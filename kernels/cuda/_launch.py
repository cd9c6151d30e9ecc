"""How CUDA kernels are compiled, sized and launched: one place for every module of kernels.cuda.

Every kernel module allocates with ``empty``, copies host data with ``to_device`` and launches with
``launch`` (always through this module, never by importing the names), so a test can swap them to
record launches instead of running them and compile each recorded kernel to PTX.

Under numba's CUDA simulator (NUMBA_ENABLE_CUDASIM=1) every simulated thread is a Python thread,
so blocks and grids are kept tiny there; the kernels are the same, only the launch shapes shrink.
"""
import hashlib
import numbers
import types

import numpy as np
from numba import cuda

from .. import config

SIM = bool(cuda.config.ENABLE_CUDASIM)


# Threads per block of every 1-D and 2-D kernel: a power of two, at most 1024.
THREADS = 8 if SIM else 256
# Column tile of the (A, R, B) reductions: up to this many neighbouring columns b share a block
# (coalesced loads when B > 1); the rest of the block's threads split the reduced axis R.
REDUCE_TILE = 2 if SIM else 32
# Grid-stride kernels launch at most this many blocks per multiprocessor.
BLOCKS_PER_SM = 32
# A long reduction is split over R into chunks until about this many blocks per SM are busy.
REDUCE_BLOCKS_PER_SM = 8
# Minimum elements of R per thread before a reduction is split across blocks.
REDUCE_MIN_PER_THREAD = 1 if SIM else 16
# matmul tiling: (TX, TY) threads per block, each computing RM x RN outputs, K step BK.
MATMUL_TILE = (4, 4, 2, 2, 4) if SIM else (16, 16, 4, 4, 16)
# Grid caps; None: the per-SM figures above times the device's multiprocessor count.
MAX_BLOCKS = 4 if SIM else None
REDUCE_BLOCKS = 3 if SIM else None


def _sm_count():
    return cuda.get_current_device().MULTIPROCESSOR_COUNT


def max_blocks():
    global MAX_BLOCKS
    if MAX_BLOCKS is None:
        MAX_BLOCKS = _sm_count() * BLOCKS_PER_SM
    return MAX_BLOCKS


def reduce_blocks():
    global REDUCE_BLOCKS
    if REDUCE_BLOCKS is None:
        REDUCE_BLOCKS = _sm_count() * REDUCE_BLOCKS_PER_SM
    return REDUCE_BLOCKS


def blocks_for(n, per_block=THREADS):
    """Grid size of a grid-stride kernel over ``n`` items."""
    return max(1, min(-(-n // per_block), max_blocks()))


def jit(fn, tag=None):
    """Compile ``fn`` as a kernel, lazily, with numba's on-disk cache.

    ``tag`` names what the kernel bakes in from module constants (numba freezes globals at
    compile time): it joins the compiled name, so a changed constant is a different cache entry.
    """
    if tag is not None:
        name = "%s_%s" % (fn.__name__, tag)
        code = fn.__code__.replace(co_name=name, co_qualname=name)
        fn = types.FunctionType(code, fn.__globals__, name, fn.__defaults__, fn.__closure__)
    return cuda.jit(cache=config.CACHE)(fn)


def device_jit(fn):
    return cuda.jit(device=True)(fn)


def generate(template, name, namespace, filename, salt="", **fields):
    """Compile the kernel that ``template`` (Python source with ``{name}`` and ``fields``) defines.

    The source runs in ``namespace`` with ``filename`` (the generating module) as its file, which
    numba's on-disk cache keys on; the compiled name therefore carries a hash of the source and of
    ``salt`` (the source of what the kernel inlines), so the cache never serves a stale build.
    """
    digest = hashlib.sha1((template.format(name=name, **fields) + salt).encode()).hexdigest()[:10]
    unique = "%s_%s" % (name, digest)
    exec(compile(template.format(name=unique, **fields), filename, "exec"), namespace)
    return jit(namespace[unique])


def function_with_globals(fn, **replace):
    """A copy of plain function ``fn`` whose globals have the names in ``replace`` swapped."""
    return types.FunctionType(fn.__code__, {**fn.__globals__, **replace}, fn.__name__, fn.__defaults__,
                              fn.__closure__)


# --------------------------------------------------------------- array helpers (swappable in tests)
def empty(shape, dtype):
    return cuda.device_array(shape, dtype)


def to_device(host_array):
    return cuda.to_device(host_array)


def launch(kernel, grid, block, *args):
    kernel[grid, block](*args)


def is_array(a):
    """Whether kernel argument ``a`` is an array (not a Python or NumPy scalar)."""
    return not isinstance(a, (numbers.Number, np.generic))


def is_device_array(a):
    return getattr(a, "__cuda_ndarray__", False)


def is_c_contiguous(a):
    return a.flags["C_CONTIGUOUS"]
