"""Tunables of the kernel layer, in one place (environment variables override them)."""
import ctypes
import os
import site
import sys
import warnings

import numba
from numba.np.ufunc import parallel as _numba_parallel

# numba's OpenMP layer (when it is the one in use) runs parallel loops on workers that, by default,
# spin for a while after each loop. On a few cores they then starve the BLAS threads of the next
# matmul (a 784-512-256-10 MLP step took 7x longer). Passive workers sleep instead. Read when numba
# starts its thread pool, which happens at the first parallel kernel, after this import; a value set
# by the user is kept.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

# Element count from which elementwise and reduction loops run multi-threaded (prange).
# Below it the thread start-up costs more than the loop.
PARALLEL_THRESHOLD = int(os.environ.get("JITGRAD_PARALLEL_THRESHOLD", 1 << 16))

# numba's on-disk cache: kernels compile once per machine, not once per process.
CACHE = os.environ.get("JITGRAD_CACHE", "1") != "0"

# fastmath of every CPU kernel: fused multiply-adds ('contract') and friends; NaN/inf semantics are kept
# (never 'nnan'/'ninf'). Never 'arcp' either: it lets LLVM turn 1/sqrt(x) into an approximate reciprocal
# square root (rsqrt(4) = 0.49999997).
FASTMATH = {"contract", "nsz", "afn"}
# Kernels that fold along an axis (sums, dot products, softmax) add 'reassoc', which lets LLVM vectorize the
# fold. Elementwise loops never get it: with 'contract' it let a loop's vectorized body and its scalar
# remainder round differently, and which of them an element takes depends on where the arrays lie (LLVM's
# run-time check that the output does not overlap an input), so the same op on the same values could give
# different last bits from one call to the next.
FOLD_FASTMATH = FASTMATH | {"reassoc"}

# CUDA matmul through cuBLAS (CuPy's binding, the 'cublas' extra) when CuPy is installed; "0" keeps
# the numba tiled kernel (the fallback, and the reference the benchmark measures cuBLAS against).
CUBLAS = os.environ.get("JITGRAD_CUBLAS", "1") != "0"

# Print one line per kernel compilation (see jitgrad.jit_stats for totals).
LOG_COMPILES = os.environ.get("JITGRAD_LOG_COMPILES", "0") not in ("", "0")


# ---------------------------------------------------------------- numba's threading layer
# TBB is the one layer that is both fork-safe (GNU OpenMP kills a child forked after a parallel
# loop ran, as data-loader workers are) and thread-safe (workqueue aborts the process when two
# threads launch parallel loops at once), so it is the default. A layer the user chose
# (NUMBA_THREADING_LAYER, or numba.config.THREADING_LAYER set before importing jitgrad) is kept.
# Without a loadable TBB, 'forksafe' is asked for (workqueue on Linux), and parallel launches
# are serialised (SERIALISE_PARALLEL) wherever the layer may turn out to be workqueue. All of it is
# settled here, before the first parallel kernel starts numba's thread pool.
_TBB_LIBRARY = {"darwin": "libtbb.12.dylib", "win32": "tbb12.dll"}.get(sys.platform, "libtbb.so.12")


def _tbb_loads():
    """Whether numba's TBB layer can be loaded.

    The ``tbb`` wheel installs its library in <prefix>/lib (Library/bin on Windows), where the
    dynamic loader does not look; loaded by path first, it is found by numba's version check and
    by its tbbpool extension.
    """
    check = getattr(_numba_parallel, "_check_tbb_version_compatible", lambda: None)
    for preloaded in (False, True):
        if preloaded:
            _preload(_TBB_LIBRARY)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # numba warns of an old TBB before refusing it; the fallback is quiet
                check()
                from numba.np.ufunc import tbbpool  # noqa: F401
            return True
        except ImportError:
            pass
    return False


def _preload(name):
    prefixes = dict.fromkeys(p for p in (sys.prefix, sys.base_prefix, getattr(site, "USER_BASE", None)) if p)
    for prefix in prefixes:
        for folder in ("lib", os.path.join("Library", "bin"), "bin"):
            path = os.path.join(prefix, folder, name)
            if os.path.exists(path):
                try:
                    ctypes.CDLL(path, mode=getattr(ctypes, "RTLD_GLOBAL", 0))
                    return
                except OSError:
                    continue


