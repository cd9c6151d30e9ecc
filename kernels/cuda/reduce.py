"""CUDA twins of kernels/reduce.py: block-parallel reductions, scans and softmax over (A, R, B).

As on the CPU, every kernel reads a 3-D view ``x[A, R, B]`` and reduces (or scans) its middle
axis R. A block of (tb, tr) threads owns one row ``a`` and a tile of ``tb`` neighbouring columns
``b``: up to REDUCE_TILE of them, so loads coalesce across b. The block's tr thread rows stride
through R and meet in a shared-memory tree. When A * B blocks are too few to fill the GPU, R is
also split across blocks (blockIdx.y): each writes a partial state and a second launch folds the
partials.

Reductions with B == 1 (contiguous rows: the last axis, or a whole array) have a template of their
own, _ROWS: a block of ROWS_THREADS threads per row of a 2-D view x[A, R], each with UNROLL loads in
flight, whose states meet through warp shuffles, then through 32 shared slots (one per warp), with
two barriers a row. Summing the rows of an 8192 x 8192 float32 matrix on an H100, the general
template read 0.58 of a copy's bandwidth, this one 0.96. States of a dtype that cannot be shuffled
(bool, small ints) keep the general template.

The kinds are kernels/reduce.py's REDUCTIONS and SCANS: the same scalar folds over (v, w) states
and final steps, compiled here as device functions (with DEVICE_MATH and DEVICE_FUNCTIONS in place
of the CPU's primitives), and one template per algorithm generates the kernels of every kind.
"""
import inspect
import math
import re

import numpy as np
from numba import cuda, float64, from_dtype

from . import _launch as L
from .array import ascontiguous, reshape, transpose
from .. import reduce as CR

THREADS = L.THREADS  # shared-memory size of every block: a compile-time constant, in every kernel's name
UNROLL = 4  # elements a reduction thread loads before it folds them
FLAT = True
ROWS = True  # B == 1 reductions through _ROWS (False: the general template, for comparisons)
ROWS_THREADS = THREADS  # threads per row of _ROWS: a multiple of 32 up to 1024, or a power of two below 32
ROWS_GRID = L.max_blocks() if L.SIM else 1 << 16  # most blocks of a _ROWS launch: one per row, up to this
_SHUFFLED = {np.dtype(t) for t in ("int32", "int64", "float32", "float64")}  # what cuda.shfl_down_sync moves
KINDS = CR.REDUCTIONS

_MATH = dict(CR.DEVICE_MATH, **{name: L.device_jit(f) for name, f in CR.DEVICE_FUNCTIONS.items()})
_FUNCTIONS = sorted({name for kind in KINDS for name in CR.fold_functions(kind)})
for _name in _FUNCTIONS:  # the scalar folds of kernels/reduce.py as device functions, named _<fold>
    globals()["_" + _name] = L.device_jit(L.function_with_globals(getattr(CR, _name).py_func, **_MATH))


def _source(kind):
    """The source of what the kernels of ``kind`` inline: part of their cached names."""
    return "".join(inspect.getsource(f) for f in [getattr(CR, n).py_func for n in CR.fold_functions(kind)] +
                   list(CR.DEVICE_FUNCTIONS.values()))


# ---------------------------------------------------------------- kernel templates
# src: x[A, R, B] (first pass, src_w unused) or partial states (src, src_w)[A, chunks, B] (second
# pass). With one chunk (gridDim.y == 1) the block writes the result, else its partial state.
_REDUCE = """
def {name}(src, src_w, pv, pw, out, v0, w0, xs, ws):
    tb = cuda.blockDim.x
    tr = cuda.blockDim.y
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    t = ty * tb + tx
    A, R, B = src.shape
    nchunk = cuda.gridDim.y
    chunk = cuda.blockIdx.y
    r0 = R * chunk // nchunk
    r1 = R * (chunk + 1) // nchunk
    shv = cuda.shared.array({threads}, pv.dtype)
    shw = cuda.shared.array({threads}, pw.dtype)
    ntile = (B + tb - 1) // tb
    for task in range(cuda.blockIdx.x, A * ntile, cuda.gridDim.x):
        a = task // ntile
        b = task % ntile * tb + tx
        v = v0
        w = w0
        if b < B:
            r = r0 + ty
            i = (a * R + r) * B + b
            s = tr * B
            while r + {last} * tr < r1:
{loads}
{folds}
                r += {unroll} * tr
                i += {unroll} * s
            while r < r1:
                v, w = {fold}(v, w, {element}, {element_w})
                r += tr
                i += s
        shv[t] = v
        shw[t] = w
        cuda.syncthreads()
        h = tr // 2
        while h > 0:
            if ty < h:
                v, w = {fold}(shv[t], shw[t], shv[t + h * tb], shw[t + h * tb])
                shv[t] = v
                shw[t] = w
            cuda.syncthreads()
            h //= 2
        if ty == 0 and b < B:
            if nchunk == 1:
                out[a, b] = {final}(shv[tx], shw[tx])
            else:
                pv[a, chunk, b] = shv[tx]
                pw[a, chunk, b] = shw[tx]
        cuda.syncthreads()
"""

