"""The compiled callable: guards -> variant -> plan, re-tracing where a guard fails."""
import warnings

from .._grad_mode import STATE
from .._tensor import Tensor
from .guards import tensor_key
from .pytree import flatten
from .variant import Variant

MAX_VARIANTS = 8
MAX_SHAPES = 32  # variants kept of one function that differ only in shapes (unless dynamic=False)


_POSITIONAL = {}  # n -> the structure of a call with n positional tensors (see flatten)


class CompiledFunction:
    """``jitgrad.compile(fn)``: guards -> variant -> plan; a failed guard traces a new variant.

    Variants that differ only in their tensors' shapes form a family. Unless ``dynamic`` is False, a family
    counts once towards MAX_VARIANTS, as PyTorch's dynamic shapes make a shape change no recompile: a new
    shape costs a trace (milliseconds; the loops and tapes, whose source does not hold the shapes, are
    reused), and a family keeps its MAX_SHAPES newest shapes. With ``dynamic=False`` every shape counts.
    """

    def __init__(self, fn, fullgraph=False, fuse=True, guard=None, name=None, dynamic=None):
        self.fn = fn
        self.fullgraph = fullgraph
        self.fuse = fuse
        self.guard = guard  # extra guard key (a module's training flags and parameters)
        self.name = name or getattr(fn, "__qualname__", type(fn).__name__)
        self.dynamic = dynamic
        self.variants = {}
        self.families = {}  # key without shapes -> the keys of its variants, oldest first
        self.warned = False

    def key(self, args, kwargs):
        if not kwargs and all(isinstance(a, Tensor) for a in args):  # the usual call: its structure is known
            tensors = list(args)
            spec = _POSITIONAL.get(len(args)) or _POSITIONAL.setdefault(len(args), flatten((args, kwargs), []))
        else:
            tensors = []
            spec = flatten((args, kwargs), tensors)
        ids = [id(t._data) for t in tensors]
        alias = tuple(ids.index(i) for i in ids) if len(set(ids)) != len(ids) else None
        return (spec, tuple(tensor_key(t) for t in tensors), alias, STATE.grad_enabled, STATE.inference,
                self.guard() if self.guard is not None else None), tensors

    def __call__(self, *args, **kwargs):
        if STATE.capture is not None or STATE.dual is not None:
            # called while another compiled function traces (inlined), or inside a forward-mode AD level (a plan
            # carries no tangents): eagerly
            return self.fn(*args, **kwargs)
        key, tensors = self.key(args, kwargs)
        var = self.variants.get(key)
        if var is not None and var.guards_hold():
            return self._run(var, args, kwargs, tensors)
        if key not in self.variants and not self._room_for(key):
            if not self.warned:
                self.warned = True
                warnings.warn("jitgrad.compile: %s was traced %d times (guards failed: shapes, dtypes, "
                              "requires_grad, grad mode or module state changed); running it eagerly from now on"
                              % (self.name, MAX_VARIANTS))
            return self.fn(*args, **kwargs)
        var = Variant(self, key, args, kwargs, tensors)
        self._add(key, var)
        # (the trace ran on stand-ins for the inputs, and applied no side effect: the call runs now)
        return self._run(var, args, kwargs, tensors)

    def _run(self, var, args, kwargs, tensors):
        if var.eager or var.effects and not var.usable(tensors):
            return self.fn(*args, **kwargs)
        if var.prefix:
            return var.replay(self.fn, args, kwargs, tensors)
        return var.run(tensors)

    def _family(self, key):
        if self.dynamic is False:
            return key
        return (key[0], tuple((len(k[0]),) + k[1:] for k in key[1])) + key[2:]

    def _room_for(self, key):
        counted = self.variants if self.dynamic is False else self.families
        return len(counted) < MAX_VARIANTS or self._family(key) in self.families

    def _add(self, key, var):
        keys = self.families.setdefault(self._family(key), [])
        if key not in self.variants:
            keys.append(key)
            if len(keys) > MAX_SHAPES:  # the family's oldest shape goes (a call with it traces again)
                del self.variants[keys.pop(0)]
        self.variants[key] = var


__all__ = ["CompiledFunction"]
