"""jitgrad.optim against NumPy reimplementations of PyTorch's update equations, and the Optimizer API."""
import copy
import json
import math
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

import jitgrad as jg
from jitgrad import optim
from jitgrad.kernels import config

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the checkout

SHAPES = [(3, 4), (5,), ()]


# ---------------------------------------------------------------- NumPy references (PyTorch's docs pseudo-code)
def lerp(a, b, w):
    return a + w * (b - a) if w < 0.5 else b - (b - a) * (1 - w)


def ref_sgd(p, g, s, t, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False, maximize=False):
    g = -g if maximize else g
    g = g + weight_decay * p
    if momentum:
        s["b"] = g.copy() if t == 1 else momentum * s["b"] + (1 - dampening) * g
        g = g + momentum * s["b"] if nesterov else s["b"]
    return p - lr * g


def ref_adam(p, g, s, t, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False, maximize=False,
             decoupled=False):
    b1, b2 = betas
    g = -g if maximize else g
    if decoupled:
        p = p * (1 - lr * weight_decay)
    else:
        g = g + weight_decay * p
    m, v = s.get("m", np.zeros_like(p)), s.get("v", np.zeros_like(p))
    s["m"] = m = lerp(m, g, 1 - b1)
    s["v"] = v = b2 * v + (1 - b2) * g * g
    if amsgrad:
        s["vmax"] = v = np.maximum(s.get("vmax", np.zeros_like(p)), v)
    return p - lr / (1 - b1 ** t) * m / (np.sqrt(v) / math.sqrt(1 - b2 ** t) + eps)


def ref_adamw(p, g, s, t, weight_decay=1e-2, **kw):
    return ref_adam(p, g, s, t, weight_decay=weight_decay, decoupled=True, **kw)


def ref_rmsprop(p, g, s, t, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0, centered=False,
                maximize=False):
    g = -g if maximize else g
    g = g + weight_decay * p
    s["v"] = v = alpha * s.get("v", np.zeros_like(p)) + (1 - alpha) * g * g
    if centered:
        s["ga"] = ga = lerp(s.get("ga", np.zeros_like(p)), g, 1 - alpha)
        v = v - ga * ga
    avg = np.sqrt(v) + eps
    if momentum > 0:
        s["b"] = momentum * s.get("b", np.zeros_like(p)) + g / avg
        return p - lr * s["b"]
    return p - lr * g / avg


def ref_adagrad(p, g, s, t, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0, eps=1e-10,
                maximize=False):
    g = -g if maximize else g
    g = g + weight_decay * p
    s["sum"] = s.get("sum", np.full_like(p, initial_accumulator_value)) + g * g
    return p - lr / (1 + (t - 1) * lr_decay) * g / (np.sqrt(s["sum"]) + eps)


CASES = [
    (optim.SGD, ref_sgd, dict(lr=0.1)),
    (optim.SGD, ref_sgd, dict(lr=0.1, momentum=0.9)),
    (optim.SGD, ref_sgd, dict(lr=0.05, momentum=0.8, dampening=0.3, weight_decay=0.1)),
    (optim.SGD, ref_sgd, dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.05, maximize=True)),
    (optim.Adam, ref_adam, dict(lr=0.1)),
    (optim.Adam, ref_adam, dict(lr=0.05, betas=(0.8, 0.9), weight_decay=0.1, amsgrad=True)),
    (optim.Adam, ref_adam, dict(lr=0.1, eps=1e-3, maximize=True)),
    (optim.Adam, ref_adam, dict(lr=0.1, betas=(0.3, 0.6), weight_decay=0.2)),  # 1 - beta1 >= 0.5: other lerp branch
    (optim.AdamW, ref_adamw, dict(lr=0.1)),
    (optim.AdamW, ref_adamw, dict(lr=0.05, weight_decay=0.3, amsgrad=True, maximize=True)),
    (optim.RMSprop, ref_rmsprop, dict(lr=0.01)),
    (optim.RMSprop, ref_rmsprop, dict(lr=0.01, momentum=0.9, centered=True, weight_decay=0.1)),
    (optim.RMSprop, ref_rmsprop, dict(lr=0.01, alpha=0.5, centered=True, maximize=True)),
    (optim.Adagrad, ref_adagrad, dict(lr=0.1)),
    (optim.Adagrad, ref_adagrad, dict(lr=0.1, lr_decay=0.5, weight_decay=0.1, initial_accumulator_value=0.3, eps=1e-5,
                                      maximize=True)),
]


