"""Parallel builds compiled in a second process while their serial twins run the calls.

A parallel (prange) build costs numba two to four times a serial one's compile (0.3 to 1 s a loop), and
a first training step needs several. The first call of a parallel build whose signature is not in the
on-disk cache therefore asks a worker process to compile it into that cache, and runs the serial twin
(the same function, the same results: only kernels whose threads write disjoint outputs have twins here).
Once the worker is done, the next call loads the build from the cache. The worker is started at the
first request and compiles one build at a time.

When this process exits (or dies), the worker finishes the build in hand (at most one more: the cost stays
bounded, a few seconds at most) so that it is in the cache for the next process, then ends; the builds
still queued are dropped, and the next process asks for them again at their first call. jit_stats()
counts the builds asked for, those still pending and the worker's compile seconds; JITGRAD_LOG_COMPILES=1
logs each request, each finished build with its time, and what is left at exit.

JITGRAD_BACKGROUND_COMPILE=0 (or a disabled cache) compiles every build in this process when first
called, as numba does.
"""
import atexit
import importlib
import os
import pickle
import queue
import signal
import subprocess
import sys
import threading
import time

from numba.core import config as numba_config
from numba.core.compiler_lock import global_compiler_lock
from numba.core.registry import CPUDispatcher

from . import config

# (without numba's cache a worker's build could not reach this process; with NUMBA_DISABLE_JIT nothing compiles)
ENABLED = config.CACHE and not numba_config.DISABLE_JIT and os.environ.get("JITGRAD_BACKGROUND_COMPILE", "1") != "0"

_state = {}    # (remake, signature) -> "building", "ok" or "failed"
REQUESTS = []  # request number -> its key (jit_stats counts them)
DONE = []      # (kernel name, signature, status, seconds the worker spent) per answered request
_names = {}    # request number -> the kernel's name (for the log)
_worker = []   # the worker process, once started
_lock = threading.Lock()


class Dispatcher(CPUDispatcher):
    """A parallel build whose missing signatures are compiled by the worker; ``twin()`` gives the serial
    build that runs meanwhile, ``remake`` = (module, function, args) makes this build in the worker."""

    def __init__(self, py_func, targetoptions, twin, remake):
        super().__init__(py_func=py_func, locals={}, targetoptions=targetoptions)
        self.twin, self.remake = twin, remake

    def _compile_for_args(self, *args, **kws):
        # numba calls this for arguments of a type no build has yet; what it returns runs the call
        if not kws:
            key = (self.remake, tuple(self.typeof_pyval(a) for a in args))
            state = _state.get(key)
            if state == "building" or (state is None and self._load(key[1]) is None
                                       and _building(key, self.py_func.__name__)):
                return self.twin()
        return super()._compile_for_args(*args, **kws)

    def _load(self, sig):
        """The build of ``sig`` from the on-disk cache (added as numba's compile adds it), or None."""
        with global_compiler_lock:
            cres = self._cache.load_overload(sig, self.targetctx)
            if cres is None:
                return None
            self._cache_hits[sig] += 1
            self.targetctx.insert_user_function(cres.entry_point, cres.fndesc, [cres.library])
            self.add_overload(cres)
            return cres.entry_point


def _building(key, name):
    """Whether the worker is compiling ``key``'s build: asked for at the first call, False once it is done
    or failed (numba's compile then loads it from the cache, or compiles it here)."""
    state = _state.get(key)
    if state is None:
        with _lock:
            if key not in _state:
                _state[key] = "building" if _send(key, name) else "failed"
        state = _state[key]
    return state == "building"


def _send(key, name):
    try:
        if not _worker:
            _start()
        proc = _worker[0]
        REQUESTS.append(key)  # before the request goes: the reader thread looks its reply up by number
        _names[len(REQUESTS) - 1] = name
        try:
            pickle.dump((len(REQUESTS) - 1,) + key, proc.stdin)
            proc.stdin.flush()
        except (OSError, ValueError, pickle.PickleError):  # (ValueError: closed at exit, by _let_go)
            REQUESTS.pop()  # not sent: compiled here, and not counted as a background build
            raise
        if config.LOG_COMPILES:
            print("jitgrad: compiling %s(%s) in the background" % (name, ", ".join(map(str, key[1]))), file=sys.stderr,
                  flush=True)
        return True
    except (OSError, ValueError, pickle.PickleError):
        return False


