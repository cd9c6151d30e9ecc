"""SavedTensor: a tensor saved for backward with its version, checked when backward reads it."""
import weakref

from ._anomaly import version_error
from ._dtype import FROM_NP
from ._grad_mode import SPECIAL, STATE
from ._tensor import Tensor

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
    # _data: the saved Tensor (an input) or bare array (an output, whose node is _node); _version is
    # None once freed. The pack/unpack hooks' fields are class-level defaults (set per instance only
    # by the few saved tensors that have hooks).
    __slots__ = ("_data", "_vc", "_version", "_node", "_saved_fn", "_output_nr", "__dict__")
    _hooks = _packed = _meta = None
    _fw_grad = None  # a saved output's tangents {level: tangent}, inside forward AD levels (autograd/forward_ad.py)

    def __init__(self, t, is_output=False, node=None):
        if t._inference and not STATE.inference:
            raise RuntimeError(
                "Inference tensors cannot be saved for backward. To work around you can make a clone to get "
                "a normal tensor and use it in autograd.")
        self._vc = vc = t._vc
        self._version = vc[0]
        self._output_nr = t._output_nr
        if is_output:
            self._node = weakref.ref(node)
            self._saved_fn = None  # the node itself, through _node (a strong reference would be a cycle)
            self._data = t._data
        else:
            self._node = None
            self._saved_fn = t.grad_fn  # for the error message: the history the tensor had when saved
            self._data = t
        if SPECIAL[0] and STATE.saved_tensors_hooks:
            self.register_hooks(*STATE.saved_tensors_hooks[-1])

    @property
    def _freed(self):
        return self._version is None

    def _tensor(self):
        """The saved value as a tensor (for an output: an alias with the node as its grad_fn)."""
        d = self._data
        if self._node is None:
            return d
        t = Tensor._wrap(d)
        t._vc = self._vc
        if self._fw_grad is not None:  # (forward over reverse: the unpacked output carries its tangent)
            t._fw_grad = self._fw_grad
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
        if self._vc[0] == self._version and self._hooks is None:  # a freed one (_version None) goes on to raise
            d = self._data
            return d if self._node is not None else d._data
        return self.unpack()._data

    def unpack(self):
        if self._version is None:
            raise RuntimeError(FREED_MESSAGE)
        if self._vc[0] != self._version:
            raise RuntimeError(version_error(self))
        if self._hooks is None:
            return self._tensor()
        t = self._hooks[1](self._packed)
        if not isinstance(t, Tensor):
            raise TypeError("Output of saved tensor unpack_hook expected to be a Tensor but got result of type "
                            + type(t).__name__)
        if self._node is not None:
            node = self._node()
            if node is not None:
                t = t._alias(grad_fn=node, output_nr=self._output_nr)
        return t

    def release(self):
        self._data = self._saved_fn = self._version = None
        if self._hooks is not None:  # the unpack hook may hold memory of its own (a checkpoint's recomputed values)
            self._hooks = self._packed = None


def save_input(t):
    """``SavedTensor(t)`` for an input, its fields set here directly (one per saved input of every recorded op)."""
    if t._inference or SPECIAL[0] and STATE.saved_tensors_hooks:
        return SavedTensor(t)
    s = _new(SavedTensor)
    s._vc = vc = t._vc
    s._version = vc[0]
    s._output_nr = t._output_nr
    s._node = None
    s._saved_fn = t.grad_fn
    s._data = t
    return s


def save_output(t, node):
    """``SavedTensor(t, is_output=True, node=node)``, its fields set here directly."""
    if t._inference or SPECIAL[0] and STATE.saved_tensors_hooks:
        return SavedTensor(t, True, node)
    s = _new(SavedTensor)
    s._vc = vc = t._vc
    s._version = vc[0]
    s._output_nr = t._output_nr
    s._node = weakref.ref(node)
    s._saved_fn = None
    s._data = t._data
    return s


_new = object.__new__
