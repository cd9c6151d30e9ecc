"""Lazy conjugation, as PyTorch's conjugate bit: ``z.conj()`` of a complex tensor is a view of z's storage
(``is_conj()``), shape views of it stay lazy, writes through it reach z conjugated, other ops read its values,
``resolve_conj``/``conj_physical`` materialize it, and ``numpy()``/``view_as_real`` refuse it in PyTorch's words."""
import re

import numpy as np
import pytest

import jitgrad as jg
from jitgrad.autograd import gradcheck, gradgradcheck

Z = np.array([[1 + 2j, 3 - 1j, -0.5 + 0.25j], [2j, -1 - 1j, 0.5 + 0j]])


def _z(dtype=jg.complex128):
    return jg.tensor(Z, dtype=dtype)


def test_conj_is_a_lazy_view_of_the_same_storage():
    z = _z()
    y = z.conj()
    assert y.is_conj() and not z.is_conj() and y.data_ptr() == z.data_ptr() and y._version == z._version
    assert y.tolist() == Z.conj().tolist() and y[0, 1].item() == 3 + 1j
    np.testing.assert_array_equal(y.resolve_conj().numpy(), Z.conj())
    assert not y.resolve_conj().is_conj() and y.resolve_conj().data_ptr() != z.data_ptr()
    assert z.resolve_conj() is z and jg.resolve_neg(z) is z and not y.is_neg()
    x = jg.tensor([1.0, 2.0])
    assert x.conj() is x and not x.conj().is_conj()  # (a real tensor's conj is itself)


def test_which_results_keep_the_bit_as_pytorch_s():
    y = _z().conj()
    lazy = {"detach": y.detach(), "T": y.T, "slice": y[1:], "reshape": y.reshape(3, 2), "contiguous": y.contiguous(),
            "select": y[0], "transpose": y.transpose(0, 1), "unsqueeze": y.unsqueeze(0), "view": y.view(6)}
    resolved = {"clone": y.clone(), "mul": y * 1, "conj": y.conj(), "resolve_conj": y.resolve_conj(),
                "conj_physical": y.conj_physical(), "to": y.to(jg.complex64), "real": y.real, "imag": y.imag,
                "sum": y.sum(0), "abs": y.abs()}
    assert all(t.is_conj() for t in lazy.values()), [k for k, t in lazy.items() if not t.is_conj()]
    assert not any(t.is_conj() for t in resolved.values()), [k for k, t in resolved.items() if t.is_conj()]
    for t in lazy.values():  # (resolve_conj and tolist read the same values)
        np.testing.assert_array_equal(np.ravel(t.resolve_conj().numpy()), np.ravel(t.tolist()))
    np.testing.assert_array_equal(lazy["T"].resolve_conj().numpy(), Z.conj().T)
    np.testing.assert_array_equal(lazy["view"].resolve_conj().numpy(), Z.conj().ravel())
    assert y.conj().data_ptr() == y.data_ptr()  # conj of a lazy conjugate: a plain view of the same storage
    np.testing.assert_array_equal(resolved["real"].numpy(), Z.real)
    np.testing.assert_array_equal(resolved["imag"].resolve_neg().numpy(), -Z.imag)  # (a lazy negation: below)
    np.testing.assert_array_equal(resolved["mul"].numpy(), Z.conj())
    np.testing.assert_allclose(resolved["abs"].numpy(), np.abs(Z))


def test_ops_read_the_conjugated_values():
    z = _z()
    y = z.conj()
    np.testing.assert_allclose((y * z).numpy(), np.abs(Z) ** 2)
    np.testing.assert_allclose((z * y).numpy(), np.abs(Z) ** 2)
    np.testing.assert_allclose((y.T @ z).numpy(), Z.conj().T @ Z)
    np.testing.assert_allclose(y.exp().numpy(), np.exp(Z.conj()))
    np.testing.assert_allclose(jg.cat([y, z]).numpy(), np.concatenate([Z.conj(), Z]))
    np.testing.assert_allclose(y[:, 1:].sum().item(), Z.conj()[:, 1:].sum())
    assert (y == jg.tensor(Z.conj())).all().item()


