"""Sparse tensors with gradients (``torch.sparse``): COO and CSR tensors, their constructors and conversions,
``jitgrad.sparse.mm`` / ``addmm`` / ``sum`` / ``softmax`` / ``log_softmax``, and sparse operands of ``mm``,
``@``, ``sum``, ``add``, ``mul``, ``transpose``. See docs/sparse.md.

Layering: above autograd (its ops are autograd Functions); it installs its methods on Tensor (``to_sparse``,
``to_dense``...) and on SparseTensor, and its dispatch into jitgrad/_op.py, when it loads.
"""
import numpy as np

from .. import _dtype as D
from .. import _op
from .._layout import sparse_coo, sparse_csc, sparse_csr, strided
from .._tensor import Tensor
from .._factories import tensor as _as_tensor
from ..ops.linalg import mm as _dense_mm
from . import _dispatch
from . import _functions as F
from ._tensor import SparseTensor, layout_name

__all__ = ["mm", "addmm", "sum", "softmax", "log_softmax", "sparse_coo_tensor", "sparse_csr_tensor", "sparse_csc_tensor", "spmm",
           "SparseTensor"]

_NO_INPUT = Tensor._wrap(np.zeros(()))  # sparse.mm is addmm without an input: its first next_functions entry


def _index_array(x, what):
    a = x.detach()._host() if isinstance(x, Tensor) else np.asarray(x)
    if a.dtype.kind not in "iuf" and a.size:
        raise RuntimeError("%s must be an integer tensor" % what)
    return np.ascontiguousarray(a, dtype=np.int64)


def _values_tensor(values, dtype):
    v = values if isinstance(values, Tensor) else _as_tensor(values, dtype=dtype)
    if dtype is not None and v.dtype is not D.to_dtype(dtype):
        v = v.to(D.to_dtype(dtype))
    return v


def _check_device(device):
    if device is not None and str(device).split(":")[0] != "cpu":
        raise NotImplementedError("sparse tensors are CPU tensors in jitgrad: device=%s is not supported" % device)


def _leaf(out, requires_grad):
    """``requires_grad=True``: the tensor is a leaf of its own that requires grad (as PyTorch's factories)."""
    if requires_grad:
        if not out.dtype.is_floating_point:
            raise RuntimeError("only Tensors of floating point dtype can require gradients")
        out = out.detach()
        out._requires_grad = True
    return out


def sparse_coo_tensor(indices, values, size=None, *, dtype=None, device=None, pin_memory=False, requires_grad=False,
                      check_invariants=None, is_coalesced=None):
    """A COO tensor from ``indices`` (sparse_dim, nnz) and ``values`` (nnz, *dense_shape); ``size`` inferred
    from the indices when not given. Gradients flow to ``values``."""
    _check_device(device)
    ind = _index_array(indices, "indices")
    v = _values_tensor(values, dtype)
    if ind.ndim != 2:
        raise RuntimeError("indices must be sparse_dim x nnz, but got: %s" % list(ind.shape))
    sd, nnz = ind.shape
    if v.ndim == 0 or v.shape[0] != nnz:
        raise RuntimeError("indices and values must have same nnz, but got nnz from indices: %d, nnz from values: %d"
                           % (nnz, v.shape[0] if v.ndim else 1))
    dense = tuple(v.shape[1:])
    if size is None:
        size = tuple(int(m) + 1 for m in ind.max(axis=1)) if nnz else (0,) * sd
        size += dense
    size = tuple(int(s) for s in size)
    if len(size) != sd + len(dense):
        raise RuntimeError("'len(size) == sparse_dim + dense_dim' is not satisfied: len(size) = %d, sparse_dim = %d, "
                           "dense_dim = %d" % (len(size), sd, len(dense)))
    if size[sd:] != dense:
        raise RuntimeError("values has incorrect size, expected %s, got %s" % (list((nnz,) + size[sd:]),
                                                                              list(v.shape)))
    _check_bounds(ind, size)  # (PyTorch leaves it to check_invariants; the kernels index without bounds checks)
    out = F.CooTensor.apply(v, ind, size, bool(is_coalesced))
    return _leaf(out, requires_grad)


