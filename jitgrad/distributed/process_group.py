"""Process groups: the default group over every MPI process, subgroups (new_group), rank and size queries."""
import datetime
import warnings

from . import _mpi

NOT_INITIALIZED = "Default process group has not been initialized, please make sure to call init_process_group."
default_pg_timeout = datetime.timedelta(minutes=30)  # PyTorch's default


class Backend(str):
    """The name of a backend; jitgrad's collectives run on MPI."""
    MPI = "mpi"

    def __new__(cls, name):
        if not isinstance(name, str):
            raise ValueError("Backend name must be a string, but got: %r" % (name,))
        low = name.lower()
        if low != cls.MPI:
            raise ValueError("jitgrad.distributed runs its collectives on MPI: backend must be 'mpi' (or None), "
                             "got %r" % name)
        return str.__new__(cls, low)


class ProcessGroup:
    """A set of ranks and the MPI communicator their collectives run on.

    ``ranks`` are the members' global ranks in group order; ``timeout`` (seconds) bounds every
    wait in the group's collectives.
    """

    def __init__(self, comm, ranks, timeout):
        self.comm = comm
        self.ranks = tuple(ranks)
        self.timeout = timeout
        self._global_to_group = {g: i for i, g in enumerate(self.ranks)}

    def rank(self):
        return self.comm.Get_rank()

    def size(self):
        return self.comm.Get_size()

    def name(self):
        return Backend.MPI

    def group_rank(self, global_rank):
        """The rank in this group of process ``global_rank`` (PyTorch's ValueError when not a member)."""
        r = self._global_to_group.get(global_rank)
        if r is None:
            raise ValueError("Group %r does not contain rank %d" % (self, global_rank))
        return r

    def __repr__(self):
        return "<jitgrad.distributed.ProcessGroup ranks=%s backend=mpi>" % list(self.ranks)


class _NonGroupMember:
    def __repr__(self):
        return "GroupMember.NON_GROUP_MEMBER"


class GroupMember:
    """``GroupMember.WORLD`` is the default group once initialized; NON_GROUP_MEMBER is what
    ``new_group`` returns on a process that is not in the new group."""
    WORLD = None
    NON_GROUP_MEMBER = _NonGroupMember()


class _WorldGroup:
    """``jitgrad.distributed.group.WORLD``: the default group (None before init_process_group)."""

    @property
    def WORLD(self):
        return GroupMember.WORLD


group = _WorldGroup()


def _seconds(timeout):
    if timeout is None:
        return default_pg_timeout.total_seconds()
    if isinstance(timeout, datetime.timedelta):
        return timeout.total_seconds()
    if isinstance(timeout, (int, float)) and timeout > 0:
        return float(timeout)
    raise TypeError("Expected timeout argument to be of type datetime.timedelta, got %r" % (timeout,))


def is_available():
    """Whether collectives can run here: mpi4py and an MPI library are installed."""
    return _mpi.is_available()


def is_initialized():
    return GroupMember.WORLD is not None


def is_mpi_available():
    return _mpi.is_available()


def init_process_group(backend=None, init_method=None, timeout=None, world_size=-1, rank=-1, store=None,
                       group_name="", pg_options=None, device_id=None):
    """Create the default process group over all processes of the MPI job.

    MPI gives each process its rank and the world size (``mpiexec -n 4 python train.py``, or a
    hostfile across machines), so ``init_method`` and ``store`` have nothing to do; ``world_size``
    and ``rank``, when given, must agree with MPI's. ``timeout`` bounds every collective's wait:
    past it the job is aborted with a message instead of hanging.
    """
    if GroupMember.WORLD is not None:
        raise ValueError("trying to initialize the default process group twice!")
    if backend is not None:
        Backend(backend)
    seconds = _seconds(timeout)
    MPI = _mpi.mpi()
    world = MPI.COMM_WORLD
    size, me = world.Get_size(), world.Get_rank()
    if world_size not in (-1, None) and world_size != size:
        raise ValueError("init_process_group: world_size=%d, but MPI started %d processes (mpiexec -n %d)"
                         % (world_size, size, size))
    if rank not in (-1, None) and rank != me:
        raise ValueError("init_process_group: rank=%d, but MPI gave this process rank %d" % (rank, me))
    comm = world.Dup()  # the group's own communicator: user MPI traffic on COMM_WORLD cannot match ours
    comm.Set_errhandler(MPI.ERRORS_RETURN)  # MPI errors raise (mpi4py's MPI.Exception) instead of exiting
    GroupMember.WORLD = ProcessGroup(comm, range(size), seconds)
    if size > 1:
        _mpi.install_excepthook()


def destroy_process_group(group=None):
    """Free ``group`` (the default group and every subgroup when None)."""
    if group is None or group is GroupMember.WORLD:
        pg = _default_group()
        for sub in list(_subgroups):
            _free(sub)
        _free(pg)
        GroupMember.WORLD = None
        _mpi.remove_excepthook()
    elif group is not GroupMember.NON_GROUP_MEMBER:
        _free(group)


_subgroups = []


def _free(pg):
    if pg in _subgroups:
        _subgroups.remove(pg)
    if pg.comm is not None:
        pg.comm.Free()
        pg.comm = None


def _default_group():
    if GroupMember.WORLD is None:
        raise ValueError(NOT_INITIALIZED)
    return GroupMember.WORLD


def resolve(group):
    """The ProcessGroup a collective runs on (the default one for None); None on a non-member."""
    if group is None or group is GroupMember.WORLD:
        return _default_group()
    _default_group()
    if group is GroupMember.NON_GROUP_MEMBER:
        return None
    if not isinstance(group, ProcessGroup):
        raise TypeError("group must be a ProcessGroup returned by new_group, got %s" % type(group).__name__)
    if group.comm is None:
        raise ValueError("the process group %r has been destroyed" % group)
    return group


def warn_not_in_group(op_name):
    warnings.warn("Running %s on global rank %d which does not belong to the given group."
                  % (op_name, _default_group().rank()))


def get_rank(group=None):
    """This process's rank in ``group`` (-1 when it is not a member)."""
    pg = resolve(group)
    return -1 if pg is None else pg.rank()


def get_world_size(group=None):
    """The number of processes in ``group`` (-1 when this process is not a member)."""
    pg = resolve(group)
    return -1 if pg is None else pg.size()


def get_backend(group=None):
    if resolve(group) is None:
        raise ValueError("Invalid process group specified")
    return Backend.MPI


def get_group_rank(group, global_rank):
    return resolve(group).group_rank(global_rank)


def get_global_rank(group, group_rank):
    pg = resolve(group)
    if not 0 <= group_rank < len(pg.ranks):
        raise ValueError("Group rank %d is not part of group %r" % (group_rank, pg))
    return pg.ranks[group_rank]


def get_process_group_ranks(group):
    return list(resolve(group).ranks)


def new_group(ranks=None, timeout=None, backend=None, pg_options=None, use_local_synchronization=False,
              group_desc=None, device_id=None):
    """A group of the given global ranks (sorted; all processes when None).

    Every process of the default group must call it, in the same order as the others, members or
    not; a process outside ``ranks`` gets ``GroupMember.NON_GROUP_MEMBER``.
    """
    world = _default_group()
    if backend is not None:
        Backend(backend)
    size = world.size()
    ranks = sorted(range(size) if ranks is None else ranks)
    if len(set(ranks)) != len(ranks):
        raise ValueError("ranks should not contain duplicates, got %s" % ranks)
    for r in ranks:
        if not 0 <= r < size:
            raise ValueError("Invalid rank %d: the default group has ranks 0 to %d" % (r, size - 1))
    seconds = world.timeout if timeout is None else _seconds(timeout)
    # a collective over the whole default group, so that every process takes part as PyTorch requires
    comm = world.comm.Create(world.comm.Get_group().Incl(ranks))
    if comm == _mpi.mpi().COMM_NULL:
        return GroupMember.NON_GROUP_MEMBER
    comm.Set_errhandler(_mpi.mpi().ERRORS_RETURN)
    pg = ProcessGroup(comm, ranks, seconds)
    _subgroups.append(pg)
    return pg
