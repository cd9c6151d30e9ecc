"""explain(fn, *args): the captured graph, fused groups, graph breaks, guards and generated source."""
from .capture import BACKWARD
from .driver import CompiledFunction
from .variant import Variant


class Explanation(str):
    """explain()'s report (a str), with its parts as attributes."""


def _node_line(node):
    args = ", ".join(map(repr, node.args))  # values print as v3
    params = ", ".join("%s=%r" % kv for kv in node.params.items())
    outs = ", ".join(repr(v) for v in node.outs)
    return "  %s = %s(%s%s)" % (outs, node.op.name, args, ", " + params if params else "")


def _graph_lines(title, graph, plan):
    lines = ["%s graph: %d ops" % (title, len(graph.nodes))]
    for v, kind in enumerate(graph.kinds):
        if kind[0] != "op":
            shape, dt = graph.meta(v)
            what = {"ext": "external tensor", "const": "constant"}.get(kind[0], kind[0])
            lines.append("  v%d: %s %s %s%s" % (v, what, dt, list(shape), "" if kind[0] in ("ext", "const") else " #%s" % (
                kind[1],)))
    lines += [_node_line(n) for n in graph.nodes]
    if plan is not None:
        lines.append("%s fused groups: %d" % (title, len(plan.groups)))
        for k, g in enumerate(plan.groups):
            nodes = plan.graph.nodes
            ops = [nodes[i].op.name for i, _, _ in g.members] + [nodes[i].op.name + " (reduction)"
                                                                  for i, _, _ in g.reductions]
            lines.append("  group %d over %s: %s" % (k, list(g.shape), ", ".join(ops)))
        lines.append("%s generated source:" % title)
        lines += ["  " + ln for ln in plan.source.splitlines()]
        for src in plan.kernel_sources:
            lines += ["  " + ln for ln in src.splitlines()]
    return lines


def explain(fn, *args, fullgraph=False, **kwargs):
    """Trace ``fn`` (a function, a compiled function or a module) on ``args`` and print what
    jitgrad.compile makes of it. Returns the report (a str subclass with ``graph_breaks``,
    ``graph_count``, ``ops``, ``guards`` and ``effects`` attributes: a training step's captured calls, in
    order, such as ``["zero_grad", "backward", "step"]``)."""
    target = getattr(fn, "_jitgrad_compiled", None) or getattr(fn, "_compiled", None)
    if target is None:
        target = CompiledFunction(fn, fullgraph)
    key, tensors = target.key(args, kwargs)
    var = Variant(target, key, args, kwargs, tensors)
    lines = []
    spec, metas, alias, grad, inference, extra = key
    lines.append("Guards:")
    for i, (shape, dt, on_host, rg, contiguous) in enumerate(metas):
        lines.append("  input %d: shape %s, dtype %s, device %s, requires_grad=%s%s" % (
            i, list(shape), dt, "cpu" if on_host else "cuda", rg, "" if contiguous else ", strided"))
    lines.append("  grad mode %s, inference mode %s" % ("on" if grad else "off", "on" if inference else "off"))
    if extra is not None:
        lines.append("  module training flags %s, parameter identities (%d)" % (extra[0], len(extra[1])))
    lines.append("Graph breaks: %d" % len(var.breaks))
    for reason, where in var.breaks:
        lines.append("  %s at %s" % (reason, where))
    if var.prefix:
        lines.append("The graph before the first break is compiled: at each call the plan computes its values, then"
                     " the function runs with its ops up to the break taking them, and eagerly from the break on")
    if not var.eager and var.effects:
        lines.append("Training-step effects, in order: %d" % len(var.effects))
        for k, (pos, kind, owner, fn, a, kw) in enumerate(var.effects):
            where = "before the forward plan" if k < len(var.pre) else "after it"
            if fn is None:
                what = "gradients (from the plan) accumulated into .grad of %d leaves" % len(var.accumulate)
            else:
                a = a[1:] if a and a[0] is owner else a
                what = "%s.%s(%s)" % (type(owner).__name__, kind.split(".")[-1], ", ".join(
                    ["%r" % x for x in a] + ["%s=%r" % kv for kv in kw.items()]))
            lines.append("  %s (%s)" % (what, where))
    if not var.eager:
        if var.joint is not None:
            lines.append("Forward and gradients in one plan (%s)" % (
                "a training step" if var.effects and any(e[1] == BACKWARD for e in var.effects) else
                "a scalar of elementwise math: the backward only scales the gradients by the output's"))
            lines += _graph_lines("Forward", var.joint[0], var.plan)
        else:
            lines += _graph_lines("Forward", var.graph, var.plan)
        if var.bplan is not None:
            lines += _graph_lines("Backward", var.bgraph, var.bplan)
    else:
        lines.append("The function runs eagerly (graph break); the ops before the break:")
        lines += [_node_line(n) for n in var.graph.nodes]
    report = Explanation("\n".join(lines))
    report.graph_breaks = list(var.breaks)
    report.graph_count = 0 if var.eager else 1
    report.ops = [n.op.name for n in var.graph.nodes]
    report.guards = key
    report.effects = [e[1] for e in var.effects] if not var.eager else []
    print(report)
    return report
