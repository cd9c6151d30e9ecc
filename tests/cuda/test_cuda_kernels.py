"""The CUDA kernels (jitgrad.kernels.cuda) against their CPU twins.

numba swaps ``numba.cuda`` for its simulator only if NUMBA_ENABLE_CUDASIM=1 is set before the first
import of numba.cuda, so this module runs its checks in a child pytest process with the variable
set, and the parent test reports the child's outcome. Run the whole suite with
NUMBA_ENABLE_CUDASIM=1 and the checks run in-process; set JITGRAD_CUDA_TESTS=gpu on a machine with
a GPU and they run there for real.
"""
import itertools
import os
import subprocess
import sys

import numpy as np
import pytest

from jitgrad.kernels import elementwise as C
from jitgrad.kernels import scalars

from helpers import BOOL_OUT, INT_ONLY, scalar_inputs  # (shared with test_cuda_ptx.py)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the checkout

IN_CHILD = os.environ.get("NUMBA_ENABLE_CUDASIM") == "1" or os.environ.get("JITGRAD_CUDA_TESTS") == "gpu"

# Under the simulator the scalar functions run on NumPy scalars, which warn about the NaN and inf
# results that compiled kernels produce silently.
pytestmark = [pytest.mark.cuda, pytest.mark.filterwarnings("ignore::RuntimeWarning")]


def _child_pytest(markexpr):
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    proc = subprocess.run([sys.executable, "-m", "pytest", __file__, "-q", "-p", "no:cacheprovider", "-m", markexpr],
                          env=env, capture_output=True, text=True, timeout=1800, cwd=ROOT)
    assert proc.returncode == 0, "CUDA simulator tests failed:\n" + proc.stdout[-8000:] + proc.stderr[-4000:]


if not IN_CHILD:
    def test_cuda_kernels_under_the_simulator():
        _child_pytest("not slow")

    @pytest.mark.slow
    def test_cuda_kernels_under_the_simulator_slow():
        _child_pytest("slow")

    def test_memory_pool_plugin_registers_and_recycles_without_a_gpu():
        """The EMM plugin's glue (its pointer objects under numba's device arrays, views keeping blocks alive,
        contiguous reshapes, the test that lets .grad take a buffer over), with the driver calls replaced:
        numba-cuda without the simulator, no GPU needed."""
        code = """
import gc
from numba import cuda
from jitgrad.kernels.cuda import memory as M
cuda.set_memory_manager(M.CachingMemoryManager)
driver_blocks, freed = [], []
def alloc(size):
    driver_blocks.append(0x100000 * (len(driver_blocks) + 1))
    return driver_blocks[-1]
class Plugin(M.CachingMemoryManager):
    _driver_alloc = staticmethod(alloc)
    _driver_free = staticmethod(freed.append)
class Context:
    pass
ctx = Context()
mm = Plugin(context=ctx)
p = mm.memalloc(1000)
first = p.device_ctypes_pointer.value
view = p.view(200)
del p; gc.collect()
assert mm.pool.allocated == 1024, mm.pool.stats()       # the view keeps the block
del view; gc.collect()
assert mm.pool.allocated == 0 and mm.pool.cached == 1024
q = mm.memalloc(900)                                    # same rounded size: the same block
assert q.device_ctypes_pointer.value == first and len(driver_blocks) == 1
big = mm.memalloc(3 << 20); del big; gc.collect()
mm.pool.empty_cache()
assert freed == [driver_blocks[1]] and mm.pool.reserved == 1024
import types
from jitgrad.kernels.cuda import _launch as L
asked = []
mm.get_memory_info = lambda: asked.append(1) or types.SimpleNamespace(total=1 << 30)
for _ in range(3):                                      # numba calls it at every lookup of the context
    mm.initialize()
assert len(asked) == 1 and L._POOL[0] == mm.memalloc    # the driver is asked once; arrays come from the pool
import numpy as np
from numba.cuda.cudadrv.devicearray import DeviceNDArray
from jitgrad.kernels.cuda import array as A
x = DeviceNDArray((4, 6), (24, 4), np.float32, gpu_data=mm.memalloc(96))
assert A.holds_its_memory_alone(x) and A.address(x) == x.gpu_data.device_pointer
y = A.reshape(x, (2, 12))                               # a contiguous reshape: the same block, no shadow array
assert y.shape == (2, 12) and y.strides == (48, 4) and A.address(y) == A.address(x)
assert not A.holds_its_memory_alone(x)                  # ... which y shares
del y
assert A.holds_its_memory_alone(x)
t = A.transpose(x, (1, 0))
assert not A.holds_its_memory_alone(t) and not A.holds_its_memory_alone(x)
del t
s = DeviceNDArray((3, 6), (24, 4), np.float32, gpu_data=x.gpu_data.view(24))  # as numba's x[1:]: a view of the block
assert A.address(s) == A.address(x) + 24 and not A.holds_its_memory_alone(s) and not A.holds_its_memory_alone(x)
allocated = mm.pool.allocated
del x; gc.collect()
assert mm.pool.allocated == allocated                   # the view keeps the block
del s; gc.collect()
assert mm.pool.allocated == allocated - 512
import itertools
for shape in [(), (1,), (5,), (3, 4), (1, 4), (4, 1), (2, 3, 4)]:
    for strides in itertools.product([0, 4, 8, 16, 48], repeat=len(shape)):  # the pool's arrays are numba's, made faster
        ref = DeviceNDArray(shape, strides, np.float32, gpu_data=M.PoolMemory(1 << 20, 1 << 20))
        x = M.DeviceArray(shape, strides, np.dtype(np.float32), gpu_data=ref.gpu_data)
        assert (x.is_c_contiguous(), x.is_f_contiguous(), x.flags, x.alloc_size, x._numba_type_, x.size, x.nbytes) == \
            (ref.is_c_contiguous(), ref.is_f_contiguous(), ref.flags, ref.alloc_size, ref._numba_type_, ref.size, ref.nbytes)
        assert x.__cuda_array_interface__ == ref.__cuda_array_interface__ and x.reshape(*x.shape).shape == x.shape
mm.reset()
assert mm.pool.allocated == 0 and mm.pool.reserved == 0 and L._POOL == []
print("ok")
"""
        env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
        proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stdout + proc.stderr

