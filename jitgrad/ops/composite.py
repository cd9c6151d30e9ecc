"""Functions composed of table ops, so their gradients come from the ops' formulas: closeness tests,
addcmul/addcdiv, grids and broadcasting, stacking, repeats, NaN-aware sums, take, trace and diff, with
PyTorch's signatures, dtypes and errors."""
import warnings

import ml_dtypes
import numpy as np

from .. import _dtype as D
from .._op import broadcast_shapes
from .._tensor import Tensor
from ._table import export
from .indexing import index_put_zeros, index_select
from .join import cat


def _tensors(tensors):
    """Tensors given as arguments or as one list/tuple of them (meshgrid, broadcast_tensors)."""
    return tuple(tensors[0]) if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)) else tuple(tensors)


# ---------------------------------------------------------------------- closeness
@export()
def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """|input - other| <= atol + |rtol * other|, elementwise (PyTorch's rule: equal values, infinities
    included, are close; NaN is close to NaN only with equal_nan)."""
    if input.dtype is not other.dtype:
        raise RuntimeError("%s did not match %s" % (input.dtype.scalar_type, other.dtype.scalar_type))
    close = input == other
    if input.dtype.is_floating_point:
        if equal_nan:
            close = close | (input.isnan() & other.isnan())
        error = (input - other).abs()
        close = close | (error.isfinite() & (error <= atol + (rtol * other).abs()))
    return close


@export()
def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    return bool(isclose(input, other, rtol, atol, equal_nan).all())


@export()
def equal(input, other):
    """True where both have the same shape and elements (NaN equals nothing)."""
    return input.shape == other.shape and bool((input == other).all())


# ---------------------------------------------------------------------- addcmul, addcdiv
@export(inplace=True)
def addcmul(input, tensor1, tensor2, *, value=1):
    """input + value * tensor1 * tensor2, in that order of operations (PyTorch's kernel's)."""
    return input + value * tensor1 * tensor2


@export(inplace=True)
def addcdiv(input, tensor1, tensor2, *, value=1):
    if not tensor1.dtype.is_floating_point and not tensor2.dtype.is_floating_point:
        raise RuntimeError(
            "Integer division with addcdiv is no longer supported, and in a future  release addcdiv will perform a "
            "true division of tensor1 and tensor2. The historic addcdiv behavior can be implemented as (input + value "
            "* torch.trunc(tensor1 / tensor2)).to(input.dtype) for integer inputs and as (input + value * tensor1 / "
            "tensor2) for float inputs. The future addcdiv behavior is just the latter implementation: (input + value "
            "* tensor1 / tensor2), for all dtypes.")
    return input + value * tensor1 / tensor2


# ---------------------------------------------------------------------- grids and broadcasting
@export(method=False)
def broadcast_tensors(*tensors):
    tensors = _tensors(tensors)
    shape = broadcast_shapes(*(t.shape for t in tensors))
    return tuple(t.expand(shape) for t in tensors)


@export(method=False)
def meshgrid(*tensors, indexing=None):
    """Coordinate grids of 0-d or 1-D tensors, 'ij' (matrix) or 'xy' (Cartesian) indexing (expanded views)."""
    tensors = _tensors(tensors)
    if indexing is None:
        warnings.warn("torch.meshgrid: in an upcoming release, it will be required to pass the indexing argument.",
                      UserWarning, stacklevel=2)
        indexing = "ij"
    if indexing not in ("ij", "xy"):
        raise RuntimeError('torch.meshgrid: indexing must be one of "xy" or "ij", but received: %s' % indexing)
    for t in tensors:
        if t.ndim > 1:
            raise RuntimeError("torch.meshgrid: Expected 0D or 1D tensor in the tensor list but got: %s"
                               % (t.ndim,))
    flat = [t.reshape(-1) for t in tensors]
    swap = indexing == "xy" and len(flat) >= 2
    if swap:
        flat[0], flat[1] = flat[1], flat[0]
    shape = tuple(t.shape[0] for t in flat)
    grids = [t.reshape(tuple(-1 if k == i else 1 for k in range(len(flat)))).expand(shape) for i, t in enumerate(flat)]
    if swap:  # 'xy': the grids of the first two swapped, as PyTorch makes them
        grids[0], grids[1] = grids[1], grids[0]
    return tuple(grids)


# ---------------------------------------------------------------------- stacking
def _at_least(n, tensors):
    out = []
    for t in _tensors(tensors):
        if t.ndim < n:
            shape = {0: (1,) * n, 1: (1,) + tuple(t.shape) + (1,) * (n - 2), 2: tuple(t.shape) + (1,)}[t.ndim]
            t = t.reshape(shape[-n:] if t.ndim == 0 else shape)
        out.append(t)
    return out[0] if len(out) == 1 else tuple(out)


