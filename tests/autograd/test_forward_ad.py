"""Forward-mode AD (jitgrad.autograd.forward_ad): PyTorch's API and errors, views and in-place writes, multi-output
entries, gradcheck's forward-mode check. Every entry's JVP (against finite differences, and reverse mode over it)
is a check of the op matrix (tests/ops/test_op_matrix.py)."""
import numpy as np
import pytest

import jitgrad as jg
import jitgrad.autograd.forward_ad as fwAD


def test_make_dual_unpack_dual_and_the_level():
    with fwAD.dual_level() as level:
        assert level == 0
        p = jg.tensor([1.0, 2.0])
        x = fwAD.make_dual(p, jg.tensor([1.0, -1.0]))
        assert x._base is p or x.data_ptr() == p.data_ptr()  # a view of the primal
        y = (x * x).sum()
        unpacked = fwAD.unpack_dual(y)
        assert type(unpacked).__name__ == "UnpackedDualTensor" and unpacked._fields == ("primal", "tangent")
        assert float(unpacked.primal) == 5.0 and float(unpacked.tangent) == 2.0 * 1 - 2.0 * 2
        assert fwAD.unpack_dual(p).tangent is None  # the primal itself carries none
    assert fwAD.unpack_dual(x).tangent is None  # dropped with the level


def test_pytorch_s_errors():
    with pytest.raises(RuntimeError, match="no level exists, make sure to enter_dual_level"):
        fwAD.make_dual(jg.ones(2), jg.ones(2))
    with fwAD.dual_level():
        with pytest.raises(RuntimeError, match="^Nested forward mode AD is not supported at the moment$"):
            with fwAD.dual_level():
                pass
        with pytest.raises(RuntimeError, match=r"Tensor is of size \[3\] while the given forward gradient is of "
                                               r"size \[2\]"):
            fwAD.make_dual(jg.ones(3), jg.ones(2))
        with pytest.raises(ValueError, match="Expected primal to be floating point or complex, but got"):
            fwAD.make_dual(jg.tensor([1, 2]), jg.tensor([1.0, 2.0]))


def test_a_jacobian_vector_product_through_a_network_matches_torch():
    torch = pytest.importorskip("torch")
    import torch.autograd.forward_ad as tfwAD
    rng = np.random.default_rng(0)
    w1, w2 = rng.standard_normal((5, 8)), rng.standard_normal((8, 3))
    x, t = rng.standard_normal((4, 5)), rng.standard_normal((4, 5))

    def net(lib, x):
        h = (x @ lib.tensor(w1)).tanh()
        h = lib.cat([h, h.sigmoid() * 2], 1)[:, :8] + lib.tensor(w1).sum(0)[:8]
        return lib.nn.functional.log_softmax(h @ lib.tensor(w2), dim=1).sum(0)
    got, want = [], []
    for lib, ad, out in ((jg, fwAD, got), (torch, tfwAD, want)):
        with ad.dual_level():
            p, tangent = ad.unpack_dual(net(lib, ad.make_dual(lib.tensor(x), lib.tensor(t))))
            out += [p.detach().numpy(), tangent.numpy()]
    np.testing.assert_allclose(got[0], want[0], rtol=1e-12)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-10, atol=1e-12)


def test_in_place_ops_carry_tangents():
    with fwAD.dual_level():
        x = fwAD.make_dual(jg.tensor([1.0, 2.0]), jg.tensor([1.0, 1.0]))
        y = x * 1
        y.mul_(x)  # y = x * x: tangent 2 x t
        np.testing.assert_allclose(fwAD.unpack_dual(y).tangent.numpy(), [2.0, 4.0])
        z = jg.zeros(2)
        z.add_(x.sin())  # a plain tensor written with a dual result becomes dual
        np.testing.assert_allclose(fwAD.unpack_dual(z).tangent.numpy(), np.cos([1.0, 2.0]))
        z.copy_(jg.ones(2))  # ... and written with a plain value, its tangent is zero
        np.testing.assert_array_equal(fwAD.unpack_dual(z).tangent.numpy(), [0.0, 0.0])


