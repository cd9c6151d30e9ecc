"""The fast paths of the transform workloads: forward mode's fused elementwise JVPs and linear reductions, small
GEMMs on one BLAS thread, and compiled tapes over a float32 table. Each checked against the slow path it
replaces (the VJP formula, NumPy in float64) and for what it must not do (a per-sample loop, a lost thread count).
"""
import math
import warnings

import numpy as np
import pytest

import jitgrad as jg
from jitgrad.autograd import forward_ad as fwAD
from jitgrad.func import hessian, jacfwd, jvp
from jitgrad.kernels import config, cpu

RNG = np.random.default_rng(7)


def _f32(*shape):
    return jg.from_numpy(RNG.standard_normal(shape).astype(np.float32))


@pytest.mark.parametrize("name", ["tanh", "sigmoid", "exp", "sin", "log1p"])
def test_fused_jvp_matches_the_formula(name):
    x, t = _f32(64).abs(), _f32(64)
    fn = getattr(jg, name)
    _, fused = jvp(fn, (x,), (t,))
    with fwAD.dual_level():  # grad mode on and a primal requiring grad: the tangent keeps its history (formula)
        y = fn(fwAD.make_dual(x.detach().requires_grad_(), t))
        formula = fwAD.unpack_dual(y).tangent
    np.testing.assert_allclose(fused.numpy(), formula.detach().numpy(), rtol=2e-6, atol=1e-7)
    xd = x.numpy().astype(np.float64)
    eps = 1e-6
    fd = (getattr(np, name if name != "sigmoid" else "exp")(xd + eps * t.numpy()) -
          getattr(np, name if name != "sigmoid" else "exp")(xd - eps * t.numpy())) / (2 * eps)
    if name == "sigmoid":  # (finite differences of exp above; sigmoid's own here)
        s = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
        fd = (s(xd + eps * t.numpy()) - s(xd - eps * t.numpy())) / (2 * eps)
    np.testing.assert_allclose(fused.numpy(), fd, rtol=1e-4, atol=1e-5)


def test_fused_jvp_keeps_the_output_dtype():
    x, y, t = _f32(8), jg.from_numpy(RNG.standard_normal(8)), _f32(8)
    _, tangent = jvp(lambda a: jg.atan2(a, y), (x,), (t,))  # float32 tangent, float64 output: the formula
    assert tangent.dtype == jg.float64
    ref = t.numpy() * y.numpy() / (x.numpy().astype(np.float64) ** 2 + y.numpy() ** 2)
    np.testing.assert_allclose(tangent.numpy(), ref, rtol=1e-5)


def test_jacfwd_runs_fused_jvps_batched_without_a_loop():
    w1, w2, x = _f32(16, 16), _f32(16, 16), _f32(16)
    f = lambda v: (w2 @ (w1 @ v).tanh()).tanh()  # noqa: E731
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # vmap's "performance drop" warning of an op without a batching rule
        jac = jacfwd(f)(x)
    h = np.tanh(w1.numpy() @ x.numpy())
    o = np.tanh(w2.numpy() @ h)
    ref = (1 - o ** 2)[:, None] * (w2.numpy() * (1 - h ** 2)[None, :]) @ w1.numpy()
    np.testing.assert_allclose(jac.numpy(), ref, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("reduce", ["sum", "mean"])
def test_reductions_are_linear_in_forward_mode(reduce):
    x, t = _f32(3, 4), _f32(3, 4)
    for kw in ({}, {"dim": 1}, {"dim": 0, "keepdim": True}):
        _, tangent = jvp(lambda a: getattr(a, reduce)(**kw), (x,), (t,))
        np.testing.assert_allclose(tangent.numpy(), getattr(t.numpy(), reduce)(
            axis=kw.get("dim"), keepdims=kw.get("keepdim", False)), rtol=1e-6)


def test_hessian_through_the_linear_sum():
    A, x = _f32(10, 10), _f32(10)
    H = hessian(lambda v: ((A @ v).tanh() ** 2).sum() + 0.5 * (v * v).sum())(x).numpy()
    a, v = A.numpy().astype(np.float64), x.numpy().astype(np.float64)
    u = np.tanh(a @ v)
    ref = a.T @ np.diag(2 * (1 - u ** 2) * (1 - 3 * u ** 2)) @ a + np.eye(10)
    np.testing.assert_allclose(H, ref, rtol=1e-4, atol=1e-4)


@pytest.mark.skipif(config.OPENBLAS_THREADS is None, reason="NumPy is not linked to OpenBLAS")
def test_small_gemm_on_one_thread_restores_the_count():
    get, put = config.OPENBLAS_THREADS
    before = get()
    a, b = RNG.standard_normal((100, 100)), RNG.standard_normal((100, 100))
    np.testing.assert_allclose(cpu.matmul(a, b), a @ b, rtol=1e-12)
    c = RNG.standard_normal((7, 100, 100))  # a batch of matrices times one: one GEMM of the stacked rows
    np.testing.assert_allclose(cpu.matmul(c, b), c @ b, rtol=1e-12)
    assert get() == before
    big = RNG.standard_normal((160, 160))  # 160^3 > 2^21 multiply-adds: OpenBLAS chooses
    np.testing.assert_allclose(cpu.matmul(big, big), big @ big, rtol=1e-12)
    assert get() == before


def test_float32_tape_matches_eager():
    x, t = _f32(512), _f32(512)

    def chain(x):
        for _ in range(5):
            x = (x * 1.01 + 0.01).tanh()
        return x.clone() * 1.0

    def step(x, t):
        return jvp(chain, (x,), (t,))
    eager = step(x, t)
    compiled = jg.compile(step)
    for _ in range(2):
        got = compiled(x, t)
    for e, g in zip(eager, got):
        assert g.dtype == jg.float32
        np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=1e-6, atol=1e-7)
    report = jg.compiler.explain(step, x, t)
    assert "tape of" in report and "shares its operand" in report  # the clones and views share their source's slot


