"""Forward-mode AD (``torch.autograd.forward_ad``): dual tensors carry a tangent, and every table op that
meets one computes its output's tangent, the Jacobian-vector product, with the primal.

    with forward_ad.dual_level():
        x = forward_ad.make_dual(primal, tangent)
        y = f(x)
        value, jvp = forward_ad.unpack_dual(y)

The JVP of an entry comes from its one derivative source, its VJP formulas: an elementwise entry's
Jacobian is diagonal, so its formula applied to the tangent (broadcast to the output) is the JVP; any other
entry's JVP is the transpose of its formula, which is linear in the output gradient: J t is the gradient in
``u`` of <vjp(u), t>, taken by the engine.

Levels nest (per thread): a tensor's ``_fw_grad`` maps each level it is dual at to its tangent there. The
public ``dual_level`` is one level at a time, as PyTorch's (nesting raises its error); jitgrad.func's jvp opens
nested ones, as functorch's (``jacfwd(jacfwd(f))``). An op meeting tangents of several levels runs at the
innermost one: the op and its JVP run as table ops on operands that still carry the outer levels' tangents,
so both carry those on (the inner tangent's own derivative at the outer level).
"""
import functools
import threading
import weakref
from collections import namedtuple

from .._grad_mode import STATE, enable_grad, no_grad
from .._inplace import _region_tensor
from .._op import dispatch
from .._dtype import float32, float64
from .._tensor import Tensor
from . import engine

UnpackedDualTensor = namedtuple("UnpackedDualTensor", ["primal", "tangent"])

class _Levels(threading.local):
    def __init__(self):
        # per open level (its number = its index): (weak refs to its duals, saved outputs, whether its tangents
        # record their history: they need none where nothing differentiates them in reverse mode)
        self.open = []
        self.ceiling = None  # while the hook runs level L: L (only lower levels propagate in its ops)


_L = _Levels()
# STATE.dual switched off and back on around one op, without STATE's count of threads in a special mode (which
# its own setter recomputes at every set): the hook is back, in a finally, before dispatch could miss it
_swap_dual = functools.partial(threading.local.__setattr__, STATE, "dual")


def _enter(history=True):
    _L.open.append(([], [], history))
    STATE.dual = _HOOK
    return len(_L.open) - 1


def enter_dual_level():
    """Open a dual level (returns it: 0); PyTorch's error where one is open already."""
    if _L.open:
        raise RuntimeError("Nested forward mode AD is not supported at the moment")
    return _enter()


def exit_dual_level(*, level=None):
    """Close the innermost level: every tangent made in it is dropped."""
    if not _L.open or level not in (None, len(_L.open) - 1):
        raise RuntimeError("Trying to exit a forward AD level that was not the last one that was created. This is "
                           "not supported.")
    top = len(_L.open) - 1
    duals, saved, _ = _L.open.pop()
    for ref in duals:
        t = ref()
        if t is not None:
            t._fw_grad = _without(t._fw_grad, top)
    for sv in saved:
        sv._fw_grad = _without(sv._fw_grad, top)
    if not _L.open:
        STATE.dual = None


class dual_level:
    """``with dual_level():`` the scope of dual tensors (a context manager, as PyTorch's)."""

    def __enter__(self):
        return enter_dual_level()

    def __exit__(self, *exc):
        exit_dual_level()


class nested_level(dual_level):
    """A dual level inside others (jitgrad.func's jvp: functorch keeps levels). ``history=False``: nothing will
    differentiate its tangents in reverse mode, so their JVPs run with grad mode off (and may fuse)."""

    def __init__(self, history=True):
        self.history = history

    def __enter__(self):
        return _enter(self.history)


def _without(tangents, level):
    if not tangents or level not in tangents:
        return tangents
    rest = {k: v for k, v in tangents.items() if k != level}
    return rest or None


def _attach(t, tangent, level=None):
    """``t`` carries ``tangent`` at ``level`` (the innermost open one by default); the map is replaced, never
    changed in place (tensors may share it: an in-place op's stand-in, saved outputs)."""
    if level is None:
        level = len(_L.open) - 1
    t._fw_grad = {**t._fw_grad, level: tangent} if t._fw_grad else {level: tangent}
    _L.open[level][0].append(weakref.ref(t))
    return t


