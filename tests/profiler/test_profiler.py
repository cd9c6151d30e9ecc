"""jitgrad.profiler / jitgrad.autograd.profiler: events, their averages, the table, the trace, schedules."""
import json
import os
import runpy
import subprocess
import sys
import threading

import numba
import pytest

import jitgrad as jg
import jitgrad.nn as nn
from jitgrad._grad_mode import SPECIAL, STATE
from jitgrad.autograd.profiler import Recorder
from jitgrad.autograd.profiler_util import EventList
from jitgrad.profiler import ProfilerAction, ProfilerActivity, profile, record_function, schedule

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the checkout

A = ProfilerAction
TORCH_COLUMNS = ["Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg", "# of Calls"]


def small_program():
    x = jg.ones(3, 4, requires_grad=True)
    w = jg.full((3, 4), 2.0, requires_grad=True)
    loss = (x * w + 1).sum()
    loss.backward()
    return x, w


def names(events):
    return [e.name for e in events]


def header(table):
    """The column names of a table (split on two or more spaces)."""
    line = table.splitlines()[1]
    return [c.strip() for c in line.strip().split("  ") if c.strip()]


def test_ops_and_backward_nodes_are_named_as_pytorch_names_them():
    small_program()  # (compiled and loaded before the profile)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        small_program()
    got = names(prof.events())
    assert [n for n in got if n.startswith("aten::")] == ["aten::mul", "aten::add", "aten::sum"]
    for node in ("SumBackward0", "AddBackward0", "MulBackward0", "torch::autograd::AccumulateGrad"):
        assert "autograd::engine::evaluate_function: " + node in got and node in got
    ev = {e.name: e for e in prof.events()}
    assert ev["aten::mul"].input_shapes == [[3, 4], [3, 4]]
    assert ev["aten::add"].input_shapes == [[3, 4], []]
    outer = ev["autograd::engine::evaluate_function: MulBackward0"]
    assert [c.name for c in outer.cpu_children] == ["MulBackward0"] and outer.cpu_children[0].cpu_parent is outer
    assert outer.cpu_time_total >= outer.cpu_children[0].cpu_time_total >= 0
    # the forward op and its backward node share a sequence number, as PyTorch's do
    assert ev["aten::mul"].sequence_nr == ev["MulBackward0"].sequence_nr >= 0


def test_off_costs_one_check_and_records_nothing():
    before = SPECIAL[0]
    with profile() as prof:
        assert STATE.profiler is not None and SPECIAL[0] == before + 1
        jg.ones(2) * 2
    assert STATE.profiler is None and SPECIAL[0] == before
    jg.ones(2) * 3  # after the profile: not recorded
    assert names(prof.events()) == ["aten::mul"]


def test_key_averages_count_and_times():
    with profile(record_shapes=True) as prof:
        for n in (2, 2, 3):
            jg.ones(n) * 2
    avg = {e.key: e for e in prof.key_averages()}["aten::mul"]
    assert avg.count == 3
    events = [e for e in prof.events() if e.name == "aten::mul"]
    assert avg.cpu_time_total == pytest.approx(sum(e.cpu_time_total for e in events))
    assert avg.cpu_time == pytest.approx(avg.cpu_time_total / 3)
    assert avg.self_cpu_time_total == pytest.approx(avg.cpu_time_total)  # no children
    by_shape = [e for e in prof.key_averages(group_by_input_shape=True) if e.key == "aten::mul"]
    assert sorted((e.input_shapes[0], e.count) for e in by_shape) == [([2], 2), ([3], 1)]


def test_self_time_excludes_children():
    with profile() as prof:
        with record_function("outer"):
            with record_function("inner"):
                jg.ones(3).exp()
    ev = {e.name: e for e in prof.events()}
    outer, inner = ev["outer"], ev["inner"]
    assert inner.cpu_parent is outer and ev["aten::exp"].cpu_parent is inner
    assert outer.self_cpu_time_total == pytest.approx(outer.cpu_time_total - inner.cpu_time_total)
    assert outer.time_range.start <= inner.time_range.start <= inner.time_range.end <= outer.time_range.end
    assert outer.is_user_annotation and not ev["aten::exp"].is_user_annotation


