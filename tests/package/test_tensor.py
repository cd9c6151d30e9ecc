"""Tensor: factories and their dtype= / requires_grad= / device= arguments, attributes and conversions,
detach / .data / clone, the repr (as PyTorch prints it, "torch" read as "jitgrad"), and the in-place
forms of the op list with their version counters and history rewriting."""
import math
import re

import numpy as np
import pytest

import jitgrad as jg


# ------------------------------------------------------------------ factories
def test_tensor_infers_dtype_and_copies():
    assert jg.tensor([1.5, 2]).dtype is jg.float32 and jg.tensor([1, 2]).dtype is jg.int64
    assert jg.tensor([True, False]).dtype is jg.bool and jg.tensor([True, 2]).dtype is jg.int64
    assert jg.tensor(3).dtype is jg.int64 and jg.tensor(3.0).shape == () and jg.tensor([]).dtype is jg.float32
    assert jg.tensor([[]]).shape == (1, 0)
    assert jg.tensor(np.array([1.0, 2.0])).dtype is jg.float64
    assert jg.tensor(np.array([1, 2], dtype=np.int32)).dtype is jg.int32
    assert jg.tensor([jg.tensor(1.0), jg.tensor(2.0)]).tolist() == [1.0, 2.0]
    a = np.array([1.0, 2.0])
    t = jg.tensor(a)
    a[0] = 9
    assert t.tolist() == [1.0, 2.0]


def test_tensor_dtype_requires_grad_device_arguments():
    assert jg.tensor([1, 2], dtype=jg.float64).tolist() == [1.0, 2.0]
    assert jg.tensor([1.7, -1.7], dtype=jg.int64).tolist() == [1, -1]
    assert jg.tensor([1, 2], dtype=float).dtype is jg.float64
    t = jg.tensor([1.0, 2.0], requires_grad=True)
    assert t.requires_grad and t.is_leaf and t.grad_fn is None
    assert jg.tensor([1, 2], device="cpu").device == jg.device("cpu")
    assert jg.zeros(2, device=jg.device("cpu")).device.type == "cpu" and str(jg.zeros(2).device) == "cpu"


def test_as_tensor_and_from_numpy_share_memory():
    a = np.array([1.0, 2.0])
    t = jg.as_tensor(a)
    a[0] = 9
    assert t.tolist() == [9.0, 2.0]
    t32 = jg.as_tensor(a, dtype=jg.float32)  # a conversion copies
    a[1] = 7
    assert t32.tolist() == [9.0, 2.0]
    assert jg.as_tensor([1, 2]).dtype is jg.int64 and jg.as_tensor(t) is t
    f = jg.from_numpy(a)
    a[0] = 1
    f[1] = 5
    assert f.tolist() == [1.0, 5.0] and a.tolist() == [1.0, 5.0]
    nc = jg.from_numpy(np.arange(6.0).reshape(2, 3).T)
    assert not nc.is_contiguous() and nc.stride() == (1, 3) and nc.shape == (3, 2)
    with pytest.raises(TypeError, match=re.escape("expected np.ndarray (got list)")):
        jg.from_numpy([1, 2])


def test_shape_factories():
    assert jg.zeros(2, 3).tolist() == [[0.0] * 3] * 2 and jg.zeros((2, 3)).shape == jg.zeros([2, 3]).shape == (2, 3)
    assert jg.zeros(2, 3, dtype=jg.int64).dtype is jg.int64 and jg.ones(2, dtype=jg.bool).tolist() == [True, True]
    assert jg.ones(0).shape == (0,) and jg.empty(2, 3).shape == (2, 3) and jg.zeros(()).shape == ()
    assert jg.full((2, 2), 7).dtype is jg.int64 and jg.full((2, 2), 7.0).dtype is jg.float32
    assert jg.full((2,), True).dtype is jg.bool and jg.full((2,), 1.5, dtype=jg.int64).tolist() == [1, 1]
    assert jg.eye(3).tolist()[1] == [0.0, 1.0, 0.0] and jg.eye(2, 3).shape == (2, 3)
    assert jg.eye(2, dtype=jg.int64).dtype is jg.int64


