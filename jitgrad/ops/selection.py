"""Selections and rearrangements: tril/triu, roll, diag, diagonal (a view), masked_select and bincount.
Gradients are written over table ops (the same op, a roll back, index_put_zeros), so they record."""
import numpy as np

from .._op import Op, broadcast_shapes, dispatch
from .._tensor import Tensor
from ._table import _arr, _noncontig, register, rejects
from .indexing import index_put_zeros


# ---------------------------------------------------------------------- tril / triu
def _tri_forward(lower):
    def forward(xp, dt, x, diagonal):
        r, c = x.shape[-2:]
        keep = np.tri(r, c, diagonal, dtype=bool) if lower else ~np.tri(r, c, diagonal - 1, dtype=bool)
        return xp.run("where", dt, xp.from_host(keep), x, dt.type(0))
    return forward


def _tri(op, name, input, diagonal):
    if input.ndim < 2:
        raise RuntimeError("%s: input tensor must have at least 2 dimensions" % name)
    return dispatch(op, (input,), {"diagonal": int(diagonal)})


def tril(input, diagonal=0):
    return _tri(TRIL, "tril", input, diagonal)


def triu(input, diagonal=0):
    return _tri(TRIU, "triu", input, diagonal)


# ---------------------------------------------------------------------- roll
def _roll_forward(xp, dt, x, shifts, dims):
    if dims == ():  # roll the flattened tensor
        flat = xp.reshape(x if x.ndim else xp.reshape(x, (1,)), (-1,))
        return xp.reshape(_roll_forward(xp, dt, flat, shifts, (0,)), x.shape)
    out = x
    for s, d in zip(shifts, dims):
        n = out.shape[d]
        s = s % n if n else 0
        if s:
            lead = (slice(None),) * d
            tail, head = xp.getitem(out, lead + (slice(n - s, n),)), xp.getitem(out, lead + (slice(0, n - s),))
            out = xp.concatenate([tail, head], d)
    return xp.copy(out) if out is x else out


def roll(input, shifts, dims=None):
    shifts = (shifts,) if isinstance(shifts, (int, np.integer)) else tuple(shifts)
    if dims is None:
        if len(shifts) != 1:
            raise RuntimeError("shifts and dimensions must align. shifts: %d, dims:0" % len(shifts))
        return dispatch(ROLL, (input,), {"shifts": (int(shifts[0]),), "dims": ()})
    dims = (dims,) if isinstance(dims, (int, np.integer)) else tuple(dims)
    if len(shifts) != len(dims):
        raise RuntimeError("shifts and dimensions must align. shifts: %d, dims:%d" % (len(shifts), len(dims)))
    return dispatch(ROLL, (input,), {"shifts": tuple(int(s) for s in shifts),
                                     "dims": tuple(input._wrap_dim(d) for d in dims)})


def _roll_grad(g, s):
    return g.roll(tuple(-k for k in s.shifts), s.dims if s.dims else None)


# ---------------------------------------------------------------------- diagonal, diag
def _diag_positions(m, n, offset):
    """(rows, cols) of diagonal ``offset`` of an m x n matrix."""
    k = max(0, min(m + min(offset, 0), n - max(offset, 0)))
    rows = np.arange(k) + max(-offset, 0)
    return rows, rows + offset


def diagonal_scatter_zeros(g, shape, offset, dim1, dim2):
    """The tensor of ``shape`` that is 0 but for diagonal ``offset`` over (dim1, dim2), which holds g
    (g's last dim runs along that diagonal): diagonal's VJP, written over table ops."""
    rest = [d for d in range(len(shape)) if d not in (dim1, dim2)]
    m, n = shape[dim1], shape[dim2]
    rows, cols = _diag_positions(m, n, offset)
    flat = index_put_zeros(g, tuple(shape[d] for d in rest) + (m * n,), (Ellipsis, rows * n + cols), False)
    full = flat.reshape(tuple(shape[d] for d in rest) + (m, n))
    order = rest + [dim1, dim2]
    return full.permute(tuple(order.index(d) for d in range(len(shape))))


def diagonal(input, offset=0, dim1=0, dim2=1):
    d1, d2 = input._wrap_dim(dim1), input._wrap_dim(dim2)
    if d1 == d2:
        raise RuntimeError("diagonal dimensions cannot be identical %d, %d" % (dim1, dim2))
    return dispatch(DIAGONAL, (input,), {"offset": int(offset), "dim1": d1, "dim2": d2})


