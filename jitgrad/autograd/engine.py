"""The backward engine: iterative, dependency-counted, hooks in PyTorch's order.

1. Walk the graph from the roots (an explicit stack, no recursion) counting, for every node,
   how many edges lead into it.
2. Run ready nodes, latest-created first (AccumulateGrad as soon as it is ready); each runs
   once, with the sum of the gradients that reached it.
3. For each node: tensor hooks, then the node's pre-hooks, then retain_grad, then the node,
   then its post-hooks. Saved tensors are freed afterwards unless retain_graph.
"""
import heapq
import os
import warnings

import numpy as np

from .._anomaly import annotate, check_nan
from .._device import backend
from .._dtype import REDUCED_NP
from .._factories import zeros_like
from .._grad_mode import STATE, set_grad_enabled
from .._layout import LAZY, strided
from .._graph import COMPILED_AUTOGRAD, AccumulateGrad, accumulate_locked, edge, type_name
from .._tensor import Tensor
from .._trace_hooks import NOT_CAPTURED, backward_pass, step_call


def _root_grads(tensors, grad_tensors, what="grad"):
    roots = []
    for i, (t, g) in enumerate(zip(tensors, grad_tensors)):
        if not isinstance(t, Tensor):
            raise TypeError("expected Tensor as element %d in argument 0, but got %s" % (i, type(t).__name__))
        if not t._requires_grad:
            raise RuntimeError("element %d of tensors does not require grad and does not have a grad_fn" % i)
        if g is None:
            if t.numel() != 1:
                raise RuntimeError("grad can be implicitly created only for scalar outputs")
            if not t.dtype.is_floating_point:
                raise RuntimeError("grad can be implicitly created only for real scalar outputs but got %r"
                                   % t.dtype)
            d = t._data
            g = Tensor._wrap(backend(d).full(d.shape, 1, d.dtype))
        elif not isinstance(g, Tensor):
            raise TypeError("gradients can be either Tensors or None, but got " + type(g).__name__)
        elif g._data.__class__ in LAZY:  # (the fused VJP kernels read arrays: a lazy conjugate's values)
            g = g.resolve_conj().resolve_neg()
        if g._data.shape != t._data.shape:
            raise RuntimeError("Mismatch in shape: grad_output[%d] has a shape of %r and output[%d] has a shape of %r."
                               % (i, g.shape, i, t.shape))
        roots.append((edge(t), g))
    return roots


def _as_tuple(x):
    if x is None:
        return None
    if isinstance(x, Tensor):
        return (x,)
    return tuple(x)


CREATE_GRAPH_CYCLE_WARNING = (
    "Using backward() with create_graph=True will create a reference cycle between the parameter and its gradient "
    "which can cause a memory leak. We recommend using autograd.grad when creating the graph to avoid this. If you "
    "have to use this function, make sure to reset the .grad fields of your parameters to None after use to break "
    "the cycle and avoid the leak.")


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, grad_variables=None, inputs=None):
    """Compute the gradients of ``tensors`` and accumulate them in the leaves' ``.grad``."""
    tensors = _as_tuple(tensors)
    grads = _as_tuple(grad_tensors) or (None,) * len(tensors)
    if len(grads) != len(tensors):
        raise RuntimeError("got %d tensors and %d gradients" % (len(tensors), len(grads)))
    inputs = _as_tuple(inputs)
    if inputs is not None and len(inputs) == 0:
        raise RuntimeError("`inputs` argument to `backward()` cannot be empty.")
    if retain_graph is None:
        retain_graph = create_graph
    roots = _root_grads(tensors, grads)
    if create_graph:
        warnings.warn(CREATE_GRAPH_CYCLE_WARNING, UserWarning, stacklevel=3)
    if inputs is None:
        run(roots, retain_graph, create_graph)
        return
    for t in inputs:
        if not t._requires_grad:
            raise RuntimeError("One of the differentiated Tensors does not require grad")
    captured = run(roots, retain_graph, create_graph, targets=inputs, accumulate_leaves=False)
    with set_grad_enabled(create_graph):
        for t, g in zip(inputs, captured):
            accumulate_locked(t, g)


