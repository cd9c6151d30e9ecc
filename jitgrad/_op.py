"""The op table's entry type, and dispatch: tensors -> kernel -> tensors, recording the graph (_op_node.py).

An ``Op`` is the one place an op is defined (see jitgrad/ops/): its forward kernel, one VJP
formula per input (over tensor ops, so create_graph records the backward), an optional fused
VJP kernel per input (used when no graph of the backward is needed), what it saves, its dtype
rule, a NumPy reference and sample inputs. ``dispatch`` is the per-op hot path.
"""
import types
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from . import _dtype as D
from ._device import cuda_backend
from .kernels import config as KERNEL_CONFIG, cpu as CPU_BACKEND
from .kernels.scalars import COMPLEX as COMPLEX_KERNELS
from ._grad_mode import SPECIAL, STATE
from ._layout import LAZY, ConjView, SparseMeta
from . import _op_node
from ._op_node import OpNode, record, recorder_for
from ._tensor import Tensor, has_tangent

EMPTY = {}
# jitgrad.sparse's dispatch (a layer above), set when it loads: an op with a sparse operand goes there
SPARSE_DISPATCH = [None]
# ops/complex.py's conj_dispatch: an op with a lazy conjugate (a ConjView array) among its operands goes there
CONJ_DISPATCH = [None]


@dataclass(frozen=True, slots=True)
class Derivatives:
    """How an entry differentiates: per input, the VJP formula (g, s) -> Tensor over table ops, or None where
    the input takes no gradient (one shared formula, also given the input's position, for a variadic entry),
    the fused kernel ('kernel', argument names), a fused VJP function, or None, the fused kernel as an op of
    its own (see fused_op), and the names the formula and kernel read from the node, in save order."""
    vjp: tuple
    fused: tuple
    fused_ops: tuple
    saves: tuple
    double_backward: bool  # whether the formulas' own gradients are right (create_graph twice)
    # the input positions the op is linear in, jointly (multilinear: matmul's (0, 1)): its JVP in such an input
    # is the op itself with the input replaced by its tangent (JAX's deflinear), one kernel call
    linear: tuple = ()
    # the output gradient at which forward mode transposes the formulas (a JVP is the gradient in u of
    # <vjp(u), t>, the same at every u for a formula linear in u); 1 for a formula computed piecewise by the
    # gradient's sign (logcumsumexp), whose graph at 0 shows no slope
    transpose_at: float = 0.0


@dataclass(frozen=True, slots=True)
class TypeRule:
    """The dtypes an entry computes in and returns."""
    rule: str  # promote | float | bool | same | int64 | keep
    # promoted input dtype name -> (exception class, message): the dtypes PyTorch has no kernel of this
    # op for. Checked only when dispatch first sees an operand-type pattern (the hot path pays nothing).
    unsupported: dict
    # float16/bfloat16 operands: "float32" computes in float32 and rounds the results to the storage dtype;
    # "native" runs the forward on the stored values (views, copies, casts: ops that only move values);
    # "refused": the public function raises PyTorch's error for them (LAPACK-backed ops have no such kernels)
    reduced_precision: str
    # with a float16/bfloat16 result, the other operands are rounded to it before the float32 math (PyTorch's
    # cast to the common dtype); True: numbers and 0-d tensors enter it unrounded (PyTorch's mul and div)
    original_scalars: bool
    keep_inputs: frozenset  # positions passed to the kernel in their own dtype (indices, masks)
    # device type -> PyTorch's autocast cast policy for the op ("lower_precision_fp": floating inputs to the
    # autocast dtype, "fp32": to float32), applied by its public function (ops._table.autocasts)
    autocast: dict
    # whether the entry takes complex64/complex128 operands (PyTorch has a complex kernel for it); others get
    # ``unsupported``'s error for the complex dtype, or '"<name>" not implemented for 'ComplexFloat''. An
    # elementwise entry computes complex values with its kernel's complex twin (kernels.scalars.COMPLEX).
    complex: bool = False


@dataclass(frozen=True, slots=True)
class Exposure:
    """How users reach an entry: ``call``, the public callable (default: jitgrad.<name>), exported as
    jitgrad.<api name> (function) and Tensor.<api name> (method), an in-place Tensor.<name>_ form, Python
    operators (__rX__: operands swapped, __iX__: the in-place form) and an nn module class name (made in
    nn/modules/activation.py from ``params``, the scalar params and their defaults of a generated API)."""
    call: object
    api: tuple
    method: bool
    function: bool
    inplace: object  # False, True (every api name) or the api names with an in-place form
    operators: tuple
    module: object
    params: dict


