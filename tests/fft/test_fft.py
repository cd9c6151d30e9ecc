"""jitgrad.fft against numpy.fft / scipy.fft (every function, odd and even lengths, every norm, n/s/dim, batched
inputs), its gradients against finite differences (real and complex inputs, double backward), its JVPs and vmap,
PyTorch's errors, and (marked torch) PyTorch's values, gradients and messages."""
import types

import numpy as np
import pytest
import scipy.fft as sfft

import jitgrad as jg
from jitgrad.autograd import gradcheck, gradgradcheck

NORMS = (None, "backward", "ortho", "forward")
RNG = np.random.default_rng(0)


def _real(*shape, dtype=np.float64):
    return RNG.standard_normal(shape).astype(dtype)


def _complex(*shape, dtype=np.complex128):
    return (RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)).astype(dtype)


def _close(out, ref, tol=1e-10):
    out = out.detach().resolve_conj().numpy()  # (ihfft gives a lazy conjugate, as PyTorch's)
    assert out.shape == np.shape(ref)
    np.testing.assert_allclose(out, ref, rtol=tol, atol=tol)


# one-dim functions: name -> (numpy's, the input kind)
ONE_D = {"fft": (np.fft.fft, "c"), "ifft": (np.fft.ifft, "c"), "rfft": (np.fft.rfft, "r"),
         "irfft": (np.fft.irfft, "c"), "hfft": (np.fft.hfft, "c"), "ihfft": (np.fft.ihfft, "r")}
# n-dim functions: name -> (scipy's, the input kind, the default dims)
N_D = {"fft2": (sfft.fft2, "c", (-2, -1)), "ifft2": (sfft.ifft2, "c", (-2, -1)), "rfft2": (sfft.rfft2, "r", (-2, -1)),
       "irfft2": (sfft.irfft2, "c", (-2, -1)), "hfft2": (sfft.hfft2, "c", (-2, -1)),
       "ihfft2": (sfft.ihfft2, "r", (-2, -1)), "fftn": (sfft.fftn, "c", None), "ifftn": (sfft.ifftn, "c", None),
       "rfftn": (sfft.rfftn, "r", None), "irfftn": (sfft.irfftn, "c", None), "hfftn": (sfft.hfftn, "c", None),
       "ihfftn": (sfft.ihfftn, "r", None)}
C2R = ("irfft", "hfft", "irfft2", "hfft2", "irfftn", "hfftn")


def _input(kind, *shape):
    return _complex(*shape) if kind == "c" else _real(*shape)


def _scipy_nd(fname, x, s, dim, norm):
    """scipy's n-dim transform as PyTorch defines it: the last dims of s (or all) by default, the c2r ones with
    2 (m - 1) points along the last dim when s does not say."""
    ref, _, default = N_D[fname]
    axes = dim if dim is not None else default if default is not None and s is None else (
        tuple(range(x.ndim - len(s), x.ndim)) if s is not None else tuple(range(x.ndim)))
    axes = tuple(a % x.ndim for a in axes)
    if s is None:
        s = (-1,) * len(axes)
    s = tuple(x.shape[a] if n == -1 else n for n, a in zip(s[:-1], axes)) + (  # -1: the input's size
        (2 * (x.shape[axes[-1]] - 1) if fname in C2R else x.shape[axes[-1]]) if s[-1] == -1 else s[-1],)
    return ref(x, s, axes, norm)


# ---------------------------------------------------------------------- values
@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("n", [None, 5, 12])
@pytest.mark.parametrize("length", [7, 8])
@pytest.mark.parametrize("fname", sorted(ONE_D))
def test_one_dim_values(fname, length, n, norm):
    ref, kind = ONE_D[fname]
    x = _input(kind, 3, length)
    fn = getattr(jg.fft, fname)
    _close(fn(jg.tensor(x), n=n, norm=norm), ref(x, n=n, norm=norm))
    # along a leading dim of a batch
    _close(fn(jg.tensor(x.T.copy()), n=n, dim=0, norm=norm), ref(x.T, n=n, axis=0, norm=norm))


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("fname", sorted(N_D))
def test_n_dim_values(fname, norm):
    kind = N_D[fname][1]
    fn = getattr(jg.fft, fname)
    for shape, s, dim in [((2, 5, 6), None, None), ((3, 4, 7), (5, 8), None), ((4, 3, 5), None, (0, 2)),
                          ((5, 4, 6), (3, -1), (2, 0)), ((6, 5), (4,), (-2,))]:
        x = _input(kind, *shape)
        _close(fn(jg.tensor(x), s=s, dim=dim, norm=norm) if dim is not None else fn(jg.tensor(x), s=s, norm=norm),
               _scipy_nd(fname, x, s, dim, norm))


