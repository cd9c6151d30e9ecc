"""SparseTensor: a Tensor whose elements are mostly zero, held as index and value arrays.

COO (``layout=jitgrad.sparse_coo``): ``indices`` (sparse_dim, nnz) int64 and ``values`` (nnz, *dense_shape),
duplicates allowed until ``coalesce()`` sorts them and sums them up (hybrid tensors: ``dense_dim() > 0``).
CSR (``layout=jitgrad.sparse_csr``, 2-D): ``crow_indices`` (rows + 1,), ``col_indices`` and ``values`` (nnz,).
CSC (``layout=jitgrad.sparse_csc``, 2-D): ``ccol_indices`` (cols + 1,), ``row_indices`` and ``values``, column by
column (the CSR arrays of the transpose).

It is a Tensor for everything the graph needs (requires_grad, grad_fn, hooks, .grad, the engine's shape
checks); its ``_data`` is a SparseMeta (shape and dtype, no array), so dispatch hands any table op on it to
jitgrad.sparse (jitgrad/sparse/_dispatch.py), which runs the ops it has and names the rest in its error.
"""
import numpy as np

from .. import _dtype as D
from .._device import CPU
from .._layout import SparseMeta, sparse_coo, sparse_csc, sparse_csr
from .._repr import format_array
from .._tensor import Tensor
from ..kernels import sparse as K

LAYOUT_NAMES = {sparse_coo: "Sparse", sparse_csr: "SparseCsr", sparse_csc: "SparseCsc"}  # (as PyTorch's messages name them)


def layout_name(t):
    return LAYOUT_NAMES.get(t.layout, "Strided")


class SparseTensor(Tensor):
    # _lay: the layout; _ind: COO indices array, CSR (crow, col) or CSC (ccol, row) arrays; _vals: the values array;
    # _coalesced: COO entries sorted and unique
    __slots__ = ("_lay", "_ind", "_vals", "_coalesced")

    @property
    def layout(self):
        return self._lay

    @property
    def is_sparse(self):
        return self._lay is sparse_coo

    @property
    def is_sparse_csr(self):
        return self._lay is sparse_csr

    @property
    def device(self):
        return CPU

    is_cuda = property(lambda self: False)
    is_cpu = property(lambda self: True)

    def sparse_dim(self):
        return self._ind.shape[0] if self._lay is sparse_coo else 2

    def dense_dim(self):
        return self._vals.ndim - 1

    def _nnz(self):
        return self._vals.shape[0]

    def is_coalesced(self):
        self._need_coo("is_coalesced")
        return self._coalesced

    def _indices(self):
        self._need_coo("_indices")
        return Tensor._wrap(self._ind)

    def indices(self):
        self._need_coo("indices")
        if not self._coalesced:
            raise RuntimeError("Cannot get indices on an uncoalesced tensor, please call .coalesce() first")
        return Tensor._wrap(self._ind)

    def _values(self):
        """The values array as a tensor, without history (PyTorch's ``_values()``)."""
        return Tensor._wrap(self._vals)

    def crow_indices(self):
        self._need_csr("crow_indices")
        return Tensor._wrap(self._ind[0])

    def col_indices(self):
        self._need_csr("col_indices")
        return Tensor._wrap(self._ind[1])

    def ccol_indices(self):
        self._need_csc("ccol_indices")
        return Tensor._wrap(self._ind[0])

    def row_indices(self):
        self._need_csc("row_indices")
        return Tensor._wrap(self._ind[1])

    def _need_csc(self, what):
        if self._lay is not sparse_csc:
            raise RuntimeError("%s expected sparse column compressed tensor layout but got %s" % (what, layout_name(self)))

    def _need_coo(self, what):
        if self._lay is not sparse_coo:
            raise RuntimeError("%s expected sparse coordinate tensor layout but got %s" % (what, layout_name(self)))

    def _need_csr(self, what):
        if self._lay is not sparse_csr:
            raise RuntimeError("%s expected sparse row compressed tensor layout but got %s" % (what, layout_name(self)))

    # ------------------------------------------------------------- what has no meaning without an array
    def stride(self, dim=None):  # (PyTorch 2.13 gives a COO tensor zeros)
        if self._lay is not sparse_coo:
            raise RuntimeError("Sparse %s tensors do not have strides" % ("CSR" if self._lay is sparse_csr else "CSC"))
        st = (0,) * self.ndim
        return st if dim is None else st[self._wrap_dim(dim)]

    def is_contiguous(self, memory_format=None):
        if self._lay is not sparse_coo:
            raise RuntimeError("Sparse %s tensors do not have is_contiguous" % ("CSR" if self._lay is sparse_csr else "CSC"))
        return False

    def data_ptr(self):
        raise RuntimeError("Cannot access data pointer of Tensor that doesn't have storage")

    def storage_offset(self):
        return 0

    def numpy(self, *, force=False):
        raise TypeError("can't convert %s layout tensor to numpy. Use Tensor.to_dense() first."
                        % layout_name(self))

    def _host(self):
        raise RuntimeError("Cannot access data pointer of Tensor that doesn't have storage")

    # ------------------------------------------------------------- aliases and copies
    def _alias(self, grad_fn=None, output_nr=0, share_version=True):
        t = _new(self._lay, self._ind, self._vals, self._data.shape, self._coalesced, grad_fn is not None)
        if share_version:
            t._vc = self._vc
        t.grad_fn = grad_fn
        if output_nr:
            t._output_nr = output_nr
        return t

    @property
    def data(self):
        return _new(self._lay, self._ind, self._vals, self._data.shape, self._coalesced)

    def _owned_copy(self):
        return _new(self._lay, self._ind, self._vals.copy(), self._data.shape, self._coalesced)

    def __deepcopy__(self, memo):
        if self.grad_fn is not None:
            raise RuntimeError("Only Tensors created explicitly by the user (graph leaves) support the deepcopy "
                               "protocol at the moment.")
        ind = tuple(a.copy() for a in self._ind) if self._lay is not sparse_coo else self._ind.copy()
        t = _new(self._lay, ind, self._vals.copy(), self._data.shape, self._coalesced, self._requires_grad)
        if self._grad is not None:
            t._grad = self._grad._owned_copy()
        memo[id(self)] = t
        return t

    def __reduce_ex__(self, proto):
        return (_new, (self._lay, self._ind, self._vals, self._data.shape, self._coalesced, self._requires_grad))

    def __repr__(self, *, tensor_contents=None):
        return sparse_repr(self)

    __str__ = __repr__