def test_table_layout_sorting_and_row_limit():
    with profile() as prof:
        for _ in range(3):
            jg.ones(4) * 2
        jg.ones(4).exp()
        (jg.ones(4) + 1).sum()
    averages = prof.key_averages()
    table = averages.table(sort_by="count", row_limit=2)
    lines = table.splitlines()
    assert header(table) == TORCH_COLUMNS + ["Numba compile"]
    assert lines[0] == lines[2] == lines[-2] and set(lines[0]) == {"-", " "}
    rows = lines[3:-2]
    assert len(rows) == 2 and rows[0].split()[0] == "aten::mul" and rows[0].split()[-2] == "3"
    assert lines[-1].startswith("Self CPU time total: ")
    for key in ("cpu_time_total", "self_cpu_time_total", "cpu_time", "self_compile_time_total"):
        table = averages.table(sort_by=key, row_limit=10)
        values = sorted((getattr(e, key) for e in averages), reverse=True)
        assert [r.split()[0] for r in table.splitlines()[3:-2]] == \
            [e.key for e in sorted(averages, key=lambda e: getattr(e, key), reverse=True)]
        assert len(values) == 4
    with pytest.raises(AttributeError):
        averages.table(sort_by="no_such_column")


def test_numba_compile_time_is_its_own_column():
    @numba.njit
    def fresh(v):  # never compiled before: its compilation lands in the range that calls it
        return v * 3 + 1

    with profile() as prof:
        with record_function("compiles"):
            fresh(2)
        with record_function("runs"):
            fresh(2)
    ev = {e.name: e for e in prof.events()}
    assert ev["compiles"].compile_time_total > 1000  # microseconds
    assert ev["compiles"].compile_time_total <= ev["compiles"].cpu_time_total
    assert ev["runs"].compile_time_total == 0
    row = [r for r in prof.key_averages().table().splitlines() if r.strip().startswith("compiles")][0]
    assert row.split()[-1].endswith("ms")  # the column holds it


def test_record_function_as_decorator_nests_per_call():
    @record_function("fact")
    def fact(n):
        return jg.ones(1) if n == 0 else fact(n - 1) * n

    with profile() as prof:
        fact(2)
    facts = [e for e in prof.events() if e.name == "fact"]
    assert len(facts) == 3 and facts[1].cpu_parent is facts[0] and facts[2].cpu_parent is facts[1]
    # outside a profile it records nothing and costs a call
    with record_function("nothing") as r:
        assert r.event is None


def test_chrome_trace_is_valid(tmp_path):
    with profile(record_shapes=True) as prof:
        with record_function("block"):
            small_program()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    trace = json.loads(path.read_text())
    complete = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert len(complete) == len(prof.events())
    for e in complete:
        assert {"ts", "dur", "name", "ph", "pid", "tid", "args", "cat"} <= set(e) and e["dur"] >= 0
    block = next(e for e in complete if e["name"] == "block")
    mul = next(e for e in complete if e["name"] == "aten::mul")
    assert block["cat"] == "user_annotation" and mul["cat"] == "cpu_op"
    assert mul["args"]["Input Dims"] == [[3, 4], [3, 4]]
    # (microseconds since the epoch, as floats: 1 us of rounding)
    assert block["ts"] <= mul["ts"] + 1 and mul["ts"] + mul["dur"] <= block["ts"] + block["dur"] + 1
    assert any(e["ph"] == "M" and e["name"] == "thread_name" for e in trace["traceEvents"])


def test_schedule_actions():
    s = schedule(wait=1, warmup=1, active=2, repeat=1, skip_first=1)
    assert [s(i) for i in range(8)] == [A.NONE, A.NONE, A.WARMUP, A.RECORD, A.RECORD_AND_SAVE, A.NONE, A.NONE, A.NONE]
    s = schedule(wait=1, warmup=1, active=2)
    assert [s(i) for i in range(10)] == [A.NONE, A.WARMUP, A.RECORD, A.RECORD_AND_SAVE] * 2 + [A.NONE, A.WARMUP]
    with pytest.raises(AssertionError, match="Invalid profiler schedule arguments"):
        schedule(wait=0, warmup=0, active=0)
    with pytest.warns(UserWarning, match="won't be using warmup"):
        schedule(wait=0, warmup=0, active=1)


