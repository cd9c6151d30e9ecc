"""Adadelta, Adamax, NAdam, RAdam, LBFGS and optim.swa_utils side by side with PyTorch (same weights and
gradients -> same parameters), their errors and state dicts, and the CUDA twins of the new update kernels."""
import copy
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import jitgrad as jg
from jitgrad import optim

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the checkout

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed")
CUDA_CHILD = os.environ.get("NUMBA_ENABLE_CUDASIM") == "1" or os.environ.get("JITGRAD_CUDA_TESTS") == "gpu"

CASES = [
    ("Adadelta", {}), ("Adadelta", {"lr": 0.5, "rho": 0.8, "weight_decay": 0.1, "maximize": True}),
    ("Adamax", {}), ("Adamax", {"lr": 0.05, "betas": (0.8, 0.9), "weight_decay": 0.1, "maximize": True}),
    ("NAdam", {}), ("NAdam", {"lr": 0.05, "weight_decay": 0.1, "momentum_decay": 0.01}),
    ("NAdam", {"weight_decay": 0.1, "decoupled_weight_decay": True, "maximize": True}),
    ("RAdam", {}), ("RAdam", {"lr": 0.05, "weight_decay": 0.1, "betas": (0.9, 0.9)}),
    ("RAdam", {"weight_decay": 0.1, "decoupled_weight_decay": True, "maximize": True}),
    ("Adam", {"amsgrad": True, "foreach": False, "fused": None, "capturable": False}),
    ("SGD", {"lr": 0.01, "momentum": 0.9, "nesterov": True, "foreach": False}),
    ("Rprop", {}), ("Rprop", {"lr": 0.05, "etas": (0.3, 1.5), "step_sizes": (1e-3, 0.2), "maximize": True}),
]


def quadratic_steps(lib, name, kw, steps, dtype):
    """Parameters after ``steps`` steps on a fixed quadratic with two parameter groups' worth of tensors."""
    rng = np.random.default_rng(0)
    w0, b0, A = rng.standard_normal((3, 4)), rng.standard_normal(4), rng.standard_normal((4, 4))
    w = lib.tensor(w0, dtype=dtype, requires_grad=True)
    b = lib.tensor(b0, dtype=dtype, requires_grad=True)
    M = lib.tensor(A, dtype=dtype)
    opt = getattr(lib.optim, name)([w, b], **kw)
    for _ in range(steps):
        opt.zero_grad()
        loss = ((w @ M + b) ** 2).sum() + (b ** 3).sum()
        loss.backward()
        opt.step()
    return [w.detach().numpy(), b.detach().numpy()], opt


@needs_torch
@pytest.mark.parametrize("name,kw", CASES, ids=["%s-%d" % (n, i) for i, (n, _) in enumerate(CASES)])
def test_matches_torch(name, kw):
    for dtype_j, dtype_t, tol in ((jg.float64, torch.float64, 1e-11), (jg.float32, torch.float32, 2e-5)):
        ours, opt = quadratic_steps(jg, name, kw, 12, dtype_j)
        theirs, topt = quadratic_steps(torch, name, kw, 12, dtype_t)
        for a, b in zip(ours, theirs):
            np.testing.assert_allclose(a, b, rtol=tol, atol=tol)
    ours_sd, theirs_sd = opt.state_dict(), topt.state_dict()
    assert ours_sd["param_groups"][0].keys() == theirs_sd["param_groups"][0].keys()
    for k, v in theirs_sd["state"][0].items():
        got = ours_sd["state"][0][k]
        assert got.dtype.name == str(v.dtype).replace("torch.", "") and tuple(got.shape) == tuple(v.shape), k
        np.testing.assert_allclose(got.numpy(), v.numpy(), rtol=2e-5, atol=1e-6)


@needs_torch
@pytest.mark.parametrize("name", ["RAdam", "Adadelta", "Adamax"])
def test_state_dict_round_trip_continues_identically(name):
    ours, opt = quadratic_steps(jg, name, {}, 3, jg.float64)
    w = jg.tensor(ours[0], requires_grad=True)
    b = jg.tensor(ours[1], requires_grad=True)
    opt2 = getattr(optim, name)([w, b])
    opt2.load_state_dict(copy.deepcopy(opt.state_dict()))
    for o, ps in ((opt, opt.param_groups[0]["params"]), (opt2, [w, b])):
        for p in ps:
            p.grad = jg.ones_like(p)
        o.step()
    np.testing.assert_array_equal(w.detach().numpy(), opt.param_groups[0]["params"][0].detach().numpy())


@needs_torch
def test_nadam_loaded_mu_product_takes_the_parameter_dtype_like_torch():
    for lib in (jg, torch):
        p = lib.zeros(2, dtype=lib.float64, requires_grad=True)
        opt = lib.optim.NAdam([p])
        p.grad = lib.ones(2, dtype=lib.float64)
        opt.step()
        opt.load_state_dict(copy.deepcopy(opt.state_dict()))
        assert str(opt.state[p]["mu_product"].dtype).endswith("float64")


