"""jitgrad.onnx.export: the file passes onnx.checker and onnxruntime runs it to jitgrad's outputs."""
import io
import sys
import warnings

import numpy as np
import pytest

import jitgrad as jg
import jitgrad.nn as nn
import jitgrad.nn.functional as F

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")


def run_onnx(model_proto, feeds):
    session = ort.InferenceSession(model_proto.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {k: v.numpy() for k, v in feeds.items()})


def exported(model, args, **kwargs):
    buf = io.BytesIO()
    program = jg.onnx.export(model, args, buf, **kwargs)
    proto = onnx.load_model_from_string(buf.getvalue())
    onnx.checker.check_model(proto, full_check=True)
    assert proto == program.model_proto
    return proto


def mlp():
    jg.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 3), nn.Softmax(dim=1))


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.conv2 = nn.Conv2d(4, 8, 3, stride=2)
        self.fc = nn.Linear(8 * 2 * 2, 10)
        self.ln = nn.LayerNorm(10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn(self.conv1(x))), 2)
        x = F.avg_pool2d(F.gelu(self.conv2(x)), 1)
        x = F.adaptive_avg_pool2d(x, (2, 2))
        return F.log_softmax(self.ln(self.fc(x.flatten(1))), dim=-1)


def cnn():
    jg.manual_seed(1)
    m = SmallCNN()
    with jg.no_grad():  # running statistics that are not the defaults, so eval-mode batch norm is checked
        m.bn.running_mean.copy_(jg.randn(4) * 0.1)
        m.bn.running_var.copy_(jg.rand(4) + 0.5)
    return m


def test_mlp_matches_onnxruntime():
    m = mlp()
    x = jg.randn(5, 6)
    proto = exported(m, (x,), input_names=["x"], output_names=["probs"])
    (got,) = run_onnx(proto, {"x": x})
    np.testing.assert_allclose(got, m(x).detach().numpy(), rtol=1e-5, atol=1e-6)
    assert [i.name for i in proto.graph.input] == ["x"] and [o.name for o in proto.graph.output] == ["probs"]
    # parameters are initializers named as in the state dict
    assert {t.name for t in proto.graph.initializer} >= set(m.state_dict())
    assert [n.op_type for n in proto.graph.node].count("Gemm") == 3


def test_cnn_matches_onnxruntime_in_eval_mode():
    m = cnn()
    m.train()
    x = jg.randn(3, 1, 12, 12)
    proto = exported(m, (x,))
    assert m.training and m.bn.training  # the export ran in eval mode and put the mode back
    m.eval()
    (got,) = run_onnx(proto, {"x": x})
    np.testing.assert_allclose(got, m(x).detach().numpy(), rtol=1e-4, atol=1e-5)
    types = {n.op_type for n in proto.graph.node}
    assert {"Conv", "MaxPool", "AveragePool", "Gemm", "LogSoftmax"} <= types


