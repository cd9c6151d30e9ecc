"""The functions of ``jitgrad.special`` that are entries of their own: the gamma family (lgamma, digamma,
polygamma, mvlgamma), zeta, the modified Bessel functions i0/i0e/i1/i1e and bessel_j0/j1, the normal
distribution's ndtr/ndtri/log_ndtr, erfcx, sinc, entr, logit, xlogy and xlog1py. Scalar kernels in
kernels/scalars.py (Cephes' algorithms, as PyTorch's); each derivative is PyTorch's formula, written once.
The NumPy references are SciPy's (imported when a test asks for one: SciPy is a test dependency).
"""
import math

import numpy as np

from .._op import dispatch
from .._trace_hooks import ValueUnavailable
from .._tensor import Tensor
from ._derive import Sym, derive
from ._table import COMPLEX, OPS, _arr, _noncontig, binary_samples, export, no_kernel, unary_samples
from .elementwise import _binary
from .unary import _c, _unary

_SQRT_2PI = math.sqrt(2 * math.pi)


def _sp(name):
    """scipy.special.<name>, imported on first use (a reference for the tests, not a dependency)."""
    def ref(*args, **kwargs):
        from scipy import special
        return getattr(special, name)(*args, **kwargs)
    return ref


def _apply(name, x):
    """Entry ``name`` (of one input, no params) applied in a VJP formula: its function on tensors, its scalar
    function on the symbols derive() runs a formula on (i1, i1e and ndtr have no Tensor method in PyTorch)."""
    return getattr(x, name)() if isinstance(x, Sym) else dispatch(OPS[name], (x,))


# ---------------------------------------------------------------------- derivatives (PyTorch's derivatives.yaml)
def _i1_grad(g, s):
    x = s.self
    return g * (s.self.i0() - s.result / x.masked_fill(x == 0, 1.0)).where(x != 0, 0.5)


def _i1e_grad(g, s):
    x = s.self
    return g * (_apply("i0e", x) - s.result * (x.sign() + 1 / x.masked_fill(x == 0, 1.0))).where(x != 0, 0.5)


def _sinc_grad(g, s):
    x = s.self
    t = x * math.pi
    return g * _c(((t * t.cos() - t.sin()) / (t * x)).where(x != 0, 0.0))


def _logit_grad(g, s):
    x = s.self
    return (g / (x * (1 - x))).where((x >= 0) & (x <= 1), math.nan)


def _logit_eps_grad(g, s):
    x = s.self
    return (g / (x * (1 - x))).where((x >= s.eps) & (x <= 1 - s.eps), 0.0)


def _xlogy_grad(log):
    """xlogy's (xlog1py's) derivative in x: log(y) (log1p(y)), none where x is 0 unless y is NaN, as PyTorch's
    xlogy(x != 0, y)."""
    def grad(g, s):
        y = s.other if isinstance(s.other, (Tensor, Sym)) else g.new_full((), s.other)  # (a number operand)
        return (g * getattr(y, log)()).where((s.self != 0) | (y != y), 0.0)
    return grad


def _mvlgamma_grad(g, s):
    x = s.self
    d = x.digamma()
    for i in range(1, int(s.p)):
        d = d + (x - 0.5 * i).digamma()
    return g * d


def _np_mvlgamma(x, p):
    from scipy import special
    return np.sum([special.gammaln(x - 0.5 * i) for i in range(p)], axis=0) + p * (p - 1) / 4 * math.log(math.pi)


# ---------------------------------------------------------------------- API
def polygamma(n, input):
    if n < 0:
        raise RuntimeError("polygamma(n, x) does not support negative n.")
    return dispatch(POLYGAMMA, (input,), {"n": int(n)})


export("polygamma", method=False)(polygamma)


@export("polygamma", function=False, inplace=True)
def _polygamma_method(self, n):
    return polygamma(n, self)


def mvlgamma(input, p):
    if p < 1:
        raise RuntimeError("p has to be greater than or equal to 1")
    try:
        bad = input.numel() and not bool((input > (p - 1) / 2).all())
    except ValueUnavailable:  # (inside vmap the values are not checked, as in PyTorch)
        bad = False
    if bad:
        raise RuntimeError("All elements must be greater than (p-1)/2")
    return dispatch(MVLGAMMA, (input,), {"p": int(p)})


