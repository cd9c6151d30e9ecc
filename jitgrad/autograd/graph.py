"""The backward graph: Node (a grad_fn), AccumulateGrad, saved tensors and their hooks."""
import itertools
import threading
import weakref

import numpy as np

from .._device import backend
from .._grad_mode import STATE

SEQUENCE = itertools.count()  # creation order of nodes: the engine runs the latest first
_handle_ids = itertools.count()
LEAF_SEQUENCE = float("inf")  # AccumulateGrad runs as soon as it is ready, like PyTorch's
# The next_functions entry of an input that takes no gradient, as in PyTorch: code walking the graph
# unpacks every entry as (node, output_nr); the engine skips entries whose node is None.
NO_EDGE = (None, 0)


class RemovableHandle:
    """Returned by register_*hook; ``remove()`` unregisters the hook."""

    def __init__(self, hooks):
        self._hooks = weakref.ref(hooks) if hooks is not None else None
        self.id = next(_handle_ids)

    def remove(self):
        hooks = self._hooks() if self._hooks is not None else None
        if hooks is not None:
            hooks.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


class _HookDict(dict):
    """A dict of hooks that RemovableHandle can hold weakly."""
    __slots__ = ("__weakref__",)


def type_name(obj):
    """The name of ``obj``'s type as PyTorch's messages print it (CPython's tp_name): 'float',
    'numpy.ndarray', or the bare name of a class defined in Python."""
    cls = type(obj)
    if cls.__flags__ & (1 << 9):  # Py_TPFLAGS_HEAPTYPE
        return cls.__name__
    return cls.__qualname__ if cls.__module__ == "builtins" else cls.__module__ + "." + cls.__qualname__


def add_hook(hooks, fn):
    handle = RemovableHandle(hooks)
    hooks[handle.id] = fn
    return handle


class Node:
    """A node of the backward graph (``tensor.grad_fn``)."""
    __slots__ = ("next_functions", "_seq", "_pre_hooks", "_post_hooks", "_tensor_hooks", "_retain_hooks",
                 "_metadata", "_anomaly_trace", "__weakref__")
    n_outputs = 1

    def __init__(self, next_functions=()):
        if None in next_functions:
            next_functions = tuple(NO_EDGE if e is None else e for e in next_functions)
        self.next_functions = next_functions
        self._seq = next(SEQUENCE)
        self._pre_hooks = self._post_hooks = self._tensor_hooks = self._retain_hooks = None
        self._metadata = None
        self._anomaly_trace = None
        if STATE.anomaly:
            from .anomaly import record_trace
            record_trace(self)

    def name(self):
        return type(self).__name__

    def __repr__(self):
        return "<%s object at %#x>" % (type(self).__name__, id(self))

    @property
    def metadata(self):
        if self._metadata is None:
            self._metadata = {}
        return self._metadata

    def register_hook(self, fn):
        """``fn(grad_inputs, grad_outputs)`` runs after the node; it may return new grad_inputs."""
        if self._post_hooks is None:
            self._post_hooks = _HookDict()
        return add_hook(self._post_hooks, fn)

    def register_prehook(self, fn):
        """``fn(grad_outputs)`` runs before the node; it may return new grad_outputs."""
        if self._pre_hooks is None:
            self._pre_hooks = _HookDict()
        return add_hook(self._pre_hooks, fn)

    def _register_tensor_hook(self, output_nr, fn, retain=False):
        attr = "_retain_hooks" if retain else "_tensor_hooks"
        table = getattr(self, attr)
        if table is None:
            table = {}
            setattr(self, attr, table)
        hooks = table.get(output_nr)
        if hooks is None:
            hooks = table[output_nr] = _HookDict()
        return add_hook(hooks, fn)

    def apply(self, grads):
        """Input gradients (one per next_functions entry) from output gradients."""
        raise NotImplementedError(type(self).__name__ + " has no backward")

    def _release(self):
        """Free saved tensors once backward has run without retain_graph."""

    def __call__(self, *grads):
        return self.apply(list(grads))


class AccumulateGrad(Node):
    """The node of a leaf that requires grad: adds the incoming gradient to ``variable.grad``.

    Its lock makes the read-modify-write of ``.grad`` atomic when several threads run backward
    into the same leaf (PyTorch's per-node mutex); there is one node per leaf (``accumulate_node``).
    """
    __slots__ = ("variable", "_post_acc_hooks", "_lock")

    def __init__(self, variable):  # one per leaf and graph, on the per-op path: slots set directly
        self.next_functions = ()
        self._seq = LEAF_SEQUENCE
        self._pre_hooks = self._post_hooks = self._tensor_hooks = self._retain_hooks = None
        self._metadata = self._anomaly_trace = self._post_acc_hooks = None
        self.variable = variable
        self._lock = threading.Lock()
        if STATE.anomaly:
            from .anomaly import record_trace
            record_trace(self)

    def apply(self, grads):
        with self._lock:
            accumulate_into(self.variable, grads[0])
            if self._post_acc_hooks:
                for hook in list(self._post_acc_hooks.values()):
                    hook(self.variable)
        return ()


