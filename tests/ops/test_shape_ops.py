"""Shape ops as PyTorch defines them: which return views (shared storage and version counter) and which
copy, size inference, the list forms (cat, stack, split, chunk, unbind), gradients, node names and errors.
Values against NumPy on random inputs are in the op matrix (test_op_matrix.py)."""
import re

import numpy as np
import pytest

import jitgrad as jg
from jitgrad.autograd import gradcheck


def grid(*shape, dtype=jg.float32):
    return jg.arange(float(np.prod(shape)), dtype=dtype).reshape(shape)


def test_view_and_reshape_sizes():
    x = jg.arange(6.0)
    assert x.view(2, 3).shape == (2, 3) and x.view((3, 2)).shape == (3, 2) and x.view(-1, 2).shape == (3, 2)
    assert x.reshape(2, -1).shape == (2, 3) and jg.reshape(x, (6,)).shape == (6,)
    assert x.view(2, 3).view_as(jg.zeros(3, 2)).shape == (3, 2) and x.reshape_as(jg.zeros(1, 6)).shape == (1, 6)
    assert jg.zeros(2, 3).view(2, 3, -1).shape == (2, 3, 1)


def test_view_of_non_contiguous_fails_and_reshape_copies():
    t = grid(2, 3).t()
    with pytest.raises(RuntimeError, match=re.escape("view size is not compatible with input tensor's size and stride "
                                                     "(at least one dimension spans across two contiguous "
                                                     "subspaces). Use .reshape(...) instead.")):
        t.view(6)
    flat = t.reshape(6)
    assert flat.tolist() == [0.0, 3.0, 1.0, 4.0, 2.0, 5.0] and flat.data_ptr() != t.data_ptr()
    assert t.contiguous().view(6).tolist() == flat.tolist()
    x = grid(2, 3)
    assert x.reshape(3, 2).data_ptr() == x.data_ptr()  # reshape of a contiguous tensor is a view


@pytest.mark.parametrize("make", [
    lambda x: x.view(3, 2), lambda x: x.reshape(6), lambda x: x.t(), lambda x: x.T, lambda x: x.transpose(0, 1),
    lambda x: x.permute(1, 0), lambda x: x.unsqueeze(0), lambda x: x.view(1, 2, 3).squeeze(0),
    lambda x: x[:, 1:], lambda x: x.narrow(1, 1, 2), lambda x: x.select(0, 1), lambda x: x.unbind(0)[1],
    lambda x: x.split(1, 1)[2], lambda x: x.chunk(2, 0)[1], lambda x: x.flatten(), lambda x: x.unflatten(1, (3, 1)),
    lambda x: x.movedim(0, 1), lambda x: x.detach()])
def test_views_share_storage_and_version_counter(make):
    x = grid(2, 3)
    v = make(x)
    v.zero_()  # through the view
    assert x.sum().item() < 15.0
    assert x._version == v._version == 1
    x.add_(1)  # and back
    assert v._version == 2 and v.min().item() >= 1.0


@pytest.mark.parametrize("make", [lambda x: x.flip(0), lambda x: x.repeat(1, 1), lambda x: x.clone(),
                                  lambda x: x.t().reshape(6), lambda x: jg.cat([x, x]), lambda x: jg.stack([x]),
                                  lambda x: x.double(), lambda x: x.t().contiguous()])
def test_copies_do_not_share(make):
    x = grid(2, 3)
    c = make(x)
    c.zero_()
    assert x.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]] and x._version == 0


def test_flatten_unflatten():
    x = jg.zeros(2, 3, 4)
    assert x.flatten().shape == (24,) and x.flatten(1).shape == (2, 12) and x.flatten(0, 1).shape == (6, 4)
    assert jg.tensor(5.0).flatten().shape == (1,)
    assert jg.zeros(2, 12).unflatten(1, (3, 4)).shape == (2, 3, 4)
    assert jg.zeros(2, 12).unflatten(-1, (-1, 4)).shape == (2, 3, 4)
    with pytest.raises(RuntimeError, match="flatten\\(\\) has invalid args: start_dim cannot come after end_dim"):
        x.flatten(2, 1)
    with pytest.raises(RuntimeError, match=re.escape("unflatten: Provided sizes [5, 4] don't multiply up to the size "
                                                     "of dim 1 (12) in the input tensor")):
        jg.zeros(2, 12).unflatten(-1, (5, 4))


