"""The CUDA array backend: the same function names as kernels/cpu.py, for numba device arrays.

The math comes from the CUDA twins (elementwise, reduce, matmul, index: generated from the
same scalar functions as the CPU loops where the op is elementwise); the array plumbing
(views, copies, gathers) from array.py.
"""
import numpy as np

from . import conv  # noqa: F401
from . import pool  # noqa: F401
from . import loss  # noqa: F401
from . import linalg  # noqa: F401  (raises: cuSOLVER is not bound yet)
from . import fft  # noqa: F401  (raises: cuFFT is not bound yet)
from .array import (address, ascontiguous, astype, broadcast_to, concatenate, copy, diagonal, empty, expand_dims, flip, from_host,  # noqa: F401
                    full, getitem, holds_its_memory_alone, is_contiguous, is_device_array, may_share_memory, reshape, setitem, stack, swapaxes, take, take_along_axis, tile,
                    to_host, transpose, view, zeros)
from .array import copy_into
from .asserts import raise_pending  # noqa: F401
from .elementwise import fused_kernel, launch_fused, run  # noqa: F401
from .index import index_add, one_hot, scatter_add  # noqa: F401
from .matmul import matmul as _matmul
from .random import multinomial  # noqa: F401
from .reduce import reduce, scan, softmax, softmax_vjp  # noqa: F401
from .attention import attention_softmax, attention_softmax_vjp  # noqa: F401
from .norm import layer_norm, layer_norm_vjp  # noqa: F401
from .rnn import (gru_cell, gru_cell_vjp, lstm_cell, lstm_cell_vjp, rnn_cell, rnn_cell_vjp, rnn_layer,  # noqa: F401
                  rnn_layer_vjp)

name = "cuda"


def matmul(a, b):
    """matmul with NumPy's rank rules (1-D operands become a row or a column)."""
    if a.ndim == 1 and b.ndim == 1:
        return reshape(_matmul(reshape(a, (1, a.shape[0])), reshape(b, (b.shape[0], 1))), ())
    if a.ndim == 1:
        return reshape(_matmul(reshape(a, (1, a.shape[0])), b), b.shape[:-2] + (b.shape[-1],))
    if b.ndim == 1:
        return reshape(_matmul(a, reshape(b, (b.shape[0], 1))), a.shape[:-1])
    return _matmul(a, b)


def outer(a, b):
    return _matmul(reshape(a, (a.shape[0], 1)), reshape(b, (1, b.shape[0])))


def copyto(dst, src):
    if not hasattr(src, "copy_to_host"):
        src = from_host(np.asarray(src, dtype=dst.dtype))
    copy_into(dst, src)