def test_dynamic_batch_axis():
    m = cnn().eval()
    x = jg.randn(2, 1, 12, 12)
    proto = exported(m, (x,), input_names=["images"], output_names=["logp"],
                     dynamic_axes={"images": {0: "batch"}, "logp": {0: "batch"}})
    dim = proto.graph.input[0].type.tensor_type.shape.dim
    assert dim[0].dim_param == "batch" and [d.dim_value for d in dim[1:]] == [1, 12, 12]
    assert proto.graph.output[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    for batch in (1, 7):
        x = jg.randn(batch, 1, 12, 12)
        (got,) = run_onnx(proto, {"images": x})
        assert got.shape == (batch, 10)
        np.testing.assert_allclose(got, m(x).detach().numpy(), rtol=1e-4, atol=1e-5)


def test_dynamic_axes_list_form_and_reshape_of_batch():
    def f(x, w):
        y = (x @ w).reshape(-1, 4)  # (B*3, 4): the batch folded into the first axis
        return y.sum(1), x.permute(0, 2, 1)[:, 1:3]
    x, w = jg.randn(2, 3, 5), jg.randn(5, 4)
    proto = exported(f, (x, w), dynamic_axes={"x": [0]})
    assert proto.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "x_dynamic_axes_1"
    x = jg.randn(4, 3, 5)
    got = run_onnx(proto, {"x": x, "w": w})
    for g, want in zip(got, f(x, w)):
        np.testing.assert_allclose(g, want.numpy(), rtol=1e-5, atol=1e-6)


ELEMENTWISE = [
    lambda x: F.leaky_relu(x, 0.2) + F.elu(x) - F.selu(x) * F.celu(x, 0.5),
    lambda x: F.silu(x) / (1 + F.softplus(x, beta=2.0)) + F.hardswish(x) * F.hardsigmoid(x),
    lambda x: F.gelu(x, approximate="tanh") + F.mish(x) + F.hardtanh(x, -0.5, 0.5),
    lambda x: x.clamp(-0.3, 0.4) + x.clamp(min=0) + F.threshold(x, 0.1, 2.0) + jg.where(x > 0, x, 0.5 * x),
    lambda x: (x.abs() + 1).sqrt().log().exp().rsqrt() ** 2 - x.square() + x.pow(3) + jg.erf(x) + x.sin() * x.cos(),
    lambda x: jg.maximum(x, -x * 0.5) + jg.minimum(x, x * 0.3) - x.neg().reciprocal().clamp(-5, 5),
    lambda x: jg.cat([x, x.softmax(0)], dim=1).mean(1, keepdim=True) + x.sum() - x.amax(1, keepdim=True),
    lambda x: jg.stack([x, x.t().t()], dim=1).var(1) + x.std(0) + x.max(1)[0].unsqueeze(1) +
    x.logsumexp(1, keepdim=True),
    lambda x: x.unsqueeze(0).expand(3, 4, 5).sum(0) + F.pad(x, (1, 2))[:, 1:6] + x.repeat(1, 2)[:, ::2],
    lambda x: x[1] + x[:, 2].unsqueeze(1).transpose(0, 1).T.squeeze(1)[:, None].flatten()[:, None][:4].expand(4, 5),
    lambda x: (x > 0).float() + (x <= 0.2).to(jg.float32) * x.double().float() + x.floor() - x.ceil() + x.sign(),
    lambda x: (F.layer_norm(x, (5,), jg.linspace(0.5, 1.5, 5), jg.arange(5.0)) + F.layer_norm(x, (4, 5), eps=1e-3)
               + F.layer_norm(x, 5, bias=jg.ones(5))),
]


@pytest.mark.parametrize("k", range(len(ELEMENTWISE)))
@pytest.mark.parametrize("opset", [13, 18])
def test_elementwise_reductions_and_shapes(k, opset):
    fn = ELEMENTWISE[k]
    jg.manual_seed(k)
    x = jg.randn(4, 5)
    want = fn(x)
    proto = exported(fn, (x,), opset_version=opset)
    assert proto.opset_import[0].version == opset
    (got,) = run_onnx(proto, {"x": x})
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-5)


def test_gelu_is_one_node_from_opset_20():
    proto = exported(lambda x: F.gelu(x), (jg.randn(3),), opset_version=20)
    assert [n.op_type for n in proto.graph.node] == ["Gelu", "Identity"]


def test_unmapped_op_names_the_op_and_the_line():
    class Model(nn.Module):
        def forward(self, x):
            y = x.relu()
            return jg.cumsum(y, 0)  # no ONNX rule

    with pytest.raises(jg.onnx.UnsupportedOperatorError,
                       match=r"the op 'cumsum' \(aten::cumsum\), called at .*test_onnx_export.py:\d+, has no ONNX "
                             r"mapping") as info:
        jg.onnx.export(Model(), (jg.randn(3),))
    line = int(str(info.value).split("test_onnx_export.py:")[1].split(",")[0])
    assert "cumsum" in open(__file__).read().splitlines()[line - 1]


def test_a_value_read_in_python_is_a_clear_error():
    def f(x):
        return x * 2 if x.sum().item() > 0 else x
    with pytest.raises(jg.onnx.OnnxExporterError, match="cannot be captured as one graph"):
        jg.onnx.export(f, (jg.ones(3),))


def test_max_pool_indices_have_no_counterpart():
    def f(x):
        v, i = F.max_pool2d(x, 2, return_indices=True)
        return v + i
    with pytest.raises(jg.onnx.UnsupportedOperatorError, match="max_pool2d"):
        jg.onnx.export(f, (jg.randn(1, 1, 4, 4),))


def test_opset_out_of_range():
    with pytest.raises(ValueError, match="Unsupported ONNX opset version: 9"):
        jg.onnx.export(lambda x: x + 1, (jg.ones(2),), opset_version=9)


def test_without_the_onnx_package_the_error_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "onnx", None)
    with pytest.raises(ImportError, match=r"pip install 'jitgrad\[onnx\]'"):
        jg.onnx.export(lambda x: x + 1, (jg.ones(2),))


