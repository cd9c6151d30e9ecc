"""matmul in every rank case, mm, bmm, mv, dot, outer: shapes and values against NumPy, gradients against
finite differences, and PyTorch's error messages for shapes that do not fit."""
import re

import numpy as np
import pytest

import jitgrad as jg
from jitgrad.autograd import gradcheck

RANK_CASES = [((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 2)), ((2, 3), (3, 4)), ((5, 2, 3), (3,)), ((3,), (5, 3, 2)),
              ((5, 2, 3), (3, 4)), ((2, 3), (5, 3, 4)), ((5, 1, 2, 3), (4, 3, 2)), ((2, 2, 3), (2, 3, 1))]


@pytest.mark.parametrize("sa,sb", RANK_CASES)
def test_matmul_rank_cases(sa, sb, rng):
    a, b = rng.standard_normal(sa), rng.standard_normal(sb)
    x, y = jg.tensor(a, requires_grad=True), jg.tensor(b, requires_grad=True)
    out = jg.matmul(x, y)
    assert out.shape == np.matmul(a, b).shape
    np.testing.assert_allclose(out.detach().numpy(), np.matmul(a, b), rtol=1e-12)
    np.testing.assert_allclose((x @ y).detach().numpy(), np.matmul(a, b), rtol=1e-12)
    assert gradcheck(jg.matmul, (x, y))


def test_matmul_keeps_float32_and_promotes():
    a = jg.ones(2, 3)
    assert (a @ jg.ones(3)).dtype is jg.float32
    assert jg.matmul(jg.ones(2, 3, dtype=jg.int64), jg.ones(3, 4, dtype=jg.int64)).dtype is jg.int64
    assert (jg.ones(2, 3, dtype=jg.float64) @ jg.ones(3, dtype=jg.float64)).dtype is jg.float64


def test_mm_bmm_mv_dot_outer(rng):
    a, b = rng.standard_normal((2, 3)), rng.standard_normal((3, 4))
    np.testing.assert_allclose(jg.mm(jg.tensor(a), jg.tensor(b)).numpy(), a @ b, rtol=1e-6)
    c, d = rng.standard_normal((2, 2, 3)), rng.standard_normal((2, 3, 4))
    np.testing.assert_allclose(jg.bmm(jg.tensor(c), jg.tensor(d)).numpy(), c @ d, rtol=1e-6)
    v = rng.standard_normal(3)
    np.testing.assert_allclose(jg.mv(jg.tensor(a), jg.tensor(v)).numpy(), a @ v, rtol=1e-6)
    np.testing.assert_allclose(jg.dot(jg.tensor(v), jg.tensor(v)).item(), v @ v, rtol=1e-6)
    assert jg.inner(jg.ones(3), jg.ones(3)).item() == 3.0
    np.testing.assert_allclose(jg.outer(jg.tensor(v), jg.tensor(v[:2])).numpy(), np.outer(v, v[:2]), rtol=1e-6)
    assert jg.outer(jg.tensor([1, 2]), jg.tensor([1.0, 2.0])).tolist() == [[1.0, 2.0], [2.0, 4.0]]  # promotes


def test_gradients_and_node_names():
    a = jg.ones(2, 3, dtype=jg.float64, requires_grad=True)
    b = jg.ones(3, 4, dtype=jg.float64, requires_grad=True)
    v = jg.ones(3, dtype=jg.float64, requires_grad=True)
    assert jg.mm(a, b).grad_fn.name() == "MmBackward0"
    assert jg.mv(a, v).grad_fn.name() == "MvBackward0"
    assert jg.dot(v, v).grad_fn.name() == "DotBackward0" and jg.matmul(v, v).grad_fn.name() == "DotBackward0"
    assert jg.outer(v, v).grad_fn.name() == "MulBackward0"
    batch = jg.ones(5, 2, 3, dtype=jg.float64, requires_grad=True)
    assert jg.bmm(batch, jg.ones(5, 3, 4, dtype=jg.float64)).grad_fn.name() == "BmmBackward0"
    for fn, args in [(jg.mm, (a, b)), (jg.mv, (a, v)), (jg.dot, (v, v)), (jg.outer, (v, jg.ones(2, dtype=jg.float64, requires_grad=True))),
                     (jg.bmm, (batch, jg.ones(5, 3, 1, dtype=jg.float64, requires_grad=True)))]:
        assert gradcheck(fn, args)


