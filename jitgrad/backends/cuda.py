"""jitgrad.backends.cuda: PyTorch's CUDA matmul flags (jitgrad's GEMMs have no TF32 or reduced-precision path)."""
from .. import _device


class _MatmulFlags:
    """``backends.cuda.matmul``: known flags only; an unknown name is PyTorch's AttributeError."""
    _DEFAULTS = {"allow_tf32": False, "allow_fp16_reduced_precision_reduction": True,
                 "allow_bf16_reduced_precision_reduction": True, "fp32_precision": "none"}

    def __init__(self):
        object.__setattr__(self, "_values", dict(self._DEFAULTS))

    def __getattr__(self, name):
        values = object.__getattribute__(self, "_values")
        if name in values:
            return values[name]
        raise AttributeError("Unknown attribute " + name)

    def __setattr__(self, name, value):
        if name not in self._values:
            raise AttributeError("Unknown attribute " + name)
        self._values[name] = value


matmul = _MatmulFlags()


def is_built():
    """Whether jitgrad can run on CUDA here (numba-cuda installed and a GPU or the simulator found)."""
    return _device.cuda_available()