def problem(dtype, rng):
    """Parameters and a loss sum(c p^2 / 2 + b p + 0.1 p^3) whose gradient c p + b + 0.3 p^2 the reference uses."""
    P = [rng.standard_normal(s) for s in SHAPES]
    C = [rng.uniform(0.5, 2.0, s) for s in SHAPES]
    B = [rng.standard_normal(s) for s in SHAPES]
    params = [jg.tensor(p, dtype=dtype, requires_grad=True) for p in P]

    def loss(params=params):
        total = 0
        for p, c, b in zip(params, C, B):
            c, b = jg.tensor(c, dtype=dtype, device=p.device), jg.tensor(b, dtype=dtype, device=p.device)
            total = total + ((c * p * p) / 2 + b * p + 0.1 * p * p * p).sum()
        return total

    def grad(i, p):
        return C[i] * p + B[i] + 0.3 * p * p
    return params, loss, P, grad


def run_reference(ref, kw, P, grad, steps):
    states = [{} for _ in P]
    P = [p.copy() for p in P]
    for t in range(1, steps + 1):
        P = [ref(p, grad(i, p), s, t, **kw) for i, (p, s) in enumerate(zip(P, states))]
    return P


@pytest.mark.parametrize("cls, ref, kw", CASES, ids=[f"{c.__name__}-{i}" for i, (c, _, _) in enumerate(CASES)])
def test_matches_reference_float64(cls, ref, kw, rng):
    params, loss, P, grad = problem(jg.float64, rng)
    opt = cls(params, **kw)
    for _ in range(6):
        opt.zero_grad()
        loss().backward()
        opt.step()
    for p, r in zip(params, run_reference(ref, kw, P, grad, 6)):
        np.testing.assert_allclose(p.detach().numpy(), r, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("cls, ref, kw", [CASES[3], CASES[5], CASES[11], CASES[14]],
                         ids=["SGD", "Adam", "RMSprop", "Adagrad"])
def test_matches_reference_float32(cls, ref, kw, rng):
    params, loss, P, grad = problem(jg.float32, rng)
    opt = cls(params, **kw)
    for _ in range(4):
        opt.zero_grad()
        loss().backward()
        opt.step()
    for p, r in zip(params, run_reference(ref, kw, [p.astype(np.float32).astype(np.float64) for p in P], grad, 4)):
        assert p.dtype is jg.float32
        np.testing.assert_allclose(p.detach().numpy(), r, rtol=2e-4, atol=2e-5)


@pytest.mark.parametrize("cls, ref, kw", [CASES[3], CASES[5]], ids=["SGD", "Adam"])
def test_parallel_kernels_match(cls, ref, kw, rng, monkeypatch):
    params, loss, P, grad = problem(jg.float64, rng)
    opt = cls(params, **kw)
    for _ in range(3):
        opt.zero_grad()
        loss().backward()
        with monkeypatch.context() as m:
            m.setattr(config, "PARALLEL_THRESHOLD", 1)  # the optimizer's prange build, on small arrays
            opt.step()
    for p, r in zip(params, run_reference(ref, kw, P, grad, 3)):
        np.testing.assert_allclose(p.detach().numpy(), r, rtol=1e-12, atol=1e-12)


def test_lr_and_hyperparameters_per_group(rng):
    a, b = jg.ones(3, requires_grad=True), jg.ones(3, requires_grad=True)
    opt = optim.SGD([{"params": [a]}, {"params": b, "lr": 0.5, "momentum": 0.9}], lr=0.1)
    assert opt.param_groups[0]["lr"] == 0.1 and opt.param_groups[0]["momentum"] == 0
    assert opt.param_groups[1]["params"] == [b] or opt.param_groups[1]["params"][0] is b
    assert opt.param_groups[1]["lr"] == 0.5 and opt.param_groups[1]["nesterov"] is False
    (a.sum() + b.sum()).backward()
    opt.step()
    np.testing.assert_allclose(a.detach().numpy(), 0.9)
    np.testing.assert_allclose(b.detach().numpy(), 0.5)
    assert a not in opt.state or len(opt.state[a]) == 0  # no momentum: SGD keeps no state, as in PyTorch
    assert set(opt.state[b]) == {"momentum_buffer"}


def test_step_is_an_untracked_in_place_update():
    w = jg.tensor([1.0, 2.0], requires_grad=True)
    opt = optim.SGD([w], lr=0.1)
    y = (w * w).sum()  # saves w for backward
    y.backward(retain_graph=True)
    v = w._version
    opt.step()
    assert w.is_leaf and w.grad_fn is None and w.requires_grad
    assert w._version == v + 1
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()


def test_params_without_grad_are_skipped():
    a, b = jg.ones(2, requires_grad=True), jg.ones(2, requires_grad=True)
    opt = optim.Adam([a, b], lr=0.1)
    a.sum().backward()
    opt.step()
    assert b.tolist() == [1.0, 1.0] and len(opt.state[b]) == 0
    assert a.tolist() != [1.0, 1.0] and opt.state[a]["step"].item() == 1


def test_generator_of_trainable_params():
    frozen = jg.ones(2, requires_grad=True)
    frozen.requires_grad = False
    head = jg.ones(2, requires_grad=True)
    params = [frozen, head]
    opt = optim.SGD(filter(lambda p: p.requires_grad, params), lr=1e-2, momentum=0.9, weight_decay=1e-4,
                    nesterov=True)
    assert len(opt.param_groups[0]["params"]) == 1 and opt.param_groups[0]["params"][0] is head
    (frozen * head).sum().backward()
    opt.step()
    assert frozen.tolist() == [1.0, 1.0] and frozen.grad is None
    assert head.tolist() != [1.0, 1.0]


def test_zero_grad():
    w = jg.ones(2, requires_grad=True)
    opt = optim.SGD([w], lr=0.1)
    w.sum().backward()
    g = w.grad
    opt.zero_grad(set_to_none=False)
    assert w.grad is g and w.grad.tolist() == [0.0, 0.0]
    opt.zero_grad()
    assert w.grad is None


def test_closure_runs_with_grad_enabled():
    w = jg.tensor([3.0], requires_grad=True)
    opt = optim.SGD([w], lr=0.25)

    def closure():
        opt.zero_grad()
        loss = (w * w).sum()
        loss.backward()
        return loss
    with jg.no_grad():
        loss = opt.step(closure)
    assert loss.item() == 9.0
    assert w.tolist() == [1.5]


def test_strided_parameter_is_updated_in_place():
    base = jg.arange(12.0).reshape(3, 4)
    w = base.t().detach().requires_grad_()  # a transposed (non-contiguous) leaf
    assert not w.is_contiguous()
    opt = optim.SGD([w], lr=0.5, momentum=0.9)
    (w * jg.arange(12.0).reshape(4, 3)).sum().backward()
    opt.step()
    expected = np.arange(12.0).reshape(3, 4).T - 0.5 * np.arange(12.0).reshape(4, 3)
    np.testing.assert_allclose(w.detach().numpy(), expected)
    np.testing.assert_allclose(base.numpy(), expected.T)  # the storage it shares was written


def test_strided_gradient():
    w = jg.zeros(2, 3, requires_grad=True)
    w.grad = jg.arange(6.0).reshape(3, 2).t()  # a transposed (non-contiguous) gradient
    optim.Adagrad([w], lr=1.0).step()
    g = np.arange(6.0).reshape(3, 2).T
    np.testing.assert_allclose(w.detach().numpy(), -g / (np.sqrt(g * g) + 1e-10), rtol=1e-6)


def test_custom_optimizer_with_required_hyperparameter():
    from jitgrad.optim.optimizer import required

    class Plain(optim.Optimizer):
        def __init__(self, params, lr=required):
            super().__init__(params, dict(lr=lr))

    w = jg.ones(1, requires_grad=True)
    with pytest.raises(ValueError, match="^parameter group didn't specify a value of required optimization "
                                         "parameter lr$"):
        Plain([w])
    assert Plain([{"params": [w], "lr": 0.5}]).param_groups[0]["lr"] == 0.5


def test_retained_grad_non_leaf_allowed_and_non_leaf_rejected():
    x = jg.ones(2, requires_grad=True) * 2
    with pytest.raises(ValueError, match="^can't optimize a non-leaf Tensor$"):
        optim.SGD([x], lr=0.1)
    x.retain_grad()
    optim.SGD([x], lr=0.1)


def test_constructor_errors():
    w = jg.ones(2, requires_grad=True)
    with pytest.raises(TypeError, match=r"^params argument given to the optimizer should be an iterable of Tensors "
                                        r"or dicts, but got jitgrad\.FloatTensor$"):
        optim.SGD(w, lr=0.1)
    with pytest.raises(ValueError, match="^optimizer got an empty parameter list$"):
        optim.Adam([])
    with pytest.raises(TypeError, match="^optimizer can only optimize Tensors, but one of the params is int$"):
        optim.SGD([w, 3], lr=0.1)
    with pytest.raises(TypeError, match="ordering of tensors in sets will change"):
        optim.SGD([{"params": {w}}], lr=0.1)
    with pytest.raises(TypeError, match="^param_group must be a dict, but got <class 'list'>$"):
        optim.SGD([w], lr=0.1).add_param_group([w])
    with pytest.raises(ValueError, match="^Nesterov momentum requires a momentum and zero dampening$"):
        optim.SGD([w], lr=0.1, nesterov=True)
    with pytest.raises(ValueError, match="^Nesterov momentum requires a momentum and zero dampening$"):
        optim.SGD([w], lr=0.1, momentum=0.9, dampening=0.1, nesterov=True)
    with pytest.raises(ValueError, match="^Invalid learning rate: -0.1$"):
        optim.SGD([w], lr=-0.1)
    with pytest.raises(ValueError, match="^Invalid momentum value: -1$"):
        optim.SGD([w], momentum=-1)
    with pytest.raises(ValueError, match="^Invalid beta parameter at index 1: 1.0$"):
        optim.Adam([w], betas=(0.9, 1.0))
    with pytest.raises(ValueError, match="^betas must be either both floats or both Tensors$"):
        optim.Adam([w], betas=(0, 0.99))
    with pytest.raises(ValueError, match="^Invalid epsilon value: -1.0$"):
        optim.RMSprop([w], eps=-1.0)
    with pytest.raises(ValueError, match="^Invalid alpha value: -0.5$"):
        optim.RMSprop([w], alpha=-0.5)
    with pytest.raises(ValueError, match="^Invalid lr_decay value: -1$"):
        optim.Adagrad([w], lr_decay=-1)
    with pytest.raises(ValueError, match="^Invalid initial_accumulator_value value: -1$"):
        optim.Adagrad([w], initial_accumulator_value=-1)


def test_add_param_group_and_duplicates():
    a, b = jg.ones(2, requires_grad=True), jg.ones(2, requires_grad=True)
    opt = optim.SGD([a], lr=0.1)
    with pytest.raises(ValueError, match="^some parameters appear in more than one parameter group$"):
        opt.add_param_group({"params": [b, a]})
    opt.add_param_group({"params": [b], "lr": 0.01})
    assert len(opt.param_groups) == 2 and opt.param_groups[1]["lr"] == 0.01
    assert opt.param_groups[1]["momentum"] == 0  # defaults filled in
    with pytest.warns(UserWarning, match="duplicate parameters"):
        optim.SGD([jg.ones(1, requires_grad=True)] * 2, lr=0.1)


def test_named_params():
    a, b = jg.ones(2, requires_grad=True), jg.ones(2, requires_grad=True)
    opt = optim.SGD([("a", a), ("b", b)], lr=0.1)
    assert opt.param_groups[0]["param_names"] == ["a", "b"]
    assert opt.state_dict()["param_groups"][0]["param_names"] == ["a", "b"]
    with pytest.raises(ValueError, match="Some param names are missing"):
        optim.SGD([("a", a), b], lr=0.1)


def test_adagrad_state_is_created_up_front():
    w = jg.ones(2, 2, requires_grad=True)
    opt = optim.Adagrad([w], initial_accumulator_value=0.5)
    assert opt.state[w]["step"].item() == 0 and opt.state[w]["sum"].tolist() == [[0.5, 0.5], [0.5, 0.5]]


def test_integer_parameter_gives_a_clear_error():
    w = jg.tensor([1, 2])
    w.grad = jg.tensor([1, 1])
    opt = optim.SGD([w], lr=0.1)
    with pytest.raises(TypeError, match="can only update floating point parameters"):
        opt.step()


def test_repr():
    opt = optim.SGD([jg.ones(1, requires_grad=True)], lr=0.1, momentum=0.9)
    assert repr(opt) == ("SGD (\nParameter Group 0\n    dampening: 0\n    differentiable: False\n    foreach: None\n"
                         "    fused: None\n    lr: 0.1\n    maximize: False\n    momentum: 0.9\n    nesterov: False\n"
                         "    weight_decay: 0\n)")  # PyTorch's repr


# ---------------------------------------------------------------- state dicts
def train(opt, params, loss, steps):
    for _ in range(steps):
        opt.zero_grad()
        loss().backward()
        opt.step()


@pytest.mark.parametrize("cls, ref, kw", [CASES[3], CASES[5], CASES[11], CASES[14]],
                         ids=["SGD", "Adam", "RMSprop", "Adagrad"])
def test_state_dict_resumes_training_exactly(cls, ref, kw, rng, tmp_path):
    params, loss, P, grad = problem(jg.float64, rng)
    opt = cls(params, **kw)
    train(opt, params, loss, 3)
    sd = opt.state_dict()
    assert sorted(sd["state"]) == [0, 1, 2]
    assert sd["param_groups"][0]["params"] == [0, 1, 2]
    assert {k: v for k, v in sd["param_groups"][0].items() if k != "params"} == \
        {k: v for k, v in opt.param_groups[0].items() if k != "params"}
    jg.save({"optimizer": sd, "params": [p.detach() for p in params]}, tmp_path / "ckpt.jg")
    train(opt, params, loss, 2)
    straight = [p.detach().numpy().copy() for p in params]

    ckpt = jg.load(tmp_path / "ckpt.jg")
    params2 = [t.requires_grad_() for t in ckpt["params"]]
    opt2 = cls(params2, **kw)
    opt2.load_state_dict(ckpt["optimizer"])
    train(opt2, params2, lambda: loss(params2), 2)
    for a, b in zip(straight, params2):
        np.testing.assert_allclose(b.detach().numpy(), a, rtol=0, atol=0)


def test_state_dict_layout_and_cast():
    a = jg.ones(2, requires_grad=True)
    b = jg.ones(3, dtype=jg.float64, requires_grad=True)
    opt = optim.Adam([{"params": [a]}, {"params": [b], "lr": 0.5}])
    (a.sum() + b.sum()).backward()
    opt.step()
    sd = opt.state_dict()
    assert list(sd["state"]) == [0, 1]
    assert set(sd["state"][0]) == {"step", "exp_avg", "exp_avg_sq"}
    assert sd["state"][0]["exp_avg"] is opt.state[a]["exp_avg"]  # references, as in PyTorch
    assert [g["params"] for g in sd["param_groups"]] == [[0], [1]]
    assert sd["param_groups"][1]["lr"] == 0.5

    a2, b2 = jg.ones(2, requires_grad=True), jg.ones(3, dtype=jg.float64, requires_grad=True)
    opt2 = optim.Adam([{"params": [a2]}, {"params": [b2]}])
    sd["state"][1]["exp_avg"] = sd["state"][1]["exp_avg"].float()  # cast back to the parameter's dtype on load
    opt2.load_state_dict(sd)
    assert opt2.param_groups[1]["lr"] == 0.5 and opt2.param_groups[1]["params"][0] is b2
    assert opt2.state[b2]["exp_avg"].dtype is jg.float64
    assert opt2.state[b2]["step"].dtype is jg.float32


def test_load_state_dict_errors():
    a, b = jg.ones(2, requires_grad=True), jg.ones(3, requires_grad=True)
    opt = optim.SGD([a, b], lr=0.1, momentum=0.9)
    (a.sum() + b.sum()).backward()
    opt.step()
    sd = opt.state_dict()
    with pytest.raises(ValueError, match="^loaded state dict has a different number of parameter groups$"):
        optim.SGD([{"params": [a]}, {"params": [b]}], lr=0.1).load_state_dict(sd)
    with pytest.raises(ValueError, match="doesn't match the size of optimizer's group"):
        optim.SGD([a], lr=0.1).load_state_dict(sd)
    with pytest.raises(ValueError, match=r"'momentum_buffer' of shape \[2\] for a parameter of shape \[3\]"):
        optim.SGD([b, a], lr=0.1, momentum=0.9).load_state_dict(sd)


def test_load_state_dict_keeps_step_counting():
    w = jg.ones(2, requires_grad=True)
    opt = optim.Adam([w])
    sd = {"state": {0: {"step": 4, "exp_avg": jg.zeros(2), "exp_avg_sq": jg.zeros(2)}},
          "param_groups": [dict(opt.state_dict()["param_groups"][0])]}
    opt.load_state_dict(sd)
    assert opt.state[w]["step"].dtype is jg.float32 and opt.state[w]["step"].item() == 4
    w.sum().backward()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        opt.step()
    assert opt.state[w]["step"].item() == 5


# ---------------------------------------------------------------- CUDA twins (kernels/cuda/optim.py)
# Without a GPU the device checks run in a child pytest with numba's CUDA simulator (it must be switched
# on before numba.cuda is imported); JITGRAD_CUDA_TESTS=gpu runs them on a real GPU.
CUDA_CHILD = os.environ.get("NUMBA_ENABLE_CUDASIM") == "1" or os.environ.get("JITGRAD_CUDA_TESTS") == "gpu"


def _cuda_matches_reference(cls, ref, kw, rng):
    params, loss, P, grad = problem(jg.float64, rng)
    params = [p.detach().to("cuda").requires_grad_() for p in params]
    opt = cls(params, **kw)
    for _ in range(3):  # the gradients come from the host (the simulator makes device autograd slow)
        for i, p in enumerate(params):
            p.grad = jg.tensor(grad(i, p.detach().cpu().numpy()), dtype=jg.float64, device="cuda")
        opt.step()
    for p, r in zip(params, run_reference(ref, kw, P, grad, 3)):
        assert p.device == jg.device("cuda:0")
        np.testing.assert_allclose(p.detach().cpu().numpy(), r, rtol=1e-12, atol=1e-12)
    for key, value in opt.state[params[0]].items():
        assert value.device == (jg.device("cpu") if key == "step" else jg.device("cuda:0"))  # as in PyTorch


def _cuda_loads_a_cpu_state_dict():
    w = jg.ones(3, requires_grad=True)
    opt = optim.Adam([w], lr=0.1)
    w.sum().backward()
    opt.step()
    wc = w.detach().to("cuda").requires_grad_()
    opt_c = optim.Adam([wc], lr=0.1)
    opt_c.load_state_dict(copy.deepcopy(opt.state_dict()))  # a checkpoint (load_state_dict shares, as PyTorch's)
    assert opt_c.state[wc]["exp_avg"].device == jg.device("cuda:0")
    for o, p in ((opt, w), (opt_c, wc)):
        p.grad = jg.ones(3, device=p.device)
        o.step()
    np.testing.assert_allclose(wc.detach().cpu().numpy(), w.detach().numpy(), rtol=1e-6)


def _cuda_in_simulator():
    import numba_cuda  # noqa: F401  (installed by the dev extra: a missing install step fails here)
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-k", "cuda", __file__],
                       capture_output=True, text=True, env=env, cwd=ROOT)
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-3000:]  # (5 if nothing ran)


