"""What more than one test module uses: ``import helpers`` (tests/ is on sys.path: pyproject.toml's pytest
``pythonpath``; a test file run as a script puts it there itself). No test module imports another one.

- the op table's samples as tensors (ops/test_op_matrix.py, ops/test_ops.py, cuda/test_cuda_ops.py,
  transforms/test_vmap_entries.py), float16/bfloat16 values (ops/test_op_matrix.py, nn/test_amp.py);
- the arguments of each scalar function of kernels.scalars (cuda/test_cuda_kernels.py, cuda/test_cuda_ptx.py);
- launches under mpiexec and the checks each rank records (distributed/test_distributed_mpi.py,
  distributed/test_distributed_ddp.py);
- code run in a fresh interpreter, and PyTorch's message for a write through overlapping memory
  (nn/test_optim_state.py, package/test_kernel_runtime.py, autograd/test_engine_edge_cases.py).
"""
import os
import pathlib
import re
import signal
import subprocess
import sys
import textwrap
import time
import zlib

import numpy as np
import pytest

import jitgrad as jg

TESTS = pathlib.Path(__file__).resolve().parent  # tests/
ROOT = TESTS.parent  # the checkout: jitgrad/, kernels/, examples/, pyproject.toml


# ====================================================================== the op table's samples
def call_of(op):
    """The public callable a sample's (args, kwargs) is applied to."""
    return op.exposure.call or getattr(jg, op.name)


def samples_of(op, dtype):
    rng = np.random.default_rng(zlib.crc32(("%s-%s" % (op.name, np.dtype(dtype).name)).encode()))
    return op.tests.samples(rng, np.dtype(dtype).type) if op.tests.samples else []


def build(args, kwargs, leaf):
    """(args, kwargs) with each array replaced by ``leaf(array)``: arrays in args, also inside lists
    and tuples, and array-valued kwargs."""
    def walk(obj):
        if isinstance(obj, np.ndarray):
            return leaf(obj)
        if isinstance(obj, (list, tuple)):
            return type(obj)(walk(o) for o in obj)
        return obj
    return walk(args), {k: leaf(v) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()}


def outputs(result):
    return list(result) if isinstance(result, (tuple, list)) else [result]


def copy_layout(a):
    """A copy with the same memory layout (a transposed sample stays non-contiguous)."""
    c = np.empty_like(a, order="K")
    c[...] = a
    return c


def tensors_for(args, kwargs, requires_grad):
    """The sample as tensors (float ones requiring grad if asked) and the list of those inputs."""
    inputs = []

    def leaf(a):
        t = jg.from_numpy(copy_layout(a))
        if requires_grad and a.dtype.kind in "fc":
            t.requires_grad_()
            inputs.append(t)
        return t
    targs, tkwargs = build(args, kwargs, leaf)
    return targs, tkwargs, inputs


def as_function(op, args, kwargs):
    """(fn, inputs): fn(*inputs) runs the op on the sample with its float tensors replaced by ``inputs``."""
    targs, tkwargs, inputs = tensors_for(args, kwargs, True)
    ids = {id(t): k for k, t in enumerate(inputs)}
    call = call_of(op)

    def fn(*xs):
        def walk(obj):
            if isinstance(obj, jg.Tensor) and id(obj) in ids:
                return xs[ids[id(obj)]]
            if isinstance(obj, (list, tuple)):
                return type(obj)(walk(o) for o in obj)
            return obj
        return call(*walk(targs), **{k: walk(v) for k, v in tkwargs.items()})
    return fn, inputs


# ---------------------------------------------------------------------- float16 / bfloat16 values
def rounded(a, dt):
    """``a`` rounded to ``dt`` and back to float64: NumPy's float16, ml_dtypes' bfloat16 (beyond the range: inf)."""
    with np.errstate(over="ignore"):
        return np.asarray(a, dtype=np.float64).astype(dt.np).astype(np.float64)


def values(t):
    """A tensor's values as float64 NumPy (a bfloat16 tensor has no .numpy(), as in PyTorch)."""
    return t.detach().float().numpy().astype(np.float64) if t.dtype in (jg.float16, jg.bfloat16) else t.detach().numpy()


# ====================================================================== arguments of the scalar functions
# How to call each scalar function of kernels.scalars (the CUDA kernel tests and the PTX sweep).
BOOL_OUT = {"eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor", "logical_not", "isnan"}
INT_ONLY = {"int_div_floor", "int_div_trunc", "int_remainder"}
SCALAR_PARAMS = {"leaky_relu": 1, "leaky_relu_vjp": 1, "elu": 1, "elu_vjp": 1, "softplus": 2, "softplus_vjp": 2,
                 "add_alpha": 1, "clamp": 2, "clamp_vjp": 2, "polygamma": 1, "polygamma_vjp": 1, "mvlgamma": 1,
                 "logit_eps": 1, "logit_eps_vjp": 1}
