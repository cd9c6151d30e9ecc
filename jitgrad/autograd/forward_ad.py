"""Forward-mode AD (``torch.autograd.forward_ad``): dual tensors carry a tangent, and every table op that
meets one computes its output's tangent, the Jacobian-vector product, with the primal.

    with forward_ad.dual_level():
        x = forward_ad.make_dual(primal, tangent)
        y = f(x)
        value, jvp = forward_ad.unpack_dual(y)

The JVP of an entry comes from its one derivative source, its VJP formulas: an elementwise entry's
Jacobian is diagonal, so its formula applied to the tangent (broadcast to the output) is the JVP; any other
entry's JVP is the transpose of its formula, which is linear in the output gradient: J t is the gradient in
``u`` of <vjp(u), t>, taken by the engine. One level at a time, as PyTorch (nesting raises its error).
"""
import weakref
from collections import namedtuple

from .._grad_mode import STATE, enable_grad, no_grad
from .._inplace import _region_tensor
from .._op import dispatch
from .._tensor import Tensor
from . import engine

UnpackedDualTensor = namedtuple("UnpackedDualTensor", ["primal", "tangent"])

_LEVEL = [None]  # the open level (0) or None
_DUALS = []  # weak references to the tensors holding a tangent at the open level (cleared when it exits)
_SAVED = []  # the saved outputs (autograd's SavedTensor) holding one


def enter_dual_level():
    """Open the dual level (returns it: 0); PyTorch's error where one is open already."""
    if _LEVEL[0] is not None:
        raise RuntimeError("Nested forward mode AD is not supported at the moment")
    _LEVEL[0] = 0
    STATE.dual = _HOOK
    return 0


def exit_dual_level(*, level=None):
    """Close the level: every tangent made in it is dropped."""
    if _LEVEL[0] is None or level not in (None, _LEVEL[0]):
        raise RuntimeError("Trying to exit a forward AD level that was not the last one that was created. This is "
                           "not supported.")
    for ref in _DUALS:
        t = ref()
        if t is not None:
            t._fw_grad = None
    _DUALS.clear()
    for saved in _SAVED:
        saved._fw_grad = None
    _SAVED.clear()
    _LEVEL[0] = None
    STATE.dual = None


class dual_level:
    """``with dual_level():`` the scope of dual tensors (a context manager, as PyTorch's)."""

    def __enter__(self):
        return enter_dual_level()

    def __exit__(self, *exc):
        exit_dual_level()


def _attach(t, tangent):
    t._fw_grad = tangent
    _DUALS.append(weakref.ref(t))
    return t


def _check_size(tensor, tangent):
    if tuple(tangent.shape) != tuple(tensor.shape):
        raise RuntimeError("Trying to set a forward gradient that has a different size than that of the original "
                           "Tensor, this is not supported. Tensor is of size [%s] while the given forward gradient "
                           "is of size [%s]." % (", ".join(map(str, tensor.shape)), ", ".join(map(str, tangent.shape))))


def set_tangent(tensor, tangent):
    """``tensor`` carries ``tangent`` at the open level (a custom Function's jvp result)."""
    _check_size(tensor, tangent)
    return _attach(tensor, tangent if tangent.dtype is tensor.dtype else tangent.to(tensor.dtype))


def make_dual(tensor, tangent, *, level=None):
    """A view of ``tensor`` carrying ``tangent`` (of its shape) at the open level."""
    if _LEVEL[0] is None:
        raise RuntimeError("Trying to create a dual Tensor for forward AD but no level exists, make sure to "
                           "enter_dual_level() first.")
    if not tensor.dtype.is_floating_point:
        raise ValueError("Expected primal to be floating point or complex, but got: %s" % tensor.dtype)
    if not tangent.dtype.is_floating_point:
        raise ValueError("Expected tangent to be floating point or complex, but got: %s" % tangent.dtype)
    _check_size(tensor, tangent)
    out = tensor.view_as(tensor)  # (a view, as PyTorch's: it shares the primal's storage and version)
    return _attach(out, tangent if tangent.dtype is tensor.dtype else tangent.to(tensor.dtype))


