"""The fused losses (ops/loss.py, kernels/loss.py): side by side with PyTorch for every reduction and
option, node names and edges, double backward, PyTorch's errors, and the CUDA twins (simulator, PTX).

(The op matrix, tests/ops/test_op_matrix.py, covers the entries' references, gradcheck and fused VJPs.)
"""
import json
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

import jitgrad as jg
from jitgrad.autograd import gradcheck, gradgradcheck

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the checkout

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None

F = jg.nn.functional
needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed")
REDUCTIONS = ("none", "mean", "sum")
CUDA_CHILD = os.environ.get("NUMBA_ENABLE_CUDASIM") == "1" or os.environ.get("JITGRAD_CUDA_TESTS") == "gpu"


def pair(a, requires_grad=False):
    """The same float64 values as a jitgrad and a torch tensor."""
    a = np.asarray(a)
    return (jg.tensor(a, requires_grad=requires_grad and a.dtype.kind == "f"),
            torch.tensor(a, requires_grad=requires_grad and a.dtype.kind == "f"))


def check(name, args, kwargs, grad_args=(0, 1), same_node=True):
    """F.<name> on jitgrad and torch: the value, the node name (unless not ``same_node``: a composition whose
    last op differs), and the gradients of the float inputs."""
    ours = [pair(a, i in grad_args) for i, a in enumerate(args)]
    kw_ours = {k: pair(v)[0] if isinstance(v, np.ndarray) else v for k, v in kwargs.items()}
    kw_torch = {k: pair(v)[1] if isinstance(v, np.ndarray) else v for k, v in kwargs.items()}
    a = getattr(F, name)(*[o[0] for o in ours], **kw_ours)
    b = getattr(torch.nn.functional, name)(*[o[1] for o in ours], **kw_torch)
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-10, atol=1e-12)
    if same_node:
        assert type(a.grad_fn).__name__ == type(b.grad_fn).__name__
        assert len(a.grad_fn.next_functions) == len(b.grad_fn.next_functions)
    g = np.random.default_rng(1).standard_normal(tuple(b.shape))
    a.backward(jg.tensor(g))
    b.backward(torch.tensor(g))
    for (x, xt) in ours:
        if xt.requires_grad:
            np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-9, atol=1e-12)


def rand(*shape, lo=-2.0, hi=2.0, seed=0):
    return np.random.default_rng(seed + len(shape)).uniform(lo, hi, shape)


# ---------------------------------------------------------------------- side by side with PyTorch
@needs_torch
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("name,kw", [("mse_loss", {}), ("smooth_l1_loss", {}), ("smooth_l1_loss", {"beta": 0.3}),
                                     ("smooth_l1_loss", {"beta": 0.0}), ("huber_loss", {}),
                                     ("huber_loss", {"delta": 0.4}), ("l1_loss", {})])
def test_regression_losses_match_torch(name, kw, reduction):
    check(name, (rand(3, 4), rand(3, 4, seed=5)), dict(kw, reduction=reduction))


@needs_torch
@pytest.mark.parametrize("name", ["mse_loss", "l1_loss", "huber_loss"])
def test_elementwise_weight_matches_torch(name):
    for reduction in REDUCTIONS:
        check(name, (rand(3, 4), rand(3, 4, seed=5)), {"reduction": reduction, "weight": rand(3, 4, lo=0, hi=1)})


@needs_torch
def test_broadcast_target_warns_and_matches_torch():
    with pytest.warns(UserWarning, match="Using a target size"):
        check("mse_loss", (rand(3, 4), rand(4, seed=5)), {})


@needs_torch
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_binary_cross_entropy_matches_torch(reduction):
    x, t = rand(2, 5, lo=0.02, hi=0.98), rand(2, 5, lo=0, hi=1, seed=3)
    check("binary_cross_entropy", (x, t), {"reduction": reduction})
    check("binary_cross_entropy", (x, t), {"reduction": reduction, "weight": rand(5, lo=0, hi=2)})
    # saturated probabilities: each log clamped at -100, gradients finite
    check("binary_cross_entropy", (np.array([0.0, 1.0, 0.5]), np.array([1.0, 0.0, 0.5])), {"reduction": reduction},
          grad_args=(1,))


