"""The differentiable sparse ops: autograd Functions on jitgrad/sparse/_tensor.py's tensors and kernels/sparse.py.

Each op's node carries PyTorch's name (``SparseAddmmBackward0``, ``ToDenseBackward0``...) and its gradients
follow PyTorch's layouts: ``torch.sparse.mm`` gives a sparse operand a sparse gradient on its own pattern,
``mm`` / ``@`` a dense one; ``to_dense()`` sends back a sparse gradient, ``to_sparse()`` a dense one. The
backward of these ops runs on arrays (they are differentiable once).
"""
import numpy as np

from .. import _dtype as D
from .._layout import sparse_coo, sparse_csc, sparse_csr, strided
from .._tensor import Tensor
from ..autograd.function import Function
from ..kernels import sparse as K
from . import _tensor as S


def _named(node_name):
    """Give a Function's node PyTorch's name for the op's backward."""
    def deco(cls):
        cls._backward_cls.__name__ = cls._backward_cls.__qualname__ = node_name
        return cls
    return deco


def _pattern(t):
    """A sparse tensor's coordinates and values without its history (for a backward to read)."""
    return S._new(t._lay, t._ind, t._vals, t._data.shape, t._coalesced)


def _wrap(a):
    return Tensor._wrap(np.asarray(a))


# ---------------------------------------------------------------------- construction and conversion
@_named("SparseCooTensorWithDimsAndTensorsBackward0")
class CooTensor(Function):
    @staticmethod
    def forward(ctx, values, indices, shape, is_coalesced):
        out = S.coo(indices, values._data, shape, is_coalesced)
        ctx.p = _pattern(out)
        return out

    @staticmethod
    def backward(ctx, g):
        return _wrap(S.gather(g, ctx.p)), None, None, None


@_named("SparseCompressedTensorBackward0")
class CompressedTensor(Function):
    """A CSR or CSC matrix (``layout``: "CSR" or "CSC") from values and its index arrays."""
    @staticmethod
    def forward(ctx, values, compressed, plain, shape, layout):
        out = (S.csr if layout == "CSR" else S.csc)(compressed, plain, values._data, shape)
        ctx.p = _pattern(out)
        return out

    @staticmethod
    def backward(ctx, g):
        return _wrap(S.gather(g, ctx.p)), None, None, None, None


@_named("ToDenseBackward0")
class ToDense(Function):
    """Sparse -> dense; the gradient is sparse, on the input's (coalesced) pattern."""
    @staticmethod
    def forward(ctx, x):
        ctx.p = _pattern(x) if x._lay is not sparse_coo else S.coalesced(_pattern(x))
        return Tensor._wrap(S.dense_array(x))

    @staticmethod
    def backward(ctx, g):
        return S.like(ctx.p, S.gather(g, ctx.p))


def _dense_grad(g):
    return g.to_dense() if g.layout is not strided else g


def _dense_to_coo(a, sparse_dim):
    """The COO arrays of dense array ``a``: an entry per position of the first ``sparse_dim`` dims whose
    slice has a nonzero."""
    lead = a.shape[:sparse_dim]
    flat = a.reshape((int(np.prod(lead, dtype=np.int64)),) + a.shape[sparse_dim:])
    nz = flat != 0 if flat.ndim == 1 else (flat != 0).reshape(flat.shape[0], -1).any(1)
    pos = np.flatnonzero(nz)
    return K.unravel_keys(pos, lead), flat[pos]


class _ToSparse(Function):
    """Dense (or CSR) -> COO; the gradient goes back in the input's layout."""
    @staticmethod
    def forward(ctx, x, sparse_dim):
        ctx.csr = x.layout if x.layout is sparse_csr or x.layout is sparse_csc else None
        if ctx.csr:
            c = S.coalesced(x)
            return S.coo(c._ind, c._vals, c._data.shape, True)
        ind, vals = _dense_to_coo(x._data, x.ndim if sparse_dim is None else sparse_dim)
        return S.coo(ind, vals, x._data.shape, True)

    @staticmethod
    def backward(ctx, g):
        if ctx.csr and g.layout is sparse_coo:
            return compressed(g, ctx.csr), None
        return _dense_grad(g) if not ctx.csr else g, None


