"""The JIT-cost tools: jitgrad.jit_stats(), JITGRAD_LOG_COMPILES and python -m jitgrad.precompile.

Compilation is observed in fresh processes with an empty numba cache (NUMBA_CACHE_DIR), so the
tests do not depend on what this machine has cached already.
"""
import json
import os
import re
import subprocess
import sys

import pytest

import jitgrad as jg
from jitgrad import precompile
from jitgrad.kernels import _background
from jitgrad.ops import OPS

LOG_LINE = re.compile(r"^jitgrad: compiled (\w+)\((.*)\) in (\d+\.\d+) s$")

# A few ops forward and backward, then the counters as JSON on stdout.
PROGRAM = """
import json, jitgrad as jg
x = jg.tensor([0.5, 1.5, 2.5], requires_grad=True)
(x.exp() * x.sigmoid()).sum().backward()
print(json.dumps(jg.jit_stats(per_kernel=True)))
"""


def _run(args, cache_dir, log=False):
    # (compiled autograd off: a plan's tape is a generated kernel, logged apart from the table's kernels counted here)
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache_dir), JITGRAD_LOG_COMPILES="1" if log else "0",
               JITGRAD_COMPILED_AUTOGRAD="0")
    return subprocess.run([sys.executable] + args, env=env, capture_output=True, text=True, timeout=300)


def _stats(proc):
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_jit_stats_fields():
    s = jg.jit_stats()
    assert set(s) == {"kernels_compiled", "compile_seconds", "cache_hits", "cache_misses", "background_builds",
                      "background_pending", "background_seconds", "graphs", "graph_compile_seconds", "compiled_autograd"}  # jitgrad.compile's graphs, and
    # compiled autograd's counters
    assert all(v >= 0 for k, v in s.items() if k not in ("graphs", "compiled_autograd"))
    assert isinstance(s["graphs"], list) and s["compiled_autograd"]["fallbacks"] >= 0
    assert isinstance(jg.jit_stats(per_kernel=True)["per_kernel"], list)


def test_jit_stats_count_compiles_then_cache_hits(tmp_path):
    proc = _run(["-c", PROGRAM], tmp_path)
    assert "jitgrad: compiled" not in proc.stderr  # logging is off by default
    first = _stats(proc)
    assert first["kernels_compiled"] > 0 and first["compile_seconds"] > 0
    assert first["cache_misses"] == first["kernels_compiled"] and first["cache_hits"] == 0
    names = {name for name, sig, seconds in first["per_kernel"]}
    assert any("exp" in n for n in names) and any("sigmoid" in n for n in names)
    assert first["per_kernel"] == sorted(first["per_kernel"], key=lambda k: -k[2])

    # a second process finds every kernel in the on-disk cache and compiles nothing
    second = _stats(_run(["-c", PROGRAM], tmp_path))
    assert second["kernels_compiled"] == 0 and second["compile_seconds"] == 0
    assert second["cache_hits"] == first["kernels_compiled"] and second["cache_misses"] == 0


def test_jit_stats_grows_in_process(tmp_path):
    # a kernel signature this process has not used yet is compiled or loaded from the cache
    before = jg.jit_stats()
    x = jg.tensor([[0.25, 0.5], [1.0, 2.0]], dtype=jg.float64, requires_grad=True)
    jg.logsumexp(x.atan2(x * 2 + 1), 1).sum().backward()
    after = jg.jit_stats()
    seen = lambda s: s["kernels_compiled"] + s["cache_hits"]  # noqa: E731
    assert seen(after) >= seen(before)
    assert after["compile_seconds"] >= before["compile_seconds"]


def test_log_compiles_prints_one_line_per_kernel(tmp_path):
    proc = _run(["-c", PROGRAM], tmp_path, log=True)
    stats = _stats(proc)
    lines = [line for line in proc.stderr.splitlines() if line.startswith("jitgrad: compiled")]
    assert len(lines) == stats["kernels_compiled"] > 0
    for line in lines:
        name, sig, seconds = LOG_LINE.match(line).groups()
        assert "float32" in sig and float(seconds) > 0
    # warm cache: nothing compiles, nothing is logged
    proc = _run(["-c", PROGRAM], tmp_path, log=True)
    assert _stats(proc)["kernels_compiled"] == 0
    assert "jitgrad: compiled" not in proc.stderr


