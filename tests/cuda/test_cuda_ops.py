"""Every op of the table on device='cuda' against the same op on the CPU: forward values and input
gradients, generated from the op table's samples (as the op matrix, tests/ops/test_op_matrix.py), plus a training step.

numba swaps in its CUDA simulator only if NUMBA_ENABLE_CUDASIM=1 is set before numba.cuda is first
imported, so without a GPU these checks run in a child pytest process with the simulator on (tiny
sizes); set JITGRAD_CUDA_TESTS=gpu on a machine with a GPU to run them on it for real.
"""
import copy
import os
import subprocess
import sys

import numpy as np
import pytest

import jitgrad as jg
from jitgrad.ops import OPS
from helpers import build, call_of, outputs, samples_of

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the checkout

IN_CHILD = os.environ.get("NUMBA_ENABLE_CUDASIM") == "1" or os.environ.get("JITGRAD_CUDA_TESTS") == "gpu"

# Ops whose kernels have no CUDA twin yet, and the reason (the op raises a clear error on cuda).
CPU_ONLY = {name: "grid_sample's kernels (kernels/grid_sample.py) have no CUDA twin yet"
            for name in ("grid_sampler_2d", "grid_sampler_2d_backward", "grid_sampler_2d_grid_jvp")}


def _calls_lapack(fn, depth=2):
    """Whether forward ``fn`` (or a function of its module it calls) runs the backend's ``xp.linalg`` kernels."""
    names = fn.__code__.co_names
    return "linalg" in names or depth > 0 and any(
        _calls_lapack(f, depth - 1) for f in (fn.__globals__.get(n) for n in names)
        if callable(f) and getattr(f, "__module__", None) == fn.__module__ and hasattr(f, "__code__"))


CPU_ONLY.update({name: "complex tensors: the CUDA backend has no complex kernels yet"
                 for name in ("complex", "polar", "view_as_complex")})
# Ops on LAPACK's kernels (kernels/linalg.py): on CUDA a sample of 2x2 / 3x3 matrices runs the direct code of
# kernels/cuda/linalg.py and matches the CPU; a sample that needs a factorization raises naming cuSOLVER.
LINALG = {name for name, op in OPS.items() if hasattr(op.forward, "__code__") and _calls_lapack(op.forward)}
CPU_ONLY.update({name: "pocketfft's kernels (kernels/fft.py): on CUDA they need cuFFT" for name, op in OPS.items()
                 if "fft" in getattr(getattr(op.forward, "__code__", None), "co_names", ())})


def _leaves(args, kwargs, device):
    inputs = []

    def leaf(a):
        t = jg.tensor(a, dtype=jg.float64 if a.dtype.kind == "f" else None, device=device)
        if a.dtype.kind == "f":
            t.requires_grad_()
            inputs.append(t)
        return t
    targs, tkwargs = build(args, kwargs, leaf)
    return targs, tkwargs, inputs


def _run(op, args, kwargs, device, seed):
    targs, tkwargs, inputs = _leaves(args, kwargs, device)
    outs = outputs(call_of(op)(*targs, **tkwargs))
    values = [o.detach().cpu().numpy() for o in outs]
    diff = [o for o in outs if o.requires_grad]
    grads = []
    if diff and inputs:
        rng = np.random.default_rng(seed)
        gouts = [jg.tensor(rng.standard_normal(o.shape), dtype=o.dtype, device=device) for o in diff]
        gs = jg.autograd.grad(diff, inputs, gouts, allow_unused=True)
        grads = [None if g is None else g.cpu().numpy() for g in gs]
    return values, grads


def _cases():
    for name, op in sorted(OPS.items()):
        for k, _ in enumerate(samples_of(op, np.float64)):
            yield pytest.param(name, k, id="%s-%d" % (name, k))