def _check_size(tensor, tangent):
    if tuple(tangent.shape) != tuple(tensor.shape):
        raise RuntimeError("Trying to set a forward gradient that has a different size than that of the original "
                           "Tensor, this is not supported. Tensor is of size [%s] while the given forward gradient "
                           "is of size [%s]." % (", ".join(map(str, tensor.shape)), ", ".join(map(str, tangent.shape))))


def set_tangent(tensor, tangent):
    """``tensor`` carries ``tangent`` at the innermost level (a custom Function's jvp result)."""
    _check_size(tensor, tangent)
    return _attach(tensor, tangent if tangent.dtype is tensor.dtype else tangent.to(tensor.dtype))


def make_dual(tensor, tangent, *, level=None):
    """A view of ``tensor`` carrying ``tangent`` (of its shape) at the open level."""
    if not _L.open:
        raise RuntimeError("Trying to create a dual Tensor for forward AD but no level exists, make sure to "
                           "enter_dual_level() first.")
    if not tensor.dtype.is_inexact:
        raise ValueError("Expected primal to be floating point or complex, but got: %s" % tensor.dtype)
    if not tangent.dtype.is_inexact:
        raise ValueError("Expected tangent to be floating point or complex, but got: %s" % tangent.dtype)
    _check_size(tensor, tangent)
    out = tensor.view_as(tensor)  # (a view, as PyTorch's: it shares the primal's storage and version)
    return _attach(out, tangent if tangent.dtype is tensor.dtype else tangent.to(tensor.dtype), level)


def unpack_dual(tensor, *, level=None):
    """(primal, tangent) of ``tensor`` at ``level`` (the innermost): the primal a view without that tangent
    (keeping the outer levels'); the tangent None if it has none."""
    if STATE.dual is None or not _L.open:  # (none inside a custom Function's forward)
        return UnpackedDualTensor(tensor, None)
    level = len(_L.open) - 1 if level is None else level
    tangent = _tangent(tensor, level)
    if tangent is None:
        return UnpackedDualTensor(tensor, None)
    primal = tensor._alias(tensor.grad_fn, tensor._output_nr) if tensor.grad_fn is not None else tensor._alias()
    primal._requires_grad = tensor._requires_grad
    primal._fw_grad = _without(tensor._fw_grad, level)
    return UnpackedDualTensor(primal, tangent)


def tangent(t, level=None):
    """``t``'s tangent at ``level`` (the innermost open one by default), or None."""
    return _tangent(t, len(_L.open) - 1 if level is None else level) if _L.open else None


# ------------------------------------------------------------------ propagation (dispatch's hook)
class _Primals:
    """What a VJP formula reads as ``s``, from the call itself: inputs, outputs, params and their defaults,
    the inputs' shapes; each looked up when a formula first reads it (most JVPs read one or two, or none)."""

    def __init__(self, op, args, params, outs):
        self.op = op
        self.params = params
        self._args = args
        self._outs = outs

    def __getattr__(self, name):  # (only for names not set yet)
        d = self.__dict__
        op, args = d["op"], d["_args"]
        inputs = op.inputs or ()
        if name.endswith("_shape") and name[:-6] in inputs:
            a = args[inputs.index(name[:-6])]
            if isinstance(a, Tensor):
                return tuple(a.shape)
        if name in d["params"]:
            return d["params"][name]
        if name in op.exposure.params:
            return op.exposure.params[name]
        if name in op.outputs:
            k = op.outputs.index(name)
            if k < len(d["_outs"]):
                return d["_outs"][k]
        if name in inputs:
            return args[inputs.index(name)]
        if name == "next_functions":  # (formulas that share parts between inputs read which take gradients)
            return ((True, 0),) * len(args)
        if name == "input_meta":
            return [(tuple(a.shape), a.dtype) if isinstance(a, Tensor) else None for a in args]
        raise AttributeError(name)


def _levels(args):
    """The levels below the running one (the ceiling) at which some operand, or its base, carries a tangent."""
    found, ceiling = set(), _L.ceiling
    for a in args:
        if isinstance(a, Tensor):
            for d in (a._fw_grad, a._base._fw_grad if a._base is not None else None):
                if d:
                    found.update(k for k in d if ceiling is None or k < ceiling)
    return found


