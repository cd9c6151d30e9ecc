"""Reductions and scans, written once as folds, and the CPU loops generated from them.

A reduction kind is a fold over a two-part state (v, w): (value, unused) for sum/prod/amax/amin,
(value, index) for argmax/argmin, (running max, sum of exp(x - max)) for logsumexp. An element x
at position r enters as the state (x, r), or (x, 1) for logsumexp; ``final`` turns the state into
the result. A scan is the running fold of a reduction (cumsum: sum, cumprod: prod, cummax: amax,
cummin: amin, logcumsumexp: logsumexp). These scalar functions are the whole definition of a kind: the CPU loops below are
generated from them, and kernels/cuda/reduce.py compiles the same functions into its block kernels
(with DEVICE_MATH and DEVICE_FUNCTIONS in place of the CPU's primitives). logsumexp alone keeps a
CPU kernel of its own (two passes, max then sum of exp, which vectorize; its fold does not).

Every loop works on a C-contiguous 3-D view ``x[A, R, B]`` and reduces (or scans) the middle axis
R; ``reduce_layout`` brings any array and set of dims to that shape. Work is split over (A, tiles of
B) and, when those are too few for the threads, over chunks of R whose partial states a second loop
folds. Sums of float32 accumulate in float64. Serial sum/prod/amax/amin, and the merge of their
partial states, are NumPy's ufunc reductions (see _NUMPY_FOLDS).
"""
import math
from typing import Callable, NamedTuple

import numba
import numpy as np
from numba import njit, prange  # noqa: F401  (prange: used by the generated loops)

from . import config
from ._jit import twins
from .extremum import device_maximum, device_minimum, maximum, minimum
from .vmath import vexp

COLS = 1024  # columns of B folded by one task: a row segment of a few KiB streams from memory
SKIP = 4096  # arg reductions of rows test blocks of this many elements (in L1 when searched) at once

_scalar = njit(error_model="numpy", fastmath=config.FOLD_FASTMATH)


# What device backends use in place of the CPU primitives (vexp, and the LLVM intrinsics of extremum.py): their
# own math, and Python functions they compile (see kernels/cuda/reduce.py).
DEVICE_MATH = {"vexp": math.exp}
DEVICE_FUNCTIONS = {"maximum": device_maximum, "minimum": device_minimum}


# ---------------------------------------------------------------- folds: (v, w) + (v2, w2)
@_scalar
def sum_fold(v, w, v2, w2):
    return v + v2, w


@_scalar
def prod_fold(v, w, v2, w2):
    return v * v2, w


@_scalar
def amax_fold(v, w, v2, w2):
    """The larger value; a NaN wins and stays."""
    return maximum(v, v2), w


@_scalar
def amin_fold(v, w, v2, w2):
    return minimum(v, v2), w


@_scalar
def argmax_fold(v, k, v2, k2):
    """(value, index) of the maximum, the first on ties; a NaN counts as the maximum. Written with
    & and | (no branches), so that loops over columns of states vectorize."""
    first = v == v
    take = ((v2 != v2) & (first | (k2 < k))) | (first & ((v2 > v) | ((v2 == v) & (k2 < k))))
    return (v2, k2) if take else (v, k)


@_scalar
def argmin_fold(v, k, v2, k2):
    first = v == v
    take = ((v2 != v2) & (first | (k2 < k))) | (first & ((v2 < v) | ((v2 == v) & (k2 < k))))
    return (v2, k2) if take else (v, k)


@_scalar
def lse_fold(m, s, m2, s2):
    """Merge (max, sum of exp(x - max)) pairs. A NaN element never becomes the max: it turns the
    sum into NaN. Infinite maxima are resolved by ``lse_final``, as the CPU kernel does."""
    if m2 > m:
        m, s, m2, s2 = m2, s2, m, s
    if m2 == -math.inf:  # contributes nothing, but a NaN sum stays NaN
        return m, s + s2 * 0.0
    if m2 == m:
        return m, s + s2
    return m, s + s2 * vexp(m2 - m)


@_scalar
def value(v, w):
    return v


@_scalar
def index(v, w):
    return w


@_scalar
def lse_final(m, s):
    if m == math.inf or m == -math.inf:
        return m
    return m + math.log(s)


@_scalar
def first_index(xs, m):
    """The first i with xs[i] == m (the first NaN where m is NaN); m is in xs. Tested 64 elements
    at a time, with | (no early exit), which vectorizes."""
    nan = m != m
    for s in range(0, xs.shape[0], 64):
        xc = xs[s:s + 64]
        hit = False
        for i in range(xc.shape[0]):
            hit |= (xc[i] == m) | (nan & (xc[i] != xc[i]))
        if hit:
            i = 0
            while not ((xc[i] == m) | (nan & (xc[i] != xc[i]))):
                i += 1
            return s + i
    return 0


