"""nn.utils.parametrize, nn.utils.parametrizations (orthogonal, spectral_norm, weight_norm) and the hook-based
nn.utils.weight_norm / spectral_norm: PyTorch's layout, values, gradients and errors."""
import copy
import io
import warnings

import numpy as np
import pytest

import jitgrad as jg
from jitgrad import nn
from jitgrad.autograd import gradcheck
from jitgrad.nn.utils import parametrizations as PZ
from jitgrad.nn.utils import parametrize as P


class Symmetric(nn.Module):
    def forward(self, X):
        return X.triu() + X.triu(1).mT

    def right_inverse(self, A):
        return A.triu()


class Double(nn.Module):
    def forward(self, X):
        return 2 * X

    def right_inverse(self, Y):
        return Y / 2


class Shrink(nn.Module):
    def forward(self, X):
        return X[:-1]


class Split(nn.Module):
    """weight = a + b, from two originals."""

    def forward(self, a, b):
        return a + b

    def right_inverse(self, w):
        return w * 0.25, w * 0.75


def host(t):
    return t.detach().numpy()


# ---------------------------------------------------------------- parametrize
def test_register_layout_and_values():
    m = nn.Linear(3, 3)
    w0 = host(m.weight).copy()
    P.register_parametrization(m, "weight", Symmetric())
    assert type(m).__name__ == "ParametrizedLinear" and P.type_before_parametrizations(m) is nn.Linear
    assert isinstance(m, nn.Linear) and P.is_parametrized(m) and P.is_parametrized(m, "weight")
    assert not P.is_parametrized(m, "bias")
    assert list(m.state_dict()) == ["bias", "parametrizations.weight.original"]
    assert [n for n, _ in m.named_parameters()] == ["bias", "parametrizations.weight.original"]
    w = host(m.weight)
    np.testing.assert_allclose(w, w.T)
    np.testing.assert_allclose(np.triu(w), np.triu(w0), rtol=1e-6)  # right_inverse kept the upper triangle
    assert isinstance(m.parametrizations.weight.original, nn.Parameter)
    m(jg.ones(2, 3)).sum().backward()
    assert m.parametrizations.weight.original.grad is not None
    np.testing.assert_array_equal(np.tril(host(m.parametrizations.weight.original.grad), -1), 0)


def test_assignment_runs_right_inverse_and_chains_apply_in_order():
    m = nn.Linear(3, 3)
    P.register_parametrization(m, "weight", Symmetric())
    P.register_parametrization(m, "weight", Double())
    assert len(m.parametrizations.weight) == 2
    a = np.arange(9.0, dtype=np.float32).reshape(3, 3)
    a = a + a.T
    m.weight = jg.tensor(a)
    np.testing.assert_allclose(host(m.weight), a, rtol=1e-6)
    np.testing.assert_allclose(host(m.parametrizations.weight.original), np.triu(a) / 2, rtol=1e-6)


def test_cached_computes_once_per_block():
    m = nn.Linear(3, 3)
    P.register_parametrization(m, "weight", Symmetric())
    assert m.weight is not m.weight
    with P.cached():
        w = m.weight
        assert m.weight is w
        with P.cached():
            assert m.weight is w
    assert m.weight is not w


def test_remove_parametrizations():
    m = nn.Linear(3, 3)
    P.register_parametrization(m, "weight", Double())
    original = host(m.parametrizations.weight.original).copy()
    P.remove_parametrizations(m, "weight")
    assert type(m) is nn.Linear and not hasattr(m, "parametrizations")
    assert isinstance(m.weight, nn.Parameter) and list(m.state_dict()) == ["bias", "weight"]
    np.testing.assert_allclose(host(m.weight), 2 * original)
    m2 = nn.Linear(3, 3)
    P.register_parametrization(m2, "weight", Double())
    original = host(m2.parametrizations.weight.original).copy()
    P.remove_parametrizations(m2, "weight", leave_parametrized=False)
    np.testing.assert_allclose(host(m2.weight), original)
    with pytest.raises(ValueError, match="does not have a parametrization on weight"):
        P.remove_parametrizations(m2, "weight")


def test_several_originals():
    m = nn.Linear(2, 2)
    w = host(m.weight).copy()
    P.register_parametrization(m, "weight", Split())
    assert list(m.state_dict()) == ["bias", "parametrizations.weight.original0", "parametrizations.weight.original1"]
    np.testing.assert_allclose(host(m.weight), w, rtol=1e-6)
    with pytest.raises(ValueError, match="Cannot leave unparametrized"):
        P.remove_parametrizations(m, "weight", leave_parametrized=False)
    P.remove_parametrizations(m, "weight")
    np.testing.assert_allclose(host(m.weight), w, rtol=1e-6)


