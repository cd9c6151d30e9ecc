"""OpNode, the graph node of a table op: how dispatch records it and how its backward runs (formulas, fused kernels)."""
import os

import numpy as np

from ._device import backend, may_share_memory
from .kernels import config as KERNEL_CONFIG, cpu as CPU_BACKEND
from ._grad_mode import SPECIAL, STATE
from ._dtype import FROM_NP, INEXACT_NP, REDUCED_NP
from ._factories import zeros
from ._anomaly import record_trace
from ._graph import COMPILED_AUTOGRAD, NO_EDGE, SEQUENCE, Node, accumulate_node
from ._saved import SavedTensor, save_input, save_output
from ._tensor import Tensor

_MISSING = object()


class OpNode(Node):
    """grad_fn of a table op: holds the op, its params, saved tensors and input metadata. Built by
    a recorder (``recorder``: fields set there directly, one node per recorded op); the entry's node_cls subclasses it."""
    __slots__ = ("op", "params", "saved", "input_meta", "_key")
    edge_inputs = None  # the input positions next_functions stand for, in order, where not all (None: all)

    def apply(self, grads):
        op = self.op
        g = grads[0] if op.n_outputs == 1 else tuple(
            grads[k] if grads[k] is not None or k in op.workspace else self._zeros_for_output(k)
            for k in range(self.n_outputs))
        # no graph of the backward: the entry's fused kernels where it has them (variadic entries have none)
        fused = op.derivatives.fused if not STATE.grad_enabled and not op.variadic else None
        meta = self.input_meta
        if fused is not None and _is_complex(g, meta):
            fused = None  # the fused kernels are real math: complex gradients run the formulas (with their conj)
        # a backward that jitgrad.compile traces records the entry's fused kernels as ops (Derivatives.fused_ops)
        traced = fused is None and SPECIAL[0] and not op.variadic and getattr(STATE.capture, "fused_vjps", False) \
            and not _is_complex(g, meta)
        # a backward on cotangents batched by vmap whose graph nobody keeps (jacrev's): vmap's hook runs the fused
        # elementwise kernels on the whole batch where it can (batched_fused: None where it cannot; not where
        # tangents ride on the formulas)
        batched = fused is None and SPECIAL[0] and op.n_outputs == 1 and not op.variadic and \
            getattr(STATE.vmap, "no_graph", False) and STATE.dual is None and not _is_complex(g, meta)
        out = []
        edges = self.edge_inputs
        functions = traced and getattr(STATE.capture, "fused_functions", False)
        if functions:  # the inputs whose fused VJP functions run, recorded as one call (they may share a computation)
            functions = _call_fused_functions(self, g)
        for i, nf in enumerate(self.next_functions):
            if edges is not None:
                i = edges[i]
            if nf[0] is None:
                out.append(None)
                continue
            spec = fused[i] if fused is not None else None
            if traced and op.n_outputs == 1 and op.derivatives.fused_ops[i] is not None:
                gi = _call_fused_op(self, op.derivatives.fused_ops[i], op.derivatives.fused[i][1], g)
            elif functions and i in functions:
                gi = functions[i]
            elif spec is not None and (spec.__class__ is tuple or not _reduced_operands(self, g)):
                gi = run_fused(self, spec, g)
            elif batched and op.derivatives.fused[i].__class__ is tuple and \
                    (gi := STATE.vmap.batched_fused(self, op.derivatives.fused[i], g)) is not None:
                pass
            elif op.variadic:
                gi = op.derivatives.vjp[0](g, self, i)
            else:
                gi = op.derivatives.vjp[i](g, self)
            if gi is not None:
                shape, dtype = meta[i]
                d = gi._data
                if d.shape != shape:
                    gi = gi.sum_to_size(shape)
                if d.dtype != dtype:
                    if d.dtype.kind == "c" and dtype.kind != "c":
                        gi = gi.real  # a real input's gradient is the real part (PyTorch's handle_r_to_c)
                    gi = gi.to(FROM_NP[dtype])
            out.append(gi)
        return out

    def _zeros_for_output(self, k):
        shape, dtype = self.params["_out_meta"][k]
        return zeros(shape, dtype=dtype)

    def __getattr__(self, name):
        # Saved values for the VJP formulas (s.self, s.result, s.dim) and PyTorch's
        # grad_fn._saved_self / grad_fn._raw_saved_self attributes.
        raw = name.startswith("_raw_saved_")
        key = name[11:] if raw else name[7:] if name.startswith("_saved_") else name
        saved = object.__getattribute__(self, "saved")
        if key in saved:
            v = saved[key]
            if raw:
                return v
            return v.unpack() if isinstance(v, SavedTensor) else v
        params = object.__getattribute__(self, "params")
        if key in params:
            return params[key]
        defaults = object.__getattribute__(self, "op").exposure.params  # a param left at its default is not passed
        if key in defaults:
            return defaults[key]
        if key.endswith("_shape"):
            inputs = object.__getattribute__(self, "op").inputs
            if key[:-6] in inputs:
                return object.__getattribute__(self, "input_meta")[inputs.index(key[:-6])][0]
        if key != name and _may_save(object.__getattribute__(self, "op"), key):
            return None  # PyTorch: a saved attribute of an input that needed no gradient this time is None
        raise AttributeError("'%s' object has no attribute '%s'" % (type(self).__name__, name))

    def result_moved_to(self, t):
        """An in-place form wrote this node's result into ``t``: the saved result is ``t`` now."""
        if "result" in self.saved:
            self.saved["result"] = SavedTensor(t, is_output=True, node=self)

    def _release(self):
        for v in self.saved.values():
            if v.__class__ is SavedTensor:
                v.release()


