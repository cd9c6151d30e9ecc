"""NumPy's OpenBLAS GEMM: called from inside numba kernels, and the thread policy of every CPU GEMM.

A kernel that runs a loop of small GEMMs (an RNN layer's steps) calls BLAS without going back to
Python between them. The function's address is an argument of the kernel (a run-time value), so the
compiled kernel stays in numba's on-disk cache. Only a 64-bit-integer OpenBLAS (the one NumPy's
wheels ship) is used; ``GEMM`` is None otherwise, and callers keep their NumPy path.

``matmul`` runs a small product on one OpenBLAS thread and a large one as blocks on numba's threads
(``split_gemm``), each block a one-thread OpenBLAS call: the elementwise kernels and the GEMMs of a step then
share one thread pool (config.SPLIT_GEMM says why).
"""
import ctypes

import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.core.extending import intrinsic

from . import config
from ._jit import Building, not_yet, twins

_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112


def _addresses():
    """{dtype: address of cblas_?gemm}, or None."""
    if config.OPENBLAS is None:
        return None
    lib, prefix, suffix = config.OPENBLAS
    if suffix != "64_":
        return None
    try:
        return {np.dtype(dt): ctypes.cast(getattr(lib, prefix[:-len("openblas")] + "cblas_%sgemm" % c + suffix),
                                          ctypes.c_void_p).value
                for dt, c in (("float32", "s"), ("float64", "d"))}
    except AttributeError:
        return None


GEMM = _addresses()


@intrinsic
def _cblas_gemm(typingctx, fn, trans_b, m, n, k, a, lda, b, ldb, c, ldc):
    """cblas_?gemm(RowMajor, NoTrans, trans_b, m, n, k, 1, a, lda, b, ldb, 0, c, ldc) through address ``fn``."""
    if not all(isinstance(x, types.Array) and x.dtype == c.dtype for x in (a, b, c)) or \
            c.dtype not in (types.float32, types.float64):
        return None

    def codegen(context, builder, signature, args):
        fn, trans_b, m, n, k, a, lda, b, ldb, c, ldc = args
        at, bt, ct = signature.args[5], signature.args[7], signature.args[9]
        i32, i64 = ir.IntType(32), ir.IntType(64)
        fty = context.get_value_type(ct.dtype)
        ptr = fty.as_pointer()
        fnty = ir.FunctionType(ir.VoidType(), [i32, i32, i32, i64, i64, i64, fty, ptr, i64, ptr, i64, fty, ptr, i64])
        call = builder.inttoptr(fn, fnty.as_pointer())
        data = lambda v, ty: context.make_array(ty)(context, builder, v).data  # noqa: E731
        ints = [context.cast(builder, v, ty, types.int64) for v, ty in
                zip((m, n, k, lda, ldb, ldc), [signature.args[i] for i in (2, 3, 4, 6, 8, 10)])]
        tb = builder.select(context.cast(builder, trans_b, signature.args[1], types.boolean),
                            ir.Constant(i32, _TRANS), ir.Constant(i32, _NO_TRANS))
        builder.call(call, [ir.Constant(i32, _ROW_MAJOR), ir.Constant(i32, _NO_TRANS), tb, ints[0], ints[1], ints[2],
                            ir.Constant(fty, 1.0), data(a, at), ints[3], data(b, bt), ints[4], ir.Constant(fty, 0.0),
                            data(c, ct), ints[5]])
        return context.get_dummy_value()
    return types.void(fn, trans_b, m, n, k, a, lda, b, ldb, c, ldc), codegen


