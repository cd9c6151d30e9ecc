"""``jitgrad.vmap`` (``torch.func.vmap``): a function of one sample run on a batch, every op once on the
whole batch by its entry's batching rule (batching.py), reached through dispatch's hook (``STATE.vmap``).

    per_sample = vmap(f, in_dims=(0, None))(xs, w)      # f(x, w) for each x in xs, stacked

Inside, batched inputs are BatchedTensors (_batched.py) of the per-sample shape; the rules run at the
innermost level first seen among an op's operands and reach the outer levels through dispatch again.
"""
import functools
import threading
import warnings
from typing import NamedTuple

from .._grad_mode import STATE
from .._op import dispatch
from .._op_node import run_fused
from .._saved import SavedTensor
from .._tensor import Tensor, has_tangent
from .._factories import empty
from ..autograd.function import Function
from ..ops._table import OPS
from ..ops.random import normal_fill, uniform
from . import _pytree
from ._batched import LEVELS, BatchedTensor, Level, batched, is_batched, move_out, unwrap_all, wrap_levels
from .batching import HOOK_LEVEL, RULES, getitem, loop

_RANDOM = frozenset(n for n, r in RULES.items() if r.__name__ == "random")
LOOP_WARNING = ("There is a performance drop because we have not yet implemented the batching rule for %s. Please "
                "file us an issue on GitHub so that we can prioritize its implementation.")
_WARNED = set()
INPLACE_ERROR = ("vmap: inplace arithmetic(self, *extra_args) is not possible because there exists a Tensor `other` "
                 "in extra_args that has more elements than `self`. This happened due to `other` being vmapped over "
                 "but `self` not being vmapped over in a vmap. Please try to use out-of-place operators instead of "
                 "inplace arithmetic. If said operator is being called inside the PyTorch framework, please file a "
                 "bug report instead.")


FUNCTION_VMAP_ERROR = ("You tried to vmap over %s, but it does not have vmap support. Please override and implement "
                       "the vmap staticmethod or set generate_vmap_rule=True. For more details, please see "
                       "https://pytorch.org/docs/main/notes/extending.func.html")
FUNCTION_SETUP_ERROR = ("In order to use an autograd.Function with functorch transforms (vmap, grad, jvp, jacrev, ...), "
                        "it must override the setup_context staticmethod. For more details, please see "
                        "https://pytorch.org/docs/main/notes/extending.func.html")

GENERATED_GRAD_ERROR = ("jitgrad: %s sets generate_vmap_rule=True, which runs its forward on the batched inputs but "
                        "cannot differentiate through its backward under vmap; implement the vmap staticmethod "
                        "(calling apply on the unbatched inputs) to take gradients of it inside vmap")


class VmapInfo(NamedTuple):
    """What a custom Function's vmap rule is told: the batch size and the vmap's randomness mode."""
    batch_size: int
    randomness: str