def _is_complex(g, meta):
    """Whether a node's output gradient or one of its differentiable inputs is complex."""
    for t in g if g.__class__ is tuple else (g,):
        if t is not None and t._data.dtype.kind == "c":
            return True
    for m in meta:
        if m is not None and m[1].kind == "c":
            return True
    return False


def _reduced_operands(node, g):
    """Whether a float16/bfloat16 array is among the gradients or saved tensors of ``node``: a fused VJP
    function (softmax's) then gives way to the formula, whose ops compute in float32."""
    for t in g if g.__class__ is tuple else (g,):
        if t is not None and t._data.dtype in REDUCED_NP:
            return True
    for v in node.saved.values():
        d = v._data if v.__class__ is SavedTensor else v
        d = d._data if isinstance(d, Tensor) else d
        if getattr(d, "dtype", None) in REDUCED_NP:
            return True
    return False


def run_fused(node, spec, g):
    if callable(spec):  # a fused VJP that is not elementwise (softmax): spec(g, node) -> Tensor
        return spec(g, node)
    kernel, names = spec
    garr = g._data
    dt = garr.dtype
    shape = garr.shape
    saved = node.saved
    args = []
    pattern = []  # per argument: an array of g's shape (True) or a scalar (False); None once that fails
    low = False  # a float16/bfloat16 argument: the kernel runs on float32 copies (the caller rounds its result)
    for n in names:
        if n == "g":
            args.append(garr)
        else:
            v = saved.get(n, _MISSING)
            if v.__class__ is SavedTensor:
                if v._vc[0] == v._version and v._hooks is None:  # SavedTensor.unpack_data, inlined
                    d = v._data
                    args.append(d if v._node is not None else d._data)
                else:
                    args.append(v.unpack_data())
            elif v is _MISSING:  # a param (negative_slope), or the constant 0 of a select
                args.append(dt.type(0 if n == "zero" else getattr(node, n)))
            else:
                args.append(v._data if isinstance(v, Tensor) else dt.type(v))
        x = args[-1]
        if x.dtype in REDUCED_NP:
            low = True
        if pattern is not None:
            if x.__class__ is not np.ndarray:
                pattern.append(False)
            elif x.shape == shape:
                pattern.append(True)
            else:
                pattern = None
    if low:
        dt = np.dtype(np.float32)
        args = [(a.astype(dt) if isinstance(a, (np.ndarray, np.generic)) else backend(a).astype(a, dt))
                if a.dtype in REDUCED_NP else a for a in args]
    if garr.__class__ is np.ndarray:
        if pattern is not None and len(shape) == 1 and shape[0] < KERNEL_CONFIG.PARALLEL_THRESHOLD:
            out = np.empty(shape, dt)  # 1-D operands of one shape: the serial flat loop itself
            CPU_BACKEND.flat_loop(kernel, tuple(pattern))(*args, out)
            return Tensor._wrap(out)
        return Tensor._wrap(CPU_BACKEND.run(kernel, dt, *args))
    return Tensor._wrap(backend(garr).run(kernel, dt, *args))


