"""jitgrad.compile of function transforms (vmap, grad, vjp, jacrev, jacfwd, hessian, jvp, functional_call).

The inner reverse pass (the engine's autograd.grad), vmap's batch and forward-mode duals are recorded into
one graph: each compiled transform is called several times with new values of every input (floats, integer
targets, masks, indices) and once with a new batch size, compared with the transform run eagerly, and its
trace must show no graph break. Eager jitgrad is the reference here (tests/transforms holds it to PyTorch
and finite differences).
"""
import numpy as np
import pytest

import jitgrad as jg
import jitgrad.nn.functional as F
from jitgrad import nn
from jitgrad.compiler import explain
from jitgrad.func import (functional_call, grad, grad_and_value, hessian, jacfwd, jacrev, jvp, stack_module_state, vjp,
                          vmap)


def _leaves(out):
    if isinstance(out, jg.Tensor):
        return [out]
    if isinstance(out, dict):
        return [t for v in out.values() for t in _leaves(v)]
    return [t for v in out for t in _leaves(v)]


def _differential(fn, calls, atol=1e-10):
    """``jitgrad.compile(fn)`` against ``fn`` on each argument tuple of ``calls``; no graph break in any trace.
    Returns the compiled function."""
    compiled = jg.compile(fn)
    for args in calls:
        want, got = _leaves(fn(*args)), _leaves(compiled(*args))
        assert len(want) == len(got)
        for w, g in zip(want, got):
            assert g.shape == w.shape and g.dtype == w.dtype and g.requires_grad == w.requires_grad
            np.testing.assert_allclose(g.detach().numpy(), w.detach().numpy(), rtol=1e-9, atol=atol)
    variants = compiled._jitgrad_compiled.variants.values()
    assert variants and all(not v.eager and not v.breaks for v in variants), [v.breaks for v in variants]
    return compiled


def _no_breaks(fn, *args):
    report = explain(jg.compile(fn), *args)
    assert report.graph_breaks == [] and report.graph_count == 1
    return report


@pytest.fixture
def rng():
    return np.random.default_rng(0)


def _t(rng, *shape):
    return jg.tensor(rng.standard_normal(shape))


# ------------------------------------------------------------------ per-sample gradients
def test_per_sample_grads_of_a_module(rng, capsys):
    model = nn.Sequential(nn.Linear(7, 6), nn.ReLU(), nn.Linear(6, 3)).double()
    names = [k for k, _ in model.named_parameters()]

    def loss(p, x, y):
        return F.cross_entropy(functional_call(model, p, (x.unsqueeze(0),)), y.unsqueeze(0))
    fn = vmap(grad(loss), in_dims=(None, 0, 0))

    def args(batch):
        params = {k: _t(rng, *dict(model.named_parameters())[k].shape) for k in names}
        return params, _t(rng, batch, 7), jg.tensor(rng.integers(0, 3, batch))
    compiled = _differential(fn, [args(5), args(5), args(5), args(9)])
    assert len(compiled._jitgrad_compiled.variants) == 2  # (one trace per batch size)
    _no_breaks(fn, *args(5))
    # the per-sample gradients against a loop over the batch, each sample's own gradient
    params, x, y = args(4)
    got = compiled(params, x, y)
    for i in range(4):
        one = grad(loss)(params, x[i], y[i])
        for k in names:
            np.testing.assert_allclose(got[k][i].numpy(), one[k].numpy(), rtol=1e-10, atol=1e-12)


def test_vmap_grad_reading_masks_and_indices(rng):
    def loss(w, x, m, i, y):
        h = (x @ w).tanh()
        return jg.where(m, h, -0.5 * h).sum() + h[i].pow(2).sum() + F.nll_loss(F.log_softmax(h, 0)[None], y[None])
    fn = vmap(grad_and_value(loss), in_dims=(None, 0, 0, 0, 0))

    def args(batch):
        return (_t(rng, 4, 3), _t(rng, batch, 4), jg.tensor(rng.random((batch, 3)) < 0.5),
                jg.tensor(rng.integers(0, 3, (batch, 2))), jg.tensor(rng.integers(0, 3, batch)))
    _differential(fn, [args(6), args(6), args(6), args(3)])