def _diag_forward(xp, dt, x, diagonal):
    if x.ndim == 2:
        return xp.copy(xp.diagonal(x, diagonal, 0, 1))
    n = x.shape[0] + abs(diagonal)
    out = xp.zeros((n, n), x.dtype)
    xp.setitem(out, _diag_positions(n, n, diagonal), x)
    return out


def _diag_grad(g, s):
    if len(s.self_shape) == 1:
        return g.diagonal(s.diagonal)
    return diagonal_scatter_zeros(g, s.self_shape, s.diagonal, 0, 1)


def diag(input, diagonal=0):
    if input.ndim not in (1, 2):
        raise RuntimeError("diag(): Supports 1D or 2D tensors. Got %dD" % input.ndim)
    return dispatch(DIAG, (input,), {"diagonal": int(diagonal)})


# ---------------------------------------------------------------------- masked_select
def masked_select(input, mask):
    if not isinstance(mask, Tensor) or mask.dtype.name != "bool":
        raise RuntimeError("masked_select: expected BoolTensor for mask")
    if getattr(mask, "_level", 0):  # (a mask batched by jitgrad.vmap: each sample would select a different number)
        raise RuntimeError("vmap: Attempted to vmap over `mask` in torch.masked_select(self, mask) We cannot support "
                           "this because for each batch this would return a differently shaped Tensor. Please file "
                           "an issue at https://github.com/pytorch/pytorch/issues if you need this feature.")
    shape = broadcast_shapes(tuple(input.shape), tuple(mask.shape)) or (1,)  # (0-d: one element)
    key = np.nonzero(np.broadcast_to(mask._host(), shape))
    return dispatch(MASKED_SELECT, (input,), {"shape": shape, "key": key})


def _masked_select_forward(xp, dt, x, shape, key):
    return xp.getitem(xp.copy(xp.broadcast_to(x, shape)), key)


# ---------------------------------------------------------------------- bincount
def bincount(input, weights=None, minlength=0):
    if input.dtype.is_floating_point:
        raise NotImplementedError("\"bincount_cpu\" not implemented for '%s'" % input.dtype.scalar_type)
    if minlength < 0:
        raise RuntimeError("minlength should be >= 0")
    x = input._host()
    if x.ndim != 1 or (x.size and x.min() < 0):
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if weights is not None and (weights.ndim != 1 or weights.shape[0] != x.shape[0]):
        raise RuntimeError("weights should be 1-d and have the same length as input")
    return dispatch(BINCOUNT, (input, weights), {"minlength": int(minlength)})


def _bincount_forward(xp, dt, x, w, minlength):
    h = np.asarray(xp.to_host(x))
    if w is None:
        return xp.from_host(np.bincount(h, minlength=minlength).astype(np.int64))
    wh = np.asarray(xp.to_host(w))
    out = np.bincount(h, wh, minlength=minlength)  # float64 sums
    return xp.from_host(out.astype(np.float32) if wh.dtype == np.float32 else out)


# ---------------------------------------------------------------------- references and samples (see _table.py)
def _samples(*cases):
    def samples(rng, dtype):
        return [(((_noncontig if isinstance(s, list) else _arr)(rng, tuple(s), -2.0, 2.0, dtype),) + extra, dict(kw))
                for s, extra, kw in cases]
    return samples


def _np_masked_select(x, mask):
    shape = np.broadcast_shapes(x.shape, mask.shape)
    return np.broadcast_to(x, shape)[np.broadcast_to(mask, shape)]


def _masked_select_samples(rng, dtype):
    A = lambda *s: _arr(rng, s, -2.0, 2.0, dtype)  # noqa: E731
    m = lambda *s: np.asarray(rng.random(s) > 0.5)  # noqa: E731
    return [((A(2, 3), m(2, 3)), {}), ((A(2, 3), m(3)), {}), ((A(3), m(2, 3)), {}), ((A(), m()), {}),
            ((_noncontig(rng, (3, 2), -2.0, 2.0, dtype), m(3, 2)), {})]


