"""GEMM with an added term (addmm, baddbmm, addbmm, addmv: beta * input + alpha * product, one BLAS call
and one elementwise pass) and einsum, composed of table ops (diagonal, sum, permute, reshape, matmul:
each pairwise contraction is one batched GEMM), so its gradients come from theirs."""
import math
import string

import numpy as np

from .._op import Op, dispatch
from ._table import CUDA_LOWER, LOWER, _arr, _noncontig, autocasts, export, register, rejects
from .linalg import _same_dtype, check_bmm
from .unary import _c
from .selection import diagonal


def _addmm_forward(xp, dt, c, a, b, beta, alpha, batch_sum=False):
    p = xp.matmul(a, b)
    if batch_sum:
        p = xp.reduce("sum", p, (0,))
    if alpha != 1:
        p = xp.run("mul", dt, p, dt.type(alpha))
    if beta == 0:  # input ignored, NaN included, as PyTorch
        return p if p.shape == tuple(np.broadcast_shapes(p.shape, c.shape)) else xp.copy(xp.broadcast_to(p, c.shape))
    return xp.run("add_alpha", dt, p, c, dt.type(beta)) if beta != 1 else xp.run("add", dt, p, c)


def _scaled(g, k):
    return g if k == 1 else g * _c(k)


def _input_grad(g, s):
    return g.new_zeros(g.shape) if s.beta == 0 else _scaled(g, s.beta)


def _check_mm(a, b, name1="mat1", name2="mat2"):
    if a.ndim != 2 or b.ndim != 2:
        raise RuntimeError("%s must be a matrix, got %d-D tensor" % (name1 if a.ndim != 2 else name2,
                                                                  a.ndim if a.ndim != 2 else b.ndim))
    if a.shape[1] != b.shape[0]:
        raise RuntimeError("mat1 and mat2 shapes cannot be multiplied (%dx%d and %dx%d)" % (a.shape + b.shape))
    _same_dtype(a, b)


def _params(beta, alpha):
    return {"beta": beta, "alpha": alpha}


@autocasts('addmm')
def addmm(input, mat1, mat2, *, beta=1, alpha=1):
    _check_mm(mat1, mat2)
    return dispatch(ADDMM, (input, mat1, mat2), _params(beta, alpha))


@autocasts('baddbmm')
def baddbmm(input, batch1, batch2, *, beta=1, alpha=1):
    check_bmm(batch1, batch2)
    return dispatch(BADDBMM, (input, batch1, batch2), _params(beta, alpha))


@autocasts('addbmm')
def addbmm(input, batch1, batch2, *, beta=1, alpha=1):
    check_bmm(batch1, batch2)
    return dispatch(ADDBMM, (input, batch1, batch2), _params(beta, alpha))


@autocasts('addmv')
def addmv(input, mat, vec, *, beta=1, alpha=1):
    if mat.ndim != 2 or vec.ndim != 1 or mat.shape[1] != vec.shape[0]:
        raise RuntimeError("size mismatch, got input (%d), mat (%s), vec (%s)" % (
            input.shape[0] if input.ndim else 1, "x".join(map(str, mat.shape)), "x".join(map(str, vec.shape))))
    _same_dtype(mat, vec)
    return dispatch(ADDMV, (input, mat, vec), _params(beta, alpha))


