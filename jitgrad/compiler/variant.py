"""One traced variant of a compiled function: its forward plan, its backward plan or joint gradients, a
training step's effects, and how a call runs it."""
import numpy as np

from .._device import backend
from .._dtype import REDUCED_NP
from ..kernels import config
from .._grad_mode import STATE, no_grad
from .._graph import accumulate_into
from .._op import dispatch
from .._tensor import Tensor
from . import stats
from .capture import BACKWARD, Unsupported, trace, trace_backward
from .ir import Held, Ref
from .fusion import elementwise_backward, joint_graph, with_recompute
from .guards import tensor_key
from .nodes import CompiledFunctionBackward, CompiledStepBackward, RegionReplayBackward, _tensor_of
from .pytree import flatten, unflatten
from .replay import Replay
from .tape import SMALL, compile_plan, tape_expressible


def _producers(g, values):
    """The nodes of graph ``g`` that ``values`` derive from (those making them included)."""
    nodes, stack = set(), [g.kinds[v][1] for v in values if g.kinds[v][0] == "op"]
    while stack:
        i = stack.pop()
        if i not in nodes:
            nodes.add(i)
            stack += [g.kinds[v][1] for v in g.nodes[i].refs() if g.kinds[v][0] == "op"]
    return nodes


# ------------------------------------------------------------------ one traced variant
# A scalar's gradients are computed by its forward plan (see Variant._joint) where its arrays are this large
# (memory-bound loops, where one pass instead of two pays) or this small (a tape's: one interpreter call instead
# of two, which also spares the backward recomputing the forward; a call that no backward follows pays a few
# microseconds); graphs in between keep a backward plan of their own.
JOINT_MIN_SIZE = config.PARALLEL_THRESHOLD
JOINT_MAX_SIZE = SMALL
# The graph before a graph break is compiled where its values hold this many elements in all, at most: each
# is an output of its plan (the function's Python may hold any of them), so the plan saves the per-op cost of
# small tensors, while large ones would lose more to the stores and the backward than fusion gains.
PREFIX_SIZE = config.PARALLEL_THRESHOLD


