"""Reductions as PyTorch defines them: dim as int or tuple, keepdim, the (values, indices) of max/min with
dim, var/std corrections, norms, logsumexp, cumsum, and the gradient rules at ties and zeros (seed 004).
Values against NumPy on random inputs are in the op matrix (test_op_matrix.py)."""
import math
import re

import numpy as np
import pytest

import jitgrad as jg
from jitgrad.autograd import gradcheck


def grad_of(fn, values, dtype=jg.float32):
    x = jg.tensor(values, dtype=dtype, requires_grad=True)
    fn(x).backward()
    return x.grad.tolist()


M = [[1.0, 2.0], [3.0, 4.0]]


@pytest.mark.parametrize("dim,keepdim,expected", [
    (None, False, 10.0), (1, False, [3.0, 7.0]), (0, True, [[4.0, 6.0]]), ((0, 1), True, [[10.0]]),
    (-1, True, [[3.0], [7.0]]), ((), False, 10.0)])
def test_sum_dims(dim, keepdim, expected):
    x = jg.tensor(M)
    out = x.sum() if dim is None else x.sum(dim, keepdim=keepdim)
    assert out.tolist() == expected


def test_sum_and_mean_node_names_and_dtypes():
    x = jg.tensor(M, requires_grad=True)
    assert x.sum().grad_fn.name() == "SumBackward0" and x.sum(0).grad_fn.name() == "SumBackward1"
    assert x.mean().grad_fn.name() == "MeanBackward0" and x.mean(0).grad_fn.name() == "MeanBackward1"
    assert jg.tensor([True, True]).sum().dtype is jg.int64
    assert jg.tensor([1, 2]).sum(dtype=jg.float64).tolist() == 3.0
    assert jg.tensor([1, 2]).mean(dtype=jg.float32).item() == 1.5
    assert jg.tensor([1, 2], dtype=jg.int32).sum().dtype is jg.int64  # integers sum in int64, as in PyTorch


def test_mean_of_integers_is_an_error():
    with pytest.raises(RuntimeError, match=re.escape("mean(): could not infer output dtype. Input dtype must be "
                                                     "either a floating point or complex dtype. Got: Long")):
        jg.tensor([1, 2]).mean()


def test_reductions_of_empty_tensors():
    assert jg.zeros(0).sum().item() == 0.0 and jg.zeros(0, 3).prod(0).tolist() == [1.0, 1.0, 1.0]
    assert math.isnan(jg.zeros(0).mean().item())
    assert jg.zeros(0, 3).amax(1).shape == (0,)
    with pytest.raises(RuntimeError, match=re.escape("max(): Expected reduction dim to be specified for "
                                                     "input.numel() == 0.")):
        jg.zeros(0).max()
    with pytest.raises(RuntimeError, match=re.escape("amax(): Expected reduction dim to be specified")):
        jg.zeros(0).amax()
    for fn, name in [(lambda x: x.amax(0), "amax"), (lambda x: x.max(0), "max"), (lambda x: x.argmax(0), "argmax")]:
        with pytest.raises(IndexError, match=re.escape("%s(): Expected reduction dim 0 to have non-zero size." % name)):
            fn(jg.zeros(0, 3))
    with pytest.raises(IndexError, match=re.escape("argmax(): Expected reduction dim to be specified for "
                                                   "input.numel() == 0.")):
        jg.zeros(0).argmax()


def test_max_min_all_reduce_split_the_gradient_over_ties():
    assert grad_of(lambda x: x.max(), [1.0, 3.0, 3.0]) == [0.0, 0.5, 0.5]
    assert grad_of(lambda x: x.min(), [1.0, 1.0, 3.0]) == [0.5, 0.5, 0.0]
    assert grad_of(lambda x: x.amax(), [[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]]) == [[0, 0.5, 0.5], [0, 0, 0]]
    assert grad_of(lambda x: x.amax(1).sum(), [[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]]) == [[0, 0.5, 0.5], [0.5, 0.5, 0]]


