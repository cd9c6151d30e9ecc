"""softmax and log_softmax along a dim, and their VJPs: row kernels over the (A, R, B) layout of reduce.py."""
import math

from numba import prange  # noqa: F401  (used by the kernels)
import numpy as np

from . import config
from ._jit import twins
from .vmath import vexp
from .reduce import reduce_layout


def _softmax(x, out, log):
    """softmax (log=False) or log_softmax (log=True) along R, max-shifted for stability."""
    A, R, B = x.shape
    for t in prange(A * B):
        a, b = t // B, t % B
        m = x[a, 0, b]
        for r in range(1, R):
            m = max(m, x[a, r, b])
        if m == -math.inf:
            m = 0.0
        s = 0.0
        if log:
            # (x - m) - log(s), never x - (m + log(s)): log(s) added to a large m rounds away. out holds
            # x - m in between, so that fastmath's reassociation cannot regroup the two subtractions.
            for r in range(R):
                d = x[a, r, b] - m
                out[a, r, b] = d
                s += vexp(d)
            ls = math.log(s)
            for r in range(R):
                out[a, r, b] = out[a, r, b] - ls
        else:
            for r in range(R):
                s += vexp(x[a, r, b] - m)
            for r in range(R):
                out[a, r, b] = vexp(x[a, r, b] - m) / s


def _softmax_vjp(g, y, out, log):
    """VJP of softmax: y * (g - sum(g * y)); of log_softmax: g - exp(y) * sum(g)."""
    A, R, B = g.shape
    for t in prange(A * B):
        a, b = t // B, t % B
        s = 0.0
        for r in range(R):
            s += g[a, r, b] if log else g[a, r, b] * y[a, r, b]
        for r in range(R):
            if log:
                out[a, r, b] = g[a, r, b] - vexp(y[a, r, b]) * s
            else:
                out[a, r, b] = y[a, r, b] * (g[a, r, b] - s)


_KERNELS = {f.__name__[1:]: twins(f, fastmath=config.FOLD_FASTMATH) for f in (_softmax, _softmax_vjp)}


def kernel(name, size):
    """The serial or parallel build of kernel ``name`` for ``size`` elements."""
    return _KERNELS[name][size >= config.PARALLEL_THRESHOLD]


def softmax(x, dim, log):
    x3 = reduce_layout(x, (dim,))
    out = np.empty(x3.shape, x.dtype)
    kernel("softmax", x.size)(x3, out, log)
    return out.reshape(x.shape)


def softmax_vjp(g, y, dim, log):
    g3, y3 = reduce_layout(g, (dim,)), reduce_layout(y, (dim,))
    out = np.empty(g3.shape, g.dtype)
    kernel("softmax_vjp", g.size)(g3, y3, out, log)
    return out.reshape(g.shape)