def test_outer_gradient_with_mixed_dtypes():
    a = jg.tensor([1.0, 2.0], requires_grad=True)
    b = jg.tensor([3.0, 4.0, 5.0], dtype=jg.float64, requires_grad=True)
    jg.outer(a, b).sum().backward()
    assert a.grad.dtype is jg.float32 and a.grad.tolist() == [12.0, 12.0]
    assert b.grad.dtype is jg.float64 and b.grad.tolist() == [3.0, 3.0, 3.0]


@pytest.mark.parametrize("fn,sa,sb,message", [
    (jg.matmul, (3,), (4,), "inconsistent tensor size, expected tensor [3] and src [4] to have the same number of "
                            "elements, but got 3 and 4 elements respectively"),
    (jg.matmul, (2, 3), (4,), "size mismatch, got input (2), mat (2x3), vec (4)"),
    (jg.matmul, (3,), (4, 2), "mat1 and mat2 shapes cannot be multiplied (1x3 and 4x2)"),
    (jg.matmul, (2, 3), (4, 5), "mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)"),
    (jg.matmul, (5, 2, 3), (4,), "size mismatch, got input (10), mat (10x3), vec (4)"),
    (jg.matmul, (5, 2, 3), (4, 2), "mat1 and mat2 shapes cannot be multiplied (10x3 and 4x2)"),
    (jg.matmul, (2, 3), (5, 4, 2), "Expected size for first two dimensions of batch2 tensor to be: [5, 3] but got: "
                                   "[5, 4]."),
    (jg.matmul, (5, 2, 3), (5, 4, 2), "Expected size for first two dimensions of batch2 tensor to be: [5, 3] but "
                                      "got: [5, 4]."),
    (jg.matmul, (5, 2, 3), (4, 3, 2), "The size of tensor a (5) must match the size of tensor b (4) at "
                                      "non-singleton dimension 0"),
    (jg.matmul, (), (2,), "both arguments to matmul need to be at least 1D, but they are 0D and 1D"),
    (jg.mm, (2, 3), (4, 5), "mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)"),
    (jg.mm, (3,), (3, 4), "self must be a matrix"),
    (jg.mm, (2, 3), (3,), "mat2 must be a matrix"),
    (jg.bmm, (2, 2, 3), (3, 3, 4), "Expected size for first two dimensions of batch2 tensor to be: [2, 3] but got: "
                                   "[3, 3]."),
    (jg.bmm, (2, 3), (2, 3, 4), "batch1 must be a 3D tensor"),
    (jg.bmm, (2, 2, 3), (3, 4), "batch2 must be a 3D tensor"),
    (jg.mv, (2, 3), (4,), "size mismatch, got input (2), mat (2x3), vec (4)"),
    (jg.mv, (3,), (3,), "vector + matrix @ vector expected, got 1, 1, 1"),
    (jg.dot, (3, 1), (3,), "1D tensors expected, but got 2D and 1D tensors"),
    (jg.outer, (3,), (2, 1), "outer: Expected 1-D argument vec2, but got 2-D"),
])
def test_shape_errors(fn, sa, sb, message):
    a, b = jg.ones(sa), jg.ones(sb)
    with pytest.raises(RuntimeError, match="^" + re.escape(message)):
        fn(a, b)


def test_dtype_errors():
    with pytest.raises(RuntimeError, match=re.escape("expected m1 and m2 to have the same dtype, but got: float != "
                                                     "double")):
        jg.mm(jg.ones(2, 3), jg.ones(3, 4, dtype=jg.float64))
    with pytest.raises(RuntimeError, match=re.escape("dot : expected both vectors to have same dtype, but found Float "
                                                     "and Double")):
        jg.dot(jg.ones(3), jg.ones(3, dtype=jg.float64))
    with pytest.raises(NotImplementedError, match=re.escape("\"addmm_impl_cpu_\" not implemented for 'Bool'")):
        jg.mm(jg.ones(2, 2, dtype=jg.bool), jg.ones(2, 2, dtype=jg.bool))