@_named("ToSparseBackward0")
class ToSparseDim(_ToSparse):
    pass


@_named("ToSparseBackward1")
class ToSparse(_ToSparse):
    pass


def _coo_to_csr_tensor(t):
    crow, col, vals = S.csr_arrays(t)
    return S.csr(crow, col, vals, t._data.shape)


def compressed(t, layout):
    """Sparse matrix ``t`` (any layout) as a CSR or CSC tensor."""
    crow, col, vals = S.csr_arrays(t)
    if layout is sparse_csr:
        return S.csr(crow, col, vals, t._data.shape)
    tcrow, tcol, src = K.transpose_csr(crow, col, t._data.shape[1])
    return S.csc(tcrow, tcol, vals[src], t._data.shape)


class _ToCompressed(Function):
    """Dense or sparse -> CSR/CSC (2-D); the gradient goes back in the input's layout."""
    @staticmethod
    def forward(ctx, x, layout):
        if x.ndim != 2:
            raise NotImplementedError("to_sparse_%s: jitgrad's compressed sparse tensors are 2-D matrices, got a %dD "
                                      "tensor" % ("csr" if layout is sparse_csr else "csc", x.ndim))
        ctx.layout = x.layout
        if x.layout is strided:
            ind, vals = _dense_to_coo(x._data, 2)
            x = S.coo(ind, vals, x._data.shape, True)
        return compressed(x, layout)

    @staticmethod
    def backward(ctx, g):
        if g.layout is strided or ctx.layout is strided:
            return _dense_grad(g), None
        return (S.coalesced(g) if ctx.layout is sparse_coo else compressed(g, ctx.layout)), None


@_named("ToSparseCsrBackward0")
class ToSparseCsr(_ToCompressed):
    pass


@_named("ToSparseCscBackward0")
class ToSparseCsc(_ToCompressed):
    pass


@_named("CoalesceBackward0")
class Coalesce(Function):
    @staticmethod
    def forward(ctx, x):
        c = S.coalesced(x)
        return S.coo(c._ind, c._vals, c._data.shape, True) if c is x else c

    @staticmethod
    def backward(ctx, g):
        return g