def tensor_backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
    """``Tensor.backward`` (attached in jitgrad/__init__.py): ``backward(self, gradient, ...)``."""
    if step_call("backward", self, tensor_backward, (gradient, retain_graph, create_graph, inputs), {}) is NOT_CAPTURED:
        backward(self, gradient, retain_graph, create_graph, inputs=inputs)


# compiled autograd (jitgrad/compiler/compiled_autograd.py, a layer above), set when it loads: run_compiled(roots,
# retain_graph, targets, accumulate_leaves) -> the targets' gradients, or None where this engine runs the graph
COMPILED = [None]
# whether backward runs compiled plans (on unless the environment variable JITGRAD_COMPILED_AUTOGRAD says 0, false,
# off or no; "always" builds each plan in the first graph of its structure), in which distinct graph of one
# structure its plan is built (threshold 1: the first; 2 by default), and whether larger graphs' plans fuse ops into
# loops (faster, but not bit for bit the engine's results)
_ENV = os.environ.get("JITGRAD_COMPILED_AUTOGRAD", "1").strip().lower()
SETTINGS = COMPILED_AUTOGRAD
SETTINGS.update({"enabled": _ENV not in ("0", "false", "off", "no"), "threshold": 1 if _ENV in ("always", "force")
                 else 2, "fuse": os.environ.get("JITGRAD_COMPILED_AUTOGRAD_FUSE", "0") not in ("", "0")})


def set_compiled_autograd(enabled=True, threshold=None):
    """Switch compiled autograd on or off (default: on, unless the environment variable JITGRAD_COMPILED_AUTOGRAD
    is ``0``; ``always``: plans from the first backward); ``threshold``: in which distinct graph of one structure
    its plan is built (1: the first; 2 by default). Returns the previous setting of ``enabled``."""
    prev = SETTINGS["enabled"]
    if threshold is not None:
        if int(threshold) < 1:
            raise ValueError("threshold must be at least 1, got %r" % (threshold,))
        SETTINGS["threshold"] = int(threshold)
    SETTINGS["enabled"] = bool(enabled)
    return prev


def is_compiled_autograd_enabled():
    return SETTINGS["enabled"]

# jitgrad.func's vmap (a layer above), set when jitgrad.func loads: grad(is_grads_batched=True), the vectorized
# Jacobians of autograd.functional and gradcheck's batched checks run the backward under it
VMAP = [None]


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, only_inputs=True,
         allow_unused=None, is_grads_batched=False, materialize_grads=False):
    """Gradients of ``outputs`` with respect to ``inputs``, returned (``.grad`` is left alone).
    ``is_grads_batched``: the grad_outputs' first dim is a batch dim, the backward vmapped over it."""
    if is_grads_batched:
        return _batched_grad(outputs, inputs, grad_outputs, retain_graph, create_graph, allow_unused,
                             materialize_grads)
    outputs = _as_tuple(outputs)
    inputs = _as_tuple(inputs)
    grads = _as_tuple(grad_outputs) or (None,) * len(outputs)
    if allow_unused is None:
        allow_unused = materialize_grads
    if materialize_grads and allow_unused is False:
        raise ValueError("Expected allow_unused to be True or not passed when materialize_grads=True, but got: "
                         "allow_unused=False.")
    if retain_graph is None:
        retain_graph = create_graph
    for t in inputs:
        if not t._requires_grad:
            raise RuntimeError("One of the differentiated Tensors does not require grad")
    roots = _root_grads(outputs, grads)
    if not create_graph and any(getattr(g, "_level", 0) for _, g in roots):
        # grad_outputs batched by vmap (a layer above): the VJP formulas run on them as table ops (which vmap
        # batches), never the fused kernels, which would read one sample's array; detached after
        result = [None if g is None else g.detach() for g in run(roots, retain_graph, True, targets=inputs,
                                                                 accumulate_leaves=False)]
    else:
        result = run(roots, retain_graph, create_graph, targets=inputs, accumulate_leaves=False)
    out = []
    for i, (t, g) in enumerate(zip(inputs, result)):
        if g is None:
            if not allow_unused:
                raise RuntimeError("One of the differentiated Tensors appears to not have been used in the graph. Set "
                                   "allow_unused=True if this is the desired behavior.")
            if materialize_grads:
                g = zeros_like(t)
        out.append(g)
    return tuple(out)


