"""The CPU array backend: the functions the op table's forwards call, for NumPy arrays.

A backend is a module with these names (kernels/cuda/ is the CUDA twin): numba kernels for
the math (elementwise ``run``, reductions, softmax, scatters) and NumPy for array plumbing
(views, copies, concatenation) and for GEMM, which goes to BLAS.
"""
import numpy as np
from numba import prange

from . import blas, config, layout_copy
from . import conv  # noqa: F401
from . import pool  # noqa: F401
from . import loss  # noqa: F401
from . import linalg  # noqa: F401  (LAPACK: decompositions and solvers)
from . import fft  # noqa: F401  (pocketfft through rocket-fft)
from .elementwise import flat_loop, run  # noqa: F401
from .index import index_add, one_hot, scatter_add  # noqa: F401
from .random import multinomial  # noqa: F401
from .reduce import reduce, scan  # noqa: F401
from .softmax import softmax, softmax_vjp  # noqa: F401
from ._jit import twins
from .attention import attention_softmax, attention_softmax_vjp  # noqa: F401
from .norm import layer_norm, layer_norm_vjp  # noqa: F401
from .rnn import (gru_cell, gru_cell_vjp, lstm_cell, lstm_cell_vjp, rnn_cell, rnn_cell_vjp, rnn_layer,  # noqa: F401
                  rnn_layer_vjp)

name = "cpu"
ndarray = np.ndarray

# array plumbing: NumPy's own functions, same signatures on every backend
empty = np.empty
zeros = np.zeros
full = np.full


# views through the array's own methods: NumPy's functions of the same names dispatch to them, at four
# times the cost (0.9 against 0.2 us), which small ops pay several times each
def reshape(a, shape):
    return a.reshape(shape)


def swapaxes(a, d0, d1):
    return a.swapaxes(d0, d1)


def transpose(a, axes=None):
    return a.transpose(axes)


broadcast_to = np.broadcast_to
expand_dims = np.expand_dims
tile = np.tile
concatenate = np.concatenate
stack = np.stack
take = np.take
take_along_axis = np.take_along_axis
may_share_memory = np.may_share_memory


def _outer_batched(a, b, out):
    for i in prange(out.shape[0]):
        for j in range(out.shape[1]):
            x = a[i, j, 0]
            for k in range(out.shape[2]):
                out[i, j, k] = x * b[i, 0, k]


_OUTER = twins(_outer_batched)


def _small_products(a, b, out):
    for i in prange(out.shape[0]):
        for j in range(out.shape[1]):
            for k in range(out.shape[2]):
                acc = a[i, j, 0] * b[i, 0, k]
                for q in range(1, a.shape[2]):
                    acc += a[i, j, q] * b[i, q, k]
                out[i, j, k] = acc


_SMALL_PRODUCTS = twins(_small_products)
SMALL_PRODUCT = 3  # a batch of matrices of at most this many rows, columns and inner size: direct code (a GEMM
# call per matrix costs more than its math; NumPy's loop is as fast from order 4)


def matmul(a, b):
    """GEMM in BLAS; 1-D x 1-D gives a 0-d array. An operand broadcast along a matrix dim (stride 0: the
    gradient of a sum) is copied first: NumPy would give it to its own loop, 100s of times slower than BLAS."""
    if a.ndim >= 2 and b.ndim >= 2 and a.shape[-1] == 1:
        # an inner dim of 1: outer products (per-sample weight gradients), which NumPy's batched matmul runs
        # 3x slower than the broadcast multiply that gives the same values, and that 2.5x slower than a loop
        if a.ndim == b.ndim == 3 and a.shape[0] == b.shape[0] and a.dtype == b.dtype and a.dtype.kind == "f":
            out = np.empty((a.shape[0], a.shape[1], b.shape[2]), a.dtype)
            _OUTER[out.size >= config.PARALLEL_THRESHOLD](a, b, out)
            return out
        return np.multiply(a, b)
    if a.ndim == b.ndim == 3 and a.shape[0] == b.shape[0] and a.dtype == b.dtype and a.dtype.kind == "f" and \
            max(a.shape[1:] + b.shape[2:]) <= SMALL_PRODUCT and a.shape[0] > 1 and a.shape[2]:
        out = np.empty((a.shape[0], a.shape[1], b.shape[2]), a.dtype)
        _SMALL_PRODUCTS[out.size >= config.PARALLEL_THRESHOLD](a, b, out)
        return out
    if a.ndim == b.ndim == 3 and b.strides[0] == 0 and a.shape[0] == b.shape[0] > 1:
        b = b[0]  # one matrix for the whole batch (vmap's per-sample leaf is an expanded weight)
    if b.ndim == 2 and a.ndim > 2 and a.size and a.shape[-1]:
        # a batch of matrices times one matrix: one GEMM of the stacked rows (NumPy runs a GEMM per matrix)
        return blas.matmul(a.reshape(-1, a.shape[-1]), np.ascontiguousarray(b) if 0 in b.strides else b).reshape(
            a.shape[:-1] + b.shape[-1:])
    if a.ndim >= 2 and 0 in a.strides[-2:]:
        a = np.ascontiguousarray(a)
    if b.ndim >= 2 and 0 in b.strides[-2:]:
        b = np.ascontiguousarray(b)
    return np.asarray(blas.matmul(a, b))


def outer(a, b):
    return np.multiply.outer(a, b)


def address(a):
    """The address of ``a``'s first element (Tensor.data_ptr)."""
    return a.__array_interface__["data"][0]


def is_contiguous(a):
    return a.flags.c_contiguous


def copy(x):
    return layout_copy.copy(x)


def astype(x, dtype):
    return x.astype(dtype)


def flip(x, dims):
    return np.flip(x, dims).copy()


def view(x, shape):
    """x with ``shape`` sharing its memory, or None where the strides don't allow it."""
    v = x.view()
    try:
        v.shape = shape
    except AttributeError:
        return None
    return v


def diagonal(x, offset, dim1, dim2):
    """The writable view of x's diagonal ``offset`` over dims (dim1, dim2), moved to the last dim."""
    key = [slice(None)] * x.ndim
    key[dim2 if offset >= 0 else dim1] = slice(abs(offset), None)
    start = x[tuple(key)]  # begins at the diagonal's first element
    v = np.diagonal(start, 0, dim1, dim2)  # (read-only: NumPy's diagonal views are; its strides are right)
    return np.lib.stride_tricks.as_strided(start, v.shape, v.strides)


def copyto(dst, src):
    np.copyto(dst, src, casting="unsafe")


def getitem(x, key):
    """x[key]; an all-integer key gives a 0-d view (as in PyTorch), not a NumPy scalar."""
    r = x[key]
    return r if r.__class__ is np.ndarray else x[key + (Ellipsis,)]


def setitem(x, key, value):
    x[key] = value


def to_host(x):
    return x


def from_host(x):
    return x
