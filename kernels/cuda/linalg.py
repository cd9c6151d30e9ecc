"""Dense linear algebra on CUDA: not there yet. Every function of kernels/linalg.py raises a NotImplementedError
that names it (cuSOLVER, through CuPy's binding, is what it needs)."""
from .. import linalg as _cpu

name = "cuda"
DRIVERS = _cpu.DRIVERS

FUNCTIONS = ("lu_factor", "lu_solve", "solve", "inv", "small_solve", "det", "slogdet", "cholesky", "solve_triangular",
             "eigh", "eig", "svd", "geqrf", "householder_product", "ormqr", "lstsq", "qr",
             "cholesky_solve", "cholesky_grad", "small_inv_grad", "small_solve_grad", "small_det_grad")


def _missing(fname):
    def fn(*args, **kwargs):
        raise NotImplementedError("jitgrad: linalg %s is not implemented on CUDA: it needs cuSOLVER (CuPy's binding); "
                                  "move the tensors to the CPU for it" % fname)
    fn.__name__ = fname
    return fn


globals().update({f: _missing(f) for f in FUNCTIONS})
