"""The backend protocol (jitgrad/kernels/protocol.py): both backends hold every function it names, taking its
positional parameters, and every function gives on CUDA (the simulator here, a GPU with
JITGRAD_CUDA_TESTS=gpu) what it gives on the CPU, for the arguments the op table really passes: those are
recorded while small programs (every op family) run on the CPU backend, then replayed on both.
"""
import copy
import inspect
import os
import subprocess
import sys

import numpy as np
import pytest

from jitgrad.kernels import cpu, protocol

IN_CHILD = os.environ.get("NUMBA_ENABLE_CUDASIM") == "1" or os.environ.get("JITGRAD_CUDA_TESTS") == "gpu"


def _functions(module):
    """(name, function) of every protocol function of a backend module, the submodules' included."""
    out = [(n, getattr(module, n, None)) for n in protocol.FUNCTIONS]
    for sub, names in protocol.SUBMODULES.items():
        out += [("%s.%s" % (sub, n), getattr(getattr(module, sub, None), n, None)) for n in names]
    return out


def _check_signatures(module):
    stubs = dict(vars(protocol.Backend))
    for name, fn in _functions(module):
        assert fn is not None, "%s has no %s" % (module.__name__, name)
        stub = stubs.get(name)
        if stub is None:
            continue
        want = [p for p in list(inspect.signature(stub).parameters)[1:]
                if inspect.signature(stub).parameters[p].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD]
        try:
            params = list(inspect.signature(fn).parameters.values())
        except (TypeError, ValueError):  # (a NumPy builtin without a signature: NumPy's own parameters)
            continue
        positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        varargs = any(p.kind is p.VAR_POSITIONAL for p in params)
        assert len(positional) >= len(want) or varargs, "%s.%s takes %s, the protocol %s" % (
            module.__name__, name, [p.name for p in positional], want)


def test_the_cpu_backend_holds_the_protocol():
    _check_signatures(cpu)


# ------------------------------------------------------------------ recorded calls, replayed on both backends
def _programs():
    """Small programs through every op family, on the CPU, forward and backward."""
    import jitgrad as jg
    import jitgrad.nn.functional as F
    from jitgrad import nn
    jg.manual_seed(0)
    x = jg.randn(2, 3, 4, 4, requires_grad=True)
    y = jg.randn(3, 4, requires_grad=True)
    idx = jg.tensor([0, 2, 2])
    parts = [
        lambda: (y.exp() * y.sum(1, keepdim=True)).amax(),
        lambda: y.cumsum(1).sum() + y.cumprod(0).sum(),
        lambda: (F.softmax(y, 1) * F.log_softmax(y, 0)).sum(),
        lambda: F.scaled_dot_product_attention(y[None, None], y[None, None], y[None, None], is_causal=True).sum(),
        lambda: F.layer_norm(y, (4,), y[0], y[1]).sum() + (F.layer_norm(y, (4,)) * y).sum(),
        lambda: (y[idx] * 2).sum() + y.index_select(0, idx).sum() + y.gather(1, jg.tensor([[0], [1], [3]])).sum(),
        lambda: jg.zeros(3, 4).scatter_add(1, jg.tensor([[0, 1], [1, 1], [3, 0]]), y[:, :2]).sum() + y.diagonal().sum(),
        lambda: (jg.cat([y, y]).sum() + jg.stack([y, y]).sum() + y.flip(0).sum() + y.tile((2, 1)).sum()
                 + y.t().reshape(-1).sum() + y.unsqueeze(0).expand(2, 3, 4).sum() + jg.outer(y[0], y[1]).sum()),
        lambda: (y @ y.t()).sum() + F.one_hot(idx, 4).sum() * 0,
        lambda: jg.multinomial(y.softmax(1).detach(), 2).sum() * 0 + y.sum(),
        lambda: F.conv2d(x, jg.randn(2, 3, 3, 3, requires_grad=True), padding=1).sum(),
        lambda: F.max_pool2d(x, 2).sum() + F.adaptive_avg_pool2d(x, 3).sum(),
        lambda: F.fold(F.unfold(x, 2), (4, 4), 2).sum(),
        lambda: (F.mse_loss(y, y.detach() * 2) + F.cross_entropy(y, jg.tensor([0, 3, 1]))),
        lambda: y.view(12).sum() + y.max(1).values.sum() + jg.sort(y.detach(), 1).values.sum() * 0,
        lambda: y.sum() * (y.data_ptr() > 0) * y.t().is_contiguous(),
    ]
    opt = jg.optim.Adam([y], lr=0.1)  # (its state arrays: empty)
    (y * y).sum().backward()
    opt.step()
    cpu.may_share_memory(y._data, y._data[0])  # (jitgrad asks the backend on devices alone)
    for cell in (nn.LSTM(4, 3), nn.GRU(4, 3), nn.RNN(4, 3), nn.LSTMCell(4, 3), nn.GRUCell(4, 3), nn.RNNCell(4, 3)):
        parts.append(lambda cell=cell: _recurrent(cell, y))
    for part in parts:
        out = part()
        out.backward()
        x.grad = y.grad = None