def test_max_min_with_dim_return_values_and_indices():
    x = jg.tensor([[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]])
    out = x.max(1)
    values, indices = out
    assert values.tolist() == [3.0, 2.0] and indices.tolist() == [1, 0]  # the first maximum, as in PyTorch
    assert out.values is values and out.indices is indices and indices.dtype is jg.int64
    assert repr(out) == "jitgrad.return_types.max(\nvalues=tensor([3., 2.]),\nindices=tensor([1, 0]))"
    kept = jg.min(x, dim=0, keepdim=True)
    assert kept.values.tolist() == [[1.0, 2.0, 0.0]] and kept.indices.tolist() == [[0, 1, 1]]
    assert jg.max(jg.tensor(5.0), 0).indices.tolist() == 0


def test_max_min_with_dim_send_the_gradient_to_the_chosen_index():
    assert grad_of(lambda x: x.max(1).values.sum(), [[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]]) == [[0, 1, 0], [1, 0, 0]]
    assert grad_of(lambda x: x.min(0)[0].sum(), [[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]]) == [[1, 0, 0], [0, 1, 1]]
    x = jg.tensor([[1.0, 5.0], [4.0, 2.0]], requires_grad=True)
    assert x.max(1).values.grad_fn.name() == "MaxBackward0" and x.max().grad_fn.name() == "MaxBackward1"


def test_max_of_two_tensors_is_maximum():
    assert jg.max(jg.tensor([1.0, 5.0]), jg.tensor([2.0, 3.0])).tolist() == [2.0, 5.0]
    assert jg.min(jg.tensor([1.0, 5.0]), other=jg.tensor([2.0, 3.0])).tolist() == [1.0, 3.0]


def test_argmax_argmin():
    x = jg.tensor([[1.0, 3.0], [3.0, 0.0]])
    assert x.argmax().item() == 1 and x.argmin().item() == 3
    assert x.argmax(1, keepdim=True).tolist() == [[1], [0]] and x.argmin(0).tolist() == [0, 1]
    assert not x.requires_grad_().argmax().requires_grad


@pytest.mark.parametrize("kwargs,ddof", [({}, 1), ({"unbiased": False}, 0), ({"unbiased": True}, 1),
                                         ({"correction": 0}, 0), ({"correction": 2}, 2)])
def test_var_std_correction(kwargs, ddof):
    values = [1.0, 2.0, 4.0, 7.0]
    x = jg.tensor(values, dtype=jg.float64)
    assert x.var(**kwargs).item() == pytest.approx(np.var(values, ddof=ddof))
    assert x.std(**kwargs).item() == pytest.approx(np.std(values, ddof=ddof))


def test_var_std_positional_forms_and_dims():
    x = jg.tensor([[1.0, 2.0, 4.0], [0.0, 0.0, 3.0]], dtype=jg.float64)
    a = np.array(x.tolist())
    np.testing.assert_allclose(x.var(1).numpy(), a.var(1, ddof=1))
    np.testing.assert_allclose(x.var(1, False).numpy(), a.var(1))
    np.testing.assert_allclose(x.std(dim=(0, 1), keepdim=True).numpy(), a.std(ddof=1, keepdims=True))
    np.testing.assert_allclose(jg.std(x, 0, unbiased=False).numpy(), a.std(0))


def test_var_without_degrees_of_freedom_warns_and_gives_nan():
    with pytest.warns(UserWarning, match=re.escape("var(): degrees of freedom is <= 0. Correction should be strictly "
                                                   "less than the reduction factor")):
        assert math.isnan(jg.tensor([1.0]).var().item())
    with pytest.warns(UserWarning, match=re.escape("std(): degrees of freedom is <= 0")):
        assert math.isnan(jg.tensor(5.0).std().item())


def test_std_gradient_is_zero_where_std_is_zero():
    assert grad_of(lambda x: x.std(), [1.0, 1.0]) == [0.0, 0.0]
    x = jg.tensor([[1.0, 2.0], [3.0, 5.0]], dtype=jg.float64, requires_grad=True)
    assert gradcheck(lambda t: t.std(1), (x,)) and gradcheck(lambda t: t.var(), (x,))


