"""DataLoader: batches of a dataset, in the main process or in worker processes, with PyTorch's arguments."""
import itertools
import multiprocessing
import os
import queue

from ..._generator import numpy_rng
from ._collate import default_collate, default_convert
from ._worker import ExceptionWrapper, IterableDatasetStopIteration, ResumeIteration, worker_loop
from .dataset import IterableDataset
from .sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler

_POLL = 1.0  # seconds between checks that the workers are alive, while waiting for a batch without a timeout


class _InfiniteConstantSampler(Sampler):
    """The sampler of an IterableDataset: None, forever (the dataset itself says what comes next)."""

    def __iter__(self):
        while True:
            yield None


# ------------------------------------------------------------------ fetchers: indices -> a (collated) batch
class _MapFetcher:
    def __init__(self, dataset, auto_collation, collate_fn):
        self.dataset = dataset
        self.auto_collation = auto_collation
        self.collate_fn = collate_fn
        gather = getattr(dataset, "_gather", None) if collate_fn is default_collate else None
        self.gather = gather  # a dataset that collates a batch of indices itself (TensorDataset)
        self.getitems = getattr(dataset, "__getitems__", None)

    def __call__(self, index):
        if not self.auto_collation:
            return self.collate_fn(self.dataset[index])
        if self.gather is not None:
            batch = self.gather(index)
            if batch is not None:
                return batch
        data = self.getitems(index) if self.getitems is not None else [self.dataset[i] for i in index]
        return self.collate_fn(data)


class _IterableFetcher:
    def __init__(self, dataset, auto_collation, collate_fn, drop_last):
        self.it = iter(dataset)
        self.auto_collation = auto_collation
        self.collate_fn = collate_fn
        self.drop_last = drop_last
        self.ended = False

    def __call__(self, index):
        if self.ended:
            raise StopIteration
        if not self.auto_collation:
            return self.collate_fn(next(self.it))
        data = []
        for _ in index:
            try:
                data.append(next(self.it))
            except StopIteration:
                self.ended = True
                break
        if not data or self.drop_last and len(data) < len(index):
            raise StopIteration
        return self.collate_fn(data)


class _FetcherFactory:
    """Makes the fetcher of a dataset (in the main process, or in a worker, which gets this by pickle)."""

    def __init__(self, iterable, auto_collation, collate_fn, drop_last):
        self.iterable, self.auto_collation, self.collate_fn, self.drop_last = \
            iterable, auto_collation, collate_fn, drop_last

    def __call__(self, dataset):
        if self.iterable:
            return _IterableFetcher(dataset, self.auto_collation, self.collate_fn, self.drop_last)
        return _MapFetcher(dataset, self.auto_collation, self.collate_fn)


