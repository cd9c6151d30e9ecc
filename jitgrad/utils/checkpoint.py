"""Activation checkpointing: trade compute for memory.

``checkpoint(fn, *args)`` runs ``fn`` keeping none of the tensors its ops save for backward:
inside it, a pair of saved-tensor hooks packs each one as its position in the save order (an
int). The first time backward unpacks one, ``fn`` runs again on the same inputs (with grad
enabled, the random state as it was, the same hooks order) and the tensors it saves this time
are handed out by position. The recomputed graph is thrown away; the values are checked against
the shapes and dtypes saved the first time.

Only the non-reentrant variant exists (``use_reentrant=False``, PyTorch's recommended one; it is
also what ``use_reentrant=None`` means here). Unlike the reentrant one it works with
``autograd.grad``, ``backward(inputs=...)``, keyword arguments and double backward.

    from jitgrad.utils.checkpoint import checkpoint
    h = checkpoint(block, x, use_reentrant=False)

``jitgrad.utils.checkpoint(block, x)`` (the module called as a function) is the same call.
"""
import contextlib
import sys
import types

from .._factories import generator
from .._grad_mode import enable_grad
from ..autograd.graph import saved_tensors_hooks

__all__ = ["checkpoint", "checkpoint_sequential", "CheckpointError"]


class CheckpointError(RuntimeError):
    pass


def noop_context_fn():
    return contextlib.nullcontext(), contextlib.nullcontext()


class _Frame:
    """One checkpointed call: what backward needs to run it again, and the recomputed values."""

    def __init__(self, function, args, kwargs, rng_state, recompute_context, check):
        self.function, self.args, self.kwargs = function, args, kwargs
        self.rng_state = rng_state
        self.recompute_context = recompute_context
        self.check = check
        self.metadata = []  # (shape, dtype) of each tensor saved by the first run, in save order
        self.values = None  # the same tensors from the recomputation

    def pack(self, t):
        self.metadata.append((tuple(t.shape), t.dtype))
        return len(self.metadata) - 1

    def unpack(self, index):
        if self.values is None:
            self.values = self._recompute()
        return self.values[index]

    def _recompute(self):
        values = []

        def keep(t):
            values.append(t)
            return t

        # the recomputed graph keeps its saved tensors too: a double backward (create_graph) runs through it
        with _rng_as(self.rng_state), enable_grad(), self.recompute_context, saved_tensors_hooks(keep, _same):
            self.function(*self.args, **self.kwargs)
        if self.check:
            self._check(values)
        return values

    def _check(self, values):
        if len(values) != len(self.metadata):
            raise CheckpointError(
                "jitgrad.utils.checkpoint: A different number of tensors was saved during the original forward and "
                "recomputation.\nNumber of tensors saved during forward: %d\nNumber of tensors saved during "
                "recomputation: %d." % (len(self.metadata), len(values)))
        wrong = ""
        for i, (meta, t) in enumerate(zip(self.metadata, values)):
            again = (tuple(t.shape), t.dtype)
            if again != meta:
                wrong += ("tensor at position %d:\nsaved metadata: {'shape': %s, 'dtype': %s}\nrecomputed metadata: "
                          "{'shape': %s, 'dtype': %s}\n" % (i, meta[0], meta[1], again[0], again[1]))
        if wrong:
            raise CheckpointError("jitgrad.utils.checkpoint: Recomputed values for the following tensors have "
                                  "different metadata than during the forward pass.\n%s." % wrong)


def _same(t):
    return t


class _rng_as:
    """Run a block with jitgrad's generator in a given state, then put the current state back."""

    def __init__(self, state):
        self.state = state

    def __enter__(self):
        if self.state is not None:
            self.gen = generator()
            self.current = self.gen.bit_generator.state
            self.gen.bit_generator.state = self.state

    def __exit__(self, *exc):
        if self.state is not None:
            self.gen.bit_generator.state = self.current


def checkpoint(function, *args, use_reentrant=None, context_fn=noop_context_fn, determinism_check="default",
               debug=False, early_stop=True, preserve_rng_state=True, **kwargs):
    """``function(*args, **kwargs)``, without keeping its activations: backward recomputes them.

    ``preserve_rng_state`` replays jitgrad's random state (dropout) in the recomputation;
    ``context_fn`` returns two context managers, for the forward and for the recomputation;
    ``determinism_check="none"`` skips the shape/dtype check of recomputed values. The whole
    function is always recomputed (``early_stop`` changes nothing but speed in PyTorch).
    """
    if use_reentrant:
        raise ValueError("jitgrad.utils.checkpoint implements use_reentrant=False only (recomputation through "
                         "saved tensor hooks); pass use_reentrant=False")
    if determinism_check not in ("default", "none"):
        raise ValueError("determinism_check should be one of ['default', 'none'], but got %s" % determinism_check)
    if debug:
        raise NotImplementedError("jitgrad.utils.checkpoint has no debug mode")
    forward_context, recompute_context = context_fn()
    rng_state = generator().bit_generator.state if preserve_rng_state else None
    frame = _Frame(function, args, kwargs, rng_state, recompute_context, determinism_check == "default")
    with forward_context, saved_tensors_hooks(frame.pack, frame.unpack):
        return function(*args, **kwargs)


def checkpoint_sequential(functions, segments, input, use_reentrant=None, **kwargs):
    """Run ``functions`` (a list or a Sequential) in ``segments`` chunks, checkpointing all but the last."""
    if use_reentrant:
        raise ValueError("jitgrad.utils.checkpoint implements use_reentrant=False only; pass use_reentrant=False")
    functions = list(functions.children()) if hasattr(functions, "children") else list(functions)
    size = len(functions) // segments

    def run(start, end):
        def forward(x):
            for f in functions[start:end + 1]:
                x = f(x)
            return x
        return forward

    end = -1
    for start in range(0, size * (segments - 1), size):
        end = start + size - 1
        input = checkpoint(run(start, end), input, use_reentrant=False, **kwargs)
    return run(end + 1, len(functions) - 1)(input)


class _CallableModule(types.ModuleType):
    """``jitgrad.utils.checkpoint(fn, *args)`` works as well as ``jitgrad.utils.checkpoint.checkpoint``."""

    def __call__(self, function, *args, **kwargs):
        return checkpoint(function, *args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
