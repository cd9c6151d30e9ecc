"""CUDA twins of kernels/norm.py: layer normalization's rows, one thread per row running the CPU's row
functions; the weight's and bias's gradients one thread per column."""
import hashlib
import inspect

from numba import cuda

from .. import norm as cpu
from . import _launch as L

_row, _row_vjp = L.device_jit(cpu.layer_norm_row), L.device_jit(cpu.layer_norm_row_vjp)
# (in the kernels' cached names: a change of the row functions is a new cache entry)
_TAG = hashlib.sha1((inspect.getsource(cpu.layer_norm_row) + inspect.getsource(cpu.layer_norm_row_vjp)).encode()
                    ).hexdigest()[:10]


def _layer_norm(x, w, b, eps, y, mean, rstd):
    for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        _row(x, w, b, eps, y, mean, rstd, i)


def _layer_norm_vjp(g, x, w, mean, rstd, dx):
    for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        _row_vjp(g, x, w, mean, rstd, dx, i)


def _layer_norm_wb(g, x, mean, rstd, dw, db):
    for j in range(cuda.grid(1), x.shape[1], cuda.gridsize(1)):
        sw = 0.0
        sb = 0.0
        for i in range(x.shape[0]):
            sw += g[i, j] * (x[i, j] - mean[i]) * rstd[i]
            sb += g[i, j]
        dw[j] = sw
        db[j] = sb


_layer_norm, _layer_norm_vjp, _layer_norm_wb = (L.jit(f, tag=_TAG) for f in (_layer_norm, _layer_norm_vjp,
                                                                              _layer_norm_wb))


def _launch(kernel, n, *args):
    if n:
        L.launch(kernel, L.blocks_for(n), L.THREADS, *args)


def layer_norm(x, w, b, eps):
    M = x.shape[0]
    y = L.empty(tuple(x.shape), x.dtype)
    mean, rstd = L.empty((M,), x.dtype), L.empty((M,), x.dtype)
    _launch(_layer_norm, M, x, w, b, x.dtype.type(eps), y, mean, rstd)
    return y, mean, rstd


def layer_norm_vjp(g, x, w, mean, rstd, weights):
    dx = L.empty(tuple(x.shape), x.dtype)
    _launch(_layer_norm_vjp, x.shape[0], g, x, w, mean, rstd, dx)
    if not weights:
        return dx, None, None
    dw, db = L.empty((x.shape[1],), x.dtype), L.empty((x.shape[1],), x.dtype)
    _launch(_layer_norm_wb, x.shape[1], g, x, mean, rstd, dw, db)
    return dx, dw, db