def test_arange_and_linspace():
    assert jg.arange(5).tolist() == [0, 1, 2, 3, 4] and jg.arange(5).dtype is jg.int64
    assert jg.arange(1, 4).tolist() == [1, 2, 3] and jg.arange(5.0).dtype is jg.float32
    assert jg.arange(0, 1, 0.25).tolist() == [0.0, 0.25, 0.5, 0.75]
    assert jg.arange(1, 2.5, 0.5).tolist() == [1.0, 1.5, 2.0] and jg.arange(10, 0, -3).tolist() == [10, 7, 4, 1]
    assert jg.arange(5, dtype=jg.float32).dtype is jg.float32
    np.testing.assert_allclose(jg.linspace(0, 1, 5).numpy(), [0, 0.25, 0.5, 0.75, 1])
    assert jg.linspace(0, 1, 1).tolist() == [0.0] and jg.linspace(0, 1, 0).shape == (0,)
    assert jg.linspace(0, 10, 3, dtype=jg.int64).tolist() == [0, 5, 10]
    with pytest.raises(RuntimeError, match="upper bound and lower bound inconsistent with step sign"):
        jg.arange(0, 5, -1)
    with pytest.raises(RuntimeError, match="step must be nonzero"):
        jg.arange(0, 5, 0)
    with pytest.raises(RuntimeError, match="number of steps must be non-negative"):
        jg.linspace(0, 1, -1)


def test_random_factories_and_manual_seed():
    jg.manual_seed(0)
    a = (jg.rand(2, 3), jg.randn(4), jg.randint(0, 5, (3,)))
    jg.manual_seed(0)
    b = (jg.rand(2, 3), jg.randn(4), jg.randint(0, 5, (3,)))
    for x, y in zip(a, b):
        assert x.tolist() == y.tolist()
    assert 0 <= a[0].min().item() and a[0].max().item() < 1 and a[0].dtype is jg.float32
    assert jg.randn(2, 3, dtype=jg.float64).dtype is jg.float64 and a[2].dtype is jg.int64
    assert jg.randint(5, (3,)).shape == (3,) and jg.randint(3, 5, (2, 2), dtype=jg.float32).dtype is jg.float32
    r = jg.randint(3, 5, (100,))
    assert 3 <= r.min().item() and r.max().item() <= 4
    with pytest.raises(RuntimeError, match="random_ expects 'from' to be less than 'to', but got from=5 >= to=3"):
        jg.randint(5, 3, (2,))
    with pytest.raises(NotImplementedError, match="\"check_uniform_bounds\" not implemented for 'Long'"):
        jg.rand(2, dtype=jg.int64)
    with pytest.raises(NotImplementedError, match="\"normal_kernel_cpu\" not implemented for 'Long'"):
        jg.randn_like(jg.ones(2, dtype=jg.int64))


def test_like_and_new_factories():
    i = jg.ones(2, 3, dtype=jg.int64)
    assert jg.zeros_like(i).dtype is jg.int64 and jg.zeros_like(i).shape == (2, 3)
    assert jg.ones_like(jg.ones(2), dtype=jg.float64).dtype is jg.float64
    assert jg.full_like(jg.ones(2), 3).tolist() == [3.0, 3.0] and jg.full_like(i, 3.7).tolist()[0] == [3, 3, 3]
    assert jg.empty_like(i).shape == (2, 3) and jg.rand_like(jg.ones(2)).shape == (2,)
    assert jg.randn_like(jg.ones(2, dtype=jg.float64)).dtype is jg.float64
    assert jg.zeros_like(jg.ones(2), requires_grad=True).requires_grad
    assert jg.ones(2).new_zeros(3).tolist() == [0.0] * 3 and i.new_ones((2, 2)).dtype is jg.int64
    assert jg.ones(2).new_full((2,), 5).tolist() == [5.0, 5.0] and jg.ones(2).new_empty(3).shape == (3,)
    assert jg.ones(2, dtype=jg.float64).new_tensor([1, 2]).dtype is jg.float64
    assert i.new_zeros(2, dtype=jg.float32).dtype is jg.float32


def test_factories_ignore_no_grad():
    with jg.no_grad():
        assert jg.zeros(2, requires_grad=True).requires_grad and jg.tensor([1.0], requires_grad=True).requires_grad