def test_writes_through_the_view_reach_the_base_conjugated():
    z = _z()
    y = z.conj()
    y[0, 0] = 5 + 5j
    assert z[0, 0].item() == 5 - 5j
    y.mul_(2)
    np.testing.assert_array_equal(z.numpy()[1], 2 * Z[1])
    y[1].zero_()
    assert z[1].tolist() == [0, 0, 0]
    y.real.add_(1)  # (real of a lazy conjugate is a view of the stored real parts)
    assert z[1].tolist() == [1, 1, 1]
    z.add_(1j)  # and writes into the base show through the view
    assert y[1].tolist() == [1 - 1j] * 3
    assert z._version == y._version


def test_pytorch_s_refusals():
    y = _z().conj()
    with pytest.raises(RuntimeError, match="^" + re.escape("Can't call numpy() on Tensor that has conjugate bit set. "
                                                          "Use tensor.resolve_conj().numpy() instead.")):
        y.numpy()
    with pytest.raises(RuntimeError, match="^view_as_real doesn't work on unresolved conjugated tensors."):
        jg.view_as_real(y)
    np.testing.assert_array_equal(y.numpy(force=True), Z.conj())
    np.testing.assert_array_equal(jg.view_as_real(y.resolve_conj()).numpy()[..., 1], -Z.imag)


def test_gradients_through_a_lazy_conjugate():
    z = jg.tensor(Z, requires_grad=True)
    y = z.conj()
    assert y.grad_fn.name() == "ConjBackward0"
    w = jg.tensor(Z[::-1].copy())
    (y * w).real.sum().backward()
    np.testing.assert_allclose(z.grad.numpy(), Z[::-1])  # Re(conj(z) w) = x Re(w) + y Im(w): the gradient is w
    assert gradcheck(lambda z: (z.conj().T * z[:1].T).exp(), (z,))
    assert gradgradcheck(lambda z: z.conj()[1:] * z.conj().resolve_conj()[:1], (z,))
    g = jg.tensor(Z).conj()  # a lazy conjugate as the output gradient
    z.grad = None
    (z * 2).backward(g)
    np.testing.assert_allclose(z.grad.numpy(), 2 * Z.conj())


def test_the_fft_results_pytorch_returns_lazily():
    x = jg.tensor(np.arange(8.0))
    out = jg.fft.ihfft(x)
    assert out.is_conj()  # (PyTorch's ihfft returns its conjugate lazily)
    np.testing.assert_allclose(out.resolve_conj().numpy(), np.fft.ihfft(np.arange(8.0)))
    assert not jg.fft.ihfft2(x.reshape(2, 4)).is_conj()


@pytest.mark.torch
def test_against_pytorch():
    torch = pytest.importorskip("torch")

    def run(lib):
        z = lib.tensor(Z.copy())
        y = z.conj()
        y[0, 0] = 5 + 5j
        y.mul_(2)
        z.add_(1j)
        flags = [t.is_conj() for t in (y, y.T, y[0], y.clone(), y * 1, y.conj(), y.real, y.detach(), y.contiguous())]
        return flags, z.resolve_conj().numpy(), y.resolve_conj().numpy(), y.imag.resolve_neg().numpy()
    got, want = run(jg), run(torch)
    assert got[0] == want[0]
    for a, b in zip(got[1:], want[1:]):
        np.testing.assert_array_equal(a, b)


def test_save_and_load_complex_tensors_and_lazy_conjugates(tmp_path):
    z = _z()
    jg.save({"z": z, "y": z.conj(), "c64": _z(jg.complex64).T}, tmp_path / "c.pt")
    out = jg.load(tmp_path / "c.pt")
    np.testing.assert_array_equal(out["z"].numpy(), Z)
    np.testing.assert_array_equal(out["y"].numpy(), Z.conj())  # (saved as its values)
    assert out["c64"].dtype is jg.complex64 and out["c64"].tolist() == Z.astype(np.complex64).T.tolist()