class _Hook:
    """``STATE.dual`` inside a level: dispatch hands it every op with a dual operand; in-place writes and
    ``__setitem__`` (jitgrad/_inplace.py) hand it the tangents their target takes."""

    def __call__(self, op, args, params):
        """The op on the primals, its outputs carrying the JVP of the operands' tangents (at the innermost level
        among them; the outer ones carried on by the op and the JVP themselves)."""
        levels = _levels(args)
        if not levels:  # (tangents of the level running only: a plain op)
            return _plain(op, args, params)
        level = max(levels)
        tangents = [_tangent(a, level) if isinstance(a, Tensor) else None for a in args]
        outer = len(levels) > 1 or bool(_levels([t for t in tangents if t is not None]))
        ceiling = _L.ceiling
        _L.ceiling = level
        if not outer:  # (the common case: the op and its JVP on plain tensors)
            _swap_dual(None)
        grad = STATE.grad_enabled
        try:
            out = dispatch(op, args, params)
            jvps = None
            if op.differentiable and any(t is not None for t in tangents):
                if not _L.open[level][2]:
                    STATE.grad_enabled = False
                outs = (out,) if op.n_outputs == 1 else tuple(out)
                if op.view:  # a view's tangent is the same view of its base's tangent (in-place writes reach both)
                    jvps = dispatch(op, (tangents[0],) + tuple(args[1:]), params)
                    jvps = (jvps,) if op.n_outputs == 1 else jvps
                else:
                    j = None if outer or op.n_outputs != 1 else _common_jvp(op, args, params, out, tangents)
                    jvps = (j,) if j is not None else _owned(_jvp(op, args, params, outs, tangents, not outer),
                                                             tangents)
        finally:
            _L.ceiling = ceiling
            _swap_dual(self)
            STATE.grad_enabled = grad
        if jvps is not None:
            node = outs[0].grad_fn
            for k, (o, t) in enumerate(zip(outs, jvps)):
                name = op.outputs[k] if k < len(op.outputs) else None
                if t is None:
                    continue
                _attach(o, t, level)
                saved = node.saved.get(name) if node is not None else None
                if saved is not None:  # (a backward formula reading the saved output gets the tangent too)
                    saved._fw_grad = o._fw_grad
                    _L.open[level][1].append(saved)
        return out

    @staticmethod
    def written(target, tangents, what):
        """``target`` now holds a result whose tangents are ``tangents`` (a map level -> tangent, or None): each
        written into the target's tangent in place, as PyTorch's, so that its views' tangents (views of it)
        and its base's follow."""
        bases = target._base._fw_grad if target._base is not None else None
        for level in set(target._fw_grad or ()) | set(tangents or ()) | set(bases or ()):
            if level >= len(_L.open):
                continue
            own = tangent_of(target, level)
            t = tangents.get(level) if tangents else None
            with _running(level), no_grad():
                if t is None:
                    own.zero_()
                else:
                    own.copy_(t)

    @staticmethod
    def setitem(target, key, value):
        """``target[key] = value`` was written: the region's tangent is the value's (zero for a plain one)."""
        values = value._fw_grad if isinstance(value, Tensor) else None
        bases = target._base._fw_grad if target._base is not None else None
        for level in set(target._fw_grad or ()) | set(values or ()) | set(bases or ()):
            if level >= len(_L.open):
                continue
            own = tangent_of(target, level)
            t = values.get(level) if values else None
            with _running(level), no_grad():
                own[key] = 0 if t is None else t


def _plain(op, args, params):
    _swap_dual(None)
    try:
        return dispatch(op, args, params)
    finally:
        _swap_dual(_HOOK)


class _running:
    """The hook's state while level ``level`` runs: only the outer levels propagate."""

    def __init__(self, level):
        self.level = level

    def __enter__(self):
        self.saved = _L.ceiling
        _L.ceiling = self.level

    def __exit__(self, *exc):
        _L.ceiling = self.saved


_HOOK = _Hook()


def _tangent(t, level):
    """``t``'s tangent at ``level``; a view made before its base took one has the same view of the base's."""
    d = t._fw_grad
    if d and level in d:
        return d[level]
    b = t._base
    if b is not None and b._fw_grad and level in b._fw_grad:
        return tangent_of(t, level)
    return None


