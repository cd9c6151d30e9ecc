"""Collectives on picklable Python objects (metrics, configurations): pickled, sent as bytes over MPI.

Like PyTorch's ``*_object`` collectives they unpickle what other ranks send, so use them only
between processes of one trusted job. Tensors travel through the tensor collectives instead.
"""
import pickle

import numpy as np

from . import _mpi
from .process_group import resolve, warn_not_in_group


def _bytes(obj):
    return np.frombuffer(pickle.dumps(obj), dtype=np.uint8)


def _gather_bytes(pg, data, what):
    """Every rank's byte array, on every rank (sizes first, then the bytes), with the group's timeout."""
    sizes = np.empty(pg.size(), dtype=np.int64)
    _mpi.wait([pg.comm.Iallgather(np.array([data.size], dtype=np.int64), sizes)], pg.timeout, what)
    out = np.empty(int(sizes.sum()), dtype=np.uint8)
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    _mpi.wait([pg.comm.Iallgatherv(data, [out, sizes, offsets, _mpi.mpi().BYTE])], pg.timeout, what)
    return [out[o:o + s] for o, s in zip(offsets, sizes)]


def all_gather_object(object_list, obj, group=None):
    """``object_list[r]`` becomes rank r's ``obj`` on every rank (``object_list`` has world_size entries)."""
    pg = resolve(group)
    if pg is None:
        return warn_not_in_group("all_gather_object")
    if len(object_list) != pg.size():
        raise ValueError("object_list must have one entry per rank of the group (%d), got %d"
                         % (pg.size(), len(object_list)))
    for r, data in enumerate(_gather_bytes(pg, _bytes(obj), "all_gather_object")):
        object_list[r] = pickle.loads(data.tobytes())


def broadcast_object_list(object_list, src=None, group=None, device=None):
    """Rank ``src``'s ``object_list`` entries (0 when None) replace every rank's, in place."""
    pg = resolve(group)
    if pg is None:
        return warn_not_in_group("broadcast_object_list")
    root = pg.group_rank(0 if src is None else src)
    data = _bytes(list(object_list)) if pg.rank() == root else np.empty(0, dtype=np.uint8)
    size = np.array([data.size], dtype=np.int64)
    _mpi.wait([pg.comm.Ibcast(size, root=root)], pg.timeout, "broadcast_object_list")
    if pg.rank() != root:
        data = np.empty(int(size[0]), dtype=np.uint8)
    _mpi.wait([pg.comm.Ibcast(data, root=root)], pg.timeout, "broadcast_object_list")
    if pg.rank() != root:
        received = pickle.loads(data.tobytes())
        if len(received) != len(object_list):
            raise ValueError("broadcast_object_list: rank %d sent %d objects, this rank's list has %d"
                             % (src or 0, len(received), len(object_list)))
        object_list[:] = received


def gather_object(obj, object_gather_list=None, dst=None, group=None):
    """Every rank's ``obj`` into ``object_gather_list`` on rank ``dst`` (0 when None)."""
    pg = resolve(group)
    if pg is None:
        return warn_not_in_group("gather_object")
    root = pg.group_rank(0 if dst is None else dst)
    if pg.rank() == root and (object_gather_list is None or len(object_gather_list) != pg.size()):
        raise ValueError("Argument ``object_gather_list`` must be specified on destination rank, with one entry per "
                         "rank of the group")
    gathered = _gather_bytes(pg, _bytes(obj), "gather_object")
    if pg.rank() == root:
        for r, data in enumerate(gathered):
            object_gather_list[r] = pickle.loads(data.tobytes())