def _written_through(L, w):
    """In-place writes through a lazy conjugate of an intermediate (its history rebased, as PyTorch's)."""
    a = w * (1 + 1j)
    y = a.conj()
    y[1:].mul_(2 - 1j)
    y[0] = y[0] * 3
    return (a * L.tensor([1, 2j, 3], dtype=w.dtype)).real.sum() + (y.abs() ** 2).sum(), a, y


def test_gradients_of_writes_through_a_lazy_conjugate():
    w = jg.tensor([1 + 2j, 3 - 1j, 0.5j], dtype=jg.complex128, requires_grad=True)
    assert gradcheck(lambda w: _written_through(jg, w)[0], (w,))
    _, a, y = _written_through(jg, w)
    assert y.is_conj() and y.grad_fn.name() == "ConjBackward0"
    np.testing.assert_allclose(a.detach().numpy(), [-3 + 9j, 6 + 8j, -1.5 + 0.5j])


@pytest.mark.torch
def test_gradients_of_writes_through_a_lazy_conjugate_as_pytorch_s():
    torch = pytest.importorskip("torch")
    out = []
    for L in (torch, jg):
        w = L.tensor([1 + 2j, 3 - 1j, 0.5j], requires_grad=True)
        loss, a, _ = _written_through(L, w)
        loss.backward()
        out.append((a.detach().resolve_conj().numpy(), w.grad.resolve_conj().numpy()))
    for x, y in zip(*out):
        np.testing.assert_allclose(y, x, rtol=1e-6)


def test_imag_of_a_conjugate_is_a_lazy_negation():
    """z.conj().imag views the imaginary parts z stores, negated lazily (PyTorch's negative bit): is_neg(), writes
    reach z, shape views stay lazy, other ops read the values, resolve_neg() copies them, numpy() refuses."""
    z = jg.tensor(np.array([[1 + 2j, 3 - 4j], [0.5 - 1j, -2 + 3j]]))
    i = z.conj().imag
    assert i.is_neg() and i.T.is_neg() and i[0].is_neg() and not (i * 1).is_neg() and not i.resolve_neg().is_neg()
    np.testing.assert_array_equal(i.resolve_neg().numpy(), [[-2, 4], [1, -3]])
    i[0, 1] = 7.0
    i[1].mul_(2)
    np.testing.assert_array_equal(z.numpy(), [[1 + 2j, 3 - 7j], [0.5 - 2j, -2 + 6j]])
    np.testing.assert_array_equal((i + 1).numpy(), [[-1, 8], [3, -5]])
    with pytest.raises(RuntimeError, match="^Can't call numpy\\(\\) on Tensor that has negative bit set"):
        i.numpy()


def test_gradient_through_a_lazy_negation():
    z = jg.tensor(np.array([1 + 2j, 3 - 4j]), requires_grad=True)
    (z.conj().imag * jg.tensor([1.0, 2.0], dtype=jg.float64)).sum().backward()
    np.testing.assert_array_equal(z.grad.numpy(), [-1j, -2j])  # (d Im(conj z) / d Im z = -1)


@pytest.mark.torch
def test_lazy_negation_against_pytorch():
    torch = pytest.importorskip("torch")

    def run(lib):
        z = lib.tensor(np.array([[1 + 2j, 3 - 4j], [0.5 - 1j, -2 + 3j]]))
        i = z.conj().imag
        flags = [t.is_neg() for t in (i, i.T, i[0], i * 1, i.clone(), i.detach(), i.contiguous(), i.resolve_neg(),
                                      i.neg())]
        i[0, 1] = 7.0
        i.mul_(2)
        i[1].add_(1)
        return flags, z.resolve_conj().numpy(), i.resolve_neg().numpy(), i.T.resolve_neg().numpy(), (i + 1).numpy()
    got, want = run(jg), run(torch)
    assert got[0] == want[0]
    for a, b in zip(got[1:], want[1:]):
        np.testing.assert_array_equal(a, b)
