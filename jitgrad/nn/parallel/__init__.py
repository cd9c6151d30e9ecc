"""jitgrad.nn.parallel: DistributedDataParallel, data-parallel training over jitgrad.distributed (MPI), and
DataParallel / data_parallel on one device."""
from ... import nn as _nn
from .data_parallel import DataParallel, data_parallel  # noqa: F401
from .distributed import DistributedDataParallel  # noqa: F401

# jitgrad.nn.DataParallel (nn.parallel is above cuda, which DataParallel asks for its devices; nn is below it)
_nn.DataParallel = DataParallel
