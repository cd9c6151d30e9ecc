"""jitgrad.onnx.export: a model (or function) as an ONNX file, through jitgrad.compile's capture.

The model runs once (in eval mode, without grad) with dispatch recording every table op into the
compiler's Graph (compiler/capture.py); each recorded op becomes ONNX nodes by its rule in _symbolic.py,
parameters and buffers become initializers named as in the state dict. An op without a rule, or anything
the capture cannot hold in one graph (a value read in Python, random draws), stops the export with an
error naming it and the line of the model that called it. Needs the ``onnx`` package (``pip install
'jitgrad[onnx]'``, which brings onnxruntime too, to run the file).
"""
import inspect
import os
import sys
import warnings

import numpy as np

from .._grad_mode import no_grad
from .._tensor import Tensor
from ..compiler.capture import Tracer, Unsupported, trace
from ..nn.module import Module
from ._symbolic import RULES

_JITGRAD_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_OPSET = 18
MIN_OPSET, MAX_OPSET = 13, 21
_EXPORTING = [False]


class UnsupportedOperatorError(RuntimeError):
    """The model calls an op that has no ONNX mapping (torch.onnx's UnsupportedOperatorError)."""


class OnnxExporterError(RuntimeError):
    """The model cannot be exported (its forward cannot be captured as one graph)."""


def is_in_onnx_export():
    """Whether an export is tracing the model now."""
    return _EXPORTING[0]


def _onnx():
    try:
        import onnx
    except ImportError as exc:
        raise ImportError("jitgrad.onnx.export needs the onnx package: pip install 'jitgrad[onnx]' "
                          "(onnx, and onnxruntime to run the exported file)") from exc
    return onnx


def _user_line():
    f = sys._getframe(2)
    while f is not None and os.path.abspath(f.f_code.co_filename).startswith(_JITGRAD_DIR):
        f = f.f_back
    return "%s:%d" % (f.f_code.co_filename, f.f_lineno) if f is not None else "<unknown>"


class _Tracer(Tracer):
    """The compiler's tracer, noting where in the model each op was called."""

    def __init__(self):
        super().__init__(fullgraph=True)
        self.lines = []

    def record(self, op, args, params, out):
        super().record(op, args, params, out)
        self.lines.append(_user_line())


class _Builder:
    """ONNX nodes and initializers, with the static shape of each value it names."""

    def __init__(self, onnx, opset, dynamic, lines):
        self.onnx, self.opset, self.dynamic, self.lines = onnx, opset, dynamic, lines
        self.nodes, self.initializers, self.shapes = [], [], {}
        self.count = 0
        self.node = None  # the captured node being converted

    def fresh(self, hint):
        self.count += 1
        return "%s_%d" % (hint, self.count)

    def op(self, onnx_type, inputs, **attrs):
        out = self.fresh(onnx_type)
        self.nodes.append(self.onnx.helper.make_node(onnx_type, list(inputs), [out], **attrs))
        return out

    def const(self, value, dtype):
        arr = np.asarray(value, dtype=np.dtype(dtype))
        name = self.fresh("const")
        self.initializers.append(self.onnx.numpy_helper.from_array(arr, name))
        self.shapes[name] = arr.shape
        return name

    def initializer(self, name, arr):
        self.initializers.append(self.onnx.numpy_helper.from_array(np.ascontiguousarray(arr), name))
        self.shapes[name] = arr.shape
        return name

    def shape(self, name):
        return tuple(self.shapes[name])

    def dtype_code(self, dtype):
        return self.onnx.helper.np_dtype_to_tensor_dtype(np.dtype(dtype))

    def reshape(self, value, shape):
        """Reshape to ``shape`` (traced sizes): the leading sizes kept from the input are 0 ("copy"), so a
        dynamic batch axis stays dynamic; with dynamic axes and none kept, the first size is -1 (inferred)."""
        src = self.shape(value)
        target = [int(s) for s in shape]
        keep = 0
        while keep < min(len(src), len(target)) and src[keep] == target[keep]:
            keep += 1
        target[:keep] = [0] * keep
        if self.dynamic and keep == 0 and target and -1 not in target:
            target[0] = -1
        return self.op("Reshape", [value, self.const(target, np.int64)])

    def unsupported(self, n, why):
        raise UnsupportedOperatorError("jitgrad.onnx.export: %s (called at %s) has no ONNX mapping for %s"
                                       % (_describe(n.op), self.lines[self.node], why))


def _describe(op):
    return "the op '%s' (%s)" % (op.name, _aten(op.name))


def _aten(name):
    for suffix in ("_all", "_dim"):
        if name.endswith(suffix):
            name = name[:-len(suffix)]
    return "aten::" + name


def _flatten(x):
    if isinstance(x, (tuple, list)):
        return [y for v in x for y in _flatten(v)]
    return [x]


def _ext_names(model):
    """id(array) -> state-dict name of a module's parameters and buffers."""
    if not isinstance(model, Module):
        return {}
    names = {}
    for name, t in list(model.named_parameters()) + list(model.named_buffers()):
        names.setdefault(id(t._data), name)
    return names


