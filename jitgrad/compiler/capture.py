"""Capture: run a function once with dispatch recording every table op into a Graph.

Values are numbered by the array they hold (saved tensors unpack to new Tensor objects around the
same array, so the VJP formulas' reads map back to the forward values). A tensor that no recorded
op made is an input (given by position) or an external (a parameter, a constant): the plan reads
externals live at each call. What needs a value in Python ends the graph (a graph break).

A training step's side effects are captured without running them: ``loss.backward()`` becomes a
backward graph (the VJP formulas' trace) whose gradients the plan accumulates into the leaves'
``.grad``, and ``optimizer.zero_grad()`` / ``optimizer.step()`` / ``module.zero_grad()`` /
``lr_scheduler.step()`` become effects the plan calls in order. A side effect the trace cannot
capture (an in-place write, a ``.grad`` access, ``backward(create_graph=True)``, hooks) stops the
trace at once, before it runs, so the eager rerun of the call is the only one to apply it. The code
concerned tells the tracer of all of these itself (jitgrad/_trace_hooks.py): tracing changes no class.

Function transforms are captured whole: dispatch hands the tracer the ops vmap's batching rules and forward
AD's JVPs make (so the graph holds the physical batch's ops and the tangents'), and an ``autograd.grad``
inside the function (grad's, vjp's, jacrev's, a JVP's transpose) runs its VJP formulas as table ops into
the same graph (``backward_pass``).
"""
import os
import sys
import threading

from .._device import backend, may_share_memory
from .._graph import SEQUENCE, AccumulateGrad
from .._grad_mode import STATE, enable_grad
from .._op import _plan, dispatch
from .._tensor import Tensor
from .._trace_hooks import NOT_CAPTURED
from ..autograd import engine
from ..kernels import config
from .ir import DerivedArray, Graph, Node

_JITGRAD_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Unsupported(RuntimeError):
    """fullgraph=True and the function cannot be captured as one graph."""


class GraphBreak(Exception):
    """Raised inside the traced function to stop tracing at a graph break (fullgraph=True)."""


class _Stop(BaseException):
    """Raised inside the traced function at a side effect the trace cannot capture, before it runs: the
    call then runs eagerly from the start, so the effect is applied once. (A BaseException: the
    function's own ``except Exception`` must not swallow it.)"""


BACKWARD = "backward"  # the effect kind of a captured loss.backward()


def _user_line():
    """'file:line' of the innermost frame outside jitgrad (where the user's code asked for the value)."""
    f = sys._getframe(1)
    while f is not None and os.path.abspath(f.f_code.co_filename).startswith(_JITGRAD_DIR):
        f = f.f_back
    return "%s:%d" % (f.f_code.co_filename, f.f_lineno) if f is not None else "<unknown>"


# Serial traces (trace_backward, compiled autograd) run the kernels' serial builds by raising the process's
# parallel threshold. Traces in several threads at once share one count, so that the last to finish restores
# the threshold the first one found (saving and restoring per trace would leave another trace's value behind).
_SERIAL = {"depth": 0, "threshold": None}
_SERIAL_LOCK = threading.Lock()


def _serial_enter():
    with _SERIAL_LOCK:
        if not _SERIAL["depth"]:
            _SERIAL["threshold"] = config.PARALLEL_THRESHOLD
            config.PARALLEL_THRESHOLD = sys.maxsize
        _SERIAL["depth"] += 1


def _serial_exit():
    with _SERIAL_LOCK:
        _SERIAL["depth"] -= 1
        if not _SERIAL["depth"]:
            config.PARALLEL_THRESHOLD = _SERIAL["threshold"]