# ------------------------------------------------------------------ attributes and conversions
def test_attributes():
    x = jg.ones(2, 3)
    assert x.shape == (2, 3) and x.size() == (2, 3) and x.size(1) == 3 and x.size(-1) == 3
    assert repr(x.size()) == "jitgrad.Size([2, 3])" and x.shape.numel() == 6
    assert x.dim() == x.ndim == 2 and x.numel() == jg.numel(x) == 6 and x.dtype is jg.float32
    assert x.device.type == "cpu" and x.T.shape == (3, 2) and len(x) == 2
    assert x.element_size() == 4 and jg.ones(2, dtype=jg.float64).element_size() == 8
    assert x.is_floating_point() and not jg.ones(2, dtype=jg.int64).is_floating_point()
    assert jg.is_tensor(x) and not jg.is_tensor([1])
    with pytest.raises(IndexError, match=re.escape("Dimension out of range (expected to be in range of [-2, 1], but "
                                                   "got 2)")):
        x.size(2)
    with pytest.raises(TypeError, match="len\\(\\) of a 0-d tensor"):
        len(jg.tensor(1.0))


def test_item_tolist_and_python_numbers():
    assert jg.tensor(2.5).item() == 2.5 and jg.tensor([2]).item() == 2 and isinstance(jg.tensor([2]).item(), int)
    assert jg.tensor([[1, 2], [3, 4]]).tolist() == [[1, 2], [3, 4]] and jg.tensor(2.5).tolist() == 2.5
    assert float(jg.tensor([2.5])) == 2.5 and int(jg.tensor(2.7)) == 2 and bool(jg.tensor([1.0]))
    assert f"{jg.tensor(1.5):.3f}" == "1.500" and f"{jg.tensor([1.5])}" == "tensor([1.5000])"
    with pytest.raises(RuntimeError, match="a Tensor with 2 elements cannot be converted to Scalar"):
        jg.tensor([2, 3]).item()
    with pytest.raises(ValueError, match="only one element tensors can be converted to Python scalars"):
        float(jg.tensor([1.0, 2.0]))
    with pytest.raises(RuntimeError, match="Boolean value of Tensor with more than one value is ambiguous"):
        bool(jg.tensor([1.0, 2.0]))


def test_numpy_shares_memory_and_refuses_tensors_that_require_grad():
    x = jg.tensor([1.0, 2.0])
    x.numpy()[0] = 5
    assert x.tolist() == [5.0, 2.0] and jg.tensor([True]).numpy().dtype == np.bool_
    y = jg.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match=re.escape("Can't call numpy() on Tensor that requires grad. Use "
                                                     "tensor.detach().numpy() instead.")):
        y.numpy()
    assert y.detach().numpy().tolist() == [1.0, 2.0]


def test_dtype_conversions():
    x = jg.tensor([1.5, -2.5])
    assert x.float() is x and x.to(jg.float32) is x and x.to("cpu") is x and x.to(jg.float32, copy=True) is not x
    assert x.double().dtype is jg.float64 and x.long().tolist() == [1, -2] and x.int().dtype is jg.int32
    assert x.bool().tolist() == [True, True] and x.to(dtype=jg.int64).dtype is jg.int64
    assert x.to("cpu", jg.int64).dtype is jg.int64 and x.to(jg.ones(1, dtype=jg.float64)).dtype is jg.float64
    assert x.type() == "jitgrad.FloatTensor" and jg.ones(1, dtype=jg.int64).type() == "jitgrad.LongTensor"
    assert x.type(jg.float64).dtype is jg.float64 and x.type_as(jg.ones(1, dtype=jg.int32)).dtype is jg.int32
    y = x.requires_grad_().double()
    assert y.grad_fn.name() == "ToCopyBackward0"
    y.sum().backward()
    assert x.grad.dtype is jg.float32 and x.grad.tolist() == [1.0, 1.0]


def test_requires_grad_rules():
    x = jg.tensor([1.0, 2.0])
    assert x.requires_grad_() is x and x.requires_grad and x.requires_grad_(False) is x and not x.requires_grad
    x.requires_grad = True
    y = x * 2
    assert not y.is_leaf and y.requires_grad and y.requires_grad_(True) is y
    with pytest.raises(RuntimeError, match=re.escape("you can only change requires_grad flags of leaf variables. If "
                                                     "you want to use a computed variable in a subgraph that doesn't "
                                                     "require differentiation use var_no_grad = var.detach().")):
        y.requires_grad = False
    i = jg.tensor([1, 2])
    with pytest.raises(RuntimeError, match="^only Tensors of floating point dtype can require gradients"):
        i.requires_grad_()
    with pytest.raises(RuntimeError, match="^only Tensors of floating point and complex dtype can require gradients"):
        i.requires_grad = True
    with pytest.raises(RuntimeError, match="^Only Tensors of floating point and complex dtype can require gradients"):
        jg.tensor([1, 2], requires_grad=True)
    assert not i.requires_grad


