"""Tunables of the kernel layer, in one place (environment variables override them)."""
import os

# numba's parallel loops run on OpenMP workers that, by default, spin for a while after each loop.
# On a few cores they then starve the BLAS threads of the next matmul (a 784-512-256-10 MLP step
# took 7x longer). Passive workers sleep instead. Read when numba starts its thread pool, which
# happens at the first parallel kernel, after this import; a value set by the user is kept.
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

# Print one line per kernel compilation (see jitgrad.jit_stats for totals).
LOG_COMPILES = os.environ.get("JITGRAD_LOG_COMPILES", "0") not in ("", "0")