def _call_fused_op(node, fop, names, g):
    """A fused VJP kernel through dispatch (its op ``fop``), on the gradient, saved tensors and params."""
    args = []
    for n in names:
        v = node.saved.get(n, _MISSING) if n != "g" else g
        if v.__class__ is SavedTensor:
            v = v.unpack()  # (version-checked; the forward's own array, which the trace knows)
        elif v is _MISSING:  # a param (negative_slope)
            v = getattr(node, n)
        args.append(v)
    return fop.exposure.call(*args)


# the op that runs the fused VJP functions of a node: n operands, k results (set by _op.py, which defines ops); see
# _call_fused_functions
FUSED_FUNCTION_OP = [None]
_EDGE = (True, 0)  # a stand-in node's entry for an input that takes a gradient


class FusedCall:
    """What a node's fused VJP functions (softmax's: ``fn(g, node)``) read of it, without the node's tensors: a traced
    backward records their calls as one op whose operands are the gradient and those tensors, and whose results are
    the gradients of the inputs ``ks`` (compiled autograd's plans then run the functions the engine runs, to their
    last bit, on one stand-in node: the parts they share, an RNN layer's or attention's, are computed once)."""
    __slots__ = ("op", "ks", "saved", "params", "tensor_params", "meta", "edges", "n_grads")

    def node(self, arrays):
        """A stand-in node holding ``arrays`` (the saved tensors', then the tensor params') where the node's were."""
        node = _new(self.op.node_cls)
        node.op, node.input_meta, node.next_functions, node._seq = self.op, self.meta, self.edges, 0
        it = iter(arrays)
        node.saved = {n: save_input(Tensor._wrap(next(it))) if v is _MISSING else v for n, v in self.saved}
        params = dict(self.params)
        for n in self.tensor_params:
            params[n] = Tensor._wrap(next(it))
        node.params = params
        return node


def _call_fused_functions(node, g):
    """{input position: its gradient} for the inputs of ``node`` whose fused VJP is a function (not a kernel op),
    recorded as one call; None where there are none."""
    op = node.op
    fused, fused_ops = op.derivatives.fused, op.derivatives.fused_ops
    if fused is None:
        return None
    edges = node.edge_inputs
    ks = []
    for i, nf in enumerate(node.next_functions):
        if edges is not None:
            i = edges[i]
        if nf[0] is not None and callable(fused[i]) and not (op.n_outputs == 1 and fused_ops[i] is not None):
            ks.append(i)
    if not ks:
        return None
    call = FusedCall()
    call.op, call.ks, call.meta = op, tuple(ks), node.input_meta
    call.edges = tuple(NO_EDGE if nf[0] is None else _EDGE for nf in node.next_functions)
    args = list(g) if g.__class__ is tuple else [g]  # (a node of several outputs: a gradient for each)
    call.n_grads = len(args)
    call.saved = []
    for n, v in node.saved.items():
        if v.__class__ is SavedTensor:
            args.append(v.unpack())
            v = _MISSING
        elif isinstance(v, Tensor):
            args.append(v)
            v = _MISSING
        call.saved.append((n, v))
    call.params = {k: v for k, v in node.params.items() if not isinstance(v, Tensor)}
    call.tensor_params = [k for k, v in node.params.items() if isinstance(v, Tensor)]
    args += [node.params[k] for k in call.tensor_params]
    grads = FUSED_FUNCTION_OP[0](len(args), len(ks)).exposure.call(*args, vjp=call)
    return dict(zip(ks, grads if len(ks) > 1 else (grads,)))


