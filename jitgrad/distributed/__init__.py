"""jitgrad.distributed: torch.distributed's API over MPI (mpi4py): process groups and collectives.

    mpiexec -n 2 python train.py        # or across machines: mpiexec -f hostfile -n 8 python train.py

    import jitgrad.distributed as dist
    dist.init_process_group("mpi")      # rank and world size come from MPI
    dist.all_reduce(t, op=dist.ReduceOp.SUM)

Collectives work in place on the tensors' NumPy buffers (no copy, no pickling). A collective that
cannot complete (a rank died, raised, or runs another collective) aborts the whole job after the
group's timeout, and an uncaught exception on any rank aborts it at once, instead of a hang.
"""
from ._mpi import find_mpiexec  # noqa: F401
from .collectives import (ReduceOp, Work, all_gather, all_gather_into_tensor, all_reduce, barrier,  # noqa: F401
                          broadcast, gather, irecv, isend, recv, reduce, reduce_scatter, reduce_scatter_tensor,
                          scatter, send)
from .objects import all_gather_object, broadcast_object_list, gather_object  # noqa: F401
from .process_group import (Backend, GroupMember, ProcessGroup, default_pg_timeout, destroy_process_group,  # noqa: F401
                            get_backend, get_global_rank, get_group_rank, get_process_group_ranks, get_rank,
                            get_world_size, group, init_process_group, is_available, is_initialized,
                            is_mpi_available, new_group)
