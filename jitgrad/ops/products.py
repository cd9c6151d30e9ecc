"""Products and sums of vectors and matrices composed of table ops, so their gradients come from the ops'
formulas: cross, vecdot, multi_dot, kron, tensordot, vdot, chain_matmul, cdist, vander and the trapezoid
rules, with PyTorch's signatures and errors."""
import numpy as np

from .._op import Op, broadcast_shapes, dispatch
from .._tensor import Tensor
from ..kernels import cpu
from ._linalg_args import shared
from ._table import _arr, export, register
from .composite import diff
from .indexing import index_select
from .join import cat
from .linalg import dot, mm
from .selection import diagonal as _diagonal


def cross(input, other, *, dim=-1):
    """The cross product of 3-vectors along ``dim`` (broadcasting the other dims)."""
    nd = max(input.ndim, other.ndim)
    if not -nd <= dim < nd:
        raise IndexError("Dimension out of range (expected to be in range of [%d, %d], but got %d)" % (-nd, nd - 1, dim))
    a, b = (t.reshape((1,) * (nd - t.ndim) + tuple(t.shape)) for t in (input, other))
    if a.shape[dim] != 3 or b.shape[dim] != 3:
        raise RuntimeError("linalg.cross: inputs dimension %d must have length 3. Got %d and %d"
                           % (dim, a.shape[dim], b.shape[dim]))
    i1, i2 = (Tensor._wrap(np.array(k, np.int64)) for k in ([1, 2, 0], [2, 0, 1]))
    d = dim % nd
    return index_select(a, d, i1) * index_select(b, d, i2) - index_select(a, d, i2) * index_select(b, d, i1)


def torch_cross(input, other, dim=None):  # torch.cross: the first dim of length 3 when dim is not given
    if dim is None:
        shape = np.broadcast_shapes(tuple(input.shape), tuple(other.shape))
        dim = next((i for i, n in enumerate(shape) if n == 3), -1)
    return cross(input, other, dim=dim)


def vecdot(x, y, *, dim=-1):
    if x.shape[dim] != y.shape[dim]:
        raise RuntimeError("inconsistent tensor size, expected tensor [%d] and src [%d] to have the same number of "
                           "elements, but got %d and %d elements respectively"
                           % (x.shape[dim], y.shape[dim], x.shape[dim], y.shape[dim]))
    return (x.conj() * y).sum(dim)  # (x's conjugate, as PyTorch's: <x, y>)


def multi_dot(tensors):
    tensors = list(tensors)
    if len(tensors) < 2:
        raise RuntimeError("multi_dot(): expected at least 2 tensors but got %d" % len(tensors))
    first, last = tensors[0], tensors[-1]
    if first.ndim not in (1, 2):
        raise RuntimeError("multi_dot(): the first tensor must be 1D or 2D but got %dD" % first.ndim)
    if last.ndim not in (1, 2):
        raise RuntimeError("multi_dot(): the last tensor must be 1D or 2D but got %dD" % last.ndim)
    for i, t in enumerate(tensors[1:-1], 1):
        if t.ndim != 2:
            raise RuntimeError("multi_dot(): tensor %d must be 2D but got %dD" % (i, t.ndim))
    mats = [first.unsqueeze(0) if first.ndim == 1 else first] + tensors[1:-1] + \
        [last.unsqueeze(-1) if last.ndim == 1 else last]
    for i in range(len(mats) - 1):
        if mats[i].shape[-1] != mats[i + 1].shape[0]:
            raise RuntimeError("multi_dot(): tensors %d and %d with shapes %s and %s cannot be multiplied"
                               % (i, i + 1, list(tensors[i].shape), list(tensors[i + 1].shape)))
    out = _chain(mats)
    if first.ndim == 1:
        out = out.squeeze(0)
    if last.ndim == 1:
        out = out.squeeze(-1)
    return out


