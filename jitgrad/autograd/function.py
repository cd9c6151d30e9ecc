"""Custom autograd Functions: ``class MyOp(Function)`` with static forward/backward, ``MyOp.apply``.

The ctx passed to forward is the node itself (``y.grad_fn``), as in PyTorch. Tensors given to
``ctx.save_for_backward`` are version-checked when ``ctx.saved_tensors`` is read.
"""
import functools
import warnings

from .._factories import zeros
from .._grad_mode import STATE, no_grad
from .._graph import NO_EDGE, Node, edge, type_name
from .._saved import SavedTensor
from .._tensor import Tensor
from . import forward_ad


class FunctionCtx:
    """What forward can tell backward: saved tensors, dirty and non-differentiable outputs."""

    def save_for_backward(self, *tensors):
        self.to_save = tensors

    def save_for_forward(self, *tensors):
        self.saved_for_forward = tensors

    def mark_dirty(self, *args):
        self.dirty_tensors = args

    def mark_non_differentiable(self, *args):
        self.non_differentiable = args

    def set_materialize_grads(self, value):
        self.materialize_grads = bool(value)


class BackwardCFunction(Node, FunctionCtx):
    """The node of a custom Function; it is also the ``ctx`` its forward and backward receive."""
    _forward_cls = None

    def __init__(self):
        Node.__init__(self)
        self.to_save = ()
        self.dirty_tensors = ()
        self.non_differentiable = ()
        self.materialize_grads = True
        self.needs_input_grad = ()
        self._saved = None
        self.saved_for_forward = ()
        self._in_jvp = False
        self._n_inputs = 0
        self._out_meta = ()

    @property
    def saved_tensors(self):
        if self._in_jvp:  # (in jvp: what forward gave save_for_forward)
            return tuple(self.saved_for_forward)
        if self._saved is None:
            return tuple(self.to_save)
        return tuple(None if s is None else s.unpack() for s in self._saved)

    @property
    def saved_variables(self):
        return self.saved_tensors

    def apply(self, grads):
        if self.materialize_grads:
            grads = [g if g is not None else zeros(shape, dtype=dtype) for g, (shape, dtype) in zip(grads, self._out_meta)]
        out = self._forward_cls.backward(self, *grads)
        if not isinstance(out, tuple):
            out = (out,)
        if len(out) != self._n_inputs:
            if len(out) > self._n_inputs and all(g is None for g in out[self._n_inputs:]):
                out = out[:self._n_inputs]
            else:
                raise RuntimeError("function %s returned an incorrect number of gradients (expected %d, got %d)"
                                   % (self.name(), self._n_inputs, len(out)))
        # One gradient per next_functions entry (the tensor inputs), validated as PyTorch's engine does:
        # a tensor or None, and of a shape the input's shape expands to (then summed down to it).
        result = []
        nexts = self.next_functions
        for i, g in enumerate(out):
            meta = self._in_meta[i]
            if meta is None:
                if g is not None:
                    raise RuntimeError("function %s returned a gradient different than None at position %d, but the "
                                       "corresponding forward input was not a Variable" % (self.name(), i + 1))
                continue
            if g is not None:
                if not isinstance(g, Tensor):
                    raise RuntimeError("expected Variable or None (got %s)" % type_name(g))
                if nexts[len(result)][0] is None:
                    g = None  # the input takes no gradient: PyTorch checks nothing more
                else:
                    shape, dtype = meta
                    if g._data.shape != shape:
                        if not _expandable(shape, g._data.shape):
                            raise RuntimeError("Function %s returned an invalid gradient at index %d - got [%s] but "
                                               "expected shape compatible with [%s]" % (
                                                   self.name(), i, ", ".join(map(str, g.shape)),
                                                   ", ".join(map(str, shape))))
                        g = g.sum_to_size(shape)
                    if g.dtype is not dtype:
                        g = g.to(dtype)
            result.append(g)
        return result

    def _release(self):
        if self._saved is not None:
            for s in self._saved:
                if s is not None:
                    s.release()