PARAM_VALUES = {"leaky_relu": [0.1], "leaky_relu_vjp": [0.1], "elu": [1.5], "elu_vjp": [1.5], "softplus": [2.0, 1.0],
                "softplus_vjp": [2.0, 1.0], "add_alpha": [-0.5], "clamp": [-0.5, 0.7], "clamp_vjp": [-0.5, 0.7],
                "polygamma": [2.0], "polygamma_vjp": [1.0], "mvlgamma": [2.0], "logit_eps": [0.1], "logit_eps_vjp": [0.1]}
SHAPES = [(3, 4), (4,), (3, 1), (1, 4)]  # flat, then broadcast operands of 1 and 2 dims


def scalar_inputs(name, dtype, rng):
    """Arguments for scalar function ``name``: arrays broadcast against each other, then its
    scalar parameters; values inside the function's domain where it has one."""
    from jitgrad.kernels import scalars

    n = scalars.SCALARS[name].py_func.__code__.co_argcount - SCALAR_PARAMS.get(name, 0)
    args = []
    for k in range(n):
        shape = SHAPES[k]
        if name in INT_ONLY:
            a = rng.integers(-7, 8, shape)
            a = np.where(a == 0, 3, a) if k == 1 else a
        elif name.startswith("logical") or (name == "where" and k == 0) or (name == "mask_vjp" and k == 1):
            a = rng.random(shape) > 0.5
        elif name in ("pow", "pow_vjp_self", "pow_vjp_other") and k == 1:
            a = rng.uniform(0.2, 2.0, shape)
        elif name == "standard_gamma_grad":  # concentrations and samples: positive, across the kernel's three regimes
            a = rng.uniform(0.2, 12.0, shape)
        else:
            a = rng.uniform(-2, 2, shape)
            a[np.abs(a) < 1e-3] = 0.5  # keep away from 0 (1/x, log)
        if name.startswith("complex_"):  # a complex twin (kernels/scalars.py): complex values of dtype's width
            a = (a + 1j * rng.uniform(-2, 2, shape)).astype(np.complex64 if dtype == np.float32 else np.complex128)
        args.append(a.astype(dtype) if a.dtype.kind == "f" else a)
    args += [np.dtype(dtype).type(v) for v in PARAM_VALUES.get(name, [])]
    return args


# ====================================================================== multi-process tests under mpiexec
def launch(scenario, n, tmp_path, timeout=240, script=None):
    """Run ``scenario`` of ``script`` on ``n`` ranks (a list: the script's arguments); returns
    (returncode, stdout, stderr, seconds, passed checks per rank). The ranks find this module
    (tests/ is on their PYTHONPATH)."""
    import jitgrad.distributed as dist

    assert script is not None, "launch() runs a script: pass script="
    env = dict(os.environ, NUMBA_NUM_THREADS="1", OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
               MKL_NUM_THREADS="1")
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    args = scenario if isinstance(scenario, list) else [scenario, str(tmp_path)]
    cmd = [dist.find_mpiexec(), "-n", str(n), sys.executable, script] + args
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail("mpiexec -n %d %s did not finish in %d s\n%s\n%s" % (n, scenario, timeout, out, err))
    passed = []
    for r in range(n):
        path = os.path.join(str(tmp_path), "rank%d.txt" % r)
        passed.append(open(path).read().split() if os.path.exists(path) else [])
        path = os.path.join(str(tmp_path), "rank%d.err" % r)
        err += open(path).read() if os.path.exists(path) else ""
    return proc.returncode, out, err, time.monotonic() - start, passed


class Checks:
    """Records the checks this rank passed in its own file (the ranks' stdout interleave)."""

    def __init__(self, directory):
        import jitgrad.distributed as dist

        self.path = os.path.join(directory, "rank%d.txt" % dist.get_rank())
        open(self.path, "w").close()

    def passed(self, name):
        with open(self.path, "a") as f:
            f.write(name + "\n")


def expect_error(fn, kind, text):
    try:
        fn()
    except kind as e:
        assert text in str(e), str(e)
        return
    raise AssertionError("expected %s(%r)" % (kind.__name__, text))


# ====================================================================== fresh interpreters
def run_code(code, timeout=240, **env):
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


# PyTorch's message for an in-place write into a tensor whose elements share memory (an expanded tensor)
OVERLAP = ("unsupported operation: more than one element of the written-to tensor refers to a single memory "
           "location. Please clone() the tensor before performing the operation.")


def kernel_names(compiled):
    """Names of compiled kernels ('_adam_3f2a9c01de-float32') without the source hash that generated kernels
    carry in their names ('_adam-float32')."""
    return sorted(re.sub(r"_[0-9a-f]{10}-", "-", k) for k in compiled)


def compiled_autograd_on(threshold=2):
    """Compiled autograd on, plans built on a graph's ``threshold``-th backward, every key and plan forgotten; the
    previous switches restored after (a generator for a fixture: ``yield from``)."""
    from jitgrad.compiler import compiled_autograd as ca
    prev = dict(ca.SETTINGS)
    ca.reset()
    jg.autograd.set_compiled_autograd(True, threshold=threshold)
    try:
        yield
    finally:
        ca.SETTINGS.update(prev)
        ca.reset()