def test_float64_constant_keeps_a_float64_tape():
    x = jg.from_numpy(RNG.standard_normal(64))

    def f(x):
        return (x * math.pi).sin() + 0.1
    np.testing.assert_allclose(jg.compile(f)(x).numpy(), np.sin(x.numpy() * math.pi) + 0.1, rtol=1e-15)


def test_vmapped_vjp_records_no_graph_it_does_not_keep():
    w, x = _f32(6, 5), _f32(5)
    f = lambda v: (w @ v).tanh()  # noqa: E731
    out, vjp_fn = jg.func.vjp(f, x)
    packed = []
    with jg.autograd.graph.saved_tensors_hooks(lambda t: packed.append(t) or t, lambda t: t):
        rows, = jg.vmap(vjp_fn)(jg.eye(6))
    assert packed == []  # the backward's formulas ran on the batch of cotangents without recording themselves
    assert rows.grad_fn is None and not rows.requires_grad
    h = np.tanh(w.numpy() @ x.numpy())
    np.testing.assert_allclose(rows.numpy(), (1 - h ** 2)[:, None] * w.numpy(), rtol=1e-5, atol=1e-6)
    # ... and records it where it is kept: the Jacobian differentiated again (jacrev of jacrev), against jacfwd's
    hess = jg.func.jacrev(jg.func.jacrev(lambda v: f(v).sum()))(x)
    np.testing.assert_allclose(hess.numpy(), jacfwd(jg.func.jacrev(lambda v: f(v).sum()))(x).numpy(), rtol=1e-4,
                               atol=1e-5)


