"""Nested forward-mode levels (jvp of jvp, jacfwd of jacfwd, as functorch keeps levels) against
reverse-over-reverse and closed forms, and the vmap level stack kept per thread."""
import threading

import numpy as np
import pytest

import jitgrad as jg
import jitgrad.autograd.forward_ad as fwAD
from jitgrad import func as F

X = np.array([0.3, -0.7, 1.1])


def T(a):
    return jg.tensor(np.asarray(a, dtype=np.float64))


def test_jvp_of_jvp_is_the_second_directional_derivative():
    u, v = T([1.0, 2.0, -1.0]), T([0.5, -1.0, 2.0])

    def g(a):
        return (a ** 3).sum() + (a.sin() * a[0]).sum()

    def d2(x, u, v):  # v^T H u of g, in closed form
        h = np.diag(6 * x - x[0] * np.sin(x))
        h[0, :] += np.cos(x)
        h[:, 0] += np.cos(x)
        return v @ h @ u
    got = F.jvp(lambda a: F.jvp(g, (a,), (u,))[1], (T(X),), (v,))[1]
    np.testing.assert_allclose(float(got), d2(X, u.numpy(), v.numpy()), rtol=1e-12)


@pytest.mark.parametrize("f", [
    lambda a: (a.sin() * a.sum()).tanh(),
    lambda a: (a.exp() * a[0]).max(0)[0] + a.sort()[0][1],
    lambda a: (a.unsqueeze(0) * a.unsqueeze(1)).softmax(1).sum(0),
], ids=["tanh", "max_sort", "softmax"])
def test_jacfwd_of_jacfwd_matches_reverse_over_reverse(f):
    want = F.jacrev(F.jacrev(f))(T(X)).numpy()
    for got in (F.jacfwd(F.jacfwd(f))(T(X)), F.jacfwd(F.jacrev(f))(T(X)), F.hessian(f)(T(X))):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-10, atol=1e-12)


def test_nested_levels_keep_the_outer_tangent_on_the_inner_one():
    one = T(np.ones(3))
    with fwAD.nested_level() as outer:
        a0 = fwAD.make_dual(T(X), one)
        with fwAD.nested_level() as inner:
            assert (outer, inner) == (0, 1)
            y = fwAD.make_dual(a0, one) ** 3
            primal, tangent = fwAD.unpack_dual(y)
            np.testing.assert_allclose(tangent.numpy(), 3 * X ** 2)
            np.testing.assert_allclose(fwAD.unpack_dual(primal, level=0).tangent.numpy(), 3 * X ** 2)
        np.testing.assert_allclose(fwAD.unpack_dual(tangent).tangent.numpy(), 6 * X)  # d/dx of the inner tangent
        assert fwAD.unpack_dual(y).tangent is not None and 1 not in y._fw_grad  # (the inner level dropped)
    with fwAD.dual_level():  # the public API stays one level at a time, as PyTorch's
        with pytest.raises(RuntimeError, match="^Nested forward mode AD is not supported at the moment$"):
            fwAD.enter_dual_level()


@pytest.mark.torch
def test_jacfwd_of_jacfwd_matches_torch():
    torch = pytest.importorskip("torch")
    got = F.jacfwd(F.jacfwd(lambda a: (a.sin() * a.sum()).tanh()))(T(X))
    want = torch.func.jacfwd(torch.func.jacfwd(lambda a: (a.sin() * a.sum()).tanh()))(torch.tensor(X))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, atol=1e-14)


def test_vmap_levels_are_per_thread():
    errors = []
    barrier = threading.Barrier(3)

    def work(n):
        rng = np.random.default_rng(n)
        barrier.wait()
        for _ in range(20):
            x = rng.standard_normal((n, 3))
            try:
                got = jg.vmap(lambda a: jg.vmap(lambda b: (b.sin() * 2).sum())(a.unsqueeze(0).expand(2, 3)))(T(x))
                np.testing.assert_allclose(got.numpy(), np.repeat((np.sin(x) * 2).sum(1)[:, None], 2, 1))
            except Exception as e:  # noqa: BLE001  (reported below, from the main thread)
                errors.append(repr(e))
                return
    threads = [threading.Thread(target=work, args=(n,)) for n in (3, 5, 7)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:2]
