"""jitgrad.compile on device='cuda': fused groups become generated CUDA kernels, the other ops call
the CUDA backend, and compiled values and gradients equal eager CUDA's (and the CPU's).

Without a GPU the checks run in a child pytest process under numba's CUDA simulator (tiny sizes),
which also records every fused kernel it generated; a second child without the simulator compiles
each recorded kernel to PTX for compute capability 9.0 with the argument types of its launch. Set
JITGRAD_CUDA_TESTS=gpu on a machine with a GPU to run the checks on it for real.
"""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import jitgrad as jg

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the checkout

pytestmark = pytest.mark.cuda

IN_CHILD = os.environ.get("NUMBA_ENABLE_CUDASIM") == "1" or os.environ.get("JITGRAD_CUDA_TESTS") == "gpu"
RECORD = os.environ.get("JITGRAD_FUSED_RECORD")  # where the simulator child writes the fused kernels it built


def _chain(x, w, b):
    return ((x * w + b).tanh() ** 2 * x.sigmoid()).sum() + (x.relu() * 2).mean()


def _scalars(x, y):
    e = [x.exp(), y.exp(), (x * y).exp()]
    s = e[0] + e[1] + e[2]
    return (e[0] / s + jg.nn.functional.softplus(y) * 0.5 - x.clamp(min=0.1)).sum()


def _values(fn, arrays, device):
    ts = [jg.tensor(a, device=device, requires_grad=True) for a in arrays]
    y = fn(*ts)
    y.backward()
    return y.item(), [t.grad.cpu().numpy() for t in ts], y


def _compiled_matches_eager(fn, arrays):
    ref_cpu, grads_cpu, _ = _values(fn, arrays, "cpu")
    ref, grads, _ = _values(fn, arrays, "cuda")
    compiled = jg.compile(fn)
    for _ in range(2):  # the trace, then the compiled plan
        val, cgrads, y = _values(compiled, arrays, "cuda")
        assert y.device.type == "cuda" and type(y.grad_fn).__name__ == "CompiledFunctionBackward"
        assert val == pytest.approx(ref, rel=1e-6)
        assert val == pytest.approx(ref_cpu, rel=1e-5)
        for a, b, c in zip(cgrads, grads, grads_cpu):
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
            np.testing.assert_allclose(a, c, rtol=1e-5, atol=1e-6)
    return compiled


def _elementwise_chain_with_a_broadcast_bias():
    rng = np.random.default_rng(0)
    x, w = (rng.standard_normal((3, 5)).astype(np.float32) for _ in range(2))
    b = rng.standard_normal(5).astype(np.float32)
    compiled = _compiled_matches_eager(_chain, [x, w, b])
    report = jg.compiler.explain(compiled, *[jg.tensor(a, device="cuda", requires_grad=True) for a in (x, w, b)])
    assert "device cuda" in report and "fused_cuda_" in report and "XP.launch_fused" in report
    assert report.graph_breaks == []


def _zero_dim_values():
    _compiled_matches_eager(_scalars, [np.float32(0.3), np.float32(-1.2)])
    _compiled_matches_eager(_scalars, [np.array([0.3, 2.0], np.float32), np.array([-1.2, 0.4], np.float32)])


def _split_chain(x, w):
    a = (x * w + 1).tanh() * x  # groups split by reductions over an axis: later groups take dead buffers
    s = a.sum(1, keepdim=True)
    b = (a - s * 0.1).sigmoid() * 2
    m = b.mean(0, keepdim=True)
    c = (b * m).exp() - b
    r = c.sum(1, keepdim=True)
    return ((c * r * 0.1).sin() + c).sum()


def _device_plans_reuse_buffers():
    rng = np.random.default_rng(1)
    compiled = _compiled_matches_eager(_split_chain, [rng.standard_normal((4, 6)).astype(np.float32)
                                                     for _ in range(2)])
    var = next(iter(compiled._jitgrad_compiled.variants.values()))
    assert "# reuses v" in var.bplan.source and "# in place: writes over v" in var.bplan.source


