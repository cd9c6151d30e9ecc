"""The backward graph's primitives: Node (a grad_fn), AccumulateGrad, edges, hooks, and ``.grad`` accumulation.

They sit below Tensor, which keeps its grad_fn, hooks and AccumulateGrad node through them; saved
tensors, which wrap Tensors, are in jitgrad/_saved.py. The public names are in jitgrad.autograd.graph.
"""
import itertools
import sys
import threading
import weakref

import numpy as np

from ._anomaly import record_trace
from ._device import backend
from ._dtype import FROM_NP, REDUCED_NP
from ._grad_mode import SPECIAL, STATE
from ._layout import LAZY, strided

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


# compiled autograd's switches (autograd/engine.py fills them from the environment): recording builds node keys only
# while it is enabled
COMPILED_AUTOGRAD = {}


class Node:
    """A node of the backward graph (``tensor.grad_fn``)."""
    # Hooks, metadata and the anomaly trace are class-level defaults: the few nodes that have any keep
    # theirs in the instance's __dict__, so building a node sets two fields.
    __slots__ = ("next_functions", "_seq", "__dict__", "__weakref__")
    n_outputs = 1
    _pre_hooks = _post_hooks = _tensor_hooks = _retain_hooks = None
    _hooked = False  # set once any hook is registered: the engine looks at the hooks of such nodes only
    _metadata = _anomaly_trace = None
    _key = 0  # a structural key of the graph below (OpNode's is built as dispatch records it; others: 0)

    def __init__(self, next_functions=()):
        if None in next_functions:
            next_functions = tuple(NO_EDGE if e is None else e for e in next_functions)
        self.next_functions = next_functions
        self._seq = next(SEQUENCE)
        if SPECIAL[0] and STATE.anomaly:
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
            self._hooked = True
        return add_hook(self._post_hooks, fn)

    def register_prehook(self, fn):
        """``fn(grad_outputs)`` runs before the node; it may return new grad_outputs."""
        if self._pre_hooks is None:
            self._pre_hooks = _HookDict()
            self._hooked = True
        return add_hook(self._pre_hooks, fn)

    def _register_tensor_hook(self, output_nr, fn, retain=False):
        attr = "_retain_hooks" if retain else "_tensor_hooks"
        table = getattr(self, attr)
        if table is None:
            table = {}
            setattr(self, attr, table)
            self._hooked = True
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
    The lock is the leaf's, made with its first node: a graph that dies takes its node along, and the
    next graph's node (one per op on a 16-element training loop) need not make a lock again.
    """
    __slots__ = ("variable", "_key")
    _post_acc_hooks = None

    def __init__(self, variable):  # one per leaf and graph, on the per-op path: slots set directly
        self.next_functions = ()
        self._seq = LEAF_SEQUENCE
        self.variable = variable
        d = variable._data
        self._key = hash((d.shape, d.dtype, d.__class__))  # (the device class too: a CUDA graph is not a CPU one)
        if variable._acc_lock is None:  # (under accumulate_node's lock: one per leaf)
            variable._acc_lock = threading.Lock()
        if SPECIAL[0] and STATE.anomaly:
            record_trace(self)

    @property
    def _lock(self):
        return self.variable._acc_lock

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
    if g._data.__class__ in LAZY:  # (a lazy conjugate's or negation's values, summed in place below)
        g = g.resolve_conj().resolve_neg()
    if g._data.dtype != var._data.dtype:
        g = g.to(var.dtype)
    old = var._grad
    if g.layout is not strided or old is not None and old.layout is not strided:
        # sparse gradients (jitgrad.sparse) are summed out of place; with a dense one the sum is dense + sparse
        var._grad = g if old is None else old + g if g.layout is not strided else g + old
        return
    if old is None:
        var._grad = g if STATE.grad_enabled or _can_steal(g) else g._owned_copy()
    elif STATE.grad_enabled:
        var._grad = old + g
    else:
        d = old._data
        if (d.flags.c_contiguous and d.flags.writeable) if d.__class__ is np.ndarray else d.is_c_contiguous():
            old._accumulate_(g)
        else:
            _accumulate_strided(var, old, g)


def _can_steal(g):
    """Whether ``.grad`` may take over gradient ``g`` itself instead of a copy: nothing else holds
    the tensor or its array (the engine's buffer and this call's frames aside), and the array owns
    its C-contiguous, writable memory, so later in-place accumulation writes to nobody else's data."""
    d = g._data
    if sys.getrefcount(g) > 4 or sys.getrefcount(d) > 3:
        return False
    if d.__class__ is np.ndarray:
        if not (d.flags.c_contiguous and d.flags.writeable):
            return False
        b = d.base  # (a view may be taken when it is the whole of an array no other view holds: a transpose's
        # transpose, as F.linear's weight gradient comes back through TBackward0)
        return b is None or (b.__class__ is np.ndarray and b.shape == d.shape and b.strides == d.strides
                             and b.base is None and b.flags.writeable and sys.getrefcount(b) <= 2)
    return backend(d).holds_its_memory_alone(d)


def overlaps(a):
    """Whether elements of array ``a`` share memory: a zero stride over more than one element (an expanded
    tensor). NumPy makes such views read-only; device arrays have no such flag."""
    return any(s == 0 and n > 1 for s, n in zip(a.strides, a.shape))


def _accumulate_strided(var, old, g):
    """``.grad += g`` for a gradient the elementwise kernels cannot write in place (a strided,
    broadcast or read-only array): the sum is computed apart, then copied into the gradient's array,
    which keeps its strides and aliases as in PyTorch. A broadcast gradient (elements sharing
    memory) is PyTorch's error; a read-only NumPy array gets a new gradient instead."""
    d = old._data
    if overlaps(d):
        raise RuntimeError(OVERLAP_MESSAGE)
    B = backend(d)
    o = g._data
    if d.dtype in REDUCED_NP:  # float16/bfloat16: the sum computed in float32, rounded back
        c = FROM_NP[d.dtype].compute.np
        total = B.astype(B.run("add", c, B.astype(d, c), B.astype(o, c)), d.dtype)
    else:
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
        _NEW_NODE_LOCK.acquire()  # two threads must not give one leaf two nodes (and two locks)
        try:
            ref = tensor._acc_node
            node = ref() if ref is not None else None
            if node is None:
                node = AccumulateGrad(tensor)
                tensor._acc_node = weakref.ref(node)
        finally:
            _NEW_NODE_LOCK.release()
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
