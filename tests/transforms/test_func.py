"""jitgrad.func: the transforms' values against loops and central finite differences (no torch), their
composition, PyTorch's errors, and tutorial-style programs (per-sample gradients, Jacobians and Hessians,
a neural tangent kernel, model ensembling, forward-mode JVPs) against torch.func's numbers."""
import numpy as np
import pytest

import jitgrad as jg
import jitgrad.nn as nn
from jitgrad import func as F

RNG = np.random.default_rng(31)


def T(a):
    return jg.tensor(np.asarray(a, dtype=np.float64))


def fd_jacobian(f, x, eps=1e-6):
    """Central finite differences of f (NumPy in, NumPy out) at x: (*out_shape, *x_shape)."""
    x = np.asarray(x, dtype=np.float64)
    cols = []
    for i in range(x.size):
        d = np.zeros(x.size)
        d[i] = eps
        d = d.reshape(x.shape)
        cols.append((f(x + d) - f(x - d)) / (2 * eps))
    return np.moveaxis(np.array(cols), 0, -1).reshape(np.shape(f(x)) + x.shape)


def mlp(sizes, seed=0):
    jg.manual_seed(seed)
    layers = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        layers += [nn.Linear(a, b, dtype=jg.float64), nn.Tanh()]
    return nn.Sequential(*layers[:-1])


def _loss(model):
    def loss(params, x, y):
        out = F.functional_call(model, params, (x.unsqueeze(0),))
        return nn.functional.cross_entropy(out, y.unsqueeze(0))
    return loss


# ------------------------------------------------------------------ vmap
def test_vmap_in_dims_out_dims_and_nesting_match_loops():
    x, w = RNG.standard_normal((4, 3)), RNG.standard_normal((3, 2))
    got = jg.vmap(lambda a, b: (a @ b).tanh(), in_dims=(0, None))(T(x), T(w))
    np.testing.assert_allclose(got.numpy(), np.tanh(x @ w), rtol=1e-12)
    got = jg.vmap(lambda a: a.sum(0), in_dims=1, out_dims=0)(T(x))  # each column's sum
    np.testing.assert_allclose(got.numpy(), x.sum(0), rtol=1e-12)
    m = RNG.standard_normal((2, 5, 3))
    got = jg.vmap(jg.vmap(lambda a, b: (a * b).sum(), in_dims=(0, None)), in_dims=(0, None))(T(m), T(x[0]))
    np.testing.assert_allclose(got.numpy(), (m * x[0]).sum(-1), rtol=1e-12)
    outer = F.vmap(F.vmap(lambda a, b: a * b, in_dims=(None, 0)), in_dims=(0, None))(T(x[:, 0]), T(x[0]))
    np.testing.assert_allclose(outer.numpy(), np.outer(x[:, 0], x[0]), rtol=1e-12)
    got = jg.vmap(lambda d: {"s": d["a"].sin(), "c": d["b"].cos()}, out_dims={"s": 1, "c": 0})(
        {"a": T(m), "b": T(m[:, 0])})
    np.testing.assert_allclose(got["s"].numpy(), np.moveaxis(np.sin(m), 0, 1), rtol=1e-12)
    chunked = jg.vmap(lambda a: a.exp().sum(), chunk_size=3)(T(RNG.standard_normal((7, 2))))
    assert tuple(chunked.shape) == (7,)


def test_vmap_errors_are_pytorch_s():
    x = T(RNG.standard_normal((3, 2)))
    with pytest.raises(RuntimeError, match=r"^vmap: It looks like you're calling \.item\(\) on a Tensor"):
        jg.vmap(lambda a: a.sum().item())(x)
    with pytest.raises(RuntimeError, match="data-dependent control flow"):
        jg.vmap(lambda a: a if a.sum() > 0 else -a)(x)
    with pytest.raises(ValueError, match=r"Expected all tensors to have the same size in the mapped dimension, got "
                                         r"sizes \[3, 4\] for the mapped dimension"):
        jg.vmap(lambda a, b: a)(x, jg.ones(4))
    with pytest.raises(ValueError, match="in_dims is not compatible with the structure of `inputs`"):
        jg.vmap(lambda a, b: a, in_dims=(0, 0, 0))(x, x)
    with pytest.raises(ValueError, match=r"Got in_dim=2 for some input, but that input is a Tensor of "
                                         r"dimensionality 2 so expected in_dim to satisfy -2 <= in_dim < 2\."):
        jg.vmap(lambda a: a, in_dims=2)(x)
    with pytest.raises(ValueError, match="We cannot vmap over non-Tensor arguments"):
        jg.vmap(lambda a, n: a, in_dims=(0, 0))(x, 3)
    with pytest.raises(ValueError, match="got no inputs"):
        jg.vmap(lambda: 1)()
    with pytest.raises(ValueError, match="must only return Tensors, got type <class 'int'>"):
        jg.vmap(lambda a: 1)(x)
    with pytest.raises(ValueError, match="can not return a BatchedTensor when out_dim is None"):
        jg.vmap(lambda a: a, out_dims=None)(x)
    with pytest.raises(RuntimeError, match="Only allowed values for randomness are 'error', 'different', or 'same'"):
        jg.vmap(lambda a: a, randomness="sometimes")


