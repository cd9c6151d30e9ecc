"""How kernels are compiled: one decorator, so cache, error model and fastmath are set once.

Every compilation of a kernel of this package is timed (numba's "numba:compile" event) and
recorded in COMPILES, for jitgrad.jit_stats(); with JITGRAD_LOG_COMPILES=1 each kernel's
compilation is also logged to stderr, one line each.
"""
import hashlib
import importlib
import os
import sys
import threading
import time
import types

from numba import njit
from numba.core import event

from . import _background, config


def sources_stamp(*files):
    """A hash of source files: generated kernels carry it in their names, so that numba's on-disk cache (keyed
    on the generating file) never serves a kernel built from older versions of the code they inline."""
    digest = hashlib.sha1()
    for path in files:
        with open(path, "rb") as f:
            digest.update(f.read())
    return digest.hexdigest()[:12]


# Every compiled kernel, for jitgrad.jit_stats().
DISPATCHERS = []

# One (kernel name, signature, seconds, nesting depth) per compilation in this process. Scalar
# functions compile nested inside the loops that inline them (depth > 0): their time is already
# part of the enclosing loop's.
COMPILES = []


class _CompileRecorder(event.Listener):
    """Times numba compilations of this package's functions (cache loads are not compilations)."""

    def __init__(self):
        self._local = threading.local()

    def _stack(self):
        stack = getattr(self._local, "stack", None)
        if stack is None:
            stack = self._local.stack = []
        return stack

    def on_start(self, ev):
        self._stack().append(time.perf_counter())

    def on_end(self, ev):
        stack = self._stack()
        seconds = time.perf_counter() - stack.pop()
        fn = ev.data["dispatcher"].py_func
        if not (fn.__module__ or "").startswith(__package__ + "."):
            return  # someone else's @njit function (exec'd source may have no module)
        sig = "(%s)" % ", ".join(str(a) for a in ev.data["args"])
        COMPILES.append((fn.__name__, sig, seconds, len(stack)))
        if config.LOG_COMPILES and not stack:
            print("jitgrad: compiled %s%s in %.3f s" % (fn.__name__, sig, seconds), file=sys.stderr, flush=True)


event.register("numba:compile", _CompileRecorder())


# Held around each parallel launch where numba's threading layer may be workqueue
# (config.SERIALISE_PARALLEL), which aborts the process when two threads run parallel loops at once.
PARALLEL_LOCK = threading.Lock()


def _new_lock_in_child():
    # a child forked while another thread held the lock would wait on it forever
    global PARALLEL_LOCK
    PARALLEL_LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_lock_in_child)


def _serialised(d):
    def launch(*args):
        with PARALLEL_LOCK:
            return d(*args)
    launch.dispatcher = d
    return launch


def compiled(fn, parallel=False, name=None, twin=None, remake=None, fastmath=None):
    """Compile ``fn`` lazily with numba (on-disk cache, NumPy error model, safe fastmath).

    ``name`` gives the compiled copy its own qualified name, so that a serial and a parallel
    build of the same Python function keep separate on-disk cache entries. Every parallel kernel
    of the package is built here, so this is where their launches are serialised when the
    threading layer is not thread-safe.

    A parallel build given ``twin`` (a function returning its serial build, which computes the same
    values) and ``remake`` ((module, function, args) whose call makes this build in another process)
    is compiled in the background (kernels/_background.py) while the twin runs its first calls.
    """
    if name is not None:
        code = fn.__code__.replace(co_name=name, co_qualname=name)
        fn = types.FunctionType(code, fn.__globals__, name, fn.__defaults__, fn.__closure__)
    options = dict(parallel=parallel, error_model="numpy", fastmath=fastmath or config.FASTMATH, nogil=True)
    if parallel and twin is not None and _background.ENABLED:
        d = _background.Dispatcher(fn, dict(options, nopython=True), twin, remake)
        d.enable_caching()
    else:
        d = njit(cache=config.CACHE, **options)(fn)
    DISPATCHERS.append(d)
    return _serialised(d) if parallel and config.SERIALISE_PARALLEL else d


class Building(Exception):
    """A parallel build is compiling in the background, and its caller runs another path meanwhile (its library's
    own call) instead of a serial build: a first step would pay that build's compile, then run on one thread."""


def not_yet(*args):
    """The ``meanwhile`` of a parallel build whose caller takes another path until it is built: raises Building."""
    raise Building


def twins(fn, same_values=True, fastmath=None, meanwhile=None):
    """Serial and parallel builds of ``fn`` (whose loops use prange). Where they give the same values (each
    thread writes outputs of its own, no prange sum), the parallel one builds in the background, the serial one
    running its calls meanwhile (or ``meanwhile``, a function of the same arguments)."""
    serial = compiled(fn, name=fn.__name__ + "_ser", fastmath=fastmath)
    if not same_values:
        return serial, compiled(fn, parallel=True, name=fn.__name__ + "_par", fastmath=fastmath)
    return serial, compiled(fn, parallel=True, name=fn.__name__ + "_par", twin=lambda: meanwhile or serial,
                            fastmath=fastmath, remake=(__name__, "built", (fn.__globals__["__name__"],
                                                                           fn.__name__ + "_par")))


def built(module, name):
    """The build named ``name`` of kernel module ``module`` (imported: its twins are made at import)."""
    importlib.import_module(module)
    return next(d for d in DISPATCHERS if d.py_func.__module__ == module and d.py_func.__name__ == name)
