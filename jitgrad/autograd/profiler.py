"""jitgrad.autograd.profiler: ``profile``, ``record_function``, ``emit_nvtx`` (torch.autograd.profiler's API).

While a profile records, this thread's ``STATE.profiler`` is its Recorder: dispatch hands it every table op
(one event, named as PyTorch's ATen op: ``aten::mul``), the backward engine every node it runs (PyTorch's
pair ``autograd::engine::evaluate_function: MulBackward0`` around ``MulBackward0``), and ``record_function``
opens a range of its own. Off, all of this costs dispatch and the engine the one ``SPECIAL[0]`` check they
already make. Each event also notes the time numba spent on its kernels' first calls (compiling them, or
loading them from the on-disk cache): the time this thread held numba's compiler lock.
Only the thread that entered the profile is recorded.
"""
import contextlib
import os
import sys
import threading
import time

import numpy as np
from numba.core import event as numba_event

from .._device import may_share_memory
from .._grad_mode import SPECIAL, STATE
from .._graph import AccumulateGrad
from .._op import dispatch
from .._tensor import Tensor
from .profiler_util import EventList, FunctionEvent, FunctionEventAvg  # noqa: F401

_JITGRAD_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# entries whose name is not PyTorch's ATen op: the rest are "aten::" + the entry's name, less a suffix that
# tells overloads apart (sum_all -> aten::sum, max_dim -> aten::max)
_ATEN = {"cast": "aten::_to_copy", "move": "aten::_to_copy", "copy_from": "aten::copy_", "fill": "aten::fill_",
         "gelu_tanh": "aten::gelu", "div_rounded": "aten::div", "logit_eps": "aten::logit",
         "normal_fill": "aten::normal_", "uniform": "aten::uniform_", "bernoulli_fill": "aten::bernoulli_",
         "bernoulli_tensor_fill": "aten::bernoulli_", "exponential": "aten::exponential_",
         "cauchy": "aten::cauchy_", "geometric": "aten::geometric_", "log_normal": "aten::log_normal_",
         "random": "aten::random_", "linear_mm": "aten::mm", "nll_loss": "aten::nll_loss_forward",
         "log_softmax": "aten::_log_softmax", "softmax": "aten::_softmax"}
_SUFFIXES = ("_all", "_dim")


def aten_name(op):
    name = _ATEN.get(op.name)
    if name is None:
        base = op.name
        for s in _SUFFIXES:
            if base.endswith(s):
                base = base[:-len(s)]
        name = _ATEN[op.name] = "aten::" + base  # (cached: ``op`` is one entry, its name fixed)
    return name


def _shapes(values):
    return [list(v.shape) if isinstance(v, Tensor) else [] for v in values]


def _user_stack():
    """PyTorch's with_stack entries, innermost first: 'file.py(12): function' for frames outside jitgrad."""
    out = []
    f = sys._getframe(2)
    while f is not None:
        path = os.path.abspath(f.f_code.co_filename)
        if not path.startswith(_JITGRAD_DIR):
            out.append("%s(%d): %s" % (f.f_code.co_filename, f.f_lineno, f.f_code.co_name))
        f = f.f_back
    return out


def _new_bytes(out, args):
    """Bytes of the arrays an op returned that are new (not views of its operands)."""
    inputs = [a._data for a in args if isinstance(a, Tensor)]
    total = 0
    for t in out if isinstance(out, (tuple, list)) else (out,):
        d = getattr(t, "_data", None)
        if d is not None and not any(may_share_memory(d, a) for a in inputs):
            total += d.nbytes
    return total


class _JitTimer(numba_event.Listener):
    """Seconds the recording thread has held numba's compiler lock (compiling, loading from the cache)."""

    def __init__(self, thread):
        self.thread = thread
        self.seconds = 0.0
        self.depth = 0

    def on_start(self, ev):
        if threading.get_ident() == self.thread:
            self.depth += 1
            if self.depth == 1:
                self.started = time.perf_counter()

    def on_end(self, ev):
        if threading.get_ident() == self.thread:
            self.depth -= 1
            if self.depth == 0:
                self.seconds += time.perf_counter() - self.started