def _op_on_cuda_matches_cpu(name, k):
    op = OPS[name]
    args, kwargs = samples_of(op, np.float64)[k]
    if name in CPU_ONLY:
        with pytest.raises((RuntimeError, NotImplementedError), match="CUDA|cuda"):
            _run(op, args, kwargs, "cuda", k)
        return
    cpu_values, cpu_grads = _run(op, args, kwargs, "cpu", k)
    try:
        cuda_values, cuda_grads = _run(op, args, kwargs, "cuda", k)
    except NotImplementedError as e:
        if name in LINALG and "is not implemented on CUDA: it needs cuSOLVER" in str(e):
            return
        raise
    for c, g in zip(cpu_values, cuda_values):
        np.testing.assert_allclose(g, c, rtol=1e-9, atol=1e-12)
    assert len(cpu_grads) == len(cuda_grads)
    for c, g in zip(cpu_grads, cuda_grads):
        assert (c is None) == (g is None)
        if c is not None:
            np.testing.assert_allclose(g, c, rtol=1e-9, atol=1e-12)


def _mlp_training_step_on_cuda_equals_cpu():
    def step(device):
        jg.manual_seed(0)
        model = jg.nn.Sequential(jg.nn.Linear(6, 5), jg.nn.ReLU(), jg.nn.Linear(5, 3)).double().to(device)
        opt = jg.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        x = jg.tensor(np.linspace(-1, 1, 24).reshape(4, 6), dtype=jg.float64, device=device)
        y = jg.tensor([0, 2, 1, 2], device=device)
        for _ in range(2):
            opt.zero_grad()
            loss = jg.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
        return loss.item(), [p.detach().cpu().numpy() for p in model.parameters()]
    loss_cpu, params_cpu = step("cpu")
    loss_cuda, params_cuda = step("cuda")
    assert loss_cuda == pytest.approx(loss_cpu, rel=1e-10)
    for a, b in zip(params_cpu, params_cuda):
        np.testing.assert_allclose(b, a, rtol=1e-9, atol=1e-12)
    assert all(p.device == jg.device("cuda:0") for p in [jg.zeros(1, device="cuda")])


def _second_order_on_cuda_equals_cpu():
    """Double backward (gradient of a gradient) runs on the device like on the CPU."""
    def hvp(device):
        x = jg.tensor([[0.3, -1.2, 0.8], [1.5, 0.1, -0.4]], dtype=jg.float64, device=device, requires_grad=True)
        w = jg.tensor([[0.5, -0.2], [0.1, 0.9], [-0.7, 0.3]], dtype=jg.float64, device=device, requires_grad=True)
        y = ((x @ w).tanh() ** 2).sum() + (x.sigmoid() * x.exp()).sum() + x.softmax(1).pow(3).sum()
        (gx,) = jg.autograd.grad(y, x, create_graph=True)
        v = jg.ones_like(x)
        hx, hw = jg.autograd.grad((gx * v).sum(), (x, w))
        return hx.cpu().numpy(), hw.cpu().numpy()
    for a, b in zip(hvp("cpu"), hvp("cuda")):
        np.testing.assert_allclose(b, a, rtol=1e-9, atol=1e-12)


def _cuda_ops_in_simulator():
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", __file__],
                       capture_output=True, text=True, env=env, cwd=ROOT)
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-3000:]


# The checks run in the child process (or on a GPU); the parent only starts the child.
def _dropout_on_cuda_equals_cpu():
    """F.dropout on a CUDA tensor: its mask on the device, the same draws as on the CPU for one seed."""
    out = []
    for device in ("cpu", "cuda"):
        jg.manual_seed(3)
        x = jg.ones(200, device=device, requires_grad=True)
        y = jg.nn.functional.dropout(x, 0.25)
        y.sum().backward()
        assert y.device.type == device and x.grad.device.type == device
        out.append((y.detach().cpu().numpy(), x.grad.cpu().numpy()))
    np.testing.assert_array_equal(out[0][0], out[1][0])
    np.testing.assert_array_equal(out[0][1], out[1][1])
    assert set(np.unique(out[1][0])) <= {0.0, np.float32(1 / 0.75)}