@dataclass(frozen=True, slots=True)
class TestData:
    """What the generated tests and benchmarks run: ``samples(rng, dtype)`` -> [(args, kwargs)] for the
    public callable (see ops/_table.py), the NumPy reference taking a sample's (args, kwargs), and benchmark
    sizes."""
    samples: object
    ref: object
    bench: object


class Op:
    """One entry of the op table (declarative; see jitgrad/ops/ for the entries). Read-only once built.

    The entry is declared with keywords, in one call; the record keeps what dispatch reads on every call
    on itself and the rest in four facets: ``derivatives``, ``types``, ``exposure`` and ``tests``."""

    def __init__(self, name, forward, *, inputs=("self",), vjp=(), fused=(), dtype="promote", ref=None,
                 samples=None, node=None, n_outputs=1, outputs=("result",), differentiable=None, view=False,
                 broadcast=False, bench=None, keep_inputs=(), double_backward=True, unsupported=EMPTY, call=None,
                 params=EMPTY, api=(), method=True, function=True, inplace=False, operators=(), module=None,
                 reduced_precision=None, original_scalars=False, autocast=EMPTY, value_shaped=None, linear=(),
                 scalar_nodes=None, complex=None, transpose_at=0.0, workspace=()):
        self.name = name
        self.forward = forward  # forward(xp, np_dtype, *arrays, **params) -> array or tuple of arrays
        # names of the positional tensor inputs ('self', 'other'); None: any number of them (cat, stack),
        # sharing one VJP formula that also takes the input's position
        self.inputs = inputs
        self.variadic = inputs is None
        n = 1 if inputs is None else len(inputs)
        self.n_outputs = n_outputs  # None: as many as the forward returns (split), counted per node
        self.outputs = outputs  # names of the outputs a formula may save (s.result, s.indices)
        # positions of the workspace outputs: arrays the forward hands to the fused VJPs (a recurrent cell's gates,
        # conv2d's im2col columns), which the public call does not return; they take no gradient (None in g)
        self.workspace = tuple(outputs.index(n) for n in workspace)
        self.view = view
        self.broadcast = broadcast
        # params -> whether the output's shape depends on the operands' values (unique, a boolean-mask index):
        # jitgrad.compile ends its graph there rather than freeze the shape of the call it traced
        self.value_shaped = value_shaped
        reduced_precision = reduced_precision or ("native" if view else "float32")
        # (an entry that only moves values, views and copies, moves complex ones as well)
        self.types = TypeRule(dtype, unsupported, reduced_precision, original_scalars, frozenset(keep_inputs),
                              autocast, reduced_precision == "native" if complex is None else complex)
        self.exposure = Exposure(call, tuple(api), method, function, inplace, tuple(operators), module, params)
        self.tests = TestData(samples, ref, bench)
        vjp = tuple(vjp) + (None,) * (n - len(vjp))
        # a fused spec with ``spec(op, k)`` (ops/_derive.py) is a kernel made from the input's formula, resolved
        # here from the formulas (which it reads as op.derivatives.vjp)
        self.derivatives = Derivatives(vjp, (), (), (), double_backward, tuple(linear), transpose_at)
        fused = tuple(fused) + (None,) * (n - len(fused))
        fused = tuple(f.spec(self, k) if hasattr(f, "spec") else f for k, f in enumerate(fused))
        # per input: the fused kernel as an op of its own, which a backward traced by jitgrad.compile records
        # as one node where eager's formula would record several
        saves = tuple(_saved_names(self.inputs, self.outputs, vjp[k], fused[k]) for k in range(n))
        self.derivatives = Derivatives(vjp, fused, tuple(fused_op(f) for f in fused), saves, double_backward,
                                       tuple(linear), transpose_at)
        self.differentiable = any(vjp) if differentiable is None else differentiable
        self.node_name = node or "".join(p.capitalize() for p in name.split("_")) + "Backward0"
        self.node_cls = _node_class(self.node_name, n_outputs)
        # PyTorch names a binary op's node by its overload: (name when input 0 is a Python number, name when
        # input 1 is), e.g. 1 - x records RsubBackward1, 2 ** x PowBackward2
        # (such a node has no edge for the number, as PyTorch's Scalar overloads: 1 - x's next_functions is x's alone)
        self.scalar_nodes = None if scalar_nodes is None else tuple(
            self.node_cls if n is None else _node_class(n, n_outputs, tuple(i for i in range(len(inputs)) if i != k))
            for k, n in enumerate(scalar_nodes))
        # an elementwise entry (forward made by ew_forward): the kernel it runs when called without params,
        # and its output dtype (None: the compute dtype); dispatch calls it directly
        self.kernel = getattr(forward, "kernel", None)
        self.kernel_out = getattr(forward, "out", None)
        self.plain = n_outputs == 1 and not view  # dispatch wraps its result without record() unless recording
        self._dtypes = {}  # cache: operand dtype key -> (compute dtype, output dtype)
        self._plans = {}  # cache: which inputs need grad -> what to save
        self._recorders = {}  # cache: which operands are tensors -> the recorder of a node (_op_node.recorder)
        self._built = True

    def __setattr__(self, name, value):
        if "_built" in self.__dict__:
            raise AttributeError("op table entries are read-only: give %r in the entry of %r" % (name, self.name))
        object.__setattr__(self, name, value)

    def __repr__(self):
        return "Op(%r)" % self.name


