"""MPI through mpi4py: loading it, waiting on requests with a timeout, aborting the job, finding mpiexec.

mpi4py is an optional package (the ``distributed`` extra) and importing ``mpi4py.MPI`` initializes
MPI, so it is imported when a process group is first created, never when jitgrad is imported.
"""
import atexit
import importlib.util
import os
import shutil
import sys
import threading
import time
import weakref

_MPI = [None]


def is_available():
    """Whether mpi4py (and so an MPI library) can be imported."""
    return importlib.util.find_spec("mpi4py") is not None


def mpi():
    """The ``mpi4py.MPI`` module, imported (and MPI initialized) on first use."""
    if _MPI[0] is None:
        if not is_available():
            raise RuntimeError("jitgrad.distributed needs mpi4py and an MPI library: "
                               "pip install \"jitgrad[distributed]\"")
        from mpi4py import MPI  # optional package; initializes MPI (thread level MULTIPLE, mpi4py's default)
        _MPI[0] = MPI
        atexit.register(_stop_pollers)  # after mpi4py's exit handler, so it runs before MPI is finalized
    return _MPI[0]


def world_rank():
    return mpi().COMM_WORLD.Get_rank() if _MPI[0] is not None else 0


def abort(message, code=1):
    """Print ``message`` tagged with this rank and end every process of the job (MPI_Abort)."""
    sys.stdout.flush()
    sys.stderr.write("[rank %d] %s\n" % (world_rank(), message))
    sys.stderr.flush()
    mpi().COMM_WORLD.Abort(code)
    os._exit(code)  # MPI_Abort may return before mpiexec has ended this process: never go on


def wait(requests, timeout, what, statuses=None):
    """Complete ``requests``; abort the job if they take longer than ``timeout`` seconds.

    A collective that never completes means another rank died, raised or runs a different
    collective: MPI cannot cancel a collective, so the only way out is to end the job, as PyTorch's
    NCCL watchdog does. The loop polls (Test drives MPI's progress) and backs off into short sleeps,
    so a rank that waits leaves the CPU to one that computes.
    """
    MPI = mpi()
    testall = MPI.Request.Testall
    if testall(requests, statuses):
        return
    start = time.monotonic()
    polls = 0
    while not testall(requests, statuses):
        polls += 1
        if polls > 200:
            elapsed = time.monotonic() - start
            if elapsed > timeout:
                abort("jitgrad.distributed: %s did not complete within the timeout of %.1f s: another rank has "
                      "died, exited, raised an error or is running a different collective. Aborting the job."
                      % (what, timeout))
            time.sleep(0 if elapsed < 1e-3 else min(1e-3, elapsed * 0.05))


class Poller:
    """A thread that tests non-blocking MPI requests every ``interval`` seconds, so that they progress
    while this process computes.

    MPICH moves a non-blocking collective forward only inside MPI calls of the ranks taking part;
    the thread makes those calls while the kernels and BLAS run (they release the GIL). MPI forbids
    completing one request from two threads at once: every MPI call on the requests made elsewhere
    holds ``lock``, and the thread leaves them alone after ``stop()``. The thread is started once and
    sleeps (on an event) whenever nothing is pending, so neither add() nor stop() waits for it.
    """

    def __init__(self, interval=5e-4):
        self.interval = interval
        self.lock = threading.Lock()
        self.requests = []
        self._pending = False
        self._wake = threading.Event()
        self._thread = None
        self._error = None
        _pollers.add(self)

    @property
    def active(self):
        """Whether some added request has not completed yet (and the thread polls it)."""
        return self._pending

    def add(self, request):
        """Poll ``request`` from now on (the caller holds ``lock`` no longer)."""
        with self.lock:
            self.requests.append(request)
            self._pending = True
            self._wake.set()
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="jitgrad-mpi-progress", daemon=True)
            self._thread.start()

    def _run(self):
        testall = mpi().Request.Testall
        while True:
            self._wake.wait()
            with self.lock:
                if self._pending:
                    try:
                        self._pending = not testall(self.requests)
                    except Exception as exc:  # handed to stop()'s caller
                        self._error, self._pending = exc, False
                if not self._pending:
                    self._wake.clear()
                    continue
            time.sleep(self.interval)

    def stop(self):
        """Stop polling; returns the requests added since the last stop (for the caller to wait on)."""
        with self.lock:
            self._pending = False
            self._wake.clear()
            requests, self.requests = self.requests, []
            error, self._error = self._error, None
        if error is not None:
            raise error
        return requests


_pollers = weakref.WeakSet()


def _stop_pollers():
    for poller in list(_pollers):
        with poller.lock:
            poller._pending = False


_hook = [None, None]  # (the hook installed, the one it replaced)


def install_excepthook():
    """Make an uncaught exception on any rank end the whole job.

    Otherwise a rank that raises exits while the others wait in a collective for it (MPICH lets
    them wait); the traceback is printed first, tagged with the rank.
    """
    if _hook[0] is not None:
        return
    previous = sys.excepthook

    def excepthook(exc_type, exc, tb):
        sys.stderr.write("[rank %d] uncaught exception; aborting the job\n" % world_rank())
        previous(exc_type, exc, tb)
        sys.stderr.flush()
        mpi().COMM_WORLD.Abort(1)
        os._exit(1)

    _hook[:] = excepthook, previous
    sys.excepthook = excepthook


def remove_excepthook():
    if _hook[0] is not None and sys.excepthook is _hook[0]:
        sys.excepthook = _hook[1]
    _hook[:] = None, None


def find_mpiexec():
    """The ``mpiexec`` of this Python's MPI: next to the interpreter (a pip-installed MPI, in a
    virtual environment or the base installation it points to), else the first on PATH."""
    for exe in (sys.executable, os.path.realpath(sys.executable)):
        path = os.path.join(os.path.dirname(exe), "mpiexec")
        if os.access(path, os.X_OK):
            return path
    path = shutil.which("mpiexec")
    if path is None:
        raise RuntimeError("mpiexec not found next to %s or on PATH: pip install \"jitgrad[distributed]\""
                           % sys.executable)
    return path
