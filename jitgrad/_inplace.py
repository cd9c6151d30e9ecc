"""In-place ops and ``__setitem__``: version bumps, the leaf check, and rebasing history.

An in-place op on a tensor with history records the out-of-place op on a copy that stands
for the old value, then writes the result into the tensor's storage and makes the new node
its grad_fn. Writing into a view (or through ``__setitem__``) rebases the *base* tensor's
history onto a CopySlices node, as PyTorch does, and the view's own history is replayed on
top of the new base.
"""
import numpy as np

from ._anomaly import note_inplace
from ._device import backend
from ._dtype import check_scalar
from ._grad_mode import SPECIAL, STATE, no_grad
from ._graph import Node, edge, overlaps
from ._index_key import _is_basic, normalize_key
from ._layout import LAZY, ConjView
from ._op import dispatch
from ._tensor import Tensor, has_tangent
from ._trace_hooks import side_effect

_CAST_NAMES = {"float32": "Float", "float64": "Double", "int64": "Long", "int32": "Int", "bool": "Bool",
               "float16": "Half", "bfloat16": "BFloat16", "complex64": "ComplexFloat", "complex128": "ComplexDouble"}


def check_inplace(t, others=(), key=None):
    if STATE.grad_enabled:
        if t._base is not None:
            _check_multi_output_view(t, others, key)
        # PyTorch's order: a view of a leaf first. Either may be the one requiring grad:
        # arange(6.).reshape(2, 3).requires_grad_() is a leaf and a view of a base that does not.
        b = t._base
        if b is not None and b.grad_fn is None and (t._requires_grad or b._requires_grad):
            raise RuntimeError("a view of a leaf Variable that requires grad is being used in an in-place operation.")
        if t.grad_fn is None and t._requires_grad:
            raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
    if t._inference and not STATE.inference:
        raise RuntimeError("Inplace update to inference tensor outside InferenceMode is not allowed.You can make a "
                           "clone to get a normal tensor before doing inplace update.See "
                           "https://github.com/pytorch/rfcs/pull/17 for more details.")


def _check_multi_output_view(t, others, key=None):
    """PyTorch's error for writing, with grad mode on, into an output of a function that returns several views
    (split, unbind) or a view of one, where the write would be recorded (the view, its base or a written value
    requires grad). A write through ``key`` (setitem) writes into the view ``t[key]`` first."""
    if all(link[2] is None for link in t._view_chain) or not (t._requires_grad or t._base._requires_grad or any(
            isinstance(a, Tensor) and a._requires_grad for a in others)):
        return
    if t.grad_fn is None and t._base._requires_grad:  # (taken in no_grad mode: PyTorch's NO_GRAD_MODE view)
        raise RuntimeError(_NO_GRAD_VIEW + " Given that this use case is ambiguous and error-prone, it is forbidden. "
                           "You can clarify your code by moving both the view and the inplace either both inside the "
                           "no_grad block (if you don't want the inplace to be tracked) or both outside (if you want "
                           "the inplace to be tracked).")
    if t.grad_fn is None:
        what = _NO_GRAD_VIEW
    else:
        name, k = type(t.grad_fn).__name__, t._output_nr
        if key is not None and all(_is_basic(i) for i in key):
            name, k = ("SelectBackward0" if any(isinstance(i, (int, np.integer)) for i in key) else "SliceBackward0"), 0
        what = "Output %d of %s is a view and is being modified inplace." % (k, name[:-len("Backward0")])
    raise RuntimeError(what + " This view is the output of a function that returns multiple views. Such functions do "
                       "not allow the output views to be modified inplace. You should replace the inplace operation by "
                       "an out-of-place one.")


_NO_GRAD_VIEW = "A view was created in no_grad mode and is being modified inplace with grad mode enabled."


