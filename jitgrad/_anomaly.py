"""Anomaly mode's machinery: forward traces on nodes, the in-place version error, NaN checks in backward.

The switches users turn (detect_anomaly, set_detect_anomaly) are in jitgrad/autograd/anomaly.py; this
part sits below the graph, which records traces when a node is made and raises the version error.
"""
import os
import sys
import traceback
import warnings

import numpy as np

from ._grad_mode import STATE

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


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
    for i, g in enumerate(outs):
        if g is not None and g.dtype.is_inexact and np.isnan(g._data).any():
            _forward_trace_warning(node)
            raise RuntimeError("Function '%s' returned nan values in its %dth output." % (node.name(), i))
