"""Shrinkage and threshold activations with kernels and nodes of their own in PyTorch: hardshrink,
softshrink (HardshrinkBackward0, SoftshrinkBackward0) and threshold (ThresholdBackward0). Their gradient
passes g where the input is outside the dead zone (above the threshold). The compositions PyTorch writes
in Python (softsign, tanhshrink, relu6, softmin, ...) are in nn/functional.py."""
import numpy as np

from .._op import dispatch
from ._table import INTS, no_kernel
from .unary import _on, _unary

_FLOAT_TYPES = {"float32": ("Float", 3.4028234663852886e38), "float64": ("Double", 1.7976931348623157e308),
                "float16": ("Half", 65504.0), "bfloat16": ("BFloat16", 3.3895313892515355e38)}


def softshrink(input, lambd=0.5):
    """x - lambd above lambd, x + lambd below -lambd, 0 between."""
    name, top = _FLOAT_TYPES.get(input.dtype.name, (None, None))
    if name is not None and not 0 <= lambd <= top:
        raise RuntimeError("lambda must be in range [0, %g] for input dtype %s, but found %g" % (top, name, lambd))
    return dispatch(SOFTSHRINK, (input,), {"lambd": lambd})


def threshold(input, threshold, value):
    """``value`` where input <= threshold, else input."""
    return dispatch(THRESHOLD, (input,), {"threshold": threshold, "value": value})


def _np_shrink(soft):
    def ref(x, lambd=0.5):
        out = np.where(np.abs(x) > lambd, x - np.sign(x) * lambd if soft else x, 0)
        return np.where(np.isnan(x), x, out).astype(x.dtype)
    return ref


def _outside(g, s):
    return _on((s.self > s.lambd) | (s.self < -s.lambd), g)


HARDSHRINK = _unary("hardshrink", _outside, params={"lambd": 0.5}, ref=_np_shrink(False), dtype="same",
                    function=True, unsupported=no_kernel("hardshrink_cpu", "bool", *INTS))
SOFTSHRINK = _unary("softshrink", _outside, params={"lambd": 0.5}, ref=_np_shrink(True), dtype="same",
                    call=softshrink, method=False, function=False, api=(),
                    unsupported=no_kernel("softshrink_cpu", "bool", *INTS))
THRESHOLD = _unary("threshold", lambda g, s: _on(s.self > s.threshold, g), params={"threshold": 0.5, "value": -1.0},
                   ref=lambda x, threshold=0.5, value=-1.0: np.where(x <= threshold, value, x).astype(x.dtype),
                   dtype="same", call=threshold, method=False, inplace=True,
                   unsupported=no_kernel("threshold_cpu", "bool"))