def _new(layout, ind, vals, shape, coalesced=False, requires_grad=False):
    """A sparse tensor (a leaf) on index and value arrays (no copies)."""
    t = object.__new__(SparseTensor)
    t._data = SparseMeta(shape, vals.dtype, layout)
    t._vc = [0]
    t._requires_grad = requires_grad
    t.grad_fn = None
    t._lay, t._ind, t._vals, t._coalesced = layout, ind, vals, coalesced
    return t


def coo(indices, values, shape, coalesced=False):
    return _new(sparse_coo, indices, values, tuple(shape), coalesced or values.shape[0] <= 1)


def csr(crow, col, values, shape):
    return _new(sparse_csr, (crow, col), values, tuple(shape))


def csc(ccol, row, values, shape):
    return _new(sparse_csc, (ccol, row), values, tuple(shape))


# ------------------------------------------------------------- array views of a sparse tensor
def n_sparse(t):
    """How many positions the sparse dims span."""
    n = 1
    for s in t._data.shape[:t.sparse_dim()]:
        n *= s
    return n


def keys(t):
    """Row-major key of each entry's coordinates over the sparse dims (COO or CSR)."""
    if t._lay is sparse_csr:
        crow, col = t._ind
        return K.csr_rows(crow) * t._data.shape[1] + col
    if t._lay is sparse_csc:
        ccol, row = t._ind
        return row * t._data.shape[1] + K.csr_rows(ccol)
    return K.linear_keys(t._ind, t._data.shape[:t._ind.shape[0]])


def flat_values(t):
    """The values as (nnz, K): dense dims flattened."""
    v = t._vals
    return v.reshape(v.shape[0], int(np.prod(v.shape[1:], dtype=np.int64)))


def coalesced(t):
    """``t`` as a coalesced COO tensor (itself if it is one): a CSR matrix's entries are already in order."""
    if t._lay is sparse_csr:
        crow, col = t._ind
        return coo(np.stack([K.csr_rows(crow), col]), t._vals, t._data.shape, True)
    if t._lay is sparse_csc:  # (entries column by column: sorted by row-major key, none repeated)
        k = keys(t)
        order = np.argsort(k, kind="stable")
        return coo(K.unravel_keys(k[order], t._data.shape), t._vals[order], t._data.shape, True)
    if t._coalesced:
        return t
    sizes = t._data.shape[:t._ind.shape[0]]
    ukeys, uvals, _ = K.coalesce(keys(t), flat_values(t))
    return coo(K.unravel_keys(ukeys, sizes), uvals.reshape((-1,) + t._vals.shape[1:]), t._data.shape, True)