class Variant:
    """One trace of a function for one guard key: its forward plan and, where inputs need gradients,
    its backward plan. A graph break makes it an eager variant (``eager`` holds the reasons)."""

    def __init__(self, owner, key, args, kwargs, tensors):
        self.key = key
        self.owner = owner
        # the trace runs on fresh leaves around the inputs' arrays: the callers' tensors keep their history
        # and hooks out of it
        aliases = []
        for t in tensors:
            a = Tensor._wrap(t._data, t._requires_grad)
            a._vc = t._vc
            aliases.append(a)
        args, kwargs = unflatten(key[0], aliases)
        tracer, result = trace(owner.fn, args, kwargs, owner.fullgraph, aliases)
        g = self.graph = tracer.graph
        if len({a.__class__ is np.ndarray for a in g.arrays}) > 1:  # (device arrays come in more than one class)
            g.breaks.append(("tensors on more than one device", "<function>"))
        if any(a.dtype in REDUCED_NP for a in g.arrays):
            # eager ops compute float16/bfloat16 in float32 and round each result; plans call the kernels
            # directly (and numba's loops have no bfloat16), so these run eagerly
            g.breaks.append(("float16 or bfloat16 tensors", "<function>"))
        if g.breaks and owner.fullgraph:
            raise Unsupported("fullgraph=True: %s (the function runs eagerly without fullgraph)" % g.breaks[0][0])
        self.breaks = g.breaks
        self.eager = bool(g.breaks)
        self.prefix = False
        self.missed = 0  # calls in a row whose Python left the traced ops before the break (see replay)
        made = [o for outs in tracer.made for o in outs]
        step_loss = _replayable_step(tracer)
        # (breaks "at <function>" are the graph's, not a line's: devices, float16, draws, writes outside the table)
        if self.eager and tracer.read_break and g.nodes and all(where != "<function>" for _, where in g.breaks) and (
                step_loss is not None or not tracer.effects and sum(o._data.size for o in made) <= PREFIX_SIZE):
            # The graph ends at a value read: the part before it is compiled, with every value it makes as an
            # output, and each call runs the function again with its ops up to the read taking those values
            # (see Replay). A training step's effects (zero_grad, backward, step) then run as its Python calls
            # them; its loss's gradients come from a backward plan of their own.
            self.eager, self.prefix = False, True
            result = tuple(made)
        self.bplan = self.bgraph = None
        # (graph, gradient values) where the forward plan computes the gradients too: a training step's, or
        # a scalar's (of elementwise math, see _joint)
        self.joint = None
        self.exts = []
        self.effects = self.pre = self.post = self.spent = self.accumulate = []
        if self.eager:
            return
        # the outputs
        out_leaves = []
        self.out_spec = flatten(result, out_leaves)
        out_vals = [g.value(t) for t in out_leaves]
        self.detached = _detached_outputs(g, tracer, aliases, out_leaves, out_vals)
        # which forward tensors take gradients, and which outputs carry them
        self.effects = tracer.effects
        self.spent = []
        self.grad_input = None  # a captured backward(gradient)'s gradient value
        self.replay_outs = []  # outputs whose backward runs the region's ops again (see RegionReplayBackward)
        self.view_outs = {}  # outputs that are views of an input or of another output (see _output_views)
        bw = tracer.backward
        grad_outs, saved_vals, extra = [], [], []
        if self.prefix and step_loss is not None:
            # the step's own Python makes its effects; the loss's gradients come from the captured backward's
            # plan, any other output's from running the region again
            self.effects, bw = [], None
            k_loss = out_vals.index(step_loss)
            _, _, bleaves, bg, grads = tracer.backward
            if STATE.grad_enabled and self._backward_plan(g, bg, grads, [g.by_id[id(t._data)] for t in bleaves],
                                                          owner):
                grad_outs = [k_loss]
            self._replay_leaves(g, aliases, out_leaves, out_vals, grad_outs)
        elif bw is not None:  # a training step: its own backward, and no autograd node for its outputs
            lv, self.grad_input, bleaves, bg, grads = bw
            if not self._outputs_spent(g, lv, out_leaves, out_vals):
                return
            if not any(gr is not None for gr in grads):
                bw = None  # no leaf gets a gradient: the backward changes nothing
                self.effects = [e for e in self.effects if e[1] != BACKWARD]
            else:  # the step's gradients come out of its one plan, with the forward
                self.leaf_vals = [g.by_id[id(t._data)] for t, gr in zip(bleaves, grads) if gr is not None]
                loss = g.arrays[lv]
                grad = Ref(self.grad_input) if self.grad_input is not None else Tensor._wrap(
                    backend(loss).full(loss.shape, 1, loss.dtype))
                self.bgraph = bg
                self.joint = joint_graph(g, bg, [gr for gr in grads if gr is not None], grad)
                g, extra = self.joint
        else:
            if not self.prefix:
                self.view_outs = _output_views(g, out_vals)
            boundary = [Ref(v) for v, k in enumerate(g.kinds) if k[0] != "op"]
            leaves = []
            for v in boundary:
                t = _tensor_of(g.kinds[v], aliases)
                if t._requires_grad and t._data.dtype.kind == "f":
                    leaves.append((v, t))
            if STATE.grad_enabled and leaves:
                grad_outs = [k for k, t in enumerate(out_leaves) if t._requires_grad and t.grad_fn is not None
                             and g.kinds[out_vals[k]][0] == "op" and k not in self.view_outs]
            if grad_outs:
                bg, grads = trace_backward(g, [out_leaves[k] for k in grad_outs], [t for _, t in leaves])
                if bg.breaks:  # a backward the plan cannot read from each call: the function runs eagerly
                    if owner.fullgraph:
                        raise Unsupported("fullgraph=True: %s" % bg.breaks[0][0])
                    self.breaks.append(bg.breaks[0])
                    self.eager = True
                    return
                if self._joint(g, bg, grads, [v for v, _ in leaves], owner, [out_vals[k] for k in grad_outs]):
                    g, extra = self.joint
                elif not self._backward_plan(g, bg, grads, [v for v, _ in leaves], owner):
                    grad_outs = []
        saved_vals = getattr(self, "saved_vals", [])
        self.grad_outs = grad_outs
        self.saved_vals = saved_vals
        self.out_vals = out_vals
        self.plan = compile_plan(g, out_vals + saved_vals + extra, owner.fuse, "forward")
        self.boundary = self.plan.boundary
        self.fwd_sources = []
        for v in self.boundary:
            kind = g.kinds[v]
            self.fwd_sources.append(None if kind[0] == "input" else kind[1])
        self.input_pos = [g.kinds[v][1] if g.kinds[v][0] == "input" else None for v in self.boundary]
        if self.bplan is not None:  # where each argument of the backward plan comes from (see apply)
            fwd_pos = {b: i for i, b in enumerate(self.boundary)}
            saved_pos = {fv: i for i, fv in enumerate(saved_vals)}
            self.bargs = [(0, k[1]) if k[0] == "grad" else (1, saved_pos[k[1]]) if k[1] in saved_pos and k[0] == "fwd"
                          else (2, fwd_pos[k[1]]) if k[0] == "fwd" else (3, k[1]) for k in self.bsources]
        self.exts = [(g.kinds[v][1], tensor_key(g.kinds[v][1])) for v in self.boundary if g.kinds[v][0] == "ext"]
        # what each output is: a plan result, or an input/external tensor returned as it is
        self.out_kinds = []
        pos = {v: i for i, v in enumerate(self.boundary)}
        for v in out_vals:
            self.out_kinds.append(pos.get(v, -1))
        self.leaf_sources = [self.graph.kinds[v] for v in getattr(self, "leaf_vals", [])]  # ("input", i), ("ext", t)
        if self.joint is not None:  # the region's inputs the backward would read: version-checked when it runs
            fwd_pos = {b: i for i, b in enumerate(self.boundary)}
            self.joint_reads = sorted({fwd_pos[k[1]] for k in bg.kinds if k[0] == "fwd" and k[1] in fwd_pos})
        if self.effects:
            self._effect_steps(out_vals, bw)
        stats.record(owner.name, self)

    def _backward_plan(self, g, bg, grads, leaf_vals, owner):
        """The backward plan of graph ``g`` from traced backward graph ``bg``; False if no leaf gets a gradient."""
        self.leaf_vals = [v for v, gr in zip(leaf_vals, grads) if gr is not None]
        grad_vals = [gr for gr in grads if gr is not None]
        if not grad_vals:
            return False
        if owner.fuse:
            bg, grad_vals = with_recompute(g, bg, grad_vals)
        self.bgraph = bg
        self.saved_vals = sorted({k[1] for k in bg.kinds if k[0] == "fwd" and g.kinds[k[1]][0] == "op"})
        self.bplan = compile_plan(bg, grad_vals, owner.fuse, "backward")
        self.bsources = [bg.kinds[v] for v in self.bplan.boundary]
        return True

    def _joint(self, g, bg, grads, leaf_vals, owner, grad_out_vals):
        """A scalar output on the CPU whose backward is elementwise math (and full sums), or a small graph that a
        tape runs whole: its gradients at an output gradient of one come out of the forward plan's own loops or
        tape (``self.joint``); the backward only scales them. True where that applies."""
        out = g.arrays[grad_out_vals[0]]
        grad_vals = [gr for gr in grads if gr is not None]
        size = max(a.size for a in g.arrays)
        if not (owner.fuse and len(grad_out_vals) == 1 and out.__class__ is np.ndarray and out.ndim == 0
                and grad_vals and not JOINT_MAX_SIZE < size < JOINT_MIN_SIZE
                and (size <= JOINT_MAX_SIZE or elementwise_backward(bg))):
            return False
        joint = joint_graph(g, bg, grad_vals, Tensor._wrap(np.ones((), out.dtype)))
        if any(joint[0].kinds[v][0] != "op" for v in joint[1]):  # a gradient that is an input: no loop to fuse
            return False
        if not elementwise_backward(bg) and not tape_expressible(joint[0]):
            return False  # (a small backward of moves and groups: joined where a tape runs it all)
        self.leaf_vals = [v for v, gr in zip(leaf_vals, grads) if gr is not None]
        self.saved_vals = []
        self.bgraph, self.joint = bg, joint
        return True

    def _outputs_spent(self, g, lv, out_leaves, out_vals):
        """A step's outputs that require grad must derive from the loss's graph, which eager backward has
        freed (a compiled step gives them a spent node). One that does not would need a backward of its
        own: then the step runs eagerly."""
        graph = _producers(g, [lv])
        self.spent = [k for k, t in enumerate(out_leaves) if t._requires_grad and g.kinds[out_vals[k]][0] == "op"]
        if any(not _producers(g, [out_vals[k]]) & graph for k in self.spent):
            self.breaks.append(("a compiled step returns a tensor that needs a backward of its own", "<function>"))
            self.eager = True
            return False
        return True

    def _effect_steps(self, out_vals, bw):
        """The run-time order of a step's effects: those before the first op, then the forward plan, then the
        rest (backward: the backward plan and the accumulation into ``.grad``) in call order."""
        self.pre = []
        for pos, kind, _, fn, args, kwargs in self.effects:
            if pos > 0 or kind == BACKWARD:
                break
            self.pre.append((fn, args, kwargs))
        self.post = [(fn, args, kwargs) for _, _, _, fn, args, kwargs in self.effects[len(self.pre):]]
        if bw is None:
            return
        # each gradient: the leaf it goes to (input position or tensor), and whether the array must be copied
        # (one array for two leaves or also returned, or an array the plan does not own)
        graph, outs = self.joint
        owned = {v for v, k in enumerate(graph.kinds) if k[0] == "op"} - set(out_vals)
        self.accumulate = [(src[1], src[0] == "input", outs.count(o) > 1 or o not in owned)
                           for src, o in zip(self.leaf_sources, outs)]

    def _backward(self, tensors, res):
        """A captured ``loss.backward()``: each gradient the plan computed into its leaf's ``.grad`` as the
        engine's AccumulateGrad does (a new tensor, else added in place)."""
        grads = res[len(self.out_vals):]
        with no_grad():
            for (src, is_input, copy), a in zip(self.accumulate, grads):
                t = tensors[src] if is_input else src
                if t._grad is None and a.__class__ is np.ndarray:
                    d = t._data
                    if a.dtype != d.dtype:
                        a = a.astype(d.dtype)
                    elif copy or a.base is not None or not (a.flags.c_contiguous and a.flags.writeable):
                        a = a.copy()  # .grad owns its array: later accumulation writes it in place
                    t._grad = Tensor._wrap(a)
                else:  # added in place, or (a device array) a copy, as AccumulateGrad does
                    accumulate_into(t, Tensor._wrap(a))

    def _replay_leaves(self, g, aliases, out_leaves, out_vals, grad_outs):
        """The outputs of a step's replayed region that need a gradient besides its loss, and the leaves their
        backward reaches: every input and external of the region that requires one."""
        self.replay_outs = [k for k, t in enumerate(out_leaves) if k not in grad_outs and t._requires_grad
                            and t.grad_fn is not None and g.kinds[out_vals[k]][0] == "op"]
        # those the loss derives from: eager's backward of the loss frees their graph too
        below = _producers(g, [out_vals[k] for k in grad_outs])
        self.replay_shared = [i for i, k in enumerate(self.replay_outs) if g.kinds[out_vals[k]][1] in below]
        # for each, the nodes it derives from and the inputs those read: a rerun runs and version-checks only
        # what the outputs given a gradient need, as eager's graph of each would have saved only that
        self.replay_deps = []
        for k in self.replay_outs:
            nodes = _producers(g, [out_vals[k]])
            self.replay_deps.append((nodes, {v for i in nodes for v in g.nodes[i].refs() if g.kinds[v][0] != "op"}))
        self.replay_reads = set().union(*[r for _, r in self.replay_deps])
        self.replay_leaf_vals = []
        for v in sorted(self.replay_reads):
            t = _tensor_of(g.kinds[v], aliases)
            if t._requires_grad and t._data.dtype.kind == "f":
                self.replay_leaf_vals.append(v)

    def guards_hold(self):
        for t, key in self.exts:
            if tensor_key(t) != key:
                return False
        return True

    def usable(self, tensors):
        """Whether a step's backward may accumulate as captured: its leaves are still leaves without hooks
        (a hook registered since the trace, or an input with a history, makes the call run eagerly)."""
        for src, is_input, _ in self.accumulate:
            t = tensors[src] if is_input else src
            if t._hooks or t.grad_fn is not None:
                return False
            node = t._acc_node() if t._acc_node is not None else None
            if node is not None and node._post_acc_hooks:
                return False
        return True

    def run(self, tensors):
        plan = self.plan
        for fn, args, kwargs in self.pre:
            fn(*args, **kwargs)
        arrays = []
        for src, p in zip(self.fwd_sources, self.input_pos):
            arrays.append((tensors[p] if p is not None else src)._data)
        res = plan.fn(*arrays)
        n = len(self.out_vals)
        outs = []
        for k in range(n):
            b = self.out_kinds[k]
            if b >= 0:
                p = self.input_pos[b]
                outs.append(tensors[p] if p is not None else self.fwd_sources[b])
            else:
                outs.append(Tensor._wrap(res[k]))
        for fn, args, kwargs in self.post:
            if fn is None:
                self._backward(tensors, res)
            else:
                fn(*args, **kwargs)
        if self.spent:
            node = CompiledStepBackward()
            for k in self.spent:
                o = outs[k]
                o.grad_fn, o._requires_grad = node, True
        node = None
        if self.grad_outs:
            node = CompiledFunctionBackward(self, tensors, arrays, res[n:], [outs[k] for k in self.grad_outs], outs)
        if self.replay_outs:
            RegionReplayBackward(self, tensors, [outs[k] for k in self.replay_outs], node)
        if self.view_outs:
            self._make_views(outs, tensors)
        for k in self.detached:  # a new tensor on the same array and version counter, without history
            outs[k] = outs[k]._alias()
        return unflatten(self.out_spec, outs)

    def _make_views(self, outs, tensors):
        """The outputs that are views, made as eager makes them: on the call's input, or on the output (with its
        autograd node) they view; an output returned twice is the same tensor twice."""
        made = set()

        def make(k):
            (kind, src), chain = self.view_outs[k]
            if kind == "out":
                if src in self.view_outs and src not in made:
                    make(src)
                t = outs[src]
            else:
                t = _tensor_of(self.graph.kinds[src], tensors)
            for node in chain:
                t = dispatch(node.op, (t,) + node.args[1:], node.params)
            outs[k] = t
            made.add(k)
        for k in self.view_outs:
            if k not in made:
                make(k)

    def replay(self, fn, args, kwargs, tensors):
        """A call of a variant whose graph ends at a graph break: the plan computes the graph's values, then the
        function runs with its ops up to the break taking them (see Replay), and eagerly from there."""
        values = self.run(tensors)
        STATE.capture = replay = Replay(self, values, tensors)
        try:
            return fn(*args, **kwargs)
        finally:
            STATE.capture = None
            # a call that left the traced ops computed the plan for nothing: after two in a row (the function
            # makes its own tensors before the break, say) the variant runs eagerly
            self.missed = self.missed + 1 if replay.k < len(replay.nodes) else 0
            if self.missed >= 2:
                self.prefix, self.eager = False, True


