"""Compiled functions at run time: guards, variants, re-tracing, the one autograd node
(CompiledFunctionBackward) that a compiled region is to eager autograd, and a compiled training
step's effects (its backward plan with the accumulation into ``.grad``, optimizer calls)."""
import warnings

import numpy as np

from .._device import backend
from .._dtype import REDUCED_NP
from ..kernels import config
from .._grad_mode import STATE, enable_grad, no_grad
from .._graph import Node, accumulate_into, edge
from .._op import dispatch
from .._saved import FREED_MESSAGE, SavedTensor
from .._tensor import Tensor
from ..autograd import engine
from . import stats
from ..kernels.conv import KeptColumns
from .capture import BACKWARD, Held, Ref, Unsupported, trace, trace_backward
from .tape import SMALL, compile_plan
from .fusion import elementwise_backward, joint_graph, with_recompute

MAX_VARIANTS = 8
MAX_SHAPES = 32  # variants kept of one function that differ only in shapes (unless dynamic=False)


# ------------------------------------------------------------------ argument trees
def flatten(obj, leaves):
    """A hashable description of ``obj``'s structure; its tensors are appended to ``leaves``."""
    if isinstance(obj, Tensor):
        leaves.append(obj)
        return "T"
    t = type(obj)
    if t is tuple or t is list:
        return (t.__name__, tuple(flatten(x, leaves) for x in obj))
    if t is dict:
        return ("dict", tuple((k, flatten(v, leaves)) for k, v in obj.items()))
    if isinstance(obj, tuple):  # a named tuple (max's values, indices)
        return ("ntuple", tuple(flatten(x, leaves) for x in obj), t)
    try:
        hash(obj)
    except TypeError:
        return ("id", _ByIdentity(obj))
    return ("c", t, obj)


class _ByIdentity:
    """An unhashable argument or result in a structure key: equal only to itself."""
    __slots__ = ("obj",)

    def __init__(self, obj):
        self.obj = obj

    def __hash__(self):
        return id(self.obj)

    def __eq__(self, other):
        return isinstance(other, _ByIdentity) and other.obj is self.obj


def unflatten(spec, leaves, it=None):
    it = iter(leaves) if it is None else it
    if spec == "T":
        return next(it)
    kind = spec[0]
    if kind in ("tuple", "list"):
        items = [unflatten(s, leaves, it) for s in spec[1]]
        return tuple(items) if kind == "tuple" else items
    if kind == "dict":
        return {k: unflatten(s, leaves, it) for k, s in spec[1]}
    if kind == "ntuple":
        items = [unflatten(s, leaves, it) for s in spec[1]]
        return spec[2](*items) if hasattr(spec[2], "_fields") else spec[2](items)
    return spec[-1] if kind == "c" else spec[1].obj


def tensor_key(t):
    d = t._data
    on_host = d.__class__ is np.ndarray  # (device arrays come in more than one class)
    contiguous = d.flags.c_contiguous if on_host else backend(d).is_contiguous(d)
    return (d.shape, d.dtype, on_host, t._requires_grad, contiguous)


def _tensor_of(kind, tensors):
    """The tensor of an input or external value (``kind``: its graph kind) in a call with input ``tensors``."""
    return tensors[kind[1]] if kind[0] == "input" else kind[1]


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
        """A scalar output on the CPU whose backward is elementwise math (and full sums): its gradients at an
        output gradient of one come out of the forward plan's own loops (``self.joint``); the backward only
        scales them. True where that applies."""
        out = g.arrays[grad_out_vals[0]]
        grad_vals = [gr for gr in grads if gr is not None]
        if not (owner.fuse and len(grad_out_vals) == 1 and out.__class__ is np.ndarray and out.ndim == 0
                and grad_vals and not JOINT_MAX_SIZE < max(a.size for a in g.arrays) < JOINT_MIN_SIZE
                and elementwise_backward(bg)):
            return False
        joint = joint_graph(g, bg, grad_vals, Tensor._wrap(np.ones((), out.dtype)))
        if any(joint[0].kinds[v][0] != "op" for v in joint[1]):  # a gradient that is an input: no loop to fuse
            return False
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