def test_pytorch_errors():
    p = [jg.zeros(2, requires_grad=True)]
    for call, msg in [(lambda: optim.Adadelta(p, rho=1.5), "Invalid rho value: 1.5"),
                      (lambda: optim.Adamax(p, lr=-1), "Invalid learning rate: -1"),
                      (lambda: optim.NAdam(p, betas=(0.9, 1.0)), "Invalid beta parameter at index 1: 1.0"),
                      (lambda: optim.NAdam(p, momentum_decay=-1), "Invalid momentum_decay value: -1"),
                      (lambda: optim.RAdam(p, eps=-1), "Invalid epsilon value: -1"),
                      (lambda: optim.Rprop(p, etas=(1.5, 1.2)), "Invalid eta values: 1.5, 1.2"),
                      (lambda: optim.LBFGS([{"params": p}, {"params": [jg.ones(1, requires_grad=True)]}]),
                       "LBFGS doesn't support per-parameter options")]:
        with pytest.raises(ValueError, match=msg):
            call()
    with pytest.raises(RuntimeError, match="differentiable=True is not supported"):
        optim.Adam(p, differentiable=True)
    with pytest.raises(TypeError):
        optim.LBFGS(p).step()  # the closure is required


# ---------------------------------------------------------------------- LBFGS
def rosenbrock_run(lib, kw, steps=3):
    x = lib.tensor([-1.5, 2.0, 0.5, -0.3], dtype=lib.float64, requires_grad=True)
    opt = lib.optim.LBFGS([x], **kw)
    losses = []

    def closure():
        opt.zero_grad()
        loss = (100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2).sum()
        loss.backward()
        return loss
    for _ in range(steps):
        losses.append(float(opt.step(closure)))
    return x.detach().numpy(), losses, opt.state[opt.param_groups[0]["params"][0]]


@needs_torch
@pytest.mark.parametrize("kw", [{}, {"line_search_fn": "strong_wolfe"}, {"lr": 0.5, "history_size": 3, "max_iter": 7},
                                {"line_search_fn": "strong_wolfe", "history_size": 2, "max_eval": 9}])
def test_lbfgs_matches_torch(kw):
    x, losses, state = rosenbrock_run(jg, kw)
    xt, losses_t, state_t = rosenbrock_run(torch, kw)
    np.testing.assert_allclose(x, xt, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(losses, losses_t, rtol=1e-9)
    assert state["func_evals"] == state_t["func_evals"] and state["n_iter"] == state_t["n_iter"]


def test_lbfgs_minimises_a_least_squares_problem():
    kw = {"line_search_fn": "strong_wolfe"}
    rng = np.random.default_rng(0)
    A, y = rng.standard_normal((8, 4)), rng.standard_normal(8)
    x = jg.zeros(4, dtype=jg.float64, requires_grad=True)
    opt = optim.LBFGS([x], max_iter=50, **kw)

    def closure():
        opt.zero_grad()
        loss = ((jg.tensor(A) @ x - jg.tensor(y)) ** 2).sum()
        loss.backward()
        return loss
    opt.step(closure)
    np.testing.assert_allclose(x.detach().numpy(), np.linalg.lstsq(A, y, rcond=None)[0], atol=1e-4)


# ---------------------------------------------------------------------- swa_utils
def _net(lib, bn=True):
    lib.manual_seed(0) if lib is torch else None
    rng = np.random.default_rng(3)
    layers = [lib.nn.Linear(3, 4)] + ([lib.nn.BatchNorm1d(4)] if bn else []) + [lib.nn.Linear(4, 2)]
    net = lib.nn.Sequential(*layers)
    with lib.no_grad():
        for p in net.parameters():
            p.copy_(lib.tensor(rng.standard_normal(tuple(p.shape)), dtype=p.dtype))
    return net


@needs_torch
@pytest.mark.parametrize("how", ["swa", "ema_multi", "ema_avg_fn", "ema_buffers"])
def test_averaged_model_matches_torch(how):
    results = []
    for lib in (jg, torch):
        net = _net(lib)
        S = lib.optim.swa_utils
        kw = {"swa": {}, "ema_multi": {"multi_avg_fn": S.get_ema_multi_avg_fn(0.9)},
              "ema_avg_fn": {"avg_fn": S.get_ema_avg_fn(0.8)},
              "ema_buffers": {"multi_avg_fn": S.get_ema_multi_avg_fn(0.9), "use_buffers": True}}[how]
        avg = S.AveragedModel(net, **kw)
        opt = lib.optim.SGD(net.parameters(), lr=0.05)
        x = lib.tensor(np.random.default_rng(1).standard_normal((5, 3)), dtype=lib.float32)
        for _ in range(4):
            opt.zero_grad()
            net(x).pow(2).mean().backward()
            opt.step()
            avg.update_parameters(net)
        results.append([t.detach().numpy() for t in list(avg.parameters()) + list(avg.buffers())] +
                       [avg(x).detach().numpy()])
    assert int(avg.n_averaged) == 4
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


@needs_torch
def test_update_bn_matches_torch():
    stats = []
    for lib in (jg, torch):
        net = _net(lib)
        data = [lib.tensor(np.random.default_rng(i).standard_normal((6, 3)), dtype=lib.float32) for i in range(3)]
        lib.optim.swa_utils.update_bn([(d, 0) for d in data], net)
        bn = net[1]
        stats.append((bn.running_mean.numpy(), bn.running_var.numpy(), bn.momentum, net.training))
    np.testing.assert_allclose(stats[0][0], stats[1][0], rtol=1e-5)
    np.testing.assert_allclose(stats[0][1], stats[1][1], rtol=1e-5)
    assert stats[0][2:] == stats[1][2:]


# ---------------------------------------------------------------------- CUDA twins (kernels/cuda/optim.py)
def _cuda_new_kernels_match_cpu():
    for name, kw in CASES[:10] + CASES[12:]:
        ours, _ = quadratic_steps(jg, name, kw, 2, jg.float64)
        rng = np.random.default_rng(0)
        w0, b0, A = rng.standard_normal((3, 4)), rng.standard_normal(4), rng.standard_normal((4, 4))
        w = jg.tensor(w0, device="cuda", requires_grad=True)
        b = jg.tensor(b0, device="cuda", requires_grad=True)
        opt = getattr(optim, name)([w, b], **kw)
        for _ in range(2):  # the gradients of the quadratic, computed on the host
            wh, bh = w.detach().cpu().numpy(), b.detach().cpu().numpy()
            r = 2 * (wh @ A + bh)
            w.grad = jg.tensor(r @ A.T, device="cuda")
            b.grad = jg.tensor(r.sum(0) + 3 * bh ** 2, device="cuda")
            opt.step()
        np.testing.assert_allclose(w.detach().cpu().numpy(), ours[0], rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(b.detach().cpu().numpy(), ours[1], rtol=1e-12, atol=1e-12)


def _cuda_in_simulator():
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-k", "cuda", __file__],
                       capture_output=True, text=True, env=env, cwd=ROOT)
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-3000:]