OVERLAP_MESSAGE = ("unsupported operation: more than one element of the written-to tensor refers to a single memory "
                   "location. Please clone() the tensor before performing the operation.")


def accumulate_into(var, g):
    """``var.grad += g``: in place into the existing gradient, unless a graph of the gradient is
    being built or its array cannot take the sum in place."""
    if g is None:
        return
    if g.dtype is not var.dtype:
        g = g.to(var.dtype)
    old = var._grad
    if old is None:
        var._grad = g if STATE.grad_enabled else g._owned_copy()
    elif STATE.grad_enabled:
        var._grad = old + g
    else:
        d = old._data
        if (d.flags.c_contiguous and d.flags.writeable) if d.__class__ is np.ndarray else d.is_c_contiguous():
            old._accumulate_(g)
        else:
            _accumulate_strided(var, old, g)


def _accumulate_strided(var, old, g):
    """``.grad += g`` for a gradient the elementwise kernels cannot write in place (a strided,
    broadcast or read-only array): the sum is computed apart, then copied into the gradient's array,
    which keeps its strides and aliases as in PyTorch. A broadcast gradient (elements sharing
    memory) is PyTorch's error; a read-only NumPy array gets a new gradient instead."""
    d = old._data
    if any(s == 0 and n > 1 for s, n in zip(d.strides, d.shape)):
        raise RuntimeError(OVERLAP_MESSAGE)
    B = backend(d)
    o = g._data
    total = B.run("add", d.dtype, d, o if o.dtype == d.dtype else B.astype(o, d.dtype))
    if d.__class__ is np.ndarray and not d.flags.writeable:
        var._grad = old._wrap(total)
        return
    B.copyto(d, total)
    old._vc[0] += 1


_NEW_NODE_LOCK = threading.Lock()
_NON_LEAF_LOCK = threading.Lock()


def accumulate_node(tensor):
    """The AccumulateGrad node of a leaf (one per tensor, held weakly by it)."""
    ref = tensor._acc_node
    node = ref() if ref is not None else None
    if node is None:
        with _NEW_NODE_LOCK:  # two threads must not give one leaf two nodes (and two locks)
            ref = tensor._acc_node
            node = ref() if ref is not None else None
            if node is None:
                node = AccumulateGrad(tensor)
                tensor._acc_node = weakref.ref(node)
    return node


def accumulate_locked(t, g):
    """``accumulate_into`` outside the engine's AccumulateGrad (``backward(inputs=...)``), under the
    lock of the leaf's node; the gradients of non-leaf tensors share one lock."""
    with accumulate_node(t)._lock if t.grad_fn is None else _NON_LEAF_LOCK:
        accumulate_into(t, g)


def edge(t):
    """(node, output_nr) that a gradient for tensor ``t`` flows into, or None."""
    if t.grad_fn is not None:
        return (t.grad_fn, t._output_nr)
    if t._requires_grad:
        return (accumulate_node(t), 0)
    return None


# ------------------------------------------------------------------ saved tensors
FREED_MESSAGE = (
    "Trying to backward through the graph a second time (or directly access saved tensors after they have "
    "already been freed). Saved intermediate values of the graph are freed when you call .backward() or "
    "autograd.grad(). Specify retain_graph=True if you need to backward through the graph a second time or "
    "if you need to access saved tensors after calling backward.")


