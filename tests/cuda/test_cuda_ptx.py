"""Every CUDA kernel of jitgrad.kernels.cuda compiled to PTX for a real GPU (compute capability
9.0), with numba-cuda and no GPU: this catches what the simulator lets through (unsupported
functions, types that do not unify, shared-memory shapes that are not constants).

The compilation runs in a subprocess without NUMBA_ENABLE_CUDASIM (this file run as a script).
There the launch function of the kernel modules is swapped for a recorder and the public entry
points are called with host arrays: each kernel is compiled with exactly the argument types its
real launch would pass.
"""
import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.cuda

CC = (9, 0)


def _compile_in_subprocess(mode):
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    proc = subprocess.run([sys.executable, __file__, mode], env=env, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-8000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_every_kernel_compiles_to_ptx_for_cc90():
    report = _compile_in_subprocess("default")
    assert not report["failures"], "\n\n".join(report["failures"])
    assert report["missing"] == [], "kernels never launched by the PTX sweep: %s" % report["missing"]
    assert report["scalars"] == report["scalars_expected"]
    assert report["kernels"] >= 35


@pytest.mark.slow
def test_every_kernel_in_every_dtype_compiles_to_ptx_for_cc90():
    """Every scalar function's generated kernel, both float widths, every reduction x dtype, every
    matmul operand rank: the kernels the default sweep covers by one representative each."""
    report = _compile_in_subprocess("full")
    assert not report["failures"], "\n\n".join(report["failures"])
    assert report["kernels"] >= 2 * report["scalars_expected"]


# ---------------------------------------------------------------------- the subprocess
def _sweep(mode):
    import types

    import numpy as np
    from numba import cuda, typeof
    from numba.core import types as nt
    from numba.cuda.dispatcher import CUDADispatcher

    if not cuda.is_available():
        # numba-cuda compiles a called device function for the current device's compute
        # capability; with no device, pin it to the target of this sweep.
        import numba.cuda.dispatcher as dispatcher
        dispatcher.get_current_device = lambda: types.SimpleNamespace(compute_capability=CC)

    from jitgrad.kernels import pool as KP
    from jitgrad.kernels import scalars as C
    from jitgrad.kernels import reduce as CR
    from jitgrad.kernels.cuda import _launch as L
    from jitgrad.kernels.cuda import array as ARRAY
    from jitgrad.kernels.cuda import conv as CV
    from jitgrad.kernels.cuda import pool as PL
    from jitgrad.kernels.cuda import elementwise as E
    from jitgrad.kernels.cuda import index as I
    from jitgrad.kernels.cuda import linalg as LA
    from jitgrad.kernels.cuda import matmul as MM
    from jitgrad.kernels.cuda import random as RND
    from jitgrad.kernels.cuda import reduce as R
    from jitgrad.kernels.cuda import attention as GA
    from jitgrad.kernels.cuda import rnn as GR

    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/, for helpers
    from helpers import BOOL_OUT, INT_ONLY, scalar_inputs

    launched = {}  # (kernel name, argument types) -> kernel

    def record(kernel, grid, block, *args):
        launched.setdefault((kernel.py_func.__name__, tuple(typeof(a) for a in args)), kernel)

    L.MAX_BLOCKS, L.REDUCE_BLOCKS = 132 * L.BLOCKS_PER_SM, 132 * L.REDUCE_BLOCKS_PER_SM  # an H100's 132 SMs
    L.empty, L.to_device, L.launch = np.empty, np.asarray, record
    rng = np.random.default_rng(0)
    failures = []

    def compile_ptx(fn, sig, device):
        try:
            cuda.compile_ptx(fn, sig, device=device, cc=CC)
        except Exception as e:  # report every failure, not only the first
            failures.append("%s%s: %s: %s" % (fn.__name__, sig, type(e).__name__, str(e)[:1500]))

    full = mode == "full"
    floats = (np.float32, np.float64) if full else (np.float32,)
    # elementwise: every scalar function as a device function (full: and its kernel, both widths)
    scalars = 0
    for name in sorted(C.SCALARS):
        for dtype in ((np.int64,) if name in INT_ONLY else floats):
            args = scalar_inputs(name, dtype, rng)
            if full:
                E.run(name, np.dtype(bool) if name in BOOL_OUT else np.dtype(dtype), *args)
            compile_ptx(E.device_function(name).py_func, tuple(typeof(a.dtype.type(0)) if isinstance(a, np.ndarray)
                                                               else typeof(a) for a in args), True)
        scalars += 1
    # ... and the generated kernel of every argument form
    x = rng.standard_normal((6, 5))
    for dt in floats + ((np.int64,) if full else ()):
        a = x.astype(dt)
        E.run("add", a.dtype, a, a)  # flat
        E.run("mul", a.dtype, a, a.dtype.type(2))  # scalar
        E.run("sub", a.dtype, a, a[:1, :1])  # one element, on the device
        E.run("maximum", a.dtype, a, a[0])  # broadcast row
        E.run("where", a.dtype, a > 0, a[:, :1], np.zeros((6, 10), dt)[:, ::2])  # bool, broadcast column, strided
        E.run("neg", a.dtype, a[::2])  # strided 2-D
        E.run("identity", a.dtype, np.asarray(a[0, 0]), out=np.empty((), dt))  # 0-d
    E.run("eq", np.dtype(bool), x, x[0])

    # reductions (a long row or column is split across blocks: both passes; rows (B == 1) have a kernel of
    # their own), scan, softmax
    for kind in R.KINDS:
        for dt in floats + ((np.int32, np.int64, np.bool_) if full and kind != "logsumexp" else ()):
            R.reduce(kind, np.zeros((1, 200000), dt), (1,))
            R.reduce(kind, np.zeros((1, 200000, 2), dt), (1,))
    for dt in floats + ((np.int64, np.bool_) if full else ()):
        for kind in CR.SCANS:
            R.scan(kind, np.zeros((3, 7, 5), dt), 1)
    for dt in floats:
        for log in (False, True):
            R.softmax(np.zeros((4, 10), dt), 1, log)
            R.softmax_vjp(np.zeros((4, 10), dt), np.zeros((4, 10), dt), 1, log)

    # matmul: every operand rank, contiguous and transposed
    for dt in floats + ((np.int64,) if full else ()):
        for sa, sb in (((5, 7), (7, 3)),) + ((((2, 5, 7), (2, 7, 3)), ((2, 5, 7), (7, 3)), ((5, 7), (2, 7, 3)))
                                             if full else ()):
            MM.matmul(np.zeros(sa, dt), np.zeros(sb, dt))
    if full:
        MM.matmul(np.zeros((7, 5), np.float32).T, np.zeros((3, 7), np.float32).T)

    # index kernels
    for dt in floats + ((np.int32, np.int64) if full else ()):
        I.index_add(np.zeros((5, 3), dt), (np.array([0, 1]),), np.zeros((2, 3), dt))
        I.index_add(np.zeros((5, 3), dt), (np.array([0, 1]), np.array([2, 2])), np.zeros(2, dt))
    for ndim in (1, 2, 3):
        for dim in range(ndim):
            shape = (4,) * ndim
            I.scatter_add(np.zeros(shape, np.float32), dim, np.zeros(shape, np.int64), np.zeros(shape, np.float32))
    I.one_hot(np.zeros(4, np.int64), np.zeros((4, 3), np.int64))

    # sampling kernels
    RND.multinomial(np.ones((2, 4)), np.zeros((2, 3)), 3, True)
    RND.multinomial(np.ones((2, 4)), np.ones((2, 4)), 3, False)

    # convolution and pooling kernels
    windows = KP.avg_pool_windows((5, 5), (2, 2), (2, 2), (1, 1), (3, 3), True, None)
    for dt in floats:
        x = np.zeros((2, 3, 5, 5), dt)
        CV.col2im(CV.im2col(x, (3, 3), (2, 2), (1, 1), (1, 1), (3, 3)), x.shape, (3, 3), (2, 2), (1, 1), (1, 1), (3, 3))
        values, indices = PL.max_pool2d(x, (2, 2), (2, 2), (1, 1), (1, 1), (3, 3))
        PL.max_pool2d_backward(values, indices, (5, 5))
        PL.window_avg_backward(PL.window_avg(x, windows), windows, (5, 5))

    # recurrent cell steps (contiguous, and on the strided workspace views a layer passes) and attention
    for dt in floats:
        z = lambda *shape: np.zeros(shape, dt)  # noqa: E731
        ws = z(3, 24)
        GR.lstm_cell_vjp(*GR.lstm_cell(z(3, 16), z(3, 16), z(16), z(3, 4))[:1], z(3, 4), z(3, 4), z(3, 4))
        GR.lstm_cell(z(3, 16), z(3, 16), None, z(3, 4))
        GR.step("lstm_cell", z(3, 16), z(3, 16), z(16), z(3, 4), ws[:, :16], ws[:, 20:], z(3, 4))
        GR.step("lstm_cell_vjp", ws[:, :16], ws[:, 16:20], z(3, 4), z(3, 4), z(3, 16), z(3, 4))
        GR.gru_cell_vjp(GR.gru_cell(z(3, 12), z(3, 12), z(12), z(3, 4))[0], z(3, 4), z(3, 4))
        GR.step("gru_cell", z(3, 12), z(3, 12), z(12), z(3, 4), ws[:, :16], z(3, 4))
        GR.step("gru_cell_vjp", ws[:, :16], ws[:, 16:20], z(3, 4), z(3, 12), z(3, 12), z(3, 4))
        for relu in (False, True):
            GR.rnn_cell_vjp(GR.rnn_cell(z(3, 4), z(3, 4), z(4), relu), z(3, 4), relu)
            GR.step("rnn_cell_vjp", ws[:, :4], z(3, 4), z(3, 4), relu)
        GA.attention_softmax_vjp(z(2, 3, 4), GA.attention_softmax(z(2, 3, 4), z(3, 4), 0.5, True), 0.5)
        GA.attention_softmax(z(2, 3, 4), None, 0.5, False)

    # 2x2 / 3x3 linear algebra: one thread a matrix
    for dt in floats:
        a, b = np.zeros((4, 3, 3), dt), np.zeros((4, 3, 2), dt)
        x, _ = LA.small_solve(a, b)
        LA.small_inv_grad(a, a)
        LA.small_solve_grad(a, x, b)
        LA.small_det_grad(a, np.zeros(4, dt))
        LA.slogdet(a)
        l, _ = LA.cholesky(a, False)
        LA.solve_triangular(l, b, False, True, False)
        LA.cholesky_solve(l, b, True)

    for (_, sig), kernel in launched.items():
        compile_ptx(kernel.py_func, sig, False)

    # kernels launched directly (not through the recorder): every one found must be listed here
    i64, f32 = nt.int64, nt.float32
    strides = nt.UniTuple(i64, ARRAY.MAX_DIMS)
    direct = {
        (ARRAY, "_copy_strided"): (f32[::1], i64, strides, f32[::1], i64, strides, strides, i64, i64),
        (ARRAY, "_gather"): (f32[::1], i64[::1], f32[::1]),
        (ARRAY, "_scatter"): (f32[::1], i64[::1], f32[::1]),
        (ARRAY, "_take3"): (f32[:, :, ::1], i64[::1], f32[:, :, ::1], i64[::1]),
        (ARRAY, "_take_along3"): (f32[:, :, ::1], i64[:, :, ::1], f32[:, :, ::1]),
    }
    names = {name for name, _ in launched}
    missing = []
    for module in (E, R, MM, I, CV, PL, ARRAY, GR, GA, RND, LA):
        for attr, value in vars(module).items():
            if isinstance(value, CUDADispatcher) and not value.targetoptions.get("device"):
                if (module, attr) in direct:
                    compile_ptx(value.py_func, direct[(module, attr)], False)
                elif value.py_func.__name__ not in names:
                    missing.append("%s.%s" % (module.__name__, attr))
    return {"kernels": len(launched) + len(direct), "scalars": scalars, "scalars_expected": len(C.SCALARS),
            "failures": failures, "missing": missing}


if __name__ == "__main__":
    print(json.dumps(_sweep(sys.argv[1])))