def _cuda_kernels_compile_to_ptx():
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    r = subprocess.run([sys.executable, __file__, "ptx"], capture_output=True, text=True, env=env, timeout=900)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-6000:]
    compiled = json.loads(r.stdout.strip().splitlines()[-1])
    from helpers import kernel_names  # (here: the child runs this file as a script, without tests/ on its path)
    assert kernel_names(compiled) == sorted("%s-%s" % (k, dt) for k in ("_adadelta", "_adamax", "_nadam", "_radam", "_rprop")
                                      for dt in ("float32", "float64"))


if CUDA_CHILD:
    test_cuda_new_kernels_match_cpu = pytest.mark.cuda(_cuda_new_kernels_match_cpu)
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
        a = [np.zeros(4, dt) for _ in range(4)]
        O.update("adadelta", *a, 1.0, 0.9, 1e-6, 0.0, False)
        O.update("adamax", *a, 0.1, 0.9, 0.99, 1e-8, 0.0, False)
        O.update("nadam", *a, 0.1, 0.9, 0.99, 1e-8, 0.0, False, False, 0.5, -0.1, -0.2)
        O.update("radam", *a, 0.1, 0.9, 0.99, 1e-8, 0.0, False, False, 0.1, 0.2, 0.5)
        O.update("rprop", *a, 0.5, 1.2, 1e-6, 50.0, False)
    done = ["%s-%s" % (name, sig[0].dtype) for name, sig in compile_recorded(launched)]
    print(json.dumps(done))


if __name__ == "__main__" and sys.argv[1:] == ["ptx"]:
    _compile_ptx()


@pytest.mark.parametrize("n", [100, 70_000])  # the serial loop, and the parallel one
@pytest.mark.parametrize("momentum,weight_decay,nesterov,maximize", [
    (0.0, 0.0, False, False), (0.9, 0.0, False, False),  # the two steps with loops of their own
    (0.0, 0.1, False, True), (0.9, 0.1, False, False), (0.9, 0.0, True, False), (0.9, 0.0, False, True)])
def test_sgd_loops_follow_pytorchs_update(n, momentum, weight_decay, nesterov, maximize):
    from jitgrad.kernels import optim as kernels
    rng = np.random.default_rng(7)
    p, g, b = (rng.standard_normal(n) for _ in range(3))
    lr, dampening = 0.05, 0.0
    for first in (True, False):
        want_p, want_b = p.copy(), b.copy()
        d = (-g if maximize else g) + weight_decay * want_p
        if momentum:
            want_b = d.copy() if first else momentum * want_b + (1 - dampening) * d
            d = d + momentum * want_b if nesterov else want_b
        want_p -= lr * d
        buf = b if momentum else np.empty(0)
        kernels.update("sgd", p, g, buf, lr, momentum, dampening, weight_decay, nesterov, maximize, first)
        np.testing.assert_allclose(p, want_p, rtol=1e-13, atol=1e-15)
        if momentum:
            np.testing.assert_allclose(b, want_b, rtol=1e-13, atol=1e-15)