def _write(t, value, chain=(), key=None, op_name="__setitem__"):
    """Copy ``value``'s data into ``t`` (or into its region ``chain``/``key``), with PyTorch's checks."""
    src = value._data if isinstance(value, Tensor) else np.asarray(value)
    if isinstance(value, Tensor) and value.dtype.category > t.dtype.category:
        raise RuntimeError("result type %s can't be cast to the desired output type %s"
                           % (_CAST_NAMES[value.dtype.name], _CAST_NAMES[t.dtype.name]))
    if src.__class__ in LAZY:
        src = src.resolved()
    d = t._data
    xp = backend(d)
    if (not d.flags.writeable) if d.__class__ is np.ndarray else overlaps(d):
        _not_writable(t)
    dst = _region_array(d, chain, None)
    if dst.__class__ is ConjView:  # a lazy conjugate stores the conjugates of the values written to it
        dst, src = dst.view(np.ndarray), np.conjugate(src)
    elif dst.__class__ is not np.ndarray and dst.__class__ in LAZY:  # (a lazy negation: their negatives)
        dst, src = dst.view(np.ndarray), np.negative(src)
    if key is None and src.shape != dst.shape and np.broadcast_shapes(src.shape, dst.shape) != dst.shape:
        raise RuntimeError("output with shape [%s] doesn't match the broadcast shape [%s]"
                           % (", ".join(map(str, dst.shape)), ", ".join(map(str, np.broadcast_shapes(src.shape, dst.shape)))))
    try:
        _assign(xp, dst, key, src)
    except ValueError as e:
        raise RuntimeError("shape mismatch: value tensor of shape [%s] cannot be broadcast to indexing result of shape "
                           "[%s]" % (", ".join(map(str, src.shape)), ", ".join(map(str, dst[key].shape)))) from e
    t._vc[0] += 1
    if STATE.anomaly:
        note_inplace(t, op_name)


def _not_writable(t):
    """The error for writing into a read-only array: an expanded tensor (or a view of one), or a tensor on
    a read-only NumPy array it was made from, which is never written to."""
    arr = (t if t._base is None else t._base)._data
    if arr.__class__ is not np.ndarray or arr.flags.writeable or overlaps(t._data):
        raise RuntimeError("unsupported operation: more than one element of the written-to tensor refers to a single "
                           "memory location. Please clone() the tensor before performing the operation.")
    raise RuntimeError("the tensor's memory is a NumPy array that is not writable: in-place operations on it are not "
                       "supported. Copy the array (or clone() the tensor) before writing to it.")


def _assign(xp, dst, key, src):
    if key is None:
        xp.copyto(dst, src)
    else:
        xp.setitem(dst, key, src)


def _stand_in(t):
    """A tensor with ``t``'s current value (copied) and history: the input of the recorded op."""
    s = Tensor._wrap(backend(t._data).copy(t._data), t._requires_grad)
    s.grad_fn = t.grad_fn
    s._output_nr = t._output_nr
    return s


def inplace(self, fn, args, kwargs):
    """Run ``fn(self, *args, **kwargs)`` out of place and make ``self`` hold the result."""
    side_effect("an in-place op (Tensor.%s_)" % fn.__name__)
    if SPECIAL[0] and STATE.vmap is not None:  # inside jitgrad.vmap: a batched target is written batch-wide
        done = STATE.vmap.inplace(self, fn, args, kwargs)
        if done is not None:
            return done
    check_inplace(self, list(args) + list(kwargs.values()))
    if self.dtype.is_complex and fn.__name__ == "abs":  # (its result is real: PyTorch has no in-place form of it)
        raise RuntimeError("In-place abs is not supported for complex tensors.")
    record = STATE.grad_enabled and (self._requires_grad or any(
        isinstance(a, Tensor) and a._requires_grad for a in list(args) + list(kwargs.values())))
    if not record:
        with no_grad():
            r = fn(self, *args, **kwargs)
        _carry_tangent(self, r, fn.__name__ + "_")
        _write(self, r, op_name=fn.__name__ + "_")
        return self
    stand = _stand_in(self)
    stand._fw_grad = self._fw_grad  # (forward-mode AD: the old value's tangent)
    r = fn(stand, *args, **kwargs)
    _carry_tangent(self, r, fn.__name__ + "_")
    if self._base is not None:
        copy_slices(self._base, self._view_chain, None, r, op_name=fn.__name__ + "_")
        _replay_view(self)
        return self
    _write(self, r, op_name=fn.__name__ + "_")
    node = r.grad_fn
    self.grad_fn, self._output_nr, self._requires_grad = node, r._output_nr, True
    moved = getattr(node, "result_moved_to", None)  # a table op's node re-saves its result as ``self``
    if moved is not None:
        moved(self)
    return self


def _carry_tangent(t, r, what):
    """Forward-mode AD: ``t``, written with ``r``, takes ``r``'s tangent."""
    if SPECIAL[0] and STATE.dual is not None and (has_tangent(t) or r._fw_grad is not None):
        STATE.dual.written(t, r._fw_grad, what)