@pytest.mark.parametrize("p,expected", [(None, 5.0), ("fro", 5.0), (2, 5.0), (1, 7.0), (math.inf, 4.0),
                                        (-math.inf, 3.0), (0, 2.0), (3, (27 + 64) ** (1 / 3))])
def test_norm_orders(p, expected):
    x = jg.tensor([3.0, -4.0])
    assert (x.norm() if p is None else x.norm(p)).item() == pytest.approx(expected)


def test_norm_dims_and_gradient_at_zero():
    x = jg.tensor([[3.0, 4.0], [6.0, 8.0]])
    assert x.norm(dim=1).tolist() == [5.0, 10.0]
    assert x.norm(p=2, dim=0, keepdim=True).shape == (1, 2)
    assert jg.norm(x).item() == pytest.approx(math.sqrt(125))
    assert grad_of(lambda t: t.norm(), [0.0, 0.0]) == [0.0, 0.0]  # the subgradient of minimum norm
    assert grad_of(lambda t: t.norm(1), [0.0, 0.0]) == [0.0, 0.0]
    assert grad_of(lambda t: t.norm(math.inf), [4.0, -4.0]) == [0.5, -0.5]


def test_logsumexp_is_stable_and_its_gradient_is_softmax():
    assert jg.logsumexp(jg.tensor([1000.0, 1000.0]), 0).item() == pytest.approx(1000 + math.log(2))
    assert jg.logsumexp(jg.tensor([-math.inf, -math.inf]), 0).item() == -math.inf
    x = jg.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=jg.float64)
    np.testing.assert_allclose(jg.logsumexp(x, (0, 1)).item(), np.log(np.exp(np.array(x.tolist())).sum()))
    assert jg.logsumexp(x, 1, keepdim=True).shape == (2, 1)
    assert jg.logsumexp(jg.tensor([1, 2]), 0).dtype is jg.float32
    np.testing.assert_allclose(grad_of(lambda t: jg.logsumexp(t, 0), [1.0, 2.0]),
                               jg.softmax(jg.tensor([1.0, 2.0]), 0).tolist(), rtol=1e-6)


def test_cumsum():
    assert jg.tensor([1, 2, 3]).cumsum(0).tolist() == [1, 3, 6]
    assert jg.tensor([True, True]).cumsum(0).dtype is jg.int64
    assert jg.tensor([[1.0, 2.0], [3.0, 4.0]]).cumsum(-1).tolist() == [[1.0, 3.0], [3.0, 7.0]]
    assert jg.tensor([1, 2]).cumsum(0, dtype=jg.float32).dtype is jg.float32
    assert grad_of(lambda x: x.cumsum(0).sum(), [1.0, 2.0, 3.0]) == [3.0, 2.0, 1.0]


def test_prod_gradient_with_zeros():
    assert grad_of(lambda x: x.prod(), [2.0, 0.0, 3.0]) == [0.0, 6.0, 0.0]
    assert grad_of(lambda x: x.prod(), [0.0, 0.0, 3.0]) == [0.0, 0.0, 0.0]
    assert grad_of(lambda x: x.prod(1).sum(), [[2.0, 0.0], [0.0, 0.0]]) == [[0.0, 2.0], [0.0, 0.0]]
    assert jg.tensor([1, 2, 3]).prod().tolist() == 6


def test_dim_errors():
    x = jg.tensor(M)
    with pytest.raises(IndexError, match=re.escape("Dimension out of range (expected to be in range of [-2, 1], "
                                                   "but got 2)")):
        x.sum(2)
    with pytest.raises(IndexError, match=re.escape("Dimension out of range (expected to be in range of [-1, 0], "
                                                   "but got 1)")):
        jg.tensor(5.0).sum(1)
    with pytest.raises(RuntimeError, match="dim 0 appears multiple times in the list of dims"):
        x.sum((0, 0))
    with pytest.raises(TypeError):
        x.sum(1.5)
    with pytest.raises(TypeError):
        x.prod((0, 1))
