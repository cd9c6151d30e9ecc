"""The behaviours of the autograd notes (shared/seeds), reproduced as written there."""
import pytest

import jitgrad as torch


def _graph():
    inp = torch.ones([2, 2], requires_grad=False)
    w1 = torch.tensor(2.0, requires_grad=True)
    w2 = torch.tensor(3.0, requires_grad=True)
    w3 = torch.tensor(4.0, requires_grad=True)
    l1 = inp * w1
    l2 = l1 + w2
    l3 = l1 * w3
    l4 = l2 * l3
    return inp, (w1, w2, w3), (l1, l2, l3, l4), l4.mean()


def test_requires_grad_propagates():
    x, y = torch.rand(5, 5), torch.rand(5, 5)
    z = torch.rand(5, 5, requires_grad=True)
    a = x + y
    assert a.requires_grad is False
    b = a + z
    assert b.requires_grad is True


def test_worked_example_gradients_and_reprs():
    inp, (w1, w2, w3), (l1, l2, l3, l4), loss = _graph()
    assert repr(w1.data) == "tensor(2.)" and w1.grad is None and w1.grad_fn is None
    assert repr(l1.data) == "tensor([[2., 2.],\n        [2., 2.]])"
    assert type(l1.grad_fn).__name__ == "MulBackward0"
    assert repr(l1.grad_fn).startswith("<MulBackward0 object at 0x")
    assert repr(loss) == "tensor(40., grad_fn=<MeanBackward0>)"
    loss.backward()
    assert (w1.grad.item(), w2.grad.item(), w3.grad.item()) == (28.0, 8.0, 10.0)
    assert repr(w1.grad) == "tensor(28.)"
    with pytest.warns(UserWarning, match="is not a leaf Tensor"):
        assert l1.grad is None
    assert inp.grad is None


def test_inp_grad_when_input_requires_grad():
    inp = torch.ones([2, 2], requires_grad=True)
    w1, w2, w3 = (torch.tensor(v, requires_grad=True) for v in (2.0, 3.0, 4.0))
    l1 = inp * w1
    loss = ((l1 + w2) * (l1 * w3)).mean()
    loss.backward()
    assert inp.grad.tolist() == [[14.0, 14.0], [14.0, 14.0]]


def test_leaf_rules():
    a = torch.ones([2, 2], requires_grad=False)
    assert a.is_leaf
    _, ws, ls, loss = _graph()
    assert all(w.is_leaf for w in ws) and not any(l.is_leaf for l in ls)


def test_retain_grad():
    _, _, (l1, l2, l3, l4), loss = _graph()
    l1.retain_grad()
    l4.retain_grad()
    loss.retain_grad()
    loss.backward()
    assert repr(loss.grad) == "tensor(1.)"
    assert repr(l4.grad) == "tensor([[0.2500, 0.2500],\n        [0.2500, 0.2500]])"
    assert repr(l1.grad) == "tensor([[7., 7.],\n        [7., 7.]])"
    assert l1.retains_grad and not l2.retains_grad


def test_register_hook_order_and_grad_not_kept():
    _, _, (l1, _, _, l4), loss = _graph()
    seen = []
    l1.register_hook(lambda g: seen.append(("l1", g.tolist())))
    l4.register_hook(lambda g: seen.append(("l4", g.tolist())))
    loss.register_hook(lambda g: seen.append(("loss", g.tolist())))
    loss.backward()
    assert seen == [("loss", 1.0), ("l4", [[0.25, 0.25], [0.25, 0.25]]), ("l1", [[7.0, 7.0], [7.0, 7.0]])]
    with pytest.warns(UserWarning):
        assert loss.grad is None


def test_inplace_rebinding_versus_setitem():
    a = torch.tensor([3.0, 1.0])
    before = id(a)
    a = a.exp()
    assert id(a) != before
    a = torch.tensor([3.0, 1.0])
    before = id(a)
    a[0] = 10
    assert id(a) == before and a.tolist() == [10.0, 1.0]


def test_version_counter_and_inplace_error():
    a = torch.tensor([1.0, 3.0], requires_grad=True)
    b = a + 2
    assert b._version == 0
    loss = (b * b).mean()
    b[0] = 1000.0
    assert b._version == 1
    with pytest.raises(RuntimeError) as e:
        loss.backward()
    assert str(e.value).startswith(
        "one of the variables needed for gradient computation has been modified by an inplace operation: "
        "[jitgrad.FloatTensor [2]], which is output 0 of AddBackward0, is at version 1; expected version 0 instead. "
        "Hint: enable anomaly detection to find the operation that failed to compute its gradient, with "
        "jitgrad.autograd.set_detect_anomaly(True")


def test_leaf_inplace_error():
    a = torch.tensor([10.0, 5.0, 2.0, 3.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="^a leaf Variable that requires grad is being used in an in-place operation.$"):
        a.add_(10.0)
    assert a.tolist() == [10.0, 5.0, 2.0, 3.0] and a._version == 0


def test_exp_grad_fn_and_saved_result():
    a = torch.tensor(2.0, requires_grad=True)
    b = a.exp()
    assert repr(b) == "tensor(7.3891, grad_fn=<ExpBackward0>)"
    assert b.grad_fn._saved_result.item() == b.item()
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = x * x
    assert y.grad_fn._saved_self is x and y.grad_fn._saved_other is x


def test_no_grad_and_factories():
    x = torch.ones(2, requires_grad=True)
    with torch.no_grad():
        y = x * 2
        z = torch.zeros(2, requires_grad=True)
    assert not y.requires_grad and y.grad_fn is None
    assert z.requires_grad  # factories are not affected by no_grad


def test_inference_mode_tensors_cannot_join_autograd():
    w = torch.ones(3, requires_grad=True)
    with torch.inference_mode():
        x = torch.ones(3) * 2
        assert torch.is_inference_mode_enabled() and not torch.is_grad_enabled()
    assert x.is_inference() and not x.requires_grad
    with pytest.raises(RuntimeError, match="Inference tensors cannot be saved for backward"):
        w * x