def _recurrent(cell, y):
    out = cell(y if cell.__class__.__name__.endswith("Cell") else y[:, None])
    out = out[0] if isinstance(out, tuple) else out
    return out.sum()


def _record():
    """name -> (args, kwargs) of the first call of each protocol function while the programs run."""
    calls = {}
    patched = []

    def wrap(owner, attr, name, fn):
        def recorder(*args, **kwargs):
            caller = sys._getframe(1).f_globals.get("__name__", "")
            if name not in calls and not caller.startswith("jitgrad.kernels"):  # (the op table's calls)
                calls[name] = (copy.deepcopy(args), copy.deepcopy(kwargs))
            return fn(*args, **kwargs)
        patched.append((owner, attr, fn))
        setattr(owner, attr, recorder)

    for name, fn in _functions(cpu):
        owner, attr = (getattr(cpu, name.split(".")[0]), name.split(".")[1]) if "." in name else (cpu, name)
        wrap(owner, attr, name, fn)
    try:
        _programs()
    finally:
        for owner, attr, fn in patched:
            setattr(owner, attr, fn)
    return calls


def _to(backend, obj):
    """``obj`` with its arrays on ``backend``, in their dims' memory order (a transposed array stays one)."""
    if isinstance(obj, np.ndarray) and obj.dtype != object:
        if obj.ndim < 2 or obj.flags.c_contiguous:
            return backend.from_host(obj)
        order = tuple(int(d) for d in np.argsort([-st for st in obj.strides], kind="stable"))
        moved = backend.from_host(np.ascontiguousarray(obj.transpose(order)))
        return backend.transpose(moved, tuple(int(d) for d in np.argsort(order)))
    if isinstance(obj, (tuple, list)):
        return type(obj)(_to(backend, o) for o in obj)
    return obj


def _host(backend, obj):
    if isinstance(obj, (tuple, list)):
        return [_host(backend, o) for o in obj]
    if obj is None or isinstance(obj, (bool, int, float, str, np.generic)):
        return obj
    return np.asarray(backend.to_host(obj))


NO_VALUE = {"address", "may_share_memory", "empty", "from_host", "to_host"}  # (device facts, not values)
HOST_ARGS = {"pool.window_avg": (1,), "pool.window_avg_backward": (1,)}  # positions given as host arrays


def _replay(name, args, kwargs, backend):
    """The call on ``backend``, with its array arguments moved there; what it returns and its first argument
    after it (the functions that write into an output)."""
    host = HOST_ARGS.get(name, ())
    moved = [a if i in host else _to(backend, a) for i, a in enumerate(copy.deepcopy(args))]
    fn = getattr(getattr(backend, name.split(".")[0]), name.split(".")[1]) if "." in name else getattr(backend, name)
    out = fn(*moved, **copy.deepcopy(kwargs))
    return _host(backend, out), _host(backend, moved[0]) if moved and hasattr(moved[0], "shape") else None


def _same(a, b, where):
    if isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), where
        for x, y in zip(a, b):
            _same(x, y, where)
    elif isinstance(a, np.ndarray):
        np.testing.assert_allclose(np.asarray(b, dtype=a.dtype), a, rtol=1e-5, atol=1e-6, err_msg=where)
    else:
        assert a == b, where


if not IN_CHILD:
    def test_the_cuda_backend_under_the_simulator():
        env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
        proc = subprocess.run([sys.executable, "-m", "pytest", __file__, "-q", "-p", "no:cacheprovider"],
                              env=env, capture_output=True, text=True, timeout=1800)
        assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]

    def test_every_protocol_function_is_called_by_the_programs():
        calls = _record()
        assert sorted(n for n, _ in _functions(cpu) if n not in calls) == []
else:
    from jitgrad.kernels.cuda import backend as cuda

    def test_the_cuda_backend_holds_the_protocol():
        _check_signatures(cuda)

    @pytest.fixture(scope="module")
    def calls():
        return _record()

    @pytest.mark.parametrize("name", [n for n, _ in _functions(cpu)])
    def test_the_cuda_backend_gives_the_cpu_s_results(name, calls):
        args, kwargs = calls[name]
        want = _replay(name, args, kwargs, cpu)
        got = _replay(name, args, kwargs, cuda)
        if name not in NO_VALUE:
            _same(want[0], got[0], name + " result")
            _same(want[1], got[1], name + " first argument after the call")
