"""jitgrad.profiler: torch.profiler's API over jitgrad.autograd.profiler's recorder.

``profile(activities=..., schedule=..., on_trace_ready=...)`` records the steps its schedule marks active
(``prof.step()`` moves it on, as PyTorch's ProfilerAction transitions do); ``key_averages().table()`` has
PyTorch's columns and one more, the numba compile time of each op's kernels.
"""
import enum
import gzip
import json
import os
import socket
import time
import warnings

from .. import cuda as _cuda
from ..autograd.profiler import profile as _legacy_profile, record_function  # noqa: F401
from ..autograd.profiler_util import chrome_trace

__all__ = ["ProfilerAction", "ProfilerActivity", "profile", "record_function", "schedule", "supported_activities",
           "tensorboard_trace_handler"]


class ProfilerActivity(enum.Enum):
    CPU = 0
    XPU = 1
    MTIA = 2
    CUDA = 3
    HPU = 4
    PrivateUse1 = 5


class ProfilerAction(enum.Enum):
    """What the profiler does in a step, as a schedule answers it."""
    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


def supported_activities():
    return {ProfilerActivity.CPU} | ({ProfilerActivity.CUDA} if _cuda.is_available() else set())


def schedule(*, wait, warmup, active, repeat=0, skip_first=0, skip_first_wait=0):
    """A schedule for ``profile``: skip ``skip_first`` steps, then cycles of ``wait`` idle steps, ``warmup``
    steps and ``active`` recorded steps (the last of them RECORD_AND_SAVE), ``repeat`` times (0: forever)."""
    if wait < 0 or warmup < 0 or active <= 0 or repeat < 0 or skip_first < 0:
        raise AssertionError(
            f"Invalid profiler schedule arguments. Got wait={wait} (need >= 0), warmup={warmup} (need >= 0), "
            f"active={active} (need > 0), repeat={repeat} (need >= 0), skip_first={skip_first} (need >= 0).")
    if warmup == 0:
        warnings.warn("Profiler won't be using warmup, this can skew profiler results")

    def schedule_fn(step):
        if step < 0:
            raise AssertionError(f"Step must be non-negative. Got {step}.")
        if step < skip_first:
            return ProfilerAction.NONE
        step -= skip_first
        if skip_first_wait != 0:
            step += wait
        num_steps = wait + warmup + active
        if repeat > 0 and step / num_steps >= repeat:
            return ProfilerAction.NONE
        mod_step = step % num_steps
        if mod_step < wait:
            return ProfilerAction.NONE
        if mod_step < wait + warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if mod_step < num_steps - 1 else ProfilerAction.RECORD_AND_SAVE
    return schedule_fn


def _default_schedule_fn(_):
    return ProfilerAction.RECORD


def tensorboard_trace_handler(dir_name, worker_name=None, use_gzip=False):
    """An ``on_trace_ready`` that writes each trace as ``{worker_name}.{time in ms}.pt.trace.json[.gz]`` in
    ``dir_name`` (the layout TensorBoard's profiler plugin reads)."""
    def handler_fn(prof):
        os.makedirs(dir_name, exist_ok=True)
        name = worker_name or "%s_%d" % (socket.gethostname(), os.getpid())
        path = os.path.join(dir_name, "%s.%d.pt.trace.json%s" % (name, int(time.time() * 1000),
                                                                  ".gz" if use_gzip else ""))
        if use_gzip:
            with gzip.open(path, "wt") as f:
                json.dump(chrome_trace(prof.events(), path), f)
        else:
            prof.export_chrome_trace(path)
    return handler_fn


class _KinetoProfile:
    """One recording at a time (a legacy profile each), and what it gives once stopped."""

    def __init__(self, *, activities=None, record_shapes=False, profile_memory=False, with_stack=False,
                 with_flops=False, with_modules=False, experimental_config=None, execution_trace_observer=None,
                 acc_events=False, custom_trace_id_callback=None):
        self.activities = set(activities) if activities else supported_activities()
        for a in self.activities:
            if not isinstance(a, ProfilerActivity):
                raise TypeError("activities must be ProfilerActivity values, got %r" % (a,))
        self.use_device = "cuda" if ProfilerActivity.CUDA in self.activities else None
        self.record_shapes = record_shapes
        self.profile_memory = profile_memory
        self.with_stack = with_stack
        self.with_flops = with_flops
        self.with_modules = with_modules
        self.profiler = None
        self.metadata = {}

    def start(self):
        self.prepare_trace()
        self.start_trace()

    def stop(self):
        self.stop_trace()

    def prepare_trace(self):
        self.profiler = _legacy_profile(use_device=self.use_device, record_shapes=self.record_shapes,
                                        with_flops=self.with_flops, profile_memory=self.profile_memory,
                                        with_stack=self.with_stack, with_modules=self.with_modules)

    def start_trace(self):
        if self.profiler is None:
            self.prepare_trace()
        self.profiler.__enter__()

    def stop_trace(self):
        if self.profiler is not None and self.profiler.function_events is None:
            self.profiler.__exit__(None, None, None)

    def events(self):
        """The events of the last recording (an EventList)."""
        if self.profiler is None:
            raise AssertionError("Expected profiler to be initialized")
        return self.profiler.function_events

    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0, group_by_overload_name=False):
        if self.profiler is None:
            raise AssertionError("Expected profiler to be initialized")
        return self.profiler.key_averages(group_by_input_shape, group_by_stack_n, group_by_overload_name)

    def export_chrome_trace(self, path):
        if self.profiler is None:
            raise AssertionError("Expected profiler to be initialized")
        if path.endswith(".gz"):
            with gzip.open(path, "wt") as f:
                json.dump(self._trace(path), f)
        else:
            with open(path, "w") as f:
                json.dump(self._trace(path), f)

    def _trace(self, path):
        trace = chrome_trace(self.events(), path)
        trace.update(self.metadata)
        return trace

    def export_stacks(self, path, metric="self_cpu_time_total"):
        return self.profiler.export_stacks(path, metric)

    def add_metadata(self, key, value):
        """A string added to the top level of the exported trace."""
        self.metadata[key] = value

    def add_metadata_json(self, key, value):
        self.metadata[key] = json.loads(value)