def record(op, args, params, out, grad=None, recorder=None):
    """Wrap kernel output(s) as tensors; attach a grad_fn when grad mode is on and an input needs grad (by
    ``recorder`` where given: dispatch's plan holds the one for its operands)."""
    if op.n_outputs == 1:
        result = Tensor._wrap(out)
        outs = (result,)
    else:
        outs = tuple(Tensor._wrap(o) for o in out)
        result = outs
    if op.view:
        if op.n_outputs == 1:
            _mark_view(result, args[0], op, params, None)
        else:
            for k, o in enumerate(outs):
                _mark_view(o, args[0], op, params, k)
    if STATE.inference or not STATE.grad_enabled or not op.differentiable:
        return result  # (in inference mode _wrap has marked the outputs as inference tensors)
    if grad is None:
        grad = any(isinstance(a, Tensor) and a._requires_grad for a in args)
    if grad:
        (recorder or recorder_for(op, args))(args, params, outs)
    return result


def _mark_view(view, src, op, params, k):
    """A view shares its source's storage and version counter, and remembers how it was taken: (op, params,
    which of its outputs or None)."""
    if may_share_memory(view._data, src._data):
        view._vc = src._vc
        base = src._base
        view._base = src if base is None else base
        view._view_chain = src._view_chain + ((op, params, k),)


def _may_save(op, name):
    """Whether ``op`` saves ``name`` for some pattern of inputs requiring grad."""
    inputs, outputs = _save_plan(op, (1 << (1 if op.variadic else len(op.inputs))) - 1)
    return any(n == name for n, _ in inputs + outputs)


def _save_plan(op, active):
    """(inputs, outputs) to save, as (name, position), when the inputs flagged in bit mask ``active``
    need gradients (cached per op and pattern)."""
    plan = op._plans.get(active)
    if plan is None:
        wanted = []
        for i in range(active.bit_length()):
            if active >> i & 1:
                wanted += [n for n in op.derivatives.saves[0 if op.variadic else i] if n not in wanted]
        inputs = [] if op.variadic else [(n, op.inputs.index(n)) for n in wanted if n in op.inputs]
        outputs = [(n, op.outputs.index(n)) for n in wanted if n in op.outputs]
        plan = op._plans[active] = (inputs, outputs)
    return plan


def recorder_for(op, args):
    """The recorder generated for ``op`` and the pattern of ``args`` (which are tensors)."""
    key = "variadic" if op.variadic else tuple(isinstance(a, Tensor) for a in args)
    rec = op._recorders.get(key)
    if rec is None:
        rec = op._recorders[key] = recorder(op, key)
    return rec


# A recorder is straight-line code for one entry and one pattern of operands, generated from the templates below:
# recording runs once per op, and on small tensors the loops, lookups and branches of a general recorder were most of
# its cost. Operand i's code sets ei (its edge: the node its gradient flows into), mi (the (shape, NumPy dtype) that
# gradient is brought back to, None when it takes none) and ki (its part of the node's structural key).
_OPERAND = {
    # a tensor whose input has a VJP
    "grad": """\
if {a}._requires_grad:
    f = {a}.grad_fn
    if f is not None:
        nr = {a}._output_nr
        e{s} = (f, nr)
        k{s} = f._key if not nr else (f._key, nr)
    else:  # a leaf: its AccumulateGrad node, alive while a graph holds it (accumulate_node makes one)
        r = {a}._acc_node
        f = r() if r is not None else None
        if f is None:
            f = accumulate_node({a})
        e{s} = (f, 0)
        k{s} = f._key
    d = {a}._data
    m{s} = (d.shape, d.dtype)
    active |= {bit}
else:
    d = {a}._data
    e{s}, m{s}, k{s} = NO_EDGE, None, (d.shape, d.dtype)  # (NO_EDGE: PyTorch's entry for an input without a gradient)
""",
    # a tensor whose input takes no gradient (an index)
    "tensor": """\
d = {a}._data
e{s}, m{s}, k{s} = NO_EDGE, None, (d.shape, d.dtype)
""",
    # a number, None, a dtype...
    "other": """\
e{s}, m{s}, k{s} = NO_EDGE, None, {a} if {a}.__class__ in _PLAIN else key_of({a})
""",
}