class Replay:
    """Installed as STATE.capture while a variant with a graph break runs its function again: each op call
    that is the graph's next node, on the same operands (the call's inputs, the externals, the tensors this
    replay returned, by identity; numbers and parameters by type and value), returns that node's tensors as
    the plan computed them. The first call that is not, and every call after the graph's last node, runs
    eagerly: the function's own Python decides, as it would uncompiled."""

    __slots__ = ("nodes", "k", "objs")

    def __init__(self, variant, values, tensors):
        g = variant.graph
        self.nodes = g.nodes
        self.k = 0
        self.objs = {}  # value -> the tensor a matching call passes for it
        for v, kind in enumerate(g.kinds):
            if kind[0] in ("input", "ext"):
                self.objs[v] = _tensor_of(kind, tensors)
        outs = iter(values)
        for node in g.nodes:
            for v in node.outs:
                self.objs[v] = next(outs)

    def __call__(self, op, args, params):
        k = self.k
        node = self.nodes[k]
        if node.op is op and self._same(node.args, args) and self._same_params(node.params, params):
            self.k = k + 1
            STATE.capture = None
            if op.view:  # made as eager makes it: a view of the replayed tensor, sharing its memory and version
                out = dispatch(op, args, params)
                for v, o in zip(node.outs, out if isinstance(out, tuple) else (out,)):
                    self.objs[v] = o
            else:
                out = self.objs[node.outs[0]] if op.n_outputs == 1 else tuple(self.objs[v] for v in node.outs)
            if self.k < len(self.nodes):
                STATE.capture = self
            return out
        STATE.capture = None
        return dispatch(op, args, params)

    def optimizer_call(self, opt, name, arg):
        return False  # an optimizer's step() or zero_grad() in the replayed Python: it runs

    def _is(self, traced, a):
        if traced.__class__ is Ref:
            return a is self.objs.get(traced)
        if traced.__class__ is Held:  # an index key: the same arrays, those of the values by identity
            return self._is_key(traced.template, a)
        if a is traced:
            return True
        try:
            return a.__class__ is traced.__class__ and bool(a == traced)
        except (TypeError, ValueError):  # (arrays)
            return False

    def _is_key(self, traced, a):
        if traced.__class__ is Ref:
            t = self.objs.get(traced)
            return t is not None and a is t._data
        if traced.__class__ in (tuple, list):
            return a.__class__ is traced.__class__ and len(a) == len(traced) and all(
                self._is_key(x, y) for x, y in zip(traced, a))
        return self._is(traced, a)

    def _same(self, traced, args):
        return len(traced) == len(args) and all(self._is(r, a) for r, a in zip(traced, args))

    def _same_params(self, traced, params):
        params = {k: v for k, v in params.items() if v.__class__ is not KeptColumns}
        return traced.keys() == params.keys() and all(self._is(traced[k], v) for k, v in params.items())


class CompiledStepBackward(Node):
    """The grad_fn of what a compiled training step returns from its graph (its loss): the step's own
    backward has run and, as in eager, freed the graph."""
    __slots__ = ()

    def apply(self, grads):
        raise RuntimeError(FREED_MESSAGE)


def _attach_outputs(node, outs):
    """Make ``node`` (a region's backward node) the grad_fn of ``outs``, noting their shapes and dtypes and the
    array module of their device (for the zero gradients of outputs a backward leaves out)."""
    node.n_outputs = len(outs)
    node.out_meta = [(o._data.shape, o._data.dtype) for o in outs]
    node.xp = backend(outs[0]._data)
    for k, o in enumerate(outs):
        o.grad_fn, o._output_nr, o._requires_grad = node, k, True


class CompiledFunctionBackward(Node):
    """The autograd node of a compiled region: runs its backward plan, or (create_graph) replays the
    region's ops eagerly and differentiates them with the VJP formulas."""
    __slots__ = ("variant", "saved_inputs", "saved", "n_outputs", "out_meta", "xp", "freed")

    def __init__(self, variant, tensors, arrays, saved, outs, returned=()):
        super().__init__(tuple([edge(tensors[x] if kind == "input" else x) for kind, x in variant.leaf_sources]))
        self.variant = variant
        # the region's input tensors, checked for in-place changes when backward reads them
        self.saved_inputs = [SavedTensor(t if p is None else tensors[p])
                             for t, p in zip(variant.fwd_sources, variant.input_pos)]
        self.freed = False
        _attach_outputs(self, outs)
        if variant.joint is None and returned:
            # a saved value the region also returns is saved as that tensor: written in place since, the
            # backward raises PyTorch's error, as eager's would (its array would give wrong gradients)
            by_array = {id(o._data): o for o in returned}
            saved = [SavedTensor(by_array[id(a)]) if id(a) in by_array else a for a in saved]
        self.saved = saved

    def apply(self, grads):
        if self.freed:
            raise RuntimeError(FREED_MESSAGE)
        v = self.variant
        if STATE.grad_enabled:
            return self._replay(grads)
        if v.joint is not None:
            return self._scaled(grads[0])
        args = []
        for kind, x in v.bargs:
            if kind == 0:  # an output's gradient
                g = grads[x]
                args.append(g._data if g is not None else self.xp.zeros(*self.out_meta[x]))
            elif kind == 1:  # a forward value the forward plan saved
                a = self.saved[x]
                args.append(a.unpack_data() if a.__class__ is SavedTensor else a)
            elif kind == 2:  # an input of the region (version-checked)
                args.append(self.saved_inputs[x].unpack_data())
            else:  # a constant of the backward graph
                args.append(x._data)
        return [Tensor._wrap(r) for r in v.bplan.fn(*args)]

    def _scaled(self, g):
        """The gradients the forward plan computed at an output gradient of one, times ``g``. They are handed
        over once; a retained graph's next backward computes them again from the (version-checked) inputs."""
        v = self.variant
        for x in v.joint_reads:
            self.saved_inputs[x].unpack_data()  # PyTorch's error for an input changed in place since
        grads = self.saved
        if grads is None:
            grads = v.plan.fn(*[s.unpack_data() for s in self.saved_inputs])[len(v.out_vals):]
        self.saved = None
        d = g._data
        if d != 1:  # new arrays: a gradient may be a view of a plan constant
            # (NumPy's product of two 0-d arrays is a scalar: made an array again)
            grads = [np.asarray(a * d.astype(a.dtype)) if a.__class__ is np.ndarray else a * d.astype(a.dtype)
                     for a in grads]
        return [Tensor._wrap(a) for a in grads]

    def _replay(self, grads):
        """create_graph: the region's ops again through dispatch (recorded), then the engine's grad."""
        v = self.variant
        return _rerun_grads(v, self.saved_inputs, v.grad_outs, v.leaf_vals, grads, self.out_meta, self.xp, True)

    def _release(self):
        self.saved = None
        for s in self.saved_inputs:
            if s is not None:
                s.release()
        self.freed = True


