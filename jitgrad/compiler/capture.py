"""Capture: run a function once with dispatch recording every table op into a Graph.

Values are numbered by the array they hold (saved tensors unpack to new Tensor objects around the
same array, so the VJP formulas' reads map back to the forward values). A tensor that no recorded
op made is an input (given by position) or an external (a parameter, a constant): the plan reads
externals live at each call. What needs a value in Python ends the graph (a graph break).
"""
import os
import sys

import numpy as np

from .._device import backend
from .._generator import generators
from .._grad_mode import STATE, enable_grad
from .._op import _plan, dispatch
from .._tensor import Tensor
from ..autograd import engine
from ..kernels.conv import KeptColumns
from ..optim.optimizer import Optimizer

_JITGRAD_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Unsupported(RuntimeError):
    """fullgraph=True and the function cannot be captured as one graph."""


class GraphBreak(Exception):
    """Raised inside the traced function to stop tracing at a graph break (fullgraph=True)."""


class Node:
    """One recorded op: the entry, its arguments (value numbers as Ref, or constants), params, results."""
    __slots__ = ("op", "args", "params", "outs", "cnp", "convert")

    def __init__(self, op, args, params, outs, cnp, convert):
        self.op, self.args, self.params, self.outs, self.cnp, self.convert = op, args, params, outs, cnp, convert

    def refs(self):
        return [a for a in self.args if a.__class__ is Ref] + [a for a in self.params.values() if a.__class__ is Ref]


class Ref(int):
    """A value number in a graph's arguments (an int subclass, so constants never look like one)."""
    __slots__ = ()

    def __repr__(self):
        return "v%d" % self


class Graph:
    """A trace: values (input, external, gradient placeholder, or op result) and the nodes in order."""

    def __init__(self, parent=None):
        self.parent = parent  # a backward graph reads its forward graph's values as inputs ("fwd", value)
        self.nodes = []
        self.arrays = []  # value -> the array it held while tracing (keeps ids unique while tracing)
        self.kinds = []  # value -> ("input", position) | ("ext", Tensor) | ("grad", k) | ("op", node index)
        self.by_id = {}  # id(array) -> value
        self.breaks = []  # (reason, "file:line")
        self.seen = []  # (version counter, version) of every tensor an op read, to detect in-place writes

    def value(self, t, kind=None):
        d = t._data
        v = self.by_id.get(id(d))
        if v is None or kind is not None:
            if kind is None:
                fv = self.parent.by_id.get(id(d)) if self.parent is not None else None
                kind = ("ext", t) if fv is None else ("fwd", fv)
            v = Ref(len(self.arrays))
            self.arrays.append(d)
            self.kinds.append(kind)
            self.by_id[id(d)] = v
        return v

    def add(self, array, kind):
        """A new value (for graphs built from other graphs: no lookup by array)."""
        v = Ref(len(self.arrays))
        self.arrays.append(array)
        self.kinds.append(kind)
        return v

    def meta(self, v):
        a = self.arrays[v]
        return a.shape, a.dtype


def _user_line():
    """'file:line' of the innermost frame outside jitgrad (where the user's code asked for the value)."""
    f = sys._getframe(1)
    while f is not None and os.path.abspath(f.f_code.co_filename).startswith(_JITGRAD_DIR):
        f = f.f_back
    return "%s:%d" % (f.f_code.co_filename, f.f_lineno) if f is not None else "<unknown>"


class Tracer:
    """Installed as STATE.capture while a function runs: records ops and graph breaks into ``graph``."""

    def __init__(self, fullgraph, graph=None):
        self.graph = Graph() if graph is None else graph
        self.fullgraph = fullgraph
        self.recording = True

    def __call__(self, op, args, params):
        STATE.capture = None
        try:
            out = dispatch(op, args, params)
        finally:
            STATE.capture = self
        if self.recording:
            self.record(op, args, params, out)
        return out

    def record(self, op, args, params, out):
        g = self.graph
        refs = []
        for a in args:
            if isinstance(a, Tensor):
                refs.append(g.value(a))
                g.seen.append((a._vc, a._vc[0]))
            else:
                refs.append(a)
        cnp, convert = _plan(op, args)[:2]  # (the plan also holds the eager fast path's output dtype and loop)
        outs = out if isinstance(out, tuple) else (out,)
        index = len(g.nodes)
        vals = tuple(g.value(o, ("op", index)) for o in outs)
        # a tensor among the params (max_pool's indices for its backward) is a value like the operands; a
        # KeptColumns (conv2d's im2col columns, handed from one call to its own weight gradient) belongs to
        # this one call: a plan holding it would keep its last input and columns alive between calls
        params = {k: (g.value(v) if isinstance(v, Tensor) else v) for k, v in params.items()
                  if v.__class__ is not KeptColumns}
        g.nodes.append(Node(op, tuple(refs), params, vals, cnp, convert))

    def graph_break(self, reason):
        where = _user_line()
        if self.fullgraph:
            raise Unsupported("fullgraph=True: %s at %s ends the graph (%s)" % (reason, where, _HINT))
        self.graph.breaks.append((reason, where))


