"""Pictures of the backward graph: ``to_dot(loss, params=dict(model.named_parameters()))``.

The answer is Graphviz DOT text (a ``str``), built with no dependency: one grey box per backward
node (``MulBackward0``), a blue box per leaf that receives a gradient (named after its parameter
when ``params`` names it, with its shape), an orange box per tensor a node saved for backward
(attribute name and shape; dashed edge to its node), a green box per output. Edges run from
each node's inputs to the node, in the direction of the forward computation.

``.render(path)`` writes an image (format from the suffix: .svg, .png, .pdf) with the ``graphviz``
package (``pip install jitgrad[viz]``) or, without it, the Graphviz ``dot`` program; both need
Graphviz itself installed.
"""
import os
import shutil
import subprocess

from ._graph import AccumulateGrad, accumulate_node
from ._saved import SavedTensor
from ._tensor import Tensor

__all__ = ["to_dot", "Dot"]

_STYLE = {
    "node": 'shape=box, style=filled, fillcolor=lightgrey, fontname="Helvetica"',
    "leaf": 'shape=box, style=filled, fillcolor=lightblue, fontname="Helvetica"',
    "saved": 'shape=box, style=filled, fillcolor=orange, fontname="Helvetica"',
    "output": 'shape=box, style=filled, fillcolor=darkolivegreen1, fontname="Helvetica"',
}


class Dot(str):
    """DOT text of a graph, with ``render`` to turn it into an image."""

    def render(self, path, format=None):
        """Write the picture to ``path`` (format from its suffix unless given); return ``path``."""
        format = format or os.path.splitext(path)[1].lstrip(".") or "svg"
        try:
            import graphviz
        except ImportError:
            graphviz = None
        if graphviz is not None:
            data = graphviz.Source(str(self)).pipe(format=format)
        else:
            dot = shutil.which("dot")
            if dot is None:
                raise RuntimeError("rendering a graph needs Graphviz: install the 'dot' program (for example "
                                   "'apt-get install graphviz') and optionally the Python package "
                                   "(pip install jitgrad[viz]); to_dot() itself needs neither")
            data = subprocess.run([dot, "-T" + format], input=str(self).encode(), capture_output=True,
                                  check=True).stdout
        with open(path, "wb") as f:
            f.write(data)
        return path

    def _repr_svg_(self):  # inline pictures in notebooks, when Graphviz is there
        try:
            import graphviz
        except ImportError:
            return None
        return graphviz.Source(str(self)).pipe(format="svg").decode()


def _shape(shape):
    return "(" + ", ".join(str(s) for s in shape) + ")"


def _quote(text):
    return '"' + str(text).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def saved_tensors(node):
    """(attribute name, SavedTensor) for each tensor ``node`` saved for backward, without unpacking."""
    saved = getattr(node, "saved", None)
    if isinstance(saved, dict):  # a table op: saved inputs/outputs by name
        return [("_saved_" + k, v) for k, v in sorted(saved.items()) if isinstance(v, SavedTensor)]
    saved = getattr(node, "_saved", None)
    if isinstance(saved, (list, tuple)):  # a custom Function: ctx.save_for_backward order
        return [("saved_tensors[%d]" % i, v) for i, v in enumerate(saved) if isinstance(v, SavedTensor)]
    return []


def _saved_label(name, st):
    """'name\\n(2, 3)', read from the saved value as stored (freed or hook-packed values say so)."""
    if getattr(st, "_freed", False):
        return "%s\n(freed)" % name
    value = st._data if st._data is not None else st._packed
    shape = getattr(value, "shape", None)
    return "%s\n%s" % (name, _shape(shape) if shape is not None else "(packed)")


def _attrs(node):
    """Non-tensor values a table op keeps for its backward (dims, exponents...)."""
    params = getattr(node, "params", None) or {}
    return ["%s: %s" % (k, v) for k, v in sorted(params.items()) if not k.startswith("_")]


def to_dot(roots, params=None, show_saved=True, show_attrs=False):
    """DOT text of the backward graph below ``roots`` (a tensor or a sequence of tensors).

    ``params`` maps names to leaf tensors (``dict(model.named_parameters())``) to label them;
    ``show_saved`` draws the tensors saved for backward; ``show_attrs`` adds the ops' parameters.
    """
    roots = (roots,) if isinstance(roots, Tensor) else tuple(roots)
    names = {id(t): name for name, t in (params or {}).items()}
    lines = ["digraph {", "  graph [rankdir=TB, size=\"12,12\"]", "  node [fontsize=11, height=0.2]"]
    ids = {}

    def node_id(node):
        if node not in ids:
            ids[node] = "n%d" % len(ids)
        return ids[node]

    stack = []
    for k, t in enumerate(roots):
        out_id = "out%d" % k
        lines.append("  %s [label=%s, %s]" % (out_id, _quote(_shape(t.shape)), _STYLE["output"]))
        fn = t.grad_fn if t.grad_fn is not None else _leaf_node(t)
        if fn is not None:
            lines.append("  %s -> %s" % (node_id(fn), out_id))
            stack.append(fn)
    seen = set()
    while stack:  # iterative walk: graphs can be deep
        fn = stack.pop()
        if fn in seen:
            continue
        seen.add(fn)
        me = node_id(fn)
        if isinstance(fn, AccumulateGrad):
            var = fn.variable
            label = "%s\n%s" % (names[id(var)], _shape(var.shape)) if id(var) in names else _shape(var.shape)
            lines.append("  %s [label=%s, %s]" % (me, _quote(label), _STYLE["leaf"]))
        else:
            label = "\n".join([fn.name()] + (_attrs(fn) if show_attrs else []))
            lines.append("  %s [label=%s, %s]" % (me, _quote(label), _STYLE["node"]))
        if show_saved:
            for j, (name, st) in enumerate(saved_tensors(fn)):
                sid = "%s_s%d" % (me, j)
                lines.append("  %s [label=%s, %s]" % (sid, _quote(_saved_label(name, st)), _STYLE["saved"]))
                lines.append("  %s -> %s [style=dashed, dir=none]" % (sid, me))
        for nxt in fn.next_functions:
            if nxt is None or nxt[0] is None:  # NO_EDGE: an input that takes no gradient
                continue
            lines.append("  %s -> %s" % (node_id(nxt[0]), me))
            stack.append(nxt[0])
    lines.append("}")
    return Dot("\n".join(lines) + "\n")


def _leaf_node(t):
    """A leaf that requires grad is drawn as its own AccumulateGrad box."""
    return accumulate_node(t) if t._requires_grad else None
