"""The GEMM of NumPy's OpenBLAS, called from inside numba kernels.

A kernel that runs a loop of small GEMMs (an RNN layer's steps) calls BLAS without going back to
Python between them. The function's address is an argument of the kernel (a run-time value), so the
compiled kernel stays in numba's on-disk cache. Only a 64-bit-integer OpenBLAS (the one NumPy's
wheels ship) is used; ``GEMM`` is None otherwise, and callers keep their NumPy path.
"""
import ctypes

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core.extending import intrinsic

from . import config

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
