"""DistributedDataParallel: one model replica per process, gradients averaged across processes in backward."""
import contextlib

import numpy as np

from ..._grad_mode import is_grad_enabled
from ...distributed import _mpi
from ...distributed.objects import all_gather_object
from ...distributed.process_group import resolve
from ..module import Module
from ._reducer import FIRST_BUCKET_BYTES, Reducer


class DistributedDataParallel(Module):
    """Wrap ``module`` so that ``loss.backward()`` leaves every rank with the gradients averaged over ranks.

    At construction the parameters and buffers of rank 0 are copied to every rank (so all replicas
    start equal) after checking that every rank has the same parameters. Each rank then runs
    forward and backward on its own part of the batch; the reducer (``_reducer.py``) all-reduces the
    gradients in buckets while backward runs. ``no_sync()`` skips that for gradient accumulation.
    ``broadcast_buffers`` copies rank 0's buffers (BatchNorm's running statistics) before each forward.
    """

    def __init__(self, module, device_ids=None, output_device=None, dim=0, broadcast_buffers=True,
                 process_group=None, bucket_cap_mb=None, find_unused_parameters=False, check_reduction=False,
                 gradient_as_bucket_view=False):
        super().__init__()
        pg = resolve(process_group)
        if pg is None:
            raise ValueError("DistributedDataParallel: this process is not a member of process_group")
        named = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
        if not named:
            raise RuntimeError("DistributedDataParallel is not needed when a module doesn't have any parameter that "
                               "requires a gradient.")
        for _, t in list(module.named_parameters()) + list(module.named_buffers()):
            if t._data.__class__ is not np.ndarray:
                raise RuntimeError("CUDA tensor detected and the MPI used doesn't have CUDA-aware MPI support")
        self.module = module
        self.device_ids, self.output_device, self.dim = device_ids, output_device, dim
        self.broadcast_buffers = broadcast_buffers
        self.find_unused_parameters = find_unused_parameters
        self.gradient_as_bucket_view = gradient_as_bucket_view
        self.require_backward_grad_sync = True
        self.bucket_bytes_cap = int((25 if bucket_cap_mb is None else bucket_cap_mb) * 1024 * 1024)
        self.process_group = pg
        self._comm = pg.comm.Dup()  # DDP's own communicator: its allreduces never match user collectives
        self._timeout = pg.timeout
        _verify_same_parameters(pg, named)
        self._sync_states([p for _, p in module.named_parameters()] + list(module.buffers()))
        self.reducer = Reducer([p for _, p in named], [n for n, _ in named], self._comm, self._timeout,
                               self.bucket_bytes_cap, FIRST_BUCKET_BYTES if bucket_cap_mb is None else
                               self.bucket_bytes_cap, find_unused_parameters, gradient_as_bucket_view)

    def _sync_states(self, tensors):
        """Copy rank 0's values of ``tensors`` into every rank's (one broadcast per tensor, all in flight at once)."""
        if self._comm.Get_size() == 1 or not tensors:
            return
        requests, copies = [], []
        for t in tensors:
            d = t._data
            buf = d if d.flags.c_contiguous and d.flags.writeable else np.array(d, order="C")  # a writable copy
            requests.append(self._comm.Ibcast(buf.reshape(-1), root=0))
            copies.append((t, buf))
        _mpi.wait(requests, self._timeout, "DistributedDataParallel's broadcast of rank 0's parameters and buffers")
        for t, buf in copies:
            if buf is not t._data:
                if t._data.flags.writeable:
                    np.copyto(t._data, buf)
                else:
                    t._data = buf
            t._vc[0] += 1

    def forward(self, *inputs, **kwargs):
        if self.broadcast_buffers:
            self._sync_states(list(self.module.buffers()))
        outputs = self.module(*inputs, **kwargs)
        if is_grad_enabled() and self.require_backward_grad_sync:
            self.reducer.prepare(outputs if self.find_unused_parameters else None)
        return outputs

    @contextlib.contextmanager
    def no_sync(self):
        """Inside it, backward accumulates local gradients without communicating; the first forward and
        backward after it averages the accumulated gradients."""
        old = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = old


def _verify_same_parameters(pg, named):
    """PyTorch's check that every rank wraps the same model: same number, shapes and dtypes of parameters."""
    mine = [(tuple(p.shape), p._data.dtype.str) for _, p in named]
    everyone = [None] * pg.size()
    all_gather_object(everyone, mine, group=pg)  # metadata only, no tensor data
    me = pg.rank()
    for r, theirs in enumerate(everyone):
        if len(theirs) != len(mine):
            raise RuntimeError("DDP expects same model across all ranks, but Rank %d has %d params, while rank %d has "
                               "inconsistent %d params." % (me, len(mine), r, len(theirs)))
        for i, ((shape, dt), (their_shape, their_dt)) in enumerate(zip(mine, theirs)):
            if shape != their_shape or dt != their_dt:
                raise RuntimeError("DDP expects same model across all ranks, but Rank %d has parameter %s of shape %s "
                                   "and dtype %s, while rank %d has shape %s and dtype %s."
                                   % (me, named[i][0], list(shape), np.dtype(dt).name, r,
                                      list(their_shape), np.dtype(their_dt).name))
