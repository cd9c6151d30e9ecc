"""Reductions and row-wise kernels (sum, prod, max/min, arg max/min, cumsum, softmax family).

Every kernel works on a C-contiguous 3-D view ``x[A, R, B]`` and reduces (or scans) the middle
axis R; ``reduce_layout`` brings any array and set of dims to that shape. Work is split over
(A, blocks of B), so both 'reduce the last axis' (B == 1) and 'reduce the first axis'
(A == 1) run in parallel. Sums of float32 accumulate in float64.
"""
import math

import numpy as np
from numba import prange

from . import config
from ._jit import twins
from .elementwise import vexp

BLOCK = 64  # columns of B handled by one task


# Folds along R over the (A, blocks of B) tasks, one template: out = init, then out = combine(o, v)
# for each v of the row. Max and min skip to a NaN as soon as they meet one, as PyTorch's do.
_FOLD = """
def _{name}(x, out):
    A, R, B = x.shape
    nb = (B + BLOCK - 1) // BLOCK
    for t in prange(A * nb):
        a, b0 = t // nb, (t % nb) * BLOCK
        b1 = min(b0 + BLOCK, B)
        for b in range(b0, b1):
            out[a, b] = {init}
        for r in range({first}, R):
            for b in range(b0, b1):
                v, o = x[a, r, b], out[a, b]
                out[a, b] = {combine}
"""
_FOLDS = {"sum": ("0", 0, "o + v"), "prod": ("1", 0, "o * v"),
          "amax": ("x[a, 0, b]", 1, "v if o == o and (v > o or v != v) else o"),
          "amin": ("x[a, 0, b]", 1, "v if o == o and (v < o or v != v) else o")}

# The same folds when B == 1 (reducing the last axis): one register accumulator per contiguous row,
# which LLVM vectorizes; folding into out[a, b] in memory, as above, it cannot.
_FOLD_ROWS = """
def _{name}(x, out):
    A, R, B = x.shape
    for a in prange(A):
        o = {init}
        for r in range({first}, R):
            v = x[a, r, 0]
            o = {combine}
        out[a, 0] = o
"""

# First index of the maximum (minimum) along R; a NaN counts as the extreme.
_ARG = """
def _{name}(x, out):
    A, R, B = x.shape
    for t in prange(A * B):
        a, b = t // B, t % B
        best, k = x[a, 0, b], 0
        if best == best:
            for r in range(1, R):
                v = x[a, r, b]
                if v != v:
                    k = r
                    break
                if v {cmp} best:
                    best, k = v, r
        out[a, b] = k
"""


def _generate(template, name, **fields):
    exec(compile(template.format(name=name, **fields), __file__, "exec"), globals())
    return globals()["_" + name]


_GENERATED = [_generate(_FOLD, name, init=i, first=f, combine=c) for name, (i, f, c) in _FOLDS.items()] + \
    [_generate(_FOLD_ROWS, name + "_rows", init=i.replace("b]", "0]"), first=f, combine=c)
     for name, (i, f, c) in _FOLDS.items()] + \
    [_generate(_ARG, "argmax", cmp=">"), _generate(_ARG, "argmin", cmp="<")]


def _cumsum(x, out):
    A, R, B = x.shape
    nb = (B + BLOCK - 1) // BLOCK
    for t in prange(A * nb):
        a, b0 = t // nb, (t % nb) * BLOCK
        b1 = min(b0 + BLOCK, B)
        for b in range(b0, b1):
            out[a, 0, b] = x[a, 0, b]
        for r in range(1, R):
            for b in range(b0, b1):
                out[a, r, b] = out[a, r - 1, b] + x[a, r, b]


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


def _logsumexp(x, out):
    A, R, B = x.shape
    for t in prange(A * B):
        a, b = t // B, t % B
        m = x[a, 0, b]
        for r in range(1, R):
            m = max(m, x[a, r, b])
        if m == math.inf or m == -math.inf:
            out[a, b] = m
            continue
        s = 0.0
        for r in range(R):
            s += vexp(x[a, r, b] - m)
        out[a, b] = m + math.log(s)


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