class Recorder:
    """Collects the events of one profile on one thread (``start()`` .. ``close()``)."""

    def __init__(self, record_shapes=False, profile_memory=False, with_stack=False, device_time=False):
        self.record_shapes = record_shapes
        self.profile_memory = profile_memory
        self.with_stack = with_stack
        self.events = []  # in order of start
        # CUDA activity: ops on device arrays get a pair of CUDA events around their kernels, on the default
        # stream every kernel runs on; their elapsed times are read once the profile ends
        self.device_time = device_time
        self.timed = []  # (event, start, stop)
        self.open = []  # started, not yet ended (innermost last)
        self.thread = threading.get_native_id()
        # event times are microseconds since the profile began (perf_counter_ns, less t0); the profile began
        # at epoch_us microseconds since the epoch (a Chrome trace's timestamps)
        self.t0 = time.perf_counter_ns()
        self.epoch_us = time.time_ns() / 1e3
        self.jit = _JitTimer(threading.get_ident())

    def start(self):
        numba_event.register("numba:compiler_lock", self.jit)

    def begin(self, name, shapes=(), sequence_nr=-1, user=False):
        ev = FunctionEvent(len(self.events) + 1, name, self.thread, 0.0, 0.0, list(shapes),
                           _user_stack() if self.with_stack else None, sequence_nr, user)
        if self.open:
            parent = self.open[-1]
            ev.cpu_parent = parent
            parent.cpu_children.append(ev)
        self.open.append(ev)
        self.events.append(ev)
        ev._jit = self.jit.seconds
        ev.epoch_us = self.epoch_us
        ev.time_range.start = (time.perf_counter_ns() - self.t0) / 1e3
        return ev

    def end(self, ev):
        now = (time.perf_counter_ns() - self.t0) / 1e3
        if self.open and self.open[-1] is ev:
            self.open.pop()
        elif ev in self.open:
            self.open.remove(ev)
        else:
            return  # ended already: the profile stopped inside the range
        ev.time_range.end = now
        ev.compile_time_total = 1e6 * (self.jit.seconds - ev._jit)

    def close(self):
        """The events, every one ended (a range still open ends now), with the device times of their kernels."""
        while self.open:
            self.end(self.open[-1])
        numba_event.unregister("numba:compiler_lock", self.jit)
        if self.timed:
            device = {}
            for ev, start, stop in self.timed:
                stop.synchronize()
                device[ev] = max(start.elapsed_time(stop), 0.0) * 1e3  # (the CUDA simulator answers -1)
            for ev in reversed(self.events):  # children (started later) before their parents
                inner = sum(c.device_time_total for c in ev.cpu_children)
                ev.device_time_total = device.get(ev, inner)  # a range without CUDA events: its children's
                ev.self_device_time_total = max(ev.device_time_total - inner, 0.0)
        return self.events

    def _device_start(self, values):
        """A CUDA event recorded now, where ``values`` hold a tensor on a CUDA device and the CUDA activity
        is on (else None)."""
        if self.device_time and any(isinstance(a, Tensor) and a._data.__class__ is not np.ndarray for a in values):
            from numba import cuda  # (numba-cuda: the device arrays' backend has imported it)
            start = cuda.event()
            start.record()
            return start
        return None

    def _device_stop(self, ev, start):
        from numba import cuda
        stop = cuda.event()
        stop.record()
        self.timed.append((ev, start, stop))

    def op(self, op, args, params):
        """Called by dispatch for each table op."""
        ev = self.begin(aten_name(op), _shapes(args) if self.record_shapes else ())
        start = self._device_start(args)
        try:
            out = dispatch(op, args, params, True)
        finally:
            if start is not None:
                self._device_stop(ev, start)
            self.end(ev)
        fn = getattr(out, "grad_fn", None)
        if fn is not None:
            ev.sequence_nr = fn._seq
        if self.profile_memory:
            ev._cpu_memory_usage = _new_bytes(out, args)
        return out

    def node(self, node, apply, grads):
        """Called by the backward engine for each node it runs: ``apply(node, grads)``."""
        name = "torch::autograd::AccumulateGrad" if node.__class__ is AccumulateGrad else node.name()
        outer = self.begin("autograd::engine::evaluate_function: " + name, sequence_nr=node._seq)
        try:
            inner = self.begin(name, _shapes(grads) if self.record_shapes else (), node._seq)
            start = self._device_start(grads)
            try:
                return apply(node, grads)
            finally:
                if start is not None:
                    self._device_stop(inner, start)
                self.end(inner)
        finally:
            self.end(outer)


def _recorder():
    return STATE.profiler if SPECIAL[0] else None


class record_function(contextlib.ContextDecorator):
    """A named range in the profile (a context manager, or a decorator): its event holds what runs inside."""

    def __init__(self, name, args=None):
        self.name = name
        self.args = args
        self.event = self.recorder = None

    def _recreate_cm(self):  # a decorated function gets a fresh range per call (so it nests and recurses)
        return record_function(self.name, self.args)

    def __enter__(self):
        rec = _recorder()
        if rec is not None:
            self.recorder, self.event = rec, rec.begin(self.name, user=True)
        return self

    def __exit__(self, *exc):
        if self.event is not None:
            self.recorder.end(self.event)
            self.event = self.recorder = None
        return False


