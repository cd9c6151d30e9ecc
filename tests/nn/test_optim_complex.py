"""Optimizers on complex parameters: PyTorch steps a complex parameter, its gradient and its state as their real
views (view_as_real), so a step on z equals the step on the real pair (Re z, Im z) with the pair's gradient."""
import numpy as np
import pytest

import jitgrad as jg

OPTIMIZERS = [(jg.optim.SGD, {"lr": 0.1, "momentum": 0.9}), (jg.optim.Adam, {"lr": 0.05}),
              (jg.optim.AdamW, {"lr": 0.05, "weight_decay": 0.1}), (jg.optim.RMSprop, {"lr": 0.01})]


def _loss(z):
    """A real loss of complex z: |z - c|^2 weighted, whose gradient is PyTorch's conjugate Wirtinger one."""
    c = jg.tensor(np.array([1 + 2j, -0.5j, 0.3], np.complex128))
    return ((z - c).abs() ** 2 * jg.tensor([1.0, 2.0, 3.0], dtype=jg.float64)).sum()


@pytest.mark.parametrize("opt_cls,kwargs", OPTIMIZERS, ids=lambda o: getattr(o, "__name__", ""))
def test_a_complex_parameter_steps_as_its_real_view(opt_cls, kwargs):
    z0 = np.array([0.2 - 0.1j, 1.0 + 0.5j, -0.3j])
    z = jg.nn.Parameter(jg.tensor(z0))
    pair = jg.nn.Parameter(jg.tensor(np.stack([z0.real, z0.imag], -1)))  # view_as_real's layout
    oz, op = opt_cls([z], **kwargs), opt_cls([pair], **kwargs)
    for _ in range(3):
        for opt, loss in ((oz, _loss(z)), (op, _loss(jg.view_as_complex(pair)))):
            opt.zero_grad()
            loss.backward()
            opt.step()
    assert z.dtype is jg.complex128
    np.testing.assert_allclose(jg.view_as_real(z.detach()).numpy(), pair.detach().numpy(), rtol=1e-12, atol=1e-14)


@pytest.mark.torch
@pytest.mark.parametrize("opt_cls,kwargs", OPTIMIZERS, ids=lambda o: getattr(o, "__name__", ""))
def test_complex_steps_match_torch(opt_cls, kwargs):
    torch = pytest.importorskip("torch")
    z0 = np.array([0.2 - 0.1j, 1.0 + 0.5j, -0.3j])
    out = []
    for lib in (jg, torch):
        z = lib.nn.Parameter(lib.tensor(z0))
        opt = getattr(lib.optim, opt_cls.__name__)([z], **kwargs)
        c = lib.tensor(np.array([1 + 2j, -0.5j, 0.3]))
        for _ in range(3):
            opt.zero_grad()
            ((z - c).abs() ** 2).sum().backward()
            opt.step()
        out.append(z.detach().numpy())
    np.testing.assert_allclose(out[0], out[1], rtol=1e-12, atol=1e-14)