def _cuda_kernels_compile_to_ptx():
    """Each update kernel, as its launch would type it (both float widths), compiled for an H100 (cc 9.0)."""
    import numba_cuda  # noqa: F401  (installed by the dev extra: a missing install step fails here)
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    r = subprocess.run([sys.executable, __file__, "ptx"], capture_output=True, text=True, env=env, timeout=900)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-6000:]
    compiled = json.loads(r.stdout.strip().splitlines()[-1])
    from helpers import kernel_names  # (here: the child runs this file as a script, without tests/ on its path)
    assert kernel_names(compiled) == sorted("%s-%s" % (k, dt) for k in ("_sgd", "_adam", "_rmsprop", "_adagrad")
                                      for dt in ("float32", "float64"))


# On a GPU, or in the simulator child, the device checks run; otherwise this process starts the child
# and compiles the kernels to PTX.
if CUDA_CHILD:
    test_cuda_matches_reference = pytest.mark.cuda(pytest.mark.parametrize(
        "cls, ref, kw", [CASES[3], CASES[5], CASES[9], CASES[11], CASES[14]],
        ids=["SGD", "Adam", "AdamW", "RMSprop", "Adagrad"])(_cuda_matches_reference))
    test_cuda_loads_a_cpu_state_dict = pytest.mark.cuda(_cuda_loads_a_cpu_state_dict)