@needs_torch
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_binary_cross_entropy_with_logits_matches_torch(reduction):
    x, t = rand(3, 4) * 20, rand(3, 4, lo=0, hi=1, seed=3)  # large logits: the stable form
    check("binary_cross_entropy_with_logits", (x, t), {"reduction": reduction})
    check("binary_cross_entropy_with_logits", (x, t), {"reduction": reduction, "weight": rand(3, 4, lo=0, hi=2),
                                                       "pos_weight": rand(4, lo=0.5, hi=3)})
    check("binary_cross_entropy_with_logits", (x, t), {"reduction": reduction, "pos_weight": rand(3, 4, lo=0.5, hi=3)})


@needs_torch
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("shape,target", [((5,), np.array(3)), ((4, 5), np.array([0, 4, 2, 2])),
                                          ((2, 3, 2, 2), np.array([[[0, 2], [1, 1]], [[2, 0], [0, 1]]])),
                                          ((2, 3, 4), np.array([[0, 2, 1, 1], [2, 0, 0, 1]])),  # viewed as 4-D
                                          ((1, 2, 2, 1, 3), np.array([[[[0, 1, 1]], [[1, 0, 0]]]]))])
def test_nll_loss_matches_torch(shape, target, reduction):
    x = rand(*shape)
    C = shape[1] if len(shape) > 1 else shape[0]
    check("nll_loss", (x, target), {"reduction": reduction}, grad_args=(0,))
    check("nll_loss", (x, target), {"reduction": reduction, "weight": rand(C, lo=0.1, hi=2)}, grad_args=(0,))
    ignored = np.where(target == target.reshape(-1)[0], 1 if C > 1 else 0, target)
    check("nll_loss", (x, ignored), {"reduction": reduction, "ignore_index": 1, "weight": rand(C, lo=0.1, hi=2)},
          grad_args=(0,))


@needs_torch
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_cross_entropy_matches_torch(reduction):
    x, t = rand(4, 5), np.array([0, 4, -100, 2])
    w = rand(5, lo=0.1, hi=2)
    check("cross_entropy", (x, t), {"reduction": reduction}, grad_args=(0,))
    check("cross_entropy", (x, t), {"reduction": reduction, "weight": w, "label_smoothing": 0.2}, grad_args=(0,))
    check("cross_entropy", (x, t), {"reduction": reduction, "label_smoothing": 0.1}, grad_args=(0,))
    check("cross_entropy", (rand(2, 5, 3), np.array([[0, 1, 4], [3, 3, 0]])), {"reduction": reduction},
          grad_args=(0,))
    p = np.random.default_rng(0).dirichlet(np.ones(5), size=4)  # probability targets
    check("cross_entropy", (x, p), {"reduction": reduction, "weight": w, "label_smoothing": 0.1}, grad_args=(0, 1),
          same_node=False)


@needs_torch
def test_all_targets_ignored_gives_nan_mean_like_torch():
    check("nll_loss", (rand(2, 3), np.array([-100, -100])), {}, grad_args=(0,))


@needs_torch
def test_loss_modules_match_torch():
    x, t = rand(4, 3), np.array([0, 2, 1, 1])
    for ours, theirs, args in [
            (jg.nn.CrossEntropyLoss(label_smoothing=0.1), torch.nn.CrossEntropyLoss(label_smoothing=0.1), (x, t)),
            (jg.nn.NLLLoss(reduction="sum"), torch.nn.NLLLoss(reduction="sum"), (x, t)),
            (jg.nn.MSELoss(), torch.nn.MSELoss(), (x, rand(4, 3, seed=9))),
            (jg.nn.HuberLoss(delta=0.5), torch.nn.HuberLoss(delta=0.5), (x, rand(4, 3, seed=9))),
            (jg.nn.SmoothL1Loss(beta=0.5), torch.nn.SmoothL1Loss(beta=0.5), (x, rand(4, 3, seed=9))),
            (jg.nn.BCEWithLogitsLoss(pos_weight=jg.tensor([1.0, 2.0, 0.5], dtype=jg.float64)),
             torch.nn.BCEWithLogitsLoss(pos_weight=torch.tensor([1.0, 2.0, 0.5], dtype=torch.float64)),
             (x, rand(4, 3, lo=0, hi=1)))]:
        a, b = ours(*pair(args[0])[:1], pair(args[1])[0]), theirs(pair(args[0])[1], pair(args[1])[1])
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-10)


