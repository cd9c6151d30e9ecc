"""The autograd nodes of compiled regions: to eager autograd a compiled call is one node, whose backward
runs the region's backward plan, scales the gradients its forward plan computed, or (create_graph, or
outputs of a replayed region) runs the region's ops again and differentiates them."""
import numpy as np

from .._device import backend
from .._grad_mode import STATE, enable_grad
from .._graph import Node, edge
from .._op import dispatch
from .._saved import FREED_MESSAGE, SavedTensor
from .._tensor import Tensor
from ..autograd import engine
from .ir import Held, Ref


def _tensor_of(kind, tensors):
    """The tensor of an input or external value (``kind``: its graph kind) in a call with input ``tensors``."""
    return tensors[kind[1]] if kind[0] == "input" else kind[1]


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