def _chain(mats):
    """The product in the cheapest order (the matrix-chain dynamic programme, as PyTorch orders it)."""
    n = len(mats)
    dims = [mats[0].shape[0]] + [m.shape[1] for m in mats]
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j] = None
            for k in range(i, j):
                c = cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1]
                if cost[i][j] is None or c < cost[i][j]:
                    cost[i][j], split[i][j] = c, k

    def product(i, j):
        return mats[i] if i == j else mm(product(i, split[i][j]), product(split[i][j] + 1, j))
    return product(0, n - 1)


@export(method=False)
def chain_matmul(*matrices):
    if len(matrices) == 1:
        return matrices[0].clone()
    return multi_dot(matrices)


@export(method=True)
def kron(input, other):
    nd = max(input.ndim, other.ndim)
    a = input.reshape((1,) * (nd - input.ndim) + tuple(input.shape))
    b = other.reshape((1,) * (nd - other.ndim) + tuple(other.shape))
    a_shape = [n for d in a.shape for n in (d, 1)]
    b_shape = [n for d in b.shape for n in (1, d)]
    return (a.reshape(a_shape) * b.reshape(b_shape)).reshape([x * y for x, y in zip(a.shape, b.shape)])


@export(method=False)
def tensordot(a, b, dims=2, out=None):
    if isinstance(dims, int):
        da, db = list(range(a.ndim - dims, a.ndim)), list(range(dims))
    elif isinstance(dims, Tensor):
        return tensordot(a, b, dims.tolist() if dims.ndim else int(dims.item()))
    else:
        da, db = ([d] if isinstance(d, int) else list(d) for d in dims)
    da, db = [d % a.ndim for d in da], [d % b.ndim for d in db]
    for x, y in zip(da, db):
        if a.shape[x] != b.shape[y]:
            raise RuntimeError("contracted dimensions need to match, but first has size %d in dim %d and second has "
                               "size %d in dim %d" % (a.shape[x], x - a.ndim if x == a.ndim - 1 else x, b.shape[y], y))
    fa = [d for d in range(a.ndim) if d not in da]
    fb = [d for d in range(b.ndim) if d not in db]
    k = int(np.prod([a.shape[d] for d in da]))
    A = a.permute(fa + da).reshape(-1, k)
    B = b.permute(db + fb).reshape(k, -1)
    return mm(A, B).reshape([a.shape[d] for d in fa] + [b.shape[d] for d in fb])


@export(method=True)
def vdot(input, other):
    return dot(input.conj(), other)