@_named("ValuesBackward0")
class Values(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.p = _pattern(x)
        return Tensor._wrap(x._vals)

    @staticmethod
    def backward(ctx, g):
        return S.like(ctx.p, np.ascontiguousarray(g._data))


@_named("ToCopyBackward0")
class Cast(Function):
    @staticmethod
    def forward(ctx, x, dtype):
        ctx.dtype = x.dtype
        return S.like(x, x._vals.astype(dtype.np))

    @staticmethod
    def backward(ctx, g):
        return g.to(ctx.dtype), None


@_named("CloneBackward0")
class Clone(Function):
    @staticmethod
    def forward(ctx, x):
        return S.like(x, x._vals.copy())

    @staticmethod
    def backward(ctx, g):
        return g


# ---------------------------------------------------------------------- products
def check_mm(s, d, what="addmm"):
    if s.ndim != 2 or s.dense_dim():
        raise RuntimeError("%s: matrices expected, got %dD tensor" % (what, s.sparse_dim() if s.ndim == 2 else s.ndim))
    if d.ndim != 2:
        raise RuntimeError("%s: matrices expected, got %dD tensor" % (what, d.ndim))
    if d.shape[0] != s.shape[1]:
        raise RuntimeError("%s: Argument #3 (dense): Expected dim 0 size %d, got %d" % (what, s.shape[1], d.shape[0]))
    if d.dtype is not s.dtype:
        raise RuntimeError("expected scalar type %s but found %s" % (s.dtype.scalar_type, d.dtype.scalar_type))
    if d.is_cuda:
        raise NotImplementedError("sparse tensors are CPU tensors in jitgrad: mm with a CUDA operand is not supported")


def _spmm(s, dense):
    """Sparse (n, k) @ dense array (k, m)."""
    crow, col, vals = S.csr_arrays(s)
    return K.spmm(crow, col, vals, dense)


def _spmm_t(s, dense):
    """Sparse (n, k) transposed, times dense array (n, m): (k, m)."""
    crow, col, vals = S.csr_arrays(s)
    tcrow, tcol, src = K.transpose_csr(crow, col, s._data.shape[1])
    return K.spmm(tcrow, tcol, vals[src], dense)


def _sampled(s, a, b):
    """The gradient of sparse ``s`` in ``s @ b`` for output gradient ``a``: (a @ b.T) on s's pattern, sparse."""
    c = s if s._lay is sparse_csr else S.coalesced(s)
    if c._lay is sparse_csr:
        rows, cols = K.csr_rows(c._ind[0]), c._ind[1]
    else:
        rows, cols = c._ind
    return S.like(c, K.sddmm(rows, cols, a, b).astype(c._vals.dtype, copy=False))


def check_spgemm(a, b):
    """PyTorch's errors for a product of two sparse matrices."""
    if a.layout is not b.layout and (a.layout is sparse_coo or b.layout is sparse_coo):
        names = S.LAYOUT_NAMES
        raise RuntimeError("addmm: computation on CPU is not implemented for %s + %s @ %s"
                           % (names[a.layout], names[a.layout], names[b.layout]))
    if a.ndim != 2 or b.ndim != 2 or a.dense_dim() or b.dense_dim():
        raise RuntimeError("mm: matrices expected, got %dD and %dD tensors" % (a.ndim, b.ndim))
    if a.shape[1] != b.shape[0]:
        raise RuntimeError("mat1 and mat2 shapes cannot be multiplied (%dx%d and %dx%d)"
                           % (a.shape[0], a.shape[1], b.shape[0], b.shape[1]))
    if a.dtype is not b.dtype:
        raise RuntimeError("expected scalar type %s but found %s" % (a.dtype.scalar_type, b.dtype.scalar_type))


def _csr_of(t, transpose=False):
    """(crow, col, values) of a 2-D matrix, sparse or dense (a gradient may come either way), or of its transpose."""
    if t.layout is strided:
        ind, vals = _dense_to_coo(t._data, 2)
        t = S.coo(ind, vals, t._data.shape, True)
    crow, col, vals = S.csr_arrays(t)
    if transpose:
        tcrow, tcol, src = K.transpose_csr(crow, col, t._data.shape[1])
        return tcrow, tcol, vals[src]
    return crow, col, vals


def _spgemm(a, b, shape, layout):
    """Sparse a @ b (CSR arrays) as a sparse tensor of ``layout`` (COO: coalesced)."""
    crow, col, vals = K.spgemm(*a, *b, shape[1])
    if layout is sparse_coo:
        return S.coo(np.stack([K.csr_rows(crow), col]), vals, shape, True)
    out = S.csr(crow, col, vals, shape)
    return out if layout is sparse_csr else compressed(out, layout)


class _SparseSparseMm(Function):
    """sparse @ sparse (SpGEMM), in the operands' layout. ``masked``: each gradient on its operand's own pattern
    (torch.sparse.mm of COO matrices), else the whole sparse product (mm, @)."""
    @staticmethod
    def forward(ctx, a, b, masked, layout):
        ctx.a, ctx.b, ctx.masked = _pattern(a), _pattern(b), masked
        return _spgemm(_csr_of(a), _csr_of(b), (a.shape[0], b.shape[1]), layout)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.a, ctx.b
        ga = gb = None
        if ctx.needs_input_grad[0]:  # dA = g B^T
            ga = _spgemm(_csr_of(g), _csr_of(b, True), a._data.shape, a.layout)
            ga = S.like(S.coalesced(a), S.gather(ga, S.coalesced(a))) if ctx.masked else ga
        if ctx.needs_input_grad[1]:  # dB = A^T g
            gb = _spgemm(_csr_of(a, True), _csr_of(g), b._data.shape, b.layout)
            gb = S.like(S.coalesced(b), S.gather(gb, S.coalesced(b))) if ctx.masked else gb
        return ga, gb, None, None


@_named("SparseSparseMatmulBackward0")
class SparseSparseMatmul(_SparseSparseMm):
    pass


@_named("MmBackward0")
class SparseSparseMm(_SparseSparseMm):
    pass


@_named("SparseAddmmBackward0")
class SparseSparseAddmm(_SparseSparseMm):  # (torch.sparse.mm of CSR matrices: PyTorch runs it as addmm)
    pass


@_named("SparseAddmmBackward0")
class SparseAddmm(Function):
    """beta * input + alpha * (sparse @ dense), torch.sparse.mm/addmm: the sparse gradient keeps the pattern."""
    @staticmethod
    def forward(ctx, input, s, d, beta, alpha):
        out = _spmm(s, d._data)
        if alpha != 1:
            out *= alpha
        if beta != 0 and input is not None:
            out += input._data if beta == 1 else beta * input._data
        ctx.p, ctx.beta, ctx.alpha = _pattern(s), beta, alpha
        ctx.save_for_backward(d)
        return Tensor._wrap(out)

    @staticmethod
    def backward(ctx, g):
        (d,) = ctx.saved_tensors
        gi = gs = gd = None
        if ctx.needs_input_grad[0]:
            gi = g * ctx.beta
        if ctx.needs_input_grad[1]:
            gs = _sampled(ctx.p, g._data, d._data)
            if ctx.alpha != 1:
                gs._vals *= ctx.alpha
        if ctx.needs_input_grad[2]:
            gd = _wrap(_spmm_t(ctx.p, g._data) * ctx.alpha)
        return gi, gs, gd, None, None


@_named("MmBackward0")
class Mm(Function):
    """sparse @ dense or dense @ sparse (mm, matmul, @, spmm): the sparse operand's gradient is dense."""
    @staticmethod
    def forward(ctx, a, b):
        ctx.sparse_first = a.layout is not strided
        s, d = (a, b) if ctx.sparse_first else (b, a)
        ctx.p = _pattern(s)
        ctx.save_for_backward(d)
        if ctx.sparse_first:
            return Tensor._wrap(_spmm(s, d._data))
        return Tensor._wrap(np.ascontiguousarray(_spmm_t(s, d._data.T).T))

    @staticmethod
    def backward(ctx, g):
        (d,) = ctx.saved_tensors
        s, g = ctx.p, g._data
        if ctx.sparse_first:  # out = S D: dS = g D^T, dD = S^T g
            gs = g @ d._data.T if ctx.needs_input_grad[0] else None
            gd = _spmm_t(s, g) if ctx.needs_input_grad[1] else None
            return (None if gs is None else _wrap(gs)), (None if gd is None else _wrap(gd))
        gd = np.ascontiguousarray(_spmm(s, g.T).T) if ctx.needs_input_grad[0] else None  # out = D S: dD = g S^T
        gs = d._data.T @ g if ctx.needs_input_grad[1] else None  # dS = D^T g
        return (None if gd is None else _wrap(gd)), (None if gs is None else _wrap(gs))


@_named("MvBackward0")
class Mv(Function):
    @staticmethod
    def forward(ctx, s, v):
        ctx.p = _pattern(s)
        ctx.save_for_backward(v)
        return Tensor._wrap(_spmm(s, v._data[:, None])[:, 0])

    @staticmethod
    def backward(ctx, g):
        (v,) = ctx.saved_tensors
        gs = _wrap(np.outer(g._data, v._data)) if ctx.needs_input_grad[0] else None
        gv = _wrap(_spmm_t(ctx.p, g._data[:, None])[:, 0]) if ctx.needs_input_grad[1] else None
        return gs, gv


# ---------------------------------------------------------------------- reductions
def _sum_arrays(c, dims):
    """Sum coalesced COO ``c`` over ``dims``: (result: dense array or sparse tensor, per-entry coordinates of the
    result over its kept sparse dims (or None when no sparse dim is left), the summed value axes)."""
    sd = c.sparse_dim()
    sparse_dims = [d for d in dims if d < sd]
    value_axes = tuple(d - sd + 1 for d in dims if d >= sd)
    vals = c._vals.sum(axis=value_axes) if value_axes else c._vals
    kept = [d for d in range(sd) if d not in sparse_dims]
    dense_shape = tuple(n for i, n in enumerate(c._data.shape[sd:]) if i + sd not in dims)
    if not kept:
        return vals.sum(axis=0), None, value_axes
    ind = c._ind[kept]
    shape = tuple(c._data.shape[d] for d in kept) + dense_shape
    if not sparse_dims:
        return S.coo(ind, vals, shape, True), ind, value_axes
    sizes = shape[:len(kept)]
    ukeys, uvals, _ = K.coalesce(K.linear_keys(ind, sizes), vals.reshape(vals.shape[0], -1))
    out = S.coo(K.unravel_keys(ukeys, sizes), uvals.reshape((-1,) + dense_shape), shape, True)
    return out, ind, value_axes


class _SparseSum(Function):
    """Sum over dims (all: a dense 0-d result); the gradient is sparse on the input's coalesced pattern."""
    @staticmethod
    def forward(ctx, x, dims):
        c = S.coalesced(x)
        if x._lay is sparse_csr:
            c = S.coo(c._ind, c._vals, c._data.shape, True)
        out, ind, axes = _sum_arrays(c, dims)
        ctx.p, ctx.ind, ctx.axes, ctx.csr = _pattern(c), ind, axes, x._lay if x._lay is not sparse_coo else None
        if isinstance(out, Tensor):
            return out
        return Tensor._wrap(np.asarray(out))

    @staticmethod
    def backward(ctx, g):
        p = ctx.p
        if ctx.ind is None:  # every sparse dim summed: g is dense, over the kept dense dims
            gv = np.broadcast_to(np.expand_dims(g._data, (0,) + ctx.axes), p._vals.shape)
        else:
            at = S.coo(ctx.ind, np.zeros((p._nnz(),) + g.shape[ctx.ind.shape[0]:], g._data.dtype), g.shape)
            gv = S.gather(g, at)
            gv = np.broadcast_to(np.expand_dims(gv, ctx.axes), p._vals.shape) if ctx.axes else gv
        out = S.like(p, np.ascontiguousarray(gv, dtype=p._vals.dtype))
        return (compressed(out, ctx.csr) if ctx.csr else out), None


@_named("SparseSumBackward0")
class SparseSum(_SparseSum):
    pass


@_named("SumBackward0")
class SparseSumAll(_SparseSum):  # (torch.sparse.sum without dims: PyTorch's node name is that of sum())
    pass


@_named("SumBackward1")
class SumDim(_SparseSum):
    pass


@_named("SumBackward0")
class Sum(Function):
    """``Tensor.sum()`` of a sparse tensor: a dense 0-d result, whose gradient is dense, as PyTorch's."""
    @staticmethod
    def forward(ctx, x):
        ctx.shape = x.shape
        v = x._vals
        return Tensor._wrap(np.asarray(v.sum(dtype=np.int64 if v.dtype.kind in "biu" else v.dtype)))

    @staticmethod
    def backward(ctx, g):
        return g.expand(ctx.shape).contiguous()


# ---------------------------------------------------------------------- elementwise
class _Scale(Function):
    """Values times a number (mul, div, neg keep the pattern)."""
    @staticmethod
    def forward(ctx, x, factor, divide):
        ctx.factor, ctx.divide = factor, divide
        vals = x._vals / factor if divide else x._vals * factor
        return S.like(x, vals.astype(_result_dtype(x, factor, divide), copy=False))

    @staticmethod
    def backward(ctx, g):
        return (g / ctx.factor if ctx.divide else g * ctx.factor), None, None


def _result_dtype(x, factor, divide):
    t = D.result_type([x.dtype], [], [D.scalar_dtype(factor)])
    return (t if t.is_floating_point or not divide else D.get_default_dtype()).np


@_named("MulBackward0")
class Mul(_Scale):
    pass


@_named("DivBackward0")
class Div(_Scale):
    pass


@_named("NegBackward0")
class Neg(_Scale):
    pass


class _AddSparse(Function):
    """sparse + alpha * sparse (same shape): the entries of both, coalesced."""
    @staticmethod
    def forward(ctx, a, b, alpha):
        if a.layout is not b.layout or a.sparse_dim() != b.sparse_dim():
            raise RuntimeError("add: expected both sparse tensors to have the same layout and sparse_dim")
        ctx.alpha = alpha
        ca, cb = S.coalesced(a), S.coalesced(b)
        vb = cb._vals * alpha if alpha != 1 else cb._vals
        dt = np.result_type(ca._vals.dtype, vb.dtype)
        ind = np.concatenate([ca._ind, cb._ind], axis=1)
        vals = np.concatenate([ca._vals.astype(dt, copy=False), vb.astype(dt, copy=False)])
        out = S.coalesced(S.coo(ind, vals, a._data.shape))
        return compressed(out, a._lay) if a._lay is not sparse_coo else out

    @staticmethod
    def backward(ctx, g):
        return g, (g * ctx.alpha if ctx.alpha != 1 else g), None


@_named("AddBackward0")
class AddSparse(_AddSparse):
    pass


@_named("SubBackward0")
class SubSparse(_AddSparse):
    pass


class _AddDense(Function):
    """dense + alpha * sparse: a dense result; both gradients are dense."""
    @staticmethod
    def forward(ctx, d, s, alpha):
        ctx.alpha = alpha
        out = S.dense_array(s)
        out = d._data + (out * alpha if alpha != 1 else out)
        return Tensor._wrap(np.ascontiguousarray(out))

    @staticmethod
    def backward(ctx, g):
        return g, (g * ctx.alpha if ctx.alpha != 1 else g), None


@_named("AddBackward0")
class AddDense(_AddDense):
    pass


@_named("SubBackward0")
class SubDense(_AddDense):
    pass


class _Transpose(Function):
    @staticmethod
    def forward(ctx, x, d0, d1):
        if x._lay is not sparse_coo:  # a CSR matrix's arrays are its transpose's CSC ones, and the other way round
            ctx.dims = (d0, d1)
            if d0 == d1:
                return S.like(x, x._vals)
            return S._new(sparse_csc if x._lay is sparse_csr else sparse_csr, x._ind, x._vals, x._data.shape[::-1])
        sd = x.sparse_dim()
        if d0 >= sd or d1 >= sd:
            raise RuntimeError("sparse transpose: transposed dimensions must be sparse Got sparse_dim: %d, d0: %d, "
                               "d1: %d" % (sd, d0, d1))
        ctx.dims = (d0, d1)
        ind = x._ind.copy()
        ind[[d0, d1]] = ind[[d1, d0]]
        shape = list(x._data.shape)
        shape[d0], shape[d1] = shape[d1], shape[d0]
        return S.coo(ind, x._vals, shape, d0 == d1 and x._coalesced)

    @staticmethod
    def backward(ctx, g):
        return g.transpose(*ctx.dims), None, None


@_named("TransposeBackward0")
class Transpose(_Transpose):
    pass


@_named("TBackward0")
class T(_Transpose):
    pass


class _Softmax(Function):
    """Softmax over ``dim`` of the specified entries (the implicit zeros count as -inf), as torch.sparse.softmax."""
    log = False

    @staticmethod
    def forward(ctx, x, dim):
        c = S.coalesced(x)
        sd = c.sparse_dim()
        if dim >= sd:
            raise NotImplementedError("jitgrad.sparse.softmax over a dense dim of a hybrid tensor is not implemented")
        groups = _groups(c, dim)
        vals = c._vals.reshape(c._nnz(), -1)
        log = ctx._forward_cls.log
        y = K.segment_softmax(groups, vals, log).reshape(c._vals.shape)
        ctx.p, ctx.groups, ctx.y = _pattern(c), groups, y
        return S.coo(c._ind, y, c._data.shape, True)

    @staticmethod
    def backward(ctx, g):
        p, y = ctx.p, ctx.y
        gv = S.gather(g, p).reshape(p._nnz(), -1)
        yf = y.reshape(p._nnz(), -1)
        if ctx._forward_cls.log:
            gx = gv - np.exp(yf) * K.segment_sum(ctx.groups, gv)
        else:
            gx = yf * (gv - K.segment_sum(ctx.groups, gv * yf))
        return S.like(p, gx.reshape(p._vals.shape)), None


def _groups(c, dim):
    """A key per entry shared by the entries that differ only in sparse dim ``dim``."""
    others = [d for d in range(c.sparse_dim()) if d != dim]
    return K.linear_keys(c._ind[others], tuple(c._data.shape[d] for d in others))


@_named("SparseSoftmaxBackward0")
class Softmax(_Softmax):
    log = False


@_named("SparseLogSoftmaxBackward0")
class LogSoftmax(_Softmax):
    log = True