def _check_bounds(ind, size):
    if not ind.size:
        return
    lo, hi = ind.min(axis=1), ind.max(axis=1)
    for d in range(ind.shape[0]):
        if lo[d] < 0:
            raise RuntimeError("found negative index %d for dim %d" % (lo[d], d))
        if hi[d] >= size[d]:
            raise RuntimeError("size is inconsistent with indices: for dim %d, size is %d but found index %d"
                               % (d, size[d], hi[d]))


def sparse_csr_tensor(crow_indices, col_indices, values, size=None, *, dtype=None, device=None, pin_memory=False,
                      requires_grad=False, check_invariants=None):
    """A 2-D CSR matrix from its row pointers, column indices and values; gradients flow to ``values``."""
    return _compressed_tensor(_CSR, crow_indices, col_indices, values, size, dtype, device, requires_grad)


def sparse_csc_tensor(ccol_indices, row_indices, values, size=None, *, dtype=None, device=None, pin_memory=False,
                      requires_grad=False, check_invariants=None):
    """A 2-D CSC matrix from its column pointers, row indices and values; gradients flow to ``values``."""
    return _compressed_tensor(_CSC, ccol_indices, row_indices, values, size, dtype, device, requires_grad)


# a compressed layout's words: its name, its two index arrays, the compressed dim, its lines, the other dim's count
_CSR = ("CSR", "crow_indices", "col_indices", 0, "rows", "ncols")
_CSC = ("CSC", "ccol_indices", "row_indices", 1, "columns", "nrows")


def _compressed_tensor(kind, compressed_indices, plain_indices, values, size, dtype, device, requires_grad):
    """CSR or CSC from its pointers (one per line of the compressed dim + 1), the other dim's indices and values,
    with PyTorch's invariant checks and messages."""
    name, cname, pname, d, lines, other = kind
    _check_device(device)
    comp, plain = _index_array(compressed_indices, cname), _index_array(plain_indices, pname)
    v = _values_tensor(values, dtype)
    if comp.ndim != 1 or plain.ndim != 1 or v.ndim != 1:
        raise NotImplementedError("jitgrad's %s tensors are 2-D matrices with 1-D %s, %s and values (batched or "
                                  "hybrid %s is not supported)" % (name, cname, pname, name))
    if size is None:
        size = [0, 0]
        size[d], size[1 - d] = comp.shape[0] - 1, int(plain.max()) + 1 if plain.size else 0
    size = tuple(int(s) for s in size)
    nnz = plain.shape[0]
    if len(size) != 2:
        raise RuntimeError("tensor dimensionality must be sum of batch, base, and dense dimensionalities (=0 + 2 + 0) "
                           "but got %d" % len(size))
    if comp.shape[0] != size[d] + 1:
        raise RuntimeError("%s.shape[-1] must be equal to the number of %s + 1 (=%d), but got %d"
                           % (cname, lines, size[d] + 1, comp.shape[0]))
    if v.shape[0] != nnz:
        raise RuntimeError("%s and values must have the same number of elements, but got %d and %d"
                           % (pname, nnz, v.shape[0]))
    if comp[0] != 0:
        raise RuntimeError("`%s[..., 0] == 0` is not satisfied." % cname)
    if comp[-1] != nnz:
        raise RuntimeError("`%s[..., -1] == nnz` is not satisfied." % cname)
    if np.any(np.diff(comp) < 0):
        raise RuntimeError("`0 <= %s[..., 1:] - %s[..., :-1] <= %s` is not satisfied." % (cname, cname, other))
    if nnz and (plain.min() < 0 or plain.max() >= size[1 - d]):
        raise RuntimeError("`0 <= %s < %s` is not satisfied." % (pname, other))
    out = F.CompressedTensor.apply(v, comp, plain, size, name)
    return _leaf(out, requires_grad)