def test_squeeze_unsqueeze():
    x = jg.zeros(1, 3, 1)
    assert x.squeeze().shape == (3,) and x.squeeze(0).shape == (3, 1) and x.squeeze(1).shape == (1, 3, 1)
    assert x.squeeze((0, 2)).shape == (3,) and jg.squeeze(x, -1).shape == (1, 3)
    y = jg.zeros(2, 3)
    assert y.unsqueeze(0).shape == (1, 2, 3) and y.unsqueeze(-1).shape == (2, 3, 1) and y.unsqueeze(2).shape == (2, 3, 1)
    with pytest.raises(IndexError, match=re.escape("Dimension out of range (expected to be in range of [-3, 2], but "
                                                   "got 3)")):
        y.unsqueeze(3)


def test_expand():
    x = jg.tensor([[1.0], [2.0], [3.0]])
    e = x.expand(3, 4)
    assert e.shape == (3, 4) and e.tolist()[1] == [2.0] * 4 and e.stride() == (1, 0)
    assert x.expand(2, -1, 4).shape == (2, 3, 4) and x.expand_as(jg.zeros(2, 3, 5)).shape == (2, 3, 5)
    assert jg.broadcast_to(jg.zeros(3), (2, 3)).shape == (2, 3)
    with pytest.raises(RuntimeError, match=re.escape("The expanded size of the tensor (4) must match the existing size "
                                                     "(3) at non-singleton dimension 0.  Target sizes: [4, 4].  Tensor "
                                                     "sizes: [3, 1]")):
        x.expand(4, 4)
    with pytest.raises(RuntimeError, match=re.escape("expand(jitgrad.FloatTensor{[3, 1]}, size=[4]): the number of "
                                                     "sizes provided (1) must be greater or equal to the number of "
                                                     "dimensions in the tensor (2)")):
        x.expand(4)
    with pytest.raises(RuntimeError, match=re.escape("The expanded size of the tensor (-1) isn't allowed in a leading, "
                                                     "non-existing dimension 0")):
        x.expand(-1, 3, 1)
    with pytest.raises(RuntimeError, match="unsupported operation: more than one element of the written-to tensor "
                                           "refers to a single memory location"):
        jg.ones(3).expand(2, 3).add_(1)


def test_repeat_transpose_permute_t():
    assert jg.tensor([1.0, 2.0]).repeat(2, 2).tolist() == [[1.0, 2.0, 1.0, 2.0]] * 2
    assert jg.tensor([1.0, 2.0]).repeat(0, 1).shape == (0, 2)
    x = jg.zeros(2, 3, 4)
    assert x.transpose(0, 2).shape == (4, 3, 2) and jg.swapaxes(x, 0, 1).shape == (3, 2, 4)
    assert x.permute(2, 0, 1).shape == (4, 2, 3) and x.permute((2, 0, 1)).shape == (4, 2, 3)
    assert x.mT.shape == (2, 4, 3) and jg.zeros(3).t().shape == (3,) and jg.zeros(2, 3).T.shape == (3, 2)
    with pytest.warns(UserWarning, match="The use of `x.T` on tensors of dimension other than 2"):
        assert x.T.shape == (4, 3, 2)
    with pytest.raises(RuntimeError, match="t\\(\\) expects a tensor with <= 2 dimensions, but self is 3D"):
        x.t()
    with pytest.raises(RuntimeError, match="Number of dimensions of repeat dims can not be smaller than number of "
                                           "dimensions of tensor"):
        jg.zeros(2, 2).repeat(2)
    with pytest.raises(RuntimeError, match=re.escape("permute(): duplicate dims are not allowed.")):
        x.permute(2, 0, 0)


