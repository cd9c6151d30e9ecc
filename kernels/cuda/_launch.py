"""How CUDA kernels are compiled, sized and launched: one place for every module of kernels.cuda.

Every kernel module allocates with ``empty``, copies host data with ``to_device`` and launches with
``launch`` (always through this module, never by importing the names), so a test can swap them to
record launches instead of running them and compile each recorded kernel to PTX.

Under numba's CUDA simulator (NUMBA_ENABLE_CUDASIM=1) every simulated thread is a Python thread,
so blocks and grids are kept tiny there; the kernels are the same, only the launch shapes shrink.
"""
import ctypes
import hashlib
import math
import numbers
import threading
import types

import numpy as np
from numba import cuda

from .. import config

SIM = bool(cuda.config.ENABLE_CUDASIM)
_core = None  # cuda.core, imported at the first direct launch


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
    """An uninitialised C-contiguous device array.

    With the caching pool installed (kernels.cuda.memory), on the thread that created the context, the
    array is built on a pool block directly: numba's ``device_array`` checks the CUDA context twice a call.
    """
    if _POOL and threading.get_ident() == _POOL[2]:
        shape = (int(shape),) if isinstance(shape, numbers.Integral) else tuple(map(int, shape))
        dtype = np.dtype(dtype)
        size = math.prod(shape)
        if size:
            return _POOL[1](shape, c_strides(shape, dtype.itemsize), dtype, gpu_data=_POOL[0](size * dtype.itemsize))
    return cuda.device_array(shape, dtype)


def c_strides(shape, itemsize):
    """The strides of a C-contiguous array of ``shape``."""
    strides, step = [], itemsize
    for n in reversed(shape):
        strides.append(step)
        step *= n
    return tuple(reversed(strides))


_POOL = []  # (allocate, array class, thread) while the caching pool serves the current context
_PLACEHOLDERS = {}  # (dtype, rank) -> a one-element array, while the pool serves the context


def placeholder(dtype, ndim):
    """A one-element array of ``dtype`` and rank ``ndim`` for a kernel argument that a launch leaves unread.
    While the caching pool serves the context (on its thread) one is kept per (dtype, rank): every
    allocation costs host time (a reduction's two unused partial-state arrays were two of its three)."""
    key = (np.dtype(dtype), ndim)
    a = _PLACEHOLDERS.get(key)
    if a is None:
        a = empty((1,) * ndim, dtype)
        if _POOL and threading.get_ident() == _POOL[2]:
            _PLACEHOLDERS[key] = a
    return a


def use_pool(allocate, array_type):
    """Called by kernels.cuda.memory when its pool starts serving a new CUDA context."""
    _POOL[:] = [allocate, array_type, threading.get_ident()]


def forget_context():
    """Called by kernels.cuda.memory when the CUDA context is reset: its pool, kernel handles and stream go."""
    _POOL.clear()
    _PLACEHOLDERS.clear()
    _BOUND.clear()
    _STREAM.clear()
    _THREAD[0] = None


def to_device(host_array):
    return cuda.to_device(host_array)


def launch(kernel, grid, block, *args):
    """Run ``kernel`` on ``grid`` x ``block`` threads (asynchronously, on the default stream).

    The first launch of each (kernel, argument types) goes through numba's dispatcher, which compiles
    or loads the kernel; later ones pack the arguments themselves and call the driver through cuda.core:
    numba's own path rebuilds a stream object and a CUDA-array-interface view of every array on each
    launch: 32 us for a kernel of three arrays on an H200, against 9 us here.
    """
    if SIM:
        kernel[grid, block](*args)
        return
    key = (kernel,) + tuple(map(_argument_key, args))
    bound = _BOUND.get(key) if _THREAD[0] in (None, threading.get_ident()) else False
    if not bound:
        args = tuple(a.array.reshape(a.size) if a.__class__ is Flat else a for a in args)
        kernel[grid, block](*args)
        if bound is None:
            _BOUND[key] = _bind(kernel, args)
        return
    cufunc, packers = bound
    params = []
    for pack, a in zip(packers, args):
        pack(a, params)
    config = _CONFIGS.get((grid, block))
    if config is None:
        config = _CONFIGS[grid, block] = _core.LaunchConfig(grid=grid, block=block, shmem_size=0)
    _core.launch(_STREAM[0], config, cufunc, *params)


