"""Indexing as PyTorch defines it: basic slicing (views), integer and boolean advanced indexing (copies,
repeated indices accumulate in backward), index_select, gather, scatter_add, __setitem__ (CopySlices),
nonzero, one_hot, and PyTorch's errors for indices that do not fit."""
import re

import numpy as np
import pytest

import jitgrad as jg
from jitgrad.autograd import gradcheck


def grid(*shape, dtype=jg.float32, requires_grad=False):
    return jg.arange(float(np.prod(shape)), dtype=dtype).reshape(shape).requires_grad_(requires_grad)


A = np.arange(12.0).reshape(3, 4)


@pytest.mark.parametrize("key", [1, -1, (1, 2), (slice(None), 1), (slice(1, None), slice(None, None, 2)),
                                 (Ellipsis, 1), (None, 1), (1, None, slice(0, 2)), Ellipsis, (slice(-2, None),)])
def test_basic_indexing_is_a_view(key):
    x = grid(3, 4)
    v = x[key]
    np.testing.assert_array_equal(v.numpy(), A[key])
    if v.ndim:
        v.fill_(-1)
        assert x._version == 1 and (x.numpy() == -1).sum() == v.numel()


@pytest.mark.parametrize("key", [[0, 2, 0], ([0, 2], [1, 3]), (slice(None), [3, 0]), [[0, 1], [2, 2]],
                                 (1, [0, 1]), [True, False, True], (A > 5,), ([-1, 0],)])
def test_advanced_indexing_copies(key):
    x = grid(3, 4)
    t_key = tuple(jg.tensor(k) if isinstance(k, (list, np.ndarray)) else k for k in key) \
        if isinstance(key, tuple) else jg.tensor(key)
    out = x[t_key]
    np.testing.assert_array_equal(out.numpy(), A[key])
    out.fill_(-1)
    assert x.numpy().min() == 0 and x._version == 0
    np.testing.assert_array_equal(x[key].numpy(), A[key])  # lists index like tensors


def test_index_of_0d_tensor():
    x = jg.tensor(5.0)
    assert x[None].shape == (1,) and x[...].item() == 5.0
    with pytest.raises(IndexError, match=re.escape("invalid index of a 0-dim tensor. Use `tensor.item()` in Python")):
        x[0]
    assert grid(3, 4)[jg.tensor(1)].tolist() == [4.0, 5.0, 6.0, 7.0]


def test_repeated_indices_accumulate_in_backward():
    x = jg.arange(4.0, requires_grad=True)
    (x[jg.tensor([0, 0, 1])] * jg.tensor([1.0, 2.0, 3.0])).sum().backward()
    assert x.grad.tolist() == [3.0, 3.0, 0.0, 0.0]
    x = grid(3, 4, requires_grad=True)
    x[[0, 0, 2], [1, 1, 3]].sum().backward()
    assert x.grad.numpy()[0, 1] == 2.0 and x.grad.numpy()[2, 3] == 1.0 and x.grad.sum().item() == 3.0


@pytest.mark.parametrize("key", [1, (slice(None), 1), (slice(1, None), slice(None, None, 2)), [0, 2, 0],
                                 ([0, 2], [1, 3]), (A > 5,), (None, Ellipsis, 2)])
def test_indexing_gradients(key):
    key = (jg.tensor(key[0]),) if isinstance(key, tuple) and isinstance(key[0], np.ndarray) else key
    x = grid(3, 4, dtype=jg.float64, requires_grad=True)
    assert gradcheck(lambda t: t[key], (x,))


def test_node_names():
    x = grid(3, 4, requires_grad=True)
    assert x[1].grad_fn.name() == "SelectBackward0" and x[1:].grad_fn.name() == "SliceBackward0"
    assert x[[0, 1]].grad_fn.name() == "IndexBackward0" and x[x > 2].grad_fn.name() == "IndexBackward0"