else:
    test_cuda_in_simulator = pytest.mark.cuda(_cuda_in_simulator)
    test_cuda_kernels_compile_to_ptx = pytest.mark.cuda(_cuda_kernels_compile_to_ptx)


def _compile_ptx():
    """(The subprocess of test_cuda_kernels_compile_to_ptx.) Record the launches, compile each to PTX."""
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/, for ptx_recorder
    from ptx_recorder import compile_recorded, record_launches

    launched, L = record_launches()
    from jitgrad.kernels.cuda import optim as O
    for dt in (np.float32, np.float64):
        def a(n=4):
            return np.zeros(n, dt)
        O.update("sgd", a(), a(), a(), 0.1, 0.9, 0.0, 0.0, True, False, True)
        O.update("adam", a(), a(), a(), a(), a(0), 0.1, 0.9, 0.99, 1e-8, 0.0, False, False, False, 0.1, 0.2)
        O.update("rmsprop", a(), a(), a(), a(), a(), 0.1, 0.9, 1e-8, 0.0, 0.9, True, False)
        O.update("adagrad", a(), a(), a(), 0.1, 1e-10, 0.0, False)
    done = ["%s-%s" % (name, sig[0].dtype) for name, sig in compile_recorded(launched)]
    print(json.dumps(done))