def test_vmap_randomness_modes():
    x = jg.zeros(4, 3)
    with pytest.raises(RuntimeError, match="^vmap: called random operation while in randomness error mode"):
        jg.vmap(lambda a: jg.bernoulli(a + 0.5))(x)
    same = jg.vmap(lambda a: a.uniform_(), randomness="same")(x.clone()).numpy()
    y = jg.zeros(3)
    with pytest.raises(RuntimeError, match="^vmap: inplace arithmetic"):
        jg.vmap(lambda a: y.add_(a))(x)
    np.testing.assert_array_equal(jg.vmap(lambda a: a.clone().add_(y + 1))(x).numpy(), np.ones((4, 3)))
    assert np.all(same == same[0])
    diff = jg.vmap(lambda a: a.uniform_(), randomness="different")(x.clone()).numpy()
    assert len({tuple(r) for r in diff}) == 4
    coin = jg.vmap(lambda a: jg.bernoulli(a + 0.5), randomness="different")(jg.zeros(64, 50)).numpy()
    assert set(np.unique(coin)) <= {0.0, 1.0} and len({tuple(r) for r in coin}) > 1
    with pytest.raises(RuntimeError, match="Cannot ask for same randomness with a batched tensor input"):
        jg.vmap(lambda a: jg.bernoulli(a + 0.5), randomness="same")(x)


def test_indexing_with_batched_indices_gathers_each_sample():
    x = T(RNG.standard_normal((4, 5)))
    idx = jg.tensor([[0, 4], [1, 1], [3, 2], [4, 0]])
    got = jg.vmap(lambda a, i: a[i])(x, idx)
    np.testing.assert_array_equal(got.numpy(), np.take_along_axis(x.numpy(), idx.numpy(), 1))
    got = jg.vmap(lambda i: x[i], in_dims=0)(jg.tensor([2, 0, 1]))
    np.testing.assert_array_equal(got.numpy(), x.numpy()[[2, 0, 1]])


# ------------------------------------------------------------------ grad, vjp, jvp, jacobians
def f3(x):
    return (x.sin() * x.sum()).tanh()