def _node_class(name, n_outputs, edge_inputs=None):
    """The grad_fn class of an entry; an entry of a varying number of outputs keeps each node's count on the node.
    ``edge_inputs``: the inputs its next_functions stand for, where not every input (see OpNode.edge_inputs)."""
    if n_outputs is None:
        return type(name, (OpNode,), {"__slots__": ("n_outputs",)})
    return type(name, (OpNode,), {"__slots__": (), "n_outputs": n_outputs, "edge_inputs": edge_inputs})


_FUSED_OPS = {}  # (kernel, arity) -> its op


def fused_op(spec):
    """The op of a fused VJP kernel ``spec`` ('kernel', argument names) that takes the gradient first: it runs
    the kernel in the gradient's dtype (rule "keep"), as eager's backward does. Not in the table (only traced
    backward graphs hold it) and not differentiable (create_graph runs the formulas). None for other specs."""
    if spec.__class__ is not tuple or spec[1][0] != "g" or "zero" in spec[1]:
        return None
    key = (spec[0], len(spec[1]))
    op = _FUSED_OPS.get(key)
    if op is None:
        kernel = spec[0]

        def forward(xp, dt, *arrays):
            return xp.run(kernel, dt, *arrays)
        forward.kernel, forward.out = kernel, None
        op = _FUSED_OPS[key] = Op(kernel, forward, inputs=tuple("x%d" % i for i in range(key[1])), dtype="keep",
                                  differentiable=False, call=lambda *args: dispatch(op, args))
    return op


def _names_read(fn, seen):
    """Every attribute and global name ``fn`` reads, also in its nested functions and in the op-table
    helpers it calls (a formula may pass ``s`` on: _prod_grad(g, s) reads s.self)."""
    names, codes = set(), [fn.__code__]
    while codes:
        code = codes.pop()
        names.update(code.co_names)
        codes += [c for c in code.co_consts if isinstance(c, types.CodeType)]
    for n in list(names):
        f = fn.__globals__.get(n)
        if isinstance(f, types.FunctionType) and f.__module__.startswith("jitgrad.ops") and f not in seen:
            seen.add(f)
            names |= _names_read(f, seen)
    return names


def _saved_names(inputs, outputs, formula, fused):
    """What an input's VJP needs saved: the inputs and outputs its formula reads (as s.self, s.result),
    as PyTorch's derivatives.yaml codegen derives them, and the arguments of its fused kernel."""
    if formula is None:
        return ()
    read = _names_read(formula, set())
    if isinstance(fused, tuple):  # ('kernel', its argument names)
        read |= set(fused[1])
    elif fused is not None:  # a fused VJP function (g, s) -> Tensor
        read |= _names_read(fused, set())
    return tuple(n for n in (inputs or ()) + outputs if n in read)


def _check_operands(op, args):
    """PyTorch's TypeError for an operand that is neither a tensor nor a number (None: optional inputs only)."""
    for i, a in enumerate(args):
        if a is None and op.broadcast or not (a is None or isinstance(a, (Tensor, bool, int, float, complex, np.number))):
            name = op.inputs[i] if op.inputs and i < len(op.inputs) else "tensors"
            name = "input" if name == "self" else name
            raise TypeError("%s(): argument '%s' (position %d) must be Tensor, not %s"
                            % (op.name, name, i + 1, type(a).__name__))