# B == 1: src[A, R] (or partial states), a block of tr threads per row a, out[A]. Lane l of a warp folds
# in the state of lane l + off (the folds are symmetric in ties: argmax keeps the first index whatever
# the order), so lane 0 ends with its warp's state; past one warp, lane 0 of each puts it in a shared
# slot and every warp folds the slots alike (every thread then runs every shuffle, which the
# simulator's stand-in for them needs).
_ROWS = """
def {name}(src, src_w, pv, pw, out, v0, w0):
    t = cuda.threadIdx.x
    tr = cuda.blockDim.x
    A, R = src.shape
    nchunk = cuda.gridDim.y
    chunk = cuda.blockIdx.y
    r0 = R * chunk // nchunk
    r1 = R * (chunk + 1) // nchunk
    shv = cuda.shared.array(32, pv.dtype)
    shw = cuda.shared.array(32, pw.dtype)
    for a in range(cuda.blockIdx.x, A, cuda.gridDim.x):
        v = v0
        w = w0
        r = r0 + t
        while r + {last} * tr < r1:
{loads}
{folds}
            r += {unroll} * tr
        while r < r1:
            v, w = {fold}(v, w, {element}, {element_w})
            r += tr
        off = min(32, tr) // 2  # a block narrower than a warp (the simulator's) folds its lanes only
        while off > 0:
            v, w = {fold}(v, w, _shfl_down(0xffffffff, v, off), _shfl_down(0xffffffff, w, off))
            off //= 2
        if tr > 32:
            if t % 32 == 0:
                shv[t // 32] = v
                shw[t // 32] = w
            cuda.syncthreads()
            v = v0
            w = w0
            if t % 32 < tr // 32:
                v = shv[t % 32]
                w = shw[t % 32]
            cuda.syncthreads()  # the slots are read before the next row writes them
            off = 16
            while off > 0:
                v, w = {fold}(v, w, _shfl_down(0xffffffff, v, off), _shfl_down(0xffffffff, w, off))
                off //= 2
        if t == 0:
            if nchunk == 1:
                out[a] = {final}(v, w)
            else:
                pv[a, chunk] = v
                pw[a, chunk] = w
"""

# Inclusive scan: the block walks R in segments of tr rows; each segment is a Hillis-Steele scan
# of states in shared memory, folded after the carried state of the segments before it.
_SCAN = """
def {name}(x, out, v0, w0):
    tb = cuda.blockDim.x
    tr = cuda.blockDim.y
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    t = ty * tb + tx
    A, R, B = x.shape
    shv = cuda.shared.array({threads}, {vtype})
    shw = cuda.shared.array({threads}, {wtype})
    ntile = (B + tb - 1) // tb
    for task in range(cuda.blockIdx.x, A * ntile, cuda.gridDim.x):
        a = task // ntile
        b = task % ntile * tb + tx
        cv = v0
        cw = w0
        for r0 in range(0, R, tr):
            r = r0 + ty
            v = v0
            w = w0
            if b < B and r < R:
                v, w = {fold}(v0, w0, x[a, r, b], {element_w})
            shv[t] = v
            shw[t] = w
            cuda.syncthreads()
            k = 1
            while k < tr:
                lv = v0
                lw = w0
                if ty >= k:
                    lv = shv[t - k * tb]
                    lw = shw[t - k * tb]
                cuda.syncthreads()
                v, w = {fold}(lv, lw, shv[t], shw[t])
                shv[t] = v
                shw[t] = w
                cuda.syncthreads()
                k *= 2
            if b < B and r < R:
                v, w = {fold}(cv, cw, shv[t], shw[t])
                out[a, r, b] = {final}(v, w)
            cv, cw = {fold}(cv, cw, shv[(tr - 1) * tb + tx], shw[(tr - 1) * tb + tx])
            cuda.syncthreads()
"""

