"""Compiled autograd: eager ``backward()`` / ``autograd.grad`` of a graph seen before runs a compiled plan.

A training loop records the same graph every step. Each node carries a structural key built as dispatch records
it (``Node._key``: _op_node.recorder), so the engine (autograd/engine.py ``run``), handing each backward without
``create_graph`` to ``run_compiled`` here, finds the graph's key from its roots in O(1) (``_graph_key``). Until
``threshold`` distinct graphs have had that key (2 by default; a backward repeated on one graph counts once),
the engine runs them and nothing more happens. Past it, ``run_compiled`` walks the graph once (breadth first
from the roots, a deterministic order):

- it builds the graph's **full key**: per node its entry, non-tensor params and saved scalars, the
  shapes, dtypes, device class and contiguity of its saved arrays and tensor params, the metadata of the
  gradients it returns, and the positions of the nodes it points to (so sharing in the DAG is part of the
  key), plus the roots' gradients, the targets' positions and which collected arrays are one array;
- it collects, in that order, **every array the backward reads** (saved tensors, tensor params, the arrays
  inside index keys) from the graph it is about to run, and checks that the graph may run as a plan.

The plan of a full key is built when it is first met past the threshold: the engine's
own backward runs once more under the compiler's tracer (capture.Tracer, with create_graph: the VJP
formulas and the entries' fused VJP ops recorded as a graph whose inputs are the collected arrays and the
roots' gradients), which the compiler lowers as it lowers ``jitgrad.compile``'s backward (compile_plan:
the tape interpreter for small graphs, fused loops otherwise). A plan is a function of arrays: each run
passes the arrays just collected, so it never reads a value of the graph it was built from. Its results
go into ``.grad`` as AccumulateGrad puts them (under the leaf's lock, stolen where the plan owns the
array), or back to ``autograd.grad`` / ``backward(inputs=...)``; saved tensors are freed unless
``retain_graph``, for exactly the nodes the eager engine would have run.

**The one eager branch.** ``_why_eager`` (what the whole backward sees) and ``graph_walk.walk`` (each node) send a
backward to the node-by-node engine, which then gives PyTorch's semantics itself, where the graph holds
something a plan does not express: a node other than a table op's (custom ``autograd.Function``,
CopySlices of an in-place write into a view, a compiled region) or a leaf's; any tensor, node, retain_grad
or post-accumulate hook; saved-tensor hooks; a saved tensor modified in place or freed (the engine raises
PyTorch's error); anomaly mode, a trace, vmap, forward AD or autocast active; float16, bfloat16 or complex
values; arrays on more than one device; nodes from which no leaf is reached. A plan that fails to build
(the trace needs a value in Python, the lowering fails) marks its key eager for good; none of it is an
error. ``jit_stats()["compiled_autograd"]`` counts plans built, hits, misses and each fallback's reason.
"""
import sys
import threading
import time

import numpy as np

from .._device import Device
from .._graph import AccumulateGrad, accumulate_into
from .._grad_mode import SPECIAL, STATE, enable_grad
from .._jit_stats import AUTOGRAD
from .._op_node import _MISSING, FusedCall
from .._saved import SavedTensor
from .._tensor import Tensor
from ..autograd import engine
from ..kernels import config
from .capture import Tracer
from .ir import Graph, Held, Ref
from .codegen import generate
from .graph_walk import MISSES, Eager, make_walker, walk
from .tape import tape_plan

SETTINGS = engine.SETTINGS  # enabled, threshold (autograd/engine.py: the switch and its environment variable)
MAX_KEYS = 4096  # keys remembered (seen counts and plans); past it the oldest half is forgotten
# graph key (_graph_key) -> (distinct graphs seen, the last one's root _seq) below the threshold, _Seen past it,
# or the reason its graphs run eagerly (a str); a backward repeated on one graph (as gradcheck runs) counts once
_hints = {}
_plans = {}  # full key (graph_walk.walk) -> Plan, or the reason it could not be built (a str)
_lock = threading.Lock()


def reset():
    """Forget every key and plan (the counters stay)."""
    with _lock:
        _hints.clear()
        _plans.clear()


def _fallback(reason):
    AUTOGRAD["fallbacks"] += 1
    reasons = AUTOGRAD["fallback_reasons"]
    reasons[reason] = reasons.get(reason, 0) + 1
    return None


def _why_eager(roots, targets):
    if SPECIAL[0] and STATE._special():
        return ("anomaly mode" if STATE.anomaly else "inside a jitgrad.compile trace" if STATE.capture is not None
                else "vmap, forward AD, autocast or inference mode active")
    for e, g in roots:
        if e is None or e[0].__class__ is AccumulateGrad:
            return "a root that is a leaf"
        if getattr(g, "_level", 0) or g.__class__ is not Tensor:
            return "a batched or subclassed gradient"
    return None


