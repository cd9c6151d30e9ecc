"""nn.Parameter and nn.Module: registration, iteration, state dicts, modes, hooks, repr, containers,
and the fine-tuning workflow of the seed notes."""
import copy
import re

import numpy as np
import pytest

import jitgrad as torch
import jitgrad.nn as nn
import jitgrad.nn.functional as F


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(3, 4)
        self.bn = nn.BatchNorm1d(4)
        self.fc2 = nn.Linear(4, 2)
        self.register_buffer("scratch", torch.zeros(2), persistent=False)

    def forward(self, x):
        return self.fc2(F.relu(self.bn(self.fc1(x))))


# ---------------------------------------------------------------------- Parameter
def test_parameter_defaults_and_repr():
    p = nn.Parameter(torch.tensor([1.0, 2.0]))
    assert isinstance(p, torch.Tensor) and p.requires_grad and p.is_leaf and p.grad_fn is None
    assert repr(p) == "Parameter containing:\ntensor([1., 2.], requires_grad=True)"
    assert repr(nn.Parameter(torch.tensor([1.0, 2.0]), requires_grad=False)) == \
        "Parameter containing:\ntensor([1., 2.])"
    assert repr(nn.Parameter()) == "Parameter containing:\ntensor([], requires_grad=True)"


def test_parameter_shares_data_and_works_as_a_leaf():
    t = torch.tensor([1.0, 2.0])
    p = nn.Parameter(t)
    with torch.no_grad():
        p.mul_(3)
    assert t.tolist() == [3.0, 6.0]  # same storage
    y = (p * p).sum()
    assert type(p * 2) is torch.Tensor and y.grad_fn is not None
    y.backward()
    assert p.grad.tolist() == [6.0, 12.0]
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place"):
        p.add_(1)
    q = copy.deepcopy(p)
    assert isinstance(q, nn.Parameter) and q.requires_grad and q.tolist() == p.tolist()
    assert q.data_ptr() != p.data_ptr()


# ---------------------------------------------------------------------- registration and iteration
def test_registration_in_definition_order():
    net = Net()
    assert [n for n, _ in net.named_parameters()] == ["fc1.weight", "fc1.bias", "bn.weight", "bn.bias",
                                                      "fc2.weight", "fc2.bias"]
    assert [n for n, _ in net.named_buffers()] == ["scratch", "bn.running_mean", "bn.running_var",
                                                   "bn.num_batches_tracked"]  # each module's own first
    assert [n for n, _ in net.named_children()] == ["fc1", "bn", "fc2"]
    assert [n for n, _ in net.named_modules()] == ["", "fc1", "bn", "fc2"]
    assert len(list(net.parameters())) == 6 and len(list(net.parameters(recurse=False))) == 0
    assert list(net.children())[0] is net.fc1
    assert net.get_submodule("bn") is net.bn and net.get_parameter("fc2.bias") is net.fc2.bias


def test_shared_modules_and_parameters_count_once():
    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(2, 2)
            self.b = self.a
            self.w = nn.Parameter(torch.ones(2))
            self.w2 = self.w

    m = Tied()
    assert [n for n, _ in m.named_parameters()] == ["w", "a.weight", "a.bias"]
    assert [n for n, _ in m.named_modules()] == ["", "a"]
    assert len(list(m.modules())) == 2 and len(list(m.children())) == 1
    assert list(m.state_dict()) == ["w", "w2", "a.weight", "a.bias", "b.weight", "b.bias"]


def test_attribute_protocol():
    net = Net()
    assert "fc1" in dir(net) and "scratch" in dir(net) and "forward" in dir(net)
    with pytest.raises(AttributeError, match="'Net' object has no attribute 'nope'"):
        net.nope
    del net.fc2
    assert "fc2" not in dict(net.named_children())
    net.fc1.weight = nn.Parameter(torch.zeros(4, 3))
    assert net.fc1.weight.tolist()[0] == [0.0, 0.0, 0.0]
    net.fc1.bias = None
    assert [n for n, _ in net.fc1.named_parameters()] == ["weight"]
    net.scratch = torch.ones(2)
    assert net.scratch.tolist() == [1.0, 1.0] and "scratch" in dict(net.named_buffers())
    net.plain = 3
    assert net.plain == 3 and "plain" not in dict(net.named_parameters())