def _may_be_workqueue(layer, tbb):
    """Whether numba may load the workqueue layer for the requested ``layer``."""
    if layer == "workqueue":
        return True
    if layer == "forksafe":
        return not tbb
    if layer == "default":
        for name in numba.config.THREADING_LAYER_PRIORITY:
            if name == "tbb" and tbb or name == "omp" and sys.platform != "darwin":  # macOS needs intel-openmp
                return False
            if name == "workqueue":
                return True
    return False


THREADING_LAYER = str(numba.config.THREADING_LAYER).lower()
if THREADING_LAYER in ("default", "") and not os.environ.get("NUMBA_THREADING_LAYER"):
    _TBB = _tbb_loads()
    THREADING_LAYER = numba.config.THREADING_LAYER = "tbb" if _TBB else "forksafe"
else:
    _TBB = THREADING_LAYER in ("tbb", "safe", "threadsafe", "forksafe", "default") and _tbb_loads()

# Parallel kernels take one process-wide lock around each launch (see _jit.compiled).
SERIALISE_PARALLEL = _may_be_workqueue(THREADING_LAYER, _TBB)


# ---------------------------------------------------------------- small GEMMs on one BLAS thread
# OpenBLAS splits a GEMM over all its threads from m*n*k = 64^3 on. Below about 128^3 a second thread saves
# microseconds at best, and where the cores are shared it must be woken and then wait for a core: a 100 x 100
# float32 GEMM (vmap's product of a matrix and a batch of 100 vectors, as in a Hessian) took 10-50 ms instead
# of 0.03 on a loaded 2-core machine. GEMMs of fewer than SMALL_GEMM multiply-adds run with NumPy's OpenBLAS
# set to one thread (two calls of about 1 us); 0 leaves OpenBLAS to choose.
SMALL_GEMM = int(os.environ.get("JITGRAD_SMALL_GEMM", 1 << 21))
THREADED_GEMM = 64 ** 3  # (below it OpenBLAS runs one thread anyway: nothing to switch)
# Larger GEMMs run on numba's threads, in blocks of rows (or columns, or whole matrices of a batch), each block a
# one-thread OpenBLAS call (blas.split_gemm): a step's elementwise kernels and GEMMs then share one thread pool. Two
# pools on the same cores each wait for the other's spinning threads: an MLP step at load average 2 took 47 ms
# with OpenBLAS's pool next to numba's, 8 with numba's kernels on one thread. 0: OpenBLAS's own threads.
SPLIT_GEMM = os.environ.get("JITGRAD_SPLIT_GEMM", "1") != "0"


def _openblas_libraries(package):
    """ctypes handles of the OpenBLAS libraries a wheel of ``package`` (numpy, scipy) bundles."""
    import numpy as np
    folder = os.path.join(os.path.dirname(os.path.dirname(np.__file__)), package + ".libs")
    try:
        names = [n for n in os.listdir(folder) if "openblas" in n]
    except OSError:
        return []
    libs = []
    for name in names:
        try:
            libs.append(ctypes.CDLL(os.path.join(folder, name)))
        except OSError:
            continue
    return libs


def _openblas(package="numpy"):
    """(library, prefix, suffix) of the OpenBLAS a wheel of ``package`` bundles (its symbols are prefix + name +
    suffix), or None (another BLAS)."""
    for lib in _openblas_libraries(package):
        for prefix, suffix in (("scipy_openblas", "64_"), ("scipy_openblas", ""), ("openblas", "64_"),
                               ("openblas", "")):
            if all(hasattr(lib, prefix + name + suffix) for name in ("_get_num_threads", "_set_num_threads")):
                return lib, prefix, suffix
    return None


OPENBLAS = _openblas()  # the OpenBLAS that NumPy calls (kernels/blas.py calls its GEMM from numba kernels too)


def _openblas_threads(package="numpy"):
    """(get, set) of the thread count of the OpenBLAS that NumPy (or SciPy's LAPACK) calls, or None (another
    BLAS)."""
    found = OPENBLAS if package == "numpy" else _openblas(package)
    if found is None:
        return None
    lib, prefix, suffix = found
    get, put = getattr(lib, prefix + "_get_num_threads" + suffix), getattr(lib, prefix + "_set_num_threads" + suffix)
    get.restype, put.argtypes, put.restype = ctypes.c_int, (ctypes.c_int,), None
    return get, put