def _indices_out_of_range_raise_at_the_next_wait():
    """embedding's and index_select's indices are checked by the kernel on the device: the IndexError comes at
    the next copy to the host or synchronize (the backward skips the bad row), and the device stays usable."""
    w = jg.tensor(np.arange(12.0).reshape(4, 3), device="cuda", requires_grad=True)
    y = jg.nn.functional.embedding(jg.tensor([0, 4], device="cuda"), w)
    y.sum().backward()
    with pytest.raises(IndexError, match="^index out of range in self$"):
        jg.cuda.synchronize()
    np.testing.assert_array_equal(w.grad.cpu().numpy(), [[1.0] * 3] + [[0.0] * 3] * 3)
    z = jg.index_select(w.detach(), 0, jg.tensor([1, -1], device="cuda"))
    with pytest.raises(IndexError, match="^index out of range in self$"):
        z.cpu()
    good = jg.nn.functional.embedding(jg.tensor([3, 1], device="cuda"), w)
    np.testing.assert_array_equal(good.detach().cpu().numpy(), np.arange(12.0).reshape(4, 3)[[3, 1]])


def _views_on_cuda_share_their_base_and_version_counter():
    """A view of a CUDA tensor is a view (found by address, not through host copies): an in-place write to it
    bumps its base's version, and a saved tensor changed that way fails the backward, as on the CPU."""
    x = jg.zeros(4, 3, device="cuda")
    v = x.t()
    assert v._base is x
    v.add_(1)
    assert x._version == v._version == 1
    a = jg.ones(3, device="cuda", requires_grad=True)
    b = (a * 2).view(3)
    c = b.sin()  # saves b
    b.view(1, 3).add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        c.sum().backward()


def _copies_of_cuda_tensors_stay_on_the_device():
    """deepcopy of a CUDA module, and the copy a recorded in-place op takes of its input, are device arrays made
    by the backend (numba's device arrays have no copy(); the simulator's hand out a host array)."""
    m = jg.nn.Linear(3, 2).to("cuda")
    m2 = copy.deepcopy(m)
    for p, q in zip(m.parameters(), m2.parameters()):
        assert q.device == p.device and not isinstance(q._data, np.ndarray)
        np.testing.assert_array_equal(q.detach().cpu().numpy(), p.detach().cpu().numpy())
        with jg.no_grad():
            q.add_(1)
        np.testing.assert_array_equal(q.detach().cpu().numpy(), p.detach().cpu().numpy() + 1)
    x = jg.ones(3, device="cuda", requires_grad=True)
    y = x * 2
    y.mul_(3)
    assert not isinstance(y._data, np.ndarray)
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.cpu().numpy(), np.full(3, 6.0))


def _embedding_options_on_cuda_equal_cpu():
    """scale_grad_by_freq counts the indices where they live; max_norm renormalises the looked-up rows."""
    idx = np.array([[0, 2], [2, 4]])
    out = []
    for device in ("cpu", "cuda"):
        w = jg.tensor(np.linspace(-1, 1, 15).reshape(5, 3), device=device, requires_grad=True)
        y = jg.nn.functional.embedding(jg.tensor(idx, device=device), w, scale_grad_by_freq=True)
        (y * jg.arange(12.0, device=device).reshape(2, 2, 3)).sum().backward()
        w2 = jg.tensor(np.linspace(-1, 1, 15).reshape(5, 3), device=device)
        y2 = jg.nn.functional.embedding(jg.tensor(idx, device=device), w2, max_norm=0.5)
        out.append((w.grad.cpu().numpy(), y2.cpu().numpy(), w2.cpu().numpy()))
    for a, b in zip(*out):
        np.testing.assert_allclose(b, a, rtol=1e-12)


