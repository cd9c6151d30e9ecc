"""Index keys: a PyTorch index as a NumPy one, with PyTorch's checks (normalize_key).

Keys hold ints, slices, None, Ellipsis, lists, and index or mask tensors. Shared by ``__getitem__``
(jitgrad/ops/indexing.py) and ``__setitem__`` (jitgrad/_inplace.py).
"""
import numpy as np

from ._tensor import Tensor


def _is_basic(k):
    return k is None or k is Ellipsis or isinstance(k, slice) or (isinstance(k, (int, np.integer)) and not isinstance(k, bool))


def normalize_key(t, key):
    """A NumPy index for ``t`` from a PyTorch index (tensors become arrays); checks bounds like PyTorch."""
    if not isinstance(key, tuple):
        key = (key,)
    out = []
    for k in key:
        if isinstance(k, Tensor):
            if k.dtype.is_floating_point:
                raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
            k = k._data
        elif isinstance(k, list):
            k = np.asarray(k)
            if k.dtype.kind == "f":
                raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
        elif isinstance(k, bool):
            k = np.asarray(k)
        elif isinstance(k, slice) and k.step is not None and k.step <= 0:
            raise ValueError("step must be greater than zero")
        elif not (_is_basic(k) or isinstance(k, np.ndarray)):
            raise IndexError("only integers, slices (`:`), ellipsis (`...`), None and long or byte Variables are valid "
                             "indices (got %s)" % type(k).__name__)
        out.append(k)
    # bounds of integer indices, with PyTorch's message
    dim = 0
    n_explicit = sum(1 for k in out if k is not None and k is not Ellipsis and not (isinstance(k, np.ndarray) and k.dtype == bool))
    n_explicit += sum(k.ndim for k in out if isinstance(k, np.ndarray) and k.dtype == bool)
    if n_explicit > t.ndim:
        if t.ndim == 0:
            raise IndexError("invalid index of a 0-dim tensor. Use `tensor.item()` in Python or `tensor.item<T>()` in "
                             "C++ to convert a 0-dim tensor to a number")
        raise IndexError("too many indices for tensor of dimension %d" % t.ndim)
    for k in out:
        if k is None:
            continue
        if k is Ellipsis:
            dim = t.ndim - (n_explicit - dim)
            continue
        if isinstance(k, (int, np.integer)):
            n = t.shape[dim]
            if k < -n or k >= n:
                raise IndexError("index %d is out of bounds for dimension %d with size %d" % (k, dim, n))
        elif isinstance(k, np.ndarray):
            if k.dtype == bool:
                shape = t.shape[dim:dim + k.ndim]
                if k.shape != tuple(shape):
                    raise IndexError("The shape of the mask [%s] at index 0 does not match the shape of the indexed "
                                     "tensor [%s] at index %d" % (", ".join(map(str, k.shape)),
                                                                 ", ".join(map(str, t.shape)), dim))
                dim += k.ndim
                continue
            n = t.shape[dim]
            if k.size and (k.max() >= n or k.min() < -n):
                bad = k.max() if k.max() >= n else k.min()
                raise IndexError("index %d is out of bounds for dimension %d with size %d" % (bad, dim, n))
        dim += 1
    return tuple(out)