class SavedTensor:
    """A tensor saved for backward, with the version it had when saved.

    Reading it (``unpack``) checks the version first: an in-place change since it was saved
    makes the gradient wrong, so it raises. The check also holds when pack/unpack hooks are
    used. An op's own output is saved as its bare array (no grad_fn: no reference cycle) and
    gets its node back, through a weak reference, when unpacked.
    """
    __slots__ = ("_data", "_packed", "_hooks", "_vc", "_version", "_node", "_output_nr", "_saved_fn", "_freed",
                 "_meta")

    def __init__(self, t, is_output=False, node=None):
        if t._inference and not STATE.inference:
            raise RuntimeError(
                "Inference tensors cannot be saved for backward. To work around you can make a clone to get "
                "a normal tensor and use it in autograd.")
        self._vc = t._vc
        self._version = t._vc[0]
        self._freed = False
        self._hooks = None
        self._packed = None
        self._output_nr = t._output_nr
        if is_output:
            self._node = weakref.ref(node)
            self._saved_fn = None  # the node itself, through _node (a strong reference would be a cycle)
            self._data = t._data
        else:
            self._node = None
            self._saved_fn = t.grad_fn  # for the error message: the history the tensor had when saved
            self._data = t
        stack = STATE.saved_tensors_hooks
        if stack:
            self.register_hooks(*stack[-1])

    def _tensor(self):
        """The saved value as a tensor (for an output: an alias with the node as its grad_fn)."""
        d = self._data
        if self._node is None:
            return d
        from .._tensor import Tensor
        t = Tensor._wrap(d)
        t._vc = self._vc
        node = self._node()
        if node is not None:
            t.grad_fn, t._output_nr, t._requires_grad = node, self._output_nr, True
        return t

    def register_hooks(self, pack_hook, unpack_hook):
        if self._freed:
            raise RuntimeError(FREED_MESSAGE)
        if self._hooks is not None:
            raise RuntimeError("Calling register_hooks on a saved tensor whose hooks have already been set. Hint: only "
                               "one pair of hooks is allowed at a time.")
        value = self._tensor()
        if self._node is not None:
            value = value.detach()
        self._hooks = (pack_hook, unpack_hook)
        self._packed = pack_hook(value)
        self._meta = (value.shape, value.dtype)  # for the version error message: the value itself is packed
        self._data = None

    def describe(self):
        """'[jitgrad.FloatTensor [2]], which is output 0 of AddBackward0,' as in PyTorch's message."""
        t = self._data if self._data is not None and self._node is None else None
        if t is not None:
            shape, dtype = t.shape, t.dtype
        elif self._data is None and self._hooks is not None:
            shape, dtype = self._meta
        else:
            from .._dtype import FROM_NP
            arr = self._data if self._data is not None else None
            shape = arr.shape if arr is not None else ()
            dtype = FROM_NP[arr.dtype] if arr is not None else None
        text = "[jitgrad.%s [%s]]" % (dtype.tensor_type if dtype else "Tensor", ", ".join(str(s) for s in shape))
        fn = self._saved_fn if self._node is None else self._node()
        if fn is not None:
            text += ", which is output %d of %s," % (self._output_nr, fn.name())
        return text

    def unpack_data(self):
        """The saved array itself (version-checked): what a fused VJP kernel needs, without a Tensor."""
        if self._hooks is None and not self._freed and self._vc[0] == self._version:
            d = self._data
            return d if self._node is not None else d._data
        return self.unpack()._data

    def unpack(self):
        if self._freed:
            raise RuntimeError(FREED_MESSAGE)
        if self._vc[0] != self._version:
            from .anomaly import version_error
            raise RuntimeError(version_error(self))
        if self._hooks is None:
            return self._tensor()
        t = self._hooks[1](self._packed)
        from .._tensor import Tensor
        if not isinstance(t, Tensor):
            raise TypeError("Output of saved tensor unpack_hook expected to be a Tensor but got result of type "
                            + type(t).__name__)
        if self._node is not None:
            node = self._node()
            if node is not None:
                t = t._alias(grad_fn=node, output_nr=self._output_nr)
        return t

    def release(self):
        self._data = self._packed = None
        self._saved_fn = None
        self._hooks = None  # the unpack hook may hold memory of its own (a checkpoint's recomputed values)
        self._freed = True


class saved_tensors_hooks:
    """Context manager: every tensor saved for backward inside it goes through ``pack_hook`` and comes
    back through ``unpack_hook`` (thread-local; the innermost pair wins)."""

    def __init__(self, pack_hook, unpack_hook):
        self.pair = (pack_hook, unpack_hook)

    def __enter__(self):
        STATE.saved_tensors_hooks = STATE.saved_tensors_hooks + (self.pair,)
        return self

    def __exit__(self, *exc):
        STATE.saved_tensors_hooks = STATE.saved_tensors_hooks[:-1]


class save_on_cpu(saved_tensors_hooks):
    """Context manager: tensors saved for backward inside it are kept in host memory. A device tensor
    is copied to the CPU when saved and back to its device when backward reads it (its history
    re-attached); a CPU tensor is already there and is kept as it is, as in PyTorch."""

    def __init__(self, pin_memory=False, device_type="cuda"):
        super().__init__(_pack_on_cpu, _unpack_from_cpu)


def _pack_on_cpu(t):
    if t.device.type == "cpu":
        return None, t, None, 0
    return t.device, t.detach().cpu(), t.grad_fn, t._output_nr


def _unpack_from_cpu(packed):
    device, t, grad_fn, output_nr = packed
    if device is None:
        return t
    t = t.to(device)
    return t._alias(grad_fn=grad_fn, output_nr=output_nr) if grad_fn is not None else t
