"""jitgrad.backends.mkl: whether PyTorch was built with MKL (jitgrad uses the BLAS NumPy links)."""


def is_available():
    return False