def _result_dtypes(rule, args, unsupported=EMPTY):
    dims, zero_dims, scalars = [], [], []
    for a in args:
        if isinstance(a, Tensor):
            (dims if a.ndim else zero_dims).append(a.dtype)
        elif isinstance(a, (bool, int, float, complex, np.number, np.bool_)):
            scalars.append(D.scalar_dtype(a.item() if isinstance(a, np.generic) else a))
        elif a is not None:
            raise TypeError("expected a Tensor or a number, but got %s" % type(a).__name__)
    t = D.result_type(dims, zero_dims, scalars)
    if t is not None and t.name in unsupported:
        exc, msg = unsupported[t.name]
        raise exc(msg)

    if rule in ("float", "float_real") and t.category < 2:  # (complex stays complex)
        t = D.get_default_dtype()
    if rule == "real":  # abs: a complex operand gives its parts' dtype
        return t, t.to_real()
    if rule == "float_real":  # angle: "float", and a complex operand gives its parts' dtype
        return t, t.to_real()
    if rule == "bool":
        return t, D.bool_
    if rule == "int64":
        return t, D.int64
    if rule == "keep":
        return (dims + zero_dims)[0], (dims + zero_dims)[0]
    return t, t


def broadcast_shapes(*shapes):
    """NumPy/PyTorch broadcasting with PyTorch's error message."""
    nd = max(len(s) for s in shapes)
    out = [1] * nd
    for s in shapes:
        for i, n in enumerate(s, nd - len(s)):
            if n != out[i]:
                if out[i] == 1:
                    out[i] = n
                elif n != 1:  # as PyTorch: tensor a is the shape broadcast so far, tensor b the next operand
                    raise RuntimeError(
                        "The size of tensor a (%d) must match the size of tensor b (%d) at non-singleton "
                        "dimension %d" % (out[i], n, i))
    return tuple(out)


def dispatch(op, args, params=EMPTY, profiled=False):
    """Run ``op`` on ``args`` (tensors and numbers) and record it if grad mode is on.

    This is the per-op hot path: one pass over the operands collects their arrays, the plan-cache
    key (dtypes, 0-d flags, number types), whether any input requires grad and whether the shapes
    differ (only then is broadcasting checked). The plan, cached per key, holds the compute dtype,
    the operands to convert to it (the common case converts none) and, for an elementwise entry,
    its kernel, called directly. (``profiled``: the profiler's own call, timing this one.)
    """
    if SPECIAL[0]:
        if STATE.vmap is not None and STATE.vmap.claims(op, args):  # jitgrad.vmap: the entry's batching rule
            return STATE.vmap(op, args, params)
        if STATE.dual is not None and any(isinstance(a, Tensor) and has_tangent(a) for a in args):
            return STATE.dual(op, args, params)  # forward-mode AD: the primal and its tangent
        # jitgrad.compile is tracing: it runs the op and records it (after vmap's and forward AD's hooks, which
        # reach dispatch again with the ops they make: the trace records the physical batch's ops and the JVPs')
        if STATE.capture is not None:
            return STATE.capture(op, args, params)
        if STATE.profiler is not None and not profiled:  # jitgrad.profiler: an event around the op
            return STATE.profiler.op(op, args, params)
    key = []
    arrays = []
    grad = False
    kind = None  # the array type of the tensors: one device per op
    shape = None
    mixed = False  # operands of different shapes (0-d ones aside)
    for a in args:
        if isinstance(a, Tensor):
            d = a._data
            if d.ndim:
                key.append(d.dtype)
                if shape is None:
                    shape = d.shape
                elif d.shape != shape:
                    mixed = True
            else:
                key.append((d.dtype, 0))
            arrays.append(d)
            if a._requires_grad:
                grad = True
            if d.__class__ is not kind:  # (device arrays come in more than one class: the host's is NumPy's)
                if kind is not None and (kind is np.ndarray or d.__class__ is np.ndarray):
                    kind = _mixed_kinds(args)
                else:
                    kind = d.__class__
        else:
            key.append(a.__class__)
            arrays.append(a)
    if kind is not np.ndarray and kind is not None:  # (CPU tensors of real or complex values pass by)
        if kind is SparseMeta:
            return SPARSE_DISPATCH[0](op, args, params)
        if kind in LAZY:  # a lazy conjugate (or negation) among the operands
            return CONJ_DISPATCH[0](op, args, params)
    plan = op._dtypes.get(tuple(key))
    if plan is None:
        plan = op._dtypes[tuple(key)] = _plan(op, args)
    cnp, convert, out_dtype, loop, rnd, via, kernel, recorder = plan
    xp = CPU_BACKEND if kind is np.ndarray or kind is None else cuda_backend()
    if convert:
        if via is not None:  # operands rounded to the float16/bfloat16 result type first, as PyTorch casts them
            _round_operands(xp, arrays, via)
        for i in convert:
            a = arrays[i]
            if a is not None:
                arrays[i] = _cast(xp, a, cnp)
    if mixed and op.broadcast:
        broadcast_shapes(*[a._data.shape for a in args if isinstance(a, Tensor) and a._data.ndim])
    if out_dtype is not None and not params:  # an elementwise entry: its kernel, without the forward's wrapper
        if loop is not None and not mixed and kind is np.ndarray and len(shape) == 1 and \
                shape[0] < KERNEL_CONFIG.PARALLEL_THRESHOLD:  # 1-D CPU operands: the serial flat loop itself
            out = np.empty(shape, out_dtype)
            loop(*arrays, out)
        else:
            out = xp.run(kernel, out_dtype, *arrays)
    else:
        out = op.forward(xp, cnp, *arrays, **params)
    if rnd is not None:  # float16/bfloat16 operands: computed in float32, rounded to the storage dtype
        out = _round(xp, out, cnp, rnd)
    if op.plain:
        result = Tensor._wrap(out)
        if grad and op.differentiable and STATE.grad_enabled:  # (never in inference mode: grad mode is off there)
            recorder(args, params, (result,))
        return result
    return record(op, args, params, out, grad, recorder)