def unpack_dual(tensor, *, level=None):
    """(primal, tangent) of ``tensor``: the primal a view without the tangent; the tangent None if it has none."""
    tangent = _tangent(tensor) if STATE.dual is not None else None  # (none inside a custom Function's forward)
    if tangent is None:
        return UnpackedDualTensor(tensor, None)
    primal = tensor._alias(tensor.grad_fn, tensor._output_nr) if tensor.grad_fn is not None else tensor._alias()
    primal._requires_grad = tensor._requires_grad
    return UnpackedDualTensor(primal, tangent)


# ------------------------------------------------------------------ propagation (dispatch's hook)
class _Primals:
    """What a VJP formula reads as ``s``, from the call itself: inputs, outputs, params and their defaults,
    the inputs' shapes."""

    def __init__(self, op, args, params, outs):
        self.__dict__.update(zip(op.inputs or (), args))
        self.__dict__.update(zip(op.outputs, outs))
        self.__dict__.update(op.exposure.params)
        self.__dict__.update(params)
        self.__dict__.update({n + "_shape": tuple(a.shape) for n, a in zip(op.inputs or (), args) if isinstance(a, Tensor)})
        self.params = params
        self.op = op
        # (formulas that share parts between inputs, cached on ``s``, read which inputs take gradients)
        self.next_functions = ((True, 0),) * len(args)
        self.input_meta = [(tuple(a.shape), a.dtype) if isinstance(a, Tensor) else None for a in args]


class _Hook:
    """``STATE.dual`` inside the level: dispatch hands it every op with a dual operand; in-place writes and
    ``__setitem__`` (jitgrad/_inplace.py) hand it the tangent their target takes."""

    def __call__(self, op, args, params):
        """The op on the primals, its outputs carrying the JVP of the operands' tangents."""
        STATE.dual = None  # (the op and its JVP on plain tensors)
        try:
            out = dispatch(op, args, params)
            tangents = [_tangent(a) if isinstance(a, Tensor) else None for a in args]
            if op.differentiable and any(t is not None for t in tangents):
                outs = (out,) if op.n_outputs == 1 else tuple(out)
                node = outs[0].grad_fn
                if op.view:  # a view's tangent is the same view of its base's tangent (in-place writes reach both)
                    jvps = (dispatch(op, (tangents[0],) + tuple(args[1:]), params),)
                else:
                    jvps = _owned(_jvp(op, args, params, outs, tangents), tangents)
                for name, o, t in zip(op.outputs, outs, jvps):
                    if t is None:
                        continue
                    _attach(o, t)
                    saved = node.saved.get(name) if node is not None else None
                    if saved is not None:  # (a backward formula reading the saved output gets the tangent too)
                        saved._fw_grad = t
                        _SAVED.append(saved)
        finally:
            STATE.dual = self
        return out

    @staticmethod
    def written(target, tangent, what):
        """``target`` now holds a result whose tangent is ``tangent`` (None: none): written into the target's
        tangent in place, as PyTorch's, so that its views' tangents (views of it) and its base's follow."""
        if target._fw_grad is None and tangent is None and (target._base is None or target._base._fw_grad is None):
            return
        own = tangent_of(target)
        with no_grad():
            if tangent is None:
                own.zero_()
            else:
                own.copy_(tangent)

    @staticmethod
    def setitem(target, key, value):
        """``target[key] = value`` was written: the region's tangent is the value's (zero for a plain one)."""
        own = tangent_of(target)
        t = value._fw_grad if isinstance(value, Tensor) else None
        with no_grad():
            own[key] = 0 if t is None else t


def _tangent(t):
    """``t``'s tangent; a view made before its base took one has the same view of the base's."""
    if t._fw_grad is None and t._base is not None and t._base._fw_grad is not None:
        return tangent_of(t)
    return t._fw_grad