def test_errors():
    m = nn.Linear(3, 4)
    with pytest.raises(ValueError, match="may not change the shape of the tensor, unless `unsafe` flag is enabled"):
        P.register_parametrization(m, "weight", Shrink())
    assert not P.is_parametrized(m)
    P.register_parametrization(m, "weight", Shrink(), unsafe=True)
    assert m.weight.shape == (3, 3)
    with pytest.raises(ValueError, match="does not have a parameter, a buffer, or a parametrized element with name"):
        P.register_parametrization(nn.Linear(2, 2), "nope", Double())
    m = nn.Linear(3, 3)
    P.register_parametrization(m, "weight", Shrink(), unsafe=True)
    with pytest.raises(RuntimeError, match="parametrization Shrink does not implement right_inverse"):
        m.weight = jg.zeros(2, 3)


def test_buffers_deepcopy_and_saving():
    m = nn.BatchNorm1d(3)
    P.register_parametrization(m, "running_var", Double())
    assert "parametrizations.running_var.original" in m.state_dict()
    m = nn.Linear(3, 3)
    P.register_parametrization(m, "weight", Double())
    c = copy.deepcopy(m)
    assert type(c) is type(m) and c.weight.shape == (3, 3)
    np.testing.assert_array_equal(host(c.weight), host(m.weight))
    with pytest.raises(RuntimeError, match="Serialization of parametrized modules is only supported through state_dict"):
        jg.save(m, io.BytesIO())
    buf = io.BytesIO()
    jg.save(m.state_dict(), buf)
    buf.seek(0)
    fresh = nn.Linear(3, 3)
    P.register_parametrization(fresh, "weight", Double())
    fresh.load_state_dict(jg.load(buf))
    np.testing.assert_array_equal(host(fresh.weight), host(m.weight))


def test_transfer_parametrizations_and_params():
    a = nn.Linear(3, 3)
    P.register_parametrization(a, "weight", Double())
    b = P.transfer_parametrizations_and_params(a, nn.Linear(3, 3))
    assert b.parametrizations.weight.original is a.parametrizations.weight.original
    np.testing.assert_array_equal(host(b.weight), host(a.weight))


# ---------------------------------------------------------------- orthogonal
@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5), (2, 3, 3)])
@pytest.mark.parametrize("kind", ["matrix_exp", "cayley", "householder"])
def test_orthogonal_maps(shape, kind):
    jg.manual_seed(0)
    m = nn.Module()
    m.weight = nn.Parameter(jg.randn(*shape, dtype=jg.float64))
    PZ.orthogonal(m, orthogonal_map=kind)
    q = host(m.weight)
    small = min(shape[-2:])
    gram = q @ np.swapaxes(q, -1, -2) if shape[-2] < shape[-1] else np.swapaxes(q, -1, -2) @ q
    np.testing.assert_allclose(gram, np.broadcast_to(np.eye(small), gram.shape), atol=1e-12)
    # training moves the weight and keeps it orthogonal
    opt = jg.optim.SGD(m.parameters(), lr=0.1)
    target = jg.randn(*shape, dtype=jg.float64)
    for _ in range(3):
        opt.zero_grad()
        (m.weight * target).sum().backward()
        opt.step()
    q2 = host(m.weight)
    assert np.abs(q2 - q).max() > 1e-3
    gram = q2 @ np.swapaxes(q2, -1, -2) if shape[-2] < shape[-1] else np.swapaxes(q2, -1, -2) @ q2
    np.testing.assert_allclose(gram, np.broadcast_to(np.eye(small), gram.shape), atol=1e-10)


@pytest.mark.parametrize("kind", ["matrix_exp", "cayley", "householder"])
def test_orthogonal_maps_gradcheck(kind):
    jg.manual_seed(1)
    orth = PZ._Orthogonal(jg.zeros(3, 3), getattr(PZ._OrthMaps, kind), use_trivialization=False)
    x = jg.randn(3, 3, dtype=jg.float64, requires_grad=True)
    assert gradcheck(orth, (x,))