# ---------------------------------------------------------------------- torch.sparse's functions
def _need_sparse(x, what):
    if x.layout is strided:
        raise RuntimeError("%s expected sparse coordinate tensor layout but got Strided" % what)


def mm(mat1, mat2, reduce="sum"):
    """Sparse @ dense with a sparse gradient for the sparse operand (on its pattern), as torch.sparse.mm."""
    if reduce != "sum":
        raise NotImplementedError("jitgrad.sparse.mm: reduce=%r is not implemented (only 'sum')" % reduce)
    if mat1.layout is strided:
        return _dense_mm(mat1, mat2)
    if mat2.layout is not strided:  # SpGEMM
        F.check_spgemm(mat1, mat2)
        coo = mat1.layout is sparse_coo
        return (F.SparseSparseMatmul if coo else F.SparseSparseAddmm).apply(mat1, mat2, coo, mat1.layout)
    F.check_mm(mat1, mat2)
    return F.SparseAddmm.apply(_NO_INPUT, mat1, mat2, 0, 1)


def addmm(mat, mat1, mat2, *, beta=1.0, alpha=1.0):
    """beta * mat + alpha * (mat1 @ mat2) for sparse mat1, as torch.sparse.addmm."""
    _need_sparse(mat1, "addmm")
    F.check_mm(mat1, mat2)
    out = (mat1.shape[0], mat2.shape[1])
    if len(mat.shape) > 2 or any(n not in (1, m) for n, m in zip(tuple(mat.shape)[::-1], out[::-1])):
        raise RuntimeError("The expanded size of the tensor (%d) must match the existing size (%d) at non-singleton "
                           "dimension 1.  Target sizes: [%d, %d].  Tensor sizes: %s" % (out[1], mat.shape[-1], out[0],
                                                                                        out[1], list(mat.shape)))
    return F.SparseAddmm.apply(mat, mat1, mat2, beta, alpha)


def sum(input, dim=None, dtype=None):
    """Sum over ``dim`` (an int or a tuple; all dims when None, giving a dense 0-d tensor); the gradient is
    sparse on the input's pattern."""
    _need_sparse(input, "coalesce")
    if dtype is not None:
        if not isinstance(dtype, D.dtype):
            raise TypeError("_sparse_sum(): argument 'dtype' must be torch.dtype, not %s" % type(dtype).__name__)
        input = input.to(dtype)
    dims = tuple(range(input.ndim)) if dim is None else (dim,) if isinstance(dim, int) else tuple(dim)
    dims = tuple(sorted(input._wrap_dim(d) for d in dims))
    return (F.SparseSum if dim is not None else F.SparseSumAll).apply(input, dims)


def _softmax(cls, input, dim, dtype):
    if input.layout is not sparse_coo:
        raise NotImplementedError("jitgrad.sparse.%s takes a sparse_coo tensor, got layout %r"
                                  % ("log_softmax" if cls.log else "softmax", input.layout))
    if dtype is not None:
        input = input.to(dtype)
    if not input.dtype.is_floating_point:
        raise RuntimeError("softmax: expected a floating point tensor, got %s" % input.dtype)
    return cls.apply(input, input._wrap_dim(dim))


def softmax(input, dim, *, dtype=None):
    """Softmax over ``dim`` of the specified entries (unspecified ones are -inf: they stay out)."""
    return _softmax(F.Softmax, input, dim, dtype)


def log_softmax(input, dim, *, dtype=None):
    return _softmax(F.LogSoftmax, input, dim, dtype)


def spmm(input, mat2):
    """torch.spmm: ``input @ mat2`` for a sparse ``input`` (the gradient of the sparse operand is dense)."""
    return _dense_mm(input, mat2)


# ---------------------------------------------------------------------- methods
def _to_dense(self, dtype=None, *, masked_grad=None):
    out = self if self.layout is strided else F.ToDense.apply(self)
    return out if dtype is None else out.to(dtype)