def test_vmap_over_parameters_of_an_ensemble(rng):
    def f(w, b, x):
        return (x @ w + b).relu().sum(-1)
    fn = vmap(jacrev(f, argnums=(0, 1)), in_dims=(0, 0, None))
    _differential(fn, [(_t(rng, 3, 5, 4), _t(rng, 3, 4), _t(rng, 2, 5)) for _ in range(3)] +
                  [(_t(rng, 6, 5, 4), _t(rng, 6, 4), _t(rng, 2, 5))])


# ------------------------------------------------------------------ Jacobians and Hessians
def _mlp(rng):
    w1, w2 = _t(rng, 6, 6), _t(rng, 6, 6)
    return lambda x: (w2 @ (w1 @ x).tanh()).tanh()


@pytest.mark.parametrize("transform", [jacrev, jacfwd])
def test_jacobians_of_an_mlp(rng, transform):
    fn = transform(_mlp(rng))
    _differential(fn, [(_t(rng, 6),) for _ in range(3)])


def test_jacobian_with_respect_to_weights_passed_in(rng):
    def f(w, x):
        return (w @ x).sin() * x.sum()
    for transform in (jacrev, jacfwd):
        _differential(transform(f, argnums=(0, 1)), [(_t(rng, 3, 4), _t(rng, 4)) for _ in range(3)] +
                      [(_t(rng, 5, 4), _t(rng, 4))])


def test_hessian(rng):
    A = _t(rng, 8, 6)
    fn = hessian(lambda x: ((A @ x).tanh() ** 2).sum() + 0.5 * (x * x).sum())
    compiled = _differential(fn, [(_t(rng, 6),) for _ in range(3)])
    report = _no_breaks(fn, _t(rng, 6))
    assert "mm" in report.ops or "mv" in report.ops or "matmul" in report.ops
    # the plan leaves out what the Hessian does not read (the value, the gradient's own loss)
    var = next(iter(compiled._jitgrad_compiled.variants.values()))
    assert len(var.plan.graph.nodes) < len(var.graph.nodes)


def test_hessian_of_a_softmax_loss_matches_finite_differences(rng):
    def f(x):
        return -F.log_softmax(x * x, 0)[1] + x.exp().sum()
    compiled = _differential(hessian(f), [(_t(rng, 4),) for _ in range(3)])
    x = _t(rng, 4)
    h = compiled(x).numpy()
    eps, num = 1e-5, np.zeros((4, 4))
    g = jg.compile(grad(f))
    for j in range(4):
        d = np.zeros(4)
        d[j] = eps
        num[:, j] = (g(x + jg.tensor(d)).numpy() - g(x - jg.tensor(d)).numpy()) / (2 * eps)
    np.testing.assert_allclose(h, num, rtol=1e-6, atol=1e-7)


def test_vmap_of_a_per_sample_sum(rng):
    # sum_all under vmap reduces each sample: the plan's loops and tapes must not take it for a full sum
    for fn in (vmap(lambda x: x.tanh().sum()), vmap(lambda x: (x * x).mean() + x.exp().sum())):
        _differential(fn, [(_t(rng, 6, 3),) for _ in range(3)] + [(_t(rng, 2, 3),), (_t(rng, 300, 40),)])


# ------------------------------------------------------------------ forward mode
def test_jvp(rng):
    def f(x):
        for _ in range(5):
            x = (x * 1.01 + 0.01).tanh()
        return x.softmax(0) * x.sum()
    fn = lambda x, t: jvp(f, (x,), (t,))  # noqa: E731
    _differential(fn, [(_t(rng, 16), _t(rng, 16)) for _ in range(3)] + [(_t(rng, 9), _t(rng, 9))])
    _no_breaks(fn, _t(rng, 16), _t(rng, 16))


def test_vjp_and_vmap_of_jvp(rng):
    def f(x, w):
        return (x @ w).sigmoid()

    def pull(x, w, ct):
        return vjp(f, x, w)[1](ct)
    _differential(pull, [(_t(rng, 3, 4), _t(rng, 4, 5), _t(rng, 3, 5)) for _ in range(3)])
    push = vmap(lambda x, t: jvp(lambda x: x.exp() * x.cos(), (x,), (t,))[1])
    _differential(push, [(_t(rng, 5, 3), _t(rng, 5, 3)) for _ in range(3)] + [(_t(rng, 2, 3), _t(rng, 2, 3))])


