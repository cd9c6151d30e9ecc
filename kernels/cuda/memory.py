"""A caching device-memory pool for numba-cuda's device arrays.

It plugs into numba-cuda through its External Memory Management (EMM) interface: repeated
allocations of a size reuse freed blocks instead of calling cudaMalloc, so a training step allocates
nothing from the driver once its sizes have been seen.

Two parts. ``BlockPool`` is the bookkeeping, independent of CUDA (the raw allocate and free
functions are given to it). ``CachingMemoryManager`` is the EMM plugin that numba's device
arrays allocate through; it exists where numba-cuda drives a real GPU (the simulator has no
device memory and no EMM, so there the statistics stay at zero).

A freed block goes back to the pool, not to the driver. Reusing it is safe in stream order: all
kernels run on the default stream, so a block released while a queued kernel still reads it is
only handed out to work queued after that kernel.

``install()`` must run before numba creates its CUDA context; setting the environment variable
NUMBA_CUDA_MEMORY_MANAGER=jitgrad.kernels.cuda.memory does the same.
"""
import ctypes
import functools
import math
import threading

import numpy as np

from . import _launch as L

SMALL_BLOCK = 1 << 20  # up to 1 MiB sizes round up to 512 bytes; above, to 1/16 of the next power of two


class OutOfMemoryError(MemoryError):
    pass


