"""What runs in a DataLoader worker process: its WorkerInfo, seeding, the fetch loop, and how its exceptions
travel to the main process."""
import os
import queue
import random
import sys
import traceback

import numpy as np

from ..._generator import manual_seed

_worker_info = None


class WorkerInfo:
    """In a worker process: ``id``, ``num_workers``, ``seed`` and the worker's copy of ``dataset``."""

    def __init__(self, **kwargs):
        for k, v in kwargs.items():
            object.__setattr__(self, k, v)
        object.__setattr__(self, "_keys", tuple(kwargs))

    def __setattr__(self, key, val):
        raise RuntimeError("Cannot assign attributes to %s objects" % self.__class__.__name__)

    def __repr__(self):
        return "%s(%s)" % (self.__class__.__name__, ", ".join("%s=%s" % (k, getattr(self, k)) for k in self._keys))


def get_worker_info():
    """The WorkerInfo of this DataLoader worker process, or None in the main process."""
    return _worker_info


class ExceptionWrapper:
    """An exception raised in a worker, with its traceback as text, raised again in the main process."""

    def __init__(self, exc_info, where):
        self.exc_type = exc_info[0]
        self.exc_msg = "".join(traceback.format_exception(*exc_info))
        self.where = where

    def reraise(self):
        msg = "Caught %s %s.\nOriginal %s" % (self.exc_type.__name__, self.where, self.exc_msg)
        if self.exc_type is KeyError:  # KeyError quotes its argument: keep the traceback readable
            msg = _KeyErrorMessage(msg)
        try:
            exception = self.exc_type(msg)
        except Exception:
            raise RuntimeError(msg) from None
        raise exception


class _KeyErrorMessage(str):
    def __repr__(self):
        return self


class IterableDatasetStopIteration:
    """A worker's IterableDataset is exhausted."""

    def __init__(self, worker_id):
        self.worker_id = worker_id


class ResumeIteration:
    """Start a new epoch (persistent workers): the worker rebuilds its fetcher and answers with this marker."""

    def __init__(self, seed=None):
        self.seed = seed


def seed_worker(base_seed, worker_id):
    """Seed Python's, jitgrad's and NumPy's global generators for worker ``worker_id``, as PyTorch does."""
    seed = base_seed + worker_id
    random.seed(seed)
    manual_seed(seed)
    np.random.seed(np.random.SeedSequence([worker_id, base_seed]).generate_state(4))
    return seed


def worker_loop(fetcher_factory, dataset, index_queue, data_queue, done_event, base_seed, init_fn, worker_id,
                num_workers, parent_pid):
    """Take (task id, indices) from ``index_queue``, put (task id, batch or ExceptionWrapper) on ``data_queue``
    until told to stop (None) or the main process is gone."""
    global _worker_info
    try:
        seed = seed_worker(base_seed, worker_id)
        _worker_info = WorkerInfo(id=worker_id, num_workers=num_workers, seed=seed, dataset=dataset)
        init_error = None
        try:
            if init_fn is not None:
                init_fn(worker_id)
            fetcher = fetcher_factory(dataset)
        except Exception:
            init_error = ExceptionWrapper(sys.exc_info(), "in DataLoader worker process %d" % worker_id)
        exhausted = False
        while not done_event.is_set():
            try:
                task = index_queue.get(timeout=5.0)
            except queue.Empty:
                if os.getppid() != parent_pid:
                    break  # the main process died without telling us
                continue
            if task is None:
                break
            if isinstance(task, ResumeIteration):
                data_queue.put((task, None))
                exhausted = False
                fetcher = fetcher_factory(dataset)
                continue
            if done_event.is_set() or exhausted:
                continue
            idx, index = task
            if init_error is not None:
                data, init_error = init_error, None
            else:
                try:
                    data = fetcher(index)
                except StopIteration:
                    data = IterableDatasetStopIteration(worker_id)
                    exhausted = True
                except Exception:
                    data = ExceptionWrapper(sys.exc_info(), "in DataLoader worker process %d" % worker_id)
            data_queue.put((idx, data))
    except KeyboardInterrupt:
        pass
    if done_event.is_set():
        data_queue.cancel_join_thread()
        data_queue.close()