def test_profile_steps_through_its_schedule():
    traces = []

    def ready(p):
        traces.append(sorted({e.name for e in p.events() if e.name.startswith("ProfilerStep#")}))
        assert sum(e.name == "aten::mul" for e in p.events()) == 2  # the two active steps' ops only

    with profile(schedule=schedule(wait=1, warmup=1, active=2, repeat=2), on_trace_ready=ready) as prof:
        for _ in range(10):
            jg.ones(2) * 2
            prof.step()
    assert traces == [["ProfilerStep#2", "ProfilerStep#3"], ["ProfilerStep#6", "ProfilerStep#7"]]
    assert prof.step_num == 10 and STATE.profiler is None


def test_profile_stopped_while_recording_hands_over_its_trace():
    ready = []
    with profile(schedule=schedule(wait=0, warmup=1, active=5), on_trace_ready=ready.append) as prof:
        for _ in range(3):
            jg.ones(2).exp()
            prof.step()
    assert ready == [prof] and sum(e.name == "aten::exp" for e in prof.events()) == 2


def test_optimizer_step_and_zero_grad_ranges():
    model = nn.Linear(3, 2)
    opt = jg.optim.SGD(model.parameters(), lr=0.1)
    with profile() as prof:
        model(jg.ones(4, 3)).sum().backward()
        opt.step()
        opt.zero_grad()
    got = names(prof.events())
    assert "Optimizer.step#SGD.step" in got and "Optimizer.zero_grad#SGD.zero_grad" in got
    assert "autograd::engine::evaluate_function: AddmmBackward0" in got  # F.linear's node, as PyTorch's


def test_profile_memory_and_stack():
    with profile(profile_memory=True, with_stack=True) as prof:
        jg.ones(10, 10, dtype=jg.float64).exp()
    ev = {e.name: e for e in prof.events()}["aten::exp"]
    assert ev.self_cpu_memory_usage == 800 and ev.cpu_memory_usage == 800
    assert any("test_profiler.py" in s and "test_profile_memory_and_stack" in s for s in ev.stack)
    table = prof.key_averages().table()
    assert header(table)[6:8] == ["CPU Mem", "Self CPU Mem"] and "800 B" in table
    assert "Source Location" in header(prof.events().table())


def test_cuda_activity_is_accepted_on_the_cpu():
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        jg.ones(2) * 2
    assert names(prof.events()) == ["aten::mul"] and prof.events()[0].device_time_total == 0
    assert ProfilerActivity.CPU in jg.profiler.supported_activities()


class _FakeCudaEvent:
    """A CUDA event pair's start, answering a fixed elapsed time (milliseconds)."""

    def __init__(self, ms):
        self.ms = ms

    def elapsed_time(self, stop):
        return self.ms

    def synchronize(self):
        pass


def test_device_times_add_up_the_tree_and_get_pytorch_columns():
    rec = Recorder(device_time=True)
    rec.start()
    outer = rec.begin("range", user=True)
    node = rec.begin("MulBackward0")
    op = rec.begin("aten::mul")
    rec.end(op)
    rec.end(node)
    rec.end(outer)
    rec.timed += [(op, _FakeCudaEvent(0.002), _FakeCudaEvent(0)), (node, _FakeCudaEvent(0.005), _FakeCudaEvent(0))]
    events = EventList(rec.close(), use_device="cuda")
    assert (op.device_time_total, op.self_device_time_total) == pytest.approx((2.0, 2.0))  # microseconds
    assert (node.device_time_total, node.self_device_time_total) == pytest.approx((5.0, 3.0))
    assert (outer.device_time_total, outer.self_device_time_total) == pytest.approx((5.0, 0.0))
    table = events.table()
    assert header(table) == TORCH_COLUMNS[:6] + ["Self CUDA", "Self CUDA %", "CUDA total", "CUDA time avg",
                                                 "# of Calls", "Numba compile"]
    assert table.splitlines()[-1] == "Self CUDA time total: 5.000us"