def tangent_of(target):
    """The tangent ``target`` holds (zeros made for it where it has none): for a view, the same view of its
    base's tangent."""
    if target._fw_grad is None:
        base = target._base
        if base is None:
            _attach(target, target.detach().new_zeros(target.shape))
        else:
            _attach(target, _region_tensor(tangent_of(base), target._view_chain, None))
    return target._fw_grad


def _owned(jvps, tangents):
    """The outputs' tangents, each of its own storage: a formula may hand back its gradient (an input's tangent,
    or that tangent expanded), which a later in-place write into the output's tangent must not reach."""
    shared = [t._vc for t in tangents if t is not None]
    return tuple(j.clone() if j is not None and any(j._vc is vc for vc in shared) else j for j in jvps)


_HOOK = _Hook()


def _differentiable(o):
    return o.dtype.is_floating_point


def _jvp(op, args, params, outs, tangents):
    """The tangent of each output (None for the integer ones: indices)."""
    s = _Primals(op, args, params, outs)
    elementwise = getattr(op.forward, "kernel", None) is not None
    total = None
    for k, t in enumerate(tangents):
        if t is None:
            continue
        formula = op.derivatives.vjp[0 if op.variadic else k]
        if op.variadic:  # (cat, stack: one formula, given the input's position)
            formula = (lambda f, k: lambda g, s: f(g, s, k))(formula, k)
        if formula is None:
            continue  # (an input the op is not differentiable in: its tangent does not reach the output)
        if elementwise:  # a diagonal Jacobian: the formula applied to the tangent is the JVP
            out = outs[0]
            with no_grad():
                terms = (formula(t.expand(out.shape) if tuple(t.shape) != tuple(out.shape) else t, s),)
        else:
            s.__dict__.pop("_fused_parts", None)  # (parts a formula cached for another input's gradients)
            terms = _transposed(formula, s, outs, args[k], t)
        total = terms if total is None else tuple(a if b is None else b if a is None else a + b
                                                  for a, b in zip(total, terms))
    if total is None:
        total = (None,) * len(outs)
    return tuple(None if not _differentiable(o) else o.new_zeros(o.shape) if j is None else j
                 for o, j in zip(outs, total))


# how jitgrad.func (a layer above) transposes a formula for a tangent batched by vmap (jacfwd's basis)
BATCHED_TRANSPOSE = [None]


def _transposed(formula, s, outs, x, t):
    """J t for the op whose VJP in ``x`` is ``formula`` (linear in its gradients, one per output): the gradient
    in u of <formula(u), t>, per output (None for an output it does not reach)."""
    if getattr(t, "_level", 0):
        return BATCHED_TRANSPOSE[0](formula, s, outs, x, t)
    with enable_grad():
        us = [o.detach().new_zeros(o.shape).requires_grad_(_differentiable(o)) for o in outs]
        return tuple(None if j is None else j.detach() for j in _pulled(formula, s, us, x, t, lambda r: r))


def _pulled(formula, s, us, x, t, unwrap):
    """The gradients in ``us`` (the formula's output gradients, leaves where they require grad) of
    <formula(us), t>; ``unwrap`` gives the physical tensor of the product (vmap's batch)."""
    v = formula(us[0] if len(us) == 1 else tuple(us), s)
    leaves = [u for u in us if u.requires_grad]
    if v is None or not v.requires_grad or not leaves:  # a formula that does not read its gradient (floor, fill)
        return (None,) * len(us)
    if tuple(v.shape) != tuple(x.shape):
        v = v.sum_to_size(x.shape)
    r = unwrap((v * t).sum())
    grads = iter(engine.grad([r], [unwrap(u) for u in leaves], [r.new_ones(r.shape)], allow_unused=True))
    return tuple(next(grads) if u.requires_grad else None for u in us)


__all__ = ["dual_level", "enter_dual_level", "exit_dual_level", "make_dual", "unpack_dual", "UnpackedDualTensor"]
