"""The functions composed of table ops (jitgrad/ops/composite.py): values, dtypes, shapes and gradients side
by side with PyTorch where it is installed, against NumPy otherwise, and PyTorch's errors."""
import warnings

import numpy as np
import pytest

import jitgrad as jg

RNG = np.random.default_rng(0)
A = RNG.standard_normal((3, 4))
B = A + RNG.standard_normal((3, 4)) * 1e-6
A[0, 0] = B[0, 0] = np.nan
A[1, 1] = B[1, 1] = np.inf

CASES = {
    "isclose": lambda L, x, y: L.isclose(x, y),
    "isclose equal_nan": lambda L, x, y: L.isclose(x, y, rtol=0, atol=1e-5, equal_nan=True),
    "allclose": lambda L, x, y: L.tensor(L.allclose(x, y, atol=1e-4, equal_nan=True)),
    "equal": lambda L, x, y: L.tensor([L.equal(x, x), L.equal(x[1:], x[1:].clone()), L.equal(x[:, 1:], x[1:])]),
    "addcmul": lambda L, x, y: L.addcmul(x, x, y, value=0.5),
    "addcdiv": lambda L, x, y: x.addcdiv(y, x + 3, value=2),
    "meshgrid ij": lambda L, x, y: L.stack([g * (k + 1) for k, g in enumerate(L.meshgrid(x[0], y[1], indexing="ij"))]),
    "meshgrid xy": lambda L, x, y: L.stack(L.meshgrid([x[2], y[1, :3], x[1, :2]], indexing="xy")),
    "broadcast_tensors": lambda L, x, y: L.broadcast_tensors(x[:1], y[:, :1])[1] * 2,
    "hstack": lambda L, x, y: L.hstack([x, y]),
    "hstack 1-d": lambda L, x, y: L.hstack((x[0], y[1, :2])),
    "vstack": lambda L, x, y: L.vstack([x[0], y]),
    "dstack": lambda L, x, y: L.dstack([x, y]),
    "column_stack": lambda L, x, y: L.column_stack([x, y[:, 0], x[:, 1]]),
    "atleast": lambda L, x, y: L.atleast_3d(x[2, 2]) + L.atleast_2d(y[0])[..., None] + L.atleast_1d(x[2, 3]),
    "tile": lambda L, x, y: L.tile(x, (2,)),
    "tile 3-d": lambda L, x, y: x.tile((2, 1, 2)),
    "repeat_interleave dim": lambda L, x, y: x.repeat_interleave(2, dim=1),
    "repeat_interleave tensor": lambda L, x, y: L.repeat_interleave(x, L.tensor([1, 0, 2]), dim=0),
    "repeat_interleave flat": lambda L, x, y: x.repeat_interleave(3),
    "repeat_interleave counts": lambda L, x, y: L.repeat_interleave(L.tensor([2, 0, 1])),
    "nan_to_num": lambda L, x, y: L.nan_to_num(x),
    "nan_to_num values": lambda L, x, y: x.nan_to_num(nan=1.5, posinf=9.0, neginf=-9.0),
    "nan_to_num float32": lambda L, x, y: x.float().nan_to_num(),
    "nansum": lambda L, x, y: L.nansum(x[:, 2:]) + L.nansum(y, 1).sum(),
    "nanmean": lambda L, x, y: L.nanmean(y, 0, keepdim=True),
    "take": lambda L, x, y: L.take(y, L.tensor([[0, 5], [-1, 3]])),
    "trace": lambda L, x, y: L.trace(y[1:, 1:]),
    "trace int": lambda L, x, y: L.trace(L.tensor([[1, 2], [3, 4]])),
    "diff": lambda L, x, y: L.diff(y, 2, 0, prepend=x[:1]),
    "diff last": lambda L, x, y: y.diff(append=x[:, :2]),
    "diff bool": lambda L, x, y: L.diff(x > 0),
    "index_add": lambda L, x, y: x.index_add(1, L.tensor([0, 0, 3]), y[:, :3], alpha=2),
    "index_add dim 0": lambda L, x, y: L.index_add(x, 0, L.tensor([2, 1]), y[:2]),
    "index_fill negative": lambda L, x, y: x.index_fill(0, L.tensor([-1]), 2.0),
    "index_copy": lambda L, x, y: x.index_copy(1, L.tensor([2, 0, 1]), y[:, 1:]),
    "index_fill": lambda L, x, y: x.index_fill(1, L.tensor([0, 2]), -1.5),
}