class Plan:
    """A compiled backward: ``fn(*arrays)`` from the arguments ``sources`` name -> one array per result."""

    def __init__(self, fn, sources, results, ran, seconds, size):
        self.fn = fn
        # (roots, collected arrays) -> fn's arguments, from ``sources``: per argument (0, root k) | (1, collected
        # array k) | (2, constant array)
        self.gather = _gatherer(sources)
        self.results = results  # per target: (position in fn's results, plan owns the array) or None
        self.ran = ran  # positions of the nodes the eager engine runs (freed after, without retain_graph)
        self.seconds = seconds
        self.size = size  # nodes of the backward graph
        self.traced = None  # the gradients the trace computed, for the backward that built the plan (run_compiled)


def _gatherer(sources):
    """A function ``(roots, arrays) -> fn's arguments`` generated from ``sources`` (one tuple display)."""
    consts = {}
    items = []
    for s, k in sources:
        if s == 0:
            items.append("roots[%d][1]._data" % k)
        elif s == 1:
            items.append("arrays[%d]" % k)
        else:
            items.append("c%d" % len(consts))
            consts[items[-1]] = k
    exec("def gather(roots, arrays):\n return (%s)\n" % "".join(x + ", " for x in items), consts)
    return consts["gather"]


def _build(roots, targets, arrays, nodes, leaves, accumulate):
    """Trace the engine's backward of this graph into a compiler graph and lower it; a Plan, or a reason."""
    start = time.perf_counter()
    parent = Graph()
    fwd = {}  # forward value -> collected position
    for k, a in enumerate(arrays):
        if id(a) not in parent.by_id:
            fwd[parent.value(Tensor._wrap(a), ("input", k))] = k
    bg = Graph(parent)
    placeholders = []
    for k, (e, g) in enumerate(roots):
        gk = g._owned_copy()  # (an array of its own, on g's device: the value is the gradient placeholder k)
        bg.value(gk, ("grad", k))
        placeholders.append((e, gk))
    tvars = targets if targets is not None else [nodes[i].variable for i in leaves]
    ran = []
    # the trace runs the kernels the engine runs (the plan calls them too, unless it fuses loops, whose kernels' serial
    # builds cost less to compile): its gradients are the engine's, and the backward that builds a plan returns them
    tracer = Tracer(True, bg, serial=SETTINGS["fuse"], fused_vjps=True)
    tracer.fused_functions = True  # (a node's fused VJP functions, softmax's to an RNN layer's: one call)
    prev = STATE.capture
    STATE.capture = tracer
    try:
        with enable_grad():
            grads = engine.run(placeholders, True, True, targets=tvars, accumulate_leaves=False, ran=ran)
    except Exception as exc:  # (the tracer's Unsupported at a value read, or any failure of a formula)
        return "trace failed: %s" % type(exc).__name__
    finally:
        STATE.capture = prev
    if bg.breaks:
        return "trace: " + bg.breaks[0][0]
    for n in bg.nodes:  # a value a formula made in Python from the graph's values would be frozen into the plan
        for p in n.params.values():
            if _frozen(p):
                return "a value a backward formula made in Python (%s), a param of %s" % (type(p).__name__, n.op.name)
    at = {id(n): i for i, n in enumerate(nodes)}
    ran = sorted(at[id(n)] for n in ran)
    if accumulate and len(ran) + len(leaves) != len(nodes):
        return "nodes from which no leaf is reached"
    outs = []
    results = []
    for gr in grads:
        if gr is None:
            results.append(None)
            continue
        v = bg.value(gr)
        results.append(len(outs))
        outs.append(v)
    if not outs:
        return "no gradient"
    try:
        # fuse=False: a tape (one instruction per op, each the eager kernel's scalar function on the same operands)
        # or generated code calling each op's kernel: the engine's results to the last bit. fuse=True: fused loops
        # (fewer passes over memory; last-bit differences where a loop contracts a multiply and an add of two ops)
        plan = (tape_plan(bg, outs, "backward") or generate(bg, outs, SETTINGS["fuse"], "backward"))
    except Exception as exc:
        return "lowering failed: %s" % type(exc).__name__
    sources = []
    for v in plan.boundary:
        kind = bg.kinds[v]
        if kind[0] == "grad":
            sources.append((0, kind[1]))
        elif kind[0] == "fwd":
            sources.append((1, fwd[kind[1]]))
        elif kind[0] == "ext":  # a constant a formula made (zeros of a shape): part of the structure
            sources.append((2, kind[1]._data))
        else:
            return "a plan argument of kind %s" % kind[0]
    # per target: (result position, whether the plan owns the array, the root whose gradient it is or None)
    owned = {v for v, k in enumerate(bg.kinds) if k[0] == "op"}
    results = [None if r is None else (r, outs[r] in owned and outs.count(outs[r]) == 1,
                                       bg.kinds[outs[r]][1] if bg.kinds[outs[r]][0] == "grad" else None)
               for r in results]
    seconds = time.perf_counter() - start
    if config.LOG_COMPILES:
        print("jitgrad: autograd plan built (%d nodes, %d backward ops, %s) in %.3f s"
              % (len(nodes), len(bg.nodes), "tape" if plan.instructions else "%d fused groups" % len(plan.groups),
                 seconds), file=sys.stderr, flush=True)
    built = Plan(plan.fn, sources, results, ran, seconds, len(bg.nodes))
    built.traced = [bg.arrays[v] for v in outs]
    return built


