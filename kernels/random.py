"""Sampling kernels: categorical draws (multinomial) from uniform or exponential variates drawn by the caller."""
import numpy as np

from ._jit import compiled


def _multinomial_with_replacement(probs, u, out):
    """out[r, j]: the category whose cumulative probability first exceeds u[r, j] * (row total); rows of
    ``probs`` are non-negative with a positive sum, u in [0, 1)."""
    R, K = probs.shape
    cdf = np.empty(K)
    for r in range(R):
        total = 0.0
        for k in range(K):
            total += probs[r, k]
            cdf[k] = total
        for j in range(u.shape[1]):
            target = u[r, j] * total
            lo, hi = 0, K - 1
            while lo < hi:
                mid = (lo + hi) // 2
                if cdf[mid] > target:
                    hi = mid
                else:
                    lo = mid + 1
            while lo > 0 and probs[r, lo] == 0:  # rounding put the target at the very top
                lo -= 1
            out[r, j] = lo


def _multinomial_without_replacement(probs, e, out):
    """out[r, :n]: the n largest keys p / e (e ~ Exponential(1)), a draw of n distinct categories with
    probabilities proportional to p taken one after another (the exponential-races form of it)."""
    R, K = probs.shape
    n = out.shape[1]
    keys = np.empty(K)
    for r in range(R):
        for k in range(K):
            keys[k] = -probs[r, k] / e[r, k]
        order = np.argsort(keys, kind="mergesort")  # ties (zero probabilities) in index order
        for j in range(n):
            out[r, j] = order[j]


multinomial_with_replacement = compiled(_multinomial_with_replacement)
multinomial_without_replacement = compiled(_multinomial_without_replacement)