def _bincount_samples(rng, dtype):
    kind = np.dtype(dtype).kind
    idx = lambda n, hi: rng.integers(0, hi, n)  # noqa: E731
    if kind == "f":
        return [((idx(6, 4), _arr(rng, (6,), -1.0, 1.0, dtype)), {}), ((idx(3, 3), _arr(rng, (3,), -1.0, 1.0, dtype)),
                                                                       {"minlength": 6})]
    if kind in "iu":
        return [((idx(6, 4),), {}), ((idx(3, 3),), {"minlength": 5}), ((idx(0, 1),), {})]
    return []  # (bool: rejected, tests/ops/test_ops_against_torch.py)


# ---------------------------------------------------------------------- the entries
_TRI = _samples(((3, 4), (), {}), ((3, 4), (1,), {}), ((2, 4, 3), (-1,), {}), ([3, 3], (), {}), ((2, 2), (5,), {}))
TRIL = register(Op("tril", _tri_forward(True), vjp=[lambda g, s: g.tril(s.diagonal)], dtype="keep",
                   ref=lambda x, diagonal=0: np.tril(x, diagonal), samples=_TRI, call=tril, api=("tril",),
                   inplace=True, complex=True, bench={"sizes": [(16, 16), (2048, 2048)]}))
TRIU = register(Op("triu", _tri_forward(False), vjp=[lambda g, s: g.triu(s.diagonal)], dtype="keep",
                   ref=lambda x, diagonal=0: np.triu(x, diagonal), samples=_TRI, call=triu, api=("triu",),
                   inplace=True, complex=True, bench={"sizes": [(16, 16), (2048, 2048)]}))
ROLL = register(Op("roll", _roll_forward, vjp=[_roll_grad], dtype="keep", call=roll, api=("roll",), complex=True,
                   ref=lambda x, shifts, dims=None: np.roll(x, shifts, dims),
                   samples=_samples(((2, 3), (1,), {}), ((2, 3), (-1, 0), {}), ((2, 3, 2), ((1, 2), (0, 2)), {}),
                                    ((), (3,), {}), ([3, 2], (4,), {"dims": 0}), ((4,), (0,), {})),
                   bench={"sizes": [(16, 16), (2048, 2048)]}))
DIAGONAL = register(Op("diagonal", lambda xp, dt, x, offset, dim1, dim2: xp.diagonal(x, offset, dim1, dim2),
                       vjp=[lambda g, s: diagonal_scatter_zeros(g, s.self_shape, s.offset, s.dim1, s.dim2)],
                       dtype="keep", view=True, call=diagonal, api=("diagonal",),
                       ref=lambda x, offset=0, dim1=0, dim2=1: np.diagonal(x, offset, dim1, dim2).copy(),
                       samples=_samples(((3, 4), (), {}), ((3, 4), (1,), {}), ((2, 3, 4), (-1, 2, 1), {}),
                                        ((4, 3), (), {"offset": -2}), ([3, 3], (), {}), ((2, 2, 3), (0, 0, -1), {}),
                                        ((2, 2), (3,), {}))))
DIAG = register(Op("diag", _diag_forward, vjp=[_diag_grad], dtype="keep", call=diag, api=("diag",), complex=True,
                   ref=lambda x, diagonal=0: np.diag(x, diagonal),
                   samples=_samples(((3,), (), {}), ((3,), (1,), {}), ((2,), (), {"diagonal": -2}), ((3, 4), (), {}),
                                    ((3, 4), (-1,), {}), ([3, 3], (2,), {}))))
MASKED_SELECT = register(Op("masked_select", _masked_select_forward,
                            vjp=[lambda g, s: index_put_zeros(g, s.shape, s.key, False)], dtype="keep",
                            ref=_np_masked_select, samples=_masked_select_samples, call=masked_select,
                            api=("masked_select",), value_shaped=lambda params: True, complex=True))
BINCOUNT = register(Op("bincount", _bincount_forward, inputs=("self", "weights"), dtype="keep", keep_inputs=(0, 1),
                       value_shaped=lambda params: True,
                       differentiable=False, call=bincount, api=("bincount",), samples=_bincount_samples,
                       ref=lambda x, weights=None, minlength=0: np.bincount(x, weights, minlength).astype(
                           np.int64 if weights is None else np.float32 if weights.dtype == np.float32 else np.float64),
                       unsupported=rejects(NotImplementedError, "\"bincount_cpu\" not implemented for '%(type)s'",
                                           "bool")))