def test_real_inputs_of_the_complex_transforms():
    x = _real(4, 7)
    _close(jg.fft.fft(jg.tensor(x)), np.fft.fft(x))
    _close(jg.fft.ifft(jg.tensor(x), norm="ortho"), np.fft.ifft(x, norm="ortho"))
    _close(jg.fft.fftn(jg.tensor(x), s=(5, 9)), np.fft.fftn(x, (5, 9)))
    _close(jg.fft.ifft2(jg.tensor(x)), np.fft.ifft2(x))


def test_dtypes():
    f32, f64 = _real(8, dtype=np.float32), _real(8)
    assert jg.fft.fft(jg.tensor(f32)).dtype is jg.complex64
    assert jg.fft.fft(jg.tensor(f64)).dtype is jg.complex128
    assert jg.fft.rfft(jg.tensor(f32)).dtype is jg.complex64
    assert jg.fft.irfft(jg.fft.rfft(jg.tensor(f32))).dtype is jg.float32
    assert jg.fft.hfft(jg.tensor(_complex(5))).dtype is jg.float64
    ints = jg.fft.fft(jg.arange(6))
    assert ints.dtype is jg.complex64
    _close(ints, np.fft.fft(np.arange(6)), tol=1e-5)
    _close(jg.fft.rfft(jg.tensor(f32)), np.fft.rfft(f32), tol=1e-5)


def test_round_trips_and_empty_dims():
    x = jg.tensor(_real(3, 10))
    _close(jg.fft.irfft(jg.fft.rfft(x), n=10), x.numpy())
    _close(jg.fft.ifftn(jg.fft.fftn(x)).real, x.numpy())
    _close(jg.fft.hfft(jg.fft.ihfft(x), n=10), x.numpy())
    z = jg.fft.fftn(jg.tensor(_complex(2, 3)), dim=())  # no dims: the input, as complex
    assert z.shape == (2, 3)
    assert jg.fft.fftn(jg.tensor(2.0)).dtype is jg.complex64


def test_non_contiguous_inputs():
    x = _complex(6, 8)
    _close(jg.fft.fft(jg.tensor(x).T, dim=0), np.fft.fft(x.T, axis=0))
    r = _real(6, 8)
    _close(jg.fft.rfft(jg.tensor(r)[:, ::2]), np.fft.rfft(r[:, ::2]))


def test_frequencies_and_shifts():
    for n in (1, 6, 7):
        for d in (1.0, 0.25):
            _close(jg.fft.fftfreq(n, d, dtype=jg.float64), np.fft.fftfreq(n, d))
            _close(jg.fft.rfftfreq(n, d, dtype=jg.float64), np.fft.rfftfreq(n, d))
    f = jg.fft.fftfreq(5, requires_grad=True)
    assert f.dtype is jg.float32 and f.requires_grad and f.is_leaf
    assert jg.fft.rfftfreq(4, dtype=jg.complex128).dtype is jg.complex128
    x = np.arange(30.0).reshape(5, 6)
    _close(jg.fft.fftshift(jg.tensor(x)), np.fft.fftshift(x))
    _close(jg.fft.ifftshift(jg.tensor(x)), np.fft.ifftshift(x))
    _close(jg.fft.fftshift(jg.tensor(x), dim=0), np.fft.fftshift(x, axes=0))
    _close(jg.fft.ifftshift(jg.tensor(x), dim=(-1,)), np.fft.ifftshift(x, axes=(-1,)))
    y = jg.tensor(x, requires_grad=True)
    jg.fft.fftshift(y).sum().backward()
    assert np.array_equal(y.grad.numpy(), np.ones_like(x))