def _tensor_layout_on_cuda_as_on_cpu():
    """Strides, contiguity, addresses and element sizes of CUDA tensors, read from the device array (numba's
    device arrays have no NumPy flags, itemsize or __array_interface__), as on the CPU."""
    for device in ("cpu", "cuda"):
        x = jg.arange(12.0, device=device).reshape(3, 4)
        t = x.t()
        assert x.is_contiguous() and not t.is_contiguous() and t.stride() == (1, 4) and x.element_size() == 4
        assert x[1].data_ptr() - x.data_ptr() == 16 and x[1].storage_offset() == 4 and x.data_ptr() != 0
        c = t.contiguous()
        assert c.is_contiguous() and c.data_ptr() != x.data_ptr() and x.contiguous() is x
        np.testing.assert_array_equal(c.cpu().numpy(), np.arange(12.0).reshape(3, 4).T)
        with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
            jg.zeros(3, device=device).expand(2, 3).add_(1)


def _a_gradient_nothing_else_holds_becomes_the_leafs_grad_on_cuda():
    """AccumulateGrad takes over a gradient buffer that nothing else holds, as PyTorch's steals it, and copies one
    that a hook kept; later backward calls accumulate into it in place."""
    for _ in range(2):  # the kernels' first launches, which numba's dispatcher makes, out of the way
        w = jg.ones(3, 4, device="cuda", requires_grad=True)
        (w * 2).sum().backward()
        (w * 3).sum().backward()
    x = jg.ones(3, 4, device="cuda", requires_grad=True)
    seen, kept = [], []
    x.register_hook(lambda g: seen.append(g.data_ptr()))
    (x * 2).sum().backward()
    assert x.grad.data_ptr() == seen[0]
    (x * 3).sum().backward()
    assert x.grad.data_ptr() == seen[0]
    np.testing.assert_array_equal(x.grad.cpu().numpy(), np.full((3, 4), 5.0))
    y = jg.ones(3, device="cuda", requires_grad=True)
    y.register_hook(lambda g: kept.append(g))
    (y * 2).sum().backward()
    assert y.grad.data_ptr() != kept[0].data_ptr()
    y.grad.add_(1)
    np.testing.assert_array_equal(kept[0].cpu().numpy(), np.full(3, 2.0))
    a, b = jg.ones(3, device="cuda", requires_grad=True), jg.ones(3, device="cuda", requires_grad=True)
    (a + b).sum().backward()  # one gradient for both inputs: neither takes it over
    a.grad.add_(1)
    np.testing.assert_array_equal(b.grad.cpu().numpy(), np.ones(3))


if IN_CHILD:
    test_tensor_layout_on_cuda_as_on_cpu = _tensor_layout_on_cuda_as_on_cpu
    test_a_gradient_nothing_else_holds_becomes_the_leafs_grad_on_cuda = \
        _a_gradient_nothing_else_holds_becomes_the_leafs_grad_on_cuda
    test_embedding_options_on_cuda_equal_cpu = _embedding_options_on_cuda_equal_cpu
    test_copies_of_cuda_tensors_stay_on_the_device = _copies_of_cuda_tensors_stay_on_the_device
    test_views_on_cuda_share_their_base_and_version_counter = _views_on_cuda_share_their_base_and_version_counter
    test_indices_out_of_range_raise_at_the_next_wait = _indices_out_of_range_raise_at_the_next_wait
    test_dropout_on_cuda_equals_cpu = _dropout_on_cuda_equals_cpu
    test_op_on_cuda_matches_cpu = pytest.mark.parametrize("name,k", list(_cases()))(_op_on_cuda_matches_cpu)
    test_mlp_training_step_on_cuda_equals_cpu = _mlp_training_step_on_cuda_equals_cpu
    test_second_order_on_cuda_equals_cpu = _second_order_on_cuda_equals_cpu
else:
    test_cuda_ops_in_simulator = _cuda_ops_in_simulator