def test_program_saves_and_runs(tmp_path):
    m = mlp()
    x = jg.randn(2, 6)
    program = jg.onnx.export(m, x)  # one tensor as args; no file
    program.save(str(tmp_path / "m.onnx"))
    onnx.checker.check_model(str(tmp_path / "m.onnx"))
    np.testing.assert_allclose(program(x)[0], m(x).detach().numpy(), rtol=1e-5, atol=1e-6)
    assert not jg.onnx.is_in_onnx_export()


@pytest.mark.torch
def test_same_graph_interface_as_torch_onnx():
    """The ONNX graph's inputs, outputs and dynamic dims are named as torch.onnx.export names them."""
    torch = pytest.importorskip("torch")
    tm = torch.nn.Sequential(torch.nn.Linear(6, 3))
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(tm, (torch.randn(2, 6),), buf, input_names=["x"], output_names=["y"],
                          dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}}, dynamo=False)
    theirs = onnx.load_model_from_string(buf.getvalue())
    ours = exported(nn.Sequential(nn.Linear(6, 3)), (jg.randn(2, 6),), input_names=["x"], output_names=["y"],
                    dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
    for a, b in ((theirs.graph.input, ours.graph.input), (theirs.graph.output, ours.graph.output)):
        assert [v.name for v in a] == [v.name for v in b]
        assert [[d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim] for v in a] == \
            [[d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim] for v in b]


def test_onnx_digits_example(tmp_path):
    pytest.importorskip("sklearn")
    import os
    import runpy
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    main = runpy.run_path(os.path.join(root, "examples", "onnx_digits.py"))["main"]
    result = main(["--epochs", "1", "--out", str(tmp_path / "cnn.onnx")])
    assert result["agree"] >= 0.99 and result["max_diff"] < 1e-4
    onnx.checker.check_model(str(tmp_path / "cnn.onnx"))


LAYERS = [
    (lambda x, w: F.conv1d(x, w[:, :3, :, 0], stride=2, padding=1), (2, 3, 9)),
    (lambda x, w: F.conv2d(x, w[:4, :2], padding=2, dilation=2, groups=2), (2, 4, 7, 7)),
    (lambda x, w: F.max_pool2d(x, 3, stride=2, padding=1, ceil_mode=True), (2, 3, 7, 8)),
    (lambda x, w: F.avg_pool2d(x, 3, stride=2, padding=1, count_include_pad=False), (2, 3, 7, 8)),
    (lambda x, w: F.avg_pool2d(x, (2, 3), stride=(1, 2), ceil_mode=True), (2, 3, 7, 8)),
    (lambda x, w: F.adaptive_avg_pool2d(x, (2, 4)), (2, 3, 6, 8)),
    (lambda x, w: F.pixel_shuffle(x, 2) + 0, (2, 8, 3, 3)),
    (lambda x, w: F.embedding((x.abs() * 2).long().clamp(max=3), w[0, 0]), (3, 5)),
    (lambda x, w: jg.mv(x, w[0, 0, 0]) + jg.dot(w[0, 0, 0], w[1, 0, 0]), (5, 4)),
    (lambda x, w: (x * 3).round() + jg.isnan(x).float() + (x == x.round()).float() - (x != 0).float() +
     (jg.logical_and(x > 0, x < 1) | (x > 2)).float(), (3, 5)),
    (lambda x, w: x.clamp(min=w[0, 0, 0, 0], max=w[0, 0, 0, 0] + 1), (3, 4)),
]


@pytest.mark.parametrize("k", range(len(LAYERS)))
def test_layers_and_their_options(k):
    fn, shape = LAYERS[k]
    jg.manual_seed(k)
    x, w = jg.randn(*shape), jg.randn(4, 4, 4, 4)
    want = fn(x, w)
    proto = exported(fn, (x, w))
    got = run_onnx(proto, {"x": x, "w": w})[0]
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-5)


def test_every_rule_is_an_entry_and_in_the_docs():
    from jitgrad.onnx._symbolic import RULES
    from jitgrad.ops import OPS
    assert set(RULES) <= set(OPS)
    import os
    doc = open(os.path.join(os.path.dirname(__file__), "..", "..", "docs", "onnx.md")).read()
    missing = [name for name in RULES if "`%s`" % name not in doc]
    assert not missing, missing


def test_float16_model_computes_in_float32_and_rounds_as_jitgrad():
    jg.manual_seed(3)
    m = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3), nn.LayerNorm(3)).half()
    x = jg.randn(5, 4).half()
    proto = exported(m, (x,))
    (got,) = run_onnx(proto, {"input": x})
    assert got.dtype == np.float16
    np.testing.assert_allclose(got.astype(np.float32), m(x).detach().float().numpy(), rtol=2e-3, atol=2e-3)
