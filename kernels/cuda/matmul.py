"""GEMM on the device: a tiled shared-memory kernel, with NumPy's matmul semantics around it.

A block of TX x TY threads computes a BM x BN tile of the output (BM = TY * RM, BN = TX * RN):
each step stages a BM x BK slab of ``a`` and a BK x BN slab of ``b`` in shared memory, and every
thread accumulates its RM x RN outputs in registers (they are generated as separate variables,
numba does not keep a local array in registers). Thread (tx, ty) owns rows ty + TY * i and
columns tx + TX * j, so the shared-memory reads of a warp are broadcasts or consecutive, and its
global stores coalesce; the slab of ``a`` is stored transposed, padded by one column so that the
transposing stores do not collide in one bank. blockIdx.z walks the batch; an operand with a batch of one (or none)
is shared by every batch entry without being copied. Accumulation is in the operands' dtype.

On a GPU with CuPy installed (the 'cublas' extra), float32/float64 products go to cuBLAS instead:
CuPy views the device arrays zero-copy through ``__cuda_array_interface__`` and runs on the same
(default) stream as every jitgrad kernel, so stream order keeps the allocator's reuse safe. As in
PyTorch, float32 stays IEEE float32 (no TF32).
"""
import math
import os

import numpy as np
from numba import cuda

from . import _launch as L
from .. import config
from .array import broadcast_to, expand_dims, reshape

_CUPY = []  # [module or None], resolved at the first product


def _cublas():
    """CuPy when cuBLAS can run the products: installed, enabled, and on a GPU (not the simulator)."""
    if not _CUPY:
        cp = None
        if config.CUBLAS and not L.SIM:
            # jitgrad and CuPy both run on the legacy default stream: CuPy need not synchronise
            # before it reads an array that jitgrad hands it (a user's own setting is kept)
            os.environ.setdefault("CUPY_CUDA_ARRAY_INTERFACE_SYNC", "0")
            try:
                import cupy as cp
            except ImportError:
                cp = None
        _CUPY.append(cp)
    return _CUPY[0]

_GEMM = """
def {name}(a, b, out, zero):
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    tid = ty * {tx} + tx
    Z, M, N = out.shape
    K = a.shape[{a_k}]
    m0 = cuda.blockIdx.y * {bm}
    n0 = cuda.blockIdx.x * {bn}
    As = cuda.shared.array(({bk}, {bm_padded}), out.dtype)
    Bs = cuda.shared.array(({bk}, {bn}), out.dtype)
    for z in range(cuda.blockIdx.z, Z, cuda.gridDim.z):
{batch}{init}
        for k0 in range(0, K, {bk}):
            for e in range(tid, {bm} * {bk}, {threads}):
                i = e // {bk}
                k = e % {bk}
                As[k, i] = a[{a_index}] if m0 + i < M and k0 + k < K else zero
            for e in range(tid, {bk} * {bn}, {threads}):
                k = e // {bn}
                j = e % {bn}
                Bs[k, j] = b[{b_index}] if k0 + k < K and n0 + j < N else zero
            cuda.syncthreads()
            for k in range({bk}):
{loads}
{fmas}
            cuda.syncthreads()
{stores}
"""


def _lines(lines, indent):
    return "\n".join(" " * indent + line for line in lines)


