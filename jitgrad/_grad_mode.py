"""Grad modes: no_grad, enable_grad, set_grad_enabled, inference_mode (thread-local)."""
import functools
import threading


class _State(threading.local):
    grad_enabled = True
    inference = False
    saved_tensors_hooks = ()  # stack of (pack, unpack)
    anomaly = False
    anomaly_check_nan = True
    capture = None  # while jitgrad.compile traces: a callable that dispatch hands every op to


STATE = _State()


def is_grad_enabled():
    return STATE.grad_enabled


def is_inference_mode_enabled():
    return STATE.inference


class _Mode:
    """A context manager that is also a decorator (a fresh copy per use, so it nests and recurses)."""

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.clone():
                return fn(*args, **kwargs)
        return wrapper

    def clone(self):
        return self.__class__()


class no_grad(_Mode):
    """Disable recording: results of ops do not require grad, even if their inputs do."""

    def __enter__(self):
        self.prev = STATE.grad_enabled
        STATE.grad_enabled = False

    def __exit__(self, *exc):
        STATE.grad_enabled = self.prev


class enable_grad(_Mode):
    def __enter__(self):
        self.prev = STATE.grad_enabled
        STATE.grad_enabled = True

    def __exit__(self, *exc):
        STATE.grad_enabled = self.prev


class set_grad_enabled(_Mode):
    """Set grad mode on or off; works as a function call, a context manager and a decorator."""

    def __init__(self, mode):
        self.prev = STATE.grad_enabled
        self.mode = bool(mode)
        STATE.grad_enabled = self.mode

    def __enter__(self):
        pass

    def __exit__(self, *exc):
        STATE.grad_enabled = self.prev

    def __call__(self, fn):
        STATE.grad_enabled = self.prev
        return super().__call__(fn)

    def clone(self):
        return self.__class__(self.mode)


class inference_mode(_Mode):
    """Like no_grad, and tensors made inside are inference tensors: never usable in autograd later."""

    def __init__(self, mode=True):
        self.mode = bool(mode)

    def __enter__(self):
        self.prev = (STATE.grad_enabled, STATE.inference)
        if self.mode:
            STATE.grad_enabled, STATE.inference = False, True
        else:
            STATE.inference = False

    def __exit__(self, *exc):
        STATE.grad_enabled, STATE.inference = self.prev

    def clone(self):
        return self.__class__(self.mode)
