"""Memory formats (torch.memory_format): clone, contiguous, to, is_contiguous, empty and the *_like factories
lay tensors out as PyTorch does (strides compared side by side with PyTorch where it is installed, and with
the strides PyTorch gives written out), with PyTorch's errors; the values and gradients stay."""
import pickle

import numpy as np
import pytest

import jitgrad as jg
from jitgrad.autograd import gradcheck

FORMATS = ("contiguous_format", "preserve_format", "channels_last", "channels_last_3d")

# (how the tensor is made from a C-contiguous array of the shape, shape)
LAYOUTS = {"C 4-d": (lambda t: t, (2, 3, 4, 5)), "transposed": (lambda t: t.t(), (3, 4)),
           "permuted 4-d": (lambda t: t.permute(0, 2, 3, 1), (2, 3, 4, 5)),
           "channels-last 4-d": (lambda t: t.permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2), (2, 3, 4, 5)),
           "strided": (lambda t: t[:, ::2], (3, 4)), "expanded": (lambda t: t.expand(4, 3), (1, 3)),
           "size-1 dims": (lambda t: t.permute(0, 2, 3, 1), (2, 1, 4, 1)), "5-d": (lambda t: t, (2, 3, 2, 3, 2))}


def _make(lib, name):
    how, shape = LAYOUTS[name]
    return how(lib.from_numpy(np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)))


def _outcome(fn):
    """(strides, values) of fn's tensor, a bool, or (error type, message)."""
    try:
        r = fn()
    except (RuntimeError, TypeError) as e:
        return type(e).__name__, str(e)
    if isinstance(r, bool):
        return r
    return r.stride(), r.detach().numpy().tolist()


CALLS = {
    "clone": lambda lib, t, f: t.clone(memory_format=getattr(lib, f)),
    "contiguous": lambda lib, t, f: t.contiguous(memory_format=getattr(lib, f)),
    "to": lambda lib, t, f: t.to(memory_format=getattr(lib, f)),
    "is_contiguous": lambda lib, t, f: t.is_contiguous(memory_format=getattr(lib, f)),
    "empty_like": lambda lib, t, f: lib.empty_like(t, memory_format=getattr(lib, f)).fill_(1),
    "zeros_like": lambda lib, t, f: lib.zeros_like(t, memory_format=getattr(lib, f)),
    "full_like": lambda lib, t, f: lib.full_like(t, 2.0, memory_format=getattr(lib, f)),
}


@pytest.mark.parametrize("call", sorted(CALLS))
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_layouts_and_errors_match_pytorch(call, layout):
    torch = pytest.importorskip("torch")
    for f in FORMATS:
        want = _outcome(lambda: CALLS[call](torch, _make(torch, layout), f))
        got = _outcome(lambda: CALLS[call](jg, _make(jg, layout), f))
        assert got == want, (call, layout, f)


@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (1, 3, 1, 5), (2, 3, 2, 1, 2)])
def test_every_permutation_sliced_or_broadcast_is_laid_out_as_in_pytorch(shape):
    """clone, to, contiguous and empty_like in each format, over every permutation of the dims, also sliced
    along the last dim or broadcast along it: PyTorch's strides, but for those of size-1 dims (see
    jitgrad/_memory_format.py), and its values."""
    import itertools
    torch = pytest.importorskip("torch")
    a = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    for perm in itertools.permutations(range(len(shape))):
        for how in ("as is", "sliced", "broadcast"):
            ts = []
            for lib in (torch, jg):
                t = lib.from_numpy(a).permute(*perm)
                if how == "sliced":
                    t = t[..., ::2]
                elif how == "broadcast":
                    t = t[..., :1].expand(*t.shape)
                ts.append(t)
            for f in FORMATS:
                for call in ("clone", "to", "contiguous", "empty_like"):
                    want, got = (_outcome(lambda: CALLS[call](lib, t, f)) for lib, t in zip((torch, jg), ts))
                    if call == "empty_like" and isinstance(want[1], list):
                        want, got = (want[0], None), (got[0], None)  # (values: a fill of ones, compared above)
                    if isinstance(want[0], tuple) and isinstance(got[0], tuple):
                        size1 = [d for d, n in enumerate(ts[0].shape) if n == 1]
                        want = (tuple(s for d, s in enumerate(want[0]) if d not in size1), want[1])
                        got = (tuple(s for d, s in enumerate(got[0]) if d not in size1), got[1])
                    assert got == want, (perm, how, f, call)


