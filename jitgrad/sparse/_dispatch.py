"""Table ops with a sparse operand: dispatch (jitgrad/_op.py) hands them here. The ops sparse tensors have run
their autograd Function (jitgrad/sparse/_functions.py); any other gets PyTorch's error naming the op and the
sparse backend."""
import numpy as np

from .._device import to_device
from .._layout import sparse_coo, sparse_csc, sparse_csr, strided
from .._tensor import Tensor
from . import _functions as F

BACKENDS = {sparse_coo: "SparseCPU", sparse_csr: "SparseCsrCPU", sparse_csc: "SparseCscCPU"}


def _sparse(a):
    return isinstance(a, Tensor) and a.layout is not strided


def _number(a):
    """A number operand (a Python or NumPy number, or a 0-d dense tensor, read as its value), else None."""
    if isinstance(a, (bool, int, float, np.number)):
        return a.item() if isinstance(a, np.generic) else a
    if isinstance(a, Tensor) and a.layout is strided and a.ndim == 0:
        return a.item()
    return None


def _mm(args, params):
    a, b = args
    if _sparse(a) and _sparse(b):
        F.check_spgemm(a, b)
        return F.SparseSparseMm.apply(a, b, False, a.layout if a.layout is sparse_coo else sparse_csr)
    if _sparse(a):
        F.check_mm(a, b, "mm")
    elif b.dense_dim():
        raise RuntimeError("mm: matrices expected, got %dD tensor" % b.sparse_dim())
    return F.Mm.apply(a, b)


def _mv(args, params):
    s, v = args
    if not _sparse(s) or _sparse(v):
        return None
    return F.Mv.apply(s, v)


def _add(args, params, sub=False):
    a, b = args
    alpha = params.get("alpha", 1) if params else 1
    alpha = -alpha if sub else alpha
    if _sparse(a) and _sparse(b):
        _same_shape(a, b)
        return (F.SubSparse if sub else F.AddSparse).apply(a, b, alpha)
    if isinstance(a, Tensor) and a.layout is strided and _sparse(b):
        _same_shape(a, b)
        return (F.SubDense if sub else F.AddDense).apply(a, b, alpha)
    if _sparse(a) and isinstance(b, Tensor):
        raise RuntimeError("%s(sparse, dense) is not supported. Use %s(dense, sparse) instead."
                           % (("sub",) * 2 if sub else ("add",) * 2))
    return None


def _same_shape(a, b):
    if tuple(a.shape) != tuple(b.shape):
        raise RuntimeError("add: expected 'self' and 'other' to have same size, but self has size %s while other has "
                           "size %s" % (list(a.shape), list(b.shape)))


def _mul(args, params):
    a, b = args
    s, k = (a, _number(b)) if _sparse(a) else (b, _number(a))
    return None if k is None else F.Mul.apply(s, k, False)


def _div(args, params):
    s, k = args[0], _number(args[1])
    return None if k is None or not _sparse(s) else F.Div.apply(s, k, True)


def _sum(args, params):
    x = args[0]
    if params.get("keepdim"):
        raise RuntimeError("sum: keepdim is not supported for sparse tensors")
    return F.SumDim.apply(x, tuple(sorted(params["dims"])))


def _move(args, params):
    x = args[0]
    if to_device(params["device"]).type != "cpu":
        raise NotImplementedError("sparse tensors are CPU tensors in jitgrad: moving one (layout=%r) to %s is not "
                                  "supported" % (x.layout, params["device"]))
    return x


HANDLERS = {
    "mm": _mm,
    "matmul": _mm,
    "mv": _mv,
    "add": _add,
    "sub": lambda args, params: _add(args, params, sub=True),
    "mul": _mul,
    "div": _div,
    "neg": lambda args, params: F.Neg.apply(args[0], -1, False),
    "sum_all": lambda args, params: F.Sum.apply(args[0]),
    "sum": _sum,
    "transpose": lambda args, params: F.Transpose.apply(args[0], params["d0"], params["d1"]),
    "cast": lambda args, params: F.Cast.apply(args[0], params["dtype"]),
    "clone": lambda args, params: F.Clone.apply(args[0]),
    "move": _move,
}


def dispatch(op, args, params):
    handler = HANDLERS.get(op.name)
    out = handler(args, params) if handler is not None else None
    if out is None:
        lay = next(a.layout for a in args if _sparse(a))
        raise NotImplementedError(
            "Could not run 'aten::%s' with arguments from the '%s' backend. This could be because the operator doesn't "
            "exist for this backend (jitgrad's sparse tensors have: %s); convert with to_dense() first."
            % (op.name, BACKENDS[lay], ", ".join(sorted(HANDLERS))))
    return out