# ---------------------------------------------------------------------- errors
ERRORS = [
    (lambda: jg.fft.fft(jg.randn(8), norm="bad"), RuntimeError, 'Invalid normalization mode: "bad"'),
    (lambda: jg.fft.fft(jg.randn(8), n=0), RuntimeError, r"Invalid number of data points \(0\) specified"),
    (lambda: jg.fft.rfft(jg.randn(8), n=-1), RuntimeError, r"Invalid number of data points \(-1\) specified"),
    (lambda: jg.fft.irfft(jg.randn(1)), RuntimeError, r"Invalid number of data points \(0\) specified"),
    (lambda: jg.fft.fft(jg.randn(2, 0).to(jg.complex64)), RuntimeError, r"Invalid number of data points \(0\)"),
    (lambda: jg.fft.fft(jg.randn(8), dim=3), IndexError, r"Dimension out of range \(expected to be in range of "
                                                         r"\[-1, 0\], but got 3\)"),
    (lambda: jg.fft.fft(jg.tensor(1.0)), IndexError, "Dimension specified as -1 but tensor has no dimensions"),
    (lambda: jg.fft.fft2(jg.randn(8)), IndexError, r"Dimension out of range"),
    (lambda: jg.fft.fft2(jg.randn(2, 4), dim=(0, 0)), RuntimeError, "FFT dims must be unique"),
    (lambda: jg.fft.fftn(jg.randn(2, 4), s=(3,), dim=(0, 1)), RuntimeError,
     "When given, dim and shape arguments must have the same length"),
    (lambda: jg.fft.fftn(jg.randn(2, 4), s=(3, 3, 3)), RuntimeError,
     "Got shape with 3 values but input tensor only has 2 dimensions."),
    (lambda: jg.fft.rfftn(jg.randn(2, 3), dim=()), RuntimeError, "rfftn must transform at least one axis"),
    (lambda: jg.fft.irfftn(jg.randn(2, 3), dim=()), RuntimeError, "irfftn must transform at least one axis"),
    (lambda: jg.fft.fft(jg.randn(8).half()), RuntimeError, "Unsupported dtype Half"),
    (lambda: jg.fft.rfft(jg.randn(8).bfloat16()), RuntimeError, "Unsupported dtype BFloat16"),
    (lambda: jg.fft.fftfreq(5, dtype=jg.int64), RuntimeError, "fftfreq requires a floating point or complex dtype"),
]
COMPLEX_ERRORS = [
    (lambda: jg.fft.rfft(jg.randn(8).to(jg.complex64)), RuntimeError,
     "rfft expects a real input tensor, but got ComplexFloat"),
    (lambda: jg.fft.ihfft(jg.randn(8).to(jg.complex128)), RuntimeError,
     "ihfft expects a real input tensor, but got ComplexDouble"),
]


@pytest.mark.parametrize("k", range(len(ERRORS + COMPLEX_ERRORS)))
def test_errors(k):
    fn, exc, msg = (ERRORS + COMPLEX_ERRORS)[k]
    with pytest.raises(exc, match=msg):
        fn()


# ---------------------------------------------------------------------- gradients
GRAD_CASES = [  # (function, input kind, shape, kwargs)
    ("fft", "c", (3, 7), {}), ("fft", "r", (3, 8), {"norm": "ortho"}), ("fft", "c", (6,), {"n": 9}),
    ("ifft", "c", (2, 8), {"n": 5, "norm": "forward"}), ("ifft", "r", (7,), {}),
    ("rfft", "r", (3, 7), {}), ("rfft", "r", (8, 3), {"dim": 0, "norm": "forward"}), ("rfft", "r", (6,), {"n": 11}),
    ("irfft", "c", (3, 5), {}), ("irfft", "c", (5,), {"n": 9, "norm": "ortho"}), ("irfft", "c", (4,), {"n": 3}),
    ("hfft", "c", (2, 5), {}), ("hfft", "c", (5,), {"n": 8, "norm": "forward"}),
    ("ihfft", "r", (3, 7), {}), ("ihfft", "r", (8,), {"norm": "ortho"}),
    ("fft2", "c", (2, 3, 4), {}), ("ifft2", "c", (3, 5), {"s": (4, 6)}),
    ("rfft2", "r", (2, 5, 4), {"norm": "ortho"}), ("irfft2", "c", (4, 3), {}), ("irfft2", "c", (3, 4), {"s": (4, 5)}),
    ("fftn", "r", (3, 4), {"s": (2, 5)}), ("ifftn", "c", (2, 3, 4), {"dim": (0, 2)}),
    ("rfftn", "r", (3, 4, 5), {"dim": (2, 0)}), ("irfftn", "c", (3, 2, 4), {"s": (5, 6), "norm": "forward"}),
    ("hfft2", "c", (3, 4), {}), ("ihfft2", "r", (3, 5), {}), ("hfftn", "c", (2, 3, 3), {"norm": "ortho"}),
    ("ihfftn", "r", (4, 3, 2), {"dim": (0, 1)}),
]


def _case_id(case):
    return "%s-%s-%s-%s" % (case[0], case[1], "x".join(map(str, case[2])), ",".join("%s=%s" % kv for kv in
                                                                                   case[3].items()))