def _module_on_cuda_matches_cpu():
    def run(device, compiled):
        jg.manual_seed(0)
        model = jg.nn.Sequential(jg.nn.Linear(6, 5), jg.nn.Tanh(), jg.nn.Linear(5, 3)).double().to(device)
        fn = jg.compile(model) if compiled else model
        opt = jg.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        x = jg.tensor(np.linspace(-1, 1, 24).reshape(4, 6), dtype=jg.float64, device=device)
        y = jg.tensor([0, 2, 1, 2], device=device)
        for _ in range(3):
            opt.zero_grad()
            loss = jg.nn.functional.cross_entropy(fn(x), y)
            loss.backward()
            opt.step()
        return loss.item(), [p.detach().cpu().numpy() for p in model.parameters()]
    loss_cpu, params_cpu = run("cpu", False)
    loss_cuda, params_cuda = run("cuda", True)
    assert loss_cuda == pytest.approx(loss_cpu, rel=1e-10)
    for a, b in zip(params_cpu, params_cuda):
        np.testing.assert_allclose(b, a, rtol=1e-9, atol=1e-12)


def _whole_step_on_cuda_matches_cpu():
    """A compiled whole training step (zero_grad, forward, backward, Adam's update) on CUDA tensors."""
    def run(device, compiled):
        jg.manual_seed(0)
        model = jg.nn.Sequential(jg.nn.Linear(6, 5), jg.nn.ReLU(), jg.nn.Linear(5, 3)).double().to(device)
        opt = jg.optim.Adam(model.parameters(), lr=1e-2)
        x = jg.tensor(np.linspace(-1, 1, 24).reshape(4, 6), dtype=jg.float64, device=device)
        y = jg.tensor([0, 2, 1, 2], device=device)

        def step(x, y):
            opt.zero_grad()
            loss = jg.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return loss
        fn = jg.compile(step) if compiled else step
        losses = [fn(x, y).item() for _ in range(3)]
        if compiled:
            assert jg.compiler.explain(step, x, y).effects == ["zero_grad", "backward", "step"]
        return losses, [p.detach().cpu().numpy() for p in model.parameters()]
    losses_cpu, params_cpu = run("cpu", False)
    losses_cuda, params_cuda = run("cuda", True)
    np.testing.assert_allclose(losses_cuda, losses_cpu, rtol=1e-10)
    for a, b in zip(params_cpu, params_cuda):
        np.testing.assert_allclose(b, a, rtol=1e-9, atol=1e-12)


def _tensors_on_two_devices_run_eagerly():
    def f(x, y):
        return x * 2 + y.sum().cpu()
    compiled = jg.compile(f)
    x = jg.ones(3)
    y = jg.ones(3, device="cuda")
    np.testing.assert_array_equal(compiled(x, y).numpy(), f(x, y).numpy())
    report = jg.compiler.explain(compiled, x, y)
    assert report.graph_breaks


def _the_graph_before_a_break_on_cuda():
    """A value read ends the graph: on CUDA tensors too, the part before it runs as a device plan and the rest
    eagerly, with the CPU's values and gradients on both branches."""
    def f(x, w):
        h = (x * w).tanh() * 2 + x
        if h.sum() > 0:
            return (h * h).sum()
        return (h.exp() * w).sum()
    compiled = jg.compile(f)
    rng = np.random.default_rng(5)
    for shift in (2.0, -2.0, 1.0):
        arrays = [(rng.standard_normal(6) + shift).astype(np.float32), np.full(6, 0.5, np.float32)]
        want, wgrads, _ = _values(f, arrays, "cpu")
        got, grads, y = _values(compiled, arrays, "cuda")
        assert y.device.type == "cuda" and got == pytest.approx(want, rel=1e-5)
        for a, b in zip(grads, wgrads):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    (var,) = compiled._jitgrad_compiled.variants.values()
    assert var.prefix