def test_cuda_tensors_under_the_simulator():
    """Ops and nodes on CUDA tensors, with the CUDA activity: CUDA events around them (numba's simulator, in a
    child process: it must be switched on before numba.cuda is imported)."""
    pytest.importorskip("numba.cuda")
    code = ("import jitgrad as jg\n"
            "from jitgrad.profiler import profile, ProfilerActivity as A\n"
            "x = jg.ones(8, device='cuda', requires_grad=True)\n"
            "with profile(activities=[A.CPU, A.CUDA]) as prof:\n"
            "    (x * 2).sum().backward()\n"
            "rec = prof.profiler.recorder\n"
            "timed = sorted(e.name for e, _, _ in rec.timed)\n"
            "assert {'MulBackward0', 'SumBackward0', 'aten::mul', 'aten::sum'} <= set(timed), timed\n"
            "assert all(e.device_time_total >= 0 for e in prof.events())\n"
            "print(prof.key_averages().table())\n")
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1", PYTHONPATH=ROOT)
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "aten::mul" in done.stdout


def test_error_inside_an_op_ends_its_event():
    with profile() as prof:
        with pytest.raises(RuntimeError):
            jg.ones(2) + jg.ones(3)
        jg.ones(2).exp()
    ev = {e.name: e for e in prof.events()}
    assert ev["aten::exp"].cpu_parent is None and ev["aten::add"].time_range.end >= ev["aten::add"].time_range.start


def test_a_range_open_when_the_profile_stops_ends_there():
    with record_function("outside") as outer:
        with profile() as prof:
            inner = record_function("left open").__enter__()
            jg.ones(2) * 2
        left = prof.events()[0]
        end = left.time_range.end
        jg.ones(2).exp()  # the profile has stopped: its events are final
        inner.__exit__(None, None, None)
    assert names(prof.events()) == ["left open", "aten::mul"] and outer.event is None
    assert left.time_range.end == end >= prof.events()[1].time_range.end


def test_other_threads_are_not_recorded():
    with profile() as prof:
        t = threading.Thread(target=lambda: jg.ones(2).exp())
        t.start()
        t.join()
        jg.ones(2) * 2
    assert names(prof.events()) == ["aten::mul"]


@pytest.mark.torch
def test_other_threads_are_left_out_as_pytorch_leaves_them_out():
    """PyTorch 2.13's CPU profiler records the thread that entered it (its documentation: thread local), not a
    threading.Thread or a thread pool running ops inside the block."""
    torch = pytest.importorskip("torch")
    from concurrent.futures import ThreadPoolExecutor

    def keys(lib, prof_mod):
        a = lib.ones(8, 8)
        with prof_mod.profile() as p:
            t = threading.Thread(target=lambda: a @ a)
            t.start()
            t.join()
            with ThreadPoolExecutor(2) as ex:
                list(ex.map(lambda _: lib.relu(a), range(3)))
            a + a
        return sorted(e.key for e in p.key_averages())
    assert keys(torch, torch.profiler) == keys(jg, jg.profiler) == ["aten::add"]


def test_autograd_profiler_spelling():
    from jitgrad.autograd import profiler as ap
    with ap.profile(record_shapes=True) as prof:
        with ap.record_function("label"):
            jg.ones(2).sin()
    assert names(prof.function_events) == ["label", "aten::sin"]
    assert header(prof.table(sort_by="self_cpu_time_total"))[:7] == TORCH_COLUMNS[:6] + ["# of Calls"]
    assert prof.key_averages()[0].key == "label" and prof.self_cpu_time_total > 0
    with ap.profile():
        with pytest.raises(RuntimeError, match="already enabled on this thread"):
            with ap.profile():
                pass
    with pytest.raises(RuntimeError, match="didn't finish running"):
        ap.profile().key_averages()
    with ap.emit_nvtx(record_shapes=True):
        jg.ones(1) + 1
    assert jg.autograd.profiler.profile is ap.profile and jg.autograd.profiler_util.EventList