def test_strides_pytorch_gives():
    """The same cases without PyTorch: the strides written out as PyTorch 2.13 gives them."""
    x = jg.arange(120.0).reshape(2, 3, 4, 5)
    cl = x.contiguous(memory_format=jg.channels_last)
    assert cl.stride() == (60, 1, 15, 3) and np.array_equal(cl.numpy(), x.numpy())
    assert cl.is_contiguous(memory_format=jg.channels_last) and not cl.is_contiguous()
    assert cl.clone().stride() == (60, 1, 15, 3)  # preserve_format keeps a dense layout
    assert cl.contiguous().stride() == (60, 20, 5, 1)
    assert cl.contiguous(memory_format=jg.channels_last) is cl
    t = jg.arange(12.0).reshape(3, 4).t()
    assert t.clone().stride() == (1, 4) and t.contiguous().stride() == (3, 1)
    assert jg.arange(12.0).reshape(3, 4)[:, ::2].clone().stride() == (2, 1)  # not dense: C order
    assert jg.ones(1, 3).expand(4, 3).clone().stride() == (3, 1)
    assert jg.empty_like(x.permute(0, 2, 3, 1)).stride() == (60, 5, 1, 20)
    assert jg.zeros_like(x, memory_format=jg.channels_last).stride() == (60, 1, 15, 3)
    assert jg.empty(2, 3, 4, 5, memory_format=jg.channels_last).stride() == (60, 1, 15, 3)
    assert jg.ones(2, 3, 2, 3, 2).contiguous(memory_format=jg.channels_last_3d).stride() == (36, 1, 18, 6, 3)
    assert jg.ones(2, 1, 4, 5).is_contiguous(memory_format=jg.channels_last)  # size-1 dims have any stride
    assert not jg.ones(2, 3).is_contiguous(memory_format=jg.channels_last)


def test_errors_are_pytorchs():
    x = jg.ones(2, 3)
    with pytest.raises(RuntimeError, match="^required rank 4 tensor to use channels_last format$"):
        x.contiguous(memory_format=jg.channels_last)
    with pytest.raises(RuntimeError, match="^required rank 5 tensor to use channels_last_3d format$"):
        jg.ones(2, 3, 4, 5).clone(memory_format=jg.channels_last_3d)
    with pytest.raises(RuntimeError, match="^preserve memory format is unsupported by the contiguous operator$"):
        x.t().contiguous(memory_format=jg.preserve_format)
    assert x.contiguous(memory_format=jg.preserve_format) is x
    with pytest.raises(RuntimeError, match="^unsupported memory format Preserve$"):
        jg.empty(2, 3, memory_format=jg.preserve_format)
    for fn, name in ((lambda: x.contiguous(memory_format=3), "contiguous"), (lambda: x.clone(memory_format=3), "clone"),
                     (lambda: x.is_contiguous(memory_format=3), "is_contiguous"), (lambda: x.to(memory_format=3), "to"),
                     (lambda: jg.zeros_like(x, memory_format="channels_last"), "zeros_like")):
        with pytest.raises(TypeError, match=r"^%s\(\): argument 'memory_format' must be torch.memory_format, not "
                           % name):
            fn()


def test_format_objects():
    assert isinstance(jg.channels_last, jg.memory_format)
    assert [repr(getattr(jg, f)) for f in FORMATS] == ["jitgrad." + f for f in FORMATS]
    for f in FORMATS:
        assert pickle.loads(pickle.dumps(getattr(jg, f))) is getattr(jg, f)


@pytest.mark.parametrize("fmt", ["preserve_format", "channels_last", "contiguous_format"])
def test_gradients_pass_through_a_relayout(fmt):
    x = jg.tensor(np.random.default_rng(0).standard_normal((2, 3, 2, 2)), requires_grad=True)
    assert gradcheck(lambda t: (t.permute(0, 2, 3, 1).clone(memory_format=getattr(jg, fmt)) ** 2).sum(-1), (x,))
    assert gradcheck(lambda t: t.contiguous(memory_format=getattr(jg, fmt if fmt != "preserve_format"
                                                                    else "channels_last")).tanh(), (x,))


def test_a_channels_last_cnn_trains_as_the_contiguous_one():
    """model.to(memory_format=channels_last) with a channels-last input: the 4-D parameters take the layout
    (and keep it through the optimizer's steps); the losses and parameters equal the contiguous run's."""
    def run(channels_last):
        jg.manual_seed(0)
        nn = jg.nn
        model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                              nn.Conv2d(8, 4, 3), nn.Flatten(), nn.Linear(16, 5))
        rng = np.random.default_rng(1)
        x = jg.from_numpy(rng.standard_normal((4, 3, 8, 8)).astype(np.float32))
        y = jg.from_numpy(rng.integers(0, 5, 4))
        if channels_last:
            model = model.to(memory_format=jg.channels_last)
            x = x.contiguous(memory_format=jg.channels_last)
            assert model[0].weight.is_contiguous(memory_format=jg.channels_last)
            assert model[6].weight.is_contiguous()  # (2-D: left as it is)
        opt = jg.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        losses = []
        for _ in range(3):
            opt.zero_grad()
            loss = jg.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return losses, model
    (l0, m0), (l1, m1) = run(False), run(True)
    np.testing.assert_allclose(l1, l0, rtol=1e-6)
    assert m1[0].weight.stride() == (27, 1, 9, 3)
    for (n, a), b in zip(m0.state_dict().items(), m1.state_dict().values()):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-5, atol=1e-6, err_msg=n)