@export(method=False)
def atleast_1d(*tensors):
    return _at_least(1, tensors)


@export(method=False)
def atleast_2d(*tensors):
    return _at_least(2, tensors)


@export(method=False)
def atleast_3d(*tensors):
    return _at_least(3, tensors)


def _as_tuple(x):
    return x if isinstance(x, tuple) else (x,)


@export(method=False)
def hstack(tensors):
    ts = _as_tuple(atleast_1d(*tensors))
    return cat(ts, 0 if ts[0].ndim == 1 else 1)


@export(method=False)
def vstack(tensors):
    return cat(_as_tuple(atleast_2d(*tensors)), 0)


@export(method=False)
def dstack(tensors):
    return cat(_as_tuple(atleast_3d(*tensors)), 2)


@export(method=False)
def column_stack(tensors):
    return cat([t.reshape(-1, 1) if t.ndim <= 1 else t for t in tensors], 1)


# ---------------------------------------------------------------------- repeats
@export()
def tile(input, dims):
    """repeat with ``dims`` padded with ones in front to the input's rank."""
    dims = tuple(dims) if isinstance(dims, (tuple, list)) else (dims,)
    return input.repeat((1,) * (input.ndim - len(dims)) + dims)


@export()
def repeat_interleave(input, repeats=None, dim=None, *, output_size=None):
    """Each element (each slice along ``dim``) repeated ``repeats`` times: an index_select, so the gradient
    adds the repeats back. ``repeat_interleave(repeats)`` of an integer tensor alone repeats its indices."""
    if repeats is None:  # torch.repeat_interleave(repeats): 0, 1, ... each repeated
        counts = input.cpu().numpy().astype(np.int64)
        return Tensor._wrap(np.repeat(np.arange(counts.shape[0], dtype=np.int64), counts))
    if dim is None:
        input, dim = input.reshape(-1), 0
    dim = input._wrap_dim(dim)
    n = input.shape[dim]
    counts = repeats.cpu().numpy().astype(np.int64).reshape(-1) if isinstance(repeats, Tensor) else np.array([repeats])
    if counts.size == 1:
        counts = np.full(n, counts[0])
    elif counts.size != n:
        raise RuntimeError("repeats must have the same size as input along dim, but got repeats.size(0) = %d and "
                           "input.size(0) = %d" % (counts.size, n))
    if (counts < 0).any():
        raise RuntimeError("repeats can not be negative" if isinstance(repeats, Tensor) else
                           "Repeats must be non-negative")
    index = Tensor._wrap(np.repeat(np.arange(n, dtype=np.int64), counts)).to(input.device)
    return index_select(input, dim, index)


# ---------------------------------------------------------------------- NaN-aware
@export(inplace=True)
def nan_to_num(input, nan=0.0, posinf=None, neginf=None):
    """NaN, +inf and -inf replaced by ``nan`` and by the dtype's largest and lowest values (or those given)."""
    if not input.dtype.is_floating_point:
        return input.clone()
    info = ml_dtypes.finfo(input.dtype.np)
    hi = info.max if posinf is None else posinf
    lo = info.min if neginf is None else neginf
    out = input.where(~input.isnan(), nan)
    out = out.where(~out.isposinf(), hi)
    return out.where(~out.isneginf(), lo)


@export()
def nansum(input, dim=None, keepdim=False, *, dtype=None):
    if input.dtype.is_complex:
        raise RuntimeError("nansum on CPU does not support complex inputs")
    x = input.where(~input.isnan(), 0) if input.dtype.is_floating_point else input
    s = x.sum(dim, keepdim=keepdim) if dim is not None else x.sum()
    return s if dtype is None else s.to(dtype)


@export()
def nanmean(input, dim=None, keepdim=False, *, dtype=None):
    if input.dtype.is_complex:
        raise RuntimeError("nansum on CPU does not support complex inputs")
    if not input.dtype.is_floating_point:
        raise RuntimeError("nanmean(): expected input to have floating point or complex dtype but got %s"
                           % input.dtype.scalar_type)
    count = (~input.isnan()).sum(dim, keepdim=keepdim) if dim is not None else (~input.isnan()).sum()
    return nansum(input, dim, keepdim, dtype=dtype) / count


# ---------------------------------------------------------------------- take, trace, diff
@export()
def take(input, index):
    n = input.numel()
    i = index.cpu().numpy()
    bad = i[(i < -n) | (i >= n)]
    if bad.size:
        raise IndexError("out of range: tried to access index %d on a tensor of %d elements." % (bad[0], n))
    return input.reshape(-1)[index]


@export()
def trace(input):
    if input.ndim != 2:
        raise RuntimeError("trace: expected a matrix, but got tensor with dim %d" % input.ndim)
    return input.diagonal().sum()


