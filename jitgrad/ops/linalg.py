"""Linear algebra: matmul (every rank case), mm, bmm, mv, dot, outer. GEMM runs in BLAS (NumPy)."""
import numpy as np

from .._op import Op, broadcast_shapes, dispatch
from .._tensor import Tensor
from ._table import CUDA_LOWER, LOWER, _arr, _noncontig, autocasts, export, no_kernel, register
from .unary import _c


def _samples(*shapes):
    """One sample per pair of shapes, plus the first pair again with non-contiguous operands."""
    def samples(rng, dtype):
        out = [(tuple(_arr(rng, s, -1.0, 1.0, dtype) for s in pair), {}) for pair in shapes]
        pair = shapes[0]
        out.append((tuple(_noncontig(rng, s, -1.0, 1.0, dtype) for s in pair), {}))
        return out
    return samples


_NAMES = {"float32": "float", "float64": "double", "int64": "long", "int32": "int", "bool": "bool",
          "float16": "c10::Half", "bfloat16": "c10::BFloat16", "complex64": "c10::complex<float>",
          "complex128": "c10::complex<double>"}


def _same_dtype(a, b, what="m1 and m2"):
    if a.dtype is not b.dtype:
        raise RuntimeError("expected %s to have the same dtype, but got: %s != %s"
                           % (what, _NAMES[a.dtype.name], _NAMES[b.dtype.name]))


@autocasts('mm')
def mm(input, mat2):
    if input.ndim != 2 or mat2.ndim != 2:
        raise RuntimeError("%s must be a matrix" % ("self" if input.ndim != 2 else "mat2"))
    if input.shape[1] != mat2.shape[0]:
        raise RuntimeError("mat1 and mat2 shapes cannot be multiplied (%dx%d and %dx%d)"
                           % (input.shape + mat2.shape))
    _same_dtype(input, mat2)
    return dispatch(MM, (input, mat2))


def check_bmm(a, b):
    """PyTorch's checks of two batches of matrices to multiply (bmm, baddbmm, addbmm)."""
    if a.ndim != 3 or b.ndim != 3:
        raise RuntimeError("batch%d must be a 3D tensor" % (1 if a.ndim != 3 else 2))
    if b.shape[0] != a.shape[0] or b.shape[1] != a.shape[2]:
        raise RuntimeError("Expected size for first two dimensions of batch2 tensor to be: [%d, %d] but got: [%d, %d]."
                           % (a.shape[0], a.shape[2], b.shape[0], b.shape[1]))
    _same_dtype(a, b)


@autocasts('bmm')
def bmm(input, mat2):
    check_bmm(input, mat2)
    return dispatch(BMM, (input, mat2))


@autocasts('mv')
def mv(input, vec):
    if input.ndim != 2 or vec.ndim != 1:
        raise RuntimeError("vector + matrix @ vector expected, got 1, %d, %d" % (input.ndim, vec.ndim))
    if input.shape[1] != vec.shape[0]:
        raise RuntimeError("size mismatch, got input (%d), mat (%s), vec (%s)" % (
            input.shape[0] if input.ndim else 0, "x".join(map(str, input.shape)), "x".join(map(str, vec.shape))))
    _same_dtype(input, vec)
    return dispatch(MV, (input, vec))


def dot(input, other):
    if input.ndim != 1 or other.ndim != 1:
        raise RuntimeError("1D tensors expected, but got %dD and %dD tensors" % (input.ndim, other.ndim))
    if input.shape[0] != other.shape[0]:
        raise RuntimeError("inconsistent tensor size, expected tensor [%d] and src [%d] to have the same number of "
                           "elements, but got %d and %d elements respectively"
                           % (input.shape[0], other.shape[0], input.shape[0], other.shape[0]))
    if input.dtype is not other.dtype:
        raise RuntimeError("dot : expected both vectors to have same dtype, but found %s and %s"
                           % (input.dtype.scalar_type, other.dtype.scalar_type))
    return dispatch(DOT, (input, other))


def outer(input, vec2):
    for name, t in (("self", input), ("vec2", vec2)):
        if t.ndim != 1:
            raise RuntimeError("outer: Expected 1-D argument %s, but got %d-D" % (name, t.ndim))
    return dispatch(OUTER, (input, vec2))