def _dynamic_names(dynamic_axes, input_names, output_names):
    """{value name: {axis: dim name}} from torch.onnx's forms ({name: {axis: dim name}} or {name: [axes]})."""
    out = {}
    for name, axes in (dynamic_axes or {}).items():
        if name not in input_names and name not in output_names:
            warnings.warn("Provided key %s for dynamic axes is not a valid input/output name" % name)
            continue
        if isinstance(axes, dict):
            out[name] = {int(a): str(d) for a, d in axes.items()}
        else:
            out[name] = {int(a): "%s_dynamic_axes_%d" % (name, i + 1) for i, a in enumerate(axes)}
    return out


def export(model, args=(), f=None, *, kwargs=None, export_params=True, verbose=None, input_names=None,
           output_names=None, opset_version=None, dynamic_axes=None, keep_initializers_as_inputs=False,
           training=None, do_constant_folding=True, dynamo=True, external_data=True, dynamic_shapes=None,
           report=False, optimize=True, verify=False, **unused):
    """Export ``model`` (an nn.Module or a function) called on ``args`` to ONNX, written to ``f`` (a path or a
    binary file object) when given. Returns an ONNXProgram (``.model_proto``, ``.save(path)``, and a call that
    runs the model with onnxruntime).

    ``input_names`` / ``output_names`` name the graph's inputs and outputs (default: the forward's argument
    names, and "output" or "output_0", ...); ``dynamic_axes`` marks axes of them as dynamic
    ({"input": {0: "batch"}} or {"input": [0]}); ``opset_version`` is 13 to 21 (default 18). The model is
    exported in eval mode. Only table ops with an ONNX rule export; the first op without one raises
    UnsupportedOperatorError naming it and the line that called it."""
    onnx = _onnx()
    opset = DEFAULT_OPSET if opset_version is None else int(opset_version)
    if not MIN_OPSET <= opset <= MAX_OPSET:
        raise ValueError("Unsupported ONNX opset version: %d (jitgrad.onnx exports opsets %d to %d)"
                         % (opset, MIN_OPSET, MAX_OPSET))
    args = tuple(args) if isinstance(args, (tuple, list)) else (args,)
    kwargs = dict(kwargs or {})
    if args and isinstance(args[-1], dict) and not kwargs:  # torch.onnx: a trailing dict holds keyword arguments
        args, kwargs = args[:-1], dict(args[-1])
    tensors = [a for a in _flatten(list(args) + list(kwargs.values())) if isinstance(a, Tensor)]
    graph, outputs, lines = _capture(model, args, kwargs, tensors)
    if input_names is None:
        input_names = _argument_names(model, len(tensors))
    input_names = list(input_names) + ["input_%d" % i for i in range(len(input_names), len(tensors))]
    if output_names is None:
        output_names = ["output"] if len(outputs) == 1 else ["output_%d" % i for i in range(len(outputs))]
    output_names = list(output_names) + ["output_%d" % i for i in range(len(output_names), len(outputs))]
    dynamic = _dynamic_names(dynamic_axes, input_names, output_names)
    proto = _build(onnx, graph, lines, tensors, outputs, input_names[:len(tensors)], output_names[:len(outputs)],
                   dynamic, opset, _ext_names(model), getattr(model, "__class__", type(model)).__name__)
    if f is not None:
        onnx.save_model(proto, f)
    return ONNXProgram(proto)