def _record_fused_kernels():
    """Wraps the CUDA backend's fused_kernel and launch_fused so that every generated kernel is written
    to RECORD (its source parts and the element types of its launch), for the PTX child."""
    from jitgrad.kernels.cuda import elementwise as E
    made, kernels = {}, {}
    build, launch = E.fused_kernel, E.launch_fused

    def fused_kernel(name, params, pre, body, fns):
        k = build(name, params, pre, body, fns)
        made[k.py_func.__name__] = (name, list(params), list(pre), list(body), list(fns))
        return k

    def launch_fused(kernel, n, *args):
        kernels[kernel.py_func.__name__] = (made[kernel.py_func.__name__], [str(a.dtype) for a in args])
        launch(kernel, n, *args)

    E.fused_kernel, E.launch_fused = fused_kernel, launch_fused
    from jitgrad.kernels.cuda import backend
    backend.fused_kernel, backend.launch_fused = fused_kernel, launch_fused
    return kernels


if IN_CHILD:
    @pytest.fixture(scope="module", autouse=True)
    def _recorded():
        kernels = _record_fused_kernels()
        yield
        if RECORD:
            with open(RECORD, "w") as f:
                json.dump(list(kernels.values()), f)

    test_elementwise_chain_with_a_broadcast_bias = _elementwise_chain_with_a_broadcast_bias
    test_zero_dim_values = _zero_dim_values
    test_device_plans_reuse_buffers = _device_plans_reuse_buffers
    test_module_on_cuda_matches_cpu = _module_on_cuda_matches_cpu
    test_whole_step_on_cuda_matches_cpu = _whole_step_on_cuda_matches_cpu
    test_tensors_on_two_devices_run_eagerly = _tensors_on_two_devices_run_eagerly
    test_the_graph_before_a_break_on_cuda = _the_graph_before_a_break_on_cuda
else:
    def test_compiled_cuda_in_simulator_then_its_kernels_compile_to_ptx(tmp_path):
        record = str(tmp_path / "fused.json")
        env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1", JITGRAD_FUSED_RECORD=record,
                   JITGRAD_COMPILE_CACHE=str(tmp_path / "compiled"))
        r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", __file__],
                           capture_output=True, text=True, env=env, cwd=ROOT)
        assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-3000:]
        kernels = json.load(open(record))
        assert len(kernels) >= 4
        env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
        r = subprocess.run([sys.executable, __file__, record], capture_output=True, text=True, env=env, timeout=1800)
        assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-8000:]
        assert json.loads(r.stdout.strip().splitlines()[-1]) == {"compiled": len(kernels), "failures": []}


def _compile_recorded(record):
    """The PTX child: each recorded fused kernel built again and compiled for compute capability 9.0."""
    import types

    from numba import cuda
    from numba.core import types as nt
    from numba.np.numpy_support import from_dtype
    if not cuda.is_available():
        import numba.cuda.dispatcher as dispatcher
        dispatcher.get_current_device = lambda: types.SimpleNamespace(compute_capability=(9, 0))
    from jitgrad.kernels.cuda import elementwise as E
    failures = []
    kernels = json.load(open(record))
    for (name, params, pre, body, fns), dtypes in kernels:
        kernel = E.fused_kernel(name, params, pre, body, fns)
        sig = (nt.int64,) + tuple(nt.Array(from_dtype(np.dtype(d)), 1, "C") for d in dtypes)
        try:
            cuda.compile_ptx(kernel.py_func, sig, cc=(9, 0))
        except Exception as e:  # report every failure
            failures.append("%s%s: %s: %s" % (name, sig, type(e).__name__, str(e)[:1500]))
    print(json.dumps({"compiled": len(kernels), "failures": failures}))


if __name__ == "__main__":
    _compile_recorded(sys.argv[1])
