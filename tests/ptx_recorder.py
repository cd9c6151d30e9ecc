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