class _Hook(threading.local):
    """``STATE.vmap`` while a vmap is open: dispatch hands it every op with a batched operand, and the random
    entries (their randomness mode decides). Its state is per thread, as the levels are."""

    def __init__(self):
        self.ceiling = None  # while a rule of level L runs: L (its ops' batched operands are of lower levels)
        # while set (by a backward whose graph nobody keeps, on batched cotangents or carrying forward AD's tangents
        # only: the engine's graph mode only makes it run the formulas), ops that would be recorded are claimed and
        # run with grad mode off (set outside vmap too, with no level open)
        self.no_graph = False

    def claims(self, op, args):
        for a in args:
            if a.__class__ is BatchedTensor:
                return True
        if self.no_graph:  # (what would be recorded, and what carries a tangent: its JVP may record a graph of its own)
            dual = STATE.dual is not None
            for a in args:
                if isinstance(a, Tensor) and (a._requires_grad or dual and has_tangent(a)):
                    return True
        return op.name in _RANDOM and (self.ceiling or len(LEVELS) + 1) > 1

    @staticmethod
    def factory(name, shape, dtype, device):
        """rand/randn (and their _like forms) inside vmap: the fill entries on an empty tensor of the shape (one
        draw shared by the batch, or one per sample, as ``randomness`` says)."""
        blank = empty(shape, dtype=dtype, device=device)
        return uniform(blank) if name == "rand" else normal_fill(blank)

    getitem = staticmethod(getitem)  # (indexing's public getitem asks it first: batched index tensors)

    def function(self, cls, args, kwargs):
        """A custom autograd.Function applied to batched inputs: its own vmap rule, called on the inputs
        unbatched at the innermost level with their batch dims (0), its outputs batched again at their
        out_dims (None: the same for every sample). NotImplemented: run forward on the batched inputs
        (generate_vmap_rule=True without gradients, or no input batched)."""
        level = max((a._level for a in args if a.__class__ is BatchedTensor), default=0)
        if level == 0:
            return NotImplemented
        if cls.setup_context is Function.setup_context:
            raise RuntimeError(FUNCTION_SETUP_ERROR)
        if cls.generate_vmap_rule:
            if cls.vmap is not Function.vmap:
                raise RuntimeError("You tried to vmap over %s, but it has both generate_vmap_rule=True and an "
                                   "overriden vmap staticmethod. Please set generate_vmap_rule=False or delete the "
                                   "overriden vmap staticmethod to avoid ambiguity." % cls.__name__)
            if STATE.grad_enabled and any(isinstance(a, Tensor) and a._requires_grad for a in args):
                # its node would sit on the logical tensors, outside the graph the batching rules record
                raise NotImplementedError(GENERATED_GRAD_ERROR % cls.__name__)
            return NotImplemented
        if cls.vmap is Function.vmap:
            raise RuntimeError(FUNCTION_VMAP_ERROR % cls.__name__)
        lv = LEVELS[level - 1]
        values = [a._value if a.__class__ is BatchedTensor and a._level == level else a for a in args]
        in_dims = tuple(0 if v is not a else None for v, a in zip(values, args))
        saved = self.ceiling
        self.ceiling = level
        try:
            result = cls.vmap(VmapInfo(lv.size, lv.randomness), in_dims, *values, **kwargs)
        finally:
            self.ceiling = saved
        if not (isinstance(result, tuple) and len(result) == 2):
            raise RuntimeError("Expected the vmap staticmethod to have two returns, an output and out_dims with "
                               "pytree structure compatible with the output. Got %r" % (result,))
        out, out_dims = result
        single = not isinstance(out, tuple)
        outs, dims = ((out,), (out_dims,)) if single else (out, out_dims if isinstance(out_dims, tuple)
                                                           else (out_dims,) * len(out))
        if len(dims) != len(outs):
            raise RuntimeError("The vmap staticmethod of %s returned %d outputs but %d out_dims"
                               % (cls.__name__, len(outs), len(dims)))
        wrapped = tuple(o if d is None or not isinstance(o, Tensor) else batched(o.movedim(d, 0), level)
                        for o, d in zip(outs, dims))
        return wrapped[0] if single else wrapped

    @staticmethod
    def inplace(target, fn, args, kwargs):
        """An in-place op inside vmap: run out of place, the result written into the target's batch (None: the
        target and operands are not batched, the plain path)."""
        operands = [a for a in list(args) + list(kwargs.values()) if a.__class__ is BatchedTensor]
        if target.__class__ is not BatchedTensor and not operands:
            return None
        r = fn(target, *args, **kwargs)
        top = target._level if target.__class__ is BatchedTensor else 0
        if any(lv > top for lv in unwrap_all(r)[1]):
            raise RuntimeError(INPLACE_ERROR)
        target._value.copy_(move_out(r, top, LEVELS[top - 1].size))
        return target

    @staticmethod
    def batched_fused(node, spec, g):
        """A node's fused elementwise VJP kernel ``spec`` run on cotangent ``g`` batched by vmap, every sample in one
        call: the kernel broadcasts the physical batch against the node's saved arrays, which are unbatched (the
        graph is recorded on physical tensors). None where a saved tensor is batched or has hooks."""
        p, levels = unwrap_all(g)
        if not levels or p.__class__ is not Tensor:
            return None
        for name in spec[1]:
            v = node.saved.get(name)
            if v.__class__ is SavedTensor and (v._hooks is not None or v._node is None and
                                                v._data.__class__ is BatchedTensor):
                return None
        return wrap_levels(run_fused(node, spec, p), levels)

    def __call__(self, op, args, params):
        if self.no_graph:  # (with nothing recorded: an unbatched op as dispatch runs it, a batched one by its rule)
            enabled, self.no_graph, STATE.grad_enabled = STATE.grad_enabled, False, False
            try:
                for a in args:
                    if a.__class__ is BatchedTensor:
                        return self(op, args, params)
                return dispatch(op, args, params)
            finally:
                self.no_graph, STATE.grad_enabled = True, enabled
        level = 0
        for a in args:
            if a.__class__ is BatchedTensor and a._level > level:
                level = a._level
        if level == 0:  # a random entry on unbatched operands: the innermost level below the running rule
            level = (self.ceiling or len(LEVELS) + 1) - 1
        lv = LEVELS.items[level - 1]
        values, bdims = [], []
        for a in args:
            b = a.__class__ is BatchedTensor and a._level == level
            values.append(a._value if b else a)
            bdims.append(b)
        rule = RULES.get(op.name)
        if rule is None:
            if op.name not in _WARNED:
                _WARNED.add(op.name)
                warnings.warn(LOOP_WARNING % op.name, UserWarning, stacklevel=4)
            rule = loop
        saved = self.ceiling, HOOK_LEVEL.level
        self.ceiling = level
        HOOK_LEVEL.level = lv
        try:
            out, is_out_batched = rule(op, values, bdims, params, lv.size)
        finally:
            self.ceiling, HOOK_LEVEL.level = saved
        if not is_out_batched:
            return out
        return tuple(batched(o, level) for o in out) if isinstance(out, tuple) else batched(out, level)


