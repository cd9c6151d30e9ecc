"""Reliability at the kernel boundary and in the engine.

Optimizer kernels never see arrays they would index out of bounds; numba's threading layer survives
fork() and concurrent threads; gradient accumulation is atomic per leaf; gradients returned by custom
Functions and hooks are validated as PyTorch validates them; an expanded ``.grad`` is never written
through; ``next_functions`` holds ``(None, 0)`` for inputs that need no gradient. Expected messages
are PyTorch's. Whatever could crash the interpreter runs in a subprocess.
"""
import functools
import json
import os
import pathlib
import re
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import jitgrad as jg
from jitgrad import optim
from jitgrad.autograd.function import once_differentiable

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _run(code, timeout=240, **env):
    """Run ``code`` in a fresh interpreter (numba's layer choice is per process); env None removes a variable."""
    e = dict(os.environ)
    e.pop("NUMBA_THREADING_LAYER", None)
    for k, v in env.items():
        if v is None:
            e.pop(k, None)
        else:
            e[k] = v
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=e,
                          cwd=str(ROOT), timeout=timeout)


# ------------------------------------------------------------------ 1. optimizer state that does not fit
SIZE_MISMATCH = "The size of tensor a (%d) must match the size of tensor b (%d) at non-singleton dimension %d"
OUTPUT_MISMATCH = "output with shape [%s] doesn't match the broadcast shape [%s]"
OVERLAP = ("unsupported operation: more than one element of the written-to tensor refers to a single memory "
           "location. Please clone() the tensor before performing the operation.")

# (optimizer constructor source, state key it keeps shaped like the parameter)
OPTIMIZERS = {
    "sgd_momentum": ("optim.SGD(ps, lr=0.1, momentum=0.9)", "momentum_buffer"),
    "adam_exp_avg": ("optim.Adam(ps)", "exp_avg"),
    "adam_exp_avg_sq": ("optim.Adam(ps)", "exp_avg_sq"),
    "adamw_amsgrad": ("optim.AdamW(ps, amsgrad=True)", "max_exp_avg_sq"),
    "rmsprop": ("optim.RMSprop(ps)", "square_avg"),
    "rmsprop_centered": ("optim.RMSprop(ps, centered=True)", "grad_avg"),
    "rmsprop_momentum": ("optim.RMSprop(ps, momentum=0.9)", "momentum_buffer"),
    "adagrad": ("optim.Adagrad(ps)", "sum"),
}