# ------------------------------------------------------------------ gradients on: the compiled transform is differentiable
def test_outer_gradient_of_a_compiled_grad(rng):
    f = grad(lambda x: (x.tanh() ** 3).sum())
    compiled = jg.compile(f)
    for _ in range(3):
        x = _t(rng, 5).requires_grad_()
        want, got = f(x), compiled(x)
        assert got.requires_grad and want.requires_grad
        (a,) = jg.autograd.grad(got.sum(), x)
        (b,) = jg.autograd.grad(want.sum(), x)
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-10)
    assert all(not v.breaks for v in compiled._jitgrad_compiled.variants.values())


# ------------------------------------------------------------------ what the trace cannot record still breaks
def test_autograd_grad_through_a_hook_breaks_the_graph(rng):
    seen = []

    def f(x):
        y = x.tanh()
        y.register_hook(lambda g: seen.append(1))
        (g,) = jg.autograd.grad(y.sum(), x)
        return g
    x = _t(rng, 3).requires_grad_()
    report = explain(jg.compile(f), x)
    assert report.graph_breaks and "hooks" in report.graph_breaks[0][0]
    seen.clear()
    out = jg.compile(f)(x)
    np.testing.assert_allclose(out.numpy(), 1 - np.tanh(x.detach().numpy()) ** 2)
    assert seen == [1]  # (the call ran eagerly, once)


def test_autograd_grad_into_a_graph_built_outside_breaks_the_graph(rng):
    w = _t(rng, 3).requires_grad_()
    outside = w.exp()

    def f(x):
        return jg.autograd.grad((outside * x).sum(), w)[0]
    report = explain(jg.compile(f), _t(rng, 3))
    assert report.graph_breaks and "outside" in report.graph_breaks[0][0]
    x = _t(rng, 3)
    np.testing.assert_allclose(jg.compile(f)(x).numpy(), (np.exp(w.detach().numpy()) * x.numpy()))


def test_autograd_backward_inside_still_breaks(rng):
    def f(x):
        y = (x * x).sum()
        jg.autograd.backward(y)
        return y
    report = explain(jg.compile(f), _t(rng, 3).requires_grad_())
    assert report.graph_breaks


# ------------------------------------------------------------------ more compositions
def _compositions():
    base = nn.Linear(3, 2).double()
    params, buffers = stack_module_state([nn.Linear(3, 2).double() for _ in range(4)])
    return {
        "grad_has_aux": (grad(lambda x: ((x.sin() ** 2).sum(), x.cos()), has_aux=True), lambda r: (_t(r, 4),)),
        "vmap_chunks": (vmap(grad(lambda x: (x.exp() * x).sum()), chunk_size=2), lambda r: (_t(r, 5, 3),)),
        "vmap_vmap": (vmap(vmap(lambda x, y: (x * y).logsumexp(0))), lambda r: (_t(r, 2, 3, 4), _t(r, 2, 3, 4))),
        "grad_grad": (grad(lambda x: grad(lambda x: (x ** 3).sum() * x.sum())(x).sin().sum()), lambda r: (_t(r, 4),)),
        "jacfwd_jacrev": (jacfwd(jacrev(lambda x: (x.softmax(0) * x).sum())), lambda r: (_t(r, 4),)),
        "ensemble": (vmap(lambda p, b, x: functional_call(base, (p, b), (x,)), in_dims=(0, 0, None)),
                     lambda r: ({k: _t(r, *v.shape) for k, v in params.items()}, buffers, _t(r, 5, 3))),
        "conv_per_sample": (vmap(grad(lambda w, x: F.conv2d(x[None], w).tanh().sum()), in_dims=(None, 0)),
                            lambda r: (_t(r, 2, 1, 3, 3), _t(r, 4, 1, 6, 6))),
    }


@pytest.mark.parametrize("name", list(_compositions()))
def test_compositions(rng, name):
    fn, make = _compositions()[name]
    _differential(fn, [make(rng) for _ in range(3)])