def _expandable(shape, grad_shape):
    """Whether ``shape`` expands to ``grad_shape`` (PyTorch's is_expandable_to)."""
    if len(shape) > len(grad_shape):
        return False
    for n, m in zip(reversed(shape), reversed(grad_shape)):
        if n != m and n != 1:
            return False
    return True


class _FunctionMeta(type):
    def __init__(cls, name, bases, attrs):
        backward_cls = type(name + "Backward", (BackwardCFunction,), {"_forward_cls": cls, "__slots__": ()})
        cls._backward_cls = backward_cls
        forward = attrs.get("forward")
        cls._legacy = forward is not None and not isinstance(forward, staticmethod)  # forward(self, ...)
        super().__init__(name, bases, attrs)


class Function(metaclass=_FunctionMeta):
    """Base class of custom differentiable operations."""

    def __init__(self, *args, **kwargs):
        warnings.warn("%s should not be instantiated. Methods on autograd functions are all static, so you should "
                      "invoke them on the class itself. Instantiating an autograd function will raise an error in a "
                      "future version of PyTorch." % self.__class__, DeprecationWarning, stacklevel=2)

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("You must implement the forward function for custom autograd.Function.")

    @staticmethod
    def setup_context(ctx, inputs, output):
        raise NotImplementedError("setup_context is not implemented.")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("You must implement either the backward or vjp method for your custom "
                                  "autograd.Function to use it with backward mode AD.")

    vjp = backward

    @staticmethod
    def jvp(ctx, *grad_inputs):
        raise NotImplementedError("You must implement the jvp function for custom autograd.Function to use it with "
                                  "forward mode AD.")

    # under jitgrad.vmap: True runs forward on the batched inputs (its ops' batching rules make the rule);
    # otherwise the Function's own vmap(info, in_dims, *args) -> (outputs, out_dims) is called
    generate_vmap_rule = False

    @staticmethod
    def vmap(info, in_dims, *args):
        raise NotImplementedError("To use autograd.Function with vmap, you must either override the vmap staticmethod "
                                  "or set generate_vmap_rule=True.")

    @classmethod
    def apply(cls, *args, **kwargs):
        if cls._legacy:
            raise RuntimeError("Legacy autograd function with non-static forward method is deprecated. Please use "
                               "new-style autograd function with static forward method.")
        if STATE.vmap is not None:  # inside jitgrad.vmap: the Function's vmap rule, where an input is batched
            out = STATE.vmap.function(cls, args, kwargs)
            if out is not NotImplemented:
                return out
        ctx = cls._backward_cls()
        is_tensor = [isinstance(a, Tensor) for a in args]
        ctx.needs_input_grad = tuple(t and a._requires_grad for t, a in zip(is_tensor, args))
        ctx._n_inputs = len(args)
        uses_setup = cls.setup_context is not Function.setup_context
        # forward-mode AD: forward sees the primals only; the outputs' tangents come from the Function's jvp
        dual = STATE.dual
        dual_inputs = dual is not None and any(t and forward_ad.tangent(a) is not None for t, a in zip(is_tensor, args))
        if dual_inputs:
            STATE.dual = None
        try:
            with no_grad():
                if uses_setup:
                    outputs = cls.forward(*args, **kwargs)
                    cls.setup_context(ctx, args, outputs)
                else:
                    outputs = cls.forward(ctx, *args, **kwargs)
        finally:
            STATE.dual = dual
        single = not isinstance(outputs, tuple)
        outs = (outputs,) if single else outputs
        record = STATE.grad_enabled and any(ctx.needs_input_grad)
        if not record:
            for o in outs:
                if isinstance(o, Tensor) and STATE.inference:
                    o._inference = True
            if dual_inputs:
                outs = tuple(o._alias() if isinstance(o, Tensor) and any(o is a for a in args)
                             and not any(o is d for d in ctx.dirty_tensors) else o for o in outs)
                _forward_tangents(cls, ctx, args, is_tensor, outs)
                return outs[0] if single else outs
            return outputs
        # next_functions lists the tensor inputs only, as PyTorch's does
        ctx.next_functions = tuple((edge(a) if a.dtype.is_inexact else None) or NO_EDGE
                                   for t, a in zip(is_tensor, args) if t)
        ctx._in_meta = [(a._data.shape, a.dtype) if t else None for t, a in zip(is_tensor, args)]
        dirty = {id(t) for t in ctx.dirty_tensors}
        non_diff = {id(t) for t in ctx.non_differentiable}
        inputs = {id(a) for a, t in zip(args, is_tensor) if t}
        wrapped, meta = [], []
        for k, o in enumerate(outs):
            if not isinstance(o, Tensor):
                wrapped.append(o)
                meta.append(((), None))
                continue
            if id(o) in inputs and id(o) not in dirty:
                o = o._alias()  # returning an input unchanged gives a new tensor object, as in PyTorch
            if id(o) in dirty:
                if o.grad_fn is None and o._requires_grad:
                    raise RuntimeError("a leaf Variable that requires grad has been used in an in-place operation.")
                o._vc[0] += 1
            meta.append((o.shape, o.dtype))
            if id(o) not in non_diff and o.dtype.is_inexact:
                o.grad_fn, o._output_nr, o._requires_grad = ctx, k, True
            wrapped.append(o)
        ctx._out_meta = meta
        ctx.n_outputs = len(outs)  # the engine keeps one gradient slot per output
        outputs_by_id = {id(o): k for k, o in enumerate(wrapped) if isinstance(o, Tensor)}
        saved = []
        for t in ctx.to_save:
            if t is None:
                saved.append(None)
            elif id(t) in outputs_by_id:
                saved.append(SavedTensor(t, is_output=True, node=ctx))
            else:
                saved.append(SavedTensor(t))
        ctx._saved = saved
        if dual_inputs:
            _forward_tangents(cls, ctx, args, is_tensor, wrapped)
        return wrapped[0] if single else tuple(wrapped)