def test_registration_errors():
    net = Net()
    with pytest.raises(TypeError, match=r"cannot assign 'int' as child module 'fc1' \(torch.nn.Module or None "
                                        r"expected\)"):
        net.fc1 = 5
    with pytest.raises(TypeError, match=r"cannot assign 'jitgrad.FloatTensor' as parameter 'weight' "
                                        r"\(torch.nn.Parameter or None expected\)"):
        net.fc1.weight = torch.zeros(4, 3)
    with pytest.raises(KeyError, match="attribute 'fc1' already exists"):
        net.register_buffer("fc1", torch.zeros(1))
    with pytest.raises(KeyError, match='buffer name can.+t contain "."'):
        net.register_buffer("a.b", torch.zeros(1))
    with pytest.raises(TypeError, match=r"cannot assign 'int' object to buffer 'x' \(torch Tensor or None required\)"):
        net.register_buffer("x", 5)
    with pytest.raises(TypeError, match="buffer name should be a string. Got int"):
        net.register_buffer(5, torch.zeros(1))
    with pytest.raises(TypeError, match=r"cannot assign 'jitgrad.FloatTensor' object to parameter 'x' "
                                        r"\(torch.nn.Parameter or None required\)"):
        net.register_parameter("x", torch.zeros(1))
    with pytest.raises(KeyError, match='module name can.+t contain ".", got: a.b'):
        net.add_module("a.b", nn.ReLU())
    with pytest.raises(TypeError, match="int is not a Module subclass"):
        net.add_module("z", 5)

    class NoInit(nn.Module):
        def __init__(self):
            self.x = nn.Parameter(torch.zeros(1))

    with pytest.raises(AttributeError, match=r"cannot assign parameters before Module.__init__\(\) call"):
        NoInit()
    with pytest.raises(NotImplementedError, match='Module \\[Module\\] is missing the required "forward" function'):
        nn.Module()(1)


# ---------------------------------------------------------------------- state_dict / load_state_dict
def test_state_dict_keys_detached_and_sharing_storage():
    net = Net()
    sd = net.state_dict()
    assert list(sd) == ["fc1.weight", "fc1.bias", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var",
                        "bn.num_batches_tracked", "fc2.weight", "fc2.bias"]  # 'scratch' is not persistent
    w = sd["fc1.weight"]
    assert not w.requires_grad and w.grad_fn is None and type(w) is torch.Tensor
    assert w.data_ptr() == net.fc1.weight.data_ptr()
    with torch.no_grad():
        net.fc1.weight.fill_(0.5)
    assert w.tolist()[0][0] == 0.5
    kept = net.state_dict(keep_vars=True)
    assert kept["fc1.weight"] is net.fc1.weight


def test_load_state_dict_roundtrip():
    torch.manual_seed(0)
    a, b = Net(), Net()
    b.bn.running_mean.add_(3.0)
    result = a.load_state_dict(b.state_dict())
    assert repr(result) == "<All keys matched successfully>"
    assert result.missing_keys == [] and result.unexpected_keys == []
    for (n1, t1), (n2, t2) in zip(a.state_dict().items(), b.state_dict().items()):
        assert n1 == n2 and np.array_equal(t1.numpy(), t2.numpy())
    assert a.fc1.weight.data_ptr() != b.fc1.weight.data_ptr()  # copied in place, not aliased
    assert isinstance(a.fc1.weight, nn.Parameter) and a.fc1.weight.requires_grad
    c = Net()
    c.fc1.requires_grad_(False)
    c.load_state_dict(b.state_dict(), assign=True)
    assert c.fc1.weight.data_ptr() == b.fc1.weight.data_ptr() and isinstance(c.fc1.weight, nn.Parameter)
    assert not c.fc1.weight.requires_grad and c.fc2.weight.requires_grad
    assert c.bn.running_mean.data_ptr() == b.bn.running_mean.data_ptr()


