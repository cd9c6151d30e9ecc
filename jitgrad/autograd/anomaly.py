"""Anomaly detection: forward tracebacks on nodes, NaN checks after each backward node, and the
in-place version error (which, in anomaly mode, also names where the in-place op ran)."""
import os
import sys
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


_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def _internal(filename):
    return os.path.abspath(filename).startswith(_PACKAGE_DIR)


def _user_stack():
    """The current stack up to the user's call into jitgrad (jitgrad's own frames at the end dropped);
    source lines are looked up only if it is ever printed."""
    summary = traceback.StackSummary.extract(traceback.walk_stack(sys._getframe(1)), lookup_lines=False)
    summary.reverse()
    while summary and _internal(summary[-1].filename):
        summary.pop()
    return summary


def record_trace(node):
    """Remember the forward call that created ``node`` (anomaly mode), to show it if its backward fails."""
    node._anomaly_trace = _user_stack()


def note_inplace(t, op_name):
    """Anomaly mode: remember, next to ``t``'s version counter (shared by its views), which in-place op
    modified its storage last and on which line of the user's code."""
    frames = _user_stack()
    del t._vc[1:]
    t._vc.append((op_name, frames[-1] if frames else None))


def _describe_inplace(op_name, frame):
    if frame is None:
        return "The in-place operation was %s. " % op_name
    code = (frame.line or "").strip()
    return "The in-place operation was %s, at %s:%d in %s%s. " % (op_name, frame.filename, frame.lineno, frame.name,
                                                                 ': "%s"' % code if code else "")


def version_error(saved):
    msg = ("one of the variables needed for gradient computation has been modified by an inplace operation: %s is at "
           "version %d; expected version %d instead. " % (saved.describe(), saved._vc[0], saved._version))
    if STATE.anomaly:
        if len(saved._vc) > 1:
            msg += _describe_inplace(*saved._vc[1])
        msg += ("Hint: the backtrace further above shows the operation that failed to compute its gradient. The "
                "variable in question was changed in there or anywhere later. Good luck!")
    else:
        msg += ("Hint: enable anomaly detection to find the operation that failed to compute its gradient, with "
                "jitgrad.autograd.set_detect_anomaly(True, check_nan=False).")
    return msg


def _forward_trace_warning(node):
    if node._anomaly_trace:
        warnings.warn("Error detected in %s. Traceback of forward call that caused the error:\n%s"
                      % (node.name(), "".join(node._anomaly_trace.format())), UserWarning, stacklevel=3)


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