def test_detach_shares_version_counter_and_data_does_not():
    x = jg.tensor([1.0, 2.0], requires_grad=True)
    d = x.detach()
    d[0] = 5
    assert x.tolist()[0] == 5.0 and x._version == d._version == 1 and not d.requires_grad and d.is_leaf
    data = x.data
    data[1] = 7
    assert x.tolist() == [5.0, 7.0] and x._version == 1 and data._version == 1 and not data.requires_grad
    z = x * 2
    assert z.detach_() is z and not z.requires_grad and z.grad_fn is None and z.is_leaf
    with pytest.raises(RuntimeError, match="Can't detach views in-place. Use detach\\(\\) instead."):
        x[0:1].detach_()


def test_clone_and_contiguous():
    x = jg.tensor([1.0, 2.0], requires_grad=True)
    c = x.clone()
    assert c.grad_fn.name() == "CloneBackward0" and c.requires_grad and not c.is_leaf
    with jg.no_grad():
        c[0] = 5
    assert x.tolist() == [1.0, 2.0]
    t = jg.arange(6.0).reshape(2, 3).t()
    ct = t.contiguous()
    assert not t.is_contiguous() and ct.is_contiguous() and ct.stride() == (2, 1) and t.stride() == (1, 3)
    assert ct.tolist() == t.tolist()
    m = jg.arange(6.0).reshape(2, 3)
    assert m.contiguous() is m


# ------------------------------------------------------------------ repr
REPRS = [
    (lambda: jg.tensor([1.0, 2.0], requires_grad=True), "tensor([1., 2.], requires_grad=True)"),
    (lambda: jg.tensor([1.0, 2.0], requires_grad=True) * 2, "tensor([2., 4.], grad_fn=<MulBackward0>)"),
    (lambda: jg.tensor(2.0, requires_grad=True).exp(), "tensor(7.3891, grad_fn=<ExpBackward0>)"),
    (lambda: jg.tensor([1.0, 2.0], dtype=jg.float64, requires_grad=True) + 1,
     "tensor([2., 3.], dtype=jitgrad.float64, grad_fn=<AddBackward0>)"),
    (lambda: jg.tensor([[1.5, -2.25], [3.0, 4.125]]), "tensor([[ 1.5000, -2.2500],\n        [ 3.0000,  4.1250]])"),
    (lambda: jg.tensor([[1, -2], [30, 4]]), "tensor([[ 1, -2],\n        [30,  4]])"),
    (lambda: jg.tensor([[True, False], [False, False]]), "tensor([[ True, False],\n        [False, False]])"),
    (lambda: jg.tensor([1, 2], dtype=jg.int32), "tensor([1, 2], dtype=jitgrad.int32)"),
    (lambda: jg.tensor(True), "tensor(True)"),
    (lambda: jg.tensor(7), "tensor(7)"),
    (lambda: jg.tensor(-7.5), "tensor(-7.5000)"),
    (lambda: jg.tensor(1e-10), "tensor(1.0000e-10)"),
    (lambda: jg.tensor([1e-10, 1.0]), "tensor([1.0000e-10, 1.0000e+00])"),
    (lambda: jg.tensor([1.0, 10000.0]), "tensor([1.0000e+00, 1.0000e+04])"),
    (lambda: jg.tensor([0.1, 0.25, 100.0]), "tensor([  0.1000,   0.2500, 100.0000])"),
    (lambda: jg.tensor([1.0, math.inf]), "tensor([1., inf])"),
    (lambda: jg.tensor([math.nan, 1.5]), "tensor([   nan, 1.5000])"),
    (lambda: jg.tensor([0.0, -0.0]), "tensor([0., -0.])"),
    (lambda: jg.tensor([123456789.0]), "tensor([1.2346e+08])"),
    (lambda: jg.zeros(0, dtype=jg.float64), "tensor([], dtype=jitgrad.float64)"),
    (lambda: jg.zeros(0, 2, dtype=jg.int64), "tensor([], size=(0, 2), dtype=jitgrad.int64)"),
    (lambda: jg.zeros(0, requires_grad=True), "tensor([], requires_grad=True)"),
    (lambda: jg.ones(1, 1, 1), "tensor([[[1.]]])"),
    (lambda: jg.tensor([[[1.0, 2.0]], [[3.0, 4.0]]]), "tensor([[[1., 2.]],\n\n        [[3., 4.]]])"),
    (lambda: jg.arange(2000.0), "tensor([0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 1.9970e+03, 1.9980e+03,\n"
                                "        1.9990e+03])"),
    (lambda: jg.arange(1001), "tensor([   0,    1,    2,  ...,  998,  999, 1000])"),
    (lambda: jg.arange(30), "tensor([ 0,  1,  2,  3,  4,  5,  6,  7,  8,  9, 10, 11, 12, 13, 14, 15, 16, 17,\n"
                            "        18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29])"),
    (lambda: jg.tensor([[1.0, 2.0]], requires_grad=True)[0], "tensor([1., 2.], grad_fn=<SelectBackward0>)"),
    (lambda: jg.tensor([[1.0, 2.0]]).max(1, keepdim=True),
     "jitgrad.return_types.max(\nvalues=tensor([[2.]]),\nindices=tensor([[1]]))"),
    (lambda: jg.float64, "jitgrad.float64"),
]


