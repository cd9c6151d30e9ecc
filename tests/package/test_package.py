"""Packaging promises: importing compiles nothing, kernels ship as jitgrad.kernels, no torch needed."""
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]  # the checkout


def _run(code, **env):
    e = dict(os.environ, **env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=e, cwd="/")


def test_import_compiles_nothing_and_needs_no_torch():
    code = ("import sys; sys.modules['torch'] = None\n"
            "import jitgrad\n"
            "from jitgrad.kernels import _jit, elementwise\n"
            "assert all(not d.signatures for d in _jit.DISPATCHERS), 'compiled at import'\n"
            "assert not elementwise._loops\n"
            "print('ok', len(_jit.DISPATCHERS))")
    r = _run(code)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("ok")


def test_import_leaves_scipys_python_layers_for_later():
    """scipy.fft and scipy.linalg (with the array-API layer and f2py they import) come in with the first transform or
    factorization that needs them, not with ``import jitgrad``: they were a good part of its import time."""
    code = ("import sys, jitgrad\n"
            "print(sorted(m for m in ('scipy.fft', 'scipy.linalg', 'scipy.special', 'numpy.f2py') if m in sys.modules))\n"
            "x = jitgrad.arange(8.0)\n"
            "assert abs(jitgrad.fft.rfft(x)[0].real.item() - 28.0) < 1e-9 and 'scipy.fft' in sys.modules\n")
    r = _run(code)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]", r.stdout


def test_kernels_are_a_subpackage_with_relative_imports():
    import jitgrad.kernels
    assert pathlib.Path(jitgrad.kernels.__file__).parent.name == "kernels"
    assert jitgrad.kernels.__name__ == "jitgrad.kernels"
    for path in (ROOT / "kernels").rglob("*.py"):
        text = path.read_text()
        assert "import jitgrad" not in text and "from jitgrad" not in text, path
    import tomllib
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert "kernels" not in cfg.get("packages", []) and cfg["package-dir"]["jitgrad.kernels"] == "kernels"


# Every way a CUDA tensor is asked for; each must raise a RuntimeError that says what is missing.
CUDA_PROBE = """
import io, jitgrad
print("available", jitgrad.cuda.is_available(), "count", jitgrad.cuda.device_count())
x = jitgrad.ones(2)
buf = io.BytesIO(); jitgrad.save({"x": x}, buf); buf.seek(0)
for what, request in [("to", lambda: x.to("cuda")), ("cuda", lambda: x.cuda()),
                      ("factory", lambda: jitgrad.zeros(2, device="cuda")),
                      ("load", lambda: jitgrad.load(buf, map_location="cuda"))]:
    try:
        request()
        print(what, "no error")
    except RuntimeError as e:
        print(what, "RuntimeError:", e)
"""

# A machine without numba-cuda: its import redirector is dropped and its package refused, so
# ``numba.cuda`` is numba's own old copy, as after a plain ``pip install jitgrad``.
WITHOUT_NUMBA_CUDA = """
import importlib.abc, sys
sys.meta_path[:] = [f for f in sys.meta_path if type(f).__name__ != "NumbaCudaFinder"]
class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "numba_cuda":
            raise ModuleNotFoundError("No module named %r" % name)
sys.meta_path.insert(0, Refuse())
"""


def _cuda_probe(prelude, **env):
    r = _run(prelude + CUDA_PROBE, NUMBA_ENABLE_CUDASIM="0", **env)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "available False count 0", r.stdout
    assert len(lines) == 5 and all(" RuntimeError: jitgrad was asked for device 'cuda:0'" in ln for ln in lines[1:])
    return lines[1]


def test_cuda_without_the_package_is_unavailable_not_an_import_error():
    message = _cuda_probe(WITHOUT_NUMBA_CUDA)
    assert "the numba-cuda package is not installed" in message and 'pip install "jitgrad[cuda]"' in message


def test_cuda_request_without_gpu_is_a_clear_error():
    import numba_cuda  # noqa: F401  (the 'cuda' extra, installed by the dev extra)
    message = _cuda_probe("", CUDA_VISIBLE_DEVICES="")
    assert "found no NVIDIA GPU" in message and "Traceback" not in message


def test_openblas_threads_are_told_to_sleep_after_a_gemm_unless_the_user_said_otherwise():
    code = "import jitgrad, os; print(os.environ['OPENBLAS_THREAD_TIMEOUT'])"
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_THREAD_TIMEOUT"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "4"
    out = subprocess.run([sys.executable, "-c", code], env=dict(env, OPENBLAS_THREAD_TIMEOUT="20"),
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "20"
