"""softmax and log_softmax along a dim (max-shifted; fused VJP kernels in kernels/softmax.py)."""
import numpy as np

from .._op import Op, dispatch
from .._tensor import Tensor
from .._device import backend
from ._table import CUDA_FP32, INTS, autocasts, no_kernel, register, unary_samples


def _fused(log):
    def vjp(g, s):
        y = s.result
        return Tensor._wrap(backend(g._data).softmax_vjp(g._data, y._data, s.dim, log))
    return vjp


def _forward(log):
    def forward(xp, dt, x, dim):
        if x.ndim == 0:
            return xp.full((), 0 if log else 1, dt)
        return xp.softmax(x, dim, log)
    return forward


def _softmax_api(name):
    def fn(input, dim=None, dtype=None, _stacklevel=3):
        if dtype is not None:
            input = input.to(dtype)
        if dim is None:
            dim = 0 if input.ndim in (0, 1, 3) else 1
        d = input._wrap_dim(dim) if input.ndim else 0
        return dispatch(SOFTMAX if name == "softmax" else LOG_SOFTMAX, (input,), {"dim": d})
    fn.__name__ = name
    return autocasts(name)(fn)


softmax = _softmax_api("softmax")
log_softmax = _softmax_api("log_softmax")


def _np_log_softmax(x, dim=None, dtype=None):
    if x.ndim == 0:
        return x * 0
    x = x - x.max(axis=dim, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=dim, keepdims=True))


# integer and bool inputs: PyTorch has no kernel (pass dtype= to convert first)
SOFTMAX = register(Op("softmax", _forward(False), vjp=[lambda g, s: s.result * (g - (g * s.result).sum(s.dim, keepdim=True))
                                                       if s.result.ndim else g * 0],
                      fused=[_fused(False)], dtype="float", ref=lambda x, dim=None, dtype=None: np.exp(_np_log_softmax(x, dim)),
                      samples=unary_samples(dim=-1), bench={"sizes": [(16,), (4096, 1024)]},
                      unsupported=no_kernel("softmax_lastdim_kernel_impl", "bool", *INTS), call=softmax, api=("softmax",),
                      autocast=CUDA_FP32))
LOG_SOFTMAX = register(Op("log_softmax", _forward(True),
                          vjp=[lambda g, s: g - s.result.exp() * g.sum(s.dim, keepdim=True) if s.result.ndim else g * 0],
                          fused=[_fused(True)], dtype="float", ref=_np_log_softmax,
                          samples=unary_samples(dim=-1), bench={"sizes": [(16,), (4096, 1024)]},
                          unsupported=no_kernel("log_softmax_lastdim_kernel_impl", "bool", *INTS), call=log_softmax,
                          api=("log_softmax",), autocast=CUDA_FP32))