if __name__ == "__main__" and sys.argv[1:] == ["ptx"]:
    _compile_ptx()


@pytest.mark.parametrize("dampening", [0.0, 0.5])
def test_sgd_first_momentum_step_copies_the_gradient_into_the_buffer(dampening):
    """PyTorch's first momentum step sets the buffer to the gradient, whatever the dampening (later ones:
    b = momentum * b + (1 - dampening) * g); with none it runs as the usual step from a zero buffer, so later
    steps take the same loop."""
    g = np.array([0.5, -1.25, 3.0, -0.0, np.inf], np.float32)
    p0 = np.array([1.0, 2.0, -3.0, 0.5, 4.0], np.float32)
    p = jg.tensor(p0.copy(), requires_grad=True)
    opt = optim.SGD([p], lr=0.1, momentum=0.9, dampening=dampening)
    want_p, want_b = p0.astype(np.float64), None
    for step in range(3):
        grad = g * (step + 1)
        p.grad = jg.tensor(grad)
        opt.step()
        want_b = grad.astype(np.float64) if want_b is None else 0.9 * want_b + (1 - dampening) * grad
        want_p = (want_p - 0.1 * want_b).astype(np.float32).astype(np.float64)
        got_b = opt.state[p]["momentum_buffer"].numpy()
        if step == 0:  # exactly the gradient
            np.testing.assert_array_equal(got_b, grad)
        np.testing.assert_allclose(got_b, want_b.astype(np.float32), rtol=1e-6)
        np.testing.assert_allclose(p.detach().numpy(), want_p.astype(np.float32), rtol=1e-6)