# The node: its structural key (Node._key: the entry, the keys of the nodes its gradients flow into, which imply
# their shapes, the other operands' shapes and dtypes, the numbers and the params; compiled autograd finds a
# graph's plan by its roots' keys), its edges and input metadata, the saved inputs and outputs (the result is checked
# for in-place changes; other outputs, indices, are not; a workspace is freed with the saved inputs after backward).
_NODE = """\
node = _new(cls)
node.next_functions = {edges}
node._key = hash(({keys}, key_of(params)) if params else ({keys},)) if COMPILED_AUTOGRAD["enabled"] else 0
node._seq = _next_seq()
node.op = op
node.input_meta = {meta}
node.params = {params}
if SPECIAL[0] and STATE.anomaly:
    record_trace(node)
"""
# what it saves: for each pattern of the inputs that take gradients (active), the inputs and outputs _save_plan names
_SAVE = """\
plan = plans.get(active)
inputs, save_outputs = plan if plan is not None else _save_plan(op, active)
node.saved = saved = {}
for name, i in inputs:
    a = args[i]
    saved[name] = save_input(a) if isinstance(a, Tensor) else a
"""
_ONE_OUTPUT = """\
o = outs[0]
if o._data.dtype in INEXACT_NP:
    o.grad_fn = node
    o._requires_grad = True
for name, _ in save_outputs:
    saved[name] = save_output(o, node)
return node
"""
_OUTPUTS = """\
for k, o in enumerate(outs):
    if o._data.dtype in INEXACT_NP and k not in workspace:
        o.grad_fn = node
        if k:
            o._output_nr = k
        o._requires_grad = True
for name, k in save_outputs:
    saved[name] = save_output(outs[k], node) if k == 0 else save_input(outs[k]) if k in workspace else outs[k]
return node
"""