def csr_arrays(t):
    """(crow, col, values) of a 2-D sparse tensor: its own for CSR, made from the coalesced COO tensor else."""
    if t._lay is sparse_csr:
        return t._ind + (t._vals,)
    if t._lay is sparse_csc:  # the CSR arrays of the transpose of the transpose
        tcrow, tcol, src = K.transpose_csr(t._ind[0], t._ind[1], t._data.shape[0])
        return tcrow, tcol, t._vals[src]
    if t.dense_dim():
        raise RuntimeError("addmm: matrices expected, got %dD tensor" % t.dense_dim())
    if t.ndim != 2:
        raise RuntimeError("addmm: matrices expected, got %dD tensor" % t.ndim)
    c = coalesced(t)
    return K.row_pointers(c._ind[0], t._data.shape[0]), c._ind[1], c._vals


def dense_array(t):
    """The dense NumPy array of a sparse tensor (duplicates summed)."""
    shape = t._data.shape
    out = K.to_dense(keys(t), flat_values(t), n_sparse(t))
    return out.reshape(shape)


def gather(g, pattern):
    """The entries of gradient ``g`` (dense, or sparse of the same shape) at the coordinates of each entry of
    sparse tensor ``pattern``: an array shaped like its values."""
    vshape = pattern._vals.shape
    if g.layout is not sparse_coo and g.layout is not sparse_csr and g.layout is not sparse_csc:
        return g._data.reshape((n_sparse(pattern),) + vshape[1:])[keys(pattern)]
    gc = coalesced(g)
    gk, want = keys(gc), keys(pattern)
    pos = np.minimum(np.searchsorted(gk, want), max(gk.shape[0] - 1, 0))
    found = gk[pos] == want if gk.shape[0] else np.zeros(want.shape, np.bool_)
    out = np.zeros(vshape, gc._vals.dtype)
    out[found] = gc._vals[pos[found]]
    return out


def like(pattern, values):
    """A sparse tensor with ``pattern``'s layout and coordinates and the given values array."""
    if pattern._lay is sparse_csr:
        return csr(pattern._ind[0], pattern._ind[1], values, pattern._data.shape)
    if pattern._lay is sparse_csc:
        return csc(pattern._ind[0], pattern._ind[1], values, pattern._data.shape)
    return coo(pattern._ind, values, pattern._data.shape, pattern._coalesced)


# ------------------------------------------------------------- printing, as PyTorch's _tensor_str
def sparse_repr(t):
    prefix = "tensor("
    indent = len(prefix)
    if t._lay is sparse_coo:
        parts = [("indices=tensor(", t._ind)]
    elif t._lay is sparse_csr:
        parts = [("crow_indices=tensor(", t._ind[0]), ("col_indices=tensor(", t._ind[1])]
    else:
        parts = [("ccol_indices=tensor(", t._ind[0]), ("row_indices=tensor(", t._ind[1])]
    parts.append(("values=tensor(", t._vals))
    bodies = []
    for name, a in parts:
        body = format_array(a, indent + len(name))[0] if a.size else "[]"
        if a.size == 0:
            body += ", size=%s" % (tuple(a.shape),)
        bodies.append(name + body + ")")
    text = prefix + (",\n" + " " * indent).join(bodies)
    suffixes = ["size=%s" % (tuple(t._data.shape),), "nnz=%d" % t._nnz()]
    if t.dtype not in (D.get_default_dtype(), D.int64, D.bool_):
        suffixes.append("dtype=%r" % t.dtype)
    suffixes.append("layout=%r" % t._lay)
    if t.grad_fn is not None:
        suffixes.append("grad_fn=<%s>" % t.grad_fn.name())
    elif t._requires_grad:
        suffixes.append("requires_grad=True")
    return _add_suffixes(text, suffixes, indent, force_newline=t._lay is sparse_coo)


def _add_suffixes(text, suffixes, indent, force_newline, linewidth=80):
    out = [text]
    last = len(text) - text.rfind("\n") + 1
    for s in suffixes:
        if force_newline or last + len(s) + 2 > linewidth:
            out.append(",\n" + " " * indent + s)
            last = indent + len(s)
            force_newline = False
        else:
            out.append(", " + s)
            last += len(s) + 2
    return "".join(out) + ")"