class profile(_KinetoProfile):
    """torch.profiler.profile: a context manager (or ``start()``/``stop()``) recording this thread's ops,
    backward nodes and ``record_function`` ranges in the steps ``schedule`` marks active; ``on_trace_ready``
    is called with the profiler at the end of each active span. With a schedule, each step is a
    ``ProfilerStep#N`` range."""

    def __init__(self, *, activities=None, schedule=None, on_trace_ready=None, record_shapes=False,
                 profile_memory=False, with_stack=False, with_flops=False, with_modules=False,
                 experimental_config=None, execution_trace_observer=None, acc_events=False, use_cuda=None,
                 custom_trace_id_callback=None):
        activities = set(activities) if activities is not None else supported_activities()
        if use_cuda is not None:
            warnings.warn("`use_cuda` is deprecated, use `activities` argument instead", FutureWarning,
                          stacklevel=2)
            if use_cuda:
                activities.add(ProfilerActivity.CUDA)
            else:
                activities.discard(ProfilerActivity.CUDA)
        if len(activities) == 0:
            raise AssertionError("No valid profiler activities found")
        super().__init__(activities=activities, record_shapes=record_shapes, profile_memory=profile_memory,
                         with_stack=with_stack, with_flops=with_flops, with_modules=with_modules)
        self.schedule = schedule or _default_schedule_fn
        self.record_steps = schedule is not None  # each step is a ProfilerStep#N range
        self.on_trace_ready = on_trace_ready
        self.step_num = 0
        self.current_action = self.schedule(self.step_num)
        self.step_rec_fn = None
        A = ProfilerAction
        warn = warnings.warn
        self.action_map = {  # (previous action, current action) -> what to do; None: the profile stops
            (A.NONE, A.NONE): [],
            (A.NONE, A.WARMUP): [self.prepare_trace],
            (A.NONE, A.RECORD): [self.prepare_trace, self.start_trace],
            (A.NONE, A.RECORD_AND_SAVE): [self.prepare_trace, self.start_trace],
            (A.WARMUP, A.NONE): [lambda: warn("Incorrect schedule: WARMUP followed by NONE"),
                                 self.start_trace, self.stop_trace],
            (A.WARMUP, A.WARMUP): [],
            (A.WARMUP, A.RECORD): [self.start_trace],
            (A.WARMUP, A.RECORD_AND_SAVE): [self.start_trace],
            (A.RECORD, A.NONE): [lambda: warn("Incorrect schedule: RECORD followed by NONE"), self.stop_trace],
            (A.RECORD, A.WARMUP): [lambda: warn("Incorrect schedule: RECORD followed by WARMUP"),
                                   self.stop_trace],
            (A.RECORD, A.RECORD): [],
            (A.RECORD, A.RECORD_AND_SAVE): [],
            (A.RECORD_AND_SAVE, A.NONE): [self.stop_trace, self._trace_ready],
            (A.RECORD_AND_SAVE, A.WARMUP): [self.stop_trace, self._trace_ready, self.prepare_trace],
            (A.RECORD_AND_SAVE, A.RECORD): [self.stop_trace, self._trace_ready, self.prepare_trace,
                                            self.start_trace],
            (A.RECORD_AND_SAVE, A.RECORD_AND_SAVE): [self.stop_trace, self._trace_ready, self.prepare_trace,
                                                     self.start_trace],
            (A.WARMUP, None): [self.start_trace, self.stop_trace],
            (A.RECORD, None): [self.stop_trace, self._trace_ready],
            (A.RECORD_AND_SAVE, None): [self.stop_trace, self._trace_ready],
        }

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    def start(self):
        self._transit_action(ProfilerAction.NONE, self.current_action)
        if self.record_steps:
            self.step_rec_fn = record_function("ProfilerStep#" + str(self.step_num))
            self.step_rec_fn.__enter__()

    def stop(self):
        if self.record_steps and self.step_rec_fn:
            self.step_rec_fn.__exit__(None, None, None)
            self.step_rec_fn = None
        self._transit_action(self.current_action, None)

    def step(self):
        """The next step begins: the schedule's action for it takes effect."""
        if self.record_steps and self.step_rec_fn:
            self.step_rec_fn.__exit__(None, None, None)
            self.step_rec_fn = None
        prev_action = self.current_action
        self.step_num += 1
        self.current_action = self.schedule(self.step_num)
        self._transit_action(prev_action, self.current_action)
        if self.record_steps:
            self.step_rec_fn = record_function("ProfilerStep#" + str(self.step_num))
            self.step_rec_fn.__enter__()

    def _trace_ready(self):
        if self.on_trace_ready:
            self.on_trace_ready(self)

    def _transit_action(self, prev_action, current_action):
        for action in self.action_map.get((prev_action, current_action), ()):
            action()
