"""Graph pictures: jitgrad.viz.to_dot gives the DOT text of the backward graph; render() draws it
when Graphviz is installed."""
import re
import shutil
import sys

import pytest

import jitgrad as jg
import jitgrad.nn as nn
from jitgrad.viz import Dot, to_dot


def nodes(dot):
    """{id: label} of the boxes in DOT text."""
    return dict(re.findall(r'^  (\w+) \[label="((?:[^"\\]|\\.)*)"', dot, re.M))


def edges(dot):
    return re.findall(r"^  (\w+) -> (\w+)(?: \[.*\])?$", dot, re.M)


def by_label(dot):
    return {label: i for i, label in nodes(dot).items()}


def test_dot_of_a_small_graph():
    w = jg.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    b = jg.tensor([0.5, 0.5], requires_grad=True)
    x = jg.tensor([[1.0, -1.0]])
    loss = (x @ w + b).relu().sum()
    dot = to_dot(loss, params={"weight": w, "bias": b})
    assert isinstance(dot, str) and isinstance(dot, Dot)
    assert dot.startswith("digraph {\n") and dot.endswith("}\n")
    ids = by_label(dot)
    assert set(ids) >= {"SumBackward0", "ReluBackward0", "AddBackward0", "MmBackward0", "weight\\n(2, 2)",
                        "bias\\n(2)", "()", "_saved_result\\n(1, 2)", "_saved_self\\n(1, 2)"}
    e = set(edges(dot))
    assert (ids["SumBackward0"], ids["()"]) in e  # the output box hangs below its node
    assert (ids["ReluBackward0"], ids["SumBackward0"]) in e  # inputs point at the node that uses them
    assert (ids["AddBackward0"], ids["ReluBackward0"]) in e
    assert (ids["MmBackward0"], ids["AddBackward0"]) in e
    assert (ids["bias\\n(2)"], ids["AddBackward0"]) in e
    assert (ids["weight\\n(2, 2)"], ids["MmBackward0"]) in e
    # the constant x needs no gradient: only what Mm saved of it shows (its own saved input)
    assert (ids["_saved_self\\n(1, 2)"], ids["MmBackward0"]) in e
    assert 'fillcolor=lightblue' in dot and 'fillcolor=orange' in dot and 'fillcolor=darkolivegreen1' in dot
    assert "style=dashed" in dot


def test_shared_nodes_appear_once_and_unnamed_leaves_show_their_shape():
    x = jg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    h = x.exp()
    y = (h * h + h).sum()
    dot = to_dot(y, show_saved=False)
    labels = list(nodes(dot).values())
    assert labels.count("ExpBackward0") == 1 and labels.count("(3)") == 1
    assert "_saved" not in dot
    ids = by_label(dot)
    assert edges(dot).count((ids["ExpBackward0"], ids["MulBackward0"])) == 2  # h used twice by the product


def test_several_roots_and_params_of_a_module():
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
    out = model(jg.randn(5, 3))
    dot = to_dot((out.sum(), out.mean()), params=dict(model.named_parameters()))
    labels = set(nodes(dot).values())
    assert {"0.weight\\n(4, 3)", "0.bias\\n(4)", "2.weight\\n(2, 4)", "2.bias\\n(2)"} <= labels
    assert {"SumBackward0", "MeanBackward0", "TanhBackward0"} <= labels
    assert sum(1 for i in nodes(dot) if i.startswith("out")) == 2


def test_freed_and_packed_saved_tensors():
    x = jg.tensor([1.0, 2.0], requires_grad=True)
    y = x.exp().sum()
    y.backward()
    assert "_saved_result\\n(freed)" in to_dot(y)
    with jg.autograd.graph.saved_tensors_hooks(lambda t: object(), lambda p: None):
        z = x.sin().sum()
    assert "_saved_self\\n(packed)" in to_dot(z)


def test_attributes_and_custom_functions():
    class Twice(jg.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return a * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2
    x = jg.tensor([[1.0, 2.0]], requires_grad=True)
    y = Twice.apply(x).sum(dim=1)
    dot = to_dot(y, show_attrs=True)
    labels = set(nodes(dot).values())
    assert "TwiceBackward" in labels and "saved_tensors[0]\\n(1, 2)" in labels
    assert any(label.startswith("SumBackward1\\ndims: (1,)") for label in labels)


def test_a_leaf_root_and_a_deep_graph():
    x = jg.tensor([1.0], requires_grad=True)
    assert "(1)" in nodes(to_dot(x)).values()
    h = x
    for _ in range(3000):  # no recursion limit
        h = h * 1.0
    assert len(nodes(to_dot(h, show_saved=False))) == 3000 + 2


def test_labels_are_escaped():
    w = jg.tensor([1.0], requires_grad=True)
    dot = to_dot((w * 2).sum(), params={'odd "name"\\': w})
    assert '"odd \\"name\\"\\\\\\n(1)"' in dot


def test_render_without_graphviz_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "graphviz", None)
    monkeypatch.setattr(shutil, "which", lambda name: None)
    dot = to_dot((jg.tensor([1.0], requires_grad=True) * 2).sum())
    with pytest.raises(RuntimeError, match=r"rendering a graph needs Graphviz: install the 'dot' program"):
        dot.render(str(tmp_path / "g.svg"))


@pytest.mark.skipif(shutil.which("dot") is None, reason="the Graphviz 'dot' program is not installed")
def test_render_svg_and_png(tmp_path):
    w = jg.tensor([[1.0, 2.0]], requires_grad=True)
    dot = to_dot((w.exp() * w).sum(), params={"w": w})
    svg = dot.render(str(tmp_path / "graph.svg"))
    text = open(svg).read()
    assert "<svg" in text and "ExpBackward0" in text
    png = dot.render(str(tmp_path / "graph.png"))
    assert open(png, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
