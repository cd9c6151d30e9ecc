"""Grad modes: context managers, decorators, thread-locality, inference tensors."""
import threading

import pytest

import jitgrad as jg


def test_no_grad_context_and_decorator():
    x = jg.ones(2, requires_grad=True)
    with jg.no_grad():
        assert not jg.is_grad_enabled()
        with jg.enable_grad():
            assert (x * 2).requires_grad
        assert not (x * 2).requires_grad

    @jg.no_grad()
    def f(t):
        return t * 2
    assert not f(x).requires_grad and jg.is_grad_enabled()

    @jg.enable_grad()
    def g(t):
        return t * 2
    with jg.no_grad():
        assert g(x).requires_grad


def test_set_grad_enabled_function_context_decorator():
    x = jg.ones(2, requires_grad=True)
    jg.set_grad_enabled(False)
    try:
        assert not (x * 2).requires_grad
    finally:
        jg.set_grad_enabled(True)
    with jg.set_grad_enabled(False):
        assert not (x * 2).requires_grad
    assert jg.is_grad_enabled()

    @jg.set_grad_enabled(False)
    def f(t):
        return t * 2
    assert not f(x).requires_grad and jg.is_grad_enabled()


def test_modes_restored_after_exceptions():
    with pytest.raises(ValueError):
        with jg.no_grad():
            raise ValueError
    with pytest.raises(ValueError):
        with jg.inference_mode():
            raise ValueError
    assert jg.is_grad_enabled() and not jg.is_inference_mode_enabled()


def test_grad_mode_is_thread_local():
    seen = {}
    x = jg.ones(2, requires_grad=True)

    def worker():
        seen["enabled"] = jg.is_grad_enabled()
        seen["rg"] = (x * 2).requires_grad

    with jg.no_grad():
        t = threading.Thread(target=worker)
        t.start()
        t.join()
    assert seen == {"enabled": True, "rg": True}


def test_inference_mode_decorator_and_false():
    @jg.inference_mode()
    def f(t):
        return t * 2
    y = f(jg.ones(2, requires_grad=True))
    assert y.is_inference() and not y.requires_grad
    with jg.inference_mode(False):
        assert jg.is_grad_enabled()
    with jg.inference_mode():
        with jg.inference_mode(False):
            assert not jg.is_inference_mode_enabled()


def test_inference_tensor_inplace_outside_is_refused():
    with jg.inference_mode():
        x = jg.ones(2) * 1
    with pytest.raises(RuntimeError, match="Inplace update to inference tensor outside InferenceMode"):
        x.add_(1)
    assert x.tolist() == [1.0, 1.0]


def test_factories_ignore_no_grad():
    with jg.no_grad():
        for t in (jg.zeros(2, requires_grad=True), jg.randn(2, requires_grad=True),
                  jg.tensor([1.0], requires_grad=True), jg.full((2,), 3.0, requires_grad=True)):
            assert t.requires_grad and t.is_leaf


def test_no_grad_results_usable_later_in_grad_mode():
    w = jg.ones(2, requires_grad=True)
    with jg.no_grad():
        h = w * 3
    y = (h * w).sum()
    y.backward()
    assert w.grad.tolist() == [3.0, 3.0]