# ---------------------------------------------------------------------- graphs and higher order
def test_double_backward_through_every_fused_loss():
    rng = np.random.default_rng(0)
    x = jg.tensor(rng.uniform(0.1, 0.9, (2, 3)), requires_grad=True)
    t = jg.tensor(rng.uniform(0.1, 0.9, (2, 3)), requires_grad=True)
    w, pw = jg.tensor(rng.uniform(0.5, 2, (3,))), jg.tensor(rng.uniform(0.5, 2, (3,)))
    for reduction in REDUCTIONS:
        for fn in (lambda a, b: F.mse_loss(a, b, reduction=reduction),
                   lambda a, b: F.smooth_l1_loss(a, b, reduction=reduction, beta=2.0),
                   lambda a, b: F.huber_loss(a, b, reduction=reduction, delta=2.0),
                   lambda a, b: F.binary_cross_entropy(a, b, weight=w, reduction=reduction),
                   lambda a, b: F.binary_cross_entropy_with_logits(a, b, w, reduction=reduction, pos_weight=pw)):
            assert gradcheck(fn, (x, t))
            assert gradgradcheck(fn, (x, t))
        logits = jg.tensor(rng.standard_normal((3, 4)), requires_grad=True)
        target = jg.tensor([1, 0, 3])
        fn = lambda a: F.cross_entropy(a, target, weight=jg.tensor([1.0, 2.0, 0.5, 1.0], dtype=jg.float64),  # noqa
                                       reduction=reduction)
        assert gradcheck(fn, (logits,)) and gradgradcheck(fn, (logits,))


def test_node_names_and_saved_values():
    x = jg.randn(3, 4, requires_grad=True)
    loss = F.cross_entropy(x, jg.tensor([0, 1, 3]))
    assert type(loss.grad_fn).__name__ == "NllLossBackward0"
    assert [type(f).__name__ for f, _ in loss.grad_fn.next_functions] == ["LogSoftmaxBackward0"]
    assert loss.grad_fn._saved_reduction == "mean" and loss.grad_fn._saved_ignore_index == -100
    loss = F.mse_loss(x, jg.zeros(3, 4))
    assert type(loss.grad_fn).__name__ == "MseLossBackward0" and loss.grad_fn.next_functions[1] == (None, 0)
    assert type(F.binary_cross_entropy_with_logits(x, jg.ones(3, 4)).grad_fn).__name__ == \
        "BinaryCrossEntropyWithLogitsBackward0"
    assert type(F.binary_cross_entropy(x.sigmoid(), jg.ones(3, 4)).grad_fn).__name__ == "BinaryCrossEntropyBackward0"
    assert type(F.smooth_l1_loss(x, jg.ones(3, 4)).grad_fn).__name__ == "SmoothL1LossBackward0"
    assert type(F.huber_loss(x, jg.ones(3, 4)).grad_fn).__name__ == "HuberLossBackward0"


def test_float32_losses_accumulate_accurately():
    x = jg.full((100000,), 0.1)
    np.testing.assert_allclose(F.mse_loss(x, jg.zeros(100000), reduction="sum").item(), 1000.0, rtol=1e-6)


