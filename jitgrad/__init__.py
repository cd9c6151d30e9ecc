"""jitgrad: reverse-mode autograd with PyTorch's semantics, on numba kernels.

    import jitgrad as jg
    x = jg.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    (x.exp() * 3).mean().backward()
    x.grad

Imports go one way: a module imports only the modules listed before it here.

1. ``kernels/`` (``jitgrad.kernels``): numba kernels on arrays; nothing about tensors.
2. ``_dtype``, ``_memory_format``, ``_layout``, ``_grad_mode``, ``_device``, ``_jit_stats``: dtypes, memory
   formats, layouts, grad modes, devices and their backends.
3. ``_anomaly``, ``_graph``: anomaly mode's machinery; Node, AccumulateGrad, edges, hooks, ``.grad``
   accumulation.
4. ``_repr``, ``_tensor``: Tensor and its printing.
5. ``_saved``, ``_index_key``, ``_generator``, ``_factories``, ``_legacy``: tensors saved for backward, index
   keys, random generators, tensor factories, the legacy constructors (``Tensor(data)``, ``FloatTensor``...).
6. ``_op_node``, ``_op``, ``_inplace``: the graph node of a table op (how it is recorded and runs its
   backward), the op table's entry type and dispatch; in-place ops and ``__setitem__``.
7. ``ops/``: the op table; ``ops/__init__`` installs its methods and operators on Tensor.
8. ``autograd/``: the engine (backward, grad), Function, functional, gradcheck, and the public
   ``graph`` and ``anomaly`` modules.
9. ``optim/``, ``amp/`` (autocast regions, GradScaler), ``cuda/``, ``cpu/``, ``random``, ``viz``, ``nn/`` (except
   ``nn/parallel/``), ``serialization``, ``precompile``, ``accelerator``, ``backends/``, ``sparse/`` (sparse
   tensors; it sets dispatch's sparse branch when it loads).
10. ``distributed/``: process groups and collectives over MPI (mpi4py, imported when a group is
    created); above nn and optim, though it needs only Tensor.
11. ``nn/parallel/`` (DistributedDataParallel) and ``utils/`` (checkpoint; data, whose
    DistributedSampler asks distributed for the rank and world size).
12. ``compiler/``: ``jitgrad.compile`` (capture through dispatch's hook, fusion, codegen); nothing
    imports it but this module.
13. This module: the public namespace. It attaches the Tensor methods that need a higher layer
    (``backward``, the ops behind ``to``, the ``new_*`` factories).

Tensor and the graph sit below the op table's entries because the entries and dispatch take and
make tensors; the kernels stay below both. Nothing is imported inside a function except what needs
an optional package (the CUDA kernels need numba-cuda; graphviz; mpi4py), when it is first needed.
"""
import os as _os

# After each GEMM, NumPy's OpenBLAS threads spin for 2^28 cycles (about 0.1 s) before they sleep, so in a
# training step they hold the cores that the kernels between its GEMMs need (a 784-512-256-10 MLP step on two
# cores spent 0.2 ms more outside its GEMMs, up to 1 ms more in slow spells of the machine). OpenBLAS reads
# this when NumPy loads it: it applies where jitgrad is imported before NumPy, and in child processes. A value
# the user set is kept.
_os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

from . import _dtype  # noqa: E402
from ._device import Device, device, get_default_device, set_default_device  # noqa: F401
from ._memory_format import (channels_last, channels_last_3d, contiguous_format, memory_format,  # noqa: F401
                             preserve_format)
from ._dtype import (bool_ as bool, bfloat16, dtype, float16, float32, float64, get_default_dtype, int32,  # noqa: F401
                     int64, uint8)
from ._dtype import complex64, complex128  # noqa: F401,E402
from ._generator import Generator  # noqa: F401
from ._factories import *  # noqa: F401,F403
from ._factories import METHODS as _FACTORY_METHODS
from ._jit_stats import jit_stats  # noqa: F401
from ._grad_mode import (enable_grad, inference_mode, is_grad_enabled, is_inference_mode_enabled,  # noqa: F401
                         no_grad, set_grad_enabled)
