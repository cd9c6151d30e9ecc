"""jitgrad.nn.parallel: DistributedDataParallel, data-parallel training over jitgrad.distributed (MPI)."""
from .distributed import DistributedDataParallel  # noqa: F401