def tangent_of(target, level):
    """The tangent ``target`` holds at ``level`` (zeros made for it where it has none): for a view, the same
    view of its base's tangent."""
    d = target._fw_grad
    if not d or level not in d:
        base = target._base
        with _running(level), no_grad():
            if base is None:
                _attach(target, target.detach().new_zeros(target.shape), level)
            else:
                _attach(target, _region_tensor(tangent_of(base, level), target._view_chain, None), level)
    return target._fw_grad[level]


def _owned(jvps, tangents):
    """The outputs' tangents, each of its own storage: a formula may hand back its gradient (an input's tangent,
    or that tangent expanded), which a later in-place write into the output's tangent must not reach."""
    shared = [t._vc for t in tangents if t is not None]
    return tuple(j.clone() if j is not None and any(j._vc is vc for vc in shared) else j for j in jvps)


def _differentiable(o):
    return o.dtype.is_inexact


def _jvp(op, args, params, outs, tangents, fusable=False):
    """The tangent of each output (None for the integer ones: indices). ``fusable``: no outer level's tangents
    ride on the JVP's ops, so that an elementwise entry may run its fused VJP kernel (see _fused_jvp)."""
    s = _Primals(op, args, params, outs)
    elementwise = getattr(op.forward, "kernel", None) is not None
    if fusable and elementwise and STATE.grad_enabled and any(
            isinstance(a, Tensor) and a.requires_grad for a in args + tuple(tangents)):
        fusable = False  # the tangent keeps its history (an outer reverse-mode transform differentiates it)
    total = None
    for k, t in enumerate(tangents):
        if t is None:
            continue
        formula = op.derivatives.vjp[0 if op.variadic else k]
        if op.variadic:  # (cat, stack: one formula, given the input's position)
            formula = (lambda f, k: lambda g, s: f(g, s, k))(formula, k)
        if formula is None:
            continue  # (an input the op is not differentiable in: its tangent does not reach the output)
        # (grad mode as it is: where primals or tangents require grad, the tangents record their history, so
        # that reverse mode differentiates them: jacrev(jacfwd(f)))
        if k in op.derivatives.linear:  # multilinear in this input: the op on its tangent, the others' primals
            terms = (dispatch(op, args[:k] + (t,) + args[k + 1:], params),)
        elif elementwise:  # a diagonal Jacobian: the formula applied to the tangent is the JVP
            out = outs[0]
            t = t.expand(out.shape) if tuple(t.shape) != tuple(out.shape) else t
            if t.dtype.is_complex or out.dtype.is_complex:  # the formula gives conj(f'(z)) g: J t is its conjugate
                j = formula(t.conj(), s).conj_physical()  # at conj(t) (a real output keeps the real part: abs, angle)
                terms = (j.real if j.dtype.is_complex and not out.dtype.is_complex else j,)
            else:
                fop = op.derivatives.fused_ops[k] if fusable and t.dtype == out.dtype else None
                j = _fused_jvp(fop, op.derivatives.fused[k][1], t, s) if fop is not None else None
                terms = (formula(t, s) if j is None else j,)
        else:
            s.__dict__.pop("_fused_parts", None)  # (parts a formula cached for another input's gradients)
            terms = _transposed(formula, s, outs, args[k], t)
        total = terms if total is None else tuple(a if b is None else b if a is None else a + b
                                                  for a, b in zip(total, terms))
    if total is None:
        total = (None,) * len(outs)
    return tuple(None if not _differentiable(o) or k in op.workspace else o.new_zeros(o.shape) if j is None else j
                 for k, (o, j) in enumerate(zip(outs, total)))