def _forward_tangents(cls, ctx, args, is_tensor, outs):
    """The outputs' tangents: the Function's jvp of the inputs' tangents (zeros for tensors without one)."""
    tangents = [(forward_ad.tangent(a) if forward_ad.tangent(a) is not None else
                 zeros(a.shape, dtype=a.dtype, device=a.device)) if t else None for t, a in zip(is_tensor, args)]
    dual, STATE.dual = STATE.dual, None
    ctx._in_jvp = True
    try:
        res = cls.jvp(ctx, *tangents)
    finally:
        ctx._in_jvp = False
        STATE.dual = dual
    res = res if isinstance(res, tuple) else (res,)
    if len(res) != len(outs):
        raise RuntimeError("Function's jvp returned an invalid number of forward gradients (expected %d but got %d)"
                           % (len(outs), len(res)))
    non_diff = {id(t) for t in ctx.non_differentiable}
    for o, t in zip(outs, res):
        if isinstance(o, Tensor) and t is not None and id(o) not in non_diff and o.dtype.is_inexact:
            forward_ad.set_tangent(o, t)


class _OnceDifferentiableError(Node):
    __slots__ = ()

    def apply(self, grads):
        raise RuntimeError("trying to differentiate twice a function that was marked with @once_differentiable")


def once_differentiable(fn):
    """Run a backward under no_grad; differentiating its result again raises."""
    @functools.wraps(fn)
    def wrapper(ctx, *args):
        with no_grad():
            out = fn(ctx, *args)
        if not STATE.grad_enabled:
            return out
        if not any(isinstance(a, Tensor) and a._requires_grad for a in args):
            return out
        outs = out if isinstance(out, tuple) else (out,)
        err = _OnceDifferentiableError(tuple(edge(a) if isinstance(a, Tensor) and a._requires_grad else None
                                             for a in args))
        res = []
        for o in outs:
            if isinstance(o, Tensor) and o.dtype.is_inexact:
                o = o._alias(grad_fn=err)
            res.append(o)
        return tuple(res) if isinstance(out, tuple) else res[0]
    return wrapper
