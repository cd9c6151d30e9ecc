"""Complex numbers' own ops: the real and imaginary parts (views, as in PyTorch), view_as_real and
view_as_complex (views of the same memory as (re, im) pairs), complex(real, imag) and polar(abs, angle).

Gradients follow PyTorch's convention (the conjugate Wirtinger derivative: a real loss's gradient in z is
dL/dx + i dL/dy): real(z)'s VJP is g (the engine makes it complex), imag(z)'s is i g.
(conj, conj_physical, angle, sgn and the complex twins of the elementwise kernels are with the other
elementwise ops, in unary.py and kernels/scalars.py.)
"""
import numpy as np

from .. import _dtype as D
from .. import _op
from .._layout import LAZY, ConjView, NegView
from .._op import Op, dispatch
from .._tensor import Tensor
from ._table import _arr, export, register
from .unary import _c, ew_forward, sgn


def _complex_samples(rng, dtype):
    """Complex inputs, for the complex dtypes only (the matrix runs the entries' complex checks in those)."""
    if np.dtype(dtype).kind != "c":
        return []
    c = np.dtype(dtype)
    return [((_arr(rng, s, -2.0, 2.0, c),), {}) for s in [(), (5,), (2, 3)]] + [((_arr(rng, (2, 3), -2.0, 2.0, c).T,), {})]


def _check_complex(input, name):
    if not input.dtype.is_complex:
        raise RuntimeError("%s is not implemented for tensors with non-complex dtypes." % name)


def _host(*arrays):
    """Complex tensors live on the CPU: the CUDA backend has no complex kernels yet."""
    for a in arrays:
        if a.__class__ is not np.ndarray:
            raise NotImplementedError("complex tensors are not supported on CUDA in jitgrad yet (no complex kernels)")


def _real_forward(xp, dt, x):
    _host(x)
    return x.real


def _imag_forward(xp, dt, x):
    _host(x)
    return x.imag


@export(method=False)  # (Tensor.real and Tensor.imag are properties, below)
def real(input):
    """The real part of a complex tensor, a view (writing into it changes ``input``); a real tensor itself."""
    return dispatch(REAL, (input,)) if input.dtype.is_complex else input


@export(method=False)
def imag(input):
    """The imaginary part of a complex tensor, a view; of a lazy conjugate, a lazy negation of the imaginary parts it
    stores (``is_neg()``, as PyTorch's: writes reach ``input``)."""
    _check_complex(input, "imag")
    if input._data.__class__ is ConjView:
        out = dispatch(IMAG, (_stored(input),))  # (recorded against the conjugate's node: its values' imag)
        out._data = out._data.view(NegView)
        return out
    return dispatch(IMAG, (input,))


def _set_part(part):
    def setter(self, value):
        part(self).copy_(value if isinstance(value, Tensor) else Tensor._wrap(np.asarray(value)))
    return setter


@export(method=False)
def view_as_real(input):
    """A complex tensor as a real one with a last dim of 2 (real, imaginary), sharing its memory."""
    if not input.dtype.is_complex:
        raise RuntimeError("view_as_real is only supported for complex tensors")
    return dispatch(VIEW_AS_REAL, (input,))


@export(method=False)
def view_as_complex(input):
    """A real tensor with a last dim of 2 (and stride 1 there) as the complex tensor of those pairs, sharing its memory."""
    if input.dtype not in (D.float32, D.float64):
        raise RuntimeError("view_as_complex is only supported for float and double tensors, but got a tensor of "
                           "scalar type: " + input.dtype.scalar_type)
    if input.ndim == 0 or input.shape[-1] != 2:
        raise RuntimeError("Tensor must have a last dimension of size 2")
    return dispatch(VIEW_AS_COMPLEX, (input,))


def _view_as_real_forward(xp, dt, x):
    _host(x)
    return x[..., None].view(x.real.dtype)  # (a trailing dim of 1: any layout views as its (re, im) pairs)


def _view_as_complex_forward(xp, dt, x):
    _host(x)
    # (the layout checks read the array: under vmap the tensor the user sees is not the one laid out)
    if x.strides[-1] != x.itemsize:
        raise RuntimeError("Tensor must have a last dimension with stride 1")
    if any(st % (2 * x.itemsize) for st, n in zip(x.strides[:-1], x.shape[:-1]) if n > 1):
        raise RuntimeError("Tensor must have a stride divisible by 2 for all but last dimension")
    return x.view(np.complex64 if x.dtype == np.float32 else np.complex128)[..., 0]