def _to_sparse(self, sparse_dim=None, *, layout=None, blocksize=None, dense_dim=None):
    if layout is sparse_csr:
        return _to_sparse_csr(self, dense_dim)
    if layout is sparse_csc:
        return _to_sparse_csc(self, dense_dim)
    if layout not in (None, sparse_coo) or blocksize is not None:
        raise NotImplementedError("to_sparse: layout %r is not supported by jitgrad" % (layout,))
    if self.layout is sparse_coo:
        if sparse_dim is not None and sparse_dim != self.sparse_dim():
            raise RuntimeError("to_sparse: conversion from Sparse to Sparse with sparse_dim argument "
                               "!=self.sparse_dim() is not supported")
        return self
    if sparse_dim is not None:
        if self.layout is not strided:
            raise RuntimeError("to_sparse: conversion from %s to Sparse with sparse_dim argument is not supported"
                               % layout_name(self))
        if not 0 < sparse_dim <= self.ndim:
            raise RuntimeError("sparse_dim argument must be in [1,%d] range, but %d is given" % (self.ndim, sparse_dim))
        return F.ToSparseDim.apply(self, sparse_dim)
    return F.ToSparse.apply(self, None)


def _to_sparse_csr(self, dense_dim=None):
    if dense_dim:
        raise NotImplementedError("to_sparse_csr: hybrid CSR tensors (dense_dim > 0) are not supported by jitgrad")
    if self.layout is sparse_csr:
        return self
    return F.ToSparseCsr.apply(self, sparse_csr)


def _to_sparse_csc(self, dense_dim=None):
    if dense_dim:
        raise NotImplementedError("to_sparse_csc: hybrid CSC tensors (dense_dim > 0) are not supported by jitgrad")
    if self.layout is sparse_csc:
        return self
    return F.ToSparseCsc.apply(self, sparse_csc)


def _coalesce(self):
    if self.layout is not sparse_coo:
        raise RuntimeError("coalesce expected sparse coordinate tensor layout but got %s" % layout_name(self))
    return self if self._coalesced else F.Coalesce.apply(self)


def _values(self):
    if self.layout is strided:
        raise RuntimeError("values expected sparse tensor layout but got Strided")
    if self.layout is sparse_coo and not self._coalesced:
        raise RuntimeError("Cannot get values on an uncoalesced tensor, please call .coalesce() first")
    return F.Values.apply(self)


def _t(self):
    if self.ndim > 2:
        raise RuntimeError("t() expects a tensor with <= 2 dimensions, but self is %dD" % self.ndim)
    return F.T.apply(self, 0, 1) if self.ndim == 2 else self


def _sparse_clone(self, *, memory_format=None):
    return F.Clone.apply(self)


def _dense_error(what, expected="sparse coordinate"):
    def method(self, *args, **kwargs):
        raise RuntimeError("%s expected %s tensor layout but got Strided" % (what, expected))
    method.__name__ = what
    return method


def _dense_nnz(self):
    raise NotImplementedError("Could not run 'aten::_nnz' with arguments from the 'CPU' backend.")


def install():
    """The sparse methods of Tensor and SparseTensor, and the sparse branch of dispatch."""
    for name, fn in (("to_dense", _to_dense), ("to_sparse", _to_sparse), ("to_sparse_csr", _to_sparse_csr),
                     ("to_sparse_csc", _to_sparse_csc),
                     ("coalesce", _coalesce), ("values", _values)):
        setattr(Tensor, name, fn)
    for name in ("is_coalesced", "indices", "_indices"):
        setattr(Tensor, name, _dense_error(name))
    Tensor._values = _dense_error("_values", "sparse")
    for name in ("crow_indices", "col_indices"):
        setattr(Tensor, name, _dense_error(name, "sparse row compressed"))
    for name in ("ccol_indices", "row_indices"):
        setattr(Tensor, name, _dense_error(name, "sparse column compressed"))
    Tensor.sparse_dim = lambda self: 0
    Tensor.dense_dim = lambda self: self.ndim
    Tensor._nnz = _dense_nnz
    SparseTensor.t = _t
    SparseTensor.clone = _sparse_clone
    _op.SPARSE_DISPATCH[0] = _dispatch.dispatch


install()