_HINT = "compile the code after it separately, or use fullgraph=False to run it eagerly"

# Tensor methods that need a value in Python, and methods that write tensors or run the engine outside
# the op table: while tracing, each reports a graph break and then runs as usual.
_VALUE_METHODS = {"item": "Tensor.item()", "tolist": "Tensor.tolist()", "numpy": "Tensor.numpy()",
                  "__bool__": "bool(tensor)", "__float__": "float(tensor)", "__int__": "int(tensor)",
                  "__index__": "a tensor used as an index", "__array__": "a tensor converted to a NumPy array",
                  "backward": "Tensor.backward()", "__setitem__": "an in-place write (__setitem__)"}


def _inplace_methods():
    return [n for n in dir(Tensor) if n.endswith("_") and not n.startswith("_") and n != "requires_grad_"] + \
        [n for n in dir(Tensor) if n.startswith("__i") and n[3:-2] in ("add", "sub", "mul", "truediv", "pow", "and",
                                                                       "or", "xor", "floordiv", "mod")]


def _wrap_method(cls, name, reason):
    orig = cls.__dict__.get(name)
    if orig is None:
        return None

    def method(self, *args, **kwargs):
        tracer = STATE.capture
        if isinstance(tracer, Tracer):
            tracer.graph_break(reason)
            STATE.capture = None  # the rest runs eagerly: the graph ends here
            tracer.recording = False
        return orig(self, *args, **kwargs)
    method.__name__ = name
    setattr(cls, name, method)
    return orig


def trace(fn, args, kwargs, fullgraph, tensors):
    """Run ``fn(*args, **kwargs)`` recording its ops; ``tensors`` are its input tensors, in order.
    Returns (tracer, result)."""
    tracer = Tracer(fullgraph)
    for i, t in enumerate(tensors):
        if id(t._data) not in tracer.graph.by_id:
            tracer.graph.value(t, ("input", i))
    patched = []
    for name, reason in _VALUE_METHODS.items():
        patched.append((Tensor, name, _wrap_method(Tensor, name, reason)))
    for name in _inplace_methods():
        patched.append((Tensor, name, _wrap_method(Tensor, name, "an in-place op (Tensor.%s)" % name)))
    for cls in _subclasses(Optimizer):
        for name in ("step", "zero_grad"):
            patched.append((cls, name, _wrap_method(cls, name, "optimizer.%s()" % name)))
    # every generator's stream as it was: a draw from any of them (the default one, or one passed as
    # generator=) would be frozen into the graph
    rngs = [(gen, gen._np, gen._np.bit_generator.state) for gen in generators()]
    prev = STATE.capture
    STATE.capture = tracer
    try:
        result = fn(*args, **kwargs)
    finally:
        STATE.capture = prev
        for cls, name, orig in patched:
            if orig is not None:
                setattr(cls, name, orig)
    g = tracer.graph
    drawn = [(rng, state) for gen, rng, state in rngs if gen._np is not rng or rng.bit_generator.state != state]
    if drawn:
        for rng, state in drawn:  # the call runs again, eagerly: it draws what it would have drawn untraced
            rng.bit_generator.state = state
        tracer.recording = False
        if fullgraph:
            raise Unsupported("fullgraph=True: the function draws random numbers (dropout, rand), which the compiled "
                              "graph would freeze")
        g.breaks.append(("random numbers drawn (dropout, rand)", "<function>"))
    if any(vc[0] != v for vc, v in g.seen):
        if fullgraph:
            raise Unsupported("fullgraph=True: a tensor the graph reads was modified in place outside the op table")
        g.breaks.append(("a tensor the graph reads was modified in place", "<function>"))
    return tracer, result


def _subclasses(cls):
    out = [cls]
    for c in cls.__subclasses__():
        out += _subclasses(c)
    return out


def trace_backward(graph, outs, leaves):
    """Record the gradients of forward tensors ``outs`` with respect to ``leaves`` as a graph over the
    forward graph's values and one gradient placeholder per output. Returns (graph, grad value per leaf)."""
    bg = Graph(graph)
    placeholders = []
    for k, o in enumerate(outs):
        d = o._data
        gk = Tensor._wrap(backend(d).full(d.shape, 1, d.dtype))  # a fresh array on the output's device: its own value
        bg.value(gk, ("grad", k))
        placeholders.append(gk)
    tracer = Tracer(True, bg)
    prev = STATE.capture
    STATE.capture = tracer
    hooks = [(t, t._hooks) for t in leaves]  # a parameter's own hooks belong to real backward passes only
    for t in leaves:
        t._hooks = None
    try:
        with enable_grad():
            grads = engine.grad(outs, leaves, placeholders, retain_graph=True, create_graph=True, allow_unused=True)
    finally:
        STATE.capture = prev
        for t, h in hooks:
            t._hooks = h
    return bg, [None if gr is None else bg.value(gr) for gr in grads]
