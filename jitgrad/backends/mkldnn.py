"""jitgrad.backends.mkldnn: PyTorch's oneDNN flags (jitgrad's CPU kernels are numba and BLAS: kept, not used)."""
enabled = True
deterministic = False


def is_available():
    return False