@pytest.mark.parametrize("key,exc,message", [
    (3, IndexError, "index 3 is out of bounds for dimension 0 with size 3"),
    ((slice(None), 4), IndexError, "index 4 is out of bounds for dimension 1 with size 4"),
    ((slice(None), -5), IndexError, "index -5 is out of bounds for dimension 1 with size 4"),
    ((1, 2, 3), IndexError, "too many indices for tensor of dimension 2"),
    (jg.tensor([0, 3]), IndexError, "index 3 is out of bounds for dimension 0 with size 3"),
    (jg.tensor([0.0, 1.0]), IndexError, "tensors used as indices must be long, int, byte or bool tensors"),
    (jg.tensor([True, False]), IndexError, "The shape of the mask [2] at index 0 does not match the shape of the "
                                           "indexed tensor [3, 4] at index 0"),
    (slice(None, None, -1), ValueError, "step must be greater than zero"),
])
def test_index_errors(key, exc, message):
    x = grid(3, 4)
    with pytest.raises(exc, match="^" + re.escape(message)):
        x[key]


def test_setitem():
    x = jg.zeros(3, 4)
    x[1] = 5
    x[:, 1] = jg.tensor([1.0, 2.0, 3.0])
    x[x == 0] = 2
    x[[0, 0], [3, 3]] = jg.tensor([7.0, 8.0])
    assert x.tolist() == [[2, 1, 2, 8], [5, 2, 5, 5], [2, 3, 2, 2]] and x._version == 4
    x[0] = jg.ones(1, 4)  # leading size-1 dims of the value are dropped
    x[0, 0] = jg.ones(1, 1) * 3
    assert x.tolist()[0] == [3.0, 1.0, 1.0, 1.0]
    i = jg.zeros(2, dtype=jg.int64)
    i[0] = 2.7  # cast to the tensor's dtype
    assert i.tolist() == [2, 0]


@pytest.mark.parametrize("key,value,exc,message", [
    (0, jg.ones(5), RuntimeError, "The expanded size of the tensor (4) must match the existing size (5) at "
                                  "non-singleton dimension 0.  Target sizes: [4].  Tensor sizes: [5]"),
    (0, jg.ones(2, 4), RuntimeError, "expand(jitgrad.FloatTensor{[2, 4]}, size=[4]): the number of sizes provided (1) "
                                     "must be greater or equal to the number of dimensions in the tensor (2)"),
    ([0, 1], jg.ones(3), RuntimeError, "shape mismatch: value tensor of shape [3] cannot be broadcast to indexing "
                                       "result of shape [2, 4]"),
    (5, 1.0, IndexError, "index 5 is out of bounds for dimension 0 with size 3"),
    (0, "a", TypeError, "can't assign a str to a jitgrad.FloatTensor"),
    (0, None, TypeError, "can't assign a NoneType to a jitgrad.FloatTensor"),
    (0, [1.0, 2.0, 3.0, 4.0], TypeError, "can't assign a list to a jitgrad.FloatTensor"),
])
def test_setitem_errors_leave_the_tensor_unchanged(key, value, exc, message):
    x = jg.zeros(3, 4)
    with pytest.raises(exc, match="^" + re.escape(message)):
        x[key] = value
    assert x.tolist() == [[0.0] * 4] * 3 and x._version == 0


def test_setitem_on_a_leaf_that_requires_grad():
    x = jg.zeros(3, 4, requires_grad=True)
    with pytest.raises(RuntimeError, match="^a view of a leaf Variable that requires grad is being used in an in-place "
                                           "operation."):
        x[0] = 1
    with pytest.raises(RuntimeError, match="^a leaf Variable that requires grad is being used in an in-place "
                                           "operation."):
        x[[0]] = 1
    with jg.no_grad():
        x[0] = 1
    assert x.sum().item() == 4.0 and x.is_leaf


def test_setitem_records_copyslices():
    x = jg.zeros(3, requires_grad=True)
    v = jg.tensor(5.0, requires_grad=True)
    y = x * 2
    y[1] = v * 3
    assert type(y.grad_fn).__name__ == "CopySlices"
    y.sum().backward()
    assert x.grad.tolist() == [2.0, 0.0, 2.0] and v.grad.item() == 3.0
    a = grid(3, 4, dtype=jg.float64, requires_grad=True)
    b = jg.ones(2, dtype=jg.float64, requires_grad=True)

    def f(a, b):
        y = a * 1
        y[1:, 0] = b * b
        y[[0, 0], [1, 2]] = b
        return y
    assert gradcheck(f, (a, b))


