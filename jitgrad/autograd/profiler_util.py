"""What a profile holds: events (FunctionEvent), their averages by key (FunctionEventAvg), EventList with
PyTorch's ``table()`` and ``export_chrome_trace()``. Times are in microseconds, as PyTorch's.

Beside PyTorch's fields each event carries the time numba spent on the first calls of its kernels,
compiling them or loading them from the on-disk cache (``compile_time_total``, and
``self_compile_time_total`` without its children's), shown in the table's one extra column, "Numba compile".
"""
import json
import os
from collections import defaultdict


class Interval:
    def __init__(self, start, end):
        self.start = start
        self.end = end

    def elapsed_us(self):
        return self.end - self.start


class _Totals:
    """The derived fields shared by an event and an average of events."""

    @property
    def cpu_time(self):
        return 0.0 if self.count == 0 else self.cpu_time_total / self.count

    @property
    def device_time(self):
        return 0.0 if self.count == 0 else self.device_time_total / self.count

    cuda_time = device_time

    @property
    def cuda_time_total(self):
        return self.device_time_total

    @property
    def self_cuda_time_total(self):
        return self.self_device_time_total

    @property
    def compile_time(self):
        return 0.0 if self.count == 0 else self.compile_time_total / self.count

    for _name in ("cpu_time", "cpu_time_total", "self_cpu_time_total", "device_time", "device_time_total",
                  "self_device_time_total", "compile_time_total", "self_compile_time_total"):
        locals()[_name + "_str"] = property(lambda self, _n=_name: _format_time(getattr(self, _n)))
    del _name


class FunctionEvent(_Totals):
    """One timed region: an op (``aten::mul``), a backward node, or a ``record_function`` range. Its
    ``time_range`` is in microseconds since its profile began, at ``epoch_us`` microseconds since the epoch."""
    epoch_us = 0.0

    def __init__(self, id, name, thread, start_us, end_us, input_shapes=None, stack=None, sequence_nr=-1,
                 is_user_annotation=False, cpu_memory_usage=0, compile_time_total=0.0):
        self.id = id
        self.name = name
        self.thread = thread
        self.time_range = Interval(start_us, end_us)
        self.input_shapes = input_shapes
        self.stack = stack or []
        self.sequence_nr = sequence_nr
        self.is_user_annotation = is_user_annotation
        self.cpu_children = []
        self.cpu_parent = None
        self.count = 1
        self.node_id = -1
        self.device_type = "CPU"
        self.use_device = None
        self.is_async = False
        self.is_legacy = False
        self.is_remote = False
        self.overload_name = ""
        self.scope = 0
        self.flops = 0
        self.device_time_total = self.self_device_time_total = 0.0
        self.device_memory_usage = self.self_device_memory_usage = 0
        self._cpu_memory_usage = cpu_memory_usage  # what the op itself allocated (its outputs' bytes)
        self.compile_time_total = compile_time_total

    @property
    def key(self):
        return self.name

    @property
    def cpu_time_total(self):
        return self.time_range.elapsed_us()

    @property
    def self_cpu_time_total(self):
        return self.cpu_time_total - sum(c.cpu_time_total for c in self.cpu_children)

    @property
    def cpu_memory_usage(self):
        return self._cpu_memory_usage + sum(c.cpu_memory_usage for c in self.cpu_children)

    @property
    def self_cpu_memory_usage(self):
        return self._cpu_memory_usage

    @property
    def self_compile_time_total(self):
        return self.compile_time_total - sum(c.compile_time_total for c in self.cpu_children)

    def append_cpu_child(self, child):
        self.cpu_children.append(child)

    def __repr__(self):
        return ("<FunctionEvent id=%d name=%s thread=%d cpu_time=%s start_us=%.3f end_us=%.3f input_shapes=%s "
                "cpu_memory_usage=%d compile_time=%s>" % (
                    self.id, self.name, self.thread, self.cpu_time_str, self.time_range.start,
                    self.time_range.end, self.input_shapes, self.cpu_memory_usage, self.compile_time_total_str))


class FunctionEventAvg(_Totals):
    """The events of one key (name, and input shapes or stack where grouped by them), summed."""

    def __init__(self):
        self.key = None
        self.count = 0
        self.node_id = 0
        self.is_async = False
        self.is_remote = False
        self.use_device = None
        self.device_type = "CPU"
        self.is_legacy = False
        self.is_user_annotation = False
        self.overload_name = ""
        self.scope = 0
        self.flops = 0
        self.input_shapes = None
        self.stack = None
        self.cpu_parent = None
        self.cpu_time_total = self.self_cpu_time_total = 0.0
        self.device_time_total = self.self_device_time_total = 0.0
        self.cpu_memory_usage = self.self_cpu_memory_usage = 0
        self.device_memory_usage = self.self_device_memory_usage = 0
        self.compile_time_total = self.self_compile_time_total = 0.0

    def add(self, other):
        if self.key is None:  # the first event added: the average takes its description
            self.key = other.key
            self.node_id = other.node_id
            self.is_user_annotation = other.is_user_annotation
            self.input_shapes = other.input_shapes
            self.stack = other.stack
            self.cpu_parent = other.cpu_parent
        elif other.key != self.key:
            raise AssertionError("Expected keys to match, but got %s vs %s" % (self.key, other.key))
        for field in ("count", "cpu_time_total", "self_cpu_time_total", "device_time_total",
                      "self_device_time_total", "cpu_memory_usage", "self_cpu_memory_usage",
                      "compile_time_total", "self_compile_time_total"):
            setattr(self, field, getattr(self, field) + getattr(other, field))
        return self

    def __iadd__(self, other):
        return self.add(other)

    def __repr__(self):
        return ("<FunctionEventAvg key=%s self_cpu_time=%s cpu_time=%s input_shapes=%s cpu_memory_usage=%d "
                "compile_time=%s>" % (self.key, self.self_cpu_time_total_str, self.cpu_time_str,
                                      self.input_shapes, self.cpu_memory_usage, self.compile_time_total_str))