def recorder(op, pattern):
    """The recorder ``rec(args, params, outs) -> node`` of ``op`` for operands whose k-th is a tensor where
    ``pattern[k]`` (``"variadic"``: a variadic entry's tensors, any number of them)."""
    vjp = op.derivatives.vjp
    lines = ["def record(args, params, outs):", "    active = 0"]
    if pattern == "variadic":
        cls = op.node_cls
        kind = "grad" if vjp[0] is not None else "tensor"
        lines += ["    nexts, meta, keys = [], [], [op]", "    for i, a in enumerate(args):"]
        lines += ["        " + x for x in _OPERAND[kind].format(a="a", bit="1 << i", s="").splitlines()]
        lines += ["        nexts.append(e)", "        meta.append(m)", "        keys.append(k)"]
        edges, keys, meta = "tuple(nexts)", "*keys", "meta"
    else:
        cls = op.node_cls if op.scalar_nodes is None or all(pattern) else op.scalar_nodes[pattern.index(False)]
        n = len(pattern)
        if n:
            lines.append("    %s, = args" % ", ".join("a%d" % i for i in range(n)))
        for i, tensor in enumerate(pattern):
            kind = "other" if not tensor else "grad" if vjp[i] is not None else "tensor"
            lines += ["    " + x for x in _OPERAND[kind].format(a="a%d" % i, bit=1 << i, s=i).splitlines()]
        taken = range(n) if cls.edge_inputs is None else cls.edge_inputs
        edges = "(%s)" % "".join("e%d, " % i for i in taken)
        keys = "op, " + ", ".join("k%d" % i for i in range(n))
        meta = "[%s]" % ", ".join("m%d" % i for i in range(n))
    params = "params" if op.n_outputs == 1 else "dict(params, _out_meta=[(o.shape, o.dtype) for o in outs])"
    lines += ["    " + x for x in _NODE.format(edges=edges, keys=keys, meta=meta, params=params).splitlines()]
    lines += ["    " + x for x in _saves(op, pattern).splitlines()]
    if op.n_outputs is None:
        lines.append("    node.n_outputs = len(outs)")
    tail = _ONE_OUTPUT if op.n_outputs == 1 and not op.workspace else _OUTPUTS
    lines += ["    " + x for x in tail.splitlines()]
    namespace = dict(op=op, cls=cls, plans=op._plans, workspace=op.workspace, Tensor=Tensor, NO_EDGE=NO_EDGE,
                     _PLAIN=_PLAIN, key_of=key_of, accumulate_node=accumulate_node, _save_plan=_save_plan, _new=_new,
                     _next_seq=_next_seq, COMPILED_AUTOGRAD=COMPILED_AUTOGRAD, SPECIAL=SPECIAL, STATE=STATE,
                     record_trace=record_trace, save_input=save_input, save_output=save_output,
                     INEXACT_NP=INEXACT_NP)
    # (named as a file of this package: anomaly mode's traces end at the user's line, before jitgrad's frames)
    exec(compile("\n".join(lines) + "\n", os.path.join(os.path.dirname(__file__), "<recorder of %s>" % op.name),
                 "exec"), namespace)
    return namespace["record"]


def _saves(op, pattern):
    """The code that saves what the node's VJPs read: a dict literal per pattern of inputs taking gradients where
    there are few such inputs, else the general loop."""
    grads = [] if pattern == "variadic" else [
        i for i, tensor in enumerate(pattern) if tensor and op.derivatives.vjp[i] is not None]
    if pattern == "variadic" or not grads or len(grads) > 3:
        return _SAVE
    code = []
    for n in range(1, 1 << len(grads)):
        active = sum(1 << i for k, i in enumerate(grads) if n >> k & 1)
        inputs, outputs = _save_plan(op, active)
        items = ["%r: %s" % (name, "save_input(a%d)" % i if pattern[i] else "a%d" % i) for name, i in inputs]
        code += ["if active == %d:" % active if n == 1 else "elif active == %d:" % active,
                 "    node.saved = saved = {%s}" % ", ".join(items),
                 "    save_outputs = %r" % (outputs,)]
    return "\n".join(code) + "\nelse:\n" + "".join("    " + x + "\n" for x in _SAVE.splitlines())


_new = object.__new__
_next_seq = SEQUENCE.__next__
_PLAIN = frozenset((int, float, bool, type(None)))
_HASHABLE = frozenset((int, float, bool, str, type(None), type(Ellipsis), np.dtype))


def key_of(v):
    """A non-tensor operand or param as part of a node's key: values that stay the same from one step to the next
    (tensors and arrays by shape and dtype, other objects by their type: compiled autograd's full key decides)."""
    c = v.__class__
    if c in _HASHABLE or isinstance(v, np.generic) or c.__module__ == "jitgrad._dtype":
        return v
    if c is tuple or c is list or isinstance(v, tuple):  # (plain items inline: a reduction's dims, every op)
        return (c,) + tuple([x if x.__class__ in _HASHABLE else key_of(x) for x in v])
    if c is dict:
        return tuple([(k, x if x.__class__ in _HASHABLE else key_of(x)) for k, x in v.items()])
    if c is slice:
        return (c, key_of(v.start), key_of(v.stop), key_of(v.step))
    d = v._data if isinstance(v, Tensor) else v
    shape = getattr(d, "shape", None)
    return (c, shape, getattr(d, "dtype", None)) if shape.__class__ is tuple else c