def test_orthogonal_without_trivialization_and_errors():
    m = nn.Linear(3, 5, dtype=jg.float64)
    w = host(m.weight).copy()
    PZ.orthogonal(m, orthogonal_map="householder", use_trivialization=False)
    q = host(m.weight)
    np.testing.assert_allclose(q.T @ q, np.eye(3), atol=1e-12)
    # the weight's column space is kept: Q spans the columns of the initial weight
    np.testing.assert_allclose(q @ (q.T @ w), w, atol=1e-10)
    with pytest.raises(ValueError, match="Expected a matrix or batch of matrices. Got a tensor of 1 dimensions."):
        PZ.orthogonal(nn.Linear(2, 2), "bias")
    with pytest.raises(ValueError, match='orthogonal_map has to be one of "matrix_exp", "cayley", "householder"'):
        PZ.orthogonal(nn.Linear(2, 2), orthogonal_map="qr")
    with pytest.raises(ValueError, match="has no parameter or buffer with name 'w'"):
        PZ.orthogonal(nn.Linear(2, 2), "w")
    m = nn.Linear(3, 3)
    PZ.orthogonal(m, use_trivialization=False)
    with pytest.raises(NotImplementedError, match="not possible to assign to the matrix exponential"):
        m.weight = jg.eye(3)


# ---------------------------------------------------------------- weight norm
@pytest.mark.parametrize("dim", [0, 1, None, -1])
def test_weight_norm_parametrization(dim):
    m = nn.Conv2d(2, 3, 3, dtype=jg.float64) if dim != -1 else nn.Linear(3, 4, dtype=jg.float64)
    w = host(m.weight).copy()
    PZ.weight_norm(m, dim=dim)
    g = host(m.parametrizations.weight.original0)
    whole = dim in (None, -1)  # PyTorch's norm_except_dim: -1 is the norm of the whole tensor
    axes = None if whole else tuple(d for d in range(w.ndim) if d != dim)
    np.testing.assert_allclose(g, np.sqrt((w * w).sum(axis=axes, keepdims=not whole)))
    np.testing.assert_allclose(host(m.weight), w, rtol=1e-12)
    v = m.parametrizations.weight.original1.detach().requires_grad_()
    gg = m.parametrizations.weight.original0.detach().requires_grad_()
    assert gradcheck(lambda v, g: PZ._weight_norm(v, g, -1 if dim is None else dim), (v, gg))


