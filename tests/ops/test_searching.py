"""searchsorted, bucketize, histc, histogram, take_along_dim and dist against NumPy (and PyTorch where installed)."""
import numpy as np
import pytest

import jitgrad as jg
from jitgrad.autograd import gradcheck


def test_searchsorted_and_bucketize():
    s = jg.tensor([1.0, 3.0, 5.0, 7.0, 9.0])
    v = jg.tensor([[3.0, 6.0, 9.0], [0.0, 5.0, 10.0]])
    assert jg.searchsorted(s, v).tolist() == [[1, 3, 4], [0, 2, 5]]
    assert jg.searchsorted(s, v, right=True).tolist() == [[2, 3, 5], [0, 3, 5]]
    assert jg.searchsorted(s, v, side="right").tolist() == [[2, 3, 5], [0, 3, 5]]
    out = jg.searchsorted(s, 4.0)
    assert out.shape == () and out.item() == 2 and out.dtype is jg.int64
    assert jg.searchsorted(s, v, out_int32=True).dtype is jg.int32
    rows = jg.tensor([[1.0, 2.0, 3.0], [10.0, 20.0, 30.0]])
    assert jg.searchsorted(rows, jg.tensor([[2.5], [5.0]])).tolist() == [[2], [0]]
    assert jg.bucketize(v, s).tolist() == jg.searchsorted(s, v).tolist()
    unsorted = jg.tensor([5.0, 1.0, 3.0])
    assert jg.searchsorted(unsorted, jg.tensor([2.0]), sorter=jg.tensor([1, 2, 0])).tolist() == [1]
    with pytest.raises(RuntimeError, match="side and right can't be set to opposites"):
        jg.searchsorted(s, v, right=True, side="left")
    with pytest.raises(RuntimeError, match=r"boundaries tensor must be 1 dimension, but got dim\(2\)"):
        jg.bucketize(v, rows)


def test_histc_and_histogram():
    x = np.random.default_rng(0).normal(size=200)
    np.testing.assert_array_equal(jg.histc(jg.tensor(x), 10).numpy(), np.histogram(x, 10, (x.min(), x.max()))[0])
    np.testing.assert_array_equal(jg.tensor(x).histc(4, -1, 1).numpy(), np.histogram(x, 4, (-1, 1))[0])
    assert jg.histc(jg.tensor([2.0, 2.0]), 4).tolist() == [0.0, 0.0, 2.0, 0.0]  # an empty range widens by 1 each side
    h = jg.histogram(jg.tensor(x), 5, weight=jg.tensor(np.ones(200) * 2))
    want = np.histogram(x, 5, weights=np.ones(200) * 2)
    np.testing.assert_array_equal(h.hist.numpy(), want[0])
    np.testing.assert_allclose(h.bin_edges.numpy(), want[1])
    with pytest.raises(NotImplementedError, match="\"histogram_cpu\" not implemented for 'Long'"):
        jg.histc(jg.tensor([1, 2]))


def test_take_along_dim_and_dist():
    a = np.random.default_rng(1).normal(size=(3, 4))
    idx = np.array([[0, 3], [1, 1], [2, 0]])
    x = jg.tensor(a, requires_grad=True)
    out = jg.take_along_dim(x, jg.tensor(idx), 1)
    np.testing.assert_array_equal(out.detach().numpy(), np.take_along_axis(a, idx, 1))
    assert out.grad_fn.name() == "GatherBackward0"
    np.testing.assert_array_equal(jg.take_along_dim(x, jg.tensor([5, 0])).detach().numpy(), a.reshape(-1)[[5, 0]])
    assert jg.take_along_dim(x, jg.tensor([[0], [1], [2]]), 1).shape == (3, 1)
    b = jg.tensor(a[::-1].copy(), requires_grad=True)
    np.testing.assert_allclose(jg.dist(x, b, 3).item(), (np.abs(a - a[::-1]) ** 3).sum() ** (1 / 3))
    assert gradcheck(lambda u, v: jg.dist(u, v), (x, b))


@pytest.mark.torch
def test_matches_pytorch():
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(2).normal(size=(4, 6))
    s = np.sort(x, -1)
    for right in (False, True):
        assert jg.searchsorted(jg.tensor(s), jg.tensor(x), right=right).tolist() == \
            torch.searchsorted(torch.tensor(s), torch.tensor(x), right=right).tolist()
    for args in ((10,), (7, -1, 1)):
        np.testing.assert_array_equal(jg.histc(jg.tensor(x), *args).numpy(), torch.histc(torch.tensor(x), *args).numpy())
    h, th = jg.histogram(jg.tensor(x), 5, density=True), torch.histogram(torch.tensor(x), 5, density=True)
    np.testing.assert_allclose(h.hist.numpy(), th.hist.numpy())
    idx = np.array([[0], [2], [1], [5]])
    np.testing.assert_array_equal(jg.take_along_dim(jg.tensor(x), jg.tensor(idx), 1).numpy(),
                                  torch.take_along_dim(torch.tensor(x), torch.tensor(idx), 1).numpy())
    assert jg.dist(jg.tensor(x), jg.zeros(6, dtype=jg.float64), 1.5).item() == pytest.approx(
        torch.dist(torch.tensor(x), torch.zeros(6, dtype=torch.float64), 1.5).item(), rel=1e-12)
