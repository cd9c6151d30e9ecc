"""CUDA twins of kernels/attention.py: attention's masked, scaled softmax and its VJP, one thread per
score row running the CPU's row functions (the GEMMs around them are kernels/cuda/matmul.py's)."""
import hashlib
import inspect
import math

from numba import cuda

from .. import attention as cpu
from . import _launch as L
from .array import ascontiguous, broadcast_to


# the CPU's row functions as device functions (kernels/attention.py), exp the device's
_softmax_row = L.device_jit(L.function_with_globals(cpu.softmax_row, vexp=math.exp))
_softmax_row_vjp = L.device_jit(cpu.softmax_row_vjp)
# (in the kernels' cached names: a change of the row functions is a new cache entry)
_TAG = hashlib.sha1((inspect.getsource(cpu.softmax_row) + inspect.getsource(cpu.softmax_row_vjp)).encode()).hexdigest()[:10]


def _attention_softmax(s, mask, scale, causal, p):
    N, Lq = s.shape[0], s.shape[1]
    for t in range(cuda.grid(1), N * Lq, cuda.gridsize(1)):
        _softmax_row(s, mask, scale, causal, p, t // Lq, t % Lq)


def _attention_softmax_vjp(dp, p, scale, ds):
    N, Lq = p.shape[0], p.shape[1]
    for t in range(cuda.grid(1), N * Lq, cuda.gridsize(1)):
        _softmax_row_vjp(dp, p, scale, ds, t // Lq, t % Lq)


_attention_softmax, _attention_softmax_vjp = (L.jit(f, tag=_TAG) for f in (_attention_softmax, _attention_softmax_vjp))


def rows(a):
    """``a`` (..., L, S) as C-contiguous (N, L, S)."""
    shape = tuple(a.shape)
    a = a if L.is_c_contiguous(a) else ascontiguous(a)
    return a.reshape(math.prod(shape[:-2]), shape[-2], shape[-1])


def mask_rows(mask, shape):
    if tuple(mask.shape) == tuple(shape) or (tuple(mask.shape[-2:]) == tuple(shape[-2:])
                                             and math.prod(mask.shape[:-2]) == 1):
        return rows(mask)
    return rows(broadcast_to(mask, tuple(shape)))


def _launch_rows(kernel, n_rows, *args):
    if n_rows:
        L.launch(kernel, L.blocks_for(n_rows), L.THREADS, *args)


def attention_softmax(s, mask, scale, causal):
    s3 = rows(s)
    m3 = L.empty((1, 0, 0), s.dtype) if mask is None else mask_rows(mask, tuple(s.shape))
    p = L.empty(tuple(s3.shape), s.dtype)
    _launch_rows(_attention_softmax, s3.shape[0] * s3.shape[1], s3, m3, s.dtype.type(scale), causal, p)
    return p.reshape(tuple(s.shape))


def attention_softmax_vjp(dp, p, scale):
    p3 = rows(p)
    ds = L.empty(tuple(p3.shape), p.dtype)
    _launch_rows(_attention_softmax_vjp, p3.shape[0] * p3.shape[1], rows(dp), p3, p.dtype.type(scale), ds)
    return ds.reshape(tuple(p.shape))