def _start():
    # the worker imports the kernels this process runs: the same jitgrad, found on the same path
    env = dict(os.environ, JITGRAD_BACKGROUND_COMPILE="0", PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    proc = subprocess.Popen([sys.executable, "-c", "import importlib; importlib.import_module(%r).serve()" % __name__],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
    _worker.append(proc)
    threading.Thread(target=_read_replies, args=(proc,), daemon=True).start()
    atexit.register(_let_go, proc)


def _let_go(proc):
    """At exit: close the worker's requests. It finishes the build in hand (into the cache) and ends by itself;
    this process does not wait for it."""
    pending = [_names.get(n, "?") for n, key in enumerate(REQUESTS) if _state.get(key) == "building"]
    if pending and config.LOG_COMPILES:
        print("jitgrad: exiting with %d background build(s) pending: the worker finishes the one in hand (%s), the "
              "next process asks for the rest again" % (len(pending), pending[0]), file=sys.stderr, flush=True)
    try:
        proc.stdin.close()
    except OSError:
        pass
    proc.returncode = 0  # (it outlives this process on purpose: Popen's finalizer must not warn that it still runs)


def _read_replies(proc):
    for line in proc.stdout:
        n, status, seconds = line.split()
        n, status, seconds = int(n), status.decode(), float(seconds)
        key = REQUESTS[n]
        DONE.append((_names.get(n, "?"), key[1], status, seconds))
        _state[key] = status
        if config.LOG_COMPILES and status == "ok":
            print("jitgrad: built %s(%s) in the background in %.3f s" % (_names.get(n, "?"), ", ".join(map(str, key[1])),
                                                                         seconds), file=sys.stderr, flush=True)
    for key, state in list(_state.items()):  # the worker ended: what it had not done is compiled here
        if state == "building":
            _state[key] = "failed"


def pending():
    """How many requested builds the worker has not answered yet."""
    return sum(1 for state in list(_state.values()) if state == "building")


def wait(timeout=None):
    """Block until the worker has answered every request (or ``timeout`` seconds passed); True if none is left.
    (``python -m jitgrad.precompile`` waits so that the parallel builds it asked for are in the cache.)"""
    deadline = None if timeout is None else time.monotonic() + timeout
    while pending():
        if deadline is not None and time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def _forget_worker_in_child():
    # a forked child has no reader thread for the parent's worker: it starts its own when it needs one
    _worker.clear()
    _state.clear()
    REQUESTS.clear()
    DONE.clear()
    _names.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_worker_in_child)


def serve():
    """The worker: compile each requested (number, remake, signature) into the on-disk cache and answer
    'number ok seconds' or 'number failed seconds'. Once the requesting process has closed the pipe (it
    exited, or died), finish the build in hand, or take the next one if none was, and end."""
    replies = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # anything printed while compiling goes to stderr, not into the replies
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C stops the requester; its exit ends this one
    requests, ended = queue.SimpleQueue(), threading.Event()

    def read():
        while True:
            try:
                requests.put(pickle.load(sys.stdin.buffer))
            except Exception:  # EOFError: the requester is gone
                # let go of its stdout/stderr, so that whoever reads them (a shell pipe, subprocess.run) is not
                # kept waiting for this last build
                quiet = os.open(os.devnull, os.O_WRONLY)
                os.dup2(quiet, 1)
                os.dup2(quiet, 2)
                ended.set()
                requests.put(None)
                return
    threading.Thread(target=read, daemon=True).start()
    while True:
        request = requests.get()
        if request is None:
            return
        n, (module, function, args), sig = request
        start = time.perf_counter()
        try:
            build = getattr(importlib.import_module(module), function)(*args)
            getattr(build, "dispatcher", build).compile(sig)
            status = "ok"
        except Exception as e:  # the requester compiles it itself
            print("jitgrad: background compile of %s.%s%r failed: %r" % (module, function, args, e), file=sys.stderr)
            status = "failed"
        if ended.is_set():
            return  # (its build is in the cache; the requester, gone, needs no answer)
        try:
            print(n, status, "%.4f" % (time.perf_counter() - start), file=replies, flush=True)
        except OSError:
            return
