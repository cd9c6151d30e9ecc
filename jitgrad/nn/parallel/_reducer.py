"""DistributedDataParallel's reducer: gradients averaged across ranks in buckets while backward runs.

Parameters are grouped into flat buckets in reverse order of registration (the order backward
usually produces their gradients), the first bucket capped at 1 MiB and the others at 25 MiB by
default, at ``bucket_cap_mb`` when it is given, as PyTorch does (PyTorch also rebuilds its buckets
after the first iteration, in the order the gradients arrived; these stay as built). A
post-accumulate-grad hook on each parameter copies its gradient into its bucket (or finds it
already there, with ``gradient_as_bucket_view``); when a bucket's last gradient has arrived, its
non-blocking MPI allreduce starts, so communication overlaps the rest of backward (a progress
thread, ``_mpi.Poller``, keeps it moving: MPICH advances it only inside MPI calls).
Buckets start in bucket order on every rank (MPI matches collectives by order). When the last
bucket has started, the reducer waits for all of them, divides by the world size and writes the
averages into the gradients.
"""
import time

import numpy as np

from ..._graph import AccumulateGrad
from ..._tensor import Tensor
from ...distributed import _mpi

FIRST_BUCKET_BYTES = 1024 * 1024  # PyTorch's _DEFAULT_FIRST_BUCKET_BYTES

UNFINISHED_MESSAGE = (
    "Expected to have finished reduction in the prior iteration before starting a new one. This error indicates "
    "that your module has parameters that were not used in producing loss. You can enable unused parameter "
    "detection by passing the keyword argument `find_unused_parameters=True` to "
    "`jitgrad.nn.parallel.DistributedDataParallel`, and by \nmaking sure all `forward` function outputs "
    "participate in calculating loss. \nIf you already have done the above, then the distributed data parallel "
    "module wasn't able to locate the output tensors in the return value of your module's `forward` function. "
    "Please include the loss function and the structure of the return value of `forward` of your module when "
    "reporting this issue (e.g. list, dict, iterable).\nParameter indices which did not receive grad for rank %d: "
    "%s\nParameters which did not receive grad for rank %d: %s")

READY_TWICE_MESSAGE = (
    "Expected to mark a variable ready only once. This error is caused by one of the following reasons: 1) Use of "
    "a module parameter outside the `forward` function. Please make sure model parameters are not shared across "
    "multiple concurrent forward-backward passes. or try to use _set_static_graph() as a workaround if this module "
    "graph does not change during training loop.2) Reused parameters in multiple reentrant backward passes. For "
    "example, if you use multiple `checkpoint` functions to wrap the same part of your model, it would result in "
    "the same set of parameters been used by different reentrant backward passes multiple times, and hence marking "
    "a variable ready multiple times. DDP does not support such use cases in default. Parameter at index %d with "
    "name %s has been marked as ready twice. This means that multiple autograd engine hooks have fired for this "
    "particular parameter during this iteration.")


class Bucket:
    """Parameters whose gradients travel in one flat array, and that array's pending allreduce."""

    def __init__(self, indices, params):
        self.indices = indices
        sizes = [params[i].numel() for i in indices]
        self.offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(int).tolist()
        self.flat = np.zeros(self.offsets[-1], dtype=params[indices[0]]._data.dtype)
        self.views = [self.flat[a:b].reshape(params[i]._data.shape)
                      for i, a, b in zip(indices, self.offsets, self.offsets[1:])]
        self.pending = len(indices)
        self.request = None

    @property
    def nbytes(self):
        return self.flat.nbytes


def assign_buckets(params, bucket_cap_bytes, first_cap_bytes):
    """Indices of ``params`` per bucket, in reverse order of registration, one dtype per bucket: a
    bucket closes once it holds at least its cap (``first_cap_bytes`` for a dtype's first bucket)."""
    open_buckets = {}  # dtype -> (indices, bytes, cap)
    done = []
    for i in reversed(range(len(params))):
        key = params[i]._data.dtype
        indices, size, cap = open_buckets.get(key, ([], 0, None))
        if cap is None:
            cap = first_cap_bytes if not any(d[0] == key for d in done) else bucket_cap_bytes
        indices.append(i)
        size += params[i]._data.nbytes
        if size >= cap:
            done.append((key, indices))
            open_buckets.pop(key, None)
        else:
            open_buckets[key] = (indices, size, cap)
    done.extend((key, v[0]) for key, v in open_buckets.items())
    return [indices for _, indices in done]