def test_weight_norm_hooks():
    m = nn.Linear(3, 4)
    with pytest.warns(FutureWarning, match="`torch.nn.utils.weight_norm` is deprecated in favor of"):
        nn.utils.weight_norm(m)
    assert list(m.state_dict()) == ["bias", "weight_g", "weight_v"]
    assert m.weight_g.shape == (4, 1)
    m.weight_g.data = jg.full((4, 1), 2.0)
    m(jg.ones(1, 3)).sum().backward()  # the pre-hook recomputes weight from g and v
    np.testing.assert_allclose(np.linalg.norm(host(m.weight), axis=1), 2.0, rtol=1e-6)
    assert m.weight_g.grad is not None and m.weight_v.grad is not None
    with pytest.raises(RuntimeError, match="Cannot register two weight_norm hooks on the same parameter weight"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            nn.utils.weight_norm(m)
    nn.utils.remove_weight_norm(m)
    assert list(m.state_dict()) == ["bias", "weight"] and isinstance(m.weight, nn.Parameter)
    np.testing.assert_allclose(np.linalg.norm(host(m.weight), axis=1), 2.0, rtol=1e-6)
    with pytest.raises(ValueError, match="weight_norm of 'weight' not found in Linear"):
        nn.utils.remove_weight_norm(m)


# ---------------------------------------------------------------- spectral norm
def test_spectral_norm_parametrization():
    jg.manual_seed(0)
    m = nn.Linear(6, 5, dtype=jg.float64)
    sigma = np.linalg.svd(host(m.weight), compute_uv=False)[0]
    w = host(m.weight).copy()
    PZ.spectral_norm(m)
    assert list(m.state_dict()) == ["bias", "parametrizations.weight.original", "parametrizations.weight.0._u",
                                    "parametrizations.weight.0._v"]
    for _ in range(30):  # power iterations, one per access in training mode
        out = host(m.weight)
    np.testing.assert_allclose(out, w / sigma, rtol=1e-6)
    u = host(m.parametrizations.weight[0]._u).copy()
    m.eval()
    _ = m.weight
    np.testing.assert_array_equal(host(m.parametrizations.weight[0]._u), u)  # no iteration in eval mode
    with pytest.raises(ValueError, match="Expected n_power_iterations to be positive"):
        PZ.spectral_norm(nn.Linear(2, 2), n_power_iterations=0)
    with pytest.raises(IndexError, match=r"Dimension out of range \(expected to be in range of \[-2, 1\] but got 2\)"):
        PZ.spectral_norm(nn.Linear(2, 2), dim=2)
    t = nn.ConvTranspose2d(2, 3, 2)
    PZ.spectral_norm(t)
    assert t.parametrizations.weight[0].dim == 1
    b = nn.Linear(2, 3)
    PZ.spectral_norm(b, "bias")  # 1-D: normalized
    np.testing.assert_allclose(np.linalg.norm(host(b.bias)), 1.0, rtol=1e-6)


def test_spectral_norm_hooks():
    jg.manual_seed(0)
    m = nn.Linear(6, 5, dtype=jg.float64)
    sigma = np.linalg.svd(host(m.weight), compute_uv=False)[0]
    w = host(m.weight).copy()
    nn.utils.spectral_norm(m)
    assert list(m.state_dict()) == ["bias", "weight_orig", "weight_u", "weight_v"]
    for _ in range(30):
        m(jg.ones(1, 6, dtype=jg.float64))
    np.testing.assert_allclose(host(m.weight), w / sigma, rtol=1e-6)
    m(jg.ones(1, 6, dtype=jg.float64)).sum().backward()
    assert m.weight_orig.grad is not None
    with pytest.raises(RuntimeError, match="Cannot register two spectral_norm hooks on the same parameter weight"):
        nn.utils.spectral_norm(m)
    nn.utils.remove_spectral_norm(m)
    assert list(m.state_dict()) == ["bias", "weight"]
    with pytest.raises(ValueError, match="spectral_norm of 'weight' not found in"):
        nn.utils.remove_spectral_norm(m)


# ---------------------------------------------------------------- against PyTorch
@pytest.mark.torch
@pytest.mark.parametrize("kind", ["matrix_exp", "cayley"])
def test_orthogonal_matches_pytorch(kind):
    torch = pytest.importorskip("torch")
    w = np.random.default_rng(0).normal(size=(4, 4))
    tm, jm = torch.nn.Linear(4, 4, dtype=torch.float64), nn.Linear(4, 4, dtype=jg.float64)
    with torch.no_grad():
        tm.weight.copy_(torch.tensor(w))
    jm.weight.data = jg.tensor(w)
    torch.nn.utils.parametrizations.orthogonal(tm, orthogonal_map=kind)
    PZ.orthogonal(jm, orthogonal_map=kind)
    np.testing.assert_allclose(host(jm.weight), tm.weight.detach().numpy(), atol=1e-12)
    # a step of the original moves both the same way
    x = np.random.default_rng(1).normal(size=(4, 4))
    (tm.weight * torch.tensor(x)).sum().backward()
    (jm.weight * jg.tensor(x)).sum().backward()
    np.testing.assert_allclose(host(jm.parametrizations.weight.original.grad),
                               tm.parametrizations.weight.original.grad.numpy(), atol=1e-10)


@pytest.mark.torch
def test_weight_and_spectral_norm_match_pytorch():
    torch = pytest.importorskip("torch")
    w = np.random.default_rng(0).normal(size=(5, 4))
    tm, jm = torch.nn.Linear(4, 5, dtype=torch.float64), nn.Linear(4, 5, dtype=jg.float64)
    with torch.no_grad():
        tm.weight.copy_(torch.tensor(w))
    jm.weight.data = jg.tensor(w)
    torch.nn.utils.parametrizations.weight_norm(tm, dim=1)
    PZ.weight_norm(jm, dim=1)
    for k in ("original0", "original1"):
        np.testing.assert_allclose(host(getattr(jm.parametrizations.weight, k)),
                                   getattr(tm.parametrizations.weight, k).detach().numpy())
    # spectral norm from the same u, v
    ts, js = torch.nn.Linear(4, 5, dtype=torch.float64), nn.Linear(4, 5, dtype=jg.float64)
    with torch.no_grad():
        ts.weight.copy_(torch.tensor(w))
    js.weight.data = jg.tensor(w)
    torch.nn.utils.parametrizations.spectral_norm(ts)
    PZ.spectral_norm(js)
    js.parametrizations.weight[0]._u.data = jg.tensor(ts.parametrizations.weight[0]._u.numpy())
    js.parametrizations.weight[0]._v.data = jg.tensor(ts.parametrizations.weight[0]._v.numpy())
    for _ in range(2):
        np.testing.assert_allclose(host(js.weight), ts.weight.detach().numpy(), rtol=1e-12)