@export(method=False)
def complex(real, imag):
    """real + i imag, of two float tensors of one dtype (broadcast)."""
    for name, t in (("real", real), ("imag", imag)):
        if not isinstance(t, Tensor):
            raise TypeError("complex(): argument '%s' must be Tensor, not %s" % (name, type(t).__name__))
    if real.dtype is not imag.dtype:
        raise RuntimeError("Expected object of scalar type %s but got scalar type %s for second argument"
                           % (real.dtype.scalar_type, imag.dtype.scalar_type))
    if real.dtype in (D.float16, D.bfloat16):
        raise RuntimeError("complex: %s inputs are not supported (jitgrad has no complex32)" % real.dtype.scalar_type)
    if real.dtype not in (D.float32, D.float64):
        raise RuntimeError("Expected both inputs to be Half, Float or Double tensors but got %s and %s"
                           % (real.dtype.scalar_type, imag.dtype.scalar_type))
    return dispatch(COMPLEX_, (real, imag))


def _complex_forward(xp, dt, re, im):
    _host(re, im)
    return _pack(re, im)


def _pack(re, im):
    """The complex array re + i im (NumPy arrays or numbers of float32 or float64, broadcast)."""
    c = np.complex64 if re.dtype == np.float32 else np.complex128
    out = np.empty(np.broadcast_shapes(re.shape, im.shape), c)
    out.real, out.imag = re, im
    return out


@export(method=False)
def polar(abs, angle):
    """abs * (cos(angle) + i sin(angle)), of two float tensors of one dtype (broadcast)."""
    complex(abs, angle)  # (the same checks)
    return dispatch(POLAR, (abs, angle))


def _polar_forward(xp, dt, r, theta):
    _host(r, theta)
    return _pack(r * np.cos(theta), r * np.sin(theta))


def _complex_pair_samples(lo):
    def samples(rng, dtype):
        if np.dtype(dtype).kind != "f":
            return []
        A = lambda s, lo=-2.0: _arr(rng, s, lo, 2.0, dtype)  # noqa: E731
        return [((A((2, 3), lo), A((2, 3))), {}), ((A((), lo), A(())), {}), ((A((2, 1), lo), A((3,))), {})]
    return samples


REAL = register(Op("real", _real_forward, vjp=[lambda g, s: g], dtype="real", view=True, complex=True,
                   ref=np.real, samples=_complex_samples, call=real, node="RealBackward0"))
IMAG = register(Op("imag", _imag_forward, vjp=[lambda g, s: g * 1j], dtype="real", view=True, complex=True,
                   ref=np.imag, samples=_complex_samples, call=imag, node="ImagBackward0"))
VIEW_AS_REAL = register(Op("view_as_real", _view_as_real_forward, vjp=[lambda g, s: view_as_complex(g.contiguous())],
                           dtype="real", view=True, complex=True, samples=_complex_samples, call=view_as_real,
                           ref=lambda x: np.stack([x.real, x.imag], -1)))
VIEW_AS_COMPLEX = register(Op("view_as_complex", _view_as_complex_forward, vjp=[lambda g, s: view_as_real(g)],
                              dtype="keep", view=True, call=view_as_complex, reduced_precision="refused",
                              samples=lambda rng, dt: [((_arr(rng, s, -2.0, 2.0, dt),), {}) for s in [(2,), (3, 2)]]
                              if np.dtype(dt).kind == "f" else [],
                              ref=lambda x: x[..., 0] + 1j * x[..., 1]))
COMPLEX_ = register(Op("complex", _complex_forward, inputs=("real", "imag"), dtype="keep", broadcast=True,
                       vjp=[lambda g, s: g.real, lambda g, s: imag(g)], call=complex, reduced_precision="refused",
                       samples=_complex_pair_samples(-2.0),
                       ref=lambda re, im: re + 1j * im))
# PyTorch's polar_backward: the gradient in abs is Re(conj(g) sgn(result)) (so a negative abs gets the sign of
# its result's direction), in angle Re(conj(g) i result)
POLAR = register(Op("polar", _polar_forward, inputs=("abs", "angle"), dtype="keep", broadcast=True, call=polar,
                    reduced_precision="refused",
                    vjp=[lambda g, s: (g.conj() * sgn(s.result)).real, lambda g, s: (g.conj() * s.result * 1j).real],
                    samples=_complex_pair_samples(0.5),  # (abs > 0: where the formula is the derivative)
                    ref=lambda r, theta: r * np.cos(theta) + 1j * r * np.sin(theta)))



