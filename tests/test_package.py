"""Packaging promises: importing compiles nothing, kernels ship as jitgrad.kernels, no torch needed."""
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]


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


def test_cuda_request_without_gpu_is_a_clear_error():
    code = ("import jitgrad\n"
            "try:\n"
            "    jitgrad.ones(2, device='cuda')\n"
            "except RuntimeError as e:\n"
            "    print('RuntimeError', e)\n")
    r = _run(code, NUMBA_ENABLE_CUDASIM="0", CUDA_VISIBLE_DEVICES="")
    assert r.returncode == 0, r.stderr
    assert "RuntimeError" in r.stdout and "no CUDA device is available" in r.stdout
    assert "numba" not in r.stdout.split("RuntimeError", 1)[1].split("(numba-cuda)")[0]