@export(method=False)
def cdist(x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
    """Distances between the rows of x1 and x2 (batched): the p-norm of their differences; for p = 2 with more than
    25 rows (or compute_mode 'use_mm_for_euclid_dist'), PyTorch's matrix-product form (_euclidean_dist)."""
    if p < 0:
        raise RuntimeError("cdist only supports non-negative p values")
    if x1.shape[-1] != x2.shape[-1]:
        raise RuntimeError("X1 and X2 must have the same number of columns. X1: %d X2: %d"
                           % (x1.shape[-1], x2.shape[-1]))
    mm_mode = compute_mode == "use_mm_for_euclid_dist" or (
        compute_mode == "use_mm_for_euclid_dist_if_necessary" and (x1.shape[-2] > 25 or x2.shape[-2] > 25))
    if p == 2 and mm_mode and x1.numel() and x2.numel():
        batch = broadcast_shapes(tuple(x1.shape[:-2]), tuple(x2.shape[:-2]))
        return euclidean_dist(x1.expand(batch + tuple(x1.shape[-2:])), x2.expand(batch + tuple(x2.shape[-2:])))
    return (x1.unsqueeze(-2) - x2.unsqueeze(-3)).norm(p, -1)


def _euclidean_forward(xp, dt, x1, x2):
    """sqrt(max(0, |x1_i|^2 + |x2_j|^2 - 2 x1_i . x2_j)) by one matrix product, as PyTorch's _euclidean_dist."""
    a, b = np.asarray(xp.to_host(x1)), np.asarray(xp.to_host(x2))
    n1, n2 = (a * a).sum(-1, keepdims=True), (b * b).sum(-1, keepdims=True)
    left = np.concatenate([-2 * a, n1, np.ones_like(n1)], -1)
    right = np.concatenate([b, np.ones_like(n2), n2], -1)
    r = cpu.matmul(left, np.swapaxes(right, -1, -2))  # (on one BLAS thread where it is small: k = d + 2)
    return xp.from_host(np.sqrt(np.maximum(r, 0, out=r), out=r))


def _euclidean_grads(g, s):
    """PyTorch's _euclidean_dist_backward: a zero distance takes the subgradient 0."""
    ratio = (g / s.result).masked_fill(s.result == 0, 0.0)
    return (s.self * ratio.sum(-1, keepdim=True) - ratio @ s.other,
            s.other * ratio.sum(-2).unsqueeze(-1) - ratio.mT @ s.self)


def euclidean_dist(x1, x2):
    return dispatch(EUCLIDEAN_DIST, (x1, x2))


def _euclidean_samples(rng, dtype):
    if np.dtype(dtype).kind != "f":
        return []
    A = lambda *s: _arr(rng, s, -1.0, 1.0, dtype)  # noqa: E731
    return [((A(4, 3), A(5, 3)), {}), ((A(2, 3, 2), A(2, 4, 2)), {})]


def _np_euclidean(x1, x2):
    return np.sqrt(((x1[..., :, None, :] - x2[..., None, :, :]) ** 2).sum(-1))


EUCLIDEAN_DIST = register(Op("_euclidean_dist", _euclidean_forward, inputs=("self", "other"),
                             vjp=[lambda g, s: shared(g, s, 0, _euclidean_grads)[0],
                                  lambda g, s: shared(g, s, 1, _euclidean_grads)[1]],
                             node="EuclideanDistBackward0", call=euclidean_dist, api=(), samples=_euclidean_samples,
                             ref=_np_euclidean))


def vander(x, N=None):
    """Columns x^0, x^1, ..., x^(N-1) (increasing powers) as cumulative products, as PyTorch builds them."""
    if x.ndim < 1:
        raise RuntimeError("N must be greater than 1.")
    N = x.shape[-1] if N is None else N
    if N <= 1:
        if N < 1:
            raise RuntimeError("N must be greater than 1.")
        return x.unsqueeze(-1) * 0 + 1
    ones = x.unsqueeze(-1) * 0 + 1
    return cat([ones, x.unsqueeze(-1).expand(tuple(x.shape) + (N - 1,)).cumprod(-1)], -1)


def diagonal(A, *, offset=0, dim1=-2, dim2=-1):
    return _diagonal(A, offset, dim1, dim2)


@export(method=False)
def trapezoid(y, x=None, *, dx=None, dim=-1):
    if x is not None:
        if x.ndim == 1:
            shape = [1] * y.ndim
            shape[dim] = -1
            x = x.reshape(shape)
        return ((diff(x, dim=dim)) * (_slice(y, dim, 1, None) + _slice(y, dim, None, -1))).sum(dim) / 2
    dx = 1 if dx is None else dx
    return (_slice(y, dim, 1, None) + _slice(y, dim, None, -1)).sum(dim) * (dx / 2)


@export(method=False)
def trapz(y, x=None, *, dx=None, dim=-1):
    return trapezoid(y, x, dx=dx, dim=dim)


@export(method=False)
def cumulative_trapezoid(y, x=None, *, dx=None, dim=-1):
    avg = (_slice(y, dim, 1, None) + _slice(y, dim, None, -1)) / 2
    if x is not None:
        if x.ndim == 1:
            shape = [1] * y.ndim
            shape[dim] = -1
            x = x.reshape(shape)
        return (diff(x, dim=dim) * avg).cumsum(dim)
    return (avg * (1 if dx is None else dx)).cumsum(dim)


def _slice(t, dim, start, stop):
    key = [slice(None)] * t.ndim
    key[dim] = slice(start, stop)
    return t[tuple(key)]


export("cross", method=True)(torch_cross)
