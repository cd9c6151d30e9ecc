"""jitgrad.save of whole objects (pickled, as torch.save) and jitgrad.load's weights_only unpickler."""
import collections
import io
import os
import pickle
import re

import numpy as np
import pytest

import jitgrad as jg
from jitgrad import nn
from jitgrad import serialization as S


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(3, 4), nn.ReLU())
        self.head = nn.Linear(4, 2)
        self.register_buffer("steps", jg.zeros((), dtype=jg.int64))

    def forward(self, x):
        return self.head(self.body(x))


MODULE_CLASSES = [Net, nn.Sequential, nn.Linear, nn.ReLU]


@pytest.fixture(autouse=True)
def no_safe_globals():
    S.clear_safe_globals()
    yield
    S.clear_safe_globals()


def saved(obj, **kw):
    buf = io.BytesIO()
    jg.save(obj, buf, **kw)
    buf.seek(0)
    return buf


def trained():
    jg.manual_seed(0)
    model = Net()
    opt = jg.optim.Adam(model.parameters(), lr=0.01)
    for _ in range(2):
        opt.zero_grad()
        model(jg.randn(5, 3)).pow(2).sum().backward()
        opt.step()
    return model, opt


def unsupported_global_message(path):
    return ("Weights only load failed. This file can still be loaded, to do so you have two options, "
            "\033[1mdo those steps only if you trust the source of the checkpoint\033[0m. \n\t(1) In PyTorch 2.6, we "
            "changed the default value of the `weights_only` argument in `torch.load` from `False` to `True`. "
            "Re-running `torch.load` with `weights_only` set to `False` will likely succeed, but it can result in "
            "arbitrary code execution. Do it only if you got the file from a trusted source.\n\t(2) Alternatively, "
            "to load with `weights_only=True` please check the recommended steps in the following error message."
            "\n\tWeightsUnpickler error: Unsupported global: GLOBAL %s was not an allowed global by default. Please "
            "use `torch.serialization.add_safe_globals([%s])` or the `torch.serialization.safe_globals([%s])` "
            "context manager to allowlist this global if you trust this class/function.\n\nCheck the documentation "
            "of torch.load to learn more about types accepted by default with weights_only "
            "https://pytorch.org/docs/stable/generated/torch.load.html." % (path, path, path))


# ---------------------------------------------------------------- whole objects
def test_whole_model_and_optimizer_roundtrip_with_weights_only_false():
    model, opt = trained()
    ck = jg.load(saved({"model": model, "opt": opt, "epoch": 2}), weights_only=False)
    m2, o2 = ck["model"], ck["opt"]
    assert isinstance(m2, Net) and ck["epoch"] == 2
    x = jg.randn(4, 3)
    np.testing.assert_array_equal(m2(x).detach().numpy(), model(x).detach().numpy())
    # the optimizer's params are the loaded model's parameters (each tensor stored once), its state intact
    assert all(p is q for p, q in zip(o2.param_groups[0]["params"], m2.parameters()))
    assert isinstance(m2.head.weight, nn.Parameter) and m2.head.weight.requires_grad
    assert m2.head.weight.grad is None
    np.testing.assert_array_equal(o2.state[m2.head.weight]["exp_avg"].numpy(),
                                  opt.state[model.head.weight]["exp_avg"].numpy())
    # and training resumes exactly where it stopped
    for m, o in ((model, opt), (m2, o2)):
        jg.manual_seed(1)
        o.zero_grad()
        m(jg.randn(5, 3)).pow(2).sum().backward()
        o.step()
    np.testing.assert_array_equal(m2.head.weight.detach().numpy(), model.head.weight.detach().numpy())


def test_weights_only_refuses_a_class_that_is_not_allowlisted():
    model, _ = trained()
    with pytest.raises(pickle.UnpicklingError) as e:
        jg.load(saved(model))
    assert str(e.value) == unsupported_global_message("%s.Net" % __name__)
    with pytest.raises(pickle.UnpicklingError, match="GLOBAL object was not an allowed global"):
        jg.load(saved({"x": object()}))  # builtins are named without their module, as PyTorch does


def test_add_safe_globals_and_the_context_manager():
    model, _ = trained()
    buf = saved(model)
    with S.safe_globals(MODULE_CLASSES):
        assert set(S.get_safe_globals()) == set(MODULE_CLASSES)
        out = jg.load(buf)
    assert S.get_safe_globals() == []
    x = jg.randn(2, 3)
    np.testing.assert_array_equal(out(x).detach().numpy(), model(x).detach().numpy())
    buf.seek(0)
    S.add_safe_globals([Net, nn.Sequential])
    with pytest.raises(pickle.UnpicklingError, match=re.escape("GLOBAL jitgrad.nn.modules.linear.Linear was not")):
        jg.load(buf)  # every class in the pickle must be allowed, not only the outer one
    buf.seek(0)
    S.add_safe_globals([nn.Linear, (nn.ReLU, "jitgrad.nn.modules.activation.ReLU")])
    assert isinstance(jg.load(buf), Net)
    S.clear_safe_globals()
    assert S.get_safe_globals() == []
    assert S.get_unsafe_globals_in_checkpoint(saved(model)) == sorted(
        "%s.%s" % (c.__module__, c.__qualname__) for c in MODULE_CLASSES)