def _acc_dtype(dtype, kind):
    if kind in ("sum", "prod"):
        if dtype == np.float32:
            return np.float64
        if dtype.kind in "biu":
            return np.int64
    return dtype


def _lowest(dtype):
    return -np.inf if dtype.kind == "f" else (False if dtype.kind == "b" else np.iinfo(dtype).min)


def _highest(dtype):
    return np.inf if dtype.kind == "f" else (True if dtype.kind == "b" else np.iinfo(dtype).max)


def _acc_zero(kind, v):
    return lambda dt: (np.dtype(_acc_dtype(dt, kind)).type(v), np.int64(0))


_FIRST = np.iinfo(np.int64).max  # index of the empty argmax/argmin state: any element comes first


class Reduction(NamedTuple):
    fold: str  # name of the fold of states above
    element_w: str  # source of the w of the element at position r
    final: str  # name of the function from state to result
    init: Callable  # x's dtype -> the empty state (v0, w0), v0 in the accumulator's dtype
    values: str = None  # arg kinds: the reduction of the values alone (lets the CPU skip blocks)


REDUCTIONS = {
    "sum": Reduction("sum_fold", "r", "value", _acc_zero("sum", 0)),
    "prod": Reduction("prod_fold", "r", "value", _acc_zero("prod", 1)),
    "amax": Reduction("amax_fold", "r", "value", lambda dt: (dt.type(_lowest(dt)), np.int64(0))),
    "amin": Reduction("amin_fold", "r", "value", lambda dt: (dt.type(_highest(dt)), np.int64(0))),
    "argmax": Reduction("argmax_fold", "r", "index", lambda dt: (dt.type(_lowest(dt)), np.int64(_FIRST)), "amax"),
    "argmin": Reduction("argmin_fold", "r", "index", lambda dt: (dt.type(_highest(dt)), np.int64(_FIRST)), "amin"),
    "logsumexp": Reduction("lse_fold", "1.0", "lse_final", lambda dt: (dt.type(-np.inf), np.float64(0))),
}

# scan -> its reduction
SCANS = {"cumsum": "sum", "cumprod": "prod", "cummax": "amax", "cummin": "amin", "logcumsumexp": "logsumexp"}


def result_dtype(kind, dtype):
    """dtype of reduction (or scan) ``kind`` of an array of ``dtype``."""
    kind = SCANS.get(kind, kind)
    if kind in ("argmax", "argmin"):
        return np.dtype(np.int64)
    if kind in ("sum", "prod"):
        return dtype if dtype.kind == "f" else np.dtype(np.int64)
    return dtype


def fold_functions(kind):
    """The names of the scalar functions reduction ``kind`` uses (for the device backends)."""
    r = REDUCTIONS[kind]
    return [r.fold, r.final] + ([REDUCTIONS[r.values].fold] if r.values else [])


# ---------------------------------------------------------------- CPU loops, generated per kind
# Each task folds x[a, rows of its chunk c, its columns] from the empty state (v0, w0); with one
# chunk (pv.shape[1] == 1) it writes the result, else its partial state for _MERGE. Inner loops
# index contiguous slices from 0: a loop from an offset, whose sign LLVM cannot know, is compiled
# with numba's wraparound of negative indices, into gathers instead of vector loads.

# B == 1, x as (A, R): one register state per contiguous row, which LLVM vectorizes.
_ROWS = """
def _{name}(x, pv, pw, out, v0, w0):
    A, R = x.shape
    C = pv.shape[1]
    for t in prange(A * C):
        a, c = t // C, t % C
        r0 = R * c // C
        xs = x[a, r0:R * (c + 1) // C]
        v, w = v0, w0
        for i in range(xs.shape[0]):
            r = r0 + i
            v, w = {fold}(v, w, xs[i], {element_w})
        if C == 1:
            out[a, 0] = {final}(v, w)
        else:
            pv[a, c, 0] = v
            {store_w}
"""

# Arg reductions of rows: the values of each block of SKIP elements are folded alone (vectorized);
# only a block whose best value beats the state is searched, for the first element that is that value.
_ARG_ROWS = """
def _{name}(x, pv, pw, out, v0, w0):
    A, R = x.shape
    C = pv.shape[1]
    for t in prange(A * C):
        a, c = t // C, t % C
        r0 = R * c // C
        xc = x[a, r0:R * (c + 1) // C]
        v, w = v0, w0
        for s in range(0, xc.shape[0], SKIP):
            xs = xc[s:s + SKIP]
            m = xs[0]
            for i in range(1, xs.shape[0]):
                m = {values}(m, w, xs[i], i)[0]
            if {fold}(v, w, m, r0 + s)[1] != w:
                v, w = {fold}(v, w, m, r0 + s + first_index(xs, m))
        if C == 1:
            out[a, 0] = {final}(v, w)
        else:
            pv[a, c, 0] = v
            pw[a, c, 0] = w
"""