def _argument_names(model, n):
    fn = model.forward if isinstance(model, Module) else model
    try:
        names = [p.name for p in inspect.signature(fn).parameters.values()
                 if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        names = []
    return names[:n] if len(names) >= n else ["input_%d" % i for i in range(n)]


def _capture(model, args, kwargs, tensors):
    """(graph, output tensors, the model's line per recorded op): the model run once in eval mode, no grad."""
    modules = list(model.modules()) if isinstance(model, Module) else []
    modes = [m.training for m in modules]
    for m in modules:
        m.training = False
    _EXPORTING[0] = True
    try:
        with no_grad():
            tracer, result = trace(model, args, kwargs, True, tensors, tracer=_Tracer())
    except Unsupported as exc:
        raise OnnxExporterError("jitgrad.onnx.export: the model cannot be captured as one graph: %s"
                                % str(exc).replace("fullgraph=True: ", "")) from None
    finally:
        _EXPORTING[0] = False
        for m, mode in zip(modules, modes):
            m.training = mode
    g = tracer.graph
    if g.breaks:  # (fullgraph raises at most breaks; an in-place change of a read tensor is noted here)
        raise OnnxExporterError("jitgrad.onnx.export: the model cannot be captured as one graph: %s at %s"
                                % g.breaks[0])
    outputs = _flatten(result)
    for o in outputs:
        if not isinstance(o, Tensor):
            raise OnnxExporterError("jitgrad.onnx.export: the model returned %s; only tensors (in tuples and "
                                    "lists) can be graph outputs" % type(o).__name__)
    return g, outputs, tracer.lines


def _build(onnx, g, lines, tensors, outputs, input_names, output_names, dynamic, opset, ext_names, graph_name):
    helper = onnx.helper
    b = _Builder(onnx, opset, bool(dynamic), lines)
    names = {}  # value -> ONNX name (None: a result with no ONNX counterpart)
    inputs = []
    for v, kind in enumerate(g.kinds):
        if kind[0] == "input":
            name = input_names[kind[1]]
            names[v] = name
            b.shapes[name] = g.arrays[v].shape
            t = tensors[kind[1]]
            dims = [dynamic.get(name, {}).get(i, n) for i, n in enumerate(t.shape)]
            inputs.append(helper.make_tensor_value_info(name, b.dtype_code(g.arrays[v].dtype), dims))
        elif kind[0] == "ext":
            arr = kind[1].detach().cpu().numpy()
            names[v] = b.initializer(ext_names.get(id(kind[1]._data)) or b.fresh("constant"), arr)
    for i, n in enumerate(g.nodes):
        b.node = i
        rule = RULES.get(n.op.name)
        if rule is None:
            raise UnsupportedOperatorError(
                "jitgrad.onnx.export: %s, called at %s, has no ONNX mapping (the ops that map one-to-one are "
                "listed in docs/onnx.md)" % (_describe(n.op), lines[i]))
        for k, v in n.params.items():
            if v.__class__.__name__ in ("Ref", "Held"):
                b.unsupported(n, "a tensor given as its parameter %r" % k)
        x = []
        for pos, a in enumerate(n.args):
            if a is None:
                x.append(None)
            elif a.__class__.__name__ == "Ref":
                name = names.get(a)
                if name is None:
                    raise UnsupportedOperatorError(
                        "jitgrad.onnx.export: %s (called at %s) reads a result that has no ONNX counterpart (%s)"
                        % (_describe(n.op), lines[i], _producer(g, a)))
                if pos in n.convert and g.arrays[a].dtype != n.cnp:
                    name = b.op("Cast", [name], to=b.dtype_code(n.cnp))
                    b.shapes[name] = g.arrays[a].shape
                x.append(name)
            else:
                x.append(b.const(a, n.cnp))
        outs = rule(b, n, x)
        for v, name in zip(n.outs, outs):
            dtype = g.arrays[v].dtype
            if name is not None and n.op.name != "cast" and dtype.kind == "f" and dtype != n.cnp:
                name = b.op("Cast", [name], to=b.dtype_code(dtype))  # float16 computed in float32, rounded back
            names[v] = name
            if name is not None:
                b.shapes[name] = g.arrays[v].shape
    graph_outputs = []
    for name, t in zip(output_names, outputs):
        v = g.by_id.get(id(t._data))
        if v is None or names.get(v) is None:
            raise OnnxExporterError("jitgrad.onnx.export: output %r is not a value of the captured graph" % name)
        b.nodes.append(helper.make_node("Identity", [names[v]], [name]))
        dims = [dynamic.get(name, {}).get(i, n) for i, n in enumerate(t.shape)]
        graph_outputs.append(helper.make_tensor_value_info(name, b.dtype_code(t._data.dtype), dims))
    graph = helper.make_graph(b.nodes, graph_name, inputs, graph_outputs, b.initializers)
    opsets = [helper.make_opsetid("", opset)]
    model = helper.make_model(graph, opset_imports=opsets, producer_name="jitgrad")
    model.ir_version = helper.find_min_ir_version_for(opsets)
    onnx.checker.check_model(model)
    return model


def _producer(g, v):
    kind = g.kinds[v]
    if kind[0] == "op":
        node = g.nodes[kind[1]]
        return "result %d of %s" % (node.outs.index(v), _describe(node.op))
    return kind[0]


class ONNXProgram:
    """An exported model: ``model_proto`` (onnx.ModelProto), ``save(path)``, and a call that runs it with
    onnxruntime on tensors or arrays, returning NumPy arrays."""

    def __init__(self, model_proto):
        self.model_proto = model_proto
        self._session = None

    def save(self, destination):
        _onnx().save_model(self.model_proto, destination)

    def __call__(self, *args):
        try:
            import onnxruntime
        except ImportError as exc:
            raise ImportError("running an exported model needs onnxruntime: pip install 'jitgrad[onnx]'") from exc
        if self._session is None:
            self._session = onnxruntime.InferenceSession(self.model_proto.SerializeToString(),
                                                         providers=["CPUExecutionProvider"])
        feeds = {i.name: (a.detach().cpu().numpy() if isinstance(a, Tensor) else np.asarray(a))
                 for i, a in zip(self._session.get_inputs(), args)}
        return self._session.run(None, feeds)

    def __repr__(self):
        return "ONNXProgram(%s)" % self.model_proto.graph.name


__all__ = ["export", "is_in_onnx_export", "ONNXProgram", "UnsupportedOperatorError", "OnnxExporterError"]