def _common_jvp(op, args, params, out, tangents):
    """_jvp's common cases, spelled out: a one-output entry whose tangents each reach it through an input it is
    linear in (the op on the tangent) or through its fused elementwise VJP kernel (see _fused_jvp), the terms
    summed; None where another case of _jvp applies (it then runs instead: nothing is computed here)."""
    d = op.derivatives
    if out.dtype not in _FUSED_DTYPES or op.variadic:
        return None
    plan = []
    history = None  # (whether a tangent keeps its history, which the fused kernels do not record: see _jvp)
    for k, t in enumerate(tangents):
        if t is None:
            continue
        if k in d.linear:
            plan.append((k, None))
            continue
        fop = d.fused_ops[k]
        if fop is None or getattr(op.forward, "kernel", None) is None or t.dtype != out.dtype or \
                t._data.shape != out._data.shape:
            return None
        if history is None:
            history = STATE.grad_enabled and any(isinstance(a, Tensor) and a._requires_grad
                                                 for a in args + tuple(tangents))
        if history:
            return None
        operands = []
        for n in d.fused[k][1]:
            if n == "g":
                operands.append(t)
            elif n in op.outputs:
                operands.append(out)
            elif n in op.inputs:
                operands.append(args[op.inputs.index(n)])
            else:  # (a param)
                return None
        plan.append((fop, operands))
    total = None
    for how, operands in plan:  # (input position, None) or (fused kernel's op, its operands)
        if operands is None:  # (the op on the tangent may hand it back: the output's tangent gets its own storage)
            t = tangents[how]
            j = dispatch(op, args[:how] + (t,) + args[how + 1:], params)
            if j._vc is t._vc:
                j = j.clone()
        else:
            j = how.exposure.call(*operands)
        total = j if total is None else total + j
    return total


def _fused_jvp(fop, names, t, s):
    """An elementwise entry's JVP f'(x) t in one pass: its fused VJP kernel (g f'(x), the same product for a
    real diagonal Jacobian) on the tangent, where the formula takes several ops (tanh's t * (1 - y * y): three).
    The kernel computes in the tangent's dtype (the caller checks it is the output's). None where a
    float16/bfloat16 tangent computes in float32 (the formula's ops round as PyTorch's)."""
    if t.dtype not in _FUSED_DTYPES:
        return None
    return fop.exposure.call(*[t if n == "g" else getattr(s, n) for n in names])


_FUSED_DTYPES = frozenset((float32, float64))


# how jitgrad.func (a layer above) transposes a formula for a tangent batched by vmap (jacfwd's basis)
BATCHED_TRANSPOSE = [None]


def _transposed(formula, s, outs, x, t):
    """J t for the op whose VJP in ``x`` is ``formula`` (linear in its gradients, one per output): the gradient
    in u of <formula(u), t>, per output (None for an output it does not reach)."""
    if getattr(t, "_level", 0):
        return BATCHED_TRANSPOSE[0](formula, s, outs, x, t)
    keep = _keeps_history(s, t)
    with enable_grad():
        at = s.op.derivatives.transpose_at
        us = [o.detach().new_full(o.shape, at).requires_grad_(_differentiable(o)) for o in outs]
        return tuple(None if j is None else j if keep else _detached(j)
                     for j in _pulled(formula, s, us, x, t, lambda r: r, keep))


def _keeps_history(s, t):
    """Whether a transposed JVP must keep its graph: grad mode is on and the tangent or a primal requires grad
    (an outer reverse-mode transform differentiates the tangent)."""
    if not STATE.grad_enabled:
        return False
    return t.requires_grad or any(isinstance(a, Tensor) and a.requires_grad for a in s._args)


def _detached(t):
    """``t`` without history, keeping its tangents at the outer levels."""
    d = t.detach()
    d._fw_grad = t._fw_grad
    return d


def _pulled(formula, s, us, x, t, unwrap, keep=False):
    """The gradients in ``us`` (the formula's output gradients, leaves where they require grad) of
    <formula(us), t>; ``unwrap`` gives the physical tensor of the product (vmap's batch)."""
    v = formula(us[0] if len(us) == 1 else tuple(us), s)
    leaves = [u for u in us if u.requires_grad]
    if v is None or not v.requires_grad or not leaves:  # a formula that does not read its gradient (floor, fill)
        return (None,) * len(us)
    if tuple(v.shape) != tuple(x.shape):
        v = v.sum_to_size(x.shape)
    # <v, t>: Re(sum(conj(v) t)) for complex ones, whose gradient in u (PyTorch's convention) is J t
    r = unwrap((v.conj() * t).sum().real if v.dtype.is_complex or t.dtype.is_complex else (v * t).sum())
    # (outer levels open: the backward's formulas run as table ops, carrying their tangents on)
    grads = iter(engine.grad([r], [unwrap(u) for u in leaves], [r.new_ones(r.shape)], allow_unused=True,
                             create_graph=keep or STATE.dual is not None))
    return tuple(next(grads) if u.requires_grad else None for u in us)


__all__ = ["dual_level", "enter_dual_level", "exit_dual_level", "make_dual", "unpack_dual", "UnpackedDualTensor"]