# B > 1: the states of a tile of up to COLS columns live in pv (and pw), updated a row at a time,
# which vectorizes across the columns.
_COLS = """
def _{name}(x, pv, pw, out, v0, w0):
    A, R, B = x.shape
    C = pv.shape[1]
    nb = (B + COLS - 1) // COLS
    for t in prange(A * C * nb):
        a, c, b0 = t // (C * nb), t // nb % C, t % nb * COLS
        b1 = min(b0 + COLS, B)
        vs = pv[a, c, b0:b1]
        {ws}
        for j in range(vs.shape[0]):
            vs[j] = v0
            {init_w}
        for r in range(R * c // C, R * (c + 1) // C):
            xs = x[a, r, b0:b1]
            for j in range(vs.shape[0]):
                vs[j], {acc_w} = {fold}(vs[j], {w}, xs[j], {element_w})
        if C == 1:
            for j in range(vs.shape[0]):
                out[a, b0 + j] = {final}(vs[j], {w})
"""

# The partial states of the chunks of R, folded in order.
_MERGE = """
def _{name}(pv, pw, out, v0, w0):
    A, C, B = pv.shape
    for t in prange(A * B):
        a, b = t // B, t % B
        v, w = v0, w0
        for c in range(C):
            v, w = {fold}(v, w, pv[a, c, b], {w})
        out[a, b] = {final}(v, w)
"""

# Running fold along R. B == 1, x and out as (A, R): the state of a row stays in registers.
_SCAN_ROWS = """
def _{name}(x, out, v0, w0):
    A, R = x.shape
    for a in prange(A):
        xs, os = x[a], out[a]
        v, w = v0, w0
        for r in range(R):
            v, w = {fold}(v, w, xs[r], {element_w})
            os[r] = {final}(v, w)
"""

# B > 1: the states of a tile of columns live in sv, sw.
_SCAN = """
def _{name}(x, out, sv, sw, v0, w0):
    A, R, B = x.shape
    nb = (B + COLS - 1) // COLS
    for t in prange(A * nb):
        a, b0 = t // nb, t % nb * COLS
        b1 = min(b0 + COLS, B)
        vs, ws = sv[a, b0:b1], sw[a, b0:b1]
        for j in range(vs.shape[0]):
            vs[j] = v0
            ws[j] = w0
        for r in range(R):
            xs, os = x[a, r, b0:b1], out[a, r, b0:b1]
            for j in range(vs.shape[0]):
                v, w = {fold}(vs[j], ws[j], xs[j], {element_w})
                vs[j] = v
                ws[j] = w
                os[j] = {final}(v, w)
"""


def _generate(template, name, **fields):
    exec(compile(template.format(name=name, **fields), __file__, "exec"), globals())
    return globals()["_" + name]


def _paired(kind):
    """Whether the w of ``kind``'s state is used (an index, a sum), so that partial states keep it."""
    return REDUCTIONS[kind].final != "value"


def _loops(kind):
    r = REDUCTIONS[kind]
    paired = _paired(kind)
    fields = dict(fold=r.fold, element_w=r.element_w, final=r.final)
    rows = _generate(_ARG_ROWS, kind + "_rows", values=REDUCTIONS[r.values].fold, **fields) if r.values else \
        _generate(_ROWS, kind + "_rows", store_w="pw[a, c, 0] = w" if paired else "pass", **fields)
    cols = _generate(_COLS, kind + "_cols", ws="ws = pw[a, c, b0:b1]" if paired else "pass",
                     init_w="ws[j] = w0" if paired else "pass", acc_w="ws[j]" if paired else "_w",
                     w="ws[j]" if paired else "w0", **fields)
    merge = _generate(_MERGE, kind + "_merge", w="pw[a, c, b]" if paired else "w0", **fields)
    return rows, cols, merge


def _scans(scan):
    fields = {k: getattr(REDUCTIONS[SCANS[scan]], k) for k in ("fold", "element_w", "final")}
    return _generate(_SCAN_ROWS, scan + "_rows", **fields), _generate(_SCAN, scan + "_cols", **fields)


_GENERATED = [f for kind in REDUCTIONS if kind != "logsumexp" for f in _loops(kind)] + \
    [f for scan in SCANS for f in _scans(scan)]


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