def test_index_select():
    x = grid(3, 4)
    assert x.index_select(0, jg.tensor([0, 2, 0])).tolist() == [A[0].tolist(), A[2].tolist(), A[0].tolist()]
    assert jg.index_select(x, 1, jg.tensor([3])).tolist() == [[3.0], [7.0], [11.0]]
    x = grid(3, 4, dtype=jg.float64, requires_grad=True)
    x.index_select(0, jg.tensor([0, 2, 0])).sum().backward()
    assert x.grad.tolist()[0] == [2.0] * 4 and x.grad.tolist()[1] == [0.0] * 4
    assert gradcheck(lambda t: t.index_select(1, jg.tensor([1, 1, 3])), (x,))


@pytest.mark.parametrize("shape,dim", [((7, 3), 0), ((7, 3), 1), ((4, 5, 6), 1), ((2, 3, 4, 5), 3),
                                       ((64, 40, 33), 1), ((64, 40, 33), 2)])
def test_index_add_along_a_dim_matches_numpy(shape, dim):
    """The scatter-add behind index_select's, gather-along-a-dim's and padding's backward: out[:, ..., idx] +=
    values, with repeated and negative indices, values strided or broadcast, serial and parallel sizes."""
    from jitgrad.kernels import index as K
    rng = np.random.default_rng(dim)
    n = shape[dim]
    idx = rng.integers(-n, n, 2 * n)
    key = (slice(None),) * dim + (idx,)
    vshape = shape[:dim] + (len(idx),) + shape[dim + 1:]
    for values in (rng.standard_normal(vshape), rng.standard_normal(vshape[::-1]).T,  # C and transposed
                   np.broadcast_to(rng.standard_normal(vshape[-1:]), vshape)):  # broadcast along all but the last
        want = np.zeros(shape)
        np.add.at(want, key, values)
        got = np.zeros(shape)
        K.index_add(got, key, values)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    for bad in (n, -n - 1):  # refused, as NumPy's add.at refuses it, before anything is written
        got = np.zeros(shape)
        with pytest.raises(IndexError, match="index %d is out of bounds for axis %d with size %d" % (bad, dim, n)):
            K.index_add(got, (slice(None),) * dim + (np.array([0, bad]),),
                        np.ones(vshape[:dim] + (2,) + vshape[dim + 1:]))
        assert not got.any()


def test_an_index_changed_in_place_after_the_forward_is_refused_in_backward():
    x = jg.randn(3, 4, requires_grad=True)
    idx = np.array([0, 1, 3])
    y = x[:, idx]
    idx[0] = 100
    with pytest.raises(IndexError, match="index 100 is out of bounds for axis 1 with size 4"):
        y.sum().backward()


def test_gather_and_scatter_add():
    x = grid(3, 4)
    idx = jg.tensor([[0, 0], [1, 0], [3, 3]])
    assert jg.gather(x, 1, idx).tolist() == [[0.0, 0.0], [5.0, 4.0], [11.0, 11.0]]
    assert x.gather(0, jg.tensor([[0, 1, 2, 0]])).tolist() == [[0.0, 5.0, 10.0, 3.0]]
    out = jg.zeros(3, 4).scatter_add(1, idx, jg.ones(3, 2))
    assert out.tolist() == [[2, 0, 0, 0], [1, 1, 0, 0], [0, 0, 0, 2]]
    z = jg.zeros(3, 4)
    z.scatter_add_(1, jg.tensor([[0, 0]]), jg.ones(1, 2))
    assert z.tolist()[0] == [2.0, 0.0, 0.0, 0.0] and z._version == 1
    a = grid(3, 4, dtype=jg.float64, requires_grad=True)
    s = jg.ones(3, 2, dtype=jg.float64, requires_grad=True)
    assert gradcheck(lambda t: t.gather(1, idx), (a,))
    assert gradcheck(lambda t, u: t.scatter_add(1, idx, u), (a, s))