HOOK = _Hook()


def _name(func):
    if isinstance(func, functools.partial):
        return "functools.partial(%s, ...)" % _name(func.func)
    name = getattr(func, "__name__", None)
    return repr(func) if name is None else name


def vmap(func, in_dims=0, out_dims=0, randomness="error", *, chunk_size=None):
    """``func`` mapped over dim ``in_dims`` of its inputs (a tree matching them, None: not mapped), its outputs
    stacked at ``out_dims``. ``randomness``: 'error', 'different' or 'same'. ``chunk_size``: run the batch in
    chunks of that many samples (one vmap call each; None: all at once)."""
    if randomness not in ("error", "different", "same"):
        raise RuntimeError("Only allowed values for randomness are 'error', 'different', or 'same'. Got %s"
                           % randomness)
    if chunk_size is not None and not (isinstance(chunk_size, int) and chunk_size > 0):
        raise ValueError("vmap: chunk_size should be None or greater than 0. (got %s)" % chunk_size)

    @functools.wraps(func)
    def wrapped(*args, **kwargs):
        return _vmap_call(func, in_dims, out_dims, randomness, chunk_size, args, kwargs)
    return wrapped


def _flat_in_dims(func, in_dims, args):
    if not isinstance(in_dims, (int, tuple)) or isinstance(in_dims, bool):
        if in_dims is not None:
            raise ValueError("vmap(%s, in_dims=%s, ...)(<inputs>): expected `in_dims` to be int or a (potentially "
                             "nested) tuple matching the structure of inputs, got: %s."
                             % (_name(func), in_dims, type(in_dims)))
    if len(args) == 0:
        raise ValueError("vmap(%s)(<inputs>): got no inputs. Maybe you forgot to add inputs, or you are trying to "
                         "vmap over a function with no inputs. The latter is unsupported." % _name(func))
    flat_args, spec = _pytree.flatten(args)
    flat_dims = _pytree.broadcast_prefix(in_dims, spec)
    if flat_dims is None:
        raise ValueError("vmap(%s, in_dims=%s, ...)(<inputs>): in_dims is not compatible with the structure of "
                         "`inputs`. in_dims has structure %s but inputs has structure %s."
                         % (_name(func), in_dims, _pytree.flatten(in_dims)[1], spec))
    for d, a in zip(flat_dims, flat_args):
        if d is None:
            continue
        if not isinstance(d, int) or isinstance(d, bool):
            raise ValueError("vmap(%s, in_dims=%s, ...)(<inputs>): Got in_dim=%s for an input but in_dim must be "
                             "either an integer dimension or None." % (_name(func), in_dims, d))
        if not isinstance(a, Tensor):
            raise ValueError("vmap(%s, in_dims=%s, ...)(<inputs>): Got in_dim=%s for an input but the input is of "
                             "type %s. We cannot vmap over non-Tensor arguments, please use None as the respective "
                             "in_dim" % (_name(func), in_dims, d, type(a)))
        if not -a.dim() <= d < a.dim():
            raise ValueError("vmap(%s, in_dims=%s, ...)(<inputs>): Got in_dim=%s for some input, but that input is a "
                             "Tensor of dimensionality %d so expected in_dim to satisfy -%d <= in_dim < %d."
                             % (_name(func), in_dims, d, a.dim(), a.dim(), a.dim()))
    sizes = [a.size(d) for d, a in zip(flat_dims, flat_args) if d is not None]
    if not sizes:
        raise ValueError("vmap: Expected at least one Tensor to vmap over")
    if any(s != sizes[0] for s in sizes):
        raise ValueError("vmap: Expected all tensors to have the same size in the mapped dimension, got sizes %s "
                         "for the mapped dimension" % sizes)
    return flat_args, flat_dims, spec, sizes[0]