def logit(input, eps=None):
    return dispatch(LOGIT, (input,)) if eps is None else dispatch(LOGIT_EPS, (input,), {"eps": float(eps)})


def xlogy(input, other):
    return dispatch(XLOGY, (input, other))


def xlog1py(input, other):
    return dispatch(XLOG1PY, (input, other))


def zeta(input, other):
    return dispatch(ZETA, (input, other))


# ---------------------------------------------------------------------- samples
def _positive(lo=0.2, hi=4.0):
    return unary_samples(lo, hi)


def _polygamma_samples(rng, dtype):
    A = lambda s: _arr(rng, s, 0.3, 3.0, dtype)  # noqa: E731
    return [((n, A(s)), {}) for n, s in [(0, (5,)), (1, ()), (1, (2, 3)), (2, (4,)), (3, (3,))]] + \
        [((1, _noncontig(rng, (3, 2), 0.3, 3.0, dtype)), {})]


def _mvlgamma_samples(rng, dtype):
    if np.dtype(dtype).kind != "f":
        return []  # (integer inputs: PyTorch's check reads them as numbers; not in the matrix)
    A = lambda s, lo: _arr(rng, s, lo, lo + 3, dtype)  # noqa: E731
    return [((A((4,), 0.6), 1), {}), ((A((2, 3), 1.1), 3), {}), ((A((), 2.1), 5), {}),
            ((_noncontig(rng, (3, 2), 1.6, 4.0, dtype), 4), {})]


def _logit_eps_samples(rng, dtype):
    A = lambda s: _arr(rng, s, 0.05, 0.95, dtype)  # noqa: E731
    return [((A((5,)),), {"eps": 0.2}), ((A(()),), {"eps": 0.0}), ((A((2, 3)),), {"eps": 1e-6})]


def _zeta_samples(rng, dtype):
    return binary_samples(a=(1.5, 5.0), b=(0.5, 3.0), scalar=None)(rng, dtype) + \
        [((3.0, _arr(rng, (2, 3), 0.5, 3.0, dtype)), {}), ((_arr(rng, (4,), 1.5, 4.0, dtype), 2.0), {})]


# ---------------------------------------------------------------------- the entries
def _special(name, vjp, fused, ref, node=None, **kw):
    """An entry of torch.special (no jitgrad.<name>, no Tensor method) unless ``api`` says otherwise."""
    kw.setdefault("api", ())
    kw.setdefault("node", node or "Special" + "".join(p.capitalize() for p in name.split("_")) + "Backward0")
    return _unary(name, vjp, fused, ref=ref, **kw)


LGAMMA = _unary("lgamma", lambda g, s: g * s.self.digamma(), derive("lgamma_vjp"), ref=_sp("gammaln"),
                samples=_positive(), inplace=True, unsupported=no_kernel("lgamma_vml_cpu", *COMPLEX))
DIGAMMA = _unary("digamma", lambda g, s: g * s.self.polygamma(1), derive("digamma_vjp"), ref=_sp("psi"),
                 samples=_positive(0.3, 4.0), inplace=True)
POLYGAMMA = _unary("polygamma", lambda g, s: g * s.self.polygamma(s.n + 1), derive("polygamma_vjp"),
                   ref=lambda n, x: _sp("polygamma")(n, x), params={"n": 0}, samples=_polygamma_samples,
                   call=polygamma, api=(), unsupported=no_kernel("digamma", *COMPLEX))
MVLGAMMA = _unary("mvlgamma", _mvlgamma_grad, None, ref=_np_mvlgamma, params={"p": 1}, samples=_mvlgamma_samples,
                  call=mvlgamma, inplace=True)
I0 = _unary("i0", lambda g, s: g * _apply("i1", s.self), derive("i0_vjp"), ref=_sp("i0"), inplace=True,
            unsupported=no_kernel("i0_vml_cpu", *COMPLEX))
I0E = _special("i0e", lambda g, s: g * (_apply("i1e", s.self) - s.self.sign() * s.result), derive("i0e_vjp"),
               _sp("i0e"), node="SpecialI0EBackward0", unsupported=no_kernel("i0e_cpu", *COMPLEX))