def test_load_state_dict_errors():
    net = Net()
    sd = dict(net.state_dict())
    del sd["fc1.weight"]
    sd["extra"] = torch.zeros(1)
    sd["fc2.weight"] = torch.zeros(3, 4)
    expected = ("Error(s) in loading state_dict for Net:\n"
                "\tMissing key(s) in state_dict: \"fc1.weight\". \n"
                "\tUnexpected key(s) in state_dict: \"extra\". \n"
                "\tsize mismatch for fc2.weight: copying a param with shape jitgrad.Size([3, 4]) from checkpoint, the "
                "shape in current model is jitgrad.Size([2, 4]).")
    with pytest.raises(RuntimeError, match="^" + re.escape(expected) + "$"):
        net.load_state_dict(sd)
    del sd["fc2.weight"]
    result = net.load_state_dict(sd, strict=False)  # reports, but loads what matches
    assert result.missing_keys == ["fc1.weight", "fc2.weight"] and result.unexpected_keys == ["extra"]
    sd["fc2.weight"] = torch.zeros(3, 4)
    with pytest.raises(RuntimeError, match="size mismatch for fc2.weight"):
        net.load_state_dict(sd, strict=False)
    with pytest.raises(TypeError, match="Expected state_dict to be dict-like, got <class 'int'>."):
        net.load_state_dict(5)


# ---------------------------------------------------------------------- modes and bulk operations
def test_train_eval_propagate():
    net = Net()
    assert net.training and net.bn.training
    assert net.eval() is net and not net.training and not net.bn.training
    net.train()
    assert net.fc2.training
    with pytest.raises(ValueError, match="training mode is expected to be boolean"):
        net.train("yes")


def test_zero_grad_requires_grad_and_apply():
    net = Net()
    net(torch.randn(4, 3)).sum().backward()
    assert net.fc1.weight.grad is not None
    net.zero_grad(set_to_none=False)
    assert np.all(net.fc1.weight.grad.numpy() == 0)
    net.zero_grad()
    assert all(p.grad is None for p in net.parameters())
    net.requires_grad_(False)
    assert not any(p.requires_grad for p in net.parameters())
    seen = []
    net.apply(lambda m: seen.append(type(m).__name__))
    assert seen == ["Linear", "BatchNorm1d", "Linear", "Net"]


def test_to_dtype_keeps_parameter_objects():
    net = Net()
    w = net.fc1.weight
    net(torch.randn(4, 3)).sum().backward()
    assert net.to(torch.float64) is net
    assert net.fc1.weight is w and w.dtype is torch.float64 and w.grad.dtype is torch.float64
    assert net.bn.running_mean.dtype is torch.float64 and net.bn.num_batches_tracked.dtype is torch.int64
    assert net(torch.randn(4, 3, dtype=torch.float64)).dtype is torch.float64
    net.float()
    assert w.dtype is torch.float32


