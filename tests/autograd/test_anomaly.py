"""Anomaly mode: NaN checks after each backward node, the forward traceback of the failing op, and
(beyond PyTorch) the in-place version error naming the in-place op and the line it ran on."""
import warnings

import numpy as np
import pytest

import jitgrad as jg
from jitgrad.autograd import detect_anomaly, set_detect_anomaly
from jitgrad.autograd.anomaly import is_anomaly_enabled

ENABLED = "Anomaly Detection has been enabled. This mode will increase the runtime and should only be enabled for " \
          "debugging."


@pytest.fixture(autouse=True)
def _anomaly_restored():
    yield
    assert not jg.is_anomaly_enabled(), "test left anomaly mode on"


def make_sqrt(x):
    return x.sqrt()  # the forward line the trace must show


def test_nan_in_backward_names_the_node():
    x = jg.tensor([0.0, 1.0], requires_grad=True)
    with pytest.warns(UserWarning, match=ENABLED):
        with detect_anomaly():
            y = make_sqrt(x)  # d sqrt / dx at 0 is inf; times 0 gives nan
            with pytest.raises(RuntimeError, match=r"^Function 'SqrtBackward0' returned nan values in its 0th "
                                                   r"output\.$"):
                with pytest.warns(UserWarning) as record:
                    (y * 0).sum().backward()
    trace = [str(w.message) for w in record if "Error detected in" in str(w.message)]
    assert len(trace) == 1
    assert trace[0].startswith("Error detected in SqrtBackward0. Traceback of forward call that caused the error:\n")
    assert "y = make_sqrt(x)" in trace[0] and "return x.sqrt()" in trace[0]
    assert "jitgrad/" not in trace[0].split("caused the error:")[1]  # the trace ends at the user's line


def test_nan_index_of_the_output():
    a = jg.tensor([0.0], requires_grad=True)
    b = jg.tensor([0.0], requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with detect_anomaly():
            with pytest.raises(RuntimeError, match=r"^Function 'DivBackward0' returned nan values in its 1th output\.$"):
                (a / b.sqrt().detach().requires_grad_()).sum().backward()


def test_without_anomaly_mode_nan_passes_silently():
    x = jg.tensor([0.0, 1.0], requires_grad=True)
    (x.sqrt() * 0).sum().backward()
    assert np.isnan(x.grad.numpy()[0])


def test_check_nan_false_and_set_detect_anomaly():
    x = jg.tensor([0.0, 1.0], requires_grad=True)
    with set_detect_anomaly(True, check_nan=False):
        assert jg.is_anomaly_enabled() and not jg.is_anomaly_check_nan_enabled()
        (x.sqrt() * 0).sum().backward()
    assert not is_anomaly_enabled() and jg.is_anomaly_check_nan_enabled()
    set_detect_anomaly(True)
    try:
        assert jg.is_anomaly_enabled()
    finally:
        set_detect_anomaly(False)


def test_detect_anomaly_as_decorator():
    @detect_anomaly()
    def run():
        return jg.is_anomaly_enabled()
    with pytest.warns(UserWarning, match=ENABLED):
        assert run()
    assert not jg.is_anomaly_enabled()


def test_forward_trace_of_an_exception_in_backward():
    class Boom(jg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            raise ValueError("broken backward")
    x = jg.tensor([1.0], requires_grad=True)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        with detect_anomaly():
            y = Boom.apply(x)  # recorded line
            with pytest.raises(ValueError, match="broken backward"):
                y.sum().backward()
    msgs = [str(w.message) for w in record if "Error detected in BoomBackward" in str(w.message)]
    assert len(msgs) == 1 and "y = Boom.apply(x)  # recorded line" in msgs[0]


VERSION_MESSAGE = (r"^one of the variables needed for gradient computation has been modified by an inplace operation: "
                   r"\[jitgrad.FloatTensor \[2\]\], which is output 0 of MulBackward0, is at version 1; expected "
                   r"version 0 instead. ")


def test_inplace_error_without_anomaly_mode_gives_the_hint():
    x = jg.tensor([1.0, 2.0], requires_grad=True)
    a = x * 1
    y = a.sin()
    a.mul_(2)
    with pytest.raises(RuntimeError, match=VERSION_MESSAGE + r"Hint: enable anomaly detection to find the operation "
                                                             r"that failed to compute its gradient, with "
                                                             r"jitgrad.autograd.set_detect_anomaly\(True, "
                                                             r"check_nan=False\).$"):
        y.sum().backward()


def test_inplace_error_in_anomaly_mode_names_the_inplace_op_and_line():
    x = jg.tensor([1.0, 2.0], requires_grad=True)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        with detect_anomaly():
            a = x * 1
            y = a.sin()
            a.mul_(2)  # the offending line
            with pytest.raises(RuntimeError) as info:
                y.sum().backward()
    msg = str(info.value)
    assert msg.startswith(VERSION_MESSAGE[1:].replace("\\", ""))
    assert "The in-place operation was mul_, at %s:" % __file__ in msg
    assert 'in test_inplace_error_in_anomaly_mode_names_the_inplace_op_and_line: "a.mul_(2)  # the offending line"' \
        in msg
    assert msg.endswith("Hint: the backtrace further above shows the operation that failed to compute its gradient. "
                        "The variable in question was changed in there or anywhere later. Good luck!")
    traces = [str(w.message) for w in record if "Error detected in SinBackward0" in str(w.message)]
    assert len(traces) == 1 and "y = a.sin()" in traces[0]


def test_inplace_through_a_view_and_setitem_are_named():
    x = jg.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with detect_anomaly():
            a = x * 1
            y = a.exp().sum() + (a * a).sum()
            a[0].add_(1)
            with pytest.raises(RuntimeError, match=r"The in-place operation was add_, at .*: \"a\[0\].add_\(1\)\""):
                y.backward()
            b = x * 1
            z = (b * b).sum()
            b[1, 1] = 0.0
            with pytest.raises(RuntimeError, match=r"The in-place operation was __setitem__, at .*: \"b\[1, 1\] = "
                                                   r"0.0\""):
                z.backward()


def test_the_last_inplace_op_is_named():
    x = jg.tensor([1.0, 2.0], requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with detect_anomaly():
            a = x * 1
            y = (a * a).sum()
            a.add_(1)
            a.div_(2)
            with pytest.raises(RuntimeError, match=r"is at version 2; expected version 0 instead. The in-place "
                                                   r"operation was div_, at"):
                y.backward()
