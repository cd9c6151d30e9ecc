"""Anomaly mode's switches: detect_anomaly, set_detect_anomaly and their queries.

In anomaly mode backward checks for NaNs and shows the forward trace of a failing node, and the
in-place version error names the offending line; that machinery is in jitgrad/_anomaly.py.
"""
import functools
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
