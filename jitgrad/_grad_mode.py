"""Grad modes: no_grad, enable_grad, set_grad_enabled, inference_mode (thread-local)."""
import functools
import threading


# How many threads are in a rare mode (inference mode, saved-tensor hooks, anomaly mode, autocast, a
# jitgrad.compile trace, the profiler). Reading a thread-local costs ~0.1 us, so the per-op path reads these modes
# only while SPECIAL[0] is not 0.
SPECIAL = [0]
_SPECIAL_FIELDS = frozenset(("inference", "saved_tensors_hooks", "anomaly", "capture", "autocast", "dual", "vmap", "profiler"))
_special_lock = threading.Lock()


class _State(threading.local):
    grad_enabled = True
    inference = False
    saved_tensors_hooks = ()  # stack of (pack, unpack)
    anomaly = False
    anomaly_check_nan = True
    capture = None  # while jitgrad.compile traces: a callable that dispatch hands every op to
    # inside forward_ad.dual_level(): a callable that dispatch hands every op with a dual operand to
    dual = None
    # inside jitgrad.vmap (jitgrad/func/): a hook whose ``claims(op, args)`` says whether dispatch hands it the op
    vmap = None
    # inside jitgrad.profiler.profile while it records: the recorder dispatch and the engine time ops with
    profiler = None
    # inside gradcheck/gradgradcheck: backward passes run on the node-by-node engine, not compiled autograd's plans
    # (a plan built between two passes would round a fused formula differently: its reentrancy check is bit for bit)
    eager_backward = False
    # jitgrad.autocast (jitgrad/amp/): {device type: dtype} of the device types it is on for, the dtypes
    # set per device type (None: the defaults), whether casts of leaf weights are cached, how many autocast
    # regions are open, and the cache {id(weight): (weight, its cast)}. Mappings are replaced, never changed.
    autocast = None
    autocast_dtypes = None
    autocast_cache_enabled = True
    autocast_nesting = 0
    autocast_cache = None

    def _special(self):
        return bool(self.inference or self.saved_tensors_hooks or self.anomaly or self.capture is not None
                    or self.autocast or self.dual is not None or self.vmap is not None
                    or self.profiler is not None)

    def __setattr__(self, name, value):
        if name not in _SPECIAL_FIELDS:
            return super().__setattr__(name, value)
        before = self._special()
        super().__setattr__(name, value)
        after = self._special()
        if before != after:
            with _special_lock:
                SPECIAL[0] += 1 if after else -1


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