def test_tensorboard_trace_handler(tmp_path):
    handler = jg.profiler.tensorboard_trace_handler(str(tmp_path / "tb"), worker_name="w0")
    with profile(schedule=schedule(wait=0, warmup=1, active=1), on_trace_ready=handler) as prof:
        for _ in range(2):
            jg.ones(2) * 2
            prof.step()
    files = list((tmp_path / "tb").iterdir())
    assert len(files) == 1 and files[0].name.startswith("w0.") and files[0].name.endswith(".pt.trace.json")
    assert any(e.get("name") == "aten::mul" for e in json.loads(files[0].read_text())["traceEvents"])


# ---------------------------------------------------------------------------------------------- PyTorch's own
@pytest.mark.torch
def test_table_columns_and_schedule_as_torch():
    torch = pytest.importorskip("torch")
    for kwargs in ({}, {"record_shapes": True}, {"profile_memory": True}):
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], **kwargs) as tp:
            torch.ones(3, requires_grad=True).mul(2).sum().backward()
        with profile(activities=[ProfilerActivity.CPU], **kwargs) as jp:
            jg.ones(3, requires_grad=True).mul(2).sum().backward()
        theirs = header(tp.key_averages().table(sort_by="self_cpu_time_total", row_limit=5))
        ours = header(jp.key_averages().table(sort_by="self_cpu_time_total", row_limit=5))
        assert [c for c in ours if c != "Numba compile"] == theirs
    for args in ({"wait": 1, "warmup": 1, "active": 2}, {"wait": 2, "warmup": 1, "active": 1, "repeat": 2},
                 {"wait": 0, "warmup": 2, "active": 3, "skip_first": 3}):
        ts, js = torch.profiler.schedule(**args), schedule(**args)
        assert [ts(i).name for i in range(20)] == [js(i).name for i in range(20)]


@pytest.mark.torch
def test_event_names_of_a_training_step_as_torch():
    torch = pytest.importorskip("torch")

    def step(lib, prof_mod):
        lib.manual_seed(0)
        model = lib.nn.Sequential(lib.nn.Linear(4, 8), lib.nn.ReLU(), lib.nn.Linear(8, 2))
        opt = lib.optim.SGD(model.parameters(), lr=0.1)
        x, y = lib.ones(5, 4), lib.zeros(5, 2)
        with prof_mod.profile(activities=[prof_mod.ProfilerActivity.CPU]) as p:
            with prof_mod.record_function("train_step"):
                loss = ((model(x) - y) ** 2).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
        return {e.key for e in p.key_averages()}

    step(jg, jg.profiler)
    theirs, ours = step(torch, torch.profiler), step(jg, jg.profiler)
    backward = {n for n in theirs if "Backward" in n or "AccumulateGrad" in n}
    assert backward == {n for n in ours if "Backward" in n or "AccumulateGrad" in n}
    assert {"train_step", "Optimizer.step#SGD.step", "Optimizer.zero_grad#SGD.zero_grad", "aten::linear",
            "aten::relu"} <= ours
    forward = {n for n in ours if n.startswith("aten::")}
    assert forward - theirs <= {"aten::reshape", "aten::square"}, forward - theirs


def test_profile_training_example(tmp_path):
    pytest.importorskip("sklearn")
    main = runpy.run_path(os.path.join(ROOT, "examples", "profile_training.py"))["main"]
    result = main(["--steps", "6", "--batch-size", "16", "--trace", str(tmp_path / "t.json")])
    rows = [r.split()[0] for r in result["table"].splitlines()[3:-2]]
    assert len(rows) == 10 and result["traces"] == 1
    steps = sorted(e.name for e in result["events"] if e.name.startswith("ProfilerStep#"))
    assert steps == ["ProfilerStep#3", "ProfilerStep#4", "ProfilerStep#5"]  # skip 2, warm up 1, record 3
    assert sum(e.name == "forward" for e in result["events"]) == 3
    assert json.loads((tmp_path / "t.json").read_text())["traceEvents"]
