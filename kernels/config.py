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

# fastmath lets LLVM vectorise reductions and reassociate sums; NaN/inf semantics are kept
# (only 'reassoc', 'contract' and friends are enabled, never 'nnan'/'ninf'). Never 'arcp' either:
# it lets LLVM turn 1/sqrt(x) into an approximate reciprocal square root (rsqrt(4) = 0.49999997).
FASTMATH = {"reassoc", "contract", "nsz", "afn"}

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