_CONSTANTS = frozenset((int, float, bool, str, type(None), type(Ellipsis), np.dtype, Device))


def _frozen(x):
    """Whether a traced param may hold a value of the graph it was traced from: anything but a value's Ref (a Held's
    arrays are Refs) and constants of known types (the structure's shapes, dims and flags, which the full key holds).
    An array no value holds, or an object of another type, refuses the plan: it cannot be proven to be a constant."""
    c = x.__class__
    if c is Ref or c in _CONSTANTS or isinstance(x, np.generic) or c.__module__ == "jitgrad._dtype":
        return False
    if c is Held:
        return _frozen(x.template)
    if c is FusedCall:  # (its node's tensors are the call's operands; the rest it holds itself)
        return any(_frozen(v) for _, v in x.saved if v is not _MISSING) or _frozen(x.params)
    if c is tuple or c is list or isinstance(x, tuple):  # (jitgrad.Size)
        return any(_frozen(y) for y in x)
    if c is dict:
        return any(_frozen(y) for y in x.values())
    if c is slice:
        return _frozen(x.start) or _frozen(x.stop) or _frozen(x.step)
    return not (c is np.ndarray and x.ndim == 0)  # (a 0-d array: a scalar constant)


def _remember(key, value, table):
    if len(table) >= MAX_KEYS:
        for k in list(table)[:MAX_KEYS // 2]:
            del table[k]
    table[key] = value


def _graph_key(roots, targets, accumulate):
    """The hash of a backward's structure from its roots' node keys (built as the forward recorded them, Node._key):
    O(1) in the graph's size. Equal structures give equal keys; the walk's full key decides where a plan exists."""
    h = [accumulate]
    for e, g in roots:
        d = g._data
        h += (e[0]._key, e[1], d.shape, d.dtype)
    if targets is not None:
        for t in targets:
            fn = t.grad_fn
            h += (fn._key, t._output_nr) if fn is not None else (None, t._data.shape)
    return hash(tuple(h))


class _Seen:
    """A graph key past the threshold: fallbacks in a row for passing reasons, full keys built under it."""
    __slots__ = ("transient", "built", "walkers")

    def __init__(self):
        self.transient = self.built = 0
        self.walkers = []  # (walker, plan) per plan built under the key (graph_walk.make_walker)


# reasons a graph of a key may not have next time (hooks registered for a while); past MAX_TRANSIENT of them in a
# row the key runs eagerly for good, so a loop that keeps its hooks does not walk its graph every step
TRANSIENT = frozenset(("hooks", "saved-tensor hooks", "a saved tensor freed or modified in place"))
MAX_TRANSIENT = 3
MAX_BUILT = 4  # full keys (plans) built under one graph key; past it the key runs eagerly ("structures vary")


def run_compiled(roots, retain_graph, targets, accumulate):
    """The engine's backward of ``roots`` by a compiled plan: the targets' gradients (``[]`` when they went to
    the leaves' ``.grad``), or None where the engine must run it (a miss or a fallback, counted).

    A graph's key (built while recording) is looked up first: until ``threshold`` distinct graphs have had it,
    the engine runs them and nothing is walked; a key marked eager (a str: the reason) falls back at once. Past
    it each backward walks its graph (the full key, the arrays it reads) and runs the full key's plan."""
    why = _why_eager(roots, targets)
    if why is not None:
        return _fallback(why)
    gkey = _graph_key(roots, targets, accumulate)
    seen = _hints.get(gkey)
    if seen is None or seen.__class__ is tuple:  # (distinct graphs counted, the last one's root): below threshold
        with _lock:
            seen = _hints.get(gkey)
            if seen is None or seen.__class__ is tuple:
                graph = roots[0][0][0]._seq  # (unique per node, where an id is reused by the next graph)
                count = 1 if seen is None else seen[0] + (seen[1] != graph)
                if count < SETTINGS["threshold"]:
                    _remember(gkey, (count, graph), _hints)  # (a tuple of ints: nothing for the collector)
                    AUTOGRAD["misses"] += 1
                    return None
                seen = _hints[gkey] = _Seen()
    if seen.__class__ is str:
        return _fallback(seen)
    for walker, plan in seen.walkers:  # (the plans of this key, each with the walker generated from its graph)
        try:
            got = walker(roots, targets)
        except MISSES:  # (a node of another form)
            got = None
        if got is not None:
            seen.transient = 0
            AUTOGRAD["hits"] += 1
            return _run(plan, None, roots, got[0], got[1], got[2], retain_graph, accumulate)
    try:
        key, arrays, nodes, leaves = walk(roots, targets)
    except Eager as exc:
        reason = exc.args[0]
        if reason not in TRANSIENT or seen.transient >= MAX_TRANSIENT:
            _hints[gkey] = reason
        else:
            seen.transient += 1
        return _fallback(reason)
    seen.transient = 0
    plan = _plans.get(key)
    res = None  # the gradients: the plan's, or those of the trace that built it
    if plan is None:
        with _lock:
            seen.built += 1
            if seen.built > MAX_BUILT:
                _hints[gkey] = "structures vary under one key"
                return _fallback("structures vary under one key")
        plan = _build(roots, targets, arrays, nodes, leaves, accumulate)
        if plan.__class__ is Plan:  # (taken before other threads can see the plan)
            res, plan.traced = plan.traced, None
        with _lock:
            _remember(key, plan, _plans)
        if plan.__class__ is str:
            AUTOGRAD["build_failures"] += 1
            _hints[gkey] = plan
            return _fallback(plan)
        AUTOGRAD["plans"] += 1
        AUTOGRAD["compile_seconds"] += plan.seconds
    elif plan.__class__ is str:
        return _fallback(plan)
    else:
        AUTOGRAD["hits"] += 1
    if len(seen.walkers) < MAX_BUILT and all(p is not plan for _, p in seen.walkers):
        walker = make_walker(roots, targets, nodes, arrays, plan.ran)
        if walker is not None:
            with _lock:
                seen.walkers.append((walker, plan))
    release = [v for i in plan.ran for v in nodes[i].saved.values() if v.__class__ is SavedTensor]
    return _run(plan, res, roots, arrays, [nodes[i] for i in leaves], release, retain_graph, accumulate)


def _run(plan, res, roots, arrays, leaves, release, retain_graph, accumulate):
    """Run ``plan`` on a graph's ``arrays`` (``res``: its gradients where the trace that built it computed them),
    free the ``release``d saved tensors unless ``retain_graph``, and hand the gradients on: into the ``leaves``'
    ``.grad`` where ``accumulate``, else returned."""
    if res is None:
        res = plan.fn(*plan.gather(roots, arrays))
    if not retain_graph:  # OpNode._release, inlined (no saved tensor here has hooks: see graph_walk.walk)
        for v in release:
            v._data = v._saved_fn = v._version = None
    enabled, STATE.grad_enabled = STATE.grad_enabled, False  # (as the engine accumulates: no graph of it)
    try:
        if accumulate:
            for node, r in zip(leaves, plan.results):
                if r is not None:
                    with node._lock:
                        _accumulate(node.variable, res[r[0]], r[1])
            return []
        out = []
        for r in plan.results:  # (a root's own gradient passed through is that tensor, as the engine hands it on)
            out.append(None if r is None else roots[r[2]][1] if r[2] is not None else
                       Tensor._wrap(res[r[0]]) if r[1] else Tensor._wrap(res[r[0]])._owned_copy())
        return out
    finally:
        STATE.grad_enabled = enabled


def _accumulate(var, a, owned):
    """AccumulateGrad's ``var.grad += a`` for a plan's result: a new ``.grad`` takes the array where the plan
    made it (it is nobody else's), else the engine's accumulation."""
    if var._grad is None and owned and a.__class__ is np.ndarray and a.base is None and a.flags.c_contiguous \
            and a.flags.writeable and a.dtype == var._data.dtype:
        var._grad = Tensor._wrap(a)
        return
    g = Tensor._wrap(a)
    accumulate_into(var, g if owned else g._owned_copy())


engine.COMPILED[0] = run_compiled
