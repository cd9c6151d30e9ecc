"""default_collate (samples -> a batch) and default_convert (one sample's arrays -> tensors), as PyTorch's."""
import collections.abc
import numbers

import numpy as np

from ..._dtype import float64
from ..._factories import as_tensor, tensor
from ..._grad_mode import STATE
from ..._tensor import Tensor
from ...ops.join import stack

_ERR = "default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; found {}"


def _is_string_array(a):
    return a.dtype.kind in "USO"


def _is_namedtuple(x):
    return isinstance(x, tuple) and hasattr(x, "_fields")


def default_convert(data):
    """NumPy arrays (and scalars) in ``data`` become tensors, through mappings, namedtuples and sequences
    (tuples become lists); everything else is returned as it is."""
    if isinstance(data, Tensor):
        return data
    if isinstance(data, np.ndarray) or isinstance(data, np.generic) and not isinstance(data, (np.str_, np.bytes_)):
        if isinstance(data, np.ndarray) and _is_string_array(data):
            return data
        return as_tensor(data)
    if isinstance(data, collections.abc.Mapping):
        try:
            return type(data)({k: default_convert(v) for k, v in data.items()})
        except TypeError:
            return {k: default_convert(v) for k, v in data.items()}
    if _is_namedtuple(data):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        try:
            return type(data)([default_convert(d) for d in data])
        except TypeError:
            return [default_convert(d) for d in data]
    return data


def _stack_tensors(batch):
    """torch.stack(batch); tensors that autograd need not see are stacked as arrays (the same result)."""
    if not (STATE.grad_enabled and any(t._requires_grad for t in batch)) and \
            all(t._data.__class__ is np.ndarray for t in batch):
        shape, dtype = batch[0]._data.shape, batch[0]._data.dtype
        if all(t._data.shape == shape and t._data.dtype == dtype for t in batch):
            return Tensor._wrap(np.stack([t._data for t in batch]))
    return stack(batch, 0)


def default_collate(batch):
    """A batch of samples as PyTorch collates it: tensors, NumPy arrays and numbers are stacked (Python floats
    to float64, ints to int64), strings kept in a list, and mappings, namedtuples and sequences collated
    field by field (a tuple's fields come back as a list)."""
    elem = batch[0]
    if isinstance(elem, Tensor):
        return _stack_tensors(batch)
    if isinstance(elem, np.ndarray):
        if _is_string_array(elem):
            raise TypeError(_ERR.format(elem.dtype))
        return _stack_tensors([as_tensor(b) for b in batch])
    if isinstance(elem, np.generic) and not isinstance(elem, (np.str_, np.bytes_)):
        if isinstance(elem, np.bool_) or elem.dtype.kind in "biuf":
            return as_tensor(np.array(batch))
        raise TypeError(_ERR.format(elem.dtype))
    if isinstance(elem, bool) or isinstance(elem, numbers.Integral):
        return tensor(batch)
    if isinstance(elem, float):
        return tensor(batch, dtype=float64)
    if isinstance(elem, (str, bytes)):
        return batch
    if isinstance(elem, collections.abc.Mapping):
        try:
            return type(elem)({k: default_collate([d[k] for d in batch]) for k in elem})
        except TypeError:
            return {k: default_collate([d[k] for d in batch]) for k in elem}
    if _is_namedtuple(elem):
        return type(elem)(*(default_collate(samples) for samples in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        size = len(elem)
        if not all(len(e) == size for e in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        transposed = list(zip(*batch))
        if isinstance(elem, tuple):
            return [default_collate(samples) for samples in transposed]
        try:
            return type(elem)([default_collate(samples) for samples in transposed])
        except TypeError:
            return [default_collate(samples) for samples in transposed]
    raise TypeError(_ERR.format(type(elem)))
