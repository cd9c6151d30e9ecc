"""Joining: cat and stack copy their inputs into one tensor; their VJPs narrow and select the gradient
back (split, chunk and unbind, the views that undo them, are in shape.py)."""
import numpy as np

from .._op import Op, dispatch
from .._tensor import Tensor
from ._table import _arr, _noncontig, c_order, register


def _cat_forward(xp, dt, *arrays, dim, offsets):
    return c_order(xp.concatenate(arrays, axis=dim))


def _cat_grad(g, s, i):
    return g.narrow(s.dim, s.offsets[i], s.input_meta[i][0][s.dim])


def _check_cat(tensors, dim, name):
    if not isinstance(tensors, (list, tuple)):
        raise TypeError("%s(): argument 'tensors' (position 1) must be tuple of Tensors, not %s"
                        % (name, type(tensors).__name__))
    if not tensors:
        if name == "cat":
            raise ValueError("torch.cat(): expected a non-empty list of Tensors")
        raise RuntimeError("%s expects a non-empty TensorList" % name)
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise TypeError("expected Tensor as element %d in argument 0, but got %s" % (i, type(t).__name__))


def cat(tensors, dim=0):
    _check_cat(tensors, dim, "cat")
    ref = next((t for t in tensors if t.ndim), tensors[0])
    if ref.ndim == 0:
        raise RuntimeError("zero-dimensional tensor (at position 0) cannot be concatenated")
    d = ref._wrap_dim(dim)
    parts = [t for t in tensors if not (t.ndim == 1 and t.numel() == 0)] or list(tensors)
    for i, t in enumerate(parts):
        if t.ndim != ref.ndim:
            raise RuntimeError("Tensors must have same number of dimensions: got %d and %d" % (ref.ndim, t.ndim))
        for k in range(ref.ndim):
            if k != d and t.shape[k] != ref.shape[k]:
                raise RuntimeError("Sizes of tensors must match except in dimension %d. Expected size %d but got size %d "
                                   "for tensor number %d in the list." % (d, ref.shape[k], t.shape[k], i))
    offsets, o = [], 0
    for t in parts:
        offsets.append(o)
        o += t.shape[d]
    return dispatch(CAT, tuple(parts), {"dim": d, "offsets": offsets})


def stack(tensors, dim=0):
    _check_cat(tensors, dim, "stack")
    shape = tensors[0].shape
    for i, t in enumerate(tensors):
        if t.shape != shape:
            raise RuntimeError("stack expects each tensor to be equal size, but got [%s] at entry 0 and [%s] at entry %d"
                               % (", ".join(map(str, shape)), ", ".join(map(str, t.shape)), i))
    return dispatch(STACK, tuple(tensors), {"dim": tensors[0]._wrap_dim(dim, tensors[0].ndim + 1)})


# ---------------------------------------------------------------------- references and samples (see _table.py)
def _tensor_list_samples(rng, dtype):
    A = lambda s: _arr(rng, s, -2.0, 2.0, dtype)  # noqa: E731
    return [(([A((2, 3)), A((1, 3))],), {}), (([A((2, 3)), A((2, 1)), _noncontig(rng, (2, 2), -2.0, 2.0, dtype)], 1), {}),
            (([A((3,)), A((3,))], -1), {})]


def _stack_samples(rng, dtype):
    A = lambda s: _arr(rng, s, -2.0, 2.0, dtype)  # noqa: E731
    return [(([A((2, 3)), A((2, 3))],), {}), (([A((3,)), A((3,)), A((3,))], 1), {}),
            (([A(()), A(())], 0), {}), (([A((2, 3)), _noncontig(rng, (2, 3), -2.0, 2.0, dtype)], -1), {})]


# ---------------------------------------------------------------------- the entries
CAT = register(Op("cat", _cat_forward, inputs=None, vjp=[_cat_grad], dtype="promote", node="CatBackward0",
                  reduced_precision="native",
                  ref=lambda tensors, dim=0: np.concatenate(tensors, axis=dim), samples=_tensor_list_samples, call=cat,
                  api=("cat", "concat", "concatenate"), method=False))
STACK = register(Op("stack", lambda xp, dt, *arrays, dim: c_order(xp.stack(arrays, axis=dim)), inputs=None,
                    vjp=[lambda g, s, i: g.select(s.dim, i)], dtype="promote", node="StackBackward0",
                    reduced_precision="native",
                    ref=lambda tensors, dim=0: np.stack(tensors, axis=dim), samples=_stack_samples, call=stack,
                    api=("stack",), method=False))