# ------------------------------------------------------------------ DataLoader
class DataLoader:
    """Iterate over ``dataset`` in batches (``torch.utils.data.DataLoader``): ``batch_size`` samples at a time
    (None: one sample, not collated), in order or shuffled (``shuffle``, ``sampler``, ``batch_sampler``),
    collated by ``collate_fn``; with ``num_workers`` > 0 the batches are made in worker processes and come
    back in order."""

    _initialized = False

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None, num_workers=0,
                 collate_fn=None, pin_memory=False, drop_last=False, timeout=0, worker_init_fn=None,
                 multiprocessing_context=None, generator=None, *, prefetch_factor=None, persistent_workers=False,
                 pin_memory_device="", in_order=True):
        if num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 to disable "
                             "multiprocessing.")
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("prefetch_factor option could only be specified in multiprocessing.let num_workers > 0 "
                             "to enable multiprocessing, otherwise set prefetch_factor to None.")
        if num_workers > 0 and prefetch_factor is None:
            prefetch_factor = 2
        elif prefetch_factor is not None and prefetch_factor < 0:
            raise ValueError("prefetch_factor option should be non-negative")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")
        self.dataset = dataset
        self.num_workers = num_workers
        self.prefetch_factor = prefetch_factor
        self.pin_memory = pin_memory  # CPU tensors: nothing to pin
        self.pin_memory_device = pin_memory_device
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.in_order = in_order
        self._iterable = isinstance(dataset, IterableDataset)
        if self._iterable:
            if isinstance(shuffle, bool) and shuffle or shuffle not in {False, None}:
                raise ValueError("DataLoader with IterableDataset: expected unspecified shuffle option, but got "
                                 "shuffle=%s" % (shuffle,))
            if sampler is not None:
                raise ValueError("DataLoader with IterableDataset: expected unspecified sampler option, but got "
                                 "sampler=%s" % (sampler,))
            if batch_sampler is not None:
                raise ValueError("DataLoader with IterableDataset: expected unspecified batch_sampler option, but "
                                 "got batch_sampler=%s" % (batch_sampler,))
        shuffle = bool(shuffle)
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, and "
                                 "drop_last")
            batch_size = None
            drop_last = False
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually exclusive with drop_last")
        if sampler is None:
            if self._iterable:
                sampler = _InfiniteConstantSampler()
            elif shuffle:
                sampler = RandomSampler(dataset, generator=generator)
            else:
                sampler = SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.generator = generator
        self.collate_fn = collate_fn if collate_fn is not None else \
            default_collate if batch_sampler is not None else default_convert
        self.multiprocessing_context = multiprocessing_context
        self.persistent_workers = persistent_workers
        self._iterator = None
        self._initialized = True

    @property
    def multiprocessing_context(self):
        return self._mp_context

    @multiprocessing_context.setter
    def multiprocessing_context(self, context):
        if context is not None and self.num_workers > 0:
            if isinstance(context, str):
                valid = multiprocessing.get_all_start_methods()
                if context not in valid:
                    raise ValueError("multiprocessing_context option should specify a valid start method in %r, but "
                                     "got multiprocessing_context=%r" % (valid, context))
                context = multiprocessing.get_context(context)
            elif not isinstance(context, multiprocessing.context.BaseContext):
                raise TypeError("multiprocessing_context option should be a valid context object or a string "
                                "specifying the start method, but got multiprocessing_context=%s" % (context,))
        self._mp_context = context

    def __setattr__(self, attr, val):
        if self._initialized and attr in ("batch_size", "batch_sampler", "sampler", "drop_last", "dataset",
                                          "persistent_workers"):
            raise ValueError("%s attribute should not be set after %s is initialized"
                             % (attr, self.__class__.__name__))
        super().__setattr__(attr, val)

    @property
    def _auto_collation(self):
        return self.batch_sampler is not None

    @property
    def _index_sampler(self):
        return self.batch_sampler if self._auto_collation else self.sampler

    def _fetcher_factory(self):
        return _FetcherFactory(self._iterable, self._auto_collation, self.collate_fn, self.drop_last)

    def __iter__(self):
        if self.num_workers == 0:
            return _SingleProcessIter(self)
        if not self.persistent_workers:
            return _MultiProcessIter(self)
        if self._iterator is None:
            self._iterator = _MultiProcessIter(self)
        else:
            self._iterator._reset(self)
        return self._iterator

    def __len__(self):
        if self._iterable:
            length = len(self.dataset)
            if self.batch_size is not None:
                length = length // self.batch_size if self.drop_last else -(-length // self.batch_size)
            return length
        return len(self._index_sampler)


class _BaseIter:
    def __init__(self, loader):
        self._index_sampler = loader._index_sampler
        # as PyTorch: each iterator draws the workers' base seed from the loader's generator (the default
        # one if none), before the sampler draws the epoch's order
        self._base_seed = int(numpy_rng(loader.generator).integers(2 ** 63))
        self._new_epoch()

    def _new_epoch(self):
        self._sampler_iter = iter(self._index_sampler)
        self._num_yielded = 0

    def __iter__(self):
        return self

    def _next_index(self):
        return next(self._sampler_iter)

    def __len__(self):
        return len(self._index_sampler)


class _SingleProcessIter(_BaseIter):
    def __init__(self, loader):
        super().__init__(loader)
        self._fetch = loader._fetcher_factory()(loader.dataset)

    def __next__(self):
        data = self._fetch(self._next_index())  # StopIteration of the sampler or the dataset ends the epoch
        self._num_yielded += 1
        return data