_kernels = {}


def _kernel(template, name, kind, fields):
    """Kernel ``name`` of ``template``, generated at its first use with the fields ``fields()`` returns
    (a callable: the unrolled loops' fields take regular expressions, too slow for every launch)."""
    k = _kernels.get(name)
    if k is None:
        r = KINDS[kind]
        fields = dict(dict(fold="_" + r.fold, final="_" + r.final, element_w=r.element_w), **fields())
        k = _kernels[name] = L.generate(template, name, globals(), __file__, salt=_source(kind), threads=THREADS,
                                        **fields)
    return k


def _unrolled(fold, element, element_w, unroll, indent=16):
    """The template's fields for a loop that loads ``unroll`` elements before folding them in order with
    ``fold``: a thread's loads are then in flight together (one at a time left the loop latency-bound).
    ``element`` and ``element_w`` read the element at row r (flat index i) of the thread's column."""
    def at(expr, k):
        return re.sub(r"\bi\b", "(i + %d * s)" % k, re.sub(r"\br\b", "(r + %d * tr)" % k, expr))
    pad = " " * indent
    return dict(unroll=unroll, last=unroll - 1, element=element, element_w=element_w,
                loads="\n".join("%se%d = %s\n%sew%d = %s" % (pad, k, at(element, k), pad, k, at(element_w, k))
                                 for k in range(unroll)),
                folds="\n".join("%sv, w = %s(v, w, e%d, ew%d)" % (pad, fold, k, k) for k in range(unroll)))


def _reduce_kernel(kind, partials, unroll=UNROLL):
    # FLAT: elements read through the arrays' 1-D views (xs, ws) at a flat index stepped by tr * B, not
    # through 3-D indexing, whose per-element index arithmetic showed in the loop on a GPU
    element = "xs[i]" if FLAT else "src[a, r, b]"
    element_w = ("ws[i]" if FLAT else "src_w[a, r, b]") if partials else KINDS[kind].element_w
    return _kernel(_REDUCE, "_reduce_%s_%s_u%d%s" % (kind, "partials" if partials else "x", unroll,
                                                    "_flat" if FLAT else ""), kind,
                   lambda: _unrolled("_" + KINDS[kind].fold, element, element_w, unroll))


def _rows_kernel(kind, partials, unroll=UNROLL):
    # 2-D src[a, r]: indexing the 3-D view as src[a, r, 0] multiplies r by B at every load, which left the
    # kernel at about 0.85 of a copy's bandwidth on an H100, against 0.96
    element_w = "src_w[a, r]" if partials else KINDS[kind].element_w
    return _kernel(_ROWS, "_rows_%s_%s_u%d" % (kind, "partials" if partials else "x", unroll), kind,
                   lambda: _unrolled("_" + KINDS[kind].fold, "src[a, r]", element_w, unroll, indent=12))


if L.SIM:
    _lanes = {}

    @L.device_jit
    def _shfl_down(mask, v, delta):
        """cuda.shfl_down_sync, which the simulator lacks, where every thread of the block calls it: the
        values meet in a dict between two barriers. Past the warp (or block) a lane gets its own value."""
        t = cuda.threadIdx.x
        block = (cuda.blockIdx.x, cuda.blockIdx.y)
        _lanes[block, t] = v
        cuda.syncthreads()
        got = _lanes[block, t + delta] if t % 32 + delta < 32 and t + delta < cuda.blockDim.x else v
        cuda.syncthreads()
        return got
else:
    _shfl_down = cuda.shfl_down_sync


def _dtype_name(dtype):
    """A global of this module naming the numba type of ``dtype`` (for shared arrays)."""
    name = "_type_" + dtype.name
    globals().setdefault(name, from_dtype(dtype))
    return name


def _scan_kernel(kind, v0, w0):
    vt, wt = _dtype_name(v0.dtype), _dtype_name(w0.dtype)
    return _kernel(_SCAN, "_%s_%s_%s" % (kind, v0.dtype.name, w0.dtype.name), CR.SCANS[kind],
                   lambda: dict(vtype=vt, wtype=wt))