@pytest.mark.parametrize("call,exc,message", [
    (lambda x: x.index_select(1, jg.tensor([4])), IndexError, "index out of range in self"),
    (lambda x: x.index_select(0, jg.tensor([-1])), IndexError, "index out of range in self"),
    (lambda x: x.index_select(1, jg.tensor([1.0])), RuntimeError, "index_select(): Expected dtype int32 or int64 for "
                                                                  "index"),
    (lambda x: x.index_select(1, jg.tensor([[1]])), IndexError, "index_select(): Index is supposed to be a vector"),
    (lambda x: jg.index_select(x, 0, [0]), TypeError, "index_select(): argument 'index' (position 3) must be Tensor, "
                                                      "not list"),
    (lambda x: x.index_select(2, jg.tensor([1])), IndexError, "Dimension out of range (expected to be in range of "
                                                              "[-2, 1], but got 2)"),
    (lambda x: x.gather(1, jg.tensor([[4]])), RuntimeError, "index 4 is out of bounds for dimension 1 with size 4"),
    (lambda x: x.gather(1, jg.tensor([0])), RuntimeError, "Index tensor must have the same number of dimensions as "
                                                          "input tensor"),
    (lambda x: x.gather(1, jg.tensor([[0.0]])), RuntimeError, "gather(): Expected dtype int32/int64 for index"),
    (lambda x: jg.gather(x, 1, [[0]]), TypeError, "gather(): argument 'index' (position 3) must be Tensor, not list"),
    (lambda x: x.scatter_add(1, jg.tensor([[5]]), jg.ones(1, 1)), RuntimeError,
     "index 5 is out of bounds for dimension 1 with size 4"),
    (lambda x: x.scatter_add(1, jg.tensor([[0.0]]), jg.ones(1, 1)), RuntimeError,
     "scatter(): Expected dtype int32/int64 for index"),
])
def test_index_op_errors(call, exc, message):
    x = grid(3, 4)
    with pytest.raises(exc, match="^" + re.escape(message)):
        call(x)
    assert x._version == 0


def test_nonzero_and_where_with_one_argument():
    x = jg.tensor([[1.0, 0.0], [0.0, 3.0]])
    assert jg.nonzero(x).tolist() == [[0, 0], [1, 1]] and x.nonzero().dtype is jg.int64
    rows, cols = x.nonzero(as_tuple=True)
    assert rows.tolist() == [0, 1] and cols.tolist() == [0, 1]
    assert [t.tolist() for t in jg.where(x > 0)] == [[0, 1], [0, 1]]
    assert jg.tensor(3.0).nonzero().shape == (1, 0) and jg.tensor(0.0).nonzero().shape == (0, 0)
    assert jg.nonzero(jg.zeros(2, 0)).shape == (0, 2)


def test_one_hot():
    F = jg.nn.functional
    assert F.one_hot(jg.tensor([0, 2, 1])).tolist() == [[1, 0, 0], [0, 0, 1], [0, 1, 0]]
    assert F.one_hot(jg.tensor([0, 2]), 4).shape == (2, 4) and F.one_hot(jg.tensor([[0], [2]]), 3).shape == (2, 1, 3)
    assert F.one_hot(jg.tensor([0, 1])).dtype is jg.int64
    assert F.one_hot(jg.tensor([], dtype=jg.int64), 3).shape == (0, 3)
    with pytest.raises(RuntimeError, match="Class values must be smaller than num_classes."):
        F.one_hot(jg.tensor([0, 3]), 3)
    with pytest.raises(RuntimeError, match="Class values must be non-negative."):
        F.one_hot(jg.tensor([0, -1]), 3)
    with pytest.raises(RuntimeError, match="one_hot is only applicable to index tensor of type LongTensor."):
        F.one_hot(jg.tensor([0.0, 1.0]), 3)
