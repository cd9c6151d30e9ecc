"""Discrete Fourier transforms on CUDA: not there yet. Each transform of kernels/fft.py raises a NotImplementedError
that names what it needs (cuFFT, through CuPy's or nvmath-python's binding)."""
name = "cuda"

FUNCTIONS = ("c2c", "r2c", "c2r")


def _missing(fname):
    def fn(*args, **kwargs):
        raise NotImplementedError("jitgrad: fft %s is not implemented on CUDA: it needs cuFFT (CuPy's binding); move "
                                  "the tensors to the CPU for it" % fname)
    fn.__name__ = fname
    return fn


globals().update({f: _missing(f) for f in FUNCTIONS})