_NUMBER_TYPES = frozenset((bool, int, float, complex))


class Plan(NamedTuple):
    """How dispatch runs an entry for one pattern of operand types (cached per entry)."""
    compute: np.dtype  # the NumPy dtype the kernel computes in
    convert: tuple  # operand positions to convert to it
    out_dtype: object  # the elementwise kernel's output dtype, or None (not an elementwise entry)
    loop: object  # its serial flat loop for operands of one shape, or None
    round_to: object  # the storage dtype to round floating results to (float16/bfloat16), or None
    via: object  # (that dtype, operand positions to round to it before converting), or None
    kernel: str  # the elementwise entry's scalar function for these operands (complex ones: its complex twin)
    recorder: object  # the recorder of the entry's node for these operands (which are tensors: _op_node.recorder_for)


def _plan(op, args):
    """The Plan of ``op`` for one pattern of operand types.

    The compute dtype is the result type's ``compute``: with a float16 or bfloat16 result type the op
    computes in float32 and its floating results are rounded back, as PyTorch's CPU kernels do (an op
    that only moves stored values, ``reduced_precision="native"``, runs on them as they are).
    """
    _check_operands(op, args)
    rule = op.types
    t, out = _result_dtypes(rule.rule, args, rule.unsupported)
    kernel = op.kernel
    if t is not None and t.is_complex:
        if not rule.complex:
            raise NotImplementedError("\"%s\" not implemented for '%s'" % (_kernel_name(op), t.scalar_type))
        kernel = COMPLEX_KERNELS.get(kernel, kernel)
    c = t if rule.reduced_precision == "native" else t.compute
    compute = c.np
    rnd = t.np if c is not t and out is t else None
    # PyTorch casts the operands to the result type before its float32 math: so do the operands of another
    # dtype here (a float32 tensor, 0.1), except the numbers and 0-d tensors an entry reads as they are
    through = () if c is t else tuple(
        i for i, a in enumerate(args) if a is not None and i not in rule.keep_inputs and not (
            isinstance(a, Tensor) and a._data.dtype == t.np) and not (
            rule.original_scalars and (not isinstance(a, Tensor) or not a.ndim)))
    via = (t.np, through) if through else None
    convert = tuple(i for i, a in enumerate(args)
                    if not isinstance(a, Tensor) or a._data.dtype != compute and i not in rule.keep_inputs or i in through)
    out_dtype = None if op.kernel is None else np.dtype(op.kernel_out or (out.np if t.is_complex and not out.is_complex
                                                                          else compute))
    # an elementwise entry whose operands are tensors of one shape and numbers (no 0-d tensors): its
    # serial flat loop for this pattern of arrays and scalars, which dispatch calls on 1-D operands
    loop = None
    if out_dtype is not None and all(a is not None and (not isinstance(a, Tensor) or a.ndim) for a in args) and \
            any(isinstance(a, Tensor) for a in args):
        loop = CPU_BACKEND.flat_loop(kernel, tuple(isinstance(a, Tensor) for a in args))
    return Plan(compute, convert, out_dtype, loop, rnd, via, kernel, recorder_for(op, args) if op.differentiable else None)


