"""CUDA twins of kernels/random.py: categorical sampling, one thread per row of probabilities."""
import hashlib
import inspect

import numpy as np
from numba import cuda

from . import _launch as L
from .. import random as CPU


_sample_row = L.device_jit(CPU.sample_row.py_func)


def _multinomial_with_replacement(probs, u, cdf, out):
    for r in range(cuda.grid(1), probs.shape[0], cuda.gridsize(1)):
        _sample_row(probs, u, cdf, out, r)


# named by the source of the function it inlines, so numba's cache never serves a stale build
_multinomial_with_replacement = L.jit(_multinomial_with_replacement, tag=hashlib.sha1(
    inspect.getsource(CPU.sample_row.py_func).encode()).hexdigest()[:10])


@L.jit
def _multinomial_without_replacement(probs, e, keys, out):
    """The n smallest keys -p / e by repeated selection (first index on ties, as the CPU's stable sort)."""
    K = probs.shape[1]
    for r in range(cuda.grid(1), probs.shape[0], cuda.gridsize(1)):
        for k in range(K):
            keys[r, k] = -probs[r, k] / e[r, k]
        for j in range(out.shape[1]):
            best = 0
            for k in range(1, K):
                if keys[r, k] < keys[r, best]:
                    best = k
            out[r, j] = best
            keys[r, best] = np.inf


def multinomial(probs, draws, n, replacement):
    """As kernels/random.py's multinomial, on device arrays (``draws`` may be on the host)."""
    draws = draws if L.is_device_array(draws) else L.to_device(np.ascontiguousarray(draws))
    R = probs.shape[0]
    out = L.empty((R, n), np.int64)
    kernel = _multinomial_with_replacement if replacement else _multinomial_without_replacement
    L.launch(kernel, L.blocks_for(R), L.THREADS, probs, draws, L.empty(probs.shape, np.float64), out)
    return out
