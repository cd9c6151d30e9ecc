"""Anomaly detection: forward tracebacks on nodes, NaN checks after each backward node, and the
in-place version error (which, in anomaly mode, also names where the in-place op ran)."""
import traceback
import warnings

from .._grad_mode import STATE


class detect_anomaly:
    """Context manager: check backward for NaNs and show the forward trace of the failing op."""

    def __init__(self, check_nan=True):
        self.check_nan = check_nan

    def __enter__(self):
        warnings.warn("Anomaly Detection has been enabled. This mode will increase the runtime and should only be "
                      "enabled for debugging.", UserWarning, stacklevel=2)
        self.prev = (STATE.anomaly, STATE.anomaly_check_nan)
        STATE.anomaly, STATE.anomaly_check_nan = True, self.check_nan

    def __exit__(self, *exc):
        STATE.anomaly, STATE.anomaly_check_nan = self.prev

    def __call__(self, fn):
        import functools

        @functools.wraps(fn)
        def wrapper(*a, **k):
            with detect_anomaly(self.check_nan):
                return fn(*a, **k)
        return wrapper


class set_detect_anomaly:
    """Turn anomaly mode on or off (a function call, or a context manager restoring it)."""

    def __init__(self, mode, check_nan=True):
        self.prev = (STATE.anomaly, STATE.anomaly_check_nan)
        STATE.anomaly, STATE.anomaly_check_nan = bool(mode), check_nan

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        STATE.anomaly, STATE.anomaly_check_nan = self.prev


def is_anomaly_enabled():
    return STATE.anomaly


def is_anomaly_check_nan_enabled():
    return STATE.anomaly_check_nan


def record_trace(node):
    node._anomaly_trace = "".join(traceback.format_stack()[:-3])


def _user_frame():
    """'file:line in function' of the innermost frame outside jitgrad."""
    import os
    pkg = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for frame in reversed(traceback.extract_stack()):
        if not os.path.abspath(frame.filename).startswith(pkg):
            return "%s:%d in %s" % (frame.filename, frame.lineno, frame.name)
    return "<unknown>"


def note_inplace(t, op_name):
    """In anomaly mode, remember where ``t``'s storage was last modified in place."""
    if STATE.anomaly:
        t._vc.append((op_name, _user_frame())) if len(t._vc) == 1 else t._vc.__setitem__(1, (op_name, _user_frame()))


def version_error(saved):
    msg = ("one of the variables needed for gradient computation has been modified by an inplace operation: %s is at "
           "version %d; expected version %d instead. " % (saved.describe(), saved._vc[0], saved._version))
    if STATE.anomaly:
        where = saved._vc[1] if len(saved._vc) > 1 else None
        if where is not None:
            msg += "The in-place operation was %s at %s. " % where
        msg += ("Hint: the backtrace further above shows the operation that failed to compute its gradient. The "
                "variable in question was changed in there or anywhere later. Good luck!")
    else:
        msg += ("Hint: enable anomaly detection to find the operation that failed to compute its gradient, with "
                "jitgrad.autograd.set_detect_anomaly(True).")
    return msg


def _forward_trace_warning(node):
    if node._anomaly_trace:
        warnings.warn("Error detected in %s. Traceback of forward call that caused the error:\n%s"
                      % (node.name(), node._anomaly_trace), UserWarning, stacklevel=3)


def annotate(exc, node):
    _forward_trace_warning(node)


def check_nan(node, outs):
    if not STATE.anomaly_check_nan:
        return
    import numpy as np
    for i, g in enumerate(outs):
        if g is not None and g.dtype.is_floating_point and np.isnan(g._data).any():
            _forward_trace_warning(node)
            raise RuntimeError("Function '%s' returned nan values in its %dth output." % (node.name(), i))