_NO_RANGE = contextlib.nullcontext()


def optimizer_range(optimizer, method):
    """PyTorch's range around an optimizer's step() or zero_grad(): "Optimizer.step#SGD.step"."""
    if _recorder() is None:
        return _NO_RANGE
    return record_function("Optimizer.%s#%s.%s" % (method, type(optimizer).__name__, method))


class profile:
    """Records the ops, backward nodes and ``record_function`` ranges run on this thread while entered.

    ``record_shapes`` keeps each op's input shapes, ``profile_memory`` the bytes of the arrays each op made,
    ``with_stack`` the Python frames (outside jitgrad) it was called from. With ``use_cuda=True`` (or
    ``use_device="cuda"``) an op on CUDA tensors also gets the GPU time of its kernels (``device_time_total``),
    from CUDA events around them, read when the profile ends.
    """

    def __init__(self, enabled=True, *, use_cuda=False, use_device=None, record_shapes=False, with_flops=False,
                 profile_memory=False, with_stack=False, with_modules=False, use_kineto=False, use_cpu=True,
                 experimental_config=None, acc_events=False, custom_trace_id_callback=None):
        self.enabled = enabled
        self.use_device = use_device or ("cuda" if use_cuda else None)
        self.record_shapes = record_shapes
        self.with_flops = with_flops
        self.profile_memory = profile_memory
        self.with_stack = with_stack
        self.with_modules = with_modules
        self.entered = False
        self.function_events = None
        self.recorder = None
        self._previous = None

    def __enter__(self):
        if not self.enabled:
            return self
        if self.entered:
            raise RuntimeError("Profiler context manager is not reentrant")
        self.entered = True
        self._start()
        return self

    def __exit__(self, *exc):
        if self.enabled:
            self._stop()
        return False

    def _start(self):
        if STATE.profiler is not None:
            raise RuntimeError("Profiler is already enabled on this thread")
        self.recorder = Recorder(self.record_shapes, self.profile_memory, self.with_stack,
                                 self.use_device == "cuda")
        self.recorder.start()
        STATE.profiler = self.recorder

    def _stop(self):
        if STATE.profiler is self.recorder:
            STATE.profiler = None
        self.function_events = EventList(self.recorder.close(), use_device=self.use_device,
                                         profile_memory=self.profile_memory, with_flops=self.with_flops)

    def _check_finish(self):
        if self.function_events is None:
            raise RuntimeError("Profiler didn't finish running")

    def __repr__(self):
        if self.function_events is None:
            return "<unfinished torch.autograd.profile>"
        return repr(self.function_events)

    def __str__(self):
        if self.function_events is None:
            return "<unfinished torch.autograd.profile>"
        return str(self.function_events)

    def table(self, sort_by=None, row_limit=100, max_src_column_width=75, max_name_column_width=55,
              max_shapes_column_width=80, header=None, top_level_events_only=False, time_unit=None):
        self._check_finish()
        return self.function_events.table(sort_by, row_limit, max_src_column_width, max_name_column_width,
                                          max_shapes_column_width, header, top_level_events_only, time_unit)

    table.__doc__ = EventList.table.__doc__

    def export_chrome_trace(self, path):
        self._check_finish()
        return self.function_events.export_chrome_trace(path)

    def export_stacks(self, path, metric="self_cpu_time_total"):
        self._check_finish()
        return self.function_events.export_stacks(path, metric)

    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0, group_by_overload_name=False):
        self._check_finish()
        return self.function_events.key_averages(group_by_input_shape, group_by_stack_n, group_by_overload_name)

    def total_average(self):
        self._check_finish()
        return self.function_events.total_average()

    @property
    def self_cpu_time_total(self):
        self._check_finish()
        return self.function_events.self_cpu_time_total


class emit_nvtx:
    """NVTX ranges for each op (for nsys / nvprof). jitgrad's kernels carry no NVTX ranges: this context
    manager checks its arguments and does nothing else."""

    def __init__(self, enabled=True, record_shapes=False):
        self.enabled = enabled
        self.record_shapes = record_shapes
        self.entered = False

    def __enter__(self):
        if self.enabled:
            if self.entered:
                raise RuntimeError("NVTX annotation context manager is not reentrant")
            self.entered = True
        return self

    def __exit__(self, *exc):
        self.entered = False
        return False


emit_itt = emit_nvtx