@export()
def diff(input, n=1, dim=-1, prepend=None, append=None):
    if input.ndim == 0:
        raise RuntimeError("diff expects input to be at least one-dimensional")
    dim = input._wrap_dim(dim)
    parts = [t for t in (prepend, input, append) if t is not None]
    x = cat(parts, dim) if len(parts) > 1 else input
    for _ in range(n):
        m = x.shape[dim]
        hi, lo = x.narrow(dim, 1, max(m - 1, 0)), x.narrow(dim, 0, max(m - 1, 0))
        x = hi != lo if x.dtype is D.bool_ else hi - lo
    return x


# ---------------------------------------------------------------------- index_add, index_copy, index_fill
def _along(input, dim, index, name, index_error):
    """(dim, key ``[:, ..., index]``, index array) of an index_* call, with PyTorch's checks of ``index``."""
    dim = input._wrap_dim(dim)
    idx = index.cpu().numpy()
    if index.dtype not in (D.int64, D.int32) or name == "index_fill_" and index.dtype is not D.int64:
        raise index_error[0](index_error[1] % index.dtype.scalar_type)
    if index.ndim > 1:
        raise IndexError("%s(): Index is supposed to be a vector, but got dim: %d with type: %s and size: %s"
                         % (name, index.ndim, index.dtype.scalar_type, list(index.shape)))
    idx = idx.reshape(-1)
    n = input.shape[dim] if input.ndim else 1
    bad = idx[(idx < (-n if name == "index_fill_" else 0)) | (idx >= n)]  # (only index_fill takes negative ones)
    if bad.size:
        prefix = "index_copy_(): " if name == "index_copy_" else ""
        raise (RuntimeError if name == "index_add_" else IndexError)(
            "%sindex %d is out of bounds for dimension %d with size %d" % (prefix, bad[0], dim, n))
    idx = idx.astype(np.int64)
    return dim, (slice(None),) * dim + (idx,), idx


def _slices(input, dim, n):
    """The shape of ``n`` slices of ``input`` along ``dim`` (an index_add or index_copy source's)."""
    return tuple(input.shape[:dim]) + (n,) + tuple(input.shape[dim + 1:])


@export(inplace=True)
def index_add(input, dim, index, source, *, alpha=1):
    """input with ``alpha * source``'s slices added along ``dim`` at ``index`` (repeats add up)."""
    dim, key, idx = _along(input, dim, index, "index_add_",
                           (RuntimeError, "index_add_(): Expected dtype int32/int64 for index but got: %s"))
    if source.dtype is not input.dtype:
        raise RuntimeError("index_add_(): self (%s) and source (%s) must have the same scalar type"
                           % (input.dtype.scalar_type, source.dtype.scalar_type))
    if tuple(source.shape) != _slices(input, dim, len(idx)):
        size = source.shape[dim] if dim < source.ndim else 1
        if size != len(idx):
            raise RuntimeError("index_add_(): Number of indices (%d) should be equal to source.size(dim): (%d), for "
                               "dim: %d" % (len(idx), size, dim))
        raise RuntimeError("source tensor shape must match self tensor shape, excluding the specified dimension. "
                           "Got self.shape = %s source.shape = %s" % (list(input.shape), list(source.shape)))
    return input + index_put_zeros(source if alpha == 1 else alpha * source, tuple(input.shape), key, True)


@export(inplace=True)
def index_copy(input, dim, index, source):
    """input with ``source``'s slices written along ``dim`` at ``index``."""
    dim, key, idx = _along(input, dim, index, "index_copy_",
                           (RuntimeError, "index_copy_(): Expected a long tensor for index, but got %s"))
    if source.dtype is not input.dtype:
        raise RuntimeError("index_copy_(): self and source expected to have the same dtype, but got (self) %s and "
                           "(source) %s" % (input.dtype.scalar_type, source.dtype.scalar_type))
    if tuple(source.shape) != _slices(input, dim, len(idx)):
        raise IndexError("index_copy_(): Number of indices (%d) should be equal to source.size(dim) (%d)"
                         % (len(idx), source.shape[dim] if source.ndim > dim else 1))
    mask = np.zeros(input.shape, bool)
    mask[key] = True
    return input.where(~Tensor._wrap(mask).to(input.device), index_put_zeros(source, tuple(input.shape), key, False))


@export(inplace=True)
def index_fill(input, dim, index, value):
    """input with its slices along ``dim`` at ``index`` set to ``value``."""
    dim, key, idx = _along(input, dim, index, "index_fill_", (IndexError, "index_fill_(): Expected dtype int64 for "
                                                                          "index.%.0s"))
    mask = np.zeros(input.shape, bool)
    mask[key] = True
    return input.masked_fill(Tensor._wrap(mask).to(input.device), value)