# ---------------------------------------------------------------------- lazy conjugation
# ``z.conj()`` of a complex z is PyTorch's lazy view: a tensor on z's storage whose array is a ConjView (the
# stored numbers are its values' conjugates). Shape views of it stay lazy; every other op reads its resolved
# values (dispatch hands such operands to conj_dispatch); writes into it store their conjugates (_inplace._write).
@export()
def conj(input):
    """The complex conjugate, a lazy view of ``input`` (``is_conj()``: writes reach ``input`` conjugated); a real
    tensor is returned as it is, as in PyTorch."""
    return dispatch(CONJ, (input,)) if input.dtype.is_complex else input


@export()
def resolve_conj(input):
    """A lazy conjugate's values in memory of their own (``is_conj()`` False); any other tensor itself."""
    return dispatch(RESOLVE_CONJ, (_stored(input),)) if input._data.__class__ is ConjView else input


@export()
def resolve_neg(input):
    """A lazy negation's values in memory of their own (``is_neg()`` False); any other tensor itself."""
    return dispatch(RESOLVE_NEG, (_stored(input),)) if input._data.__class__ is NegView else input


def _stored(t):
    """A lazy conjugate ``t`` as the numbers it stores: the same storage, history and version, a plain array."""
    s = Tensor._wrap(t._data.view(np.ndarray), t._requires_grad)
    s.__dict__.update(t.__dict__)
    s._vc, s.grad_fn = t._vc, t.grad_fn
    return s


def _toggle(out):
    """A view op's result on the stored numbers, made to stand for the view of the values (conjugated lazily)."""
    for o in (out if isinstance(out, (tuple, list)) else (out,)):
        if isinstance(o, Tensor) and o._data.dtype.kind == "c":
            o._data = o._data.view(np.ndarray) if o._data.__class__ is ConjView else o._data.view(ConjView)
    return out


def conj_dispatch(op, args, params):
    """``op`` on operands of which some are lazy conjugates: a view op (reshape, transpose, indexing, conj itself)
    runs on the stored numbers and its result is again lazy (conj of a lazy conjugate is not); imag and every
    other op take the resolved values."""
    if op is VIEW_AS_REAL:
        raise RuntimeError("view_as_real doesn't work on unresolved conjugated tensors.  To resolve the conjugate "
                           "tensor so you can view it as real, use self.resolve_conj(); however, be warned that the "
                           "resulting tensor will NOT alias the original.")
    lazy = [isinstance(a, Tensor) and a._data.__class__ in LAZY for a in args]
    if op.view and op is not IMAG:
        cls = next(a._data.__class__ for a, k in zip(args, lazy) if k)
        out = dispatch(op, tuple(_stored(a) if k else a for a, k in zip(args, lazy)), params)
        return _toggle(out) if cls is ConjView else _mark_neg(out)
    return dispatch(op, tuple(resolve_neg(resolve_conj(a)) if k else a for a, k in zip(args, lazy)), params)


def _mark_neg(out):
    """A view op's result on a lazy negation's stored numbers, made to stand for the view of its values."""
    for o in (out if isinstance(out, (tuple, list)) else (out,)):
        if isinstance(o, Tensor) and o._data.__class__ is np.ndarray:
            o._data = o._data.view(NegView)
    return out


def _conj_forward(xp, dt, x):
    if not isinstance(x, np.ndarray):
        _host(x)
    return x.view(np.ndarray) if x.__class__ is ConjView else x.view(ConjView)


# conj: the lazy view (its own samples would need resolving to be read: tests/ops/test_conj_view.py);
# resolve_conj_stored: the conjugates of the numbers a lazy conjugate stores, which are its values (so the
# gradient passes unchanged). It is only ever given a lazy conjugate's stored numbers (resolve_conj).
CONJ = register(Op("conj", _conj_forward, vjp=[lambda g, s: _c(g)], dtype="same", view=True, complex=True,
                   node="ConjBackward0", call=conj))
RESOLVE_CONJ = register(Op("resolve_conj_stored", ew_forward("conj_physical"), vjp=[lambda g, s: g],
                           dtype="same", complex=True, call=resolve_conj, node="ResolveConjBackward0"))
# resolve_neg_stored: the negatives of a lazy negation's stored numbers (its values: the gradient passes unchanged)
RESOLVE_NEG = register(Op("resolve_neg_stored", ew_forward("neg"), vjp=[lambda g, s: g], dtype="same", complex=True,
                          call=resolve_neg, node="ResolveNegBackward0"))
_op.CONJ_DISPATCH[0] = conj_dispatch

Tensor.real = property(real, _set_part(real))
Tensor.imag = property(imag, _set_part(imag))