def _kernel_name(op):
    """The name of PyTorch's CPU kernel of ``op`` ('"erfc_vml_cpu" not implemented for ...'), as the entry's messages
    for other refused dtypes give it; else the entry's name."""
    for _, message in op.types.unsupported.values():
        if message.startswith('"') and '" not implemented for' in message:
            return message[1:message.index('"', 1)]
    return op.name


def _cast(xp, a, to):
    """Operand ``a`` (a number, a NumPy or a device array) in NumPy dtype ``to``."""
    return to.type(a) if a.__class__ in _NUMBER_TYPES else a.astype(to) if a.__class__ is np.ndarray else \
        xp.astype(a, to)


def _round_operands(xp, arrays, via):
    to, positions = via
    for i in positions:
        arrays[i] = _cast(xp, arrays[i], to)


def _round(xp, out, compute, to):
    """An op's results computed in ``compute``: the floating ones rounded to storage dtype ``to``."""
    if out.__class__ in (tuple, list):
        return tuple(_round(xp, o, compute, to) for o in out)
    return xp.astype(out, to) if out.dtype == compute else out


def _mixed_kinds(args):
    """The array kind of an op whose operands are of different kinds: sparse where one is sparse (jitgrad.sparse
    then takes the op), else PyTorch's device error."""
    if any(isinstance(a, Tensor) and a._data.__class__ is SparseMeta for a in args):
        return SparseMeta
    if any(isinstance(a, Tensor) and a._data.__class__ in LAZY for a in args) and \
            all(isinstance(a._data, np.ndarray) for a in args if isinstance(a, Tensor)):
        return ConjView
    _device_mismatch(args)


def _device_mismatch(args):
    devices = []
    for a in args:
        if isinstance(a, Tensor) and str(a.device) not in devices:
            devices.append(str(a.device))
    devices.sort(key=lambda d: d == "cpu")
    raise RuntimeError("Expected all tensors to be on the same device, but found at least two devices, %s and %s!"
                       % tuple(devices[:2]))


def _check_broadcast(arrays):
    shape = None
    for x in arrays:
        if x is not None and x.ndim:
            if shape is None:
                shape = x.shape
            elif x.shape != shape:
                broadcast_shapes(*[y.shape for y in arrays if y is not None and y.ndim])
                return


def _fused_function_forward(xp, dt, *arrays, vjp):
    n = vjp.n_grads
    g = Tensor._wrap(arrays[0]) if vjp.op.n_outputs == 1 else tuple(
        None if a is None else Tensor._wrap(a) for a in arrays[:n])  # (a workspace output's is None)
    node = vjp.node(arrays[n:])
    fused = vjp.op.derivatives.fused
    grads = tuple(fused[k](g, node)._data for k in vjp.ks)  # (in input order, as the engine calls them)
    return grads if len(grads) > 1 else grads[0]


# The fused VJP functions of a node (softmax's, the losses', an RNN layer's), recorded by a traced backward as one
# op: see _op_node.FusedCall. Not in the table, not differentiable; one per number of operands and of results, every
# operand (the gradient, saved tensors, integer targets) passed as it is: the functions compute in the gradient's dtype.
_FUSED_FUNCTIONS = {}


def fused_function_op(n, results=1):
    op = _FUSED_FUNCTIONS.get((n, results))
    if op is None:
        op = _FUSED_FUNCTIONS[n, results] = Op(
            "fused_vjp_function", _fused_function_forward, inputs=tuple("x%d" % i for i in range(n)), dtype="keep",
            keep_inputs=range(n), differentiable=False, n_outputs=results,
            outputs=tuple("r%d" % k for k in range(results)) if results > 1 else ("result",),
            call=lambda *args, vjp: dispatch(op, args, {"vjp": vjp}))
    return op


_op_node.FUSED_FUNCTION_OP[0] = fused_function_op