def test_optimizer_state_of_another_size_raises_instead_of_writing_out_of_bounds():
    # Before the check, a 10-element momentum buffer for a 10**6-element parameter was written a
    # million elements long: SIGSEGV or a corrupted heap. Every case runs in one child process.
    code = """
        import json
        import jitgrad as jg
        from jitgrad import optim

        OPTIMIZERS = %r

        def attempt(make, key, pshape, bad, data=False):
            p = jg.zeros(*pshape, requires_grad=True)
            ps = [p]
            opt = eval(make)
            p.grad = jg.ones(*pshape)
            if data:
                p.data = jg.zeros(*bad)
            else:
                opt.step()
                opt.state[p][key] = jg.zeros(*bad)
            try:
                opt.step()
            except RuntimeError as e:
                return str(e)
            return "no error"

        out = {}
        for name, (make, key) in OPTIMIZERS.items():
            out[name + " 10"] = attempt(make, key, (10 ** 6,), (10,))
            out[name + " 1"] = attempt(make, key, (1000,), (1,))
            out[name + " 2000"] = attempt(make, key, (1000,), (2000,))
            out[name + " 2d"] = attempt(make, key, (4, 5), (4, 6))
            out[name + " same numel"] = attempt(make, key, (4, 5), (20,))
        for name in ("sgd", "sgd_momentum", "adam_exp_avg", "rmsprop", "adagrad"):
            make = "optim.SGD(ps, lr=0.1)" if name == "sgd" else OPTIMIZERS[name][0]
            out[name + " data 10"] = attempt(make, None, (10 ** 6,), (10,), data=True)
            out[name + " data 1"] = attempt(make, None, (1000,), (1,), data=True)
        print(json.dumps(out))
    """ % (OPTIMIZERS,)
    r = _run(code)
    assert r.returncode == 0, "child died (%d): %s" % (r.returncode, r.stderr[-2000:])
    got = json.loads(r.stdout.strip().splitlines()[-1])
    for name in OPTIMIZERS:
        assert got[name + " 10"] == SIZE_MISMATCH % (10, 10 ** 6, 0)
        assert got[name + " 1"] == OUTPUT_MISMATCH % ("1", "1000")
        assert got[name + " 2000"] == SIZE_MISMATCH % (2000, 1000, 0)
        assert got[name + " 2d"] == SIZE_MISMATCH % (6, 5, 1)
        assert got[name + " same numel"] == SIZE_MISMATCH % (20, 5, 1)
    for name in ("sgd", "sgd_momentum", "adam_exp_avg", "rmsprop", "adagrad"):
        assert got[name + " data 10"] == SIZE_MISMATCH % (10, 10 ** 6, 0)
        assert got[name + " data 1"] == OUTPUT_MISMATCH % ("1", "1000")


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_optimizer_state_of_another_dtype_is_a_runtime_error(name):
    make, key = OPTIMIZERS[name]
    p = jg.zeros(8, requires_grad=True)
    ps = [p]  # noqa: F841  (read by eval)
    opt = eval(make)
    p.grad = jg.ones(8)
    opt.step()
    opt.state[p][key] = jg.zeros(8, dtype=jg.int64)
    with pytest.raises(RuntimeError, match=r"^result type Float can't be cast to the desired output type Long$"):
        opt.step()
    opt.state[p][key] = jg.zeros(8, dtype=jg.float64)
    with pytest.raises(RuntimeError, match=r"^expected dtype float for `%s` but got dtype double$" % key):
        opt.step()


def test_overlapping_optimizer_state_is_not_written_through():
    p = jg.zeros(3, requires_grad=True)
    p.grad = jg.ones(3)
    opt = optim.SGD([p], lr=0.1, momentum=0.9)
    opt.state[p]["momentum_buffer"] = jg.zeros(1).expand(3)
    with pytest.raises(RuntimeError, match="^" + re.escape(OVERLAP) + "$"):
        opt.step()
    assert p.tolist() == [0.0, 0.0, 0.0]


def test_strided_optimizer_state_is_updated_in_place():
    p = jg.zeros(2, 3, requires_grad=True)
    p.grad = jg.ones(2, 3)
    opt = optim.SGD([p], lr=0.1, momentum=0.9)
    base = jg.ones(3, 2)
    opt.state[p]["momentum_buffer"] = base.t()  # a transposed buffer: PyTorch updates it in place
    opt.step()
    np.testing.assert_allclose(base.numpy(), np.full((3, 2), 1.9), rtol=1e-6)
    np.testing.assert_allclose(p.detach().numpy(), np.full((2, 3), -0.19), rtol=1e-6)


# ------------------------------------------------------------------ 2. numba's threading layer
PARALLEL_OP = """
import jitgrad as jg
N = 1 << 17  # above PARALLEL_THRESHOLD: the prange kernels run
x = jg.ones(N)
assert (x * 2).sum().item() == 2 * N
"""


def test_default_threading_layer_is_tbb():
    r = _run(PARALLEL_OP + "import numba; print(numba.threading_layer())")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["tbb"]


def test_an_explicit_threading_layer_is_kept():
    r = _run(PARALLEL_OP + "import numba; print(numba.threading_layer())", NUMBA_THREADING_LAYER="workqueue")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["workqueue"]


def test_a_missing_tbb_falls_back_to_a_fork_safe_layer():
    code = ("import sys; sys.modules['numba.np.ufunc.tbbpool'] = None\n" + PARALLEL_OP
            + "import numba; print(numba.threading_layer())")
    r = _run(code)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["workqueue"]