def _batched_grad(outputs, inputs, grad_outputs, retain_graph, create_graph, allow_unused, materialize_grads):
    """grad(is_grads_batched=True): one backward under vmap, the batch's grad_outputs the cotangents (the
    formulas run on them as table ops, hence with a graph, detached after unless ``create_graph``)."""
    inputs = _as_tuple(inputs)
    unused = []

    def one(*gos):
        gs = grad(outputs, inputs, gos, retain_graph=True, create_graph=True, allow_unused=allow_unused,
                  materialize_grads=materialize_grads)
        unused[:] = [g is None for g in gs]
        return tuple(zeros_like(x) if g is None else g for g, x in zip(gs, inputs))
    res = VMAP[0](one)(*_as_tuple(grad_outputs))
    return tuple(None if u else r if create_graph else r.detach() for r, u in zip(res, unused))


def _needed(roots, capture):
    """Nodes from which some target can be reached (only those run when targets are given)."""
    targets = {node for node, _ in capture}
    needed, visited = set(), set()
    stack = [(e[0], False) for e, _ in roots if e is not None]
    while stack:  # iterative post-order: a node is decided after all of its children
        n, children_done = stack.pop()
        if children_done:
            if n in targets or any(nf[0] in needed for nf in n.next_functions if nf is not None):
                needed.add(n)
            continue
        if n in visited:
            continue
        visited.add(n)
        stack.append((n, True))
        stack.extend((nf[0], False) for nf in n.next_functions
                     if nf is not None and nf[0] is not None and nf[0] not in visited)
    return needed


def _dependencies(roots, needed):
    """For every node below the roots (and needed, when targets are given): how many edges lead into it."""
    deps = {}
    stack = []
    for e, _ in roots:
        if e is not None and e[0] not in deps:
            deps[e[0]] = 0
            stack.append(e[0])
    while stack:
        for nf in stack.pop().next_functions:
            m = nf[0] if nf is not None else None  # a None entry instead of NO_EDGE: a node built elsewhere
            if m is None or needed is not None and m not in needed:
                continue
            if m in deps:
                deps[m] += 1
            else:
                deps[m] = 1
                stack.append(m)
    return deps