def _run(L, fn):
    xs = [L.tensor(v, requires_grad=True) for v in (A, B)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = fn(L, *xs)
    grads = None
    if out.dtype in (L.float32, L.float64) and out.requires_grad:
        weights = L.tensor(np.arange(out.numel(), dtype=np.float64).reshape(tuple(out.shape)) + 1)
        (out * weights).nan_to_num().sum().backward()
        grads = [None if x.grad is None else x.grad.numpy() for x in xs]
    return out.detach().numpy(), str(out.dtype).split(".")[-1], grads


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_pytorch(name):
    torch = pytest.importorskip("torch")
    (tv, td, tg), (jv, jd, jgr) = _run(torch, CASES[name]), _run(jg, CASES[name])
    assert (jd, jv.shape) == (td, tv.shape)
    np.testing.assert_allclose(jv, tv, rtol=1e-12, equal_nan=True)
    assert (jgr is None) == (tg is None)
    for a, b in zip(jgr or (), tg or ()):
        assert (a is None) == (b is None)
        if a is not None:
            np.testing.assert_allclose(a, b, rtol=1e-12, equal_nan=True)


ERRORS = [
    (lambda L: L.isclose(L.tensor([1, 2]), L.tensor([1.0, 2.0])), RuntimeError, "Long did not match Float"),
    (lambda L: L.addcdiv(L.tensor([1]), L.tensor([1]), L.tensor([2])), RuntimeError,
     "Integer division with addcdiv is no longer supported"),
    (lambda L: L.trace(L.ones(2, 2, 2)), RuntimeError, "trace: expected a matrix, but got tensor with dim 3"),
    (lambda L: L.take(L.ones(2, 2), L.tensor([5])), IndexError,
     "out of range: tried to access index 5 on a tensor of 4 elements."),
    (lambda L: L.take(L.ones(2, 2), L.tensor([-5])), IndexError,
     "out of range: tried to access index -5 on a tensor of 4 elements."),
    (lambda L: L.repeat_interleave(L.tensor([1, 2]), L.tensor([1, 2, 3])), RuntimeError,
     "repeats must have the same size as input along dim, but got repeats.size(0) = 3 and input.size(0) = 2"),
    (lambda L: L.repeat_interleave(L.ones(2), L.tensor([1, -1])), RuntimeError, "repeats can not be negative"),
    (lambda L: L.repeat_interleave(L.ones(3), -1), RuntimeError, "Repeats must be non-negative"),
    (lambda L: L.nanmean(L.tensor([1, 2])), RuntimeError,
     "nanmean(): expected input to have floating point or complex dtype but got Long"),
    (lambda L: L.meshgrid(L.ones(2), L.ones(3), indexing="xx"), RuntimeError,
     'torch.meshgrid: indexing must be one of "xy" or "ij", but received: xx'),
    (lambda L: L.meshgrid(L.ones(2, 2), L.ones(3), indexing="ij"), RuntimeError,
     "torch.meshgrid: Expected 0D or 1D tensor in the tensor list but got"),
    (lambda L: L.diff(L.tensor(1.0)), RuntimeError, "diff expects input to be at least one-dimensional"),
    (lambda L: L.zeros(3, 4).index_add(1, L.tensor([0, 5]), L.ones(3, 2)), RuntimeError,
     "index 5 is out of bounds for dimension 1 with size 4"),
    (lambda L: L.zeros(3, 4).index_add(1, L.tensor([0, 1]), L.ones(3, 3)), RuntimeError,
     "index_add_(): Number of indices (2) should be equal to source.size(dim): (3), for dim: 1"),
    (lambda L: L.zeros(3, 4).index_add(1, L.tensor([[0, 1]]), L.ones(3, 2)), IndexError,
     "index_add_(): Index is supposed to be a vector, but got dim: 2 with type: Long and size: [1, 2]"),
    (lambda L: L.zeros(3, 4).index_add(1, L.tensor([0., 1]), L.ones(3, 2)), RuntimeError,
     "index_add_(): Expected dtype int32/int64 for index but got: Float"),
    (lambda L: L.zeros(3, 4).index_add(1, L.tensor([0, 1]), L.ones(3, 2, dtype=L.float64)), RuntimeError,
     "index_add_(): self (Float) and source (Double) must have the same scalar type"),
    (lambda L: L.zeros(3, 4).index_add(1, L.tensor([0, 1]), L.ones(2, 2)), RuntimeError,
     "source tensor shape must match self tensor shape, excluding the specified dimension."),
    (lambda L: L.zeros(3, 4).index_copy(1, L.tensor([0, 7]), L.ones(3, 2)), IndexError,
     "index_copy_(): index 7 is out of bounds for dimension 1 with size 4"),
    (lambda L: L.zeros(3, 4).index_copy(0, L.tensor([2, 0]), L.ones(1, 4)), IndexError,
     "index_copy_(): Number of indices (2) should be equal to source.size(dim) (1)"),
    (lambda L: L.zeros(3, 4).index_copy(1, L.tensor([0., 1]), L.ones(3, 2)), RuntimeError,
     "index_copy_(): Expected a long tensor for index, but got Float"),
    (lambda L: L.zeros(3, 4).index_fill(1, L.tensor([7]), 5.0), IndexError,
     "index 7 is out of bounds for dimension 1 with size 4"),
    (lambda L: L.zeros(3, 4).index_fill(1, L.tensor([0., 1]), 1.0), IndexError,
     "index_fill_(): Expected dtype int64 for index."),
    (lambda L: L.zeros(3, 4).index_add(0, L.tensor([-1]), L.ones(1, 4)), RuntimeError,
     "index -1 is out of bounds for dimension 0 with size 3"),
    (lambda L: L.zeros(3, 4).index_fill(0, L.tensor([-4]), 2.0), IndexError,
     "index -4 is out of bounds for dimension 0 with size 3"),
]


@pytest.mark.parametrize("case", range(len(ERRORS)))
def test_errors_are_pytorchs(case):
    fn, exc, message = ERRORS[case]
    with pytest.raises(exc) as got:
        fn(jg)
    assert str(got.value).startswith(message)
    try:
        import torch
    except ImportError:
        return
    with pytest.raises(exc) as want:
        fn(torch)
    assert str(want.value).startswith(message)


def test_against_numpy():
    """Without PyTorch: the same functions against NumPy's, and their gradients by finite differences."""
    x, y = jg.tensor(A), jg.tensor(B)
    with np.errstate(invalid="ignore"):
        assert np.array_equal(jg.isclose(x, y).numpy(), np.isclose(A, B))
        assert np.array_equal(jg.isclose(x, y, equal_nan=True).numpy(), np.isclose(A, B, equal_nan=True))
    assert jg.allclose(x, y, atol=1e-4, equal_nan=True) and not jg.allclose(x, y)
    assert jg.equal(x[1:], x[1:].clone()) and not jg.equal(x, x) and not jg.equal(x[1:], y[1:])  # NaN equals nothing
    np.testing.assert_allclose(jg.addcmul(x, x, y, value=0.5).numpy(), A + 0.5 * A * B)
    np.testing.assert_allclose(jg.addcdiv(x, y, x + 3, value=2).numpy(), A + 2 * B / (A + 3))
    for indexing in ("ij", "xy"):
        for g, w in zip(jg.meshgrid(x[2], y[1, :3], indexing=indexing), np.meshgrid(A[2], B[1, :3], indexing=indexing)):
            np.testing.assert_array_equal(g.numpy(), w)
    np.testing.assert_array_equal(jg.hstack([x, y]).numpy(), np.hstack([A, B]))
    np.testing.assert_array_equal(jg.vstack([x[0], y]).numpy(), np.vstack([A[0], B]))
    np.testing.assert_array_equal(jg.dstack([x, y]).numpy(), np.dstack([A, B]))
    np.testing.assert_array_equal(jg.column_stack([x, y[:, 0]]).numpy(), np.column_stack([A, B[:, 0]]))
    np.testing.assert_array_equal(jg.tile(x, (2, 1, 2)).numpy(), np.tile(A, (2, 1, 2)))
    np.testing.assert_array_equal(x.repeat_interleave(jg.tensor([1, 0, 2]), dim=0).numpy(), np.repeat(A, [1, 0, 2], 0))
    np.testing.assert_array_equal(jg.nan_to_num(x).numpy(), np.nan_to_num(A))
    np.testing.assert_allclose(jg.nansum(y, 1).numpy(), np.nansum(B, 1))
    np.testing.assert_allclose(jg.nanmean(y, 0).numpy(), np.nanmean(B, 0))
    np.testing.assert_array_equal(jg.take(y, jg.tensor([[0, 5], [-1, 3]])).numpy(), np.take(B, [[0, 5], [-1, 3]]))
    np.testing.assert_allclose(jg.trace(y[1:, 1:]).numpy(), np.trace(B[1:, 1:]))
    np.testing.assert_allclose(jg.diff(y, 2, 0, prepend=x[:1]).numpy(), np.diff(B, 2, 0, prepend=A[:1]))
    finite = jg.tensor(RNG.standard_normal((3, 4)), requires_grad=True)
    assert jg.autograd.gradcheck(lambda t: jg.addcdiv(t, t * t, t + 5, value=0.5).repeat_interleave(
        jg.tensor([2, 1, 0, 1]), dim=1).diff(dim=0).tile((2, 1)), (finite,))
    assert jg.autograd.gradcheck(lambda t: jg.nansum(jg.hstack([t, t * 2])) + jg.trace(t[:, :3]) +
                                 jg.take(t, jg.tensor([1, 1, -2])).sum(), (finite,))


def test_index_add_copy_fill_against_numpy():
    x = jg.tensor(RNG.standard_normal((3, 4)), requires_grad=True)
    src = jg.tensor(RNG.standard_normal((3, 3)), requires_grad=True)
    want = x.detach().numpy().copy()
    np.add.at(want, (slice(None), [0, 0, 3]), 2 * src.detach().numpy())
    np.testing.assert_allclose(x.index_add(1, jg.tensor([0, 0, 3]), src, alpha=2).detach().numpy(), want)
    want = x.detach().numpy().copy()
    want[:, [2, 0, 1]] = src.detach().numpy()
    np.testing.assert_array_equal(x.index_copy(1, jg.tensor([2, 0, 1]), src).detach().numpy(), want)
    want = x.detach().numpy().copy()
    want[:, [0, 2]] = -1.5
    np.testing.assert_array_equal(x.index_fill(1, jg.tensor([0, 2]), -1.5).detach().numpy(), want)
    assert jg.autograd.gradcheck(lambda a, b: a.index_add(1, jg.tensor([0, 0, 3]), b, alpha=2).index_copy(
        0, jg.tensor([1]), b[:1, :1].expand(1, 4) * 3).index_fill(1, jg.tensor([2]), 0.5), (x, src))


def test_in_place_forms():
    t = jg.ones(3)
    t.addcmul_(jg.ones(3), jg.full((3,), 2.0), value=2).addcdiv_(jg.ones(3), jg.full((3,), 4.0))
    assert t.tolist() == [5.25, 5.25, 5.25] and t._version == 2
    y = jg.zeros(3, 4)
    y.index_add_(0, jg.tensor([1, 1]), jg.ones(2, 4)).index_fill_(1, jg.tensor([3]), 7)
    y.index_copy_(0, jg.tensor([0]), jg.full((1, 4), 5.0))
    assert y.tolist() == [[5.0] * 4, [2.0, 2.0, 2.0, 7.0], [0.0, 0.0, 0.0, 7.0]] and y._version == 3
    n = jg.tensor([1.0, float("nan"), float("inf")])
    assert n.nan_to_num_(posinf=7.0) is n and n.tolist() == [1.0, 0.0, 7.0]
