"""jitgrad.special: torch.special's functions, with their gradients where PyTorch has them.

Each one is an op table entry (jitgrad/ops/special_functions.py, jitgrad/ops/special.py, ops/unary.py) or an
entry under another name (expit is sigmoid, gammaln is lgamma, psi is digamma, multigammaln is mvlgamma).
"""
from .ops import softmax as _softmax
from .ops.reduction import logsumexp  # noqa: F401
from .ops.special import ERFC as _ERFC, ERFINV as _ERFINV
from .ops.special_functions import (BESSEL_J0 as _J0, BESSEL_J1 as _J1, DIGAMMA as _DIGAMMA, ENTR as _ENTR,
                                    ERFCX as _ERFCX, I0 as _I0, I0E as _I0E, I1 as _I1, I1E as _I1E, LGAMMA as _LGAMMA,
                                    LOG_NDTR as _LOG_NDTR, NDTR as _NDTR, NDTRI as _NDTRI, SINC as _SINC, logit,
                                    mvlgamma, polygamma, xlog1py, xlogy, zeta)
from .ops.unary import ERF as _ERF, EXP2 as _EXP2, EXPM1 as _EXPM1, LOG1P as _LOG1P, ROUND as _ROUND, \
    SIGMOID as _SIGMOID

erf, erfc, erfinv, erfcx = _ERF.exposure.call, _ERFC.exposure.call, _ERFINV.exposure.call, _ERFCX.exposure.call
expit = _SIGMOID.exposure.call
gammaln = _LGAMMA.exposure.call
digamma = psi = _DIGAMMA.exposure.call
i0, i0e, i1, i1e = _I0.exposure.call, _I0E.exposure.call, _I1.exposure.call, _I1E.exposure.call
ndtr, ndtri, log_ndtr = _NDTR.exposure.call, _NDTRI.exposure.call, _LOG_NDTR.exposure.call
sinc, entr = _SINC.exposure.call, _ENTR.exposure.call
bessel_j0, bessel_j1 = _J0.exposure.call, _J1.exposure.call
exp2, expm1, log1p, round = _EXP2.exposure.call, _EXPM1.exposure.call, _LOG1P.exposure.call, _ROUND.exposure.call


def multigammaln(input, p):
    return mvlgamma(input, p)


def softmax(input, dim, *, dtype=None):
    return _softmax.softmax(input, dim, dtype=dtype)


def log_softmax(input, dim, *, dtype=None):
    return _softmax.log_softmax(input, dim, dtype=dtype)


__all__ = ["bessel_j0", "bessel_j1", "digamma", "entr", "erf", "erfc", "erfcx", "erfinv", "exp2", "expit", "expm1",
           "gammaln", "i0", "i0e", "i1", "i1e", "log1p", "log_ndtr", "log_softmax", "logit", "logsumexp",
           "multigammaln", "ndtr", "ndtri", "polygamma", "psi", "round", "sinc", "softmax", "xlog1py", "xlogy", "zeta"]