def test_views_share_their_base_s_tangent_as_pytorch_s():
    """The numbers PyTorch 2.13 gives for the same program: a view's tangent is that view of its base's
    tangent, in-place writes (through the base, a view, __setitem__) update both in place."""
    f64 = jg.float64
    with fwAD.dual_level():
        t = jg.ones(2, 3, dtype=f64)
        x = fwAD.make_dual(jg.ones(2, 3, dtype=f64), t)
        assert fwAD.unpack_dual(x).tangent is t
        x.mul_(2)
        np.testing.assert_array_equal(t.numpy(), np.full((2, 3), 2.0))  # (the tangent given, updated in place)
        y = x * 1
        v = y[0]
        y.mul_(3)
        np.testing.assert_array_equal(fwAD.unpack_dual(v).tangent.numpy(), [6.0, 6.0, 6.0])
        v.add_(fwAD.make_dual(jg.ones(3, dtype=f64), jg.full((3,), 5.0, dtype=f64)))
        np.testing.assert_array_equal(fwAD.unpack_dual(y).tangent.numpy(), [[11.0] * 3, [6.0] * 3])
        z = jg.zeros(2, 3, dtype=f64)
        z[1] = x[0]
        np.testing.assert_array_equal(fwAD.unpack_dual(z).tangent.numpy(), [[0.0] * 3, [2.0] * 3])
        w = jg.zeros(2, 3, dtype=f64)
        w[0].copy_(x[1] * 2)
        np.testing.assert_array_equal(fwAD.unpack_dual(w).tangent.numpy(), [[4.0] * 3, [0.0] * 3])
        u = jg.zeros(2, 3, dtype=f64)
        ut = u.t()  # a view made before its base takes a tangent
        u.add_(x)
        np.testing.assert_array_equal(fwAD.unpack_dual(ut).tangent.numpy(), np.full((3, 2), 2.0))
        np.testing.assert_array_equal(fwAD.unpack_dual(ut * 1).tangent.numpy(), np.full((3, 2), 2.0))
        a = fwAD.make_dual(jg.ones(3, dtype=f64), jg.ones(3, dtype=f64))
        b = a + 0  # (add's formula hands back its gradient: b's tangent is still its own)
        b.mul_(4)
        np.testing.assert_array_equal(fwAD.unpack_dual(a).tangent.numpy(), [1.0, 1.0, 1.0])


def test_multi_output_entries_carry_tangents():
    x0 = np.random.default_rng(0).standard_normal((3, 4))
    t0 = np.random.default_rng(1).standard_normal((3, 4))
    cases = {"max": lambda x: x.max(1)[0], "sort": lambda x: x.sort(1)[0], "topk": lambda x: x.topk(2)[0],
             "split": lambda x: x.split(2, 1)[1], "unbind": lambda x: x.unbind(0)[2],
             "cummax": lambda x: x.cummax(1)[0], "kthvalue": lambda x: x.kthvalue(2, 1)[0],
             "lstm": lambda x: jg.nn.LSTM(4, 3, dtype=jg.float64)(x.unsqueeze(1))[1][1],
             "gru": lambda x: jg.nn.GRU(4, 3, dtype=jg.float64)(x.unsqueeze(1))[0]}
    for name, f in cases.items():
        jg.manual_seed(0)
        with fwAD.dual_level():
            out = f(fwAD.make_dual(jg.tensor(x0), jg.tensor(t0)))
            # (the modules' parameters require grad: the tangent records its history, as PyTorch's does)
            tangent = fwAD.unpack_dual(out).tangent.detach().numpy()
        runs = []
        for shift in (1e-6, -1e-6):
            jg.manual_seed(0)
            runs.append(f(jg.tensor(x0 + shift * t0)).detach().numpy())
        np.testing.assert_allclose(tangent, (runs[0] - runs[1]) / 2e-6, rtol=1e-5, atol=1e-7, err_msg=name)
    with fwAD.dual_level():
        _, idx = fwAD.make_dual(jg.tensor(x0), jg.tensor(t0)).max(1)
        assert fwAD.unpack_dual(idx).tangent is None  # (integer outputs take none)


def test_a_compiled_function_runs_eagerly_inside_a_level():
    f = jg.compile(lambda x: (x * x).sum())
    f(jg.ones(3))  # (a plan made outside)
    with fwAD.dual_level():
        out = f(fwAD.make_dual(jg.tensor([1.0, 2.0, 3.0]), jg.ones(3)))
        assert float(fwAD.unpack_dual(out).tangent) == 12.0


def test_gradcheck_checks_forward_mode():
    x = jg.tensor(np.linspace(-1, 1, 5), requires_grad=True)
    w = jg.tensor(np.arange(10.0).reshape(5, 2) / 7, requires_grad=True)
    assert jg.autograd.gradcheck(lambda x, w: ((x @ w).tanh(), x.exp().sum()), (x, w), check_forward_ad=True)

    def outside_the_table(x):  # values computed from the array: no tangent reaches the output
        return jg.Tensor._wrap(np.sin(x.detach().numpy())) + x * 0
    with pytest.raises(jg.autograd.GradcheckError, match="Jacobian computed with forward mode mismatch for output 0"):
        jg.autograd.gradcheck(outside_the_table, (x,), check_forward_ad=True, check_backward_ad=False)