# ---------------------------------------------------------------------- hooks
def test_forward_hooks():
    lin = nn.Linear(2, 2)
    calls = []
    h1 = lin.register_forward_pre_hook(lambda m, args: (args[0] * 0,))
    h2 = lin.register_forward_hook(lambda m, args, out: calls.append(("post", out.shape)) or out + 1)
    lin.register_forward_hook(lambda m, args, out: calls.append("first"), prepend=True)
    out = lin(torch.ones(3, 2))
    np.testing.assert_allclose(out.detach().numpy(), np.broadcast_to(lin.bias.detach().numpy() + 1, (3, 2)))
    assert calls == ["first", ("post", (3, 2))]
    h1.remove()
    h2.remove()
    out = lin(torch.ones(1, 2))
    expect = lin.weight.detach().numpy().sum(1)[None] + lin.bias.detach().numpy()
    np.testing.assert_allclose(out.detach().numpy(), expect, rtol=1e-6)

    seen = []
    with lin.register_forward_hook(lambda m, a, kw, o: seen.append(sorted(kw)), with_kwargs=True):
        lin(input=torch.ones(1, 2))
    lin(torch.ones(1, 2))
    assert seen == [["input"]]


# ---------------------------------------------------------------------- repr
def test_repr_nested():
    net = Net()
    net.seq = nn.Sequential(nn.ReLU(), nn.Sequential(nn.Tanh()))
    assert repr(net) == (
        "Net(\n"
        "  (fc1): Linear(in_features=3, out_features=4, bias=True)\n"
        "  (bn): BatchNorm1d(4, eps=1e-05, momentum=0.1, affine=True, bias=True, track_running_stats=True)\n"
        "  (fc2): Linear(in_features=4, out_features=2, bias=True)\n"
        "  (seq): Sequential(\n"
        "    (0): ReLU()\n"
        "    (1): Sequential(\n"
        "      (0): Tanh()\n"
        "    )\n"
        "  )\n"
        ")")
    assert repr(nn.ModuleList()) == "ModuleList()"
    assert repr(nn.Conv2d(3, 8, 3)) == "Conv2d(3, 8, kernel_size=(3, 3), stride=(1, 1))"
    assert repr(nn.Conv2d(4, 8, (3, 5), stride=2, padding=1, dilation=2, groups=2, bias=False)) == \
        "Conv2d(4, 8, kernel_size=(3, 5), stride=(2, 2), padding=(1, 1), dilation=(2, 2), groups=2, bias=False)"
    assert repr(nn.MaxPool2d(2)) == "MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)"
    assert repr(nn.Embedding(10, 3, padding_idx=0)) == "Embedding(10, 3, padding_idx=0)"
    assert repr(nn.LeakyReLU(0.2, True)) == "LeakyReLU(negative_slope=0.2, inplace=True)"
    assert repr(nn.Hardtanh()) == "Hardtanh(min_val=-1.0, max_val=1.0)"
    assert repr(nn.Hardtanh(-2.0, 2.0, True)) == "Hardtanh(min_val=-2.0, max_val=2.0, inplace=True)"
    assert repr(nn.CrossEntropyLoss()) == "CrossEntropyLoss()"


# ---------------------------------------------------------------------- containers
def test_sequential():
    seq = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    assert len(seq) == 3 and isinstance(seq[1], nn.ReLU) and isinstance(seq[-1], nn.Linear)
    assert [n for n, _ in seq.named_parameters()] == ["0.weight", "0.bias", "2.weight", "2.bias"]
    head = seq[1:]
    assert isinstance(head, nn.Sequential) and list(head._modules) == ["1", "2"]
    x = torch.randn(4, 2)
    np.testing.assert_allclose(seq(x).detach().numpy(), seq[2](seq[1](seq[0](x))).detach().numpy())
    seq.append(nn.Sigmoid())
    assert len(seq) == 4 and list(seq._modules) == ["0", "1", "2", "3"]
    del seq[1]
    assert list(seq._modules) == ["0", "1", "2"] and isinstance(seq[1], nn.Linear)
    seq[2] = nn.Tanh()
    assert isinstance(seq[2], nn.Tanh) and len(list(iter(seq))) == 3
    with pytest.raises(IndexError, match="index 3 is out of range"):
        seq[3]
    from collections import OrderedDict
    named = nn.Sequential(OrderedDict([("conv", nn.Conv2d(1, 2, 3)), ("act", nn.ReLU())]))
    assert list(named.state_dict()) == ["conv.weight", "conv.bias"] and named.act is named[1]