@pytest.mark.parametrize("make,expected", REPRS)
def test_repr_as_pytorch_prints_it(make, expected):
    assert repr(make()) == expected


def test_repr_of_a_large_matrix_is_summarized():
    expected = ("tensor([[   0,    1,    2,  ...,   47,   48,   49],\n"
                "        [  50,   51,   52,  ...,   97,   98,   99],\n"
                "        [ 100,  101,  102,  ...,  147,  148,  149],\n"
                "        ...,\n"
                "        [1850, 1851, 1852,  ..., 1897, 1898, 1899],\n"
                "        [1900, 1901, 1902,  ..., 1947, 1948, 1949],\n"
                "        [1950, 1951, 1952,  ..., 1997, 1998, 1999]])")
    assert repr(jg.arange(2000).reshape(40, 50)) == expected and str(jg.arange(2000).reshape(40, 50)) == expected


# ------------------------------------------------------------------ in-place forms
@pytest.mark.parametrize("call,before,after", [
    (lambda x: x.add_(1, alpha=2), [1.0, 2.0], [3.0, 4.0]),
    (lambda x: x.sub_(jg.tensor([1.0, 1.0])), [1.0, 2.0], [0.0, 1.0]),
    (lambda x: x.mul_(3), [1.0, 2.0], [3.0, 6.0]),
    (lambda x: x.div_(2), [1.0, 2.0], [0.5, 1.0]),
    (lambda x: x.div_(2, rounding_mode="floor"), [1.0, -3.0], [0.0, -2.0]),
    (lambda x: x.pow_(2), [1.0, 3.0], [1.0, 9.0]),
    (lambda x: x.clamp_(2, 3), [1.0, 5.0], [2.0, 3.0]),
    (lambda x: x.relu_(), [-1.0, 5.0], [0.0, 5.0]),
    (lambda x: x.sigmoid_(), [0.0, 0.0], [0.5, 0.5]),
    (lambda x: x.tanh_(), [0.0, 0.0], [0.0, 0.0]),
    (lambda x: x.exp_(), [0.0, 0.0], [1.0, 1.0]),
    (lambda x: x.neg_(), [-1.0, 5.0], [1.0, -5.0]),
    (lambda x: x.zero_(), [-1.0, 5.0], [0.0, 0.0]),
    (lambda x: x.fill_(7), [-1.0, 5.0], [7.0, 7.0]),
    (lambda x: x.fill_(jg.tensor(2.0)), [-1.0, 5.0], [2.0, 2.0]),
    (lambda x: x.copy_(jg.tensor([3, 4])), [-1.0, 5.0], [3.0, 4.0]),
    (lambda x: x.masked_fill_(jg.tensor([True, False]), 0.0), [-1.0, 5.0], [0.0, 5.0]),
    (lambda x: x.scatter_add_(0, jg.tensor([1, 1]), jg.tensor([1.0, 2.0])), [0.0, 0.0], [0.0, 3.0]),
])
def test_inplace_forms(call, before, after):
    x = jg.tensor(before)
    assert call(x) is x
    assert x.tolist() == after and x._version == 1


