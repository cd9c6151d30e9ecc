"""For the PTX sweeps of the test modules: kernels.cuda's launches recorded instead of run."""
import types


def record_launches():
    """Swap kernels.cuda's launch for a recorder; returns ({(kernel name, argument types): kernel},
    the _launch module). Without a device, device functions compile for compute capability 9.0."""
    from numba import cuda, typeof
    if not cuda.is_available():
        import numba.cuda.dispatcher as dispatcher
        dispatcher.get_current_device = lambda: types.SimpleNamespace(compute_capability=(9, 0))
    from jitgrad.kernels.cuda import _launch as L

    launched = {}
    L.launch = lambda kernel, grid, block, *args: launched.setdefault(
        (kernel.py_func.__name__, tuple(typeof(a) for a in args)), kernel)
    L.MAX_BLOCKS = 132 * L.BLOCKS_PER_SM
    return launched, L


def compile_recorded(launched):
    """Compile each recorded launch to PTX for compute capability 9.0; returns their (name, argument types)."""
    from numba import cuda
    for (name, sig), kernel in launched.items():
        cuda.compile_ptx(kernel.py_func, sig, cc=(9, 0))
    return list(launched)