class Tracer:
    """Installed as STATE.capture while a function runs: records ops and graph breaks into ``graph``."""

    def __init__(self, fullgraph, graph=None, serial=False, fused_vjps=False):
        self.graph = Graph() if graph is None else graph
        self.fullgraph = fullgraph
        self.serial = serial  # run the ops on the CPU kernels' serial builds (see trace_backward)
        self.recording = True
        # a training step's side effects, in call order
        self.effects = []  # (ops recorded before it, kind, owner, callable or None for backward, args, kwargs)
        self.backward = None  # (loss value, gradient value or None, leaf tensors, backward graph, grad values)
        self.updated = []  # arrays of the parameters a step after the first op updates (later ops must not read them)
        self.first_node = next(SEQUENCE)  # autograd nodes made before the trace belong to another graph
        self.active = False  # while the traced function runs (the hooks act only then)
        self.drawn = {}  # generator -> its state before the trace drew from it
        self.made = []  # the tensors each recorded node returned
        # whether the graph ends at a value read (item(), bool(t), ...) and nothing else breaks it: then the
        # graph before the read can be compiled and the function run on from there (replay.py)
        self.read_break = False
        # a traced backward: an entry's fused VJP kernel is one node, as eager runs it (see trace_backward)
        self.fused_vjps = fused_vjps

    def __call__(self, op, args, params):
        if self.recording and op.value_shaped is not None and op.value_shaped(params):
            self.graph_break("%s, whose result's shape depends on its operands' values" % op.name, read=True)
            self.recording = False  # the rest runs eagerly
        STATE.capture = None
        if self.serial:
            _serial_enter()
        try:
            out = dispatch(op, args, params)
        finally:
            STATE.capture = self
            if self.serial:
                _serial_exit()
        if self.recording:
            try:
                self.record(op, args, params, out)
            except DerivedArray:
                reason = "%s given an array computed from a tensor's data outside the op table" % op.name
                self.recording = False  # the rest runs eagerly
                if self.graph.parent is not None:  # a traced backward: its callers run the function eagerly
                    self.graph.breaks.append((reason + " (in a VJP formula)", "<backward>"))
                else:
                    self.graph_break(reason, read=True)
        return out

    def record(self, op, args, params, out):
        g = self.graph
        if self.updated:
            self._check_after_step(args, params)
        refs = []
        for a in args:
            if isinstance(a, Tensor):
                refs.append(g.value(a))
                g.seen.append((a._vc, a._vc[0]))
            else:
                refs.append(a)
        plan = _plan(op, args)
        cnp, convert = plan.compute, plan.convert
        outs = out if isinstance(out, tuple) else (out,)
        # a tensor among the params (max_pool's indices for its backward, nll_loss's target) is a value like
        # the operands, and so is an array of a value inside one (an index key's index tensors and masks)
        params = {k: g.param(v) for k, v in params.items()}
        index = len(g.nodes)
        vals = tuple(g.value(o, ("op", index)) for o in outs)
        g.nodes.append(Node(op, tuple(refs), params, vals, cnp, convert))
        self.made.append(outs)

    def graph_break(self, reason, read=False):
        where = _user_line()
        if self.fullgraph:
            raise Unsupported("fullgraph=True: %s at %s ends the graph (%s)" % (reason, where, _HINT))
        if not self.graph.breaks:
            self.read_break = read
        self.graph.breaks.append((reason, where))

    def stop(self, reason):
        """A graph break at a side effect: the trace ends here, before the effect runs."""
        self.graph_break(reason)
        self.recording = False
        raise _Stop()

    def _check_after_step(self, args, params):
        """Every op runs in the forward plan, before the step effects: after a mid-function step() an op
        must not read the parameters it updated (it would see them before the update)."""
        for a in list(args) + list(params.values()):
            if isinstance(a, Tensor) and any(may_share_memory(a._data, u) for u in self.updated):
                self.stop("an op after optimizer.step() that reads a parameter it updated")

    # ------------------------------------------------------------- what the code it runs tells it (_trace_hooks)
    def value_read(self, what):
        """A value read in Python: a graph break, after which the function goes on eagerly."""
        if self.active and self.recording:
            self.graph_break(what, read=True)
            self.recording = False  # the rest runs eagerly: the graph ends here

    def side_effect(self, what):
        if self.active:
            self.stop(what)

    def backward_pass(self, roots, accumulate_leaves):
        """The engine runs a backward pass inside the traced function (a function transform's autograd.grad:
        grad, vjp, jacrev, hessian, a JVP's transpose): True where its ops are recorded into the graph like the
        forward's. A pass into ``.grad`` (autograd.backward), through hooks or into a graph built outside the
        trace stops the trace; the traced backward's own tracer (not active) records as it always does."""
        if not self.active:
            return False
        if not self.recording or accumulate_leaves:
            self.stop("autograd.backward() or autograd.grad()")
        seen, stack = set(), [e[0] for e, _ in roots if e is not None]
        while stack:
            node = stack.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            if node._hooked or node.__class__ is AccumulateGrad and node.variable._hooks:
                self.stop("autograd.grad() through a tensor with hooks or retain_grad()")
            if node.__class__ is AccumulateGrad:
                continue
            if node._seq < self.first_node:
                self.stop("autograd.grad() into a graph built outside the compiled function")
            stack += [e[0] for e in node.next_functions if e[0] is not None]
        return True

    def random_draw(self, gen):
        """A draw from (or seed of) ``gen``: its stream as it was before the trace's first, put back after it
        (a graph would freeze the draws, the default generator's or one passed as generator=)."""
        if self.active and gen not in self.drawn:
            self.drawn[gen] = gen._np.bit_generator.state

    def step_call(self, kind, owner, fn, args, kwargs):
        """A training step's call: recorded for the plan to make (None returned for it), or NOT_CAPTURED."""
        if kind.startswith("optimizer."):
            return None if self.optimizer_call(owner, kind[10:], args[0]) else NOT_CAPTURED
        if not self.active:
            return NOT_CAPTURED  # the backward graph's tracer
        if not self.recording:
            self.stop(_STEP_CALLS[kind])
        if kind == "backward":
            self.capture_backward(owner, *args, **kwargs)
        else:  # module.zero_grad(), lr_scheduler.step()
            self.effect(kind, owner, fn, (owner,) + tuple(args), kwargs)
        return None

    # ------------------------------------------------------------- training-step effects
    def effect(self, kind, owner, fn, args, kwargs):
        """Record a call ``fn(*args, **kwargs)`` (``owner``'s ``kind``: zero_grad, step) that the plan makes at
        run time, in the function's order."""
        self.effects.append((len(self.graph.nodes), kind, owner, fn, args, kwargs))

    def optimizer_call(self, opt, name, arg):
        """The capture hook of ``Optimizer.step(closure)`` and ``Optimizer.zero_grad(set_to_none)``
        (optim/optimizer.py calls it while a trace runs, however the method was reached: through an
        lr scheduler's wrapper of ``step`` too). True where the call is captured, not to be run."""
        if not self.active:
            return False  # the backward graph's tracer
        if not self.recording:
            self.stop("optimizer.%s()" % name)
        if name == "zero_grad":
            self.effect("zero_grad", opt, _zero_grad, (opt, arg), {})
            return True
        if arg is not None:
            self.stop("optimizer.step(closure)")
        if self.graph.nodes:  # a step after ops: they read the parameters before it, later ops must not
            self.updated += [p._data for group in opt.param_groups for p in group["params"]]
        self.effect("step", opt, _step, (opt,), {})
        return True

    def capture_backward(self, loss, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        """``loss.backward()``: the gradients of the leaves as a backward graph, accumulated by the plan."""
        g = self.graph
        if create_graph or retain_graph or inputs is not None:
            self.stop("Tensor.backward(%s)" % ("create_graph=True" if create_graph else "retain_graph=True"
                                               if retain_graph else "inputs=..."))
        if self.backward is not None:
            self.stop("a second Tensor.backward()")
        if any(e[1] == "step" and e[0] > 0 for e in self.effects):
            self.stop("Tensor.backward() after optimizer.step()")
        lv = g.by_id.get(id(loss._data))
        if lv is None or g.kinds[lv][0] != "op" or loss.grad_fn is None:
            self.stop("Tensor.backward() of a tensor the compiled function did not compute")
        if gradient is None:
            if loss._data.size != 1:
                self.stop("Tensor.backward() of a non-scalar without a gradient")
            gv = None
        elif isinstance(gradient, Tensor) and gradient.shape == loss.shape and gradient.dtype is loss.dtype:
            gv = g.value(gradient)
        else:
            self.stop("Tensor.backward(gradient) with a gradient of another shape or type")
        leaves = self._leaves(loss)
        bg, grads = trace_backward(g, [loss], leaves)
        if bg.breaks:
            self.stop(bg.breaks[0][0])
        self.backward = (lv, gv, leaves, bg, grads)
        self.effects.append((len(g.nodes), BACKWARD, None, None, (), {}))

    def _leaves(self, loss):
        """The leaves backward() would accumulate into; hooks and graphs from outside the trace stop it."""
        g = self.graph
        seen, stack, leaves = set(), [loss.grad_fn], []
        while stack:
            node = stack.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            if node.__class__ is AccumulateGrad:
                t = node.variable
                v = g.by_id.get(id(t._data))
                if t._hooks or node._post_acc_hooks:
                    self.stop("Tensor.backward() into a leaf with hooks")
                if v is None or g.kinds[v][0] not in ("input", "ext"):
                    self.stop("Tensor.backward() into a leaf the compiled function does not read")
                leaves.append(t)
                continue
            if node._hooked:
                self.stop("Tensor.backward() through a tensor with hooks or retain_grad()")
            if node._seq < self.first_node:
                self.stop("Tensor.backward() into a graph built outside the compiled function")
            stack += [e[0] for e in node.next_functions if e[0] is not None]
        return leaves


_HINT = "compile the code after it separately, or use fullgraph=False to run it eagerly"
_STEP_CALLS = {"backward": "Tensor.backward()", "zero_grad": "module.zero_grad()",
               "lr_scheduler.step": "lr_scheduler.step()"}
def _step(opt):
    opt.step()  # looked up at each call: an lr scheduler's wrapper of step (made after the trace too) runs


def _zero_grad(opt, set_to_none):
    opt.zero_grad(set_to_none)


def trace(fn, args, kwargs, fullgraph, tensors, tracer=None):
    """Run ``fn(*args, **kwargs)`` recording its ops; ``tensors`` are its input tensors, in order.
    Returns (tracer, result). (``tracer``: a Tracer of the caller's own, jitgrad.onnx's.)"""
    tracer = Tracer(fullgraph) if tracer is None else tracer
    for i, t in enumerate(tensors):
        if id(t._data) not in tracer.graph.by_id:
            tracer.graph.value(t, ("input", i))
    prev = STATE.capture
    STATE.capture = tracer
    tracer.active = True
    result = None
    try:
        result = fn(*args, **kwargs)
    except _Stop:
        pass  # the break is recorded: the call runs eagerly
    finally:
        tracer.active = False
        STATE.capture = prev
    g = tracer.graph
    if tracer.drawn:
        for gen, state in tracer.drawn.items():  # the call runs again, eagerly: it draws what it would have drawn
            gen._np.bit_generator.state = state
        tracer.recording = False
        if fullgraph:
            raise Unsupported("fullgraph=True: the function draws random numbers (dropout, rand), which the compiled "
                              "graph would freeze")
        g.breaks.insert(0, ("random numbers drawn (dropout, rand)", "<function>"))  # (the cause of any read after)
        tracer.read_break = False
    if any(vc[0] != v for vc, v in g.seen):
        if fullgraph:
            raise Unsupported("fullgraph=True: a tensor the graph reads was modified in place outside the op table")
        g.breaks.append(("a tensor the graph reads was modified in place", "<function>"))
        tracer.read_break = False
    return tracer, result


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
    # The VJP formulas' elementwise ops fuse into the plan's own loops: their values here come from the
    # kernels' serial builds, whose compile costs a fraction of a parallel build's that only this trace would use
    tracer = Tracer(True, bg, serial=True, fused_vjps=True)
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
    grads = [None if gr is None else bg.value(gr) for gr in grads]
    # a tensor the backward reads that is no forward value was made by the formulas (zeros for an output that
    # got no gradient): a constant of the graph, which no caller holds
    bg.kinds = [("const", k[1]) if k[0] == "ext" else k for k in bg.kinds]
    return bg, grads