# ---------------------------------------------------------------------- errors
def test_pytorch_errors():
    x = jg.randn(2, 3, requires_grad=True)
    with pytest.raises(IndexError, match="^Target 3 is out of bounds.$"):
        F.nll_loss(x, jg.tensor([0, 3]))
    with pytest.raises(IndexError, match="^Target -5 is out of bounds.$"):
        F.cross_entropy(x, jg.tensor([0, -5]))
    with pytest.raises(ValueError, match=r"Expected input batch_size \(2\) to match target batch_size \(3\)."):
        F.cross_entropy(x, jg.tensor([0, 1, 1]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(RuntimeError, match="The size of tensor a \\(2\\) must match the size of tensor b \\(4\\) "
                                               "at non-singleton dimension 0"):
            F.mse_loss(jg.randn(2, 3), jg.randn(4, 3))
    with pytest.raises(RuntimeError, match="The size of tensor a \\(4\\) must match the size of tensor b \\(3\\) at "
                                           "non-singleton dimension 1"):
        F.binary_cross_entropy_with_logits(jg.randn(2, 3), jg.rand(2, 3), pos_weight=jg.ones(4))
    with pytest.raises(ValueError, match="Target size"):
        F.binary_cross_entropy_with_logits(jg.randn(2, 3), jg.rand(3))
    w = jg.ones(3, requires_grad=True)
    for call, fn in ((lambda: F.binary_cross_entropy_with_logits(x, jg.rand(2, 3), weight=w),
                      "binary_cross_entropy_with_logits"),
                     (lambda: F.binary_cross_entropy(x.sigmoid(), jg.rand(2, 3), weight=w), "binary_cross_entropy"),
                     (lambda: F.nll_loss(x, jg.tensor([0, 1]), weight=w), "nll_loss_forward")):
        with pytest.raises(RuntimeError, match="The function '%s' is not differentiable with respect to argument "
                                               "'weight'. This input cannot have requires_grad True." % fn):
            call()
    with pytest.raises(RuntimeError, match="all elements of input should be between 0 and 1"):
        F.binary_cross_entropy(jg.tensor([1.5]), jg.tensor([1.0]))
    with pytest.raises(ValueError, match="Weights and input must have the same size."):
        F.mse_loss(x, x.detach(), weight=jg.ones(3))
    with pytest.raises(RuntimeError, match="weight tensor should be defined either for all 3 classes"):
        F.nll_loss(x, jg.tensor([0, 1]), weight=jg.ones(4))


# ---------------------------------------------------------------------- CUDA twins (kernels/cuda/loss.py)
def _cuda_twins_match_cpu():
    from jitgrad.kernels import loss as CPU
    from jitgrad.kernels.cuda import array as A
    from jitgrad.kernels.cuda import loss as GPU
    rng = np.random.default_rng(0)
    host = A.to_host
    for dt in (np.float32, np.float64):
        x, t = rng.uniform(0.1, 0.9, (3, 4)).astype(dt), rng.uniform(0, 1, (3, 4)).astype(dt)
        w, pw = rng.uniform(0.5, 2, (4,)).astype(dt), rng.uniform(0.5, 2, (3, 1)).astype(dt)
        for kind in CPU.KINDS.values():
            for reduction in REDUCTIONS:
                ref = CPU.pointwise_loss(kind, x, t, w, pw, 0.3, reduction)
                got = host(GPU.pointwise_loss(kind, A.from_host(x), A.from_host(t), A.from_host(w), A.from_host(pw),
                                              0.3, reduction))
                np.testing.assert_allclose(got, ref, rtol=1e-5)
                g = rng.standard_normal(ref.shape).astype(dt)
                for wrt in (False, True):
                    ref = CPU.pointwise_loss_vjp(kind, g, x, t, w, None, 0.3, reduction, wrt)
                    got = host(GPU.pointwise_loss_vjp(kind, A.from_host(g), A.from_host(x), A.from_host(t),
                                                      A.from_host(w), None, 0.3, reduction, wrt))
                    np.testing.assert_allclose(got, ref, rtol=1e-5)
        x3, tgt = rng.standard_normal((2, 4, 3)).astype(dt), np.array([[0, 3, -100], [1, 1, 2]])
        for reduction in REDUCTIONS:
            ref = CPU.nll_loss(x3, tgt, w, -100, reduction)
            got = host(GPU.nll_loss(A.from_host(x3), A.from_host(tgt), A.from_host(w), -100, reduction))
            np.testing.assert_allclose(got, ref, rtol=1e-5)
            g = rng.standard_normal(ref.shape).astype(dt)
            ref = CPU.nll_loss_vjp(g, x3.shape, tgt, w, -100, reduction)
            got = host(GPU.nll_loss_vjp(A.from_host(g), x3.shape, A.from_host(tgt), None if dt == np.float32 else
                                        A.from_host(w), -100, reduction))
            if dt == np.float32:
                ref = CPU.nll_loss_vjp(g, x3.shape, tgt, None, -100, reduction)
            np.testing.assert_allclose(got, ref, rtol=1e-5)


def _cuda_losses_on_device_tensors():
    x = jg.randn(4, 3, dtype=jg.float64)
    xc = x.to("cuda").requires_grad_()
    loss = F.cross_entropy(xc, jg.tensor([0, 2, 1, 1], device="cuda"))
    loss.backward()
    x.requires_grad_()
    ref = F.cross_entropy(x, jg.tensor([0, 2, 1, 1]))
    ref.backward()
    np.testing.assert_allclose(loss.item(), ref.item(), rtol=1e-12)
    np.testing.assert_allclose(xc.grad.cpu().numpy(), x.grad.numpy(), rtol=1e-12)


def _cuda_target_out_of_bounds_raises_at_the_next_wait():
    """The class indices are checked by the nll kernel on the device: the IndexError comes at the next copy to
    the host (or synchronize), once, and the device stays usable, as after PyTorch's device-side assert."""
    x = jg.randn(2, 3, dtype=jg.float64)
    xc = x.to("cuda")
    loss = F.cross_entropy(xc, jg.tensor([0, 3], device="cuda"))
    with pytest.raises(IndexError, match="^Target 3 is out of bounds.$"):
        loss.item()
    F.nll_loss(xc, jg.tensor([-5, 1], device="cuda"))
    with pytest.raises(IndexError, match="^Target -5 is out of bounds.$"):
        jg.cuda.synchronize()
    jg.cuda.synchronize()  # reported once
    ok = F.cross_entropy(xc, jg.tensor([0, 2], device="cuda")).item()
    assert ok == pytest.approx(F.cross_entropy(x, jg.tensor([0, 2])).item(), rel=1e-12)


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
    assert sorted({name for name, _ in compiled}) == ["_loss_map", "_loss_vjp", "_nll_map", "_nll_vjp"]
    assert {dt for _, dt in compiled} == {"float32", "float64"}


if CUDA_CHILD:
    test_cuda_twins_match_cpu = pytest.mark.cuda(_cuda_twins_match_cpu)
    test_cuda_losses_on_device_tensors = pytest.mark.cuda(_cuda_losses_on_device_tensors)
    test_cuda_target_out_of_bounds_raises_at_the_next_wait = pytest.mark.cuda(
        _cuda_target_out_of_bounds_raises_at_the_next_wait)
else:
    test_cuda_in_simulator = pytest.mark.cuda(_cuda_in_simulator)
    test_cuda_kernels_compile_to_ptx = pytest.mark.cuda(_cuda_kernels_compile_to_ptx)


def _compile_ptx():
    """(The subprocess of test_cuda_kernels_compile_to_ptx.) Record the launches, compile each to PTX."""
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/, for ptx_recorder
    from ptx_recorder import compile_recorded, record_launches

    launched, L = record_launches()
    from jitgrad.kernels.cuda import loss as K
    for dt in (np.float32, np.float64):
        a = np.zeros(6, dt)
        K._launch(K._loss_map, 6, 0, a, a, a, a, 0.5, a)
        K._launch(K._loss_vjp, 6, 0, a, a, a, a, a, 0.5, 1.0, True, a)
        x3, t2 = np.zeros((2, 3, 1), dt), np.zeros((2, 1), np.int64)
        K._launch(K._nll_map, 2, x3, t2, np.zeros(3, dt), -100, np.zeros((2, 1), dt), np.zeros(2, np.int64))
        K._launch(K._nll_vjp, 2, a, t2, np.zeros(3, dt), -100, 1.0, x3)
    done = [(name, next(str(a.dtype) for a in sig if str(getattr(a, "dtype", "")).startswith("float")))
            for name, sig in compile_recorded(launched)]
    print(json.dumps(done))


if __name__ == "__main__" and sys.argv[1:] == ["ptx"]:
    _compile_ptx()
