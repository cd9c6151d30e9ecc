"""jitgrad.backends: the backend flags PyTorch programs read or set (``backends.cudnn.benchmark``,
``backends.cuda.matmul.allow_tf32``, ``backends.mps.is_available()``, ...).

jitgrad's kernels are its own numba kernels and BLAS through NumPy: no cuDNN, MPS, MKL-DNN or TF32
path exists, so the flags hold what programs set (with PyTorch's defaults) and change nothing.
"""
from . import cpu, cuda, cudnn, mkl, mkldnn, mps, openmp  # noqa: F401
