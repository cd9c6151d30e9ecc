"""Optimizer state that does not fit its parameter: the optimizer kernels never see arrays they would index
out of bounds (another size or dtype raises PyTorch's error, overlapping state is not written through, strided
state is updated in place), on the CPU and on the CUDA simulator. Whatever could crash the interpreter runs in
a subprocess.
"""
import json
import re

import numpy as np
import pytest

import jitgrad as jg
from jitgrad import optim

from helpers import OVERLAP
from helpers import run_code as _run

SIZE_MISMATCH = "The size of tensor a (%d) must match the size of tensor b (%d) at non-singleton dimension %d"
OUTPUT_MISMATCH = "output with shape [%s] doesn't match the broadcast shape [%s]"

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
