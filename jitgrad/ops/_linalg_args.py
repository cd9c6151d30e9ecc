"""What the linear-algebra entries share: PyTorch's argument checks and error messages, LinAlgError, the
named-tuple results (torch.return_types) and small compositions their formulas use (diag_embed, the
identity, symmetric parts)."""
import numpy as np

from .._factories import eye
from .._op import broadcast_shapes
from .._tensor import Tensor
from .selection import diagonal_scatter_zeros


class LinAlgError(RuntimeError):
    """A matrix is singular, not positive-definite, or an algorithm did not converge (torch.linalg.LinAlgError)."""


_SCALAR_TYPES = {"int64": "Long", "int32": "Int", "bool": "Bool", "uint8": "Byte", "float16": "Half",
                 "bfloat16": "BFloat16"}


# PyTorch's CPU kernel that reports a float16/bfloat16 input, by function (NotImplementedError "K" not implemented
# for 'Half'); the others check the dtype first ("Low precision dtypes not supported").
_LOW_PRECISION_KERNEL = {"linalg.cholesky": "cholesky_cpu", "linalg.cholesky_ex": "cholesky_cpu", "linalg.det": "lu_cpu",
                         "linalg.solve": "lu_cpu", "linalg.solve_ex": "lu_cpu", "linalg.lu_factor": "lu_cpu",
                         "linalg.lu_factor_ex": "lu_cpu", "linalg.lu": "lu_cpu", "linalg.eigh": "linalg_eigh_cpu",
                         "linalg.eigvalsh": "linalg_eigh_cpu", "linalg.eig": "linalg_eig_out_cpu",
                         "linalg.eigvals": "linalg_eig_out_cpu", "linalg.svd": "linalg_svd_cpu",
                         "linalg.svdvals": "linalg_svd_cpu", "linalg.qr": "geqrf_cpu", "torch.geqrf": "geqrf_cpu",
                         "linalg.solve_triangular": "triangular_solve_cpu", "torch.cholesky_solve": "cholesky_solve_cpu"}


def check_float(t, fname, what="input"):
    if t.dtype.is_complex:
        return
    if not t.dtype.is_floating_point or t.dtype.name in ("float16", "bfloat16"):
        if t.dtype.is_floating_point:
            kernel = _LOW_PRECISION_KERNEL.get(fname)
            if kernel is not None:
                raise NotImplementedError("\"%s\" not implemented for '%s'" % (kernel, _SCALAR_TYPES[t.dtype.name]))
            raise RuntimeError("%s: Low precision dtypes not supported. Got %s" % (fname, _SCALAR_TYPES[t.dtype.name]))
        raise RuntimeError("%s: Expected a floating point or complex tensor as %s. Got %s"
                           % (fname, what, _SCALAR_TYPES.get(t.dtype.name, t.dtype.name)))


def check_matrix(t, fname, name="A"):
    if t.ndim < 2:
        raise RuntimeError("%s: The input tensor %s must have at least 2 dimensions." % (fname, name))


def check_square(t, fname, name="A", float_input=True):
    check_matrix(t, fname, name)
    if t.shape[-1] != t.shape[-2]:
        raise RuntimeError("%s: %s must be batches of square matrices, but they are %d by %d matrices"
                           % (fname, name, t.shape[-2], t.shape[-1]))
    if float_input:
        check_float(t, fname)


def check_same_dtype(a, b, fname, names=("A", "B")):
    if a.dtype is not b.dtype:
        raise RuntimeError("%s: Expected %s and %s to have the same dtype, but found %s of type %s and %s of type %s "
                           "instead" % (fname, names[0], names[1], names[0], a.dtype.scalar_type, names[1],
                                        b.dtype.scalar_type))


def broadcast_batch(a, b):
    """``a`` and ``b`` expanded to their common batch dims (the last two dims of each kept)."""
    if a.shape[:-2] == b.shape[:-2]:
        return a, b
    batch = broadcast_shapes(tuple(a.shape[:-2]), tuple(b.shape[:-2]))
    return _expand(a, batch), _expand(b, batch)


def _expand(t, batch):
    shape = tuple(batch) + tuple(t.shape[-2:])
    return t if tuple(t.shape) == shape else t.expand(shape)