def test_narrow_and_flip():
    x = jg.arange(10.0)
    assert x.narrow(0, 2, 3).tolist() == [2.0, 3.0, 4.0] and x.narrow(0, -3, 2).tolist() == [7.0, 8.0]
    with pytest.raises(RuntimeError, match=re.escape("start (8) + length (5) exceeds dimension size (10).")):
        x.narrow(0, 8, 5)
    with pytest.raises(IndexError, match=re.escape("start out of range (expected to be in range of [-10, 10], but got "
                                                   "11)")):
        x.narrow(0, 11, 1)
    g = grid(2, 3)
    assert g.flip(0).tolist() == [[3.0, 4.0, 5.0], [0.0, 1.0, 2.0]] and g.flip((0, 1)).tolist()[0] == [5.0, 4.0, 3.0]
    with pytest.raises(RuntimeError, match="dim 0 appears multiple times in the list of dims"):
        g.flip((0, 0))


def test_cat_and_stack():
    a, b = jg.zeros(2, 3), jg.ones(1, 3)
    assert jg.cat([a, b]).shape == (3, 3) and jg.cat((a, jg.ones(2, 1)), dim=1).shape == (2, 4)
    assert jg.cat([a, jg.tensor([])]).shape == (2, 3)  # legacy: 1-D empty tensors are skipped
    assert jg.cat([jg.zeros(2), jg.ones(2, dtype=jg.int64)]).dtype is jg.float32
    assert jg.cat([jg.zeros(2, dtype=jg.float64), jg.ones(2)]).dtype is jg.float64
    assert jg.concat([a, b]).shape == (3, 3)
    assert jg.stack([jg.zeros(2), jg.ones(2)]).shape == (2, 2) and jg.stack([jg.zeros(2), jg.ones(2)], -1).shape == (2, 2)
    assert jg.stack([jg.tensor(1.0), jg.tensor(2.0)]).tolist() == [1.0, 2.0]


@pytest.mark.parametrize("call,exc,message", [
    (lambda: jg.cat([jg.zeros(2, 3), jg.ones(2, 1)]), RuntimeError,
     "Sizes of tensors must match except in dimension 0. Expected size 3 but got size 1 for tensor number 1 in the "
     "list."),
    (lambda: jg.cat([jg.zeros(2, 3), jg.ones(3)]), RuntimeError,
     "Tensors must have same number of dimensions: got 2 and 1"),
    (lambda: jg.cat([jg.tensor(1.0), jg.tensor(2.0)]), RuntimeError,
     "zero-dimensional tensor (at position 0) cannot be concatenated"),
    (lambda: jg.cat([]), ValueError, "torch.cat(): expected a non-empty list of Tensors"),
    (lambda: jg.cat(jg.zeros(2)), TypeError, "cat(): argument 'tensors' (position 1) must be tuple of Tensors, not "
                                             "Tensor"),
    (lambda: jg.cat([jg.zeros(2), 1]), TypeError, "expected Tensor as element 1 in argument 0, but got int"),
    (lambda: jg.cat([jg.zeros(2, 3), jg.ones(1, 3)], 2), IndexError,
     "Dimension out of range (expected to be in range of [-2, 1], but got 2)"),
    (lambda: jg.stack([jg.zeros(2), jg.ones(3)]), RuntimeError,
     "stack expects each tensor to be equal size, but got [2] at entry 0 and [3] at entry 1"),
    (lambda: jg.stack([jg.zeros(2), jg.ones(2)], 3), IndexError,
     "Dimension out of range (expected to be in range of [-2, 1], but got 3)"),
    (lambda: jg.stack([]), RuntimeError, "stack expects a non-empty TensorList"),
    (lambda: jg.stack([jg.zeros(2), 1]), TypeError, "expected Tensor as element 1 in argument 0, but got int"),
])
def test_cat_stack_errors(call, exc, message):
    with pytest.raises(exc, match="^" + re.escape(message)):
        call()