def _detached_outputs(g, tracer, aliases, out_leaves, out_vals):
    """The output positions that hold ``detach()`` (or ``.data``) of a value: a tensor other than the one the
    value is (the input, the external, the op's result), on its array, without history. Eager returns a new
    tensor there, which does not require grad; a plan would return the value's own tensor."""
    own = {}
    for node, outs in zip(g.nodes, tracer.made):
        own.update(zip(node.outs, outs))
    detached = []
    for k, (t, v) in enumerate(zip(out_leaves, out_vals)):
        kind = g.kinds[v]
        base = own.get(v) if kind[0] == "op" else _tensor_of(kind, aliases)
        if base is not None and t is not base and t.grad_fn is None and t._data is base._data:
            detached.append(k)
    return detached


def _output_views(g, out_vals):
    """The outputs of graph ``g`` that eager returns as views (through view ops alone: x.t(), y[0], y.view(-1)) of
    one of its inputs or externals, or of another output, and the outputs returned twice: output position ->
    (("value", input or external value) or ("out", output position), the view nodes from it, in order). A
    plan would return copies, or memory without the base and version counter eager's views share."""
    first = {}
    for k, v in enumerate(out_vals):
        first.setdefault(v, k)
    views = {}
    for k, v in enumerate(out_vals):
        if first[v] != k:
            views[k] = (("out", first[v]), [])
            continue
        chain, base = [], None
        while g.kinds[v][0] == "op":
            node = g.nodes[g.kinds[v][1]]
            if not (node.op.view and node.op.n_outputs == 1 and node.args and node.args[0].__class__ is Ref
                    and not any(a.__class__ is Ref for a in node.args[1:])
                    and not any(p.__class__ in (Ref, Held) for p in node.params.values())):
                break
            chain.append(node)
            v = node.args[0]
            if v in first:
                base = ("out", first[v])
                break
        else:
            base = ("value", v)
        if base is not None and chain:
            views[k] = (base, chain[::-1])
    return views


def _replayable_step(tracer):
    """The loss value of a traced training step whose effects its replay can leave to its own Python: one
    backward() without a gradient argument, no op after an optimizer or scheduler step (the plan would give
    it the parameters before the step). None otherwise."""
    if tracer.backward is None or tracer.backward[1] is not None:
        return None
    n = len(tracer.graph.nodes)
    if any(kind != BACKWARD and kind != "zero_grad" and pos < n for pos, kind, *_ in tracer.effects):
        return None
    return tracer.backward[0]
