"""jitgrad.backends.openmp: whether parallel CPU kernels are available (numba's parallel loops)."""


def is_available():
    return True