def test_precompile_subset_fills_the_cache(tmp_path):
    args = ["-m", "jitgrad.precompile", "--ops", "neg,mul", "--dtypes", "float64"]
    proc = _run(args, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert re.search(r"^neg\s+compiled\s+[1-9]", out, re.M) and re.search(r"^mul\s+compiled", out, re.M)
    m = re.search(r"precompiled 2 op\(s\) for float64: (\d+) kernel signature\(s\) compiled", out)
    assert m and int(m.group(1)) > 0
    if _background.ENABLED:  # the parallel builds went to the worker, and precompile waited for them
        m = re.search(r"(\d+) parallel build\(s\) compiled in the background", out)
        assert m and int(m.group(1)) > 0
    # serial and parallel builds are both in the cache now: running the samples again compiles nothing
    proc = _run(args, tmp_path)
    assert proc.returncode == 0
    assert "float64: 0 kernel signature(s) compiled" in proc.stdout
    # ... and so does ordinary use of those ops in a new process, on small tensors (serial builds) and on large
    # ones (parallel builds: loaded from the cache, none asked of the background worker)
    for n in (2, 70000):
        program = ("import jitgrad as jg, json\nx, y = (jg.linspace(-1, 1, %d, dtype=jg.float64, requires_grad=True)"
                   " for _ in range(2))\n(-(x * y)).backward(jg.ones(%d, dtype=jg.float64))\n"
                   "print(json.dumps(jg.jit_stats()))" % (n, n))
        stats = _stats(_run(["-c", program], tmp_path))
        assert stats["kernels_compiled"] == 0 and stats["background_builds"] == 0 and stats["cache_hits"] > 0


@pytest.mark.parametrize("argv, message", [(["--ops", "no_such_op"], "unknown op(s): no_such_op"),
                                           (["--dtypes", "float16"], "unknown dtype(s): float16")])
def test_precompile_bad_arguments(argv, message, capsys):
    with pytest.raises(SystemExit) as e:
        precompile.main(argv)
    assert e.value.code == 2
    assert message in capsys.readouterr().err


def test_precompile_list(capsys):
    assert precompile.main(["--list"]) == 0
    assert set(capsys.readouterr().out.split()) == set(OPS)


def test_precompile_in_process_restores_threshold():
    from jitgrad.kernels import config
    threshold = config.PARALLEL_THRESHOLD
    with open(os.devnull, "w") as devnull:
        result = precompile.precompile(["neg"], dtypes=("float64",), out=devnull)
    assert result["errors"] == [] and result["ops"] == 1
    assert config.PARALLEL_THRESHOLD == threshold


def test_serial_traces_in_threads_restore_the_threshold():
    """Backward traces run serial kernel builds by raising the parallel threshold; traces in several threads at
    once (compiled autograd's plans) must leave the threshold the first found, never another trace's value."""
    import threading
    from jitgrad.compiler import capture
    from jitgrad.kernels import config
    threshold = config.PARALLEL_THRESHOLD
    start = threading.Barrier(4)

    def traces():
        start.wait()
        for _ in range(500):
            capture._serial_enter()
            capture._serial_exit()
    threads = [threading.Thread(target=traces) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert config.PARALLEL_THRESHOLD == threshold


def test_a_users_njit_function_from_exec_compiles_beside_jitgrad():
    """jitgrad times the compilations of its own kernels; someone else's @njit function, even one whose
    source was exec'd without a module name, compiles and runs as without jitgrad."""
    from numba import njit
    ns = {}
    exec("def triple(x):\n    return 3 * x\n", ns)
    assert ns["triple"].__module__ is None
    before = jg.jit_stats()["kernels_compiled"]
    assert njit(ns["triple"])(2.5) == 7.5
    assert jg.jit_stats()["kernels_compiled"] == before  # not counted as a kernel of jitgrad
