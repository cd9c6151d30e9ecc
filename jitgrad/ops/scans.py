"""Scans beyond cumsum: cumprod (its gradient exact where the input has zeros), cummax/cummin with
the index of the running extreme, and logcumsumexp. The running folds are kernels/reduce.py's, on both backends."""
import ml_dtypes
import numpy as np

from .._device import backend as xp_of
from .._op import Op, dispatch
from .._tensor import Tensor
from ._table import COMPLEX, _arr, _noncontig, no_kernel, register
from .elementwise import where
from .join import cat
from .extrema import _ValuesIndices
from .indexing import scatter_into_zeros
from .reduction import _cast_for, _real_max
from .unary import _c


def _rev_cumsum(t, dim):
    return t.flip(dim).cumsum(dim).flip(dim)


def _cumprod_grad(g, s):
    """d/dx_i of sum_j g_j y_j = sum_{j>=i} g_j prod_{k<=j, k!=i} x_k. Without zeros that is the reverse
    cumsum of g * y over x_i. With zeros it is written without division, exactly (also its own
    derivatives, for double backward): y_{i-1} * sum_{j>=i} g_j prod_{i<k<=j} x_k, the inner products
    a cumprod along a new dim of rows x_{i+1..n} (O(n^2) per row, only where a zero occurs)."""
    x, dim = s.self, s.dim
    if not s.self_shape:
        return g
    y = s.result
    if not (x == 0).any().item():
        return _rev_cumsum(g * _c(y), dim) / _c(x)
    xt, yt, gt = x.movedim(dim, -1), y.movedim(dim, -1), g.movedim(dim, -1)
    n = xt.shape[-1]
    after = Tensor._wrap(xp_of(x._data).from_host(np.triu(np.ones((n, n), dtype=bool), 1)))  # [i, j]: j > i
    inner = where(after, xt.unsqueeze(-2), 1.0).cumprod(-1).triu()  # [.., i, j]: prod_{i<k<=j} x_k
    before = cat([yt.new_ones(tuple(yt.shape[:-1]) + (1,)), yt.narrow(-1, 0, n - 1)], -1)  # y_{i-1}
    return (_c(before) * (_c(inner) * gt.unsqueeze(-2)).sum(-1)).movedim(-1, dim)


def _logcumsumexp_grad(g, s):
    """sum_{j>=i} g_j exp(x_i - y_j), in the log domain (exp(x) and exp(-y) alone overflow): the positive and
    negative parts of g each as exp(x_i + reverse logcumsumexp(log|g_j| - y_j))."""
    x, y, dim = s.self, s.result, s.dim
    if not s.self_shape:
        return g

    # log(mag) where mask, else the lowest finite number: -inf there would make the nested scan's gradient NaN
    # under double backward; the log of 1 keeps log's own gradient finite where masked
    lowest = float(ml_dtypes.finfo(x._data.dtype).min)

    def part(mask, mag):
        logs = where(mask, mag, 1.0).log().masked_fill(mask.logical_not(), lowest)
        return (x + (logs - y).flip(dim).logcumsumexp(dim).flip(dim)).exp()

    return part(g > 0, g) - part(g < 0, -g)


def _cumprod_forward(xp, dt, x, dim):
    if dt.kind == "c" and x.ndim:  # (the scan kernels fold real numbers; NumPy's loop, on the host)
        return xp.from_host(np.cumprod(xp.to_host(x), axis=dim))
    return xp.scan("cumprod", x, dim) if x.ndim else xp.copy(x)


def _cum_extreme_forward(kind):
    def forward(xp, dt, x, dim):
        if not x.ndim:
            return xp.copy(x), xp.zeros((), np.int64)
        values = xp.scan(kind, x, dim)
        n = x.shape[dim]
        pos = xp.from_host(np.arange(n, dtype=np.int64).reshape((n,) + (1,) * (x.ndim - 1 - dim)))
        # the running index moves to i where x_i is the running extreme (the latest of ties) or NaN
        hit = xp.run("eq", np.bool_, x, values)
        if x.dtype.kind == "f":
            hit = xp.run("logical_or", np.bool_, hit, xp.run("isnan", np.bool_, x))
        indices = xp.scan("cummax", xp.run("where", np.dtype(np.int64), hit, pos, np.int64(0)), dim)
        return values, indices
    return forward


def _cum_extreme_grad(g, s):
    gv = g[0]
    if not s.self_shape:
        return gv
    return scatter_into_zeros(s.self_shape, s.dim, s.indices, gv)


# ---------------------------------------------------------------------- API
def _dim(input, dim):
    return input._wrap_dim(dim) if input.ndim else 0