def _vmap_call(func, in_dims, out_dims, randomness, chunk_size, args, kwargs):
    flat_args, flat_dims, spec, size = _flat_in_dims(func, in_dims, args)
    if chunk_size is None or chunk_size >= size:
        return _run(func, flat_args, flat_dims, spec, size, out_dims, randomness, kwargs)
    chunks = []
    for start in range(0, size, chunk_size):
        n = min(chunk_size, size - start)
        part = [a.narrow(d, start, n) if d is not None else a for a, d in zip(flat_args, flat_dims)]
        chunks.append(_run(func, part, flat_dims, spec, n, out_dims, randomness, kwargs))
    return _concat_chunks(func, chunks, out_dims)


def _concat_chunks(func, chunks, out_dims):
    from ..ops.join import cat
    flat0, spec = _pytree.flatten(chunks[0])
    dims = _flat_out_dims(func, chunks[0], out_dims, spec)
    flats = [_pytree.flatten(c)[0] for c in chunks]
    out = [x if d is None else cat([f[i] for f in flats], d) for i, (x, d) in enumerate(zip(flat0, dims))]
    return _pytree.unflatten(out, spec)


def _run(func, flat_args, flat_dims, spec, size, out_dims, randomness, kwargs):
    level = len(LEVELS) + 1
    LEVELS.append(Level(level, size, randomness))
    prev = STATE.vmap
    STATE.vmap = HOOK
    try:
        inputs = [a if d is None else _add_batch_dim(a, d, level) for a, d in zip(flat_args, flat_dims)]
        out = func(*_pytree.unflatten(inputs, spec), **kwargs)
        return _remove_batch_dims(func, out, out_dims, level, size)
    finally:
        LEVELS.pop()
        STATE.vmap = prev


def _add_batch_dim(x, dim, level):
    d = dim if dim >= 0 else dim + x.dim()
    return batched(x.movedim(d, 0) if d else x, level)


def _flat_out_dims(func, out, out_dims, spec):
    if isinstance(out, Tensor):
        if isinstance(out_dims, int) or out_dims is None:
            return [out_dims]
        if isinstance(out_dims, tuple) and len(out_dims) == 1:
            return list(out_dims)
        flat = None
    else:
        flat = _pytree.broadcast_prefix(out_dims, spec)
    if flat is None:
        raise ValueError("vmap(%s, ..., out_dims=%s)(<inputs>): out_dims is not compatible with the structure of "
                         "`outputs`. out_dims has structure %s but outputs has structure %s."
                         % (_name(func), out_dims, _pytree.flatten(out_dims)[1], spec))
    for d in flat:
        if d is not None and (not isinstance(d, int) or isinstance(d, bool)):
            raise ValueError("vmap(%s, ..., out_dims=%s): `out_dims` must be an int, None or a python collection of "
                             "ints representing where in the outputs the vmapped dimension should appear."
                             % (_name(func), out_dims))
    return flat


def _remove_batch_dims(func, out, out_dims, level, size):
    flat, spec = _pytree.flatten(out)
    dims = _flat_out_dims(func, out, out_dims, spec)
    result = []
    for x, d in zip(flat, dims):
        if d is None:
            if is_batched(x) and x._level == level:
                raise ValueError("vmap(%s, ...): `%s` can not return a BatchedTensor when out_dim is None"
                                 % (_name(func), _name(func)))
            result.append(x)
            continue
        if not isinstance(x, Tensor):
            raise ValueError("vmap(%s, ...): `%s` must only return Tensors, got type %s. Did you mean to set "
                             "out_dims= to None for output?" % (_name(func), _name(func), type(x)))
        v = move_out(x, level, size)  # (expanded where the output does not depend on the batch)
        n = v.dim()
        if not -n <= d < n:
            raise IndexError("Dimension out of range (expected to be in range of [%d, %d], but got %d)"
                             % (-n, n - 1, d))
        result.append(v.movedim(0, d) if d % n else v)
    return _pytree.unflatten(result, spec)


def missing_rules():
    """Entries without a batching rule (vmap runs them one sample at a time, with PyTorch's warning)."""
    return sorted(n for n in OPS if n not in RULES)