def _rerun_grads(v, saved_inputs, out_idx, leaf_vals, grads, out_meta, xp, create_graph, nodes=None):
    """The gradients of variant ``v``'s outputs ``out_idx`` (given ``grads``) with respect to its values
    ``leaf_vals`` (None for one the rerun does not read): the region's ops (or the ``nodes`` given) again
    through dispatch, from its version-checked inputs (those ``saved_inputs`` not None), then the engine."""
    env = {b: s.unpack() for b, s in zip(v.boundary, saved_inputs) if s is not None}
    graph_nodes = v.graph.nodes
    with enable_grad():
        for node in (graph_nodes if nodes is None else [graph_nodes[i] for i in sorted(nodes)]):
            args = [env[a] if a.__class__ is Ref else a for a in node.args]
            params = {k: env[p] if p.__class__ is Ref else p.fill(lambda r: env[r]._data) if p.__class__ is Held
                      else p for k, p in node.params.items()}
            out = dispatch(node.op, tuple(args), params)
            for val, o in zip(node.outs, out if isinstance(out, tuple) else (out,)):
                env[val] = o
        outs = [env[v.out_vals[k]] for k in out_idx]
        read = [b for b in leaf_vals if b in env]
        gs = [gr if gr is not None else Tensor._wrap(xp.zeros(*m)) for gr, m in zip(grads, out_meta)]
        res = engine.grad(outs, [env[b] for b in read], gs, retain_graph=create_graph, create_graph=create_graph,
                          allow_unused=True)
    found = dict(zip(read, res))
    return [found.get(b) for b in leaf_vals]


class RegionReplayBackward(Node):
    """The autograd node of the outputs of a step's replayed region other than its loss (activations, logits
    the step's Python holds): their backward, should one run, reruns the region's ops eagerly and
    differentiates them. The loss's own gradients come from the backward plan (CompiledFunctionBackward)."""
    __slots__ = ("variant", "saved_inputs", "n_outputs", "out_meta", "xp", "loss_node")

    def __init__(self, variant, tensors, outs, loss_node):
        g = variant.graph
        super().__init__(tuple(edge(_tensor_of(g.kinds[v], tensors)) for v in variant.replay_leaf_vals))
        self.variant = variant
        self.saved_inputs = [SavedTensor(t if p is None else tensors[p]) if b in variant.replay_reads else None
                             for b, t, p in zip(variant.boundary, variant.fwd_sources, variant.input_pos)]
        self.loss_node = loss_node
        _attach_outputs(self, outs)

    def apply(self, grads):
        v = self.variant
        given = [i for i, gr in enumerate(grads) if gr is not None]
        if self.loss_node is not None and self.loss_node.freed and set(given) & set(v.replay_shared):
            raise RuntimeError(FREED_MESSAGE)  # as eager: the loss's backward freed the graph these belong to
        nodes = set().union(*[v.replay_deps[i][0] for i in given])
        reads = set().union(*[v.replay_deps[i][1] for i in given])
        saved = [s if b in reads else None for b, s in zip(v.boundary, self.saved_inputs)]
        return _rerun_grads(v, saved, [v.replay_outs[i] for i in given], v.replay_leaf_vals, [grads[i] for i in given],
                            [self.out_meta[i] for i in given], self.xp, STATE.grad_enabled, nodes)


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


# ------------------------------------------------------------------ the compiled callable
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
        if STATE.capture is not None:  # called while another compiled function traces: inline it
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


__all__ = ["CompiledFunction", "CompiledFunctionBackward", "Unsupported"]