class EventList(list):
    """A list of events (a profile's, or the averages of ``key_averages()``)."""

    def __init__(self, *args, use_device=None, profile_memory=False, with_flops=False, **kwargs):
        super().__init__(*args, **kwargs)
        self._use_device = use_device
        self._profile_memory = profile_memory
        self._with_flops = with_flops

    @property
    def self_cpu_time_total(self):
        return sum(e.self_cpu_time_total for e in self)

    def table(self, sort_by=None, row_limit=100, max_src_column_width=75, max_name_column_width=55,
              max_shapes_column_width=80, header=None, top_level_events_only=False, time_unit=None):
        """PyTorch's table of these events: one row each, sorted (descending) by the attribute ``sort_by``
        ("cpu_time_total", "self_cpu_time_total", "count", "self_compile_time_total", ...)."""
        return _build_table(self, sort_by, header, row_limit, max_src_column_width, max_name_column_width,
                            max_shapes_column_width, self._profile_memory, top_level_events_only, time_unit,
                            self._use_device)

    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0, group_by_overload_name=False):
        """One FunctionEventAvg per event name (and input shapes, and the first ``group_by_stack_n`` stack
        entries, where asked), in order of first appearance."""
        stats = defaultdict(FunctionEventAvg)
        for e in self:
            key = (e.key,)
            if group_by_input_shape:
                key += (str(e.input_shapes),)
            if group_by_stack_n > 0:
                key += tuple(e.stack[:group_by_stack_n])
            stats[key].add(e)
        for avg in stats.values():  # (as PyTorch: what the averages were not grouped by is left out)
            avg.stack = avg.stack[:group_by_stack_n]
            if not group_by_input_shape:
                avg.input_shapes = ""
        return EventList(stats.values(), use_device=self._use_device, profile_memory=self._profile_memory,
                         with_flops=self._with_flops)

    def total_average(self):
        total = FunctionEventAvg()
        for e in self:
            total.add(e)
            total.key = None
        total.key = "Total"
        return total

    def export_chrome_trace(self, path):
        """Write the events as a Chrome trace (chrome://tracing, Perfetto): one complete ("X") event each."""
        with open(path, "w") as f:
            json.dump(chrome_trace(self, path), f)

    def export_stacks(self, path, metric="self_cpu_time_total"):
        """One line per event with a stack: ``frame;frame;... value`` (outermost first), for flame graphs."""
        with open(path, "w") as f:
            for e in self:
                if e.stack:
                    f.write("%s %d\n" % (";".join(reversed(e.stack)).replace(" ", "_"), int(getattr(e, metric))))


def chrome_trace(events, name=""):
    pid = os.getpid()
    threads = sorted({e.thread for e in events})
    out = [{"name": "process_name", "ph": "M", "ts": 0, "pid": pid, "tid": 0, "args": {"name": "python"}}]
    out += [{"name": "thread_name", "ph": "M", "ts": 0, "pid": pid, "tid": t,
             "args": {"name": "thread %d (python)" % t}} for t in threads]
    for e in events:
        args = {"External id": e.id, "Ev Idx": e.id - 1}
        if e.input_shapes:
            args["Input Dims"] = e.input_shapes
        if e.sequence_nr >= 0:
            args["Sequence number"] = e.sequence_nr
        if e.compile_time_total:
            args["Numba compile (us)"] = round(e.self_compile_time_total, 3)
        if e.stack:
            args["Call stack"] = ";".join(e.stack)
        out.append({"ph": "X", "cat": "user_annotation" if e.is_user_annotation else "cpu_op", "name": e.name,
                    "pid": pid, "tid": e.thread, "ts": e.epoch_us + e.time_range.start, "dur": e.cpu_time_total,
                    "args": args})
    return {"schemaVersion": 1, "deviceProperties": [], "displayTimeUnit": "ms", "traceEvents": out,
            "traceName": name}


def _format_time(time_us):
    if time_us >= 1e6:
        return "%.3fs" % (time_us / 1e6)
    if time_us >= 1e3:
        return "%.3fms" % (time_us / 1e3)
    return "%.3fus" % time_us


