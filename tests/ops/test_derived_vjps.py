"""Fused VJP kernels derived from the entries' formulas (jitgrad/ops/_derive.py): each derivative is written
once, as the formula; kernels/derived.py is generated from the formulas and must be current."""
import numpy as np
import pytest

import jitgrad as jg
from jitgrad._op import Op
from jitgrad.kernels import scalars
from jitgrad.ops import OPS, _derive
from jitgrad.ops.unary import ew_forward


def test_the_derived_kernels_file_is_generated_from_the_formulas():
    with open(scalars.__file__.replace("scalars.py", "derived.py")) as f:
        assert f.read() == _derive.module_source(), "kernels/derived.py is stale: run python -m jitgrad.ops"


def test_no_hand_written_vjp_scalar_is_left():
    derived = set(_derive.SOURCES)
    for op in OPS.values():
        for spec in op.derivatives.fused:
            if spec.__class__ is tuple and "vjp" in spec[0]:
                assert spec[0] in derived, (op.name, spec)
    assert not [n for n in scalars.SCALARS if "vjp" in n and n not in derived]


def test_a_derived_kernel_is_the_formula_on_numbers():
    g, x = np.float64(0.7), np.float64(-1.3)
    y = np.tanh(x)
    assert scalars.SCALARS["tanh_vjp"](g, y) == pytest.approx(g * (1 - y * y), rel=1e-15)
    assert scalars.SCALARS["maximum_vjp"](g, x, x) == pytest.approx(g / 2)  # a tie splits the gradient
    assert scalars.SCALARS["relu_vjp"](np.float64(np.inf), np.float64(0.0)) == 0.0  # a select, not g * 0


def test_float32_stays_float32():
    """The formulas' numbers take the gradient's type (like(g, 1)): a float32 VJP computes in float32."""
    import numba
    for name in ("sigmoid_vjp", "gelu_vjp", "rsqrt_vjp"):
        f = scalars.SCALARS[name]
        f(*[np.float32(0.25)] * (f.py_func.__code__.co_argcount))
        assert [sig.return_type for sig in f.nopython_signatures if sig.args[0] == numba.float32] == [numba.float32]


def _toy(formula):
    return Op("toy_derived", ew_forward("exp"), vjp=[formula], fused=[_derive.derive("toy_vjp")])


def test_a_formula_that_branches_in_python_is_refused():
    with pytest.raises(TypeError, match="cannot branch on a value in Python"):
        _toy(lambda g, s: g if s.self > 0 else -g)


def test_a_formula_calling_what_is_not_an_elementwise_entry_is_refused():
    with pytest.raises(AttributeError, match="not an elementwise entry"):
        _toy(lambda g, s: g * s.self.sum())


def test_eager_gradients_through_the_derived_kernels_match_the_formulas():
    x = jg.tensor(np.linspace(-2, 2, 9), requires_grad=True)
    for f in (lambda t: t.tanh(), lambda t: jg.nn.functional.mish(t), lambda t: jg.atan2(t, t * 0.5 + 1),
              lambda t: jg.maximum(t, t.flip(0)), lambda t: jg.nn.functional.gelu(t, approximate="tanh")):
        x.grad = None
        f(x).sum().backward()  # fused kernel
        fused = x.grad.numpy().copy()
        x.grad = None
        (g,) = jg.autograd.grad(f(x).sum(), x, create_graph=True)  # the formula, over table ops
        np.testing.assert_allclose(fused, g.detach().numpy(), rtol=1e-12, atol=1e-15)
