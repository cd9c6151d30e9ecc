"""The specialised convolution and pooling paths of kernels/conv.py and kernels/pool.py against the general ones and
NumPy: 2x2/stride-2 max pooling (forward and the window-by-window backward), the im2col columns
that conv2d gives its weight gradient (a workspace output), and the loops of convolutions with small kernels."""
import numpy as np
import pytest

import jitgrad as jg
import jitgrad.nn.functional as F
from jitgrad.autograd import gradcheck, gradgradcheck
from jitgrad.kernels import conv as KC
from jitgrad.kernels import pool as KP
from jitgrad.ops.conv import _np_conv2d, _np_conv2d_weight
from jitgrad.ops.pool import _np_max_pool2d


@pytest.fixture(params=["gemm", "gemm-by-image", "small"])
def conv_path(request, monkeypatch):
    """Run a test through im2col + GEMM (the batch in one block, then one image per block), then
    through the small-kernel loops, whatever its sizes."""
    monkeypatch.setattr(KC, "SMALL_K", 1 << 30 if request.param == "small" else 0)
    if request.param == "gemm-by-image":
        monkeypatch.setattr(KC, "BLOCK_BYTES", 1)
    return request.param


def _general_max_pool(x):
    out = np.empty(x.shape[:2] + (x.shape[2] // 2, x.shape[3] // 2), x.dtype)
    idx = np.empty(out.shape, np.int64)
    KP.kernel("max_pool", x.size)(np.ascontiguousarray(x), 2, 2, 2, 2, 0, 0, 1, 1, out, idx)
    return out, idx


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(2, 3, 4, 6), (1, 2, 5, 7), (3, 1, 9, 8), (1, 1, 2, 2)])
def test_max_pool_2x2_matches_the_general_kernel_and_numpy(shape, dtype):
    rng = np.random.default_rng(0)
    x = rng.integers(-3, 3, shape).astype(dtype)  # ties: the first of the window wins
    x.flat[::7] = np.nan  # a NaN wins
    out, idx = KP.max_pool2d(x, (2, 2), (2, 2), (0, 0), (1, 1), (shape[2] // 2, shape[3] // 2))
    ref_out, ref_idx = _general_max_pool(x)
    np.testing.assert_array_equal(out, ref_out)
    np.testing.assert_array_equal(idx, ref_idx)
    np_out = _np_max_pool2d(np.where(np.isnan(x), np.inf, x), 2)
    np.testing.assert_array_equal(np.isnan(out), np.isinf(np_out))  # a window with a NaN gives NaN
    finite = ~np.isnan(out)
    np.testing.assert_array_equal(out[finite], np_out[finite])


def test_max_pool_2x2_ties_of_signed_zeros_keep_the_first():
    rng = np.random.default_rng(7)
    x = rng.choice(np.array([0.0, -0.0], np.float32), (2, 3, 8, 8))
    out, idx = KP.max_pool2d(x, (2, 2), (2, 2), (0, 0), (1, 1), (4, 4))
    ref_out, ref_idx = _general_max_pool(x)
    np.testing.assert_array_equal(np.signbit(out), np.signbit(ref_out))
    np.testing.assert_array_equal(idx, ref_idx)


@pytest.mark.parametrize("shape", [(2, 3, 4, 6), (1, 2, 5, 7), (3, 1, 9, 8)])
def test_max_pool_2x2_backward_matches_the_scatter(shape):
    rng = np.random.default_rng(1)
    x = rng.standard_normal(shape).astype(np.float32)
    oh, ow = shape[2] // 2, shape[3] // 2
    _, idx = KP.max_pool2d(x, (2, 2), (2, 2), (0, 0), (1, 1), (oh, ow))
    g = rng.standard_normal(shape[:2] + (oh, ow)).astype(np.float32)
    fast = KP.max_pool2d_backward(g, idx, shape[2:], two_by_two=True)
    general = KP.max_pool2d_backward(g, idx, shape[2:])
    np.testing.assert_array_equal(fast, general)
    assert np.count_nonzero(fast) == np.count_nonzero(g)  # odd rows/columns no window covers are zero


def test_max_pool_2x2_through_autograd():
    rng = np.random.default_rng(2)
    x = jg.tensor(rng.standard_normal((2, 3, 5, 6)), requires_grad=True)
    assert gradcheck(lambda t: F.max_pool2d(t, 2), (x,))
    assert gradgradcheck(lambda t: F.max_pool2d(t, 2), (x,))
    y, idx = F.max_pool2d(x, 2, return_indices=True)
    np.testing.assert_array_equal(idx.numpy(), _np_max_pool2d(x.detach().numpy(), 2, return_indices=True)[1])


def test_conv2d_gives_its_columns_for_the_weight_gradient(monkeypatch):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 6, 5)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    g = rng.standard_normal((2, 4, 6, 5)).astype(np.float32)
    geometry = ((1, 1), (1, 1), (1, 1), 1)
    _, cols = KC.conv2d(x, w, None, *geometry, (6, 5))
    np.testing.assert_array_equal(cols, KC.im2col(x, (3, 3), *geometry[:3], (6, 5)))
    fresh = KC.conv2d_weight_grad(x, g, *geometry, (3, 3))
    reused = KC.conv2d_weight_grad(x, g, *geometry, (3, 3), cols)
    np.testing.assert_array_equal(reused, fresh)
    np.testing.assert_allclose(fresh, _np_conv2d_weight(x.astype(np.float64), w.shape, g.astype(np.float64), 1, 1),
                               rtol=1e-4, atol=1e-4)
    monkeypatch.setattr(KC, "BLOCK_BYTES", 1)  # a batch of several blocks: no columns of the whole batch
    assert KC.conv2d(x, w, None, *geometry, (6, 5))[1].size == 0


def test_the_weight_gradient_reads_the_saved_columns(monkeypatch):
    """The conv2d node saves its columns (the workspace output) only where the weight takes a gradient; the fused
    weight gradient reads them (no im2col in backward); create_graph runs the formula (conv2d_weight)."""
    built = []
    im2col = KC.im2col
    monkeypatch.setattr(KC, "im2col", lambda *a, **k: built.append(1) or im2col(*a, **k))
    rng = np.random.default_rng(8)
    x = jg.tensor(rng.standard_normal((2, 3, 6, 5)), requires_grad=True)
    w = jg.tensor(rng.standard_normal((4, 3, 3, 3)), requires_grad=True)
    y = F.conv2d(x, w, padding=1)
    assert tuple(y.grad_fn._saved_columns.shape) == (27, 60) and not y.grad_fn._saved_columns.requires_grad
    assert "columns" not in F.conv2d(x, w.detach(), padding=1).grad_fn.saved
    del built[:]
    y.backward(jg.ones_like(y), retain_graph=True)
    assert not built
    ref = _np_conv2d_weight(x.detach().numpy(), (4, 3, 3, 3), np.ones(tuple(y.shape)), 1, 1)
    np.testing.assert_allclose(w.grad.numpy(), ref, rtol=1e-10, atol=1e-10)
    (gw,) = jg.autograd.grad(y, w, jg.ones_like(y), create_graph=True)
    assert built and gw.requires_grad
    np.testing.assert_allclose(gw.detach().numpy(), ref, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("kw", [{"padding": 1}, {"stride": 2, "padding": (0, 1)}, {"dilation": 2},
                                {"groups": 2, "padding": 1}])
def test_conv2d_gradients_with_saved_columns(kw, conv_path):
    rng = np.random.default_rng(4)
    x = jg.tensor(rng.standard_normal((2, 4, 7, 6)), requires_grad=True)
    w = jg.tensor(rng.standard_normal((4, 4 // kw.get("groups", 1), 3, 3)), requires_grad=True)
    b = jg.tensor(rng.standard_normal(4), requires_grad=True)
    y = F.conv2d(x, w, b, **kw)
    g = rng.standard_normal(tuple(y.shape))
    y.backward(jg.tensor(g))
    ref = _np_conv2d_weight(x.detach().numpy(), tuple(w.shape), g, kw.get("stride", 1), kw.get("padding", 0),
                            kw.get("dilation", 1), kw.get("groups", 1))
    np.testing.assert_allclose(w.grad.numpy(), ref, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(y.detach().numpy(), _np_conv2d(x.detach().numpy(), w.detach().numpy(),
                                                              b.detach().numpy(), **kw), rtol=1e-10, atol=1e-10)
    # a second backward of a retained graph, and double backward, build the columns again
    w.grad = None
    y = F.conv2d(x, w, b, **kw)
    y.backward(jg.tensor(g), retain_graph=True)
    first = w.grad.numpy().copy()
    y.backward(jg.tensor(g))
    np.testing.assert_allclose(w.grad.numpy(), 2 * first, rtol=1e-12)
    assert gradgradcheck(lambda x, w: F.conv2d(x, w, None, **kw), (x, w))


def test_im2col_and_col2im_over_random_geometries(conv_path):
    """conv2d (im2col) and its input gradient (col2im) against NumPy, for kernels that hang over
    the padding on either side, strides that skip columns, dilations and padding wider than the kernel."""
    rng = np.random.default_rng(5)
    for _ in range(40):
        k = tuple(rng.integers(1, 4, 2))
        s, d, p = tuple(rng.integers(1, 4, 2)), tuple(rng.integers(1, 3, 2)), tuple(rng.integers(0, 4, 2))
        hw = tuple(int(max(n, (kk - 1) * dd + 1 - 2 * pp)) for n, kk, dd, pp in zip(rng.integers(1, 8, 2), k, d, p))
        x = rng.standard_normal((2, 2) + hw)
        w = rng.standard_normal((3, 2) + k)
        out = F.conv2d(jg.tensor(x), jg.tensor(w), None, s, p, d).numpy()
        np.testing.assert_allclose(out, _np_conv2d(x, w, None, s, p, d), rtol=1e-12, atol=1e-12)
        # col2im: <conv2d(x, w), g> = <x, conv_transpose2d(g, w)> for the same geometry
        g = rng.standard_normal(out.shape)
        op = tuple(n + 2 * pp - (o - 1) * ss - dd * (kk - 1) - 1 for n, pp, o, ss, dd, kk in zip(hw, p, out.shape[2:], s, d, k))
        gx = F.conv_transpose2d(jg.tensor(g), jg.tensor(w), None, s, p, op, 1, d).numpy()
        assert gx.shape == x.shape
        np.testing.assert_allclose((out * g).sum(), (x * gx).sum(), rtol=1e-10)


@pytest.mark.parametrize("band", [None, 2])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kw", [{"padding": 1}, {"stride": 2}, {"padding": (2, 0), "dilation": (2, 1)}, {"groups": 2}])
def test_small_kernels_match_the_gemm_path(kw, dtype, band, monkeypatch):
    """A first layer's convolution (2 input channels per group, 3x3) by the loops (each image in one
    task, or in bands of 2 output rows) and by im2col + GEMM."""
    if band is not None:
        monkeypatch.setattr(KC, "_band", lambda out_hw: band)
    rng = np.random.default_rng(6)
    C = 2 * kw.get("groups", 1)
    x = rng.standard_normal((5, C, 9, 8)).astype(dtype)
    w = rng.standard_normal((4, 2, 3, 3)).astype(dtype)
    b = rng.standard_normal(4).astype(dtype)
    s, p, d = (np.broadcast_to(kw.get(n, v), 2) for n, v in (("stride", 1), ("padding", 0), ("dilation", 1)))
    out_hw = tuple((n + 2 * pp - dd * 2 - 1) // ss + 1 for n, pp, dd, ss in zip((9, 8), p, d, s))
    geometry = (tuple(map(int, s)), tuple(map(int, p)), tuple(map(int, d)), kw.get("groups", 1))
    assert KC._small(w)
    small, cols = KC.conv2d(x, w, b, *geometry, out_hw)
    assert cols.size == 0  # the loops build no columns
    g = rng.standard_normal(small.shape).astype(dtype)
    small_gw = KC.conv2d_weight_grad(x, g, *geometry, (3, 3), cols)
    monkeypatch.setattr(KC, "SMALL_K", 0)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(small, KC.conv2d(x, w, b, *geometry, out_hw)[0], rtol=tol, atol=tol)
    np.testing.assert_allclose(small_gw, KC.conv2d_weight_grad(x, g, *geometry, (3, 3)), rtol=tol, atol=10 * tol)
    np.testing.assert_allclose(small, _np_conv2d(x.astype(np.float64), w.astype(np.float64), b.astype(np.float64),
                                                 **kw), rtol=10 * tol, atol=10 * tol)