def test_inplace_keeps_dtype_and_checks_it():
    i = jg.tensor([1, 7])
    i.fill_(7.9)
    assert i.tolist() == [7, 7] and i.dtype is jg.int64
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output type Long"):
        jg.tensor([1, 2]).add_(1.5)
    with pytest.raises(RuntimeError, match=re.escape("output with shape [2] doesn't match the broadcast shape [2, 2]")):
        jg.tensor([1.0, 2.0]).add_(jg.ones(2, 2))
    with pytest.raises(RuntimeError, match="fill_ only supports 0-dimension value tensor but got tensor with 1 "
                                           "dimensions."):
        jg.tensor([1.0, 2.0]).fill_(jg.tensor([2.0]))
    with pytest.raises(TypeError, match=re.escape("copy_(): argument 'other' (position 1) must be Tensor, not list")):
        jg.zeros(2).copy_([1.0, 2.0])
    with pytest.raises(RuntimeError, match=re.escape("The size of tensor a (2) must match the size of tensor b (3) at "
                                                     "non-singleton dimension 1")):
        jg.zeros(2, 2).copy_(jg.ones(3))
    with pytest.raises(RuntimeError, match=re.escape("Negation, the `-` operator, on a bool tensor is not supported.")):
        jg.tensor([True]).neg_()


def test_operators_are_inplace():
    x = jg.tensor([1.0, 2.0])
    y = x
    x += 1
    x *= 2
    x -= 1
    x /= 2
    x **= 2
    assert y is x and x.tolist() == [2.25, 6.25] and x._version == 5
    i = jg.tensor([1, 2])
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output type Long"):
        i /= 2


def test_inplace_on_a_leaf_that_requires_grad_fails():
    x = jg.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="^a leaf Variable that requires grad is being used in an in-place "
                                           "operation."):
        x.add_(1)
    with pytest.raises(RuntimeError, match="^a view of a leaf Variable that requires grad is being used in an in-place "
                                           "operation."):
        x[0].mul_(2)
    assert x.tolist() == [1.0, 2.0] and x._version == 0
    with jg.no_grad():
        x.mul_(2)
    assert x.tolist() == [2.0, 4.0] and x.is_leaf


@pytest.mark.parametrize("call,grad", [
    (lambda y, x: y.exp_(), None), (lambda y, x: y.add_(x, alpha=2), [3.0, 3.0]),
    (lambda y, x: y.pow_(2), None), (lambda y, x: y.zero_(), [0.0, 0.0]), (lambda y, x: y.fill_(3), [0.0, 0.0]),
    (lambda y, x: y.copy_(jg.tensor([5.0, 6.0])), [0.0, 0.0]),
    (lambda y, x: y.masked_fill_(jg.tensor([True, False]), 0.0), [0.0, 1.0]),
    (lambda y, x: y.clamp_(0, 1.5), [1.0, 0.0]), (lambda y, x: y.relu_(), [1.0, 1.0]),
])
def test_inplace_on_a_non_leaf_rewrites_its_history(call, grad):
    x = jg.tensor([1.0, 2.0], dtype=jg.float64, requires_grad=True)
    y = x * 1
    call(y, x)
    assert y.grad_fn is not None and not y.is_leaf and y._version == 1
    if grad is None:  # compare with the out-of-place op
        assert jg.autograd.gradcheck(lambda t: call(t * 1, t), (x,))
    else:
        y.sum().backward()
        assert x.grad.tolist() == grad


def test_inplace_after_saving_for_backward_is_detected():
    x = jg.tensor([1.0, 2.0], requires_grad=True)
    y = x.exp()
    y.add_(1)
    with pytest.raises(RuntimeError, match=re.escape("one of the variables needed for gradient computation has been "
                                                     "modified by an inplace operation: [jitgrad.FloatTensor [2]], "
                                                     "which is output 0 of ExpBackward0, is at version 1; expected "
                                                     "version 0 instead.")):
        y.sum().backward()