def run(roots, retain_graph, create_graph, targets=None, accumulate_leaves=True, ran=None):
    """Execute the graph below ``roots`` [(edge, grad)]; return the gradients captured for ``targets``.

    One loop: take the ready node created last, give it the sum of the gradients that reached it,
    run it, and hand its input gradients to the nodes it points to (ready once all have arrived).
    Without create_graph, a graph seen before runs as a compiled plan instead (compiled autograd), unless
    it holds what only this loop runs (see compiler/compiled_autograd.py; the profiler times this loop's
    nodes). ``ran`` collects the nodes run.
    """
    # jitgrad.compile traces the function (a transform's autograd.grad): the pass runs the VJP formulas as table
    # ops, which the trace records into its graph, and its gradients are detached as this pass would leave them
    detach = backward_pass(roots, accumulate_leaves) and not create_graph
    if detach:
        create_graph = True
    if not create_graph and SETTINGS["enabled"] and COMPILED[0] is not None and STATE.profiler is None and \
            not STATE.eager_backward:
        captured = COMPILED[0](roots, retain_graph, targets, accumulate_leaves)
        if captured is not None:
            return captured
    capture = {}  # (node, output_nr) -> positions in ``targets`` whose gradient flows in there
    for k, e in enumerate([edge(t) for t in targets] if targets is not None else ()):
        if e is not None:
            capture.setdefault(e, []).append(k)
    needed = _needed(roots, capture) if targets is not None else None
    deps = _dependencies(roots, needed)
    buffers = {}  # node -> the gradients of its outputs received so far
    for e, g in roots:
        if e is not None:
            _add(buffers, e[0], e[1], g)
    ready = [(-n._seq, id(n), n) for n in buffers if deps[n] == 0]
    heapq.heapify(ready)
    captured = [None] * (len(targets) if targets is not None else 0)
    anomaly = STATE.anomaly
    profiler = STATE.profiler  # jitgrad.profiler: an event around each node it runs
    observed = anomaly or profiler is not None
    pop, push = heapq.heappop, heapq.heappush
    node = None  # the next node to run, when it was the only one to become ready (a chain: no heap)
    every = needed is None and accumulate_leaves  # every node reached runs
    enabled, STATE.grad_enabled = STATE.grad_enabled, bool(create_graph)  # (set_grad_enabled, without its object)
    try:
        while node is not None or ready:
            if node is None:
                node = pop(ready)[2]
            grads = buffers.pop(node, None) or [None] * node.n_outputs
            hooked = node._hooked
            if hooked or node.__class__ is AccumulateGrad and node.variable._hooks:
                grads = _pre_hooks(node, grads)
            if capture:
                for k, g in enumerate(grads):
                    for slot in capture.get((node, k), ()):
                        captured[slot] = g
            outs = ()
            if (grads[0] is not None or any(g is not None for g in grads)) and (every or (
                    needed is None or node in needed) and (accumulate_leaves or node.__class__ is not AccumulateGrad)):
                outs = _apply_observed(node, grads, anomaly, profiler) if observed else node.apply(grads)
                if ran is not None:
                    ran.append(node)
                if hooked and node._post_hooks:
                    outs = _post_hooks(node, outs, grads)
                if not retain_graph:
                    node._release()
            n_outs = len(outs)
            nexts = node.next_functions
            node = None
            for k, nf in enumerate(nexts):
                m = nf[0] if nf is not None else None
                left = deps.get(m)  # None for an input without a node (NO_EDGE) or not needed
                if left is None:
                    continue
                g = outs[k] if k < n_outs else None
                if g is not None:
                    buf = buffers.get(m)
                    if buf is None:
                        buf = buffers[m] = [None] * m.n_outputs
                    j = nf[1]
                    buf[j] = g if buf[j] is None else _sum_grads(buf[j], g, create_graph)
                deps[m] = left - 1
                if left == 1:  # m is ready: run it next if it is the only ready node, else by the heap's order
                    if node is None and not ready:
                        node = m
                    else:
                        if node is not None:
                            push(ready, (-node._seq, id(node), node))
                            node = None
                        push(ready, (-m._seq, id(m), m))
            g = outs = grads = buf = None  # hold no gradient between nodes: a leaf's .grad may take over its buffer
    finally:
        STATE.grad_enabled = enabled
    if detach:
        return [None if g is None else g.detach() for g in captured]
    return captured


def _post_hooks(node, outs, grads):
    for hook in list(node._post_hooks.values()):
        r = hook(tuple(outs), tuple(grads))
        if r is not None:
            outs = _hook_values(hook, r, outs)
    return outs


def _sum_grads(a, b, create_graph):
    """a + b for two gradients of one tensor: a recorded op under create_graph, else one kernel on the
    arrays (same shape and dtype by now), skipping the op layer's dispatch."""
    if a.layout is not strided or b.layout is not strided:  # sparse gradients (jitgrad.sparse): with a dense one,
        return b + a if b.layout is strided else a + b  # the sum is dense (there is no sparse + dense)
    if create_graph or a._data.shape != b._data.shape or a._data.dtype != b._data.dtype or \
            a._data.dtype in REDUCED_NP or a._data.__class__ in LAZY or b._data.__class__ in LAZY:
        return a + b  # (float16/bfloat16: the op computes in float32; a lazy conjugate: its values)
    d = a._data
    return Tensor._wrap(backend(d).run("add", d.dtype, d, b._data))