REALLOCATE = """
import resource
import numpy as np
import jitgrad.kernels.config as config

def step():  # a step's large arrays: allocated, written, freed
    arrays = [np.empty(1 << 22, np.float32) for _ in range(3)]
    for a in arrays:
        a.fill(1.0)

step()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(3):
    step()
print(config.FREED_MEMORY_KEPT, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc options")
def test_freed_arrays_are_reused_without_page_faults():
    # three 16 MiB arrays freed and allocated again: glibc's defaults give their pages back and fault them in
    # anew (about 12,000 faults over three steps); kept, the next step finds them
    r = _run(REALLOCATE)
    assert r.returncode == 0, r.stderr
    kept, faults = r.stdout.split()
    assert kept == "True" and int(faults) < 500
    r = _run(REALLOCATE, JITGRAD_KEEP_FREED_MEMORY="0")
    assert r.returncode == 0, r.stderr
    kept, faults = r.stdout.split()
    assert kept == "False" and int(faults) > 3000


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc options")
def test_malloc_settings_of_the_user_are_kept():
    r = _run("import jitgrad.kernels.config as c; print(c.FREED_MEMORY_KEPT)", MALLOC_TRIM_THRESHOLD_="131072")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False"]


FORK_CHILD = PARALLEL_OP + """
import os
pid = os.fork()
if pid == 0:
    ok = (x * 3).sum().item() == 3 * N and (x + 1).mean().item() == 2.0
    os._exit(0 if ok else 3)
_, status = os.waitpid(pid, 0)
print("child", os.waitstatus_to_exitcode(status))
"""


@pytest.mark.parametrize("layer", [None, "workqueue"])
def test_a_forked_child_runs_parallel_kernels(layer):
    r = _run(FORK_CHILD, timeout=120, NUMBA_THREADING_LAYER=layer)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["child", "0"], r.stdout + r.stderr


def test_a_multiprocessing_fork_worker_runs_parallel_kernels():
    code = PARALLEL_OP + """
import multiprocessing as mp

def work(n):
    return (jg.ones(N) * n).sum().item()

with mp.get_context("fork").Pool(2) as pool:
    print(pool.map(work, [1, 2, 3]))
"""
    r = _run(code, timeout=120)
    assert r.returncode == 0, r.stderr
    n = 1 << 17
    assert r.stdout.strip() == str([float(n), 2.0 * n, 3.0 * n])


THREADS = PARALLEL_OP + """
import threading, time
errors = []

def work(k):
    y = jg.full((N,), float(k))
    end = time.perf_counter() + 1.5
    while time.perf_counter() < end:
        s = (y * 2 + 1).relu().sum().item()  # exact in float32
        if s != (2 * k + 1) * N:
            errors.append(s)

ts = [threading.Thread(target=work, args=(k,)) for k in range(4)]
for t in ts:
    t.start()
for t in ts:
    t.join()