from ._op import _result_dtypes
from ._tensor import Size, Tensor  # noqa: F401
from . import ops as _ops
from .ops import FUNCTIONS as _FUNCTIONS
from . import autograd  # noqa: F401
from . import linalg  # noqa: F401,E402  (torch.linalg)
from . import fft  # noqa: F401,E402  (torch.fft)
from .autograd.anomaly import is_anomaly_check_nan_enabled, is_anomaly_enabled  # noqa: F401
from .autograd.engine import tensor_backward as _tensor_backward

from ._legacy import TYPES as _LEGACY_TYPES, tensor_new as _tensor_new

# Tensor's methods from the layers above it (ops/__init__ has installed the op table's)
Tensor.backward = _tensor_backward
Tensor.__new__ = staticmethod(_tensor_new)  # jitgrad.Tensor(data) / Tensor(*sizes), as torch.Tensor
Tensor._cast, Tensor._move = _ops.cast, _ops.move
for _name, _fn in _FACTORY_METHODS.items():
    setattr(Tensor, _name, _fn)

from . import nn  # noqa: F401,E402
from . import optim  # noqa: F401,E402
from . import amp  # noqa: F401,E402
from .amp.autocast_mode import (autocast, autocast_decrement_nesting, autocast_increment_nesting,  # noqa: F401,E402
                                clear_autocast_cache, get_autocast_cpu_dtype, get_autocast_dtype,
                                get_autocast_gpu_dtype, is_autocast_cache_enabled, is_autocast_cpu_enabled,
                                is_autocast_enabled, set_autocast_cache_enabled, set_autocast_dtype,
                                set_autocast_enabled)
from . import cuda  # noqa: F401,E402
from . import random  # noqa: F401,E402
from . import special  # noqa: F401,E402
from . import cpu  # noqa: F401,E402
from .cpu import get_num_threads, set_num_threads  # noqa: F401,E402
from .serialization import load, save  # noqa: F401,E402
from . import testing  # noqa: F401,E402
from math import e, inf, nan, pi  # noqa: F401,E402  (torch.e, torch.inf, torch.nan, torch.pi)
from . import accelerator, backends  # noqa: F401,E402
from . import distributed  # noqa: F401,E402
from .nn import parallel as _parallel  # noqa: F401,E402  (jitgrad.nn.parallel, above distributed)
from . import utils  # noqa: F401,E402  (utils.data's DistributedSampler is above distributed)
from . import func  # noqa: F401,E402  (function transforms: vmap, grad, jacrev...; above autograd and nn)
from .func import vmap  # noqa: F401,E402
from . import distributions  # noqa: F401,E402  (above nn: its losses and one_hot)
from . import sparse  # noqa: F401,E402  (torch.sparse: above autograd, whose Functions its ops are)
from .sparse import sparse_coo_tensor, sparse_csc_tensor, sparse_csr_tensor, spmm  # noqa: F401,E402
from ._layout import layout, sparse_coo, sparse_csc, sparse_csr, strided  # noqa: F401,E402
from . import compiler  # noqa: F401,E402
from .compiler import compile  # noqa: F401,E402
from . import profiler  # noqa: F401,E402  (torch.profiler; above cuda)
from . import onnx  # noqa: F401,E402  (torch.onnx; above compiler, whose capture it exports)

float = float32
double = float64
cfloat, cdouble = complex64, complex128
half = float16
long = int64
int = int32

globals().update(_FUNCTIONS)
globals().update(_LEGACY_TYPES)  # FloatTensor, LongTensor, DoubleTensor, IntTensor, BoolTensor, ByteTensor

__version__ = "0.1.0"


def set_default_dtype(d):
    """Set the default floating-point dtype (float32 or float64)."""
    _dtype.set_default_dtype(d)
    for op in _ops.OPS.values():  # cached result dtypes of ops may involve the default float dtype
        op._dtypes.clear()


def is_tensor(obj):
    return isinstance(obj, Tensor)


def numel(input):
    return input.numel()


def result_type(tensor1, tensor2):
    return _result_dtypes("promote", (tensor1, tensor2))[1]


def promote_types(type1, type2):
    return _dtype.promote_types(type1, type2)


def is_floating_point(input):
    return input.dtype.is_floating_point


def is_complex(input):
    return input.dtype.is_complex