def test_split_chunk_unbind():
    x = jg.arange(5.0)
    assert [t.tolist() for t in x.split(2)] == [[0.0, 1.0], [2.0, 3.0], [4.0]]
    assert [t.shape[0] for t in x.split([1, 4])] == [1, 4] and [t.shape[0] for t in jg.split(x, 5)] == [5]
    assert [t.shape for t in grid(2, 3).split(1, dim=1)] == [(2, 1)] * 3
    assert [t.shape[0] for t in x.chunk(2)] == [3, 2] and [t.shape[0] for t in x.chunk(3)] == [2, 2, 1]
    assert [t.shape[0] for t in jg.arange(6.0).chunk(4)] == [2, 2, 2]
    assert [t.tolist() for t in grid(2, 3).unbind(1)] == [[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]]
    assert [t.tolist() for t in grid(2, 2)] == [[0.0, 1.0], [2.0, 3.0]]  # iteration unbinds dim 0
    with pytest.raises(RuntimeError, match=re.escape("split_with_sizes expects split_sizes to sum exactly to 5 (input "
                                                     "tensor's size at dimension 0), but got split_sizes=[1, 3]")):
        x.split([1, 3])
    with pytest.raises(RuntimeError, match="chunk expects `chunks` to be greater than 0, got: 0"):
        x.chunk(0)
    with pytest.raises(IndexError, match="Dimension specified as 0 but tensor has no dimensions"):
        jg.tensor(1.0).unbind()


def test_view_size_errors():
    x = jg.zeros(2, 3)
    with pytest.raises(RuntimeError, match=re.escape("shape '[7]' is invalid for input of size 6")):
        x.view(7)
    with pytest.raises(RuntimeError, match=re.escape("shape '[-1, 4]' is invalid for input of size 6")):
        x.reshape(-1, 4)
    with pytest.raises(RuntimeError, match="only one dimension can be inferred"):
        x.view(-1, -1)
    with pytest.raises(RuntimeError, match=re.escape("invalid shape dimension -2 at index 1 of shape [3, -2]")):
        x.view(3, -2)
    with pytest.raises(RuntimeError, match=re.escape("cannot reshape tensor of 0 elements into shape [-1, 0] because "
                                                     "the unspecified dimension size -1 can be any value and is "
                                                     "ambiguous")):
        jg.zeros(0, 3).view(-1, 0)


@pytest.mark.parametrize("fn", [
    lambda x: x.view(3, 2), lambda x: x.reshape(6), lambda x: x.t(), lambda x: x.permute(1, 0),
    lambda x: x.unsqueeze(1).expand(2, 4, 3), lambda x: x.repeat(2, 1), lambda x: x.flip(1), lambda x: x[:, 1:],
    lambda x: x.narrow(1, 1, 2), lambda x: jg.cat([x, x * 2], 1), lambda x: jg.stack([x, x], 1),
    lambda x: x.split([1, 2], 1)[1], lambda x: x.chunk(2, 1)[0], lambda x: x.unbind(1)[2], lambda x: x.flatten(),
    lambda x: x.unflatten(1, (3, 1)), lambda x: x.view(1, 2, 3).squeeze(0), lambda x: x.movedim(1, 0)])
def test_gradients(fn):
    x = grid(2, 3, dtype=jg.float64).requires_grad_()
    assert gradcheck(fn, (x,))


def test_node_names():
    x = jg.arange(6.0, requires_grad=True)
    m = x.view(2, 3)
    assert m.grad_fn.name() == "ViewBackward0" and x.reshape(3, 2).grad_fn.name() == "ViewBackward0"
    assert m.transpose(0, 1).grad_fn.name() == "TransposeBackward0"
    assert m.permute(1, 0).grad_fn.name() == "PermuteBackward0"
    assert x.unsqueeze(0).grad_fn.name() == "UnsqueezeBackward0"
    assert x.view(1, 6).squeeze().grad_fn.name() == "SqueezeBackward0"
    assert x.view(1, 6).squeeze(0).grad_fn.name() == "SqueezeBackward1"
    assert x.expand(2, 6).grad_fn.name() == "ExpandBackward0" and x.repeat(2).grad_fn.name() == "RepeatBackward0"
    assert x.flip(0).grad_fn.name() == "FlipBackward0" and x.narrow(0, 1, 2).grad_fn.name() == "SliceBackward0"
    assert jg.cat([x, x]).grad_fn.name() == "CatBackward0" and jg.stack([x, x]).grad_fn.name() == "StackBackward0"
    assert x.unbind()[0].grad_fn.name() == "UnbindBackward0" and x.clone().grad_fn.name() == "CloneBackward0"
    assert x.double().grad_fn.name() == "ToCopyBackward0"
    assert m._base is x and not m.is_leaf