def _gemm_fields(a_ndim, b_ndim, tile):
    tx, ty, rm, rn, bk = tile
    rows, cols = range(rm), range(rn)
    return dict(
        tx=tx, bm=ty * rm, bm_padded=ty * rm + 1, bn=tx * rn, bk=bk, threads=tx * ty, a_k=a_ndim - 1,
        batch="".join(" " * 8 + "z%s = min(z, %s.shape[0] - 1)\n" % (v, v) for v, nd in (("a", a_ndim), ("b", b_ndim))
                      if nd == 3),
        a_index=("za, " if a_ndim == 3 else "") + "m0 + i, k0 + k",
        b_index=("zb, " if b_ndim == 3 else "") + "k0 + k, n0 + j",
        init=_lines(["acc%d_%d = zero" % (i, j) for i in rows for j in cols], 8),
        loads=_lines(["a%d = As[k, ty + %d]" % (i, ty * i) for i in rows]
                     + ["b%d = Bs[k, tx + %d]" % (j, tx * j) for j in cols], 16),
        fmas=_lines(["acc%d_%d += a%d * b%d" % (i, j, i, j) for i in rows for j in cols], 16),
        stores=_lines(sum((["if m0 + ty + %d < M and n0 + tx + %d < N:" % (ty * i, tx * j),
                            "    out[z, m0 + ty + %d, n0 + tx + %d] = acc%d_%d" % (ty * i, tx * j, i, j)]
                           for i in rows for j in cols), []), 8))


_kernels = {}


def _kernel(a_ndim, b_ndim):
    tile = L.MATMUL_TILE
    key = (a_ndim, b_ndim, tile)
    k = _kernels.get(key)
    if k is None:
        name = "_gemm_a%d_b%d_%s" % (a_ndim, b_ndim, "x".join(map(str, tile)))
        k = _kernels[key] = L.generate(_GEMM, name, globals(), __file__, **_gemm_fields(a_ndim, b_ndim, tile))
    return k


def gemm(a, b, out):
    """out[z] = a[z] @ b[z] for 2-D or 3-D ``a`` and ``b`` (a 2-D operand, or a batch of one, is
    shared by every z) into the C-contiguous 3-D ``out`` of shape (Z, M, N). Any strides."""
    Z, M, N = out.shape
    if out.size == 0:
        return out
    cp = _cublas() if out.dtype in (np.float32, np.float64) else None
    if cp is not None:
        cp.matmul(cp.asarray(a), cp.asarray(b), out=cp.asarray(out))
        return out
    tx, ty, rm, rn, _ = L.MATMUL_TILE
    grid = (-(-N // (tx * rn)), -(-M // (ty * rm)), min(Z, 65535))
    L.launch(_kernel(a.ndim, b.ndim), grid, (tx, ty), a, b, out, out.dtype.type(0))
    return out


def matmul(a, b):
    """``np.matmul`` on device arrays: 1-D operands gain (then lose) a dim, batch dims broadcast."""
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError("matmul: both operands need at least one dimension")
    if a.dtype != b.dtype:
        raise TypeError("matmul: operands must have the same dtype, got %s and %s" % (a.dtype, b.dtype))
    a2 = expand_dims(a, 0) if a.ndim == 1 else a
    b2 = expand_dims(b, 1) if b.ndim == 1 else b
    (M, K), (K2, N) = a2.shape[-2:], b2.shape[-2:]
    if K != K2:
        raise ValueError("matmul: mismatch in its core dimension: %s @ %s" % (tuple(a.shape), tuple(b.shape)))
    batch = np.broadcast_shapes(tuple(a2.shape[:-2]), tuple(b2.shape[:-2]))
    out = L.empty(batch + (M, N), a.dtype)
    gemm(_operand(a2, batch), _operand(b2, batch), reshape(out, (math.prod(batch), M, N)))
    if a.ndim == 1 or b.ndim == 1:
        out = reshape(out, batch + ((M,) if a.ndim > 1 else ()) + ((N,) if b.ndim > 1 else ()))
    return out


def _operand(x, batch):
    """``x`` (..., rows, cols) as a gemm operand: as it is when 2-D or 3-D with the batch (or a
    batch of one); else 3-D over the flattened batch (a copy when its batch dims broadcast)."""
    own = tuple(x.shape[:-2])
    if x.ndim == 2 or (x.ndim == 3 and own in (batch, (1,))):
        return x
    mat = tuple(x.shape[-2:])
    if math.prod(own) == 1:
        return reshape(x, mat)
    if own != batch:
        x = broadcast_to(x, batch + mat)
    return reshape(x, (math.prod(batch),) + mat)