print("errors", len(errors))
"""


@pytest.mark.parametrize("layer", [None, "workqueue"])
def test_threads_run_parallel_kernels_concurrently(layer):
    r = _run(THREADS, timeout=120, NUMBA_THREADING_LAYER=layer)
    assert r.returncode == 0, "exit %d: %s" % (r.returncode, r.stderr[-2000:])
    assert r.stdout.split() == ["errors", "0"]


# ------------------------------------------------------------------ 3. concurrent accumulation into one leaf
def test_concurrent_backward_into_a_shared_leaf_loses_no_update():
    n, threads, calls = 1 << 15, 4, 150
    w = jg.zeros(n, requires_grad=True)
    x = jg.ones(n)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads often: the read-modify-write of .grad interleaves

    def work():
        for _ in range(calls):
            (w * x).sum().backward()
    try:
        ts = [threading.Thread(target=work) for _ in range(threads)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    assert np.all(w.grad.numpy() == threads * calls)


# ------------------------------------------------------------------ 4. gradients returned by Functions and hooks
def _function_returning(value):
    class F(jg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            return value(g) if callable(value) else value
    return F


@pytest.mark.parametrize("shape, grad_shape", [((3,), (2,)), ((3,), (1,)), ((3,), ()), ((3,), (3, 1)),
                                               ((1, 3), (1,)), ((1, 3), (3,)), ((1,), ())])
def test_function_gradient_of_an_incompatible_shape(shape, grad_shape):
    F = _function_returning(lambda g: jg.ones(grad_shape))
    x = jg.ones(shape, requires_grad=True)
    msg = ("Function FBackward returned an invalid gradient at index 0 - got [%s] but expected shape compatible "
           "with [%s]" % (", ".join(map(str, grad_shape)), ", ".join(map(str, shape))))
    with pytest.raises(RuntimeError) as e:
        F.apply(x).sum().backward()
    assert str(e.value) == msg
    assert x.grad is None


@pytest.mark.parametrize("shape, grad_shape, expected", [((3,), (1, 3), [1.0] * 3), ((3,), (2, 3), [2.0] * 3),
                                                         ((), (1,), 1.0), ((), (2,), 2.0), ((), (1, 1), 1.0)])
def test_function_gradient_that_sums_to_the_input_shape(shape, grad_shape, expected):
    F = _function_returning(lambda g: jg.ones(grad_shape))
    x = jg.ones(shape, requires_grad=True)
    F.apply(x).sum().backward()
    assert x.grad.shape == x.shape
    assert x.grad.tolist() == expected


@pytest.mark.parametrize("value, name", [(2.0, "float"), (2, "int"), (np.ones(3), "numpy.ndarray"),
                                         ([1.0, 2.0, 3.0], "list"), ("a", "str")])
def test_function_gradient_that_is_not_a_tensor(value, name):
    F = _function_returning(value)
    x = jg.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError) as e:
        F.apply(x).sum().backward()
    assert str(e.value) == "expected Variable or None (got %s)" % name


def test_function_gradient_for_an_input_that_is_not_a_tensor():
    class F(jg.autograd.Function):
        @staticmethod
        def forward(ctx, x, n):
            return x * n

        @staticmethod
        def backward(ctx, g):
            return g, jg.ones(1)
    x = jg.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError) as e:
        F.apply(x, 2).sum().backward()
    assert str(e.value) == ("function FBackward returned a gradient different than None at position 2, but the "
                            "corresponding forward input was not a Variable")


@pytest.mark.parametrize("leaf", [True, False])
@pytest.mark.parametrize("value, error, msg", [
    (lambda g: jg.ones(2), RuntimeError, "hook '<lambda>' has changed the size of value"),
    (lambda g: jg.ones(1), RuntimeError, "hook '<lambda>' has changed the size of value"),
    (lambda g: jg.tensor(2.0), RuntimeError, "hook '<lambda>' has changed the size of value"),
    (lambda g: jg.ones(1, 3), RuntimeError, "hook '<lambda>' has changed the size of value"),
    (lambda g: 2.0, TypeError, "expected Variable, but hook returned 'float'"),
    (lambda g: np.ones(3, np.float32), TypeError, "expected Variable, but hook returned 'numpy.ndarray'"),
    (lambda g: jg.ones(2, dtype=jg.float64), RuntimeError,
     "hook '<lambda>' has changed the type of value (was jitgrad.FloatTensor got jitgrad.DoubleTensor)"),
])
def test_tensor_hook_returning_an_invalid_gradient(leaf, value, error, msg):
    x = jg.ones(3, requires_grad=True)
    y = x * 2
    (x if leaf else y).register_hook(value)
    with pytest.raises(error) as e:
        y.sum().backward()
    assert str(e.value) == msg
    assert x.grad is None


def test_hook_without_a_name_and_node_hooks():
    x = jg.ones(3, requires_grad=True)
    x.register_hook(functools.partial(lambda g: jg.ones(2)))
    with pytest.raises(RuntimeError) as e:
        (x * 2).sum().backward()
    assert str(e.value) == "hook '<unknown>' has changed the size of value"

    y = x * 2
    y.grad_fn.register_prehook(lambda go: (2.0,))
    with pytest.raises(TypeError) as e:
        y.sum().backward()
    assert str(e.value) == "expected Variable, but hook returned 'float'"

    y = x * jg.ones(3)
    y.grad_fn.register_hook(lambda gi, go: (gi[0], jg.ones(3)))  # the second input needs no gradient
    with pytest.raises(RuntimeError) as e:
        y.sum().backward()
    assert str(e.value) == "can't replace a None gradient with a non-None value"


# ------------------------------------------------------------------ 5. accumulating into an expanded .grad
def test_accumulating_into_an_expanded_grad_raises_as_pytorch_does():
    w = jg.ones(3, requires_grad=True)
    base = jg.zeros(1)
    w.grad = base.expand(3)
    with pytest.raises(RuntimeError) as e:
        (w * jg.tensor([1.0, 2.0, 3.0])).sum().backward()
    assert str(e.value) == OVERLAP
    assert base.tolist() == [0.0]


def test_accumulating_into_an_expanded_grad_while_building_a_graph():
    w = jg.ones(3, requires_grad=True)
    w.grad = jg.zeros(1).expand(3)
    with pytest.warns(UserWarning, match="reference cycle"):
        (w * jg.tensor([1.0, 2.0, 3.0])).sum().backward(create_graph=True)
    assert w.grad.tolist() == [1.0, 2.0, 3.0]


def test_accumulating_into_a_transposed_grad_writes_it_in_place():
    w = jg.ones(2, 3, requires_grad=True)
    base = jg.zeros(3, 2)
    w.grad = base.t()
    (w * 2).sum().backward()
    assert w.grad.tolist() == [[2.0] * 3] * 2
    assert base.tolist() == [[2.0] * 2] * 3  # PyTorch keeps the strided grad and adds into it


def test_accumulating_into_a_read_only_grad_goes_out_of_place():
    w = jg.ones(3, requires_grad=True)
    arr = np.zeros(3, np.float32)
    arr.flags.writeable = False
    with pytest.warns(UserWarning, match="not writable"):
        w.grad = jg.from_numpy(arr)
    (w * 2).sum().backward()
    assert w.grad.tolist() == [2.0] * 3
    assert arr.tolist() == [0.0] * 3


# ------------------------------------------------------------------ 6. next_functions
def _names(node):
    return [(None if fn is None else type(fn).__name__, k) for fn, k in node.next_functions]


def test_next_functions_pairs_for_inputs_without_grad():
    x = jg.ones(3, requires_grad=True)
    w = jg.ones(3)
    assert _names((x * 2).grad_fn) == [("AccumulateGrad", 0), (None, 0)]
    assert _names((w * x).grad_fn) == [(None, 0), ("AccumulateGrad", 0)]
    assert _names(jg.cat([x, w]).grad_fn) == [("AccumulateGrad", 0), (None, 0)]
    z = x.clone()
    z[0] = w[1]
    assert _names(z.grad_fn) == [("CloneBackward0", 0), (None, 0)]

    class F(jg.autograd.Function):
        @staticmethod
        def forward(ctx, a, n, b):
            return a * n * b

        @staticmethod
        @once_differentiable
        def backward(ctx, g):
            return g * 2, None, None
    y = F.apply(x, 2, w)
    assert _names(y.grad_fn) == [("AccumulateGrad", 0), (None, 0)]  # PyTorch lists tensor inputs only
    y.sum().backward()
    assert x.grad.tolist() == [2.0] * 3

    (w * x * 3).sum().backward()  # the engine still skips the entries without a node
    assert x.grad.tolist() == [5.0] * 3


def test_device_optimizer_state_is_checked_in_the_simulator():
    code = """
        import jitgrad as jg
        from jitgrad import optim
        p = jg.zeros(1000, requires_grad=True, device="cuda")
        p.grad = jg.ones(1000, device="cuda")
        opt = optim.Adam([p])
        opt.step()
        opt.state[p]["exp_avg"] = jg.zeros(10, device="cuda")
        try:
            opt.step()
        except RuntimeError as e:
            print(e)
        q = jg.zeros(2, 3, requires_grad=True, device="cuda")
        q.grad = jg.ones(2, 3, device="cuda")
        opt = optim.SGD([q], lr=0.1, momentum=0.9)
        base = jg.ones(3, 2, device="cuda")
        opt.state[q]["momentum_buffer"] = base.t()
        opt.step()
        print(base.cpu().tolist())
    """
    r = _run(code, NUMBA_ENABLE_CUDASIM="1")
    assert r.returncode == 0, r.stderr[-3000:]
    lines = r.stdout.strip().splitlines()
    assert lines[0] == SIZE_MISMATCH % (10, 1000, 0)
    np.testing.assert_allclose(json.loads(lines[1]), np.full((3, 2), 1.9), rtol=1e-6)