def test_elementwise_ops_on_expanded_values_read_them_in_place():
    """An expanded value (stride 0 everywhere, as sum's gradient) enters the loop as one scalar."""
    v = jg.tensor(2.5).expand(4, 3)
    y = jg.arange(12.0).reshape(4, 3)
    np.testing.assert_allclose((v * y).numpy(), 2.5 * np.arange(12.0).reshape(4, 3))
    np.testing.assert_allclose((y - v).numpy(), np.arange(12.0).reshape(4, 3) - 2.5)
    np.testing.assert_allclose((v + v).numpy(), np.full((4, 3), 5.0))
    w = jg.tensor([[1.0, 2.0, 3.0]]).expand(4, 3)  # stride 0 in one dim only: still an array
    np.testing.assert_allclose((w * y).numpy(), np.array([1.0, 2.0, 3.0]) * np.arange(12.0).reshape(4, 3))
    x = jg.randn(5, requires_grad=True)
    (x * 3).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.full(5, 3.0))


@pytest.mark.parametrize("how", [3, 4, [2, 5], [7, 2], [-3], [2, -3], [-20, 4], [3, 30], "tensor"])
def test_tensor_split_against_numpy_slices(how):
    x = np.arange(30.0).reshape(3, 10)
    idx = jg.tensor([1, 4]) if how == "tensor" else how
    bounds = [1, 4] if how == "tensor" else how
    if isinstance(bounds, int):  # sections: the first n % k of them one longer (numpy.array_split's rule)
        want = np.array_split(x, bounds, axis=1)
    else:
        edges = [0] + list(bounds) + [10]
        want = [x[:, a:b] for a, b in zip(edges[:-1], edges[1:])]
    t = jg.tensor(x, requires_grad=True)
    got = jg.tensor_split(t, idx, dim=1)
    assert [g.shape for g in got] == [w.shape for w in want]
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.detach().numpy(), w)
    sum((g * (k + 1)).sum() for k, g in enumerate(got)).backward()  # each piece's gradient lands in its place
    grad = np.zeros_like(x)
    for k, w in enumerate(want):
        grad[:, np.isin(x[0], w[0])] += k + 1
    np.testing.assert_array_equal(t.grad.numpy(), grad)


def test_hsplit_vsplit_dsplit():
    x = jg.arange(24.0).reshape(2, 4, 3)
    assert [p.shape for p in jg.hsplit(x, 2)] == [(2, 2, 3)] * 2
    assert [p.shape for p in x.vsplit([1])] == [(1, 4, 3), (1, 4, 3)]
    assert [p.shape for p in jg.dsplit(x, 3)] == [(2, 4, 1)] * 3
    assert [p.tolist() for p in jg.hsplit(jg.arange(4.0), 2)] == [[0.0, 1.0], [2.0, 3.0]]  # 1-D: along dim 0
    with pytest.raises(RuntimeError, match="torch.hsplit attempted to split along dimension 1, but the size of the "
                                           "dimension 4 is not divisible by the split_size 3!"):
        jg.hsplit(x, 3)
    with pytest.raises(RuntimeError, match="torch.dsplit requires a tensor with at least 3 dimension, but got a "
                                           "tensor with 2 dimensions!"):
        jg.dsplit(jg.ones(2, 2), 2)
    with pytest.raises(RuntimeError, match="number of sections must be larger than 0, got 0"):
        jg.tensor_split(x, 0)


def test_reshape_that_copies_records_clone_then_unsafe_view():
    x = jg.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    y = x.t().reshape(6)  # a transposed layout allows no view: PyTorch copies, then views the copy
    assert y.grad_fn.name() == "UnsafeViewBackward0"
    assert [f.name() for f, _ in y.grad_fn.next_functions] == ["CloneBackward0"]
    assert y._base is None
    y.detach()[0] = 100.0  # the copy is the result's own storage
    assert x[0, 0].item() == 0.0
    (y * jg.arange(6.0, dtype=jg.float64)).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.arange(6.0).reshape(3, 2).T)
    assert x.reshape(3, 2).grad_fn.name() == "ViewBackward0"  # contiguous: a view, as before
    assert gradcheck(lambda a: a.t().reshape(3, 2) ** 2, (x.detach().requires_grad_(),))