# ---------------------------------------------------------------------- einsum
def _parse(equation, operands):
    """(input subscripts per operand, output subscripts), ellipses expanded to letters of their own."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(operands):
        raise RuntimeError("einsum(): more operands were provided than specified in the equation"
                           if len(operands) > len(terms) else
                           "einsum(): fewer operands were provided than specified in the equation")
    free = [c for c in string.ascii_letters if c not in eq]
    n_ell = max((t.ndim - (len(s) - 3) for s, t in zip(terms, operands) if "..." in s), default=0)
    ell = "".join(free[:n_ell])
    subs = []
    for s, t in zip(terms, operands):
        if "..." in s:
            k = t.ndim - (len(s) - 3)
            s = s.replace("...", ell[n_ell - k:])
        if len(s) != t.ndim:
            raise RuntimeError("einsum(): the number of subscripts in the equation (%d) does not match the number of "
                               "dimensions (%d) for operand %d%s" % (len(s), t.ndim, len(subs),
                                                                    "" if "..." in equation else " and no ellipsis was given"))
        subs.append(s)
    if arrow:
        out = rhs.replace("...", ell)
    else:  # implicit output: the ellipsis dims, then the letters that appear once, sorted
        once = [c for c in sorted(set("".join(subs))) if "".join(subs).count(c) == 1 and c not in ell]
        out = ell + "".join(once)
    return subs, out


def _take_diagonals(t, s):
    """A subscript repeated within one operand ('ii'): its diagonal."""
    while len(set(s)) != len(s):
        c = next(c for c in s if s.count(c) > 1)
        i, j = s.index(c), s.index(c, s.index(c) + 1)
        t = diagonal(t, 0, i, j)  # the diagonal's dim goes last
        s = s[:i] + s[i + 1:j] + s[j + 1:] + c
    return t, s


def _sum_out(t, s, keep):
    dims = tuple(i for i, c in enumerate(s) if c not in keep)
    if dims:
        t = t.sum(dims)
        s = "".join(c for c in s if c in keep)
    return t, s


def _contract(a, sa, b, sb, keep):
    """a (subscripts sa) times b (sb), summed over the shared subscripts not in ``keep``: one batched GEMM."""
    batch = [c for c in sa if c in sb and c in keep]
    summed = [c for c in sa if c in sb and c not in keep]
    left = [c for c in sa if c not in sb]
    right = [c for c in sb if c not in sa]
    size = {}
    for c, n in list(zip(sa, a.shape)) + list(zip(sb, b.shape)):
        size[c] = max(size.get(c, 1), n)  # a batch dim of size 1 broadcasts (ellipsis dims)
    a = a.expand([size[c] for c in sa]) if any(size[c] != n for c, n in zip(sa, a.shape)) else a
    b = b.expand([size[c] for c in sb]) if any(size[c] != n for c, n in zip(sb, b.shape)) else b
    A = a.permute([sa.index(c) for c in batch + left + summed])
    B = b.permute([sb.index(c) for c in batch + summed + right])
    nb, nl, ns, nr = (math.prod(size[c] for c in g) for g in (batch, left, summed, right))
    if not summed:  # a broadcast product, which promotes mixed dtypes (PyTorch's mul path)
        out = A.reshape(nb, nl, 1) * B.reshape(nb, 1, nr)
    elif a.dtype is not b.dtype:  # PyTorch's bmm path does not promote
        raise RuntimeError("expected scalar type %s but found %s" % (a.dtype.scalar_type, b.dtype.scalar_type))
    else:
        out = A.reshape(nb, nl, ns).matmul(B.reshape(nb, ns, nr))
    return out.reshape([size[c] for c in batch + left + right]), "".join(batch + left + right)


@export(method=False)
def einsum(equation, *operands):
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    subs, out = _parse(equation, operands)
    for c in out:
        if not any(c in s for s in subs):
            raise RuntimeError("einsum(): output subscript %s does not appear in the equation for any input operand" % c)
    terms = [_take_diagonals(t, s) for t, s in zip(operands, subs)]
    for k in range(len(terms)):  # sum out what no other operand and not the output uses
        others = out + "".join(s for j, (_, s) in enumerate(terms) if j != k)
        terms[k] = _sum_out(terms[k][0], terms[k][1], others)
    t, s = terms[0]
    for k in range(1, len(terms)):
        b, sb = terms[k]
        keep = out + "".join(x for _, x in terms[k + 1:])
        t, s = _contract(t, s, b, sb, keep)
    t, s = _sum_out(t, s, out)
    return t.permute([s.index(c) for c in out]) if s != out else t


# ---------------------------------------------------------------------- samples
def _addmm_samples(*shapes):
    def samples(rng, dtype):
        if np.dtype(dtype).kind == "b":
            return []  # (rejected: the entry's unsupported)
        A = lambda s: _arr(rng, s, -1.0, 1.0, dtype)  # noqa: E731
        out = [(tuple(A(s) for s in shapes[0]), {}), (tuple(A(s) for s in shapes[1]), {}),
               (tuple(A(s) for s in shapes[0]), {"beta": 0.5 if np.dtype(dtype).kind == "f" else 2,
                                                 "alpha": -2 if np.dtype(dtype).kind != "f" else -1.5}),
               ((A(shapes[0][0]),) + tuple(_noncontig(rng, s, -1.0, 1.0, dtype) for s in shapes[0][1:]), {"beta": 0})]
        if len(shapes) > 2:  # operands of one square shape: the template of the benchmarks' sizes
            out.append((tuple(A(shapes[2]) for _ in range(3)), {}))
        return out
    return samples


def _np_addmm(batch_sum=False):
    def ref(c, a, b, beta=1, alpha=1):
        p = np.matmul(a, b)
        if batch_sum:
            p = p.sum(0)
        return (alpha * p if beta == 0 else beta * c + alpha * p).astype(np.result_type(c, a, b))
    return ref


def _gemm_op(name, vjps, samples, ref, batch_sum=False, kernel=None, bench=None, autocast=LOWER):
    return register(Op(name, lambda xp, dt, c, a, b, beta, alpha: _addmm_forward(xp, dt, c, a, b, beta, alpha, batch_sum),
                       inputs=("self", "mat1", "mat2"), vjp=[_input_grad] + vjps, dtype="promote", ref=ref,
                       samples=samples, call=globals()[name], api=(name,), inplace=True,
                       unsupported=rejects(NotImplementedError, "\"%s\" not implemented for '%%(type)s'" % kernel, "bool"),
                       bench=bench, autocast=autocast, complex=True))  # PyTorch's autocast lists: addmv on CUDA only


ADDMM = _gemm_op("addmm", [lambda g, s: _scaled(g.mm(_c(s.mat2.t())), s.alpha),
                           lambda g, s: _scaled(_c(s.mat1.t()).mm(g), s.alpha)],
                 _addmm_samples([(2, 4), (2, 3), (3, 4)], [(4,), (2, 3), (3, 4)], (3, 3)),
                 _np_addmm(), kernel="addmm_impl_cpu_", bench={"sizes": [(16, 16), (1024, 1024)]})
BADDBMM = _gemm_op("baddbmm", [lambda g, s: _scaled(g.bmm(_c(s.mat2.mT)), s.alpha),
                               lambda g, s: _scaled(_c(s.mat1.mT).bmm(g), s.alpha)],
                   _addmm_samples([(2, 2, 4), (2, 2, 3), (2, 3, 4)], [(1, 4), (2, 2, 3), (2, 3, 4)], (2, 3, 3)), _np_addmm(),
                   kernel="baddbmm_with_gemm", bench={"sizes": [(4, 16, 16), (32, 256, 256)]})
ADDBMM = _gemm_op("addbmm", [lambda g, s: _scaled(g.matmul(_c(s.mat2.mT)), s.alpha),
                             lambda g, s: _scaled(_c(s.mat1.mT).matmul(g), s.alpha)],
                  _addmm_samples([(2, 4), (3, 2, 3), (3, 3, 4)], [(), (3, 2, 3), (3, 3, 4)]), _np_addmm(True), batch_sum=True,
                  kernel="addbmm_impl_cpu_")
ADDMV = _gemm_op("addmv", [lambda g, s: _scaled(g.outer(_c(s.mat2)), s.alpha),
                           lambda g, s: _scaled(_c(s.mat1.t()).mv(g), s.alpha)],
                 _addmm_samples([(2,), (2, 3), (3,)], [(1,), (2, 3), (3,)]), _np_addmm(), kernel="addmv_impl_cpu",
                 autocast=CUDA_LOWER)