# ---------------------------------------------------------------- block-wide helpers (softmax)
def _block_fold(sh, v, tx, ty, tb, tr):
    """``_combine`` (a fold above) of ``v`` over the tr threads of column tx, returned to each of them."""
    t = ty * tb + tx
    sh[t] = v
    cuda.syncthreads()
    h = tr // 2
    while h > 0:
        if ty < h:
            sh[t] = _combine(sh[t], 0, sh[t + h * tb], 0)[0]  # noqa: F821  (bound per copy)
        cuda.syncthreads()
        h //= 2
    total = sh[tx]
    cuda.syncthreads()
    return total


_block_sum = L.device_jit(L.function_with_globals(_block_fold, _combine=_sum_fold))  # noqa: F821
_block_max = L.device_jit(L.function_with_globals(_block_fold, _combine=_amax_fold))  # noqa: F821  (NaN-propagating)


def _softmax(x, out, log):
    """softmax (log=False) or log_softmax (log=True) along R, max-shifted, in float64 like the CPU kernel."""
    tb = cuda.blockDim.x
    tr = cuda.blockDim.y
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    sh = cuda.shared.array(THREADS, float64)
    A, R, B = x.shape
    ntile = (B + tb - 1) // tb
    for task in range(cuda.blockIdx.x, A * ntile, cuda.gridDim.x):
        a = task // ntile
        b = task % ntile * tb + tx
        inside = b < B
        m = -math.inf
        if inside:
            for r in range(ty, R, tr):
                m = _amax_fold(m, 0, float64(x[a, r, b]), 0)[0]  # noqa: F821
        m = _block_max(sh, m, tx, ty, tb, tr)
        if m == -math.inf:
            m = 0.0
        s = 0.0
        if inside:
            for r in range(ty, R, tr):
                s += math.exp(x[a, r, b] - m)
        s = _block_sum(sh, s, tx, ty, tb, tr)
        if inside:
            if log:  # (x - m) - log(s), as on the CPU
                ls = math.log(s) if s > 0 else -math.inf  # (math.log(0) raises in the simulator)
                for r in range(ty, R, tr):
                    out[a, r, b] = (x[a, r, b] - m) - ls
            else:
                for r in range(ty, R, tr):
                    out[a, r, b] = math.exp(x[a, r, b] - m) / s


def _softmax_vjp(g, y, out, log):
    """VJP of softmax: y * (g - sum(g * y)); of log_softmax: g - exp(y) * sum(g)."""
    tb = cuda.blockDim.x
    tr = cuda.blockDim.y
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    sh = cuda.shared.array(THREADS, float64)
    A, R, B = g.shape
    ntile = (B + tb - 1) // tb
    for task in range(cuda.blockIdx.x, A * ntile, cuda.gridDim.x):
        a = task // ntile
        b = task % ntile * tb + tx
        inside = b < B
        s = 0.0
        if inside:
            for r in range(ty, R, tr):
                s += g[a, r, b] if log else g[a, r, b] * y[a, r, b]
        s = _block_sum(sh, s, tx, ty, tb, tr)
        if inside:
            for r in range(ty, R, tr):
                if log:
                    out[a, r, b] = g[a, r, b] - math.exp(y[a, r, b]) * s
                else:
                    out[a, r, b] = y[a, r, b] * (g[a, r, b] - s)


_softmax = L.jit(_softmax, tag="t%d" % THREADS)
_softmax_vjp = L.jit(_softmax_vjp, tag="t%d" % THREADS)


# ---------------------------------------------------------------- launch planning
def _block_shape(B):
    """(tb, tr): a tile of tb columns (the next power of two >= B, capped) and tr rows of threads."""
    tb = min(L.REDUCE_TILE, 1 << (B - 1).bit_length())
    return tb, THREADS // tb


