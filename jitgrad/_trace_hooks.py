"""What a jitgrad.compile trace must hear of beyond the table's ops, told by the code it concerns.

A value read in Python (``item()``, ``bool(t)``), a side effect the trace cannot capture (an in-place
write, a ``.grad`` access, the engine called directly), and a training step's calls (``backward()``,
``zero_grad()``, a scheduler's ``step()``) each call this thread's tracer (``STATE.capture``, which
dispatch clears while an op runs). Tracing changes no class, and other threads see nothing of it.
Random draws tell it too, before they change a generator's state, and the engine of a backward pass run
inside the traced function (a function transform's ``autograd.grad``), which the trace records. A tracer
answers ``value_read(what)``, ``side_effect(what)``, ``step_call(kind, owner, fn, args, kwargs)``,
``random_draw(generator)`` and ``backward_pass(roots, accumulate_leaves)``.
"""
from ._grad_mode import SPECIAL, STATE

NOT_CAPTURED = object()  # step_call's answer where the call runs as usual


class ValueUnavailable(RuntimeError):
    """A tensor's values cannot be read in Python here (inside vmap, a batched tensor's): code whose value
    check PyTorch skips under such a transform catches it and skips the check."""


def value_read(what):
    """A tensor's values are read in Python: the trace's graph ends here, the rest runs eagerly."""
    if SPECIAL[0]:
        tracer = STATE.capture
        if tracer is not None:
            tracer.value_read(what)


def side_effect(what):
    """An effect the trace cannot capture: the trace stops before it runs (the call then runs eagerly)."""
    if SPECIAL[0]:
        tracer = STATE.capture
        if tracer is not None:
            tracer.side_effect(what)


def step_call(kind, owner, fn, args, kwargs):
    """A training step's call ``fn(owner, *args, **kwargs)``: what the trace returns for it where it records
    the call for its plan to make, else NOT_CAPTURED."""
    if SPECIAL[0]:
        tracer = STATE.capture
        if tracer is not None:
            return tracer.step_call(kind, owner, fn, args, kwargs)
    return NOT_CAPTURED


def backward_pass(roots, accumulate_leaves):
    """The engine is about to run the graph below ``roots`` [(edge, grad)]: True where a trace records the pass's
    ops into its graph (the engine then runs the VJP formulas as table ops); the trace stops where it cannot."""
    if SPECIAL[0]:
        tracer = STATE.capture
        if tracer is not None:
            return tracer.backward_pass(roots, accumulate_leaves)
    return False


def random_draw(generator):
    """``generator``'s state is about to change (a draw, a seed): a trace notes the state to put back, and
    runs the call eagerly (a graph would freeze the draws)."""
    if SPECIAL[0]:
        tracer = STATE.capture
        if tracer is not None:
            tracer.random_draw(generator)