_KERNELS = {f.__name__[1:]: twins(f, fastmath=config.FOLD_FASTMATH) for f in _GENERATED + [_logsumexp]}


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
    if out.dtype != x.dtype and kind != "logsumexp":
        out = out.astype(_plan(kind, x.dtype).result, copy=False)
    return out.reshape(out_shape)


def _chunks(tasks, R, width):
    """How many chunks of R to fold apart so that the threads have tasks enough; each chunk keeps
    at least 32K elements, which costs far more than folding its partial state."""
    return max(1, min(-(-4 * numba.get_num_threads() // tasks), R * width // 32768))


class _Plan(NamedTuple):
    v0: object  # the empty state
    w0: object
    out: np.dtype  # of the kernels' result (the accumulator's, or int64 for an index)
    result: np.dtype  # of reduce()'s result
    paired: bool  # whether partial states keep w
    pv: np.ndarray  # (1, 1, 1) stand-ins for the partial states of a kernel that has none (one chunk)
    pw: np.ndarray


_PLANS = {}  # (kind, dtype) -> _Plan: small reductions spend their time here, not in the loops


def _plan(kind, dtype):
    p = _PLANS.get((kind, dtype))
    if p is None:
        v0, w0 = REDUCTIONS[kind].init(dtype)
        out = w0.dtype if REDUCTIONS[kind].final == "index" else v0.dtype
        p = _PLANS[(kind, dtype)] = _Plan(v0, w0, out, result_dtype(kind, dtype), _paired(kind),
                                          np.empty((1, 1, 1), v0.dtype), np.empty((1, 1, 1), w0.dtype))
    return p


def _reduce_acc(kind, x, dims):
    """The reduction as (A, B), in the accumulator's dtype."""
    x3 = reduce_layout(x, dims)
    A, R, B = x3.shape
    if kind == "logsumexp":
        out = np.empty((A, B), x.dtype)
        kernel(kind, x.size)(x3, out)
        return out
    p = _plan(kind, x.dtype)
    parallel = x.size >= config.PARALLEL_THRESHOLD
    ufunc = _NUMPY_FOLDS.get(kind)
    if ufunc is not None and not parallel and R:
        return ufunc.reduce(x3, axis=1, dtype=p.out)
    out = np.empty((A, B), p.out)
    C = _chunks(A * -(-B // COLS), R, min(B, COLS)) if parallel else 1
    if C == 1:  # no partial states: rows keep theirs in registers, columns in out when single-part
        pv = p.pv if B == 1 else np.empty((A, 1, B), p.v0.dtype) if p.paired else out.reshape(A, 1, B)
        pw = np.empty((A, 1, B), p.w0.dtype) if B > 1 and p.paired else p.pw
    else:
        pv = np.empty((A, C, B), p.v0.dtype)
        pw = np.empty((A, C, B), p.w0.dtype) if p.paired else p.pw
    kernel(kind + ("_rows" if B == 1 else "_cols"), x.size)(x3.reshape(A, R) if B == 1 else x3, pv, pw, out, p.v0,
                                                            p.w0)
    if C > 1:
        if ufunc is not None:
            ufunc.reduce(pv, axis=1, out=out)
        else:
            kernel(kind + "_merge", 0)(pv, pw, out, p.v0, p.w0)
    return out


# The kinds whose state is one value, with the NumPy ufunc that folds it the same way (max/min
# propagate NaN, as llvm.maximum does). Serial reductions of these kinds, and the merge of their
# parallel partial states, run in NumPy: as fast at those sizes, and no kernels to compile on the
# first use of a model (a training step's first sums spent most of their time compiling).
_NUMPY_FOLDS = {"sum": np.add, "prod": np.multiply, "amax": np.maximum, "amin": np.minimum}


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
    """Running reduction of ``x`` along ``dim``: kind in SCANS (cumsum and
    cumprod accumulate in the reduction's dtype)."""
    if kind not in SCANS:
        raise ValueError("unknown scan kind: %s" % kind)
    x3 = reduce_layout(x, (dim,))
    A, R, B = x3.shape
    p = _plan(SCANS[kind], x.dtype)
    out = np.empty(x3.shape, p.v0.dtype)
    if B == 1:
        kernel(kind + "_rows", x.size)(x3.reshape(A, R), out.reshape(A, R), p.v0, p.w0)
    else:
        kernel(kind + "_cols", x.size)(x3, out, np.empty((A, B), p.v0.dtype), np.empty((A, B), p.w0.dtype), p.v0, p.w0)
    return out.astype(p.result, copy=False).reshape(x.shape)