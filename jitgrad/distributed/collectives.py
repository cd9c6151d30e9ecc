"""Collectives and point-to-point messages on tensors, over MPI, in place on the tensors' NumPy buffers.

Each call passes the tensors' arrays to MPI's non-blocking operation (zero copy: no pickling),
then waits with the group's timeout (``async_op=True`` hands back the Work instead). Before a
collective, the ranks exchange a short fingerprint (which collective, dtype, shape, root, op) so
that a mismatch across ranks is an error on every rank instead of a hang or garbage.
"""
import enum
import operator

import numpy as np

from .. import _dtype as D
from .._tensor import Tensor
from . import _mpi
from .process_group import resolve, warn_not_in_group


class ReduceOp:
    """How all_reduce, reduce and reduce_scatter combine the ranks' tensors."""

    class RedOpType(enum.IntEnum):
        SUM = 0
        AVG = 1
        PRODUCT = 2
        MIN = 3
        MAX = 4
        BAND = 5
        BOR = 6
        BXOR = 7

    SUM, AVG, PRODUCT, MIN, MAX, BAND, BOR, BXOR = RedOpType


class Work:
    """The handle of an operation started with ``async_op=True``: ``wait()`` completes it (and
    applies what follows the MPI operation: AVG's division, copies into output lists)."""

    def __init__(self, pg, what, requests, finish=None, statuses=None):
        self._pg, self._what, self._requests, self._finish = pg, what, requests, finish
        self._statuses = statuses
        self._done = False

    def _complete(self):
        self._done = True
        if self._finish is not None:
            self._finish()
            self._finish = None

    def wait(self, timeout=None):
        """Block until the operation has completed (aborting the job past the group's timeout)."""
        if not self._done:
            _mpi.wait(self._requests, self._pg.timeout if timeout is None else _seconds(timeout), self._what,
                      self._statuses)
            self._complete()
        return True

    def is_completed(self):
        """Whether the operation has completed (without blocking)."""
        if not self._done and _mpi.mpi().Request.Testall(self._requests, self._statuses):
            self._complete()
        return self._done

    def is_success(self):
        return self.is_completed()

    def __repr__(self):
        return "<jitgrad.distributed.Work %s %s>" % (self._what, "completed" if self._done else "pending")


def _seconds(timeout):
    return timeout.total_seconds() if hasattr(timeout, "total_seconds") else float(timeout)


def _run(pg, what, requests, finish, async_op, statuses=None):
    work = Work(pg, what, requests, finish, statuses)
    if async_op:
        return work
    work.wait()
    return None


# ------------------------------------------------------------------ tensors as MPI buffers
def _array(tensor, name="tensor", write=True):
    """The flat array of ``tensor`` that MPI reads or writes (a view: no copy)."""
    if not isinstance(tensor, Tensor):
        raise TypeError("Invalid function argument. Expected parameter `%s` of type jitgrad.Tensor\n but got %s "
                        "instead." % (name, type(tensor)))
    d = tensor._data
    if d.__class__ is not np.ndarray:
        raise RuntimeError("CUDA tensor detected and the MPI used doesn't have CUDA-aware MPI support")
    if not d.flags.c_contiguous:
        raise RuntimeError("input tensor has to be contiguous")
    if write and not d.flags.writeable:
        raise RuntimeError("%s: the tensor's memory is read-only (a NumPy array that is not writeable)" % name)
    return d.reshape(-1)


def _written(*tensors):
    """Bump the version counters of tensors a collective wrote into (as any in-place op does)."""
    for t in tensors:
        t._vc[0] += 1


def _tensor_list(tensors, name, like, size):
    if not isinstance(tensors, (list, tuple)) or not all(isinstance(t, Tensor) for t in tensors):
        raise TypeError("Invalid function argument. Expected parameter `%s` of type List[jitgrad.Tensor]." % name)
    if len(tensors) != size:
        raise ValueError("%s must have one tensor per rank of the group (%d), got %d" % (name, size, len(tensors)))
    for t in tensors:
        _array(t, name)
        if t.dtype is not like.dtype or t.numel() != like.numel():
            raise ValueError("%s: every tensor must have the dtype and number of elements of the input (%s, %d), got "
                             "%s, %d" % (name, like.dtype, like.numel(), t.dtype, t.numel()))
    return tensors


def _mpi_op(op, dtype):
    """The MPI operation for ``op`` on ``dtype``: bool reduces logically (SUM and MAX are or, PRODUCT
    and MIN are and), the bitwise ops need integers."""
    MPI = _mpi.mpi()
    op = ReduceOp.RedOpType(op)
    if dtype is D.bool_:
        if op is ReduceOp.AVG:
            raise ValueError("Cannot use ReduceOp.AVG with bool tensors")
        return {ReduceOp.SUM: MPI.LOR, ReduceOp.MAX: MPI.LOR, ReduceOp.BOR: MPI.LOR, ReduceOp.PRODUCT: MPI.LAND,
                ReduceOp.MIN: MPI.LAND, ReduceOp.BAND: MPI.LAND, ReduceOp.BXOR: MPI.LXOR}[op]
    if op in (ReduceOp.BAND, ReduceOp.BOR, ReduceOp.BXOR) and dtype.is_floating_point:
        raise ValueError("Cannot use ReduceOp.%s with floating-point tensors (%s)" % (op.name, dtype))
    return {ReduceOp.SUM: MPI.SUM, ReduceOp.AVG: MPI.SUM, ReduceOp.PRODUCT: MPI.PROD, ReduceOp.MIN: MPI.MIN,
            ReduceOp.MAX: MPI.MAX, ReduceOp.BAND: MPI.BAND, ReduceOp.BOR: MPI.BOR, ReduceOp.BXOR: MPI.BXOR}[op]


def _averaged(arr, op, size):
    """The division that turns AVG's sum into the mean (integers: truncated toward zero, like C)."""
    if op != ReduceOp.AVG:
        return None

    def finish():
        if arr.dtype.kind == "f":
            np.divide(arr, size, out=arr)
        else:
            np.copyto(arr, np.sign(arr) * (np.abs(arr) // size))
    return finish


# ------------------------------------------------------------------ cross-rank checks
_KINDS = ("all_reduce", "broadcast", "reduce", "all_gather", "gather", "scatter", "reduce_scatter", "barrier")
_MAX_DIMS = 6


def _fingerprint(kind, tensor, root, op, other):
    row = np.full(6 + _MAX_DIMS, -1, dtype=np.int64)
    row[0], row[3], row[4], row[5] = _KINDS.index(kind), root, -1 if op is None else int(op), other
    if tensor is not None:
        row[1], row[2] = tensor._data.dtype.num, tensor._data.size
        shape = tensor._data.shape
        if len(shape) <= _MAX_DIMS:
            row[6:6 + len(shape)] = shape
    return row


def _describe(row):
    kind = _KINDS[row[0]] if 0 <= row[0] < len(_KINDS) else "unknown collective"
    parts = []
    if row[1] >= 0:
        name = _dtype_name(int(row[1]))
        shape = [int(s) for s in row[6:] if s >= 0]
        parts.append("shape=%s, dtype=jitgrad.%s" % (shape, name) if shape or row[2] == 1
                     else "numel=%d, dtype=jitgrad.%s" % (row[2], name))
    if row[3] >= 0:
        parts.append("root=%d" % row[3])
    if row[4] >= 0:
        parts.append("op=%s" % ReduceOp.RedOpType(int(row[4])).name)
    return "%s(%s)" % (kind, ", ".join(parts))


def _dtype_name(num):
    for d in D.ALL:
        if d.np.num == num:
            return d.name
    return "unknown"


def _check(pg, kind, tensor=None, root=-1, op=None, other=-1):
    """Compare what each rank is about to run; raise the same RuntimeError on every rank if they differ."""
    row = _fingerprint(kind, tensor, root, op, other)
    rows = np.empty((pg.size(), row.size), dtype=np.int64)
    _mpi.wait([pg.comm.Iallgather(row, rows)], pg.timeout, kind)
    bad = np.flatnonzero((rows != rows[0]).any(axis=1))
    if bad.size:
        r = int(bad[0])
        raise RuntimeError("Detected mismatch between collectives on ranks. Rank %d is running collective: %s, but "
                           "Rank %d is running collective: %s." % (0, _describe(rows[0]), r, _describe(rows[r])))


def _root(pg, rank, name):
    """The group rank of global rank ``rank`` (src or dst of a rooted collective)."""
    try:
        rank = operator.index(rank)
    except TypeError:
        raise TypeError("%s must be an int rank, got %r" % (name, rank)) from None
    return pg.group_rank(rank)


# ------------------------------------------------------------------ collectives
def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduce ``tensor`` over all ranks of ``group``, in place on every rank."""
    pg = resolve(group)
    if pg is None:
        return warn_not_in_group("all_reduce")
    arr = _array(tensor)
    mop = _mpi_op(op, tensor.dtype)
    _check(pg, "all_reduce", tensor, op=op)
    average = _averaged(arr, op, pg.size())

    def finish():
        if average is not None:
            average()
        _written(tensor)
    return _run(pg, "all_reduce", [pg.comm.Iallreduce(_mpi.mpi().IN_PLACE, arr, op=mop)], finish, async_op)


def broadcast(tensor, src=None, group=None, async_op=False):
    """Copy ``tensor`` of rank ``src`` (a global rank; 0 when None) into ``tensor`` on every rank."""
    pg = resolve(group)
    if pg is None:
        return warn_not_in_group("broadcast")
    root = _root(pg, 0 if src is None else src, "src")
    arr = _array(tensor)
    _check(pg, "broadcast", tensor, root=root)
    return _run(pg, "broadcast", [pg.comm.Ibcast(arr, root=root)], lambda: _written(tensor), async_op)


def reduce(tensor, dst=None, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduce ``tensor`` over all ranks into ``tensor`` on rank ``dst`` (0 when None)."""
    pg = resolve(group)
    if pg is None:
        return warn_not_in_group("reduce")
    root = _root(pg, 0 if dst is None else dst, "dst")
    arr = _array(tensor)
    mop = _mpi_op(op, tensor.dtype)
    _check(pg, "reduce", tensor, root=root, op=op)
    MPI = _mpi.mpi()
    if pg.rank() == root:
        req = pg.comm.Ireduce(MPI.IN_PLACE, arr, op=mop, root=root)
        average = _averaged(arr, op, pg.size())

        def finish():
            if average is not None:
                average()
            _written(tensor)
    else:
        req, finish = pg.comm.Ireduce(arr, None, op=mop, root=root), None
    return _run(pg, "reduce", [req], finish, async_op)


def all_gather(tensor_list, tensor, group=None, async_op=False):
    """Every rank's ``tensor`` into ``tensor_list[rank]`` on every rank."""
    pg = resolve(group)
    if pg is None:
        return warn_not_in_group("all_gather")
    arr = _array(tensor, write=False)
    _tensor_list(tensor_list, "tensor_list", tensor, pg.size())
    _check(pg, "all_gather", tensor)
    out = np.empty((pg.size(), arr.size), dtype=arr.dtype)

    def finish():
        for t, row in zip(tensor_list, out):
            np.copyto(t._data.reshape(-1), row)
        _written(*tensor_list)
    return _run(pg, "all_gather", [pg.comm.Iallgather(arr, out)], finish, async_op)


def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False):
    """Every rank's ``input_tensor`` concatenated (or stacked) in rank order into ``output_tensor``."""
    pg = resolve(group)
    if pg is None:
        return warn_not_in_group("all_gather_into_tensor")
    arr = _array(input_tensor, "input_tensor", write=False)
    out = _array(output_tensor, "output_tensor")
    _same_dtype(output_tensor, input_tensor)
    if out.size != pg.size() * arr.size:
        raise ValueError("output tensor size must be equal to world_size times input tensor size (%d x %d), got %d"
                         % (pg.size(), arr.size, out.size))
    _check(pg, "all_gather", input_tensor)
    return _run(pg, "all_gather_into_tensor", [pg.comm.Iallgather(arr, out)], lambda: _written(output_tensor),
                async_op)


def _same_dtype(a, b):
    if a.dtype is not b.dtype:
        raise ValueError("output tensor must have the same type as input tensor (%s), got %s" % (b.dtype, a.dtype))


def gather(tensor, gather_list=None, dst=None, group=None, async_op=False):
    """Every rank's ``tensor`` into ``gather_list`` on rank ``dst`` (0 when None)."""
    pg = resolve(group)
    if pg is None:
        return warn_not_in_group("gather")
    root = _root(pg, 0 if dst is None else dst, "dst")
    arr = _array(tensor, write=False)
    if pg.rank() == root:
        if gather_list is None:
            raise ValueError("Argument ``gather_list`` must be specified on destination rank.")
        _tensor_list(gather_list, "gather_list", tensor, pg.size())
    elif gather_list:
        raise ValueError("Argument ``gather_list`` must NOT be specified on non-destination ranks.")
    _check(pg, "gather", tensor, root=root)
    if pg.rank() != root:
        return _run(pg, "gather", [pg.comm.Igather(arr, None, root=root)], None, async_op)
    out = np.empty((pg.size(), arr.size), dtype=arr.dtype)

    def finish():
        for t, row in zip(gather_list, out):
            np.copyto(t._data.reshape(-1), row)
        _written(*gather_list)
    return _run(pg, "gather", [pg.comm.Igather(arr, out, root=root)], finish, async_op)


def scatter(tensor, scatter_list=None, src=None, group=None, async_op=False):
    """``scatter_list[rank]`` of rank ``src`` (0 when None) into ``tensor`` on each rank."""
    pg = resolve(group)
    if pg is None:
        return warn_not_in_group("scatter")
    root = _root(pg, 0 if src is None else src, "src")
    arr = _array(tensor)
    send = None
    if pg.rank() == root:
        if scatter_list is None:
            raise ValueError("Argument ``scatter_list`` must be specified on source rank.")
        _tensor_list(scatter_list, "scatter_list", tensor, pg.size())
        send = np.stack([t._data.reshape(-1) for t in scatter_list])  # MPI sends from one buffer
    elif scatter_list:
        raise ValueError("Argument ``scatter_list`` must NOT be specified on non-source ranks.")
    _check(pg, "scatter", tensor, root=root)
    return _run(pg, "scatter", [pg.comm.Iscatter(send, arr, root=root)], lambda: _written(tensor), async_op)


def reduce_scatter_tensor(output, input, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduce ``input`` (world_size blocks of ``output``'s size) over all ranks; rank i gets block i."""
    pg = resolve(group)
    if pg is None:
        return warn_not_in_group("reduce_scatter_tensor")
    out = _array(output, "output")
    arr = _array(input, "input", write=False)
    _same_dtype(output, input)
    if arr.size != pg.size() * out.size:
        raise ValueError("input tensor must be the same size as output size times world size (%d x %d), got %d"
                         % (pg.size(), out.size, arr.size))
    mop = _mpi_op(op, output.dtype)
    _check(pg, "reduce_scatter", input, op=op, other=out.size)
    average = _averaged(out, op, pg.size())

    def finish():
        if average is not None:
            average()
        _written(output)
    return _run(pg, "reduce_scatter_tensor", [pg.comm.Ireduce_scatter_block(arr, out, op=mop)], finish, async_op)


def reduce_scatter(output, input_list, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduce ``input_list`` (one tensor per rank) over all ranks; rank i gets the reduced ``input_list[i]``."""
    pg = resolve(group)
    if pg is None:
        return warn_not_in_group("reduce_scatter")
    _array(output, "output")
    _tensor_list(input_list, "input_list", output, pg.size())
    stacked = Tensor._wrap(np.stack([t._data.reshape(-1) for t in input_list]))
    return reduce_scatter_tensor(output, stacked, op, group, async_op)


def barrier(group=None, async_op=False, device_ids=None):
    """Wait until every rank of ``group`` has reached the barrier."""
    pg = resolve(group)
    if pg is None:
        return warn_not_in_group("barrier")
    _check(pg, "barrier")
    return _run(pg, "barrier", [pg.comm.Ibarrier()], None, async_op)


# ------------------------------------------------------------------ point to point
def isend(tensor, dst=None, group=None, tag=0):
    """Start sending ``tensor`` to global rank ``dst``; returns a Work."""
    pg = resolve(group)
    if pg is None:
        return warn_not_in_group("isend")
    peer = _root(pg, dst, "dst")
    if peer == pg.rank():
        raise ValueError("Invalid destination rank: should not be the same as the rank of the current process.")
    arr = _array(tensor, write=False)
    return Work(pg, "send to rank %d" % dst, [pg.comm.Isend(arr, dest=peer, tag=tag)])


def send(tensor, dst=None, group=None, tag=0):
    """Send ``tensor`` to global rank ``dst`` (returns once the tensor may be modified again)."""
    work = isend(tensor, dst, group, tag)
    if work is not None:
        work.wait()


def irecv(tensor, src=None, group=None, tag=0):
    """Start receiving into ``tensor`` from global rank ``src`` (any rank when None); returns a Work."""
    pg = resolve(group)
    if pg is None:
        return warn_not_in_group("irecv")
    MPI = _mpi.mpi()
    peer = MPI.ANY_SOURCE if src is None else _root(pg, src, "src")
    arr = _array(tensor)
    status = MPI.Status()
    work = Work(pg, "recv from %s" % ("any rank" if src is None else "rank %d" % src),
                [pg.comm.Irecv(arr, source=peer, tag=tag)], statuses=[status])

    def finish():
        got = status.Get_count(MPI.BYTE)
        if got != arr.nbytes:
            raise RuntimeError("recv: expected %d bytes (%d elements of %s) but rank %d sent %d bytes"
                               % (arr.nbytes, arr.size, tensor.dtype, pg.ranks[status.Get_source()], got))
        _written(tensor)
        work.source = pg.ranks[status.Get_source()]
    work._finish = finish
    return work


def recv(tensor, src=None, group=None, tag=0):
    """Receive into ``tensor`` from global rank ``src`` (any rank when None); returns the sender's rank."""
    work = irecv(tensor, src, group, tag)
    if work is None:
        return -1
    work.wait()
    return work.source
