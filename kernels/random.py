"""Sampling kernels: categorical draws (multinomial) from uniform or exponential variates drawn by the caller.

Each row of ``probs`` (non-negative, with a positive sum) is sampled by itself; the CUDA twins in
kernels/cuda/random.py give the same categories for the same variates.
"""
import numpy as np
from numba import njit

from ._jit import compiled


@njit(error_model="numpy")
def sample_row(probs, u, cdf, out, r):
    """out[r, j]: the first category whose cumulative weight exceeds u[r, j] * (row r's total); u in [0, 1).
    kernels/cuda/random.py compiles the same function for its thread of row r."""
    K = probs.shape[1]
    total = 0.0
    for k in range(K):
        total += probs[r, k]
        cdf[r, k] = total
    for j in range(u.shape[1]):
        target = u[r, j] * total
        lo, hi = 0, K - 1
        while lo < hi:
            mid = (lo + hi) // 2
            if cdf[r, mid] > target:
                hi = mid
            else:
                lo = mid + 1
        while lo > 0 and probs[r, lo] == 0:  # rounding put the target at the very top
            lo -= 1
        out[r, j] = lo


def _multinomial_with_replacement(probs, u, cdf, out):
    for r in range(probs.shape[0]):
        sample_row(probs, u, cdf, out, r)


def _multinomial_without_replacement(probs, e, keys, out):
    """out[r, :n]: the categories of the n largest p / e (e ~ Exponential(1)), largest first: n distinct
    categories drawn one after another with probabilities proportional to the weights left (exponential
    races). Ties (zero weights) go in index order."""
    R, K = probs.shape
    n = out.shape[1]
    for r in range(R):
        for k in range(K):
            keys[r, k] = -probs[r, k] / e[r, k]
        order = np.argsort(keys[r], kind="mergesort")
        for j in range(n):
            out[r, j] = order[j]


multinomial_with_replacement = compiled(_multinomial_with_replacement)
multinomial_without_replacement = compiled(_multinomial_without_replacement)


def multinomial(probs, draws, n, replacement):
    """``n`` categories per row of ``probs`` (R x K float64), int64 (R x n). ``draws``: uniforms (R x n) with
    replacement, standard exponentials (R x K) without."""
    out = np.empty((probs.shape[0], n), np.int64)
    kernel = multinomial_with_replacement if replacement else multinomial_without_replacement
    kernel(np.ascontiguousarray(probs), np.ascontiguousarray(draws), np.empty(probs.shape), out)
    return out