@pytest.mark.parametrize("case", GRAD_CASES, ids=_case_id)
def test_gradcheck(case):
    fname, kind, shape, kwargs = case
    x = jg.tensor(_input(kind, *shape), requires_grad=True)
    assert gradcheck(lambda t: getattr(jg.fft, fname)(t, **kwargs), (x,))


@pytest.mark.parametrize("case", [GRAD_CASES[k] for k in (0, 6, 9, 17, 19)], ids=_case_id)
def test_gradgradcheck(case):
    fname, kind, shape, kwargs = case
    x = jg.tensor(_input(kind, *shape), requires_grad=True)
    assert gradgradcheck(lambda t: getattr(jg.fft, fname)(t, **kwargs), (x,))


def test_grad_fn_names():
    x = jg.randn(8, requires_grad=True)
    assert type(jg.fft.rfft(x).grad_fn).__name__ == "FftR2CBackward0"
    assert type(jg.fft.irfft(jg.fft.rfft(x)).grad_fn).__name__ == "FftC2RBackward0"
    assert type(jg.fft.fft(x.to(jg.complex64)).grad_fn).__name__ == "FftC2CBackward0"


def test_the_rfft_gradient_is_the_adjoint():
    """<rfft(x), g> = <x, rfft^*(g)> (the real inner product of C^n as R^2n), with the doubled bins of irfft's."""
    x, g = _real(9), _complex(5)
    t = jg.tensor(x, requires_grad=True)
    y = jg.fft.rfft(t, norm="ortho")
    y.backward(jg.tensor(g))
    lhs = np.real(np.vdot(g, np.fft.rfft(x, norm="ortho")))
    assert np.isclose(lhs, np.dot(x, t.grad.numpy()))


# ---------------------------------------------------------------------- forward mode and vmap
def test_jvp_is_the_transform_of_the_tangent():
    x, t = jg.tensor(_real(3, 8)), jg.tensor(_real(3, 8))
    out, tangent = jg.func.jvp(lambda a: jg.fft.rfft(a, norm="ortho"), (x,), (t,))
    _close(tangent, np.fft.rfft(t.numpy(), norm="ortho"))
    z, tz = jg.tensor(_complex(4, 5)), jg.tensor(_complex(4, 5))
    _, tangent = jg.func.jvp(lambda a: jg.fft.irfft2(a), (z,), (tz,))
    _close(tangent, np.fft.irfft2(tz.numpy()))


def test_vmap_batches_the_transforms():
    x = _complex(4, 3, 6)
    out = jg.func.vmap(lambda a: jg.fft.fft2(a, norm="ortho"))(jg.tensor(x))
    _close(out, np.fft.fft2(x, norm="ortho"))
    r = _real(5, 4, 3)
    out = jg.func.vmap(lambda a: jg.fft.rfft(a, dim=0), in_dims=2)(jg.tensor(r))
    _close(out, np.moveaxis(np.fft.rfft(r, axis=0), 2, 0))
    out = jg.func.vmap(jg.fft.irfft)(jg.tensor(x))
    _close(out, np.fft.irfft(x))


# ---------------------------------------------------------------------- PyTorch
def _torch():
    return pytest.importorskip("torch")


@pytest.mark.torch
@pytest.mark.parametrize("k", range(len(ERRORS + COMPLEX_ERRORS)))
def test_errors_match_torch(k):
    torch = _torch()
    fn, exc, msg = (ERRORS + COMPLEX_ERRORS)[k]
    with pytest.raises(exc, match=msg):
        types.FunctionType(fn.__code__, dict(fn.__globals__, jg=torch))()  # the same call on torch


@pytest.mark.torch
@pytest.mark.parametrize("case", GRAD_CASES, ids=_case_id)
def test_values_and_gradients_match_torch(case):
    torch = _torch()
    fname, kind, shape, kwargs = case
    x = _input(kind, *shape)
    outs, grads = [], []
    for lib in (jg, torch):
        t = lib.tensor(x, requires_grad=True)
        y = getattr(lib.fft, fname)(t, **kwargs)
        w = lib.tensor(np.cos(np.arange(y.numel())).reshape(tuple(y.shape)))
        loss = (y.real * w).sum() + ((y.imag * w * w).sum() if y.dtype.is_complex else 0)
        loss.backward()
        outs.append(y.detach().resolve_conj().numpy())  # (PyTorch's ihfft gives a conjugate view)
        grads.append(t.grad.resolve_conj().numpy())
    np.testing.assert_allclose(outs[0], outs[1], rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-10, atol=1e-10)