def test_containers_sizes_dtypes_and_devices_are_allowed_by_default():
    obj = {"set": {1, 2}, "complex": 1 + 2j, "bytes": bytearray(b"ab"), "b": b"xy", "size": jg.zeros(2, 3).shape,
           "dtype": jg.float16, "device": jg.device("cpu"), "od": collections.OrderedDict(a=jg.ones(2)),
           "counter": collections.Counter("aab"), "t": (jg.arange(3),)}
    out = jg.load(saved(obj))
    assert out["set"] == {1, 2} and out["complex"] == 1 + 2j and out["bytes"] == bytearray(b"ab")
    assert out["b"] == b"xy" and out["size"] == (2, 3) and isinstance(out["size"], jg.Size)
    assert out["dtype"] is jg.float16 and out["device"] == jg.device("cpu")
    assert type(out["od"]) is collections.OrderedDict and out["od"]["a"].tolist() == [1.0, 1.0]
    assert out["counter"] == collections.Counter("aab") and out["t"][0].tolist() == [0, 1, 2]


def test_shared_and_recursive_structures():
    t = jg.ones(2, requires_grad=True)
    loop = [t, t]
    loop.append(loop)
    out = jg.load(saved(loop))
    assert out[2] is out and out[0] is out[1] and out[0].requires_grad and out[0].is_leaf


class _Boom:
    def __reduce__(self):
        return (os.system, ("touch PWNED",))


def test_blocked_modules_are_refused_even_when_allowlisted(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    buf = saved({"x": _Boom()})
    S.add_safe_globals([os.system])
    with pytest.raises(pickle.UnpicklingError) as e:
        jg.load(buf)
    name = os.system.__module__
    assert str(e.value) == (
        "Weights only load failed. In PyTorch 2.6, we changed the default value of the `weights_only` argument in "
        "`torch.load` from `False` to `True`. Re-running `torch.load` with `weights_only` set to `False` will likely "
        "succeed, but it can result in arbitrary code execution. Do it only if you got the file from a trusted "
        "source.\n\n\nTrying to load unsupported GLOBAL %s.system whose module %s is blocked.\n\nCheck the "
        "documentation of torch.load to learn more about types accepted by default with weights_only "
        "https://pytorch.org/docs/stable/generated/torch.load.html." % (name, name))
    assert not (tmp_path / "PWNED").exists()


def test_state_dicts_stay_in_the_checked_format():
    model, opt = trained()
    buf = saved({"model": model.state_dict(), "opt": opt.state_dict(), "epoch": 3})
    assert b'"t":"pickle"' not in buf.getvalue()
    assert S.get_unsafe_globals_in_checkpoint(buf) == []
    buf.seek(0)
    ck = jg.load(buf)
    fresh = Net()
    fresh.load_state_dict(ck["model"])
    np.testing.assert_array_equal(fresh.head.weight.detach().numpy(), model.head.weight.detach().numpy())


def test_map_location_forms():
    buf = saved({"w": nn.Parameter(jg.ones(2)), "s": {1}})
    for loc in ("cpu", jg.device("cpu"), {"cpu": "cpu"}, lambda storage, location: storage):
        buf.seek(0)
        out = jg.load(buf, map_location=loc)
        assert isinstance(out["w"], nn.Parameter) and out["w"].device == jg.device("cpu")
    buf.seek(0)
    seen = []
    jg.load(buf, map_location=lambda t, location: seen.append(location))
    assert seen == ["cpu"]


def test_explicit_pickle_module_needs_weights_only_false():
    buf = saved({"s": {1}})
    with pytest.raises(RuntimeError, match="Can not safely load weights when explicit pickle_module is specified"):
        jg.load(buf, pickle_module=pickle)
    buf.seek(0)
    assert jg.load(buf, pickle_module=pickle, weights_only=False) == {"s": {1}}


def test_tuple_entries_of_add_safe_globals_are_checked():
    S.add_safe_globals([(Net, "a", "b")])
    with pytest.raises(ValueError, match="Expected tuple of length 2"):
        jg.load(saved(Net()))


@pytest.mark.torch
def test_messages_match_pytorch():
    torch = pytest.importorskip("torch")

    class TorchNet(torch.nn.Module):
        pass
    TorchNet.__qualname__ = "TorchNet"
    globals()["TorchNet"] = TorchNet  # picklable by name, as a program's model class is
    buf = io.BytesIO()
    torch.save(TorchNet(), buf)
    buf.seek(0)
    with pytest.raises(pickle.UnpicklingError) as theirs:
        torch.load(buf)
    with pytest.raises(pickle.UnpicklingError) as ours:
        jg.load(saved(Net()))
    assert str(ours.value) == str(theirs.value).replace("TorchNet", "Net")