I1 = _special("i1", _i1_grad, derive("i1_vjp"), _sp("i1"), unsupported=no_kernel("i1_cpu", *COMPLEX))
I1E = _special("i1e", _i1e_grad, derive("i1e_vjp"), _sp("i1e"), node="SpecialI1EBackward0",
               unsupported=no_kernel("i1e_cpu", *COMPLEX))
ERFCX = _special("erfcx", lambda g, s: g * (2 * s.self * s.result - 2 / math.sqrt(math.pi)), derive("erfcx_vjp"),
                 _sp("erfcx"), unsupported=no_kernel("erfcx_cpu", *COMPLEX))
NDTR = _special("ndtr", lambda g, s: g * (-0.5 * s.self * s.self).exp() / _SQRT_2PI, derive("ndtr_vjp"),
                _sp("ndtr"), unsupported=no_kernel("erf_vml_cpu", *COMPLEX))
NDTRI = _special("ndtri", lambda g, s: g * _SQRT_2PI * (0.5 * s.result * s.result).exp(), derive("ndtri_vjp"),
                 _sp("ndtri"), samples=unary_samples(0.02, 0.98), unsupported=no_kernel("ndtri_cpu", *COMPLEX))
LOG_NDTR = _special("log_ndtr", lambda g, s: g * (-(s.result + 0.5 * s.self * s.self)).exp() / _SQRT_2PI,
                    derive("log_ndtr_vjp"), _sp("log_ndtr"), samples=unary_samples(-4.0, 3.0),
                    unsupported=no_kernel("log_ndtr_cpu", *COMPLEX))
SINC = _unary("sinc", _sinc_grad, derive("sinc_vjp"), ref=np.sinc, inplace=True, complex=True)
ENTR = _special("entr", lambda g, s: -g * (1 + s.self.log()), derive("entr_vjp"), _sp("entr"),
                samples=_positive(0.1, 2.0), unsupported=no_kernel("entr_cpu", *COMPLEX))
LOGIT = _unary("logit", _logit_grad, derive("logit_vjp"), ref=_sp("logit"), samples=unary_samples(0.05, 0.95),
               call=logit, inplace=True, unsupported=no_kernel("logit_cpu", *COMPLEX))
LOGIT_EPS = _unary("logit_eps", _logit_eps_grad, derive("logit_eps_vjp"), params={"eps": 0.0},
                   ref=lambda x, eps: _sp("logit")(np.clip(x, eps, 1 - eps)), samples=_logit_eps_samples,
                   node="LogitBackward0", call=logit, api=(), unsupported=no_kernel("logit_cpu", *COMPLEX))
# zeta has no derivative in x (PyTorch's is "not implemented"), nor here in q; bessel_j0/j1 none at all, as PyTorch
ZETA = _binary("zeta", dtype="float", ref=_sp("zeta"), samples=_zeta_samples, differentiable=False, call=zeta,
               unsupported=no_kernel("zeta_cpu", *COMPLEX))
BESSEL_J0 = _special("bessel_j0", None, None, _sp("j0"), differentiable=False, samples=unary_samples(-8.0, 8.0),
                     unsupported=no_kernel("bessel_j0_cpu", *COMPLEX))
BESSEL_J1 = _special("bessel_j1", None, None, _sp("j1"), differentiable=False, samples=unary_samples(-8.0, 8.0),
                     unsupported=no_kernel("bessel_j1_cpu", *COMPLEX))
XLOGY = _binary("xlogy", [_xlogy_grad("log"), lambda g, s: g * s.self / s.other],
                [derive("xlogy_vjp_self"), derive("xlogy_vjp_other")], dtype="float", ref=_sp("xlogy"), b=(0.2, 2.0),
                call=xlogy, api=("xlogy",), inplace=True, node="XlogyBackward0",
                unsupported=no_kernel("xlogy_cpu", *COMPLEX))
XLOG1PY = _binary("xlog1py", [_xlogy_grad("log1p"), lambda g, s: g * s.self / (s.other + 1)],
                  [derive("xlog1py_vjp_self"), derive("xlog1py_vjp_other")], dtype="float", ref=_sp("xlog1py"),
                  b=(-0.5, 2.0), call=xlog1py, node="SpecialXlog1PyBackward0",
                  unsupported=no_kernel("xlog1py_cpu", *COMPLEX))
