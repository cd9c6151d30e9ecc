"""Replay: a variant whose graph ends at a graph break runs its function again, each traced op taking the
value the plan computed, until the function's own Python leaves the traced ops."""
from .._grad_mode import STATE
from .._op import dispatch
from .._trace_hooks import NOT_CAPTURED
from .ir import Held, Ref
from .nodes import _tensor_of


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

    # the replayed Python runs as it would uncompiled: its value reads, side effects and step calls too
    def value_read(self, what):
        pass

    def side_effect(self, what):
        pass

    def step_call(self, kind, owner, fn, args, kwargs):
        return NOT_CAPTURED

    def random_draw(self, gen):
        pass

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
        return traced.keys() == params.keys() and all(self._is(traced[k], v) for k, v in params.items())
