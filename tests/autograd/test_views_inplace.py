"""Views share storage and one version counter; in-place ops rebase history as in PyTorch."""
import re

import numpy as np
import pytest

import jitgrad as jg


def test_view_shares_storage_and_version():
    a = jg.arange(6.0).reshape(2, 3).clone()
    v = a[0]
    t = a.t()
    v[1] = 10.0
    assert a.tolist() == [[0.0, 10.0, 2.0], [3.0, 4.0, 5.0]]
    assert t[1, 0].item() == 10.0
    assert a._version == v._version == t._version == 1
    assert v._base is a and t._base is a


def test_inplace_on_view_of_nonleaf_rebases_base():
    a = jg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    b = a * 1
    v = b[0:2]
    v.mul_(2)
    assert type(b.grad_fn).__name__ == "CopySlices"
    assert b.tolist() == [2.0, 4.0, 3.0]
    (b * b).sum().backward()
    # d/da sum(b^2) with b = [2a0, 2a1, a2]: [8 a0, 8 a1, 2 a2]
    assert a.grad.tolist() == [8.0, 16.0, 6.0]


def test_view_of_leaf_inplace_error():
    a = jg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad is being used in an in-place"):
        a[0:1].mul_(2)
    assert a.tolist() == [1.0, 2.0, 3.0]
    with jg.no_grad():
        a[0:1].mul_(2)  # allowed under no_grad, like an optimizer update
    assert a.tolist() == [2.0, 2.0, 3.0]


def test_setitem_with_value_requiring_grad_on_plain_tensor():
    x = jg.zeros(3)
    w = jg.tensor(2.0, requires_grad=True)
    x[1] = w * 3
    assert type(x.grad_fn).__name__ == "CopySlices" and x.requires_grad and not x.is_leaf
    x.sum().backward()
    assert w.grad.item() == 3.0


def test_setitem_through_transposed_view():
    b = jg.ones(2, 3, requires_grad=True) * 1
    t = b.t()
    t[0] = 5
    assert b.tolist() == [[5.0, 1.0, 1.0], [5.0, 1.0, 1.0]]
    b.sum().backward()


def test_advanced_setitem_gradients():
    src = jg.tensor([1.0, 2.0], requires_grad=True)
    base = jg.zeros(4, requires_grad=True)
    y = base * 1
    y[jg.tensor([3, 0])] = src * 10
    y.backward(jg.tensor([1.0, 2.0, 3.0, 4.0]))
    assert base.grad.tolist() == [0.0, 2.0, 3.0, 0.0]
    assert src.grad.tolist() == [40.0, 10.0]


def test_detach_shares_version_data_does_not():
    c = jg.ones(2, requires_grad=True)
    d = c.detach()
    d.add_(1)
    assert c.tolist() == [2.0, 2.0] and c._version == 1 == d._version
    e = c.data
    e.add_(1)
    assert c.tolist() == [3.0, 3.0] and c._version == 1


def test_inplace_saved_result_and_modified_input():
    y = jg.ones(3, requires_grad=True) * 2
    z = y.exp()
    y.add_(1)  # exp saved its result, not y: still fine
    z.sum().backward()
    y = jg.ones(3, requires_grad=True) * 2
    z = y.sin()
    y.add_(1)  # sin saved y
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.sum().backward()


def test_exp_inplace_saves_the_tensor_itself():
    a = jg.tensor([0.5, 1.0], requires_grad=True)
    b = a * 1
    b.exp_()
    assert type(b.grad_fn).__name__ == "ExpBackward0"
    b.sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), np.exp([0.5, 1.0]), rtol=1e-6)
    a2 = jg.tensor([0.5, 1.0], requires_grad=True)
    b2 = a2 * 1
    b2.exp_()
    b2.add_(1)  # modifies the saved result of exp_
    with pytest.raises(RuntimeError, match="is at version 2; expected version 1 instead"):
        b2.sum().backward()


def test_inplace_dtype_cast_error_keeps_values():
    x = jg.tensor([1, 2, 3])
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output type Long"):
        x.add_(0.5)
    assert x.tolist() == [1, 2, 3] and x._version == 0


def test_inplace_broadcast_shape_error():
    x = jg.zeros(3)
    with pytest.raises(RuntimeError, match=r"output with shape \[3\] doesn't match the broadcast shape \[2, 3\]"):
        x.add_(jg.ones(2, 3))
    assert x.tolist() == [0.0, 0.0, 0.0]


def test_iadd_operators_are_inplace():
    x = jg.zeros(2)
    before = id(x)
    x += 1
    x *= 3
    assert id(x) == before and x.tolist() == [3.0, 3.0] and x._version == 2


# ---------------------------------------------------------------------- in-place through views of view leaves
VIEW_OF_LEAF = "a view of a leaf Variable that requires grad is being used in an in-place operation."
LEAF = "a leaf Variable that requires grad is being used in an in-place operation."


def _view_leaf():
    w = jg.arange(6.0).reshape(2, 3).requires_grad_()  # a leaf that is a view of a tensor not requiring grad
    assert w.is_leaf and w.requires_grad
    return w


@pytest.mark.parametrize("write", [lambda w: w[0].mul_(2), lambda w: w.view(6).add_(1), lambda w: w.t()[1].zero_(),
                                   lambda w: w.mul_(2), lambda w: w[0].copy_(jg.ones(3)), lambda w: w[:, 1:].fill_(0)])
def test_inplace_on_a_view_leaf_or_its_views_raises(write):
    w = _view_leaf()
    with pytest.raises(RuntimeError, match="^" + re.escape(VIEW_OF_LEAF) + "$"):
        write(w)
    assert w.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]] and w._version == 0


def test_inplace_on_a_plain_leaf_raises_the_leaf_message():
    w = jg.ones(2, 3, requires_grad=True)
    with pytest.raises(RuntimeError, match="^" + re.escape(LEAF) + "$"):
        w.mul_(2)
    with pytest.raises(RuntimeError, match="^" + re.escape(VIEW_OF_LEAF) + "$"):
        w[0].mul_(2)


def test_inplace_on_a_view_taken_before_its_base_required_grad_raises():
    x = jg.zeros(3)
    v = x[0:2]
    x.requires_grad_()
    with pytest.raises(RuntimeError, match="^" + re.escape(VIEW_OF_LEAF) + "$"):
        v.mul_(2)


def test_inplace_on_a_view_leaf_under_no_grad_and_on_detached_views():
    w = _view_leaf()
    with jg.no_grad():
        w[0].mul_(2)
        w.add_(1)
    assert w.tolist() == [[1.0, 3.0, 5.0], [4.0, 5.0, 6.0]] and w.is_leaf and w.requires_grad
    w.detach()[1].zero_()
    assert w.tolist() == [[1.0, 3.0, 5.0], [0.0, 0.0, 0.0]]
    (w * w).sum().backward()
    assert w.grad.tolist() == [[2.0, 6.0, 10.0], [0.0, 0.0, 0.0]]


def test_inplace_on_a_view_of_a_plain_tensor_with_a_grad_value_still_records():
    base = jg.arange(6.0).reshape(2, 3).clone()
    v = jg.tensor(2.0, requires_grad=True)
    base[0].mul_(v)  # neither base nor its view requires grad: no error, the write is recorded
    assert type(base.grad_fn).__name__ == "CopySlices"
    assert base.tolist() == [[0.0, 2.0, 4.0], [3.0, 4.0, 5.0]]
    base.sum().backward()
    assert v.grad.item() == 3.0