def setitem(self, key, value):
    side_effect("an in-place op (Tensor.__setitem__)")
    if SPECIAL[0] and STATE.dual is not None and (has_tangent(self) or getattr(value, "_fw_grad", None) is not None):
        hook, STATE.dual = STATE.dual, None  # (the primal written as usual, then the tangent's region)
        try:
            setitem(self, key, value)
        finally:
            STATE.dual = hook
        hook.setitem(self, key, value)
        return
    key = normalize_key(self, key)
    if STATE.grad_enabled and self.grad_fn is None and self._requires_grad and all(_is_basic(k) for k in key):
        raise RuntimeError("a view of a leaf Variable that requires grad is being used in an in-place operation.")
    check_inplace(self, (value,), key)
    if not isinstance(value, Tensor):
        if not isinstance(value, (bool, int, float, complex, np.number, np.bool_)):
            raise TypeError("can't assign a %s to a %s" % (type(value).__name__, self.type()))
        if isinstance(value, (complex, np.complexfloating)):  # (into a real tensor: PyTorch's error)
            check_scalar(value, self.dtype)
        value = Tensor._wrap(np.asarray(value, dtype=self.dtype.np))
    elif value.ndim:
        value = _fit_value(self, key, value)
    if not (STATE.grad_enabled and (self._requires_grad or value._requires_grad)):
        _write(self, value, key=key)
        return
    if self._base is not None:
        copy_slices(self._base, self._view_chain, key, value)
        _replay_view(self)
    else:
        copy_slices(self, (), key, value)


def _fit_value(t, key, value):
    """The value as PyTorch writes it into t[key]: leading size-1 dims the region lacks are dropped, and a
    basic-index region takes it as ``value.expand(region)`` does (with expand's errors)."""
    region = np.broadcast_to(np.empty((), np.int8), t.shape)[key].shape  # no data is touched
    while value.ndim > len(region) and value.shape[0] == 1:
        value = value.squeeze(0)
    if value.shape != region and all(_is_basic(k) for k in key):
        with no_grad():
            value.expand(region)
    return value


def _region_array(arr, chain, key):
    for op, params, k in chain:
        arr = op.forward(backend(arr), arr.dtype, arr, **params)
        if k is not None:  # (one output of a multi-output view: split's pieces)
            arr = arr[k]
    return arr[key] if key is not None else arr


def _region_tensor(t, chain, key):
    for op, params, k in chain:
        t = dispatch(op, (t,), params)
        if k is not None:
            t = t[k]
    return t[key] if key is not None else t


def _replay_view(view):
    """After its base was rebased, give ``view`` the history of the same view taken of the new base."""
    v = _region_tensor(view._base, view._view_chain, None)
    view.grad_fn, view._output_nr, view._requires_grad = v.grad_fn, v._output_nr, True


class CopySlices(Node):
    """grad_fn of a tensor part of which was overwritten (setitem, in-place op on a view)."""
    __slots__ = ("chain", "key", "base_shape", "value_meta")

    def apply(self, grads):
        g = grads[0]
        g_base = g_value = None
        if self.next_functions[0][0] is not None:
            mask = np.ones(self.base_shape, dtype=g.dtype.np)
            _assign(backend(mask), _region_array(mask, self.chain, None), self.key, 0)
            g_base = g * Tensor._wrap(backend(g._data).from_host(mask))
        if self.next_functions[1][0] is not None:
            shape, dtype = self.value_meta
            g_value = _region_tensor(g, self.chain, self.key)
            if g_value.shape != shape:
                g_value = g_value.sum_to_size(shape)
            if g_value.dtype is not dtype:
                g_value = g_value.to(dtype)
        return [g_base, g_value]


def copy_slices(base, chain, key, value, op_name="__setitem__"):
    """Write ``value`` into ``region(base)`` and record it as a CopySlices node on ``base``."""
    old = (base.grad_fn, base._output_nr) if base.grad_fn is not None else None
    _write(base, value, chain, key, op_name)
    node = CopySlices((old, edge(value) if value.dtype.is_inexact else None))
    node.chain, node.key, node.base_shape = chain, key, base.shape
    node.value_meta = (value.shape, value.dtype)
    base.grad_fn, base._output_nr, base._requires_grad = node, 0, True