class _MultiProcessIter(_BaseIter):
    """Worker processes fed task by task (``prefetch_factor`` tasks ahead per worker); batches come back
    through one queue and are handed out in task order (or as they come, with ``in_order=False``)."""

    def __init__(self, loader):
        super().__init__(loader)
        self._timeout = loader.timeout
        self._prefetch = loader.prefetch_factor
        self._num_workers = loader.num_workers
        self._persistent = loader.persistent_workers
        self._in_order = loader.in_order
        ctx = loader.multiprocessing_context or multiprocessing
        self._data_queue = ctx.Queue()
        self._done_event = ctx.Event()
        self._index_queues, self._workers = [], []
        factory = loader._fetcher_factory()
        for i in range(self._num_workers):
            q = ctx.Queue()
            q.cancel_join_thread()
            w = ctx.Process(target=worker_loop, args=(factory, loader.dataset, q, self._data_queue, self._done_event,
                                                      self._base_seed, loader.worker_init_fn, i, self._num_workers,
                                                      os.getpid()), daemon=True)
            w.start()
            self._index_queues.append(q)
            self._workers.append(w)
        self._shutdown = False
        self._reset(loader, first_iter=True)

    def _reset(self, loader, first_iter=False):
        if not first_iter:
            self._new_epoch()
        self._send_idx = 0  # next task id to send
        self._rcvd_idx = 0  # next task id to hand out
        self._task_info = {}  # task id -> (worker id,) while pending, (worker id, data) once received
        self._workers_status = [True] * self._num_workers
        self._worker_queue_cycle = itertools.cycle(range(self._num_workers))
        if not first_iter:  # persistent workers: start them on a new epoch, and wait until each has
            for q in self._index_queues:
                q.put(ResumeIteration())
            waiting = self._num_workers
            while waiting:  # (results of tasks of the last epoch that were never asked for are dropped)
                if isinstance(self._get_data()[0], ResumeIteration):
                    waiting -= 1
        for _ in range(self._prefetch * self._num_workers):
            self._try_put_index()

    def _try_put_index(self):
        try:
            index = self._next_index()
        except StopIteration:
            return
        for _ in range(self._num_workers):
            worker = next(self._worker_queue_cycle)
            if self._workers_status[worker]:
                break
        else:
            return  # every worker is done with its IterableDataset
        self._index_queues[worker].put((self._send_idx, index))
        self._task_info[self._send_idx] = (worker,)
        self._send_idx += 1

    def _get_data(self):
        """(task id, data) from the workers, with the timeout's error, or an error if a worker died."""
        timeout = self._timeout if self._timeout > 0 else _POLL
        while True:
            try:
                return self._data_queue.get(timeout=timeout)
            except queue.Empty:
                if self._timeout > 0:
                    raise RuntimeError("DataLoader timed out after %s seconds" % self._timeout) from None
                dead = [w.pid for w in self._workers if not w.is_alive()]
                if dead:
                    self._shutdown_workers()
                    raise RuntimeError("DataLoader worker (pid(s) %s) exited unexpectedly"
                                       % ", ".join(map(str, dead))) from None

    def __next__(self):
        while True:
            while self._rcvd_idx < self._send_idx:  # skip tasks handed out already or lost with an exhausted worker
                info = self._task_info.get(self._rcvd_idx)
                if info is not None:
                    if len(info) == 2 or self._workers_status[info[0]]:
                        break
                    del self._task_info[self._rcvd_idx]
                self._rcvd_idx += 1
            else:
                if not self._persistent:
                    self._shutdown_workers()
                raise StopIteration
            if len(self._task_info[self._rcvd_idx]) == 2:
                data = self._task_info.pop(self._rcvd_idx)[1]
                self._rcvd_idx += 1
                return self._process(data)
            idx, data = self._get_data()
            if isinstance(data, IterableDatasetStopIteration):
                if self._persistent:
                    self._workers_status[data.worker_id] = False
                else:
                    self._mark_worker_done(data.worker_id)
                self._try_put_index()
                continue
            if idx == self._rcvd_idx:
                del self._task_info[idx]
                self._rcvd_idx += 1
                return self._process(data)
            if not self._in_order:
                del self._task_info[idx]
                return self._process(data)
            self._task_info[idx] += (data,)

    def _process(self, data):
        self._try_put_index()
        if isinstance(data, ExceptionWrapper):
            data.reraise()
        self._num_yielded += 1
        return data

    def _mark_worker_done(self, worker_id):
        self._workers_status[worker_id] = False
        self._index_queues[worker_id].put(None)

    def _shutdown_workers(self):
        if self._shutdown:
            return
        self._shutdown = True
        self._done_event.set()
        for q in self._index_queues:
            try:
                q.put(None)
            except (OSError, ValueError):
                pass
        for w in self._workers:
            w.join(timeout=5.0)
            if w.is_alive():
                w.terminate()
        for q in self._index_queues:
            q.close()
        self._data_queue.cancel_join_thread()
        self._data_queue.close()

    def __del__(self):
        if not getattr(self, "_shutdown", True):
            self._shutdown_workers()