class Reducer:
    def __init__(self, params, names, comm, timeout, bucket_cap_bytes, first_cap_bytes, find_unused, as_view):
        self.params, self.names = params, names
        self.comm, self.timeout = comm, timeout
        self.world = comm.Get_size()
        self.find_unused, self.as_view = find_unused, as_view
        self.buckets = [Bucket(indices, params)
                        for indices in assign_buckets(params, bucket_cap_bytes, first_cap_bytes)]
        self.where = {}  # parameter index -> (bucket, its view in the bucket)
        for b in self.buckets:
            for i, view in zip(b.indices, b.views):
                self.where[i] = (b, view)
        self.expect = False  # the last forward asked for gradients to be synchronized
        self.started = False  # some gradient of this iteration has arrived (PyTorch's require_finalize)
        self.ready = [False] * len(params)
        self.used = np.zeros(len(params), dtype=np.int32)
        self.next_bucket = 0
        # perf_counter() when each bucket's allreduce started and when the last one had completed (the
        # last iteration's; benchmarks/ddp_bench.py reports how long communication overlapped backward)
        self.started_at, self.completed_at = [None] * len(self.buckets), None
        self.done_before_wait = 0  # buckets whose allreduce had completed when the last one started
        self.poller = _mpi.Poller()  # progresses the started buckets while the rest of backward computes
        self.use_poller = comm.Get_size() > 1  # (benchmarks/ddp_bench.py compares with it off)
        self.handles = [p.register_post_accumulate_grad_hook(self._hook(i)) for i, p in enumerate(params)]

    def _hook(self, i):
        def hook(param):
            if self.expect:
                self.used[i] = 1
                self.started = True
                self.mark_ready(i)
        return hook

    # --------------------------------------------------------------- per iteration
    def prepare(self, outputs):
        """Called after a forward whose backward must synchronize gradients."""
        if self.started:
            missing = [i for i, r in enumerate(self.ready) if not r]
            raise RuntimeError(UNFINISHED_MESSAGE % (self.rank(), " ".join(map(str, missing)), self.rank(),
                                                     ", ".join(self.names[i] for i in missing)))
        self._wait_started()  # buckets that a forward without backward started (unused parameters)
        self.ready = [False] * len(self.params)
        self.used[:] = 0
        for b in self.buckets:
            b.pending = len(b.indices)
        self.next_bucket = 0
        self.expect = True
        if self.find_unused:
            reached = reached_parameters(outputs)
            for i, p in enumerate(self.params):
                if id(p) not in reached:
                    self.mark_ready(i)

    def rank(self):
        return self.comm.Get_rank()

    def mark_ready(self, i):
        if self.ready[i]:
            raise RuntimeError(READY_TWICE_MESSAGE % (i, self.names[i]))
        self.ready[i] = True
        bucket, view = self.where[i]
        g = self.params[i]._grad
        if g is None:
            view.fill(0)
        elif g._data is not view:
            np.copyto(view, g._data)
        bucket.pending -= 1
        if bucket.pending == 0:
            self._start_ready_buckets()

    def _start_ready_buckets(self):
        MPI = _mpi.mpi()
        while self.next_bucket < len(self.buckets) and self.buckets[self.next_bucket].pending == 0:
            b = self.buckets[self.next_bucket]
            with self.poller.lock:
                b.request = self.comm.Iallreduce(MPI.IN_PLACE, b.flat, op=MPI.SUM)
            self.started_at[self.next_bucket] = time.perf_counter()
            self.next_bucket += 1
            if self.use_poller and self.next_bucket < len(self.buckets):  # backward goes on: keep it moving
                self.poller.add(b.request)
        if self.next_bucket == len(self.buckets):
            self.finalize()

    def _wait_started(self):
        self.poller.stop()
        requests = [b.request for b in self.buckets if b.request is not None]
        self.done_before_wait = sum(1 for r in requests[:-1] if r.Test())
        if requests:
            _mpi.wait(requests, self.timeout, "DistributedDataParallel's gradient allreduce")
        for b in self.buckets:
            b.request = None

    def finalize(self):
        """Wait for every bucket, average, and write the averages into the parameters' gradients."""
        self._wait_started()
        self.completed_at = time.perf_counter()
        globally_used = None
        if self.find_unused:
            globally_used = self.used.copy()
            MPI = _mpi.mpi()
            _mpi.wait([self.comm.Iallreduce(MPI.IN_PLACE, globally_used, op=MPI.MAX)], self.timeout,
                      "DistributedDataParallel's unused-parameter map")
        for b in self.buckets:
            np.divide(b.flat, self.world, out=b.flat)
            for i, view in zip(b.indices, b.views):
                if globally_used is not None and not globally_used[i]:
                    continue  # no rank produced a gradient: .grad stays as it was, as in PyTorch
                p = self.params[i]
                g = p._grad
                if g is not None and g._data is view:
                    g._vc[0] += 1
                elif self.as_view:
                    p._grad = Tensor._wrap(view)
                elif g is None or not g._data.flags.writeable:
                    p._grad = Tensor._wrap(view.copy())
                else:
                    np.copyto(g._data, view)
                    g._vc[0] += 1
        self.expect = self.started = False

    def remove_hooks(self):
        for h in self.handles:
            h.remove()


def output_tensors(obj, found):
    """The tensors in a forward's output (nested in tuples, lists and dicts)."""
    if isinstance(obj, Tensor):
        found.append(obj)
    elif isinstance(obj, (list, tuple)):
        for o in obj:
            output_tensors(o, found)
    elif isinstance(obj, dict):
        for o in obj.values():
            output_tensors(o, found)
    return found


def reached_parameters(outputs):
    """ids of the leaves that the backward graph of ``outputs`` reaches (an explicit stack, no recursion)."""
    stack, seen, leaves = [], set(), set()
    for t in output_tensors(outputs, []):
        if t.grad_fn is not None:
            stack.append(t.grad_fn)
        elif t._requires_grad:
            leaves.add(id(t))
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        if node.__class__ is AccumulateGrad:
            leaves.add(id(node.variable))
        for nf in node.next_functions:
            if nf is not None and nf[0] is not None and nf[0] not in seen:
                stack.append(nf[0])
    return leaves
