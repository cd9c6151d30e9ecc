"""OpNode, the graph node of a table op: how dispatch records it and how its backward runs (formulas, fused kernels)."""
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
    ``_attach`` (fields set there directly: one node per recorded op); the entry's node_cls subclasses it."""
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


def record(op, args, params, out, grad=None):
    """Wrap kernel output(s) as tensors; attach a grad_fn when grad mode is on and an input needs grad."""
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
        _attach(op, args, params, outs)
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


def _scalar_node(op, args):
    for k, a in enumerate(args):
        if not isinstance(a, Tensor):
            return op.scalar_nodes[k]
    return op.node_cls


def _attach(op, args, params, outs):
    nexts = []
    meta = []  # per input that takes a gradient: (shape, NumPy dtype) the gradient is brought back to
    active = 0  # bit i: input i takes a gradient
    vjp = op.derivatives.vjp
    variadic = op.variadic
    # the node's structural key (hashed below; Node._key): the entry, the keys of the nodes its gradients flow into
    # (which imply their shapes), the other operands' shapes and dtypes, the scalars and the params: compiled
    # autograd finds a graph's plan by its roots' keys
    key = [op]
    for i, a in enumerate(args):
        if isinstance(a, Tensor):
            d = a._data
            if a._requires_grad and vjp[0 if variadic else i] is not None:
                fn = a.grad_fn
                if fn is not None:
                    nr = a._output_nr
                    nexts.append((fn, nr))
                    key.append(fn._key if not nr else (fn._key, nr))
                else:  # a leaf: its AccumulateGrad node, alive while a graph holds it (accumulate_node makes one)
                    ref = a._acc_node
                    fn = ref() if ref is not None else None
                    if fn is None:
                        fn = accumulate_node(a)
                    nexts.append((fn, 0))
                    key.append(fn._key)
                meta.append((d.shape, d.dtype))
                active |= 1 << i
            else:
                nexts.append(NO_EDGE)  # PyTorch's entry for an input that takes no gradient
                meta.append(None)
                key += (d.shape, d.dtype)
        else:
            nexts.append(NO_EDGE)
            meta.append(None)
            key.append(a if a.__class__ in _PLAIN else key_of(a))
    keyed = COMPILED_AUTOGRAD["enabled"]  # (the key costs a hash of the params per op: only when it is read)
    if params and keyed:
        key.append(key_of(params))
    plan = op._plans.get(active)
    inputs, save_outputs = plan if plan is not None else _save_plan(op, active)
    single = op.n_outputs == 1
    if not single:
        params = dict(params)
        params["_out_meta"] = [(o.shape, o.dtype) for o in outs]
    cls = op.node_cls if op.scalar_nodes is None else _scalar_node(op, args)
    node = _new(cls)
    if op.n_outputs is None:
        node.n_outputs = len(outs)
    node.next_functions = tuple(nexts) if cls.edge_inputs is None else tuple(nexts[i] for i in cls.edge_inputs)
    node._key = hash(tuple(key)) if keyed else 0
    node._seq = _next_seq()
    node.op = op
    node.input_meta = meta
    node.params = params
    node.saved = saved = {}
    if SPECIAL[0] and STATE.anomaly:
        record_trace(node)
    for name, i in inputs:
        a = args[i]
        saved[name] = save_input(a) if isinstance(a, Tensor) else a
    if single and not op.workspace:  # (one output: the loop below, unrolled)
        o = outs[0]
        if o._data.dtype in INEXACT_NP:
            o.grad_fn = node
            o._requires_grad = True
        for name, _ in save_outputs:
            saved[name] = save_output(o, node)
        return node
    # the result is checked for in-place changes; other outputs (indices) are not; a workspace is freed with the
    # saved inputs after backward
    for k, o in enumerate(outs):
        if o._data.dtype in INEXACT_NP and k not in op.workspace:
            o.grad_fn = node
            if k:
                o._output_nr = k
            o._requires_grad = True
    for name, k in save_outputs:
        saved[name] = save_output(outs[k], node) if k == 0 else save_input(outs[k]) if k in op.workspace else outs[k]
    return node


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
    if c is tuple or c is list or isinstance(v, tuple):
        return (c,) + tuple(map(key_of, v))
    if c is dict:
        return tuple((k, key_of(x)) for k, x in v.items())
    if c is slice:
        return (c, key_of(v.start), key_of(v.stop), key_of(v.step))
    d = v._data if isinstance(v, Tensor) else v
    shape = getattr(d, "shape", None)
    return (c, shape, getattr(d, "dtype", None)) if shape.__class__ is tuple else c