def test_module_list_and_dict():
    layers = nn.ModuleList([nn.Linear(2, 2) for _ in range(3)])
    layers.append(nn.ReLU())
    layers.extend([nn.Tanh()])
    assert len(layers) == 5 and isinstance(layers[-1], nn.Tanh)
    assert len(list(layers.parameters())) == 6
    assert isinstance(layers[1:3], nn.ModuleList) and len(layers[1:3]) == 2
    layers.insert(0, nn.Sigmoid())
    assert isinstance(layers[0], nn.Sigmoid) and len(layers) == 6

    class Holder(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.ModuleList([nn.Linear(2, 2), nn.Linear(2, 2)])
            self.heads = nn.ModuleDict({"a": nn.Linear(2, 1), "b": nn.Linear(2, 3)})

    h = Holder()
    assert list(h.state_dict())[:2] == ["blocks.0.weight", "blocks.0.bias"]
    assert "heads.b.bias" in h.state_dict()
    assert list(h.heads) == ["a", "b"] and "a" in h.heads and len(h.heads) == 2
    assert [k for k, _ in h.heads.items()] == ["a", "b"]
    h.heads["c"] = nn.ReLU()
    assert list(h.heads.keys()) == ["a", "b", "c"]
    assert isinstance(h.heads.pop("c"), nn.ReLU) and len(h.heads) == 2


# ---------------------------------------------------------------------- the seed notes' fine-tuning workflow
def test_freeze_replace_head_and_train_only_it():
    torch.manual_seed(0)
    model = nn.Sequential()
    model.add_module("body", nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten()))
    model.add_module("fc", nn.Linear(4, 10))
    for param in model.parameters():
        param.requires_grad = False
    # Replace the last fully-connected layer: new modules' parameters require grad by default
    model.fc = nn.Linear(4, 3)
    trainable = list(filter(lambda p: p.requires_grad, model.parameters()))
    assert [id(p) for p in trainable] == [id(model.fc.weight), id(model.fc.bias)]
    frozen = {n: p.detach().numpy().copy() for n, p in model.named_parameters() if not p.requires_grad}
    assert sorted(frozen) == ["body.0.bias", "body.0.weight"]

    x, y = torch.randn(6, 1, 5, 5), torch.tensor([0, 1, 2, 0, 1, 2])
    features = model.body(x)
    assert not features.requires_grad and features.grad_fn is None  # nothing recorded for the frozen part
    before = model.fc.weight.detach().numpy().copy()
    for _ in range(3):
        model.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        with torch.no_grad():
            for p in trainable:
                p.sub_(p.grad * 0.1)
    assert all(p.grad is None for n, p in model.named_parameters() if n.startswith("body"))
    assert not np.array_equal(model.fc.weight.detach().numpy(), before)
    for n, p in model.named_parameters():
        if n in frozen:
            assert np.array_equal(p.detach().numpy(), frozen[n])
    # flags can be changed back through named_parameters()
    for n, p in model.named_parameters():
        p.requires_grad = True
    assert all(p.requires_grad for p in model.parameters())


def test_deepcopy_gives_an_independent_model():
    net = Net()
    net(torch.randn(4, 3)).sum().backward()
    twin = copy.deepcopy(net)
    assert isinstance(twin.fc1.weight, nn.Parameter) and twin.fc1.weight is not net.fc1.weight
    assert np.array_equal(twin.fc1.weight.detach().numpy(), net.fc1.weight.detach().numpy())
    assert np.array_equal(twin.fc1.weight.grad.numpy(), net.fc1.weight.grad.numpy())
    with torch.no_grad():
        twin.fc1.weight.fill_(0.0)
        twin.bn.running_mean.fill_(5.0)
    assert not np.all(net.fc1.weight.detach().numpy() == 0) and np.all(net.bn.running_mean.numpy() != 5.0)