@autocasts('matmul')
def matmul(input, other):
    a, b = input.ndim, other.ndim
    if a == 0 or b == 0:
        raise RuntimeError("both arguments to matmul need to be at least 1D, but they are %dD and %dD" % (a, b))
    if a == 1 and b == 1:
        return dot(input, other)
    if a == 2 and b == 1:
        return mv(input, other)
    if a == 2 and b == 2:
        return mm(input, other)
    if a == 1 and b == 2:
        return mm(input.unsqueeze(0), other).squeeze(0)
    # batched: 1-D operands become a row/column, batch dims broadcast
    x = input.unsqueeze(0) if a == 1 else input
    y = other.unsqueeze(-1) if b == 1 else other
    if x.shape[-1] != y.shape[-2]:  # PyTorch's message of the kernel it would run: folded mv or mm, else bmm
        rows = int(np.prod(x.shape[:-1]))
        if a >= 3 and b == 1:
            raise RuntimeError("size mismatch, got input (%d), mat (%dx%d), vec (%d)" % (rows, rows, x.shape[-1],
                                                                                    y.shape[-2]))
        if a >= 3 and b == 2:
            raise RuntimeError("mat1 and mat2 shapes cannot be multiplied (%dx%d and %dx%d)"
                               % (rows, x.shape[-1], y.shape[-2], y.shape[-1]))
        batch = int(np.prod(broadcast_shapes(tuple(x.shape[:-2]), tuple(y.shape[:-2]))))
        raise RuntimeError("Expected size for first two dimensions of batch2 tensor to be: [%d, %d] but got: [%d, %d]."
                           % (batch, x.shape[-1], batch, y.shape[-2]))
    broadcast_shapes(tuple(x.shape[:-2]), tuple(y.shape[:-2]))
    _same_dtype(x, y)
    out = dispatch(MATMUL, (x, y))
    if b == 1:
        out = out.squeeze(-1)
    if a == 1:
        out = out.squeeze(-2)
    return out


@export(method=False, function=False, operators=("__matmul__", "__rmatmul__"))
def _matmul_operator(self, other):
    """``a @ b`` takes tensors only: anything else gets Python's TypeError (unsupported operand type(s))."""
    return matmul(self, other) if isinstance(self, Tensor) and isinstance(other, Tensor) else NotImplemented


# ---------------------------------------------------------------------- the entries (PyTorch has no bool GEMM)
def _linop(name, forward, vjps, samples, node=None, ref=np.matmul, kernel=None, api=None, **kw):
    # (bilinear: the JVP is op(da, b) + op(a, db), the op itself on each tangent)
    return register(Op(name, forward, inputs=("self", "other"), vjp=vjps, linear=(0, 1), dtype="promote", ref=ref,
                       samples=samples, node=node, bench={"sizes": [(16, 16, 16), (1024, 1024, 1024)]},
                       unsupported=no_kernel(kernel, "bool") if kernel else {}, api=api or (name,), complex=True, **kw))


MM = _linop("mm", lambda xp, dt, a, b: xp.matmul(a, b), [lambda g, s: g.mm(_c(s.other.t())), lambda g, s: _c(s.self.t()).mm(g)],
            _samples(((2, 3), (3, 4)), ((1, 5), (5, 1))), kernel="addmm_impl_cpu_", call=mm, autocast=LOWER)
BMM = _linop("bmm", lambda xp, dt, a, b: xp.matmul(a, b), [lambda g, s: g.bmm(_c(s.other.mT)),
                                                                     lambda g, s: _c(s.self.mT).bmm(g)],
             _samples(((2, 2, 3), (2, 3, 4)),), kernel="bmm", call=bmm, autocast=LOWER)
MATMUL = _linop("matmul", lambda xp, dt, a, b: xp.matmul(a, b),
                [lambda g, s: (g @ _c(s.other.mT)).sum_to_size(s.self_shape),
                 lambda g, s: (_c(s.self.mT) @ g).sum_to_size(s.other_shape)],
                _samples(((2, 2, 3), (3, 4)), ((3, 4), (2, 4, 2)), ((2, 1, 2, 3), (3, 3, 2)), ((3,), (3,)),
                         ((2, 3), (3,)), ((3,), (3, 2)), ((2, 3), (3, 4)), ((3,), (2, 3, 2)), ((2, 2, 3), (3,))),
                node="UnsafeViewBackward0", kernel="bmm", call=matmul, autocast=LOWER)
MV = _linop("mv", lambda xp, dt, a, b: xp.matmul(a, b), [lambda g, s: g.outer(_c(s.other)), lambda g, s: _c(s.self.t()).mv(g)],
            _samples(((2, 3), (3,)),), kernel="addmv_impl_cpu", call=mv, autocast=CUDA_LOWER)
DOT = _linop("dot", lambda xp, dt, a, b: xp.matmul(a, b), [lambda g, s: g * _c(s.other), lambda g, s: g * _c(s.self)],
             _samples(((3,), (3,)),), ref=np.dot, kernel="dot", call=dot, api=("dot", "inner"))
OUTER = _linop("outer", lambda xp, dt, a, b: xp.outer(a, b),
               # mul-and-sum, not mv: outer promotes mixed dtypes (it is a broadcast multiply in PyTorch)
               [lambda g, s: (g * _c(s.other)).sum(1), lambda g, s: (g * _c(s.self.unsqueeze(1))).sum(0)],
               _samples(((3,), (2,)),), node="MulBackward0", ref=np.outer, call=outer, api=("outer", "ger"))