def test_grad_vjp_jvp_jacobians_against_finite_differences():
    x = RNG.standard_normal(4)
    fn = lambda a: np.tanh(np.sin(a) * a.sum())  # noqa: E731
    J = fd_jacobian(fn, x)
    np.testing.assert_allclose(F.jacrev(f3)(T(x)).numpy(), J, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(F.jacfwd(f3)(T(x)).numpy(), J, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(F.jacrev(f3, chunk_size=3)(T(x)).numpy(), J, rtol=1e-6, atol=1e-8)
    v = RNG.standard_normal(4)
    out, vjp_fn = F.vjp(f3, T(x))
    np.testing.assert_allclose(vjp_fn(T(v))[0].numpy(), v @ J, rtol=1e-6, atol=1e-8)
    primal, tangent = F.jvp(f3, (T(x),), (T(v),))
    np.testing.assert_allclose(tangent.numpy(), J @ v, rtol=1e-6, atol=1e-8)
    _, jvp_fn = F.linearize(f3, T(x))
    np.testing.assert_allclose(jvp_fn(T(v)).numpy(), J @ v, rtol=1e-6, atol=1e-8)
    g, value = F.grad_and_value(lambda a: f3(a).sum())(T(x))
    np.testing.assert_allclose(g.numpy(), J.sum(0), rtol=1e-6, atol=1e-8)
    assert not value.requires_grad and not g.requires_grad
    (ga, gb), aux = F.grad(lambda a, b: ((a * b).sum(), a.shape), argnums=(0, 1), has_aux=True)(T(x), T(v))
    np.testing.assert_allclose(ga.numpy(), v)
    np.testing.assert_allclose(gb.numpy(), x)
    assert tuple(aux) == (4,)


def test_hessians_forward_over_reverse_and_reverse_over_reverse():
    A = RNG.standard_normal((5, 3))
    x = RNG.standard_normal(3)
    f = lambda a: ((T(A) @ a).tanh() ** 2).sum() + 0.5 * (a * a).sum()  # noqa: E731
    g = lambda a: 2 * A.T @ (np.tanh(A @ a) * (1 - np.tanh(A @ a) ** 2)) + a  # noqa: E731
    H = fd_jacobian(g, x)
    np.testing.assert_allclose(F.hessian(f)(T(x)).numpy(), H, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(F.jacrev(F.jacrev(f))(T(x)).numpy(), H, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(jg.autograd.functional.hessian(f, T(x)).numpy(), H, rtol=1e-6, atol=1e-8)
    d2 = F.grad(F.grad(lambda a: a.sin() * a))(T(0.7))
    np.testing.assert_allclose(float(d2), 2 * np.cos(0.7) - 0.7 * np.sin(0.7), rtol=1e-12)


def test_transform_errors_are_pytorch_s():
    x = T(RNG.standard_normal(3))
    with pytest.raises(RuntimeError, match=r"Expected f\(\*args\) to return a scalar Tensor, got tensor with 1 dims"):
        F.grad(lambda a: a * 2)(x)
    with pytest.raises(RuntimeError, match="Got argnum=2, but only 1 positional inputs"):
        F.grad(lambda a: a.sum(), argnums=2)(x)
    with pytest.raises(RuntimeError, match="argnums elements must be unique"):
        F.grad(lambda a, b: a.sum(), argnums=(0, 0))(x, x)
    with pytest.raises(RuntimeError, match="output of function f should be a tuple: \\(output, aux\\)"):
        F.grad(lambda a: a.sum(), has_aux=True)(x)
    with pytest.raises(RuntimeError, match="Expected primals to be a tuple"):
        F.jvp(lambda a: a, x, x)
    _, fn = F.vjp(lambda a: a * 2, x)
    with pytest.raises(RuntimeError, match="Mismatch in shape"):
        fn(jg.ones(4, dtype=jg.float64))


# ------------------------------------------------------------------ tutorial-style programs
def test_per_sample_gradients_of_an_mlp():
    model = mlp([6, 8, 3])
    params = {k: v.detach() for k, v in model.named_parameters()}
    x, y = T(RNG.standard_normal((5, 6))), jg.tensor([0, 2, 1, 1, 0])
    loss = _loss(model)
    per_sample = F.vmap(F.grad(loss), in_dims=(None, 0, 0))(params, x, y)
    for i in range(5):
        one = F.grad(loss)(params, x[i], y[i])
        for k in params:
            assert tuple(per_sample[k].shape) == (5,) + tuple(params[k].shape)
            np.testing.assert_allclose(per_sample[k][i].numpy(), one[k].numpy(), rtol=1e-10, atol=1e-12)
    # ... and the loop with autograd alone
    model.zero_grad()
    nn.functional.cross_entropy(model(x[3:4]), y[3:4]).backward()
    for k, p in model.named_parameters():
        np.testing.assert_allclose(per_sample[k][3].numpy(), p.grad.numpy(), rtol=1e-10, atol=1e-12)


def _ntk(model, x1, x2):
    params = {k: v.detach() for k, v in model.named_parameters()}

    def f(p, x):
        return F.functional_call(model, p, (x.unsqueeze(0),)).squeeze(0)
    j1 = F.vmap(F.jacrev(f), (None, 0))(params, x1)
    j2 = F.vmap(F.jacrev(f), (None, 0))(params, x2)
    total = 0
    for k in params:
        a, b = j1[k].flatten(2), j2[k].flatten(2)  # (N, O, P)
        total = total + (a.unsqueeze(1).unsqueeze(3) * b.unsqueeze(0).unsqueeze(2)).sum(-1)  # (N1, N2, O, O)
    return total


def test_neural_tangent_kernel_against_per_sample_jacobians():
    model = mlp([3, 5, 2], seed=1)
    x1, x2 = T(RNG.standard_normal((3, 3))), T(RNG.standard_normal((2, 3)))
    ntk = _ntk(model, x1, x2)
    params = dict(model.named_parameters())
    for i in range(3):
        for j in range(2):
            ja = [F.jacrev(lambda p: F.functional_call(model, p, (x1[i],)))(dict(params))[k].flatten(1) for k in params]
            jb = [F.jacrev(lambda p: F.functional_call(model, p, (x2[j],)))(dict(params))[k].flatten(1) for k in params]
            want = sum(a.detach().numpy() @ b.detach().numpy().T for a, b in zip(ja, jb))
            np.testing.assert_allclose(ntk[i, j].numpy(), want, rtol=1e-10, atol=1e-12)


def test_model_ensembling_with_stacked_state():
    models = [mlp([4, 6, 2], seed=s) for s in range(3)]
    params, buffers = F.stack_module_state(models)
    assert tuple(params["0.weight"].shape) == (3, 6, 4) and params["0.weight"].requires_grad
    x = T(RNG.standard_normal((5, 4)))
    out = F.vmap(lambda p, b, x: F.functional_call(models[0], (p, b), (x,)), in_dims=(0, 0, None))(params, buffers, x)
    for i, m in enumerate(models):
        np.testing.assert_allclose(out[i].detach().numpy(), m(x).detach().numpy(), rtol=1e-12)
    xs = T(RNG.standard_normal((3, 5, 4)))  # a minibatch per model
    out = F.vmap(lambda p, b, x: F.functional_call(models[0], (p, b), (x,)))(params, buffers, xs)
    np.testing.assert_allclose(out[2].detach().numpy(), models[2](xs[2]).detach().numpy(), rtol=1e-12)


def test_forward_mode_jvp_of_a_network_matches_finite_differences():
    model = mlp([4, 7, 3], seed=2)
    params = {k: v.detach() for k, v in model.named_parameters()}
    tangents = {k: T(RNG.standard_normal(v.shape)) for k, v in params.items()}
    x = T(RNG.standard_normal((2, 4)))
    f = lambda p: F.functional_call(model, p, (x,))  # noqa: E731
    _, jvp_out = F.jvp(f, (params,), (tangents,))
    eps = 1e-6
    plus = f({k: params[k] + eps * tangents[k] for k in params})
    minus = f({k: params[k] - eps * tangents[k] for k in params})
    np.testing.assert_allclose(jvp_out.numpy(), ((plus - minus) / (2 * eps)).detach().numpy(), rtol=1e-6, atol=1e-8)


# ------------------------------------------------------------------ against torch.func
@pytest.mark.torch
def test_the_tutorials_match_torch_func():
    torch = pytest.importorskip("torch")
    model = mlp([6, 8, 3])
    tmodel = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3)).double()
    tmodel.load_state_dict({k: torch.tensor(v.detach().numpy()) for k, v in model.state_dict().items()})
    x, y = RNG.standard_normal((5, 6)), np.array([0, 2, 1, 1, 0])
    params = {k: v.detach() for k, v in model.named_parameters()}
    tparams = {k: v.detach() for k, v in tmodel.named_parameters()}

    def tloss(p, x, y):
        return torch.nn.functional.cross_entropy(torch.func.functional_call(tmodel, p, (x.unsqueeze(0),)),
                                                 y.unsqueeze(0))
    got = F.vmap(F.grad(_loss(model)), in_dims=(None, 0, 0))(params, T(x), jg.tensor(y))
    want = torch.func.vmap(torch.func.grad(tloss), in_dims=(None, 0, 0))(tparams, torch.tensor(x), torch.tensor(y))
    for k in params:
        np.testing.assert_allclose(got[k].numpy(), want[k].numpy(), rtol=1e-10, atol=1e-12)
    A, v = RNG.standard_normal((5, 3)), RNG.standard_normal(3)
    for lib_f, t_f in ((F.hessian, torch.func.hessian), (F.jacfwd, torch.func.jacfwd), (F.jacrev, torch.func.jacrev)):
        a = lib_f(lambda z: ((T(A) @ z).tanh() ** 2).sum() + 0.5 * (z * z).sum())(T(v))
        b = t_f(lambda z: ((torch.tensor(A) @ z).tanh() ** 2).sum() + 0.5 * (z * z).sum())(torch.tensor(v))
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-10, atol=1e-12)
    _, t1 = F.jvp(lambda z: (z.sin() * z).cumsum(0), (T(v),), (T(A[0]),))
    _, t2 = torch.func.jvp(lambda z: (z.sin() * z).cumsum(0), (torch.tensor(v),), (torch.tensor(A[0]),))
    np.testing.assert_allclose(t1.numpy(), t2.numpy(), rtol=1e-12)


def test_forward_mode_inside_reverse_mode():
    """jacrev(jacfwd(f)) and grad of a jvp: the tangents keep their history where a reverse transform outside
    differentiates them; all four orders of the Hessian agree, and no result leaks a graph."""
    x = jg.tensor([0.3, -0.7, 1.1], dtype=jg.float64)
    W = jg.tensor(np.random.default_rng(0).standard_normal((3, 3)))

    def f(x):
        return ((W @ (W @ x).tanh()).tanh() ** 2).sum() + (x.softmax(0) * x.sin()).sum() + x.cumsum(0).prod()
    want = F.jacrev(F.jacrev(f))(x)
    for H in (F.hessian(f)(x), F.jacrev(F.jacfwd(f))(x), F.jacfwd(F.jacfwd(f))(x)):
        np.testing.assert_allclose(H.numpy(), want.numpy(), rtol=1e-10, atol=1e-12)
        assert H.grad_fn is None and not H.requires_grad
    v = jg.tensor([1.0, -2.0, 0.5], dtype=jg.float64)
    g = F.grad(lambda x: F.jvp(f, (x,), (v,))[1])(x)  # d/dx (J(x) v) = H v
    np.testing.assert_allclose(g.numpy(), want.numpy() @ v.numpy(), rtol=1e-10, atol=1e-12)
    p, t = F.jvp(f, (x,), (v,))
    assert not p.requires_grad and not t.requires_grad