@njit(error_model="numpy", inline="always")
def gemm(fn, a, b, out, trans_b):
    """out = a @ b (a @ b.T where ``trans_b``) through the cblas_?gemm at address ``fn``: a, b and out are
    row-major with unit-stride rows (C-contiguous arrays, or blocks of their rows)."""
    m, k = a.shape
    if m == 0 or out.shape[1] == 0:
        return
    if k == 0:
        out[:] = 0
        return
    size = a.itemsize
    _cblas_gemm(fn, trans_b, m, out.shape[1], k, a, a.strides[0] // size, b, b.strides[0] // size, out,
                out.strides[0] // size)


@intrinsic
def _cblas_gemm_at(typingctx, fn, one, trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc):
    """cblas_?gemm(RowMajor, trans_a, trans_b, m, n, k, 1, a, lda, b, ldb, 0, c, ldc) through address ``fn``, the
    matrices given by address (``one``: a number of their dtype, float32 or float64)."""
    if one not in (types.float32, types.float64):
        return None

    def codegen(context, builder, signature, args):
        fn, _, trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc = args
        i32, i64 = ir.IntType(32), ir.IntType(64)
        fty = context.get_value_type(signature.args[1])
        ptr = fty.as_pointer()
        fnty = ir.FunctionType(ir.VoidType(), [i32, i32, i32, i64, i64, i64, fty, ptr, i64, ptr, i64, fty, ptr, i64])
        call = builder.inttoptr(fn, fnty.as_pointer())
        ints = [context.cast(builder, v, signature.args[i], types.int64) for v, i in
                zip((m, n, k, a, lda, b, ldb, c, ldc), (4, 5, 6, 7, 8, 9, 10, 11, 12))]
        flags = [builder.select(context.cast(builder, t, signature.args[i], types.boolean), ir.Constant(i32, _TRANS),
                                ir.Constant(i32, _NO_TRANS)) for t, i in ((trans_a, 2), (trans_b, 3))]
        builder.call(call, [ir.Constant(i32, _ROW_MAJOR), flags[0], flags[1], ints[0], ints[1], ints[2],
                            ir.Constant(fty, 1.0), builder.inttoptr(ints[3], ptr), ints[4],
                            builder.inttoptr(ints[5], ptr), ints[6], ir.Constant(fty, 0.0),
                            builder.inttoptr(ints[7], ptr), ints[8]])
        return context.get_dummy_value()
    return types.void(fn, one, trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc), codegen


def _gemm_blocks(fn, one, trans_a, trans_b, m, n, k, a, lda, row_a, mat_a, b, ldb, col_b, mat_b, c, size, batch, rows,
                 cols):
    """c[i] = op(a[i]) @ op(b[i]) for i < ``batch`` in blocks of ``rows`` rows and ``cols`` columns of c (C-contiguous),
    each one GEMM call (matrices by address; ``row_a``: bytes from one row of op(a) to the next, ``col_b`` from one
    column of op(b) to the next, ``mat_a``, ``mat_b`` from one matrix to the next)."""
    rb, cb = -(-m // rows), -(-n // cols)
    for q in prange(batch * rb * cb):
        i, r = divmod(q, rb * cb)
        r0, c0 = r // cb * rows, r % cb * cols
        _cblas_gemm_at(fn, one, trans_a, trans_b, min(rows, m - r0), min(cols, n - c0), k, a + i * mat_a + r0 * row_a,
                       lda, b + i * mat_b + c0 * col_b, ldb, c + ((i * m + r0) * n + c0) * size, n)


_GEMM_BLOCKS = twins(_gemm_blocks, meanwhile=not_yet)  # (NumPy's GEMM runs while it builds)
BLOCK = 128  # rows or columns of c a call computes: fixed, so that the values do not depend on the thread count
BLOCK_WORK = 1 << 22  # multiply-adds a block of columns takes at least (its width a multiple of BLOCK)


def _operand(x):
    """(transposed, leading dimension) of a matrix (or each matrix of a batch) whose rows or columns have unit
    stride, else None."""
    size = x.itemsize
    s0, s1 = x.strides[-2:]
    if s1 == size and s0 >= max(x.shape[-1], 1) * size:
        return False, s0 // size
    if s0 == size and s1 >= max(x.shape[-2], 1) * size:
        return True, s1 // size
    return None


def matmul(a, b, out=None):
    """np.matmul(a, b, out): on one OpenBLAS thread where the product is small (config.SMALL_GEMM), a larger one on
    numba's threads in one-thread OpenBLAS calls where its operands allow (config.SPLIT_GEMM)."""
    threads = config.OPENBLAS_THREADS
    work = a.size * b.shape[-1] if a.ndim >= 2 and b.ndim >= 2 else 0
    if threads is None or work < config.THREADED_GEMM:
        return np.matmul(a, b, out=out)
    if work < config.SMALL_GEMM:
        return config.on_one_thread(threads, np.matmul, a, b, out)
    if config.SPLIT_GEMM and config.threads() > 1:
        got = config.on_one_thread(threads, split_gemm, a, b, out)
        if got is not None:
            return got
    return np.matmul(a, b, out=out)


def split_gemm(a, b, out=None):
    """a @ b (float32 or float64 matrices of one dtype, or batches of one size of them; into ``out`` where given, a
    C-contiguous array) on numba's threads, in blocks of BLOCK rows of each result (of BLOCK columns where it has
    too few rows; whole matrices where it has too few of both), each block one OpenBLAS call, which the caller
    keeps on one thread. None where it does not apply (another dtype, a matrix without a unit stride, fewer than
    two blocks, an ``out`` of another layout, no 64-bit-integer OpenBLAS) or cannot yet (its parallel build
    compiling in the background)."""
    if GEMM is None or a.dtype != b.dtype or a.dtype not in GEMM or a.ndim != b.ndim or a.ndim not in (2, 3) or \
            a.shape[:-2] != b.shape[:-2] or 0 in a.shape or 0 in b.shape:
        return None
    m, k = a.shape[-2:]
    n = b.shape[-1]
    batch = a.shape[0] if a.ndim == 3 else 1
    # (a block of few rows gets more columns: a call of under BLOCK_WORK multiply-adds costs its overhead again)
    wide = max(BLOCK, -(-BLOCK_WORK // max(m * k, 1)) // BLOCK * BLOCK)
    rows, cols = (BLOCK, n) if m >= 2 * BLOCK else (m, wide) if n >= 2 * wide else (m, n)
    fa, fb = _operand(a), _operand(b)
    if fa is None or fb is None or batch * -(-m // rows) * -(-n // cols) < 2:
        return None
    size = a.itemsize
    if out is None:
        out = np.empty(a.shape[:-1] + (n,), a.dtype)
    elif out.shape != a.shape[:-1] + (n,) or out.dtype != a.dtype or not out.flags.c_contiguous:
        return None
    mat_a, mat_b = (a.strides[0], b.strides[0]) if a.ndim == 3 else (0, 0)
    try:
        _GEMM_BLOCKS[1](GEMM[a.dtype], a.dtype.type(1), fa[0], fb[0], m, n, k, a.ctypes.data, fa[1],
                        size if fa[0] else fa[1] * size, mat_a, b.ctypes.data, fb[1], fb[1] * size if fb[0] else size,
                        mat_b, out.ctypes.data, size, batch, rows, cols)
    except Building:
        return None
    return out


def precompile(dtypes):
    """Ask for the blocked GEMM's builds in ``dtypes`` (jitgrad.precompile: no table sample is large enough)."""
    for dtype in dtypes:
        split_gemm(np.ones((2 * BLOCK, 1), dtype), np.ones((1, 1), dtype))