def _apply_observed(node, grads, anomaly, profiler):
    """node.apply(grads) in anomaly mode (errors annotated, NaN checked) and/or timed by the profiler."""
    apply = _apply_with_anomaly if anomaly else _apply
    return apply(node, grads) if profiler is None else profiler.node(node, apply, grads)


def _apply(node, grads):
    return node.apply(grads)


def _apply_with_anomaly(node, grads):
    try:
        outs = node.apply(grads)
    except Exception as exc:
        annotate(exc, node)
        raise
    check_nan(node, outs)
    return outs


def _add(buffers, node, k, g):
    buf = buffers.get(node)
    if buf is None:
        buf = buffers[node] = [None] * node.n_outputs
    buf[k] = g if buf[k] is None else _sum_grads(buf[k], g, True)


def _pre_hooks(node, grads):
    """Tensor hooks, then node pre-hooks, then retain_grad (PyTorch's order)."""
    if isinstance(node, AccumulateGrad):
        hooks = node.variable._hooks
        if hooks:
            g = grads[0]
            for hook in list(hooks.values()):
                r = hook(g)
                if r is not None:
                    g = _hook_value(hook, r, g)
            grads = [g]
    elif node._tensor_hooks:
        grads = list(grads)
        for k, hooks in node._tensor_hooks.items():
            for hook in list(hooks.values()):
                if grads[k] is None:
                    continue
                r = hook(grads[k])
                if r is not None:
                    grads[k] = _hook_value(hook, r, grads[k])
    if node._pre_hooks:
        for hook in list(node._pre_hooks.values()):
            r = hook(tuple(grads))
            if r is not None:
                grads = _hook_values(hook, r, grads)
    if node._retain_hooks:
        for k, hooks in node._retain_hooks.items():
            for hook in list(hooks.values()):
                hook(grads[k])
    return grads


def _hook_name(hook):
    name = getattr(hook, "__name__", None)
    return name if isinstance(name, str) else "<unknown>"


def _hook_values(hook, new, old):
    """The gradients a node hook returned in place of ``old``, checked as PyTorch does."""
    if not isinstance(new, tuple):
        raise TypeError("expected tuple, but hook returned '%s'" % type_name(new))
    if len(new) != len(old):
        raise RuntimeError("hook '%s' has returned an incorrect number of values (got %d, but expected %d)"
                           % (_hook_name(hook), len(new), len(old)))
    return [_hook_value(hook, n, o) for n, o in zip(new, old)]


def _hook_value(hook, new, old):
    """A hook may replace a gradient by a tensor of the same type, device and size (PyTorch's
    check_single_result, in its order)."""
    if new is None:
        return new
    if old is None:
        raise RuntimeError("can't replace a None gradient with a non-None value")
    if not isinstance(new, Tensor):
        raise TypeError("expected Variable, but hook returned '%s'" % type_name(new))
    if new.dtype is not old.dtype or (new._data.__class__ is np.ndarray) != (old._data.__class__ is np.ndarray):
        raise RuntimeError("hook '%s' has changed the type of value (was %s got %s)"
                           % (_hook_name(hook), _type_string(old), _type_string(new)))
    if new._data.shape != old._data.shape:
        raise RuntimeError("hook '%s' has changed the size of value" % _hook_name(hook))
    return new


def _type_string(t):
    """'jitgrad.FloatTensor', 'jitgrad.cuda.FloatTensor': PyTorch's Tensor.toString()."""
    return "jitgrad.%s%s" % ("" if t._data.__class__ is np.ndarray else "cuda.", t.dtype.tensor_type)