else:
    from numba import cuda

    from jitgrad.kernels import index as CI
    from jitgrad.kernels import pool as KP
    from jitgrad.kernels import reduce as CR
    from jitgrad.kernels import softmax as CS
    from jitgrad.kernels.cuda import _launch as L
    from jitgrad.kernels.cuda import elementwise as E
    from jitgrad.kernels.cuda import index as I
    from jitgrad.kernels.cuda import matmul as MM
    from jitgrad.kernels.cuda import memory as MEM
    from jitgrad.kernels.cuda import pool as PL
    from jitgrad.kernels.cuda import reduce as R
    from jitgrad.kernels.cuda.array import transpose

    @pytest.fixture(autouse=True, scope="module")
    def _fast_simulator():
        """The simulator hands each barrier over through a polling thread: switch threads sooner."""
        old = sys.getswitchinterval()
        sys.setswitchinterval(1e-4)
        yield
        sys.setswitchinterval(old)

    def dev(a):
        return cuda.to_device(np.array(a, order="C"))

    def host(d):
        return d.copy_to_host()

    def close(got, ref, dtype):
        assert got.dtype == ref.dtype and got.shape == ref.shape, (got.dtype, ref.dtype, got.shape, ref.shape)
        rtol = 2e-6 if np.dtype(dtype) == np.float32 else 1e-12
        np.testing.assert_allclose(got, ref, rtol=rtol, atol=rtol, equal_nan=True)

    # ------------------------------------------------------------------ elementwise
    @pytest.mark.parametrize("dtype", [np.float32, np.float64])
    # (the complex twins are CPU-only: CUDA refuses complex tensors before a kernel runs)
    @pytest.mark.parametrize("name", sorted(n for n in scalars.SCALARS if n not in scalars.COMPLEX.values()))
    def test_every_scalar_function_matches_the_cpu_loop(name, dtype, rng):
        dtype = np.int64 if name in INT_ONLY else dtype
        args = scalar_inputs(name, dtype, rng)
        out_dtype = np.dtype(bool) if name in BOOL_OUT else np.dtype(dtype)
        ref = C.run(name, out_dtype, *args)
        got = host(E.run(name, out_dtype, *[dev(a) if isinstance(a, np.ndarray) else a for a in args]))
        close(got, ref, dtype)

    def test_run_argument_forms(rng):
        x = rng.standard_normal((4, 6))
        dx = dev(x)
        # 0-d and one-element arrays stay on the device (read at 0), NumPy scalars are arguments
        close(host(E.run("mul", np.float64, dx, dev(np.array(2.5)))), x * 2.5, np.float64)
        close(host(E.run("sub", np.float64, dev(np.ones((1, 1))), dx)), 1 - x, np.float64)
        close(host(E.run("add", np.float64, dev(np.array(1.0)), np.float64(2))), np.array(3.0), np.float64)
        # strided views are read in place: a column slice, a transpose, a broadcast both ways
        close(host(E.run("mul", np.float64, dx[:, ::2], dx[:, 1::2])), x[:, ::2] * x[:, 1::2], np.float64)
        close(host(E.run("add", np.float64, transpose(dx, (1, 0)), dev(x[0]).reshape(6, 1))), x.T + x[0][:, None],
              np.float64)
        close(host(E.run("atan2", np.float64, dev(x[:, :1]), dev(x[0]))), np.arctan2(x[:, :1], x[0]), np.float64)
        y = rng.standard_normal((2, 3, 4, 5))
        close(host(E.run("maximum", np.float64, dev(y)[:, 1:, ::2, :], dev(y[0, 0, 0]))),
              np.maximum(y[:, 1:, ::2, :], y[0, 0, 0]), np.float64)

    def test_run_out_argument_and_empty_arrays(rng):
        x = rng.standard_normal((3, 5)).astype(np.float32)
        d = dev(x)
        assert E.run("add", np.float32, d, dev(x[0]), out=d) is d  # in place, out aliasing an input
        close(host(d), x + x[0], np.float32)
        filled = E.run("identity", np.float32, np.float32(7), out=cuda.device_array((2, 3), np.float32))
        close(host(filled), np.full((2, 3), 7, np.float32), np.float32)
        assert host(E.run("exp", np.float32, dev(np.ones((0, 4), np.float32)))).shape == (0, 4)
        with pytest.raises(ValueError, match="cannot hold the broadcast shape"):
            E.run("add", np.float32, d, d, out=cuda.device_array((5,), np.float32))

    def test_rounding_functions_round_half_to_even_and_keep_dtype():
        x = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 2.7, -2.7], np.float32)
        for name, ref in (("round", np.rint), ("floor", np.floor), ("ceil", np.ceil), ("trunc", np.trunc)):
            close(host(E.run(name, np.float32, dev(x))), ref(x), np.float32)

    # ------------------------------------------------------------------ reductions
    KINDS = ["sum", "prod", "amax", "amin", "argmax", "argmin", "logsumexp"]
    LAYOUTS = [((5, 9), (1,)), ((9, 5), (0,)), ((3, 7, 6), (1,)), ((4, 3, 5), (0, 2)), ((6, 7), (0, 1)), ((60,), (0,)),
               ((2, 75), (1,)), ((75, 2), (0,))]  # the last two: long enough rows for the unrolled loads

    def _reduce_input(kind, dtype, shape, rng):
        if kind == "prod":
            return rng.uniform(0.5, 1.5, shape).astype(dtype) if np.dtype(dtype).kind == "f" else \
                rng.integers(1, 3, shape).astype(dtype)
        if np.dtype(dtype) == np.bool_:
            return rng.random(shape) > 0.5
        return (rng.standard_normal(shape) * 4).astype(dtype)

    @pytest.mark.parametrize("layout", LAYOUTS, ids=str)
    @pytest.mark.parametrize("kind", KINDS)
    def test_reduce_matches_cpu(kind, layout, rng):
        shape, dims = layout
        for dtype in (np.float32, np.float64) + ((np.int32, np.bool_) if kind != "logsumexp" else ()):
            x = _reduce_input(kind, dtype, shape, rng)
            close(host(R.reduce(kind, dev(x), dims)), CR.reduce(kind, x, dims), dtype)

    def test_long_reduction_splits_across_blocks_and_merges(rng, monkeypatch):
        n = 4 * L.THREADS * L.REDUCE_MIN_PER_THREAD + 17  # long enough for 4 chunks of R
        x = rng.standard_normal(n)
        x[[17, n - 5]] = x.max() + 1  # a tie: argmax keeps the first
        grids, launch = [], L.launch

        def recording_launch(kernel, grid, block, *args):
            grids.append(grid)
            launch(kernel, grid, block, *args)
        monkeypatch.setattr(L, "launch", recording_launch)
        for kind in KINDS:
            grids.clear()
            close(host(R.reduce(kind, dev(x), (0,))), CR.reduce(kind, x, (0,)), np.float64)
            assert len(grids) == 2 and grids[0][1] > 1 and grids[1][1] == 1  # chunks of R, then their merge
        assert host(R.reduce("argmax", dev(x), (0,)))[()] == 17

    @pytest.mark.parametrize("threads", [None, 64])  # the simulator's 8 (part of a warp); two warps, via shared slots
    def test_rows_reduction_matches_numpy(threads, rng, monkeypatch):
        """B == 1 runs the rows template: R not a multiple of the block's threads, R below them, R = 1, more
        rows than the grid's blocks (a block strides over rows), one row split across blocks."""
        if threads:
            monkeypatch.setattr(R, "ROWS_THREADS", threads)
        tr = R.ROWS_THREADS
        grids, launch = [], L.launch

        def recording_launch(kernel, grid, block, *args):
            assert kernel.py_func.__name__.startswith("_rows_")
            grids.append(grid)
            launch(kernel, grid, block, *args)
        monkeypatch.setattr(L, "launch", recording_launch)
        numpy = {"sum": np.sum, "amax": np.max, "argmax": np.argmax, "logsumexp": np.logaddexp.reduce}
        split = 4 * tr * L.REDUCE_MIN_PER_THREAD + 3
        for shape in [(3, tr + 5), (2, tr // 2 + 3), (4, 1), (R.ROWS_GRID + 5, 3), (1, split)]:
            for dtype in (np.float32, np.float64) if threads is None else (np.float64,):
                x = np.round(rng.standard_normal(shape) * 2).astype(dtype)  # small integers: argmax ties
                for kind, ref in numpy.items():
                    grids.clear()
                    got = host(R.reduce(kind, dev(x), (1,)))
                    want = ref(x.astype(np.float64), axis=1)
                    if kind == "argmax":
                        np.testing.assert_array_equal(got, want)  # the first index of the maximum
                    else:
                        np.testing.assert_allclose(got, want, rtol=2e-6 if dtype == np.float32 else 1e-12)
                    assert shape[0] > 1 or (len(grids) == 2 and grids[0][1] > 1), grids  # chunks, then their merge

    def test_multinomial_draws_the_cpu_categories(rng):
        """The same variates give the same categories: rows sampled by one shared function with replacement
        (a zero weight never drawn), exponential races without."""
        from jitgrad.kernels import random as CRND
        from jitgrad.kernels.cuda import random as RND
        p = rng.random((5, 7))
        p[1, 3] = p[2, 6] = 0
        u, e = rng.random((5, 6)), rng.exponential(size=(5, 7))
        for replacement, draws, n in ((True, u, 6), (False, e, 4)):
            want = CRND.multinomial(p, draws, n, replacement)
            np.testing.assert_array_equal(host(RND.multinomial(dev(p), draws, n, replacement)), want)
        assert not (CRND.multinomial(p, u, 6, True)[1] == 3).any()

    def test_reduce_special_values(rng):
        x = rng.standard_normal((6, 5))
        x[1, 3] = np.nan
        x[2, :] = -np.inf
        x[3, 1] = np.inf
        x[4, 0] = x[4, 4] = x[4].max() + 1
        for kind in KINDS:
            for dims in ((1,), (0,)):
                close(host(R.reduce(kind, dev(x), dims)), CR.reduce(kind, x, dims), np.float64)

    def test_reduce_of_a_non_contiguous_view(rng):
        x = rng.standard_normal((5, 8))
        view = dev(x)[:, 1::2]
        for dims in ((0,), (1,), (0, 1)):
            close(host(R.reduce("sum", view, dims)), CR.reduce("sum", x[:, 1::2], dims), np.float64)
        close(host(R.reduce("amax", transpose(dev(x), (1, 0)), (1,))), x.max(0), np.float64)

    def test_reduce_over_an_empty_axis_gives_the_identity():
        x = np.ones((3, 0, 2))
        close(host(R.reduce("sum", dev(x), (1,))), np.zeros((3, 2)), np.float64)
        close(host(R.reduce("prod", dev(x), (1,))), np.ones((3, 2)), np.float64)

    @pytest.mark.parametrize("layout", [((5, 9), 1), ((12,), 0), ((3, 7, 6), 1), ((4, 3, 5), 0), ((2, 40), 1)], ids=str)
    def test_cumsum_matches_cpu(layout, rng):
        shape, dim = layout
        for dtype in (np.float32, np.float64, np.int64, np.bool_):
            x = _reduce_input("sum", dtype, shape, rng)
            close(host(R.scan("cumsum", dev(x), dim)), CR.scan("cumsum", x, dim), dtype)

    @pytest.mark.parametrize("kind", ["cumprod", "cummax", "cummin"])
    @pytest.mark.parametrize("layout", [((5, 9), 1), ((12,), 0), ((4, 3, 5), 0), ((2, 40), 1)], ids=str)
    def test_scans_match_cpu(kind, layout, rng):
        shape, dim = layout
        for dtype in (np.float32, np.float64, np.int32, np.int64, np.bool_):
            x = _reduce_input("prod" if kind == "cumprod" else "amax", dtype, shape, rng)
            if np.dtype(dtype).kind == "f":
                x.flat[len(x.flat) // 2] = np.nan  # a NaN propagates from where it is met on
                x.flat[1] = np.inf if kind == "cummax" else -np.inf
            close(host(R.scan(kind, dev(x), dim)), CR.scan(kind, x, dim), dtype)

    def test_max_pool_with_nans_matches_cpu(rng):
        x = rng.standard_normal((1, 2, 5, 5))
        x[0, 0, 1, 1] = x[0, 0, 1, 2] = x[0, 1, 4, 4] = np.nan  # a window with two NaNs, one at the border
        x[0, 1, 0, :2] = 9.0  # a tie
        geometry = ((3, 3), (2, 2), (1, 1), (1, 1), (3, 3))
        for got, ref in zip(PL.max_pool2d(dev(x), *geometry), KP.max_pool2d(x, *geometry)):
            close(host(got), ref, np.float64)

    def test_unknown_scan_kind_is_an_error():
        with pytest.raises(ValueError, match="unknown scan kind: cumfoo"):
            R.scan("cumfoo", dev(np.ones(3)), 0)

    @pytest.mark.parametrize("log", [False, True])
    @pytest.mark.parametrize("layout", [((5, 9), 1), ((9, 5), 0), ((3, 7, 6), 1), ((2, 40), 1), ((7,), 0)], ids=str)
    def test_softmax_and_its_vjp_match_cpu(layout, log, rng):
        shape, dim = layout
        for dtype in (np.float32, np.float64):
            x = (rng.standard_normal(shape) * 3).astype(dtype)
            g = rng.standard_normal(shape).astype(dtype)
            y = CS.softmax(x, dim, log)
            close(host(R.softmax(dev(x), dim, log)), y, dtype)
            close(host(R.softmax_vjp(dev(g), dev(y), dim, log)), CS.softmax_vjp(g, y, dim, log), dtype)

    def test_softmax_of_masked_rows(rng):
        x = rng.standard_normal((4, 6))
        x[0, :3] = -np.inf  # masked entries
        x[1, :] = -np.inf  # a fully masked row gives NaN, as on the CPU (and in PyTorch)
        for log in (False, True):
            close(host(R.softmax(dev(x), 1, log)), CS.softmax(x, 1, log), np.float64)

    # ------------------------------------------------------------------ matmul
    MATMUL_CASES = [((5, 7), (7, 3)), ((9, 10), (10, 11)), ((2, 5, 7), (2, 7, 3)), ((2, 5, 7), (7, 3)),
                    ((5, 7), (3, 7, 4)), ((1, 5, 7), (3, 7, 4)), ((7,), (7,)), ((7,), (7, 3)), ((5, 7), (7,)),
                    ((2, 1, 3, 4), (3, 4, 2)), ((0, 3), (3, 2)), ((3, 0), (0, 2))]

    @pytest.mark.parametrize("shapes", MATMUL_CASES, ids=str)
    def test_matmul_matches_numpy(shapes, rng):
        sa, sb = shapes
        for dtype in (np.float32, np.float64, np.int64):
            a = rng.integers(-3, 4, sa).astype(dtype)
            b = rng.integers(-3, 4, sb).astype(dtype)
            a = a + rng.random(sa).astype(dtype) if a.dtype.kind == "f" else a
            close(host(MM.matmul(dev(a), dev(b))), np.matmul(a, b), dtype)

    def test_matmul_reads_transposed_operands_in_place(rng):
        a = rng.standard_normal((7, 9)).astype(np.float32)
        b = rng.standard_normal((6, 7)).astype(np.float32)
        got = MM.matmul(transpose(dev(a), (1, 0)), transpose(dev(b), (1, 0)))
        np.testing.assert_allclose(host(got), a.T @ b.T, rtol=1e-5, atol=1e-5)

    def test_matmul_rejects_bad_operands():
        with pytest.raises(ValueError, match="core dimension"):
            MM.matmul(dev(np.ones((2, 3))), dev(np.ones((4, 2))))
        with pytest.raises(TypeError, match="same dtype"):
            MM.matmul(dev(np.ones((2, 3))), dev(np.ones((3, 2), np.float32)))

    # ------------------------------------------------------------------ index kernels
    INDEX_CASES = [  # (out shape, key, values shape)
        ((5, 3), (np.array([0, 2, 0, -1]),), (4, 3)), ((5, 3), (np.array([0, 2, 0, -1]),), (3,)),
        ((5,), (np.array([0, 2, 0, 4]),), (4,)), ((5, 3), (np.array([0, 2, 0]), np.array([1, 1, 1])), (3,)),
        ((5, 3), (slice(None), np.array([1, 1])), (5, 2)), ((5, 3), (np.arange(15).reshape(5, 3) % 2 == 0,), (8,)),
        ((4, 3, 2), (Ellipsis, np.array([0, 0]), None), (4, 3, 2, 1)), ((), (None,), (1,)), ((5, 3), (1,), (3,)),
        ((3, 4, 5), (slice(None), slice(None), np.array([4, 0, 4, -2])), (3, 4, 4)),
        ((3, 4, 5), (slice(None), np.array([1, 1, 3])), (3, 1))]

    @pytest.mark.parametrize("case", range(len(INDEX_CASES)))
    def test_index_add_matches_cpu(case, rng):
        shape, key, vshape = INDEX_CASES[case]
        for dtype in (np.float32, np.float64):
            v = rng.standard_normal(vshape).astype(dtype)
            ref = np.zeros(shape, dtype)
            CI.index_add(ref, key, v)
            out = dev(np.zeros(shape, dtype))
            I.index_add(out, key, dev(v))
            close(host(out), ref, dtype)

    def test_index_add_with_a_device_index_and_integer_counts():
        out = dev(np.zeros((4, 2), np.int64))
        I.index_add(out, (dev(np.array([3, 3, 1, -1])),), dev(np.ones((4, 2), np.int64)))
        assert host(out).tolist() == [[0, 0], [1, 1], [0, 0], [3, 3]]
        with pytest.raises(TypeError, match="supports float32"):
            I.index_add(dev(np.zeros(3, np.float16)), (np.array([0]),), dev(np.ones(1, np.float16)))

    SCATTER_CASES = [((4, 5), (3, 5), 0), ((4, 5), (4, 2), 1), ((3, 4, 5), (2, 4, 3), 1), ((6,), (4,), 0)]

    @pytest.mark.parametrize("case", SCATTER_CASES, ids=str)
    def test_scatter_add_matches_cpu(case, rng):
        shape, ishape, dim = case
        x = rng.standard_normal(shape).astype(np.float32)
        idx = rng.integers(0, shape[dim], ishape)
        src = rng.standard_normal(tuple(s + 1 for s in ishape)).astype(np.float32)  # larger than index
        ref = x.copy()
        CI.scatter_add(ref, dim, idx, src)
        out = dev(x)
        I.scatter_add(out, dim, dev(idx), dev(src))
        close(host(out), ref, np.float32)

    def test_one_hot_matches_cpu(rng):
        x = rng.integers(0, 4, 9)
        ref = np.zeros((9, 4), np.int64)
        CI.one_hot(x, ref)
        out = dev(np.zeros((9, 4), np.int64))
        I.one_hot(dev(x), out)
        assert np.array_equal(host(out), ref)

    # ------------------------------------------------------------------ memory pool bookkeeping
    class FakeDriver:
        def __init__(self, capacity=None):
            self.live, self.next, self.capacity, self.calls = {}, 1, capacity, 0

        def alloc(self, size):
            self.calls += 1
            if self.capacity is not None and sum(self.live.values()) + size > self.capacity:
                raise MemoryError("out of device memory")
            h, self.next = self.next, self.next + 1
            self.live[h] = size
            return h

        def free(self, h):
            del self.live[h]

    def test_pool_reuses_blocks_of_the_same_rounded_size():
        drv = FakeDriver()
        pool = MEM.BlockPool(drv.alloc, drv.free)
        h, size = pool.acquire(1000)
        assert size == 1024 and pool.allocated == 1024 and drv.calls == 1
        pool.release(h, size, pool.generation)
        h2, _ = pool.acquire(700)  # rounds to 1024 too
        assert h2 == h and drv.calls == 1 and pool.reuses == 1
        h3, size3 = pool.acquire(3 << 20 | 5)  # large: rounds to 1/8 of the next power of two
        assert size3 == (3 << 20) + (1 << 18) and drv.calls == 2
        assert pool.stats()["reserved_bytes"] == 1024 + size3 and pool.cached == 0

    def test_pool_rounding_is_tight():
        for n in (1, 512, 513, 1 << 20, (1 << 20) + 1, 64 << 20, (64 << 20) + 1, 10 ** 9):
            b = MEM.BlockPool.block_size(n)
            assert n <= b and (b - n < 512 or b <= n * 1.125)

    def test_pool_empty_cache_frees_only_free_blocks():
        drv = FakeDriver()
        pool = MEM.BlockPool(drv.alloc, drv.free)
        a, sa = pool.acquire(100)
        b, sb = pool.acquire(5000)
        pool.release(b, sb, pool.generation)
        pool.empty_cache()
        assert list(drv.live) == [a] and pool.reserved == sa and pool.allocated == sa

    def test_pool_frees_its_cache_and_retries_when_the_driver_is_out_of_memory():
        drv = FakeDriver(capacity=4096)
        pool = MEM.BlockPool(drv.alloc, drv.free)
        a, sa = pool.acquire(3000)
        pool.release(a, sa, pool.generation)  # 3072 bytes cached
        b, sb = pool.acquire(2048)  # does not fit next to the cached block: cache emptied, retried
        assert sb == 2048 and list(drv.live) == [b] and pool.reserved == 2048
        with pytest.raises(MemoryError):
            pool.acquire(8192)

    def test_pool_forgets_blocks_of_a_reset_context():
        drv = FakeDriver()
        pool = MEM.BlockPool(drv.alloc, drv.free)
        h, size = pool.acquire(100)
        gen = pool.generation
        pool.forget()
        pool.release(h, size, gen)  # a late finalizer of the old context: ignored
        assert pool.allocated == 0 and pool.cached == 0

    def test_memory_statistics_under_the_simulator_are_zero():
        if not L.SIM:
            pytest.skip("a real GPU has real statistics (checked by the benchmark script)")
        MEM.install()
        assert MEM.memory_allocated() == 0 and MEM.memory_reserved() == 0
        MEM.empty_cache()

    # ------------------------------------------------------------------ longer sweeps
    @pytest.mark.slow
    @pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.bool_])
    def test_reduce_sweep_over_shapes(dtype, rng):
        for shape in [(1,), (17,), (2, 33), (33, 2), (3, 4, 5), (2, 3, 4, 5)]:
            for r in range(1, len(shape) + 1):
                for dims in itertools.combinations(range(len(shape)), r):
                    for kind in KINDS:
                        if kind == "logsumexp" and np.dtype(dtype).kind != "f":
                            continue
                        x = _reduce_input(kind, dtype, shape, rng)
                        close(host(R.reduce(kind, dev(x), dims)), CR.reduce(kind, x, dims), dtype)

    @pytest.mark.slow
    @pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
    def test_matmul_sweep_over_tile_edges(dtype, rng):
        tx, ty, rm, rn, bk = L.MATMUL_TILE
        for m in (1, ty * rm - 1, ty * rm + 1):
            for n in (1, tx * rn, tx * rn + 3):
                for k in (1, bk, 2 * bk + 1):
                    a = rng.integers(-3, 4, (2, m, k)).astype(dtype)
                    b = rng.integers(-3, 4, (k, n)).astype(dtype)
                    close(host(MM.matmul(dev(a), dev(b))), np.matmul(a, b), dtype)