OPENBLAS_THREADS = _openblas_threads() if SMALL_GEMM else None


def on_one_thread(threads, fn, *args):
    """``fn(*args)`` with the OpenBLAS whose thread count ``threads`` (get, set) gets and sets on one thread, its
    count restored after."""
    get, put = threads
    n = get()
    if n == 1:
        return fn(*args)
    put(1)
    try:
        return fn(*args)
    finally:
        put(n)

# The LAPACK of kernels/linalg.py is SciPy's OpenBLAS, a second build with a thread pool of its own. Its threaded
# factorizations synchronise their threads step by step, so where the cores are shared a thread waits for the
# other to get a core again: on 2 cores at load average 4-6, potrf of order 512 took 160-210 ms on two threads
# against 2.5 on one, syevd of order 256 64-79 ms against 9-11 (the fastest of 20 calls), while the BLAS-3
# products (trsm, trmm) lost nothing. Factorizations of matrices of at most SMALL_LAPACK rows and columns run on
# one OpenBLAS thread (triangular products and solves follow SMALL_GEMM, as GEMMs do); 0: OpenBLAS chooses.
# (eigh's gradients run on NumPy's OpenBLAS instead, where NumPy has one: kernels/linalg.py _numpy_routines; the
# same rule holds there.)
SMALL_LAPACK = int(os.environ.get("JITGRAD_SMALL_LAPACK", 512))
_LAPACK_THREADS = {}


def lapack_threads(package="scipy"):
    """(get, set) of the thread count of SciPy's OpenBLAS (``package`` "numpy": NumPy's, for the kernels that call
    its LAPACK), or None (SMALL_LAPACK 0, or another BLAS): looked up at the first LAPACK call (loading SciPy's
    library as jitgrad is imported would lengthen its import)."""
    if package not in _LAPACK_THREADS:
        shared = OPENBLAS_THREADS if package == "numpy" else None  # (NumPy's pool, looked up once already)
        _LAPACK_THREADS[package] = (shared or _openblas_threads(package)) if SMALL_LAPACK else None
    return _LAPACK_THREADS[package]


# ---------------------------------------------------------------- freed host memory
# glibc hands freed memory back to the system once 2x its mmap threshold lies free at the top of the
# heap (and serves large arrays by mmap), so a step that frees its arrays and allocates them again
# zero-fills them page by page anew: 2,500 page faults and 16 ms of system time per step of a 4M-element
# elementwise chain, 16,000 per transformer step. Arrays up to 32 MiB (glibc's largest mmap threshold)
# come from the heap instead, and up to 256 MiB of freed heap stays with the process for the next step.
# JITGRAD_KEEP_FREED_MEMORY=0 leaves the C library's defaults alone (a value MALLOC_* set is kept too).
KEEP_FREED_MEMORY = os.environ.get("JITGRAD_KEEP_FREED_MEMORY", "1") != "0"
MMAP_THRESHOLD = 32 << 20
TRIM_THRESHOLD = 256 << 20
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # mallopt's parameter numbers (malloc.h)


def _keep_freed_memory():
    """Set glibc's mmap and trim thresholds (see above); True where they were set."""
    if not sys.platform.startswith("linux") or any(
            k in os.environ for k in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the C library the process runs on (absent from musl)
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))


FREED_MEMORY_KEPT = KEEP_FREED_MEMORY and _keep_freed_memory()


def threads():
    """The threads numba's parallel loops run on (for the calling thread)."""
    return numba.get_num_threads()


def set_threads(n):
    """Run the CPU kernels on ``n`` threads: numba's parallel loops (at most the NUMBA_NUM_THREADS threads numba
    started; numba keeps the count per calling thread) and the OpenBLAS pools of NumPy and of SciPy's LAPACK."""
    numba.set_num_threads(min(n, numba.config.NUMBA_NUM_THREADS))
    for pool in (OPENBLAS_THREADS or _openblas_threads(), lapack_threads()):
        if pool is not None:
            pool[1](n)