def raise_for_info(fname, info, message):
    """LinAlgError for the first positive ``info`` (an int array), ``message % info`` worded as PyTorch words
    it: prefixed with the batch element where the input is a batch."""
    info = np.asarray(info)
    if info.max(initial=0) <= 0:  # (the usual case, without the search below)
        return
    bad = np.flatnonzero(info.reshape(-1) > 0)
    if bad.size:
        i = bad[0]
        where = "(Batch element %d): " % i if np.ndim(info) else ""
        k = int(np.asarray(info).reshape(-1)[i])
        raise LinAlgError("%s: %s%s" % (fname, where, message % k if "%" in message else message))


def result_type(name, fields):
    """A torch.return_types-style named tuple class (attribute access by field, repr by PyTorch's name)."""
    def rep(self):
        return "jitgrad.return_types.%s(\n%s)" % (name, ",\n".join("%s=%r" % (f, v) for f, v in zip(fields, self)))
    ns = {f: property(lambda self, k=k: self[k]) for k, f in enumerate(fields)}
    ns.update(__repr__=rep, __slots__=(), _fields=tuple(fields), n_fields=len(fields))
    cls = type(name, (tuple,), ns)
    cls.__new__ = lambda c, *values: tuple.__new__(c, values)
    return cls


# ---------------------------------------------------------------------- compositions the formulas share
def diag_embed(v):
    """Matrices with ``v``'s last dim on their diagonal (torch.diag_embed), from table ops."""
    n = v.shape[-1]
    nd = v.ndim + 1
    return diagonal_scatter_zeros(v, tuple(v.shape[:-1]) + (n, n), 0, nd - 2, nd - 1)


def eye_like(t, n=None):
    n = t.shape[-1] if n is None else n
    return eye(n, dtype=t.dtype, device=t.device)


def real_diag(M):
    """diag(Re(diag(M))) as a matrix of M's batch (the real part of a complex diagonal; M's own for a real M)."""
    d = M.diagonal(0, -2, -1)
    return diag_embed(d.real if d.dtype.is_complex else d)


def sym(x):
    return (x + x.mT) * 0.5


def is_zero_grad(g):
    """Whether ``g`` is the zeros the engine passes for an output nothing used (PyTorch's undefined gradient),
    where a formula takes its shorter path (an eigenvalue-only gradient stays finite at repeated eigenvalues)."""
    return g is None or (g.grad_fn is None and not g.requires_grad and not g._data.any())


def shared(g, s, k, fn):
    """``fn(g, s)``, computed once for the gradients of all of a node's inputs in one backward pass (solve's
    A^-T g serves both A and B) and dropped after input ``k``, the last that takes a gradient, has used it
    (as attention's fused parts)."""
    d = getattr(s, "__dict__", None)
    if d is None:  # (a stand-in node of a traced backward: nothing to share)
        return fn(g, s)
    hit = d.get("_linalg_shared")
    value = hit[1] if hit is not None and hit[0] is g else fn(g, s)
    nexts = getattr(s, "next_functions", ())
    if any(nf[0] is not None for nf in nexts[k + 1:]):
        d["_linalg_shared"] = (g, value)
    else:
        d.pop("_linalg_shared", None)
    return value


def needs_grad(s, k):
    """Whether input ``k`` of the node ``s`` takes a gradient (a shared computation skips the parts it does not)."""
    nexts = getattr(s, "next_functions", None)
    return nexts is None or nexts[k][0] is not None


def is_tensor(x):
    return isinstance(x, Tensor)


def default_rtol(A):
    """PyTorch's default relative tolerance of pinv and matrix_rank: eps * max(m, n)."""
    return float(np.finfo(A.dtype.np).eps * max(A.shape[-2:]))


def tolerance(A, smax, atol, rtol):
    """The threshold max(atol, rtol * smax) (shape (..., 1) against smax's (..., 1)) of pinv and matrix_rank
    for tolerances given as numbers or tensors (broadcast over the batch). rtol left out is eps * max(m, n),
    or 0 where atol is given and positive."""
    as_t = lambda v: v.to(smax.dtype) if isinstance(v, Tensor) else smax.new_tensor(float(v))  # noqa: E731
    if rtol is None:
        eps = default_rtol(A)
        rtol = as_t(eps) if atol is None else (as_t(atol) > 0).logical_not().to(smax.dtype) * eps
    tol = as_t(rtol).unsqueeze(-1) * smax
    return tol if atol is None else tol.maximum(as_t(atol).unsqueeze(-1))
