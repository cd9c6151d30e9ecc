"""F.affine_grid and F.grid_sample: values, gradients (gradcheck, and PyTorch's where installed), errors."""
import numpy as np
import pytest

import jitgrad as jg
import jitgrad.nn.functional as F
from jitgrad.autograd import gradcheck

MODES = [(m, p, a) for m in ("bilinear", "nearest") for p in ("zeros", "border", "reflection") for a in (False, True)]


def rand(*shape, lo=-1.0, hi=1.0, seed=0):
    return np.random.default_rng(seed).uniform(lo, hi, shape)


def test_identity_transform_reproduces_the_input():
    x = jg.tensor(rand(2, 3, 5, 4))
    theta = jg.tensor(np.tile(np.eye(2, 3), (2, 1, 1)))
    for align in (False, True):
        grid = F.affine_grid(theta, (2, 3, 5, 4), align_corners=align)
        np.testing.assert_allclose(F.grid_sample(x, grid, align_corners=align).numpy(), x.numpy(), atol=1e-12)


def test_affine_grid_points():
    theta = jg.tensor([[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]])
    g = F.affine_grid(theta, (1, 1, 2, 3), align_corners=True).numpy()
    np.testing.assert_allclose(g[0, :, :, 0], [[-1, 0, 1], [-1, 0, 1]])
    np.testing.assert_allclose(g[0, :, :, 1], [[-1, -1, -1], [1, 1, 1]])
    g = F.affine_grid(theta, (1, 1, 2, 3), align_corners=False).numpy()
    np.testing.assert_allclose(g[0, 0, :, 0], [-2 / 3, 0, 2 / 3])


def test_padding_modes_outside_the_input():
    x = jg.tensor([[[[1.0, 2.0], [3.0, 4.0]]]])
    grid = jg.tensor([[[[-3.0, -3.0], [3.0, 3.0]]]])
    assert F.grid_sample(x, grid, padding_mode="zeros", align_corners=True).tolist() == [[[[0.0, 0.0]]]]
    assert F.grid_sample(x, grid, padding_mode="border", align_corners=True).tolist() == [[[[1.0, 4.0]]]]
    # reflection about the corners' centres: -3 -> 1 -> the last pixel; 3 -> -1 -> the first one
    assert F.grid_sample(x, grid, padding_mode="reflection", align_corners=True).tolist() == [[[[4.0, 1.0]]]]


def test_spatial_transformer_gradcheck():
    theta = jg.tensor(np.array([[[0.83, 0.21, 0.13], [-0.12, 1.07, 0.04]]]), requires_grad=True)
    x = jg.tensor(rand(1, 2, 4, 5), requires_grad=True)

    def stn(theta, x):
        return F.grid_sample(x, F.affine_grid(theta, (1, 2, 3, 3), align_corners=False), align_corners=False,
                             padding_mode="border")
    assert gradcheck(stn, (theta, x))


def test_nearest_has_no_grid_gradient_and_no_double_backward():
    x = jg.tensor(rand(1, 1, 3, 3), requires_grad=True)
    grid = jg.tensor(rand(1, 2, 2, 2, seed=1), requires_grad=True)
    F.grid_sample(x, grid, mode="nearest", align_corners=False).sum().backward()
    assert grid.grad.abs().sum().item() == 0 and x.grad.sum().item() == 4
    out = F.grid_sample(x, grid, align_corners=False)
    (gx,) = jg.autograd.grad(out.sum(), x, create_graph=True)
    assert out.grad_fn.name() == "GridSampler2DBackward0"


def test_errors_and_the_default_warning():
    x, grid = jg.zeros(1, 1, 3, 3), jg.zeros(1, 2, 2, 2)
    with pytest.warns(UserWarning, match="Default grid_sample and affine_grid behavior has changed to align_corners"):
        F.grid_sample(x, grid)
    with pytest.raises(ValueError, match="expected mode to be 'bilinear', 'nearest' or 'bicubic', but got: 'cubic'"):
        F.grid_sample(x, grid, mode="cubic", align_corners=False)
    with pytest.raises(ValueError, match="expected padding_mode to be 'zeros', 'border', or 'reflection', but got"):
        F.grid_sample(x, grid, padding_mode="wrap", align_corners=False)
    with pytest.raises(RuntimeError, match="expected grid and input to have same batch size"):
        F.grid_sample(jg.zeros(2, 1, 3, 3), grid, align_corners=False)
    with pytest.raises(RuntimeError, match="expected input and grid to have same dtype, but input has float and grid "
                                           "has double"):
        F.grid_sample(x, grid.double(), align_corners=False)
    with pytest.raises(RuntimeError, match="expected grid to have size 2 in last dimension"):
        F.grid_sample(x, jg.zeros(1, 2, 2, 3), align_corners=False)
    with pytest.raises(ValueError, match=r"Expected a batch of 2D affine matrices of shape Nx2x3 for size \[1, 1, 3, 3\]"):
        F.affine_grid(jg.zeros(1, 3, 3), (1, 1, 3, 3), align_corners=False)


@pytest.mark.torch
@pytest.mark.parametrize("mode,padding,align", MODES)
def test_matches_pytorch(mode, padding, align):
    torch = pytest.importorskip("torch")
    x, grid = rand(2, 3, 5, 6), rand(2, 4, 3, 2, lo=-1.6, hi=1.6, seed=1) * (2 if padding == "reflection" else 1)
    g = rand(2, 3, 4, 3, seed=2)
    tx, tgrid = torch.tensor(x, requires_grad=True), torch.tensor(grid, requires_grad=True)
    jx, jgrid = jg.tensor(x, requires_grad=True), jg.tensor(grid, requires_grad=True)
    t_out = torch.nn.functional.grid_sample(tx, tgrid, mode, padding, align)
    j_out = F.grid_sample(jx, jgrid, mode, padding, align)
    np.testing.assert_allclose(j_out.detach().numpy(), t_out.detach().numpy(), rtol=1e-12, atol=1e-12)
    t_out.backward(torch.tensor(g))
    j_out.backward(jg.tensor(g))
    np.testing.assert_allclose(jx.grad.numpy(), tx.grad.numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(jgrid.grad.numpy(), tgrid.grad.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.torch
@pytest.mark.parametrize("size", [(2, 3, 4, 5), (1, 2, 1, 3), (2, 1, 3, 4, 2)])
@pytest.mark.parametrize("align", [False, True])
def test_affine_grid_matches_pytorch(size, align):
    torch = pytest.importorskip("torch")
    theta = rand(size[0], len(size) - 2, len(size) - 1)
    t = torch.tensor(theta, requires_grad=True)
    j = jg.tensor(theta, requires_grad=True)
    t_out = torch.nn.functional.affine_grid(t, size, align_corners=align)
    j_out = F.affine_grid(j, size, align_corners=align)
    np.testing.assert_allclose(j_out.detach().numpy(), t_out.detach().numpy(), atol=1e-14)
    g = rand(*t_out.shape, seed=3)
    t_out.backward(torch.tensor(g))
    j_out.backward(jg.tensor(g))
    np.testing.assert_allclose(j.grad.numpy(), t.grad.numpy(), atol=1e-12)
    assert j_out.grad_fn.name() == t_out.grad_fn.name()