_KERNELS = {f.__name__[1:]: twins(f) for f in _GENERATED + [_cumsum, _softmax, _logsumexp, _softmax_vjp]}


def kernel(name, size):
    """The serial or parallel build of kernel ``name`` for ``size`` elements."""
    return _KERNELS[name][size >= config.PARALLEL_THRESHOLD]


def reduce_layout(x, dims):
    """View (or copy) ``x`` as C-contiguous (A, R, B) with the axes ``dims`` (sorted, non-empty) in R."""
    shape = x.shape
    nd = len(shape)
    if dims == tuple(range(dims[0], dims[-1] + 1)):
        A = math.prod(shape[:dims[0]])
        R = math.prod(shape[dims[0]:dims[-1] + 1])
        return np.ascontiguousarray(x).reshape(A, R, math.prod(shape[dims[-1] + 1:]))
    keep = [d for d in range(nd) if d not in dims]
    xt = np.ascontiguousarray(x.transpose(keep + list(dims)))
    return xt.reshape(math.prod([shape[d] for d in keep]), math.prod([shape[d] for d in dims]), 1)


def _acc_dtype(dtype, kind):
    if kind in ("sum", "prod"):
        if dtype == np.float32:
            return np.float64
        if dtype.kind in "biu":
            return np.int64
    return dtype


def reduce(kind, x, dims):
    """Reduce ``x`` over ``dims`` with kind in sum/prod/amax/amin/argmax/argmin/logsumexp.

    Returns an array of ``x.shape`` without ``dims`` (the caller restores keepdim).
    """
    out_shape = tuple(s for d, s in enumerate(x.shape) if d not in dims)
    if kind in _REPEATS and 0 in x.strides and x.size:
        out = _reduce_repeats(kind, x, dims)
        if out is not None:
            return out.reshape(out_shape)
    out = _reduce_acc(kind, x, dims)
    if kind in ("sum", "prod"):
        out = out.astype(x.dtype if x.dtype.kind == "f" else np.int64, copy=False)
    return out.reshape(out_shape)


def _reduce_acc(kind, x, dims):
    """The reduction as (A, B), in the accumulator's dtype."""
    x3 = reduce_layout(x, dims)
    A, R, B = x3.shape
    out_dtype = np.int64 if kind in ("argmax", "argmin") else _acc_dtype(x.dtype, kind)
    out = np.empty((A, B), out_dtype)
    kernel(kind + "_rows" if B == 1 and kind in _FOLDS else kind, x.size)(x3, out)
    return out


_REPEATS = ("sum", "amax", "amin")  # reductions over a repeated value: n * v, or v


def _reduce_repeats(kind, x, dims):
    """The reduction of a broadcast array (stride 0 along some dims, as expand() makes) without the copy
    that would materialise it: over one element of each stride-0 dim, a sum scaled by how many elements
    that one stands for, the result repeated along the stride-0 dims that are kept. None if none repeats."""
    rep = [d for d in range(x.ndim) if x.strides[d] == 0 and x.shape[d] > 1]
    if not rep:
        return None
    one = x[tuple(slice(0, 1) if d in rep else slice(None) for d in range(x.ndim))]
    out = _reduce_acc(kind, one, dims)
    if kind == "sum":
        n = math.prod(x.shape[d] for d in rep if d in dims)
        if n > 1:
            out *= n
        out = out.astype(x.dtype if x.dtype.kind == "f" else np.int64, copy=False)
    kept = tuple(s for d, s in enumerate(one.shape) if d not in dims)
    full = tuple(s for d, s in enumerate(x.shape) if d not in dims)
    out = out.reshape(kept)
    return out if kept == full else np.broadcast_to(out, full).copy()  # a result of its own, writable


def scan(kind, x, dim):
    """cumsum of ``x`` along ``dim`` (accumulated in the reduction's dtype)."""
    x3 = reduce_layout(x, (dim,))
    out = np.empty(x3.shape, _acc_dtype(x.dtype, "sum"))
    kernel(kind, x.size)(x3, out)
    return out.astype(x.dtype if x.dtype.kind == "f" else np.int64, copy=False).reshape(x.shape)


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