def _rows_grid(A, B, tb):
    tasks = A * -(-B // tb)
    return tasks, min(tasks, L.max_blocks())


def _fold(kind, x3, out):
    """Reduce x3[A, R, B] over R into ``out`` (A * B elements, C-contiguous), splitting R across blocks when
    rows are too few."""
    A, R, B = x3.shape
    v0, w0 = KINDS[kind].init(x3.dtype)
    rows = ROWS and B == 1 and v0.dtype in _SHUFFLED  # (w0: int64 or float64)
    if rows:
        tr, tasks, blocks = ROWS_THREADS, A, min(A, ROWS_GRID)
    else:
        tb, tr = _block_shape(B)
        tasks, blocks = _rows_grid(A, B, tb)
    chunks = max(1, min(-(-R // (tr * L.REDUCE_MIN_PER_THREAD)), -(-L.reduce_blocks() // tasks), 65535))
    shape = (A, chunks) if rows else (A, chunks, B)
    if chunks > 1:  # partial states
        pv, pw = L.empty(shape, v0.dtype), L.empty(shape, w0.dtype)
    else:
        pv, pw = L.placeholder(v0.dtype, len(shape)), L.placeholder(w0.dtype, len(shape))
    if rows:  # (out as a Flat: a reshape of a numba device array costs 5 to 8 us of host time)
        out = L.flat(out)
        L.launch(_rows_kernel(kind, False), (blocks, chunks), tr, reshape(x3, (A, R)), pw, pv, pw, out, v0, w0)
        if chunks > 1:
            L.launch(_rows_kernel(kind, True), (blocks, 1), tr, pv, pw, pv, pw, out, v0, w0)
        return
    out = reshape(out, (A, B))
    L.launch(_reduce_kernel(kind, False), (blocks, chunks), (tb, tr), x3, pw, pv, pw, out, v0, w0, L.flat(x3),
             L.flat(pw))
    if chunks > 1:
        L.launch(_reduce_kernel(kind, True), (blocks, 1), (tb, tr), pv, pw, pv, pw, out, v0, w0, L.flat(pv), L.flat(pw))


def _row_launch(kernel, shape, *args):
    """Launch a block-per-(row, column tile) kernel over the (A, R, B) ``shape``."""
    A, R, B = shape
    tb, tr = _block_shape(B)
    L.launch(kernel, _rows_grid(A, B, tb)[1], (tb, tr), *args)


# ---------------------------------------------------------------- entry points (CPU signatures)
def reduce_layout(x, dims):
    """View (or copy) device array ``x`` as C-contiguous (A, R, B) with the axes ``dims`` (sorted,
    non-empty) in R."""
    shape = tuple(x.shape)
    if dims == tuple(range(dims[0], dims[-1] + 1)):
        x = x if L.is_c_contiguous(x) else ascontiguous(x)
        return reshape(x, (math.prod(shape[:dims[0]]), math.prod(shape[dims[0]:dims[-1] + 1]),
                           math.prod(shape[dims[-1] + 1:])))
    keep = [d for d in range(len(shape)) if d not in dims]
    xt = ascontiguous(transpose(x, keep + list(dims)))
    return reshape(xt, (math.prod([shape[d] for d in keep]), math.prod([shape[d] for d in dims]), 1))


def reduce(kind, x, dims):
    """Reduce ``x`` over ``dims`` with kind in sum/prod/amax/amin/argmax/argmin/logsumexp.

    Returns a device array of ``x.shape`` without ``dims`` (the caller restores keepdim).
    """
    out_shape = tuple(s for d, s in enumerate(x.shape) if d not in dims)
    out = L.empty(out_shape, CR.result_dtype(kind, x.dtype))
    if out.size:
        _fold(kind, reduce_layout(x, dims), out)
    return out


def scan(kind, x, dim):
    """Running reduction of ``x`` along ``dim``: kind in cumsum/cumprod/cummax/cummin (cumsum and
    cumprod accumulate in the reduction's dtype)."""
    if kind not in CR.SCANS:
        raise ValueError("unknown scan kind: %s" % kind)
    out = L.empty(tuple(x.shape), CR.result_dtype(kind, x.dtype))
    if out.size:
        x3 = reduce_layout(x, (dim,))
        v0, w0 = KINDS[CR.SCANS[kind]].init(x.dtype)
        _row_launch(_scan_kernel(kind, v0, w0), x3.shape, x3, reshape(out, x3.shape), v0, w0)
    return out


def softmax(x, dim, log):
    out = L.empty(tuple(x.shape), x.dtype)
    if out.size:
        x3 = reduce_layout(x, (dim,))
        _row_launch(_softmax, x3.shape, x3, reshape(out, x3.shape), log)
    return out


def softmax_vjp(g, y, dim, log):
    out = L.empty(tuple(g.shape), g.dtype)
    if out.size:
        g3, y3 = reduce_layout(g, (dim,)), reduce_layout(y, (dim,))
        _row_launch(_softmax_vjp, g3.shape, g3, y3, reshape(out, g3.shape), log)
    return out
