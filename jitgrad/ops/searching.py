"""Searching and counting: searchsorted, bucketize, histc, histogram (integer or count results, no gradient:
NumPy on the host, as these are data-dependent loops), and the compositions take_along_dim and dist."""
import collections

import numpy as np

from .._op import broadcast_shapes
from .._tensor import Tensor
from ._table import export


def _device_of(*tensors):
    return next((t.device for t in tensors if isinstance(t, Tensor)), None)


def _result(arr, device):
    t = Tensor._wrap(np.array(arr, order="C"))  # (a 0-d result stays 0-d)
    return t if device is None or str(device) == "cpu" else t.to(device)


@export(method=False)
def searchsorted(sorted_sequence, input, *, out_int32=False, right=False, side=None, sorter=None):
    """Indices where ``input``'s values would be inserted into ``sorted_sequence`` (its last dim) to keep it sorted."""
    if side is not None:
        if side not in ("left", "right"):
            raise RuntimeError("torch.searchsorted(): side can only be 'left' or 'right' but got %s" % side)
        if right and side == "left":
            raise RuntimeError("torch.searchsorted(): side and right can't be set to opposites, got side of left while "
                               "right was True")
        right = side == "right"
    seq = sorted_sequence._host()
    scalar = not isinstance(input, Tensor)
    values = np.asarray(input) if scalar else input._host()
    if sorter is not None:
        seq = np.take_along_axis(seq, sorter._host(), -1)
    if seq.ndim > 1 and (values.ndim != seq.ndim or values.shape[:-1] != seq.shape[:-1]):
        raise RuntimeError("torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 dimensions "
                           "of boundaries tensor and input value tensor must match, but we got boundaries tensor %s and "
                           "input value tensor %s" % (list(seq.shape), list(values.shape)))
    how = "right" if right else "left"
    if seq.ndim <= 1:
        out = np.searchsorted(seq.reshape(-1), values, side=how)
    else:
        rows_s, rows_v = seq.reshape(-1, seq.shape[-1]), values.reshape(-1, values.shape[-1])
        out = np.stack([np.searchsorted(s, v, side=how) for s, v in zip(rows_s, rows_v)]).reshape(values.shape)
    return _result(np.asarray(out, np.int32 if out_int32 else np.int64), _device_of(sorted_sequence))


@export(method=False)
def bucketize(input, boundaries, *, out_int32=False, right=False):
    """The bucket of each value of ``input`` given 1-D ``boundaries`` (searchsorted with the roles swapped)."""
    if boundaries.ndim != 1:
        raise RuntimeError("boundaries tensor must be 1 dimension, but got dim(%d)" % boundaries.ndim)
    return searchsorted(boundaries, input, out_int32=out_int32, right=right)


def _float_only(name, t):
    if not t.dtype.is_floating_point:
        raise NotImplementedError("\"%s\" not implemented for '%s'" % (name, t.dtype.scalar_type))


@export()
def histc(input, bins=100, min=0, max=0):
    """Counts of ``input``'s values in ``bins`` equal bins over [min, max] (the data's range when min == max),
    values outside ignored; in input's dtype."""
    _float_only("histogram_cpu", input)
    if bins <= 0:
        raise RuntimeError("torch.histc(): bins must be > 0, but got %d for dimension 0" % bins)
    x = input._host().astype(np.float64).reshape(-1)
    lo, hi = float(min), float(max)
    if lo > hi:
        raise RuntimeError("torch.histc(): max must be larger than min")
    if lo == hi and x.size:
        lo, hi = float(x.min()), float(x.max())
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    counts, _ = np.histogram(x, bins=bins, range=(lo, hi))
    return _result(counts.astype(input.dtype.np), input.device)


HistogramResult = collections.namedtuple("histogram", ["hist", "bin_edges"])


@export()
def histogram(input, bins, *, range=None, weight=None, density=False):
    """(hist, bin_edges) of ``input``: ``bins`` equal bins (over ``range`` or the data's) or the given edges."""
    _float_only("histogram_cpu", input)
    x = input._host().reshape(-1)
    edges = bins._host() if isinstance(bins, Tensor) else int(bins)
    w = None if weight is None else weight._host().reshape(-1)
    hist, bin_edges = np.histogram(x, bins=edges, range=range, weights=w, density=density)
    dt = input.dtype.np
    return HistogramResult(_result(hist.astype(dt), input.device), _result(bin_edges.astype(dt), input.device))


@export()
def take_along_dim(input, indices, dim=None):
    """input's values at ``indices`` along ``dim`` (the two broadcast against each other elsewhere); over the
    flattened input when dim is None. Composed of gather (GatherBackward0, as PyTorch)."""
    if dim is None:
        return input.reshape(-1).gather(0, indices.reshape(-1))
    if input.ndim != indices.ndim:
        raise RuntimeError("torch.take_along_dim(): input and indices should have the same number of dimensions, but "
                           "got %d dimensions for input, and %d dimensions for indices" % (input.ndim, indices.ndim))
    d = input._wrap_dim(dim)
    shape_in, shape_ix = list(input.shape), list(indices.shape)
    shape_in[d] = shape_ix[d] = 1
    common = list(broadcast_shapes(tuple(shape_in), tuple(shape_ix)))
    x_shape, i_shape = list(common), list(common)
    x_shape[d], i_shape[d] = input.shape[d], indices.shape[d]
    return input.expand(*x_shape).gather(d, indices.expand(*i_shape))


@export()
def dist(input, other, p=2):
    """||input - other||_p (broadcast)."""
    return (input - other).norm(p)