def cumprod(input, dim, *, dtype=None):
    input = _cast_for(input, dtype)
    return dispatch(CUMPROD, (input,), {"dim": _dim(input, dim)})


def logcumsumexp(input, dim):
    if input.dtype.is_complex:  # shifted by the largest real part along dim, as logsumexp's
        d = _dim(input, dim)
        m = _real_max(input, (d,) if input.ndim else ())
        return (input - m).exp().cumsum(d).log() + m
    return dispatch(LOGCUMSUMEXP, (input,), {"dim": _dim(input, dim)})


def _cum_extreme(op, name, input, dim):
    values, indices = dispatch(op, (input,), {"dim": _dim(input, dim)})
    out = _ValuesIndices((values, indices))
    out.name = name
    return out


def cummax(input, dim):
    return _cum_extreme(CUMMAX, "cummax", input, dim)


def cummin(input, dim):
    return _cum_extreme(CUMMIN, "cummin", input, dim)


# ---------------------------------------------------------------------- references and samples (see _table.py)
def _np_cum_extreme(acc):
    def ref(x, dim):
        if x.ndim == 0:
            return x.copy(), np.zeros((), np.int64)
        d = dim % x.ndim
        values = acc(x, axis=d)
        if x.dtype.kind == "f":  # NaN propagates (NumPy's fmax-free accumulate does it already for max/min)
            values = np.where(np.logical_or.accumulate(np.isnan(x), axis=d), np.nan, values)
        pos = np.arange(x.shape[d]).reshape((-1,) + (1,) * (x.ndim - 1 - d))
        hit = (x == values) | (np.isnan(x) if x.dtype.kind == "f" else False)
        return values, np.maximum.accumulate(np.where(hit, pos, 0), axis=d).astype(np.int64)
    return ref


def _scan_samples(zeros):
    def samples(rng, dtype):
        A = lambda *s: _arr(rng, s, -2.0, 2.0, dtype)  # noqa: E731
        out = [((A(2, 3), 1), {}), ((A(3, 4), 0), {}), ((A(5), -1), {}), ((A(), 0), {}),
               ((_noncontig(rng, (3, 2), -2.0, 2.0, dtype), 0), {})]
        if zeros:  # rows with one zero, two zeros, a zero first and last: every branch of cumprod's gradient
            out.append(((np.array([[0.5, 0, 2, 0, 1.5], [1.5, -1, 0, 3, 0.5], [0, 2, 1, -1, 0]]).astype(dtype), 1), {}))
        return out
    return samples


def _np_logcumsumexp(x, dim):
    return np.logaddexp.accumulate(x, axis=dim % x.ndim) if x.ndim else x.copy()


def _np_cumprod(x, dim, dtype=None):
    out = np.cumprod(x, axis=dim % x.ndim) if x.ndim else x.copy()
    return out.astype(x.dtype if x.dtype.kind in "fc" else np.int64)


# ---------------------------------------------------------------------- the entries
CUMPROD = register(Op("cumprod", _cumprod_forward, vjp=[_cumprod_grad], ref=_np_cumprod, samples=_scan_samples(True),
                      call=cumprod, api=("cumprod",), inplace=True, complex=True, bench={"sizes": [(16, 16), (4096, 4096)]}))
LOGCUMSUMEXP = register(Op("logcumsumexp", lambda xp, dt, x, dim: xp.scan("logcumsumexp", x, dim) if x.ndim else xp.copy(x),
                          vjp=[_logcumsumexp_grad], dtype="keep", ref=_np_logcumsumexp, samples=_scan_samples(False),
                          unsupported=no_kernel("logcumsumexp_out_cpu", "int64", "int32", "bool"), call=logcumsumexp,
                          api=("logcumsumexp",), bench={"sizes": [(16, 16), (4096, 4096)]}, transpose_at=1.0))
CUMMAX = register(Op("cummax", _cum_extreme_forward("cummax"), vjp=[_cum_extreme_grad], n_outputs=2,
                     outputs=("result", "indices"), dtype="keep", ref=_np_cum_extreme(np.maximum.accumulate),
                     samples=_scan_samples(False), call=cummax, api=("cummax",),
                     bench={"sizes": [(16, 16), (4096, 4096)]}, unsupported=no_kernel("cummax_cpu", *COMPLEX)))
CUMMIN = register(Op("cummin", _cum_extreme_forward("cummin"), vjp=[_cum_extreme_grad], n_outputs=2,
                     outputs=("result", "indices"), dtype="keep", ref=_np_cum_extreme(np.minimum.accumulate),
                     samples=_scan_samples(False), call=cummin, api=("cummin",),
                     bench={"sizes": [(16, 16), (4096, 4096)]}, unsupported=no_kernel("cummin_cpu", *COMPLEX)))