def test_per_sample_grads_run_compiled_autograd_plans():
    rng = np.random.default_rng(3)
    model = jg.nn.Sequential(jg.nn.Linear(7, 5), jg.nn.ReLU(), jg.nn.Linear(5, 3))
    params = {k: v.detach() for k, v in model.named_parameters()}
    x = jg.from_numpy(rng.standard_normal((4, 7)).astype(np.float32))
    y = jg.from_numpy(np.array([0, 2, 1, 2]))

    def loss(p, x, y):
        return jg.nn.functional.cross_entropy(jg.func.functional_call(model, p, (x.unsqueeze(0),)), y.unsqueeze(0))
    per_sample = jg.vmap(jg.func.grad(loss), in_dims=(None, 0, 0))
    before = jg.jit_stats()["compiled_autograd"]["hits"]
    for _ in range(4):
        grads = per_sample(params, x, y)
    assert jg.jit_stats()["compiled_autograd"]["hits"] > before  # the backward of the physical batch: a plan
    for i in range(4):
        one = jg.func.grad(loss)(params, x[i], y[i])
        for k in params:
            np.testing.assert_allclose(grads[k][i].numpy(), one[k].numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_per_sample_nll_loss_of_one_row_with_ignored_targets(reduction):
    x = _f32(5, 1, 4)
    t = jg.from_numpy(np.array([[1], [-100], [3], [0], [-100]]))
    f = lambda a, b: jg.nn.functional.nll_loss(a, b, reduction=reduction)  # noqa: E731
    out = jg.vmap(f)(x, t)
    ref = [f(x[i], t[i]).item() for i in range(5)]
    np.testing.assert_array_equal(out.numpy(), np.array(ref, np.float32))  # (0 / 0 = nan where ignored, as a mean)
    assert np.isnan(out.numpy()[1]) == (reduction == "mean")
    g = jg.vmap(jg.func.grad(f))(x, t)
    np.testing.assert_array_equal(g.numpy(), np.stack([jg.func.grad(f)(x[i], t[i]).numpy() for i in range(5)]))


@pytest.mark.parametrize("batched", [(True, True, True), (False, True, False), (False, False, True), (True, False, False)])
def test_linear_batched_in_any_operand(batched):
    """vmap's linear on the batch: inputs, per-sample weights, per-sample biases, each batched or not."""
    x, w, b = _f32(3, 2, 5), _f32(3, 4, 5), _f32(3, 4)
    dims = tuple(0 if k else None for k in batched)
    args = tuple(a if k else a[0] for a, k in zip((x, w, b), batched))
    out = jg.vmap(jg.nn.functional.linear, in_dims=dims)(*args)
    for i in range(3):
        one = [a[i] if k else a for a, k in zip(args, batched)]
        np.testing.assert_allclose(out[i].numpy(), (one[0].numpy() @ one[1].numpy().T + one[2].numpy()), rtol=1e-5,
                                   atol=1e-6)
    if dims[:2] == (None, None):
        return
    mm = jg.vmap(lambda a, c: jg.nn.functional.linear(a, c), in_dims=dims[:2])(*args[:2])
    for i in range(3):
        one = [a[i] if k else a for a, k in zip(args[:2], batched[:2])]
        np.testing.assert_allclose(mm[i].numpy(), one[0].numpy() @ one[1].numpy().T, rtol=1e-5, atol=1e-6)


def _elementwise_mix(w):
    """tanh, sigmoid, a broadcast product, where and lerp: entries with fused elementwise VJP kernels."""
    return lambda v: jg.lerp((v.tanh() * w).sigmoid(), jg.where(v > 0, v, 0.1 * v).unsqueeze(0).expand(3, -1), 0.3)


def test_jacrev_runs_fused_vjps_on_the_batch(monkeypatch):
    from jitgrad.func.vmap import HOOK
    w, x = _f32(3, 6), _f32(6)
    calls = []
    fused = HOOK.batched_fused
    monkeypatch.setattr(type(HOOK), "batched_fused", staticmethod(lambda *a: calls.append(a) or fused(*a)))
    jac = jg.func.jacrev(_elementwise_mix(w))(x)
    assert calls  # the basis of cotangents ran the kernels, not the formulas
    # the formulas (a graph kept: x carries history) and a loop of single vjps give the same Jacobian
    formulas = jg.func.jacrev(_elementwise_mix(w))(x.detach().requires_grad_())
    np.testing.assert_allclose(jac.numpy(), formulas.detach().numpy(), rtol=1e-6, atol=1e-7)
    _, vjp_fn = jg.func.vjp(_elementwise_mix(w), x)
    rows = np.stack([vjp_fn(jg.from_numpy(e.reshape(3, 6)))[0].numpy() for e in np.eye(18, dtype=np.float32)])
    np.testing.assert_allclose(jac.numpy().reshape(18, 6), rows, rtol=1e-6, atol=1e-7)


def test_vmap_of_jacrev_runs_fused_vjps_on_both_batches():
    w, xs = _f32(3, 6), _f32(4, 6)
    jac = jg.vmap(jg.func.jacrev(_elementwise_mix(w)))(xs)  # saved arrays batched at the outer level
    for i in range(4):  # against the formulas (a graph kept: the sample carries history)
        one = jg.func.jacrev(_elementwise_mix(w))(xs[i].detach().requires_grad_())
        np.testing.assert_allclose(jac[i].numpy(), one.detach().numpy(), rtol=1e-6, atol=1e-7)


def test_forward_over_reverse_records_no_graph_it_does_not_keep():
    """hessian's jacrev (and jvp of grad) run the backward's formulas for their tangents only, without recording
    them, unless reverse mode differentiates the result: a grad outside, or inputs with history."""
    W = jg.tensor(np.random.default_rng(0).standard_normal((3, 3)))
    f = lambda x: ((W @ x).tanh() ** 3).sum() + x.cumsum(0).prod()  # noqa: E731
    x, v = jg.tensor([0.3, -0.7, 1.1], dtype=jg.float64), jg.tensor([1.0, -2.0, 0.5], dtype=jg.float64)
    third = jg.func.jacrev(jg.func.jacrev(jg.func.jacrev(f)))(x).numpy()
    seen = []

    def inner(z):
        g = jg.func.jacrev(f)(z)
        seen.append(g.requires_grad)
        return g
    H = jacfwd(inner)(x)
    np.testing.assert_allclose(H.numpy(), jg.func.jacrev(jg.func.jacrev(f))(x).numpy(), rtol=1e-12, atol=1e-14)
    assert seen == [False]
    xr = x.clone().requires_grad_()  # inputs with history: the Hessian is differentiable
    H = jacfwd(inner)(xr)
    assert seen[-1] and H.requires_grad
    H.sum().backward()
    np.testing.assert_allclose(xr.grad.numpy(), third.sum((0, 1)), rtol=1e-12, atol=1e-14)

    def hvp(z):
        g = jvp(jg.func.grad(f), (z,), (v,))[1]
        seen.append(g.requires_grad)
        return g
    np.testing.assert_allclose(hvp(x).numpy(), H.detach().numpy() @ v.numpy(), rtol=1e-12, atol=1e-14)
    assert not seen[-1]
    g3 = jg.func.grad(lambda z: hvp(z).sum())(x)  # a grad outside: the hvp keeps its graph
    assert seen[-1]
    np.testing.assert_allclose(g3.numpy(), np.einsum("ijk,j->k", third, v.numpy()), rtol=1e-12, atol=1e-14)