class BlockPool:
    """Free lists of device blocks by rounded size, and byte counters."""

    def __init__(self, raw_alloc, raw_free):
        self._raw_alloc, self._raw_free = raw_alloc, raw_free
        self._cached = {}  # block size -> handles of free blocks
        self._lock = threading.RLock()  # finalizers may release blocks from the garbage collector
        self.generation = 0  # bumped by forget(): releases of older blocks are ignored
        self.allocated = 0  # bytes in blocks handed out
        self.reserved = 0  # bytes held from the driver: handed out + cached
        self.peak_allocated = 0
        self.driver_allocs = 0
        self.reuses = 0

    @staticmethod
    def block_size(nbytes):
        if nbytes <= SMALL_BLOCK:
            step = 512
        else:
            step = 1 << ((nbytes - 1).bit_length() - 4)  # at most 12.5% rounding waste
        return max(step, -(-nbytes // step) * step)

    def acquire(self, nbytes):
        """A block of at least ``nbytes``: (handle, block size). On a driver out-of-memory error
        the cache is emptied and the allocation retried once."""
        size = self.block_size(nbytes)
        with self._lock:
            blocks = self._cached.get(size)
            if blocks:
                handle = blocks.pop()
                self.reuses += 1
            else:
                try:
                    handle = self._raw_alloc(size)
                except MemoryError:
                    self.empty_cache()
                    handle = self._raw_alloc(size)
                self.reserved += size
                self.driver_allocs += 1
            self.allocated += size
            self.peak_allocated = max(self.peak_allocated, self.allocated)
        return handle, size

    def release(self, handle, size, generation):
        with self._lock:
            if generation != self.generation:
                return
            self.allocated -= size
            self._cached.setdefault(size, []).append(handle)

    def empty_cache(self):
        """Return every cached (free) block to the driver; blocks in use are untouched."""
        with self._lock:
            cached, self._cached = self._cached, {}
            for size, handles in cached.items():
                for handle in handles:
                    self._raw_free(handle)
                    self.reserved -= size

    def forget(self):
        """Drop all bookkeeping without freeing: the context that owned the blocks is gone."""
        with self._lock:
            self._cached = {}
            self.generation += 1
            self.allocated = self.reserved = 0

    @property
    def cached(self):
        return self.reserved - self.allocated

    def stats(self):
        return {"allocated_bytes": self.allocated, "reserved_bytes": self.reserved, "cached_bytes": self.cached,
                "peak_allocated_bytes": self.peak_allocated, "driver_allocs": self.driver_allocs,
                "reuses": self.reuses}


class PoolMemory:
    """A pool block as numba's device arrays hold it (their ``gpu_data``), or a view into one.

    numba's own pointer objects cost a weak proxy, two weakref finalizers and a registry entry per
    allocation: more host time than launching a small kernel. A block goes back to its pool when its
    last reference goes (``release`` is called); a view holds its block, which is its ``owner``.
    """
    __slots__ = ("device_pointer", "size", "_block", "_release", "__weakref__")
    __cuda_memory__ = True

    def __init__(self, address, size, block=None, release=None):
        self.device_pointer, self.size, self._block, self._release = address, size, block, release

    @property
    def handle(self):  # numba's IPC handles read the address here
        return self.device_pointer

    @property
    def device_pointer_value(self):
        return self.device_pointer or None

    @property
    def device_ctypes_pointer(self):
        return ctypes.c_size_t(self.device_pointer)

    @property
    def _cuda_memsize_(self):
        return self.size

    @property
    def owner(self):
        return self if self._block is None else self._block

    def view(self, start, stop=None):
        size = (self.size if stop is None else stop) - start
        if size < 0:
            raise RuntimeError("size cannot be negative")
        return PoolMemory(self.device_pointer + start, size, self.owner)

    def __del__(self):
        if self._release is not None:
            self._release()


if not L.SIM:
    from numba import cuda
    from numba.cuda import GetIpcHandleMixin, HostOnlyCUDAMemoryManager, MemoryInfo
    from numba.cuda.cudadrv.devicearray import DeviceNDArray
    from numba.cuda.cudadrv import dummyarray
    from numba.cuda.cudadrv.driver import CudaAPIError, binding, driver, memory_size_from_info

    class DeviceArray(DeviceNDArray):
        """numba's device array, made in a few attribute stores. numba's constructor checks the layout and builds
        its layout object (``_dummy``) for every array, which costs more host time than a small kernel's launch;
        here that object is built when one of numba's own methods first reads it. jitgrad's arrays (pool blocks,
        views) come with a valid layout; any other construction is numba's own."""

        def __init__(self, shape, strides, dtype, stream=0, gpu_data=None):
            if gpu_data is None or shape.__class__ is not tuple or strides.__class__ is not tuple or \
                    not isinstance(dtype, np.dtype):
                super().__init__(shape, strides, dtype, stream, gpu_data)
                return
            self.shape, self.strides, self.dtype, self.gpu_data, self.stream = shape, strides, dtype, gpu_data, stream
            self.ndim = len(shape)
            self.size = math.prod(shape)

        @functools.cached_property
        def _dummy(self):
            return dummyarray.Array.from_desc(0, self.shape, self.strides, self.dtype.itemsize)

        @functools.cached_property
        def alloc_size(self):
            return memory_size_from_info(self.shape, self.strides, self.dtype.itemsize) if self.size else 0

        def is_c_contiguous(self):
            return _contiguous(reversed(self.shape), reversed(self.strides), self.strides, self.dtype.itemsize)

        def is_f_contiguous(self):
            return _contiguous(self.shape, self.strides, self.strides, self.dtype.itemsize)

    def _contiguous(shape, strides, all_strides, step):
        """numba's layout rule, without its layout object: dims of one element aside, each stride is the
        product of the sizes inside it; a zero stride is never contiguous."""
        if 0 in all_strides:
            return False
        for n, stride in zip(shape, strides):
            if n != 1:
                if stride != step:
                    return False
                step *= n
        return True

    class CachingMemoryManager(GetIpcHandleMixin, HostOnlyCUDAMemoryManager):
        """numba-cuda EMM plugin: device allocations come from (and return to) a ``BlockPool``."""

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.pool = BlockPool(self._driver_alloc, self._driver_free)
            self.ready = False

        @staticmethod
        def _driver_alloc(size):
            try:
                return driver.cuMemAlloc(size)
            except CudaAPIError as e:
                if e.code == binding.CUresult.CUDA_ERROR_OUT_OF_MEMORY:
                    raise OutOfMemoryError("CUDA out of memory. Tried to allocate %.2f MiB" % (size / 2**20)) from e
                raise

        @staticmethod
        def _driver_free(handle):
            driver.cuMemFree(handle)

        def initialize(self):
            # numba calls this whenever it looks the context up (tens of times a training step): the driver is
            # asked for the memory size once, and host (pinned/mapped) deallocations are queued as numba's own
            # manager does
            if not self.ready:
                self.deallocations.memory_capacity = self.get_memory_info().total
                L.use_pool(self.memalloc, DeviceArray)
                self.ready = True

        def memalloc(self, size):
            handle, block = self.pool.acquire(size)
            release, generation = self.pool.release, self.pool.generation
            # The block lives while device arrays (or views of them) refer to it, as numba's own pointers.
            return PoolMemory(int(handle), size, release=lambda: release(handle, block, generation))

        def get_memory_info(self):
            free, total = driver.cuMemGetInfo()
            return MemoryInfo(free=free, total=total)

        def reset(self):
            super().reset()
            self.pool.forget()
            self.ready = False
            L.forget_context()

        @property
        def interface_version(self):
            return 1

    _numba_memory_manager = CachingMemoryManager  # for NUMBA_CUDA_MEMORY_MANAGER


def install():
    """Route numba's device allocations through the caching pool (before the CUDA context exists)."""
    if not L.SIM:
        cuda.set_memory_manager(CachingMemoryManager)


def _pool():
    """The current context's pool; None under the simulator."""
    if L.SIM:
        return None
    manager = cuda.current_context().memory_manager
    if not isinstance(manager, CachingMemoryManager):
        raise RuntimeError("jitgrad's caching allocator is not installed: call kernels.cuda.memory.install() before "
                           "the first CUDA allocation")
    return manager.pool


def memory_stats():
    """The pool's counters (bytes allocated/reserved/cached, peak, driver allocations, reuses);
    all zero under the simulator, which has no device memory."""
    pool = _pool()
    return (pool or BlockPool(None, None)).stats()


def memory_allocated():
    """Bytes of device memory held by live arrays (rounded to the pool's block sizes)."""
    return memory_stats()["allocated_bytes"]


def memory_reserved():
    """Bytes held from the driver: in use plus cached."""
    return memory_stats()["reserved_bytes"]


def empty_cache():
    """Give the cached free blocks back to the driver."""
    pool = _pool()
    if pool is not None:
        pool.empty_cache()