def _format_time_share(time_us, total_time_us):
    if total_time_us == 0:
        return "NaN"
    return "%.2f%%" % (time_us * 100.0 / total_time_us)


def _format_memory(nbytes):
    for unit, size in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if abs(nbytes) >= size:
            return "%.2f %s" % (nbytes / size, unit)
    return "%d B" % nbytes


def _with_unit(time_us, unit):
    return {"s": "%.3fs" % (time_us / 1e6), "ms": "%.3fms" % (time_us / 1e3),
            "us": "%.3fus" % time_us}.get(unit) or _format_time(time_us)


def _build_table(events, sort_by, header, row_limit, max_src_column_width, max_name_column_width,
                 max_shapes_column_width, profile_memory, top_level_events_only, time_unit, use_device=None):
    """PyTorch's layout (torch.autograd.profiler_util._build_table), with "Numba compile" after "# of Calls"."""
    if len(events) == 0:
        return ""
    if sort_by is not None:
        key = sort_by.replace("cuda", "device").replace("xpu", "device").replace("privateuse1", "device")
        events = sorted(events, key=lambda e: getattr(e, key), reverse=True)
    has_shapes = any(e.input_shapes is not None and len(e.input_shapes) > 0 for e in events)
    stacks = [e.stack for e in events if e.stack]
    name_width = max(len(e.key) for e in events) + 4
    if max_name_column_width is not None:
        name_width = min(name_width, max_name_column_width)
    shapes_width = max(len(str(e.input_shapes)) for e in events) + 4
    if max_shapes_column_width is not None:
        shapes_width = min(shapes_width, max_shapes_column_width)
    src_width = None
    if stacks:
        src_width = max(len(s) for stack in stacks for s in stack) + 4
        if max_src_column_width is not None:
            src_width = min(src_width, max_src_column_width)

    has_device_time = any(e.self_device_time_total > 0 for e in events)
    device = (use_device or "cuda").upper()
    headers = ["Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg"]
    if has_device_time:
        headers += ["Self %s" % device, "Self %s %%" % device, "%s total" % device, "%s time avg" % device]
    if profile_memory:
        headers += ["CPU Mem", "Self CPU Mem"]
    headers += ["# of Calls", "Numba compile"]
    widths = [(name_width, ">")] + [(12, ">")] * (len(headers) - 1)
    if has_shapes:
        headers.append("Input Shapes")
        widths.append((shapes_width, ">"))
    if stacks:
        headers.append("Source Location")
        widths.append((src_width, "<"))
    row_format = "".join("{: %s%d}  " % (d, w) for w, d in widths)
    header_sep = "".join("-" * w + "  " for w, _ in widths)
    total = sum(e.self_cpu_time_total for e in events)
    device_total = sum(e.self_device_time_total for e in events)

    def trim_path(path):
        if len(path) > src_width:
            path = path[len(path) - src_width:]
            if len(path) > 3:
                path = "..." + path[3:]
        return path

    lines = []
    if header is not None:
        lines += ["=" * (len(header_sep) - 2), header]
    if top_level_events_only:
        lines += ["=" * (len(header_sep) - 2), "This report only display top-level ops statistics"]
    lines += [header_sep, row_format.format(*headers), header_sep]
    shown = 0
    for e in events:
        if shown == row_limit:
            break
        if top_level_events_only and e.cpu_parent is not None:
            continue
        shown += 1
        name = e.key
        if max_name_column_width is not None and len(name) >= max_name_column_width - 3:
            name = name[:max_name_column_width - 3] + "..."
        row = [name, _format_time_share(e.self_cpu_time_total, total), _with_unit(e.self_cpu_time_total, time_unit),
               _format_time_share(e.cpu_time_total, total), _with_unit(e.cpu_time_total, time_unit),
               _with_unit(e.cpu_time, time_unit)]
        if has_device_time:
            row += [_with_unit(e.self_device_time_total, time_unit), _format_time_share(e.self_device_time_total,
                                                                                         device_total),
                    _with_unit(e.device_time_total, time_unit), _with_unit(e.device_time, time_unit)]
        if profile_memory:
            row += [_format_memory(e.cpu_memory_usage), _format_memory(e.self_cpu_memory_usage)]
        row += [e.count, _with_unit(e.self_compile_time_total, time_unit)]
        if has_shapes:
            row.append(str(e.input_shapes)[:shapes_width])
        if stacks:
            row.append(trim_path(e.stack[0]) if e.stack else "")
        lines.append(row_format.format(*row))
        if stacks:
            for entry in e.stack[1:]:
                lines.append(row_format.format(*([""] * (len(headers) - 1) + [trim_path(entry)])))
            lines.append(row_format.format(*([""] * len(headers))))
    lines += [header_sep, "Self CPU time total: %s" % _with_unit(total, time_unit)]
    if has_device_time:
        lines.append("Self %s time total: %s" % (device, _with_unit(device_total, time_unit)))
    return "".join(line + "\n" for line in lines)