class Flat:
    """A C-contiguous device array passed to a kernel as its 1-D view, without building that view:
    numba's device arrays cost microseconds each (see ``flat``)."""
    __slots__ = ("array", "size", "dtype", "gpu_data", "shape", "strides")
    __cuda_ndarray__ = True
    ndim = 1
    flags = {"C_CONTIGUOUS": True, "F_CONTIGUOUS": True}

    def __init__(self, array):
        self.array, self.size, self.dtype, self.gpu_data = array, array.size, array.dtype, array.gpu_data
        self.shape, self.strides = (array.size,), (array.dtype.itemsize,)

    def is_c_contiguous(self):
        return True

    is_f_contiguous = is_c_contiguous


def flat(a):
    """C-contiguous array ``a`` as a 1-D kernel argument: a Flat for a numba device array on a GPU, else
    its 1-D view (the simulator's arrays, NumPy arrays standing in for device arrays in PTX sweeps)."""
    return Flat(a) if not SIM and getattr(a, "__cuda_ndarray__", False) else a.reshape(a.size)


# -------------------------------------------------------------- the direct launch path
_BOUND = {}    # (kernel, argument keys) -> (cuda.core kernel, packer per argument), or False
_CONFIGS = {}  # (grid, block) -> cuda.core LaunchConfig
_STREAM = []   # the default stream, as cuda.core names it
_THREAD = [None]  # the thread of the first direct launch: others (whose context numba makes current) go through numba


def _argument_key(a):
    """What selects a compiled overload: an array's dtype, rank and layout; a scalar's type. None
    for what numba alone passes (host arrays, other libraries' device arrays, records)."""
    if is_device_array(a):
        return a.dtype, a.ndim, _layout(a)
    if isinstance(a, tuple):
        if all(v.__class__ is int for v in a):  # shapes and strides: the common tuple
            return (tuple,) + (int,) * len(a)
        keys = tuple(map(_argument_key, a))
        return None if None in keys else (tuple,) + keys
    if isinstance(a, np.generic):
        return a.dtype
    return type(a) if isinstance(a, (bool, int, float)) else None


def _layout(a):
    """numba's layout of a device array: 'C' or 'F' when contiguous and not broadcast, else 'A'."""
    if a.size and 0 in a.strides:
        return "A"
    return "C" if is_c_contiguous(a) else "F" if is_f_contiguous(a) else "A"


def _bind(kernel, args):
    """The compiled overload that numba's dispatcher just launched for ``args``, and its packers."""
    global _core
    from cuda import core
    from numba.cuda.cudadrv import driver
    _core = core
    if not _STREAM:
        _STREAM.append(driver._to_core_stream(0))
        _THREAD[0] = threading.get_ident()
    if any(_argument_key(a) is None for a in args):
        return False
    overload = kernel.overloads.get(tuple(kernel.typeof_pyval(a) for a in args))
    if overload is None:
        return False
    try:
        packers = [_packer(t) for t in overload.argument_types]
    except NotImplementedError:
        return False
    return overload._codelibrary.get_cufunc().kernel, packers


def _packer(ty):
    """How numba passes an argument of numba type ``ty``: an array as (meminfo, parent, size,
    itemsize, data, *shape, *strides), a scalar as its C value, a tuple as its fields in order."""
    from numba import types as nt
    if isinstance(ty, nt.Array):
        def array(a, params):
            params += (0, 0, a.size, a.dtype.itemsize, a.gpu_data.device_pointer_value or 0)
            params += a.shape
            params += a.strides
        return array
    if isinstance(ty, nt.BaseTuple):
        fields = [_packer(t) for t in ty]

        def tuple_(a, params):
            for pack, v in zip(fields, a):
                pack(v, params)
        return tuple_
    if ty == nt.boolean:
        return lambda a, params: params.append(bool(a))
    c_type = {nt.float64: ctypes.c_double, nt.float32: ctypes.c_float}.get(ty)
    if c_type is None and isinstance(ty, nt.Integer):
        c_type = getattr(ctypes, "c_%s" % ty)
    if c_type is None:
        raise NotImplementedError(ty)
    return lambda a, params: params.append(c_type(a))


def is_array(a):
    """Whether kernel argument ``a`` is an array (not a Python or NumPy scalar)."""
    return getattr(a, "__cuda_ndarray__", False) or not isinstance(a, (numbers.Number, np.generic))


def is_device_array(a):
    return getattr(a, "__cuda_ndarray__", False)


# numba's device arrays answer these from their layout; their ``flags`` is a fresh dict at each read
def is_c_contiguous(a):
    test = getattr(a, "is_c_contiguous", None)
    return test() if test is not None else a.flags["C_CONTIGUOUS"]


def is_f_contiguous(a):
    test = getattr(a, "is_f_contiguous", None)
    return test() if test is not None else a.flags["F_CONTIGUOUS"]
