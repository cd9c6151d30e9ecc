"""Shape ops: views (view, reshape, squeeze, unsqueeze, expand, transpose, permute, narrow) share the
input's storage and version counter; repeat, flip, clone, casts and device moves copy (cat and stack are
in join.py)."""
import math
import warnings

import numpy as np

from .. import _dtype as D
from .. import _memory_format as MF
from .._device import CPU, backend as xp_of, cuda_backend
from .._op import Op, dispatch
from .._tensor import Tensor
from ..kernels import cpu
from ._table import _arr, _noncontig, export, register, unary_samples
from .indexing import getitem
from .join import cat, stack  # noqa: F401  (jitgrad.ops.shape.stack: joining lives in join.py)


def _reshape_forward(xp, dt, x, shape):
    return xp.reshape(x, shape)


def _view_forward(xp, dt, x, shape):
    v = xp.view(x, shape)
    if v is None:
        raise RuntimeError("view size is not compatible with input tensor's size and stride (at least one dimension "
                           "spans across two contiguous subspaces). Use .reshape(...) instead.")
    return v


def _back_reshape(g, s):
    return g.reshape(s.self_shape)


def _repeat_grad(g, s):
    shape, reps = s.self_shape, s.reps
    lead = len(reps) - len(shape)
    full = (1,) * lead + tuple(shape)
    split = []
    for r, n in zip(reps, full):
        split += [r, n]
    g = g.reshape(split)
    return g.sum(tuple(range(0, 2 * len(full), 2))).reshape(shape)


# ---------------------------------------------------------------------- shape arithmetic
def _sizes(args):
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        args = tuple(args[0])
    return tuple(int(a) for a in args)


def _check_ints(fn, name, value):
    """PyTorch's TypeError for a dims/sizes argument that is neither an int nor a sequence of ints."""
    if not isinstance(value, (int, np.integer, tuple, list)) or isinstance(value, bool):
        raise TypeError("%s(): argument '%s' must be tuple of ints, not %s" % (fn, name, type(value).__name__))


def infer_shape(shape, numel):
    shape = list(shape)
    neg = [i for i, s in enumerate(shape) if s == -1]
    if len(neg) > 1:
        raise RuntimeError("only one dimension can be inferred")
    for i, s in enumerate(shape):
        if s < -1:
            raise RuntimeError("invalid shape dimension %d at index %d of shape [%s]"
                               % (s, i, ", ".join(map(str, shape))))
    known = math.prod(s for s in shape if s != -1)
    if neg:
        if known == 0 and numel == 0:
            raise RuntimeError("cannot reshape tensor of 0 elements into shape [%s] because the unspecified "
                               "dimension size -1 can be any value and is ambiguous" % ", ".join(map(str, shape)))
        if known == 0 or numel % known:
            raise RuntimeError("shape '[%s]' is invalid for input of size %d" % (", ".join(map(str, shape)), numel))
        shape[neg[0]] = numel // known
    elif known != numel:
        raise RuntimeError("shape '[%s]' is invalid for input of size %d" % (", ".join(map(str, shape)), numel))
    return tuple(shape)


def view(self, *shape):
    if len(shape) == 1 and (isinstance(shape[0], D.dtype) or shape[0] in (float, int, bool)):
        raise RuntimeError("view(dtype) is not supported")
    return dispatch(VIEW, (self,), {"shape": infer_shape(_sizes(shape), self.numel())})


def reshape(input, *shape):
    shape = infer_shape(_sizes(shape), input.numel())
    if not input.is_contiguous() and xp_of(input._data).view(input._data, shape) is None:
        # the layout allows no view: a contiguous copy and a view of it, recorded as PyTorch records them
        # (UnsafeViewBackward0 after CloneBackward0); the result is no view of the input
        return dispatch(UNSAFE_VIEW, (clone(input, memory_format=MF.contiguous_format),), {"shape": shape})
    return dispatch(RESHAPE, (input,), {"shape": shape})


def _unsafe_view(input, *shape):
    """A reshape of a contiguous tensor whose result is no view of it (what reshape records after its copy)."""
    return dispatch(UNSAFE_VIEW, (input,), {"shape": infer_shape(_sizes(shape), input.numel())})


@export(function=False)
def view_as(self, other):
    return view(self, other.shape)


@export(function=False)
def reshape_as(self, other):
    return reshape(self, other.shape)


@export()
def flatten(input, start_dim=0, end_dim=-1):
    if input.ndim == 0:
        return reshape(input, 1)
    s, e = input._wrap_dim(start_dim), input._wrap_dim(end_dim)
    if s > e:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    if s == e:
        return input  # nothing to merge: PyTorch returns the tensor itself (no view, no node)
    shape = input.shape
    return reshape(input, shape[:s] + (math.prod(shape[s:e + 1]),) + shape[e + 1:])


@export()
def unflatten(input, dim, sizes):
    d = input._wrap_dim(dim)
    shape = input.shape
    if -1 not in sizes and math.prod(sizes) != shape[d]:
        raise RuntimeError("unflatten: Provided sizes [%s] don't multiply up to the size of dim %d (%d) in the input "
                           "tensor" % (", ".join(map(str, sizes)), d, shape[d]))
    sizes = infer_shape(tuple(sizes), shape[d])
    return reshape(input, shape[:d] + sizes + shape[d + 1:])


def squeeze(input, dim=None):
    shape = input.shape
    if dim is None:
        return dispatch(SQUEEZE, (input,), {"shape": tuple(s for s in shape if s != 1)})
    _check_ints("squeeze", "dim", dim)
    dims = {input._wrap_dim(d) for d in ((dim,) if isinstance(dim, int) else dim)} if input.ndim else set()
    return dispatch(SQUEEZE_DIM, (input,), {"shape": tuple(s for i, s in enumerate(shape)
                                                          if not (i in dims and s == 1))})


def unsqueeze(input, dim):
    d = input._wrap_dim(dim, input.ndim + 1)
    shape = input.shape
    return dispatch(UNSQUEEZE, (input,), {"shape": shape[:d] + (1,) + shape[d:]})


def expand(self, *sizes):
    sizes = _sizes(sizes)
    shape = self.shape
    if len(sizes) < len(shape):
        raise RuntimeError("expand(%s{[%s]}, size=[%s]): the number of sizes provided (%d) must be greater or equal "
                           "to the number of dimensions in the tensor (%d)" % (
                               self.type(), ", ".join(map(str, shape)), ", ".join(map(str, sizes)), len(sizes),
                               len(shape)))
    lead = len(sizes) - len(shape)
    out = []
    for i, n in enumerate(sizes):
        cur = shape[i - lead] if i >= lead else None
        if n == -1:
            if cur is None:
                raise RuntimeError("The expanded size of the tensor (-1) isn't allowed in a leading, non-existing "
                                   "dimension %d" % i)
            n = cur
        elif cur is not None and cur != 1 and cur != n:
            raise RuntimeError("The expanded size of the tensor (%d) must match the existing size (%d) at non-singleton "
                               "dimension %d.  Target sizes: [%s].  Tensor sizes: [%s]" % (
                                   n, cur, i, ", ".join(map(str, sizes)), ", ".join(map(str, shape))))
        out.append(n)
    return dispatch(EXPAND, (self,), {"shape": tuple(out)})


@export(function=False)
def expand_as(self, other):
    return expand(self, other.shape)


@export()
def broadcast_to(input, size):
    return expand(input, tuple(size))


def repeat(self, *sizes):
    reps = _sizes(sizes)
    if len(reps) < self.ndim:
        raise RuntimeError("Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor")
    if any(r < 0 for r in reps):
        full = (1,) * (len(reps) - self.ndim) + self.shape
        out = [n * r for n, r in zip(full, reps)]
        raise RuntimeError("Trying to create tensor with negative dimension %d: [%s]"
                           % (next(n for n in out if n < 0), ", ".join(map(str, out))))
    return dispatch(REPEAT, (self,), {"reps": reps})


def transpose(input, dim0, dim1):
    if input.ndim == 0:
        input._wrap_dim(dim0)
        input._wrap_dim(dim1)
        return _same_view(input)
    return dispatch(TRANSPOSE, (input,), {"d0": input._wrap_dim(dim0), "d1": input._wrap_dim(dim1)})


@export()
def t(input):
    if input.ndim > 2:
        raise RuntimeError("t() expects a tensor with <= 2 dimensions, but self is %dD" % input.ndim)
    return dispatch(T_VIEW, (input,))


def permute(input, *dims):
    dims = _sizes(dims)
    if len(dims) != input.ndim:
        raise RuntimeError("permute(sparse_coo): number of dimensions in the tensor input does not match the length "
                           "of the desired ordering of dimensions i.e. input.dim() = %d is not equal to len(dims) = %d"
                           % (input.ndim, len(dims)))
    wrapped = tuple(input._wrap_dim(d) for d in dims)
    if len(set(wrapped)) != len(wrapped):
        raise RuntimeError("permute(): duplicate dims are not allowed.")
    return dispatch(PERMUTE, (input,), {"dims": wrapped})


@export()
def movedim(input, source, destination):
    src = [input._wrap_dim(d) for d in ((source,) if isinstance(source, int) else source)]
    dst = [input._wrap_dim(d) for d in ((destination,) if isinstance(destination, int) else destination)]
    order = [d for d in range(input.ndim) if d not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return permute(input, order)


def flip(input, dims):
    _check_ints("flip", "dims", dims)
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    wrapped = tuple(input._wrap_dim(d) for d in dims) if input.ndim else ()  # a 0-d tensor flips to itself
    if len(set(wrapped)) != len(wrapped):
        raise RuntimeError("dim %d appears multiple times in the list of dims" % wrapped[0])
    return dispatch(FLIP, (input,), {"dims": wrapped})


@export()
def narrow(input, dim, start, length):
    d = input._wrap_dim(dim)
    n = input.shape[d]
    if start < -n or start > n:
        raise IndexError("start out of range (expected to be in range of [%d, %d], but got %d)" % (-n, n, start))
    start = start % n if start < 0 else start
    if length < 0 or start + length > n:
        raise RuntimeError("start (%d) + length (%d) exceeds dimension size (%d)." % (start, length, n))
    return getitem(input, (slice(None),) * d + (slice(start, start + length),))


@export()
def select(input, dim, index):
    d = input._wrap_dim(dim)
    n = input.shape[d]
    if index < -n or index >= n:
        raise IndexError("select(): index %d out of range for tensor of size [%s] at dimension %d"
                         % (index, ", ".join(map(str, input.shape)), d))
    return getitem(input, (slice(None),) * d + (index,))


def clone(input, *, memory_format=MF.preserve_format):
    d = input._data
    if memory_format is MF.preserve_format or MF.check(memory_format, "clone") is MF.preserve_format:
        if d.ndim < 2:
            return dispatch(CLONE, (input,))
        order = MF.preserved_order(d.shape, d.strides, input.is_contiguous())
    else:
        order = MF.dim_order(memory_format, d.ndim)
    if order == tuple(range(d.ndim)):
        return dispatch(CLONE, (input,))
    return dispatch(CLONE, (input,), {"order": order})


def _clone_forward(xp, dt, x, order=None):
    """x copied with its dims laid out in ``order``, outermost first (None: C order)."""
    if order is None:
        return xp.copy(x)
    return xp.transpose(xp.copy(xp.transpose(x, order)), MF.unpermute(order))


@export(function=False)
def contiguous(self, memory_format=MF.contiguous_format):
    if self.is_contiguous(MF.check(memory_format, "contiguous")):
        return self
    if memory_format is MF.preserve_format:
        raise RuntimeError("preserve memory format is unsupported by the contiguous operator")
    return clone(self, memory_format=memory_format)


def cast(input, dtype):
    return dispatch(CAST, (input,), {"dtype": dtype})


def _split_sections(n, size):
    """The sizes split(x, size) cuts a dim of n into: size each, the last one smaller."""
    return [min(size, n - i) for i in range(0, n, size)] if size else [0]


@export()
def split(tensor, split_size_or_sections, dim=0):
    _check_ints("split", "split_size", split_size_or_sections)
    if tensor.ndim == 0:
        raise RuntimeError("split expects at least a 1-dimensional tensor")
    d = tensor._wrap_dim(dim)
    if isinstance(split_size_or_sections, (int, np.integer)):
        size = int(split_size_or_sections)
        if size < 0:
            raise RuntimeError("split expects split_size be non-negative, but got split_size=%d" % size)
        if size == 0 and tensor.shape[d]:
            raise RuntimeError("split_size can only be 0 if dimension size is 0, but got dimension size of %d"
                               % tensor.shape[d])
        return dispatch(SPLIT, (tensor,), {"split_size": size, "dim": d})
    return split_with_sizes(tensor, split_size_or_sections, d)


@export()
def split_with_sizes(input, split_sizes, dim=0):
    if not isinstance(split_sizes, (tuple, list)) or not all(
            isinstance(s, (int, np.integer)) and not isinstance(s, bool) for s in split_sizes):
        bad = split_sizes if not isinstance(split_sizes, (tuple, list)) else next(
            s for s in split_sizes if not isinstance(s, (int, np.integer)) or isinstance(s, bool))
        raise TypeError("split_with_sizes(): argument 'split_sizes' (position 2) must be tuple of ints, not %s"
                        % type(bad).__name__)
    d = input._wrap_dim(dim)
    n = input.shape[d]
    sizes = tuple(int(s) for s in split_sizes)
    if any(s < 0 for s in sizes):
        raise RuntimeError("split_with_sizes expects split_sizes have only non-negative entries, but got "
                           "split_sizes=[%s]" % ", ".join(map(str, sizes)))
    if sum(sizes) != n:
        raise RuntimeError("split_with_sizes expects split_sizes to sum exactly to %d (input tensor's size at "
                           "dimension %d), but got split_sizes=[%s]" % (n, d, ", ".join(map(str, sizes))))
    return dispatch(SPLIT_WITH_SIZES, (input,), {"split_sizes": sizes, "dim": d})


def _split_views(xp, x, dim, sizes):
    lead = (slice(None),) * dim
    out, start = [], 0
    for s in sizes:
        out.append(xp.getitem(x, lead + (slice(start, start + s),)))
        start += s
    return tuple(out)


def _split_forward(xp, dt, x, split_size, dim):
    return _split_views(xp, x, dim, _split_sections(x.shape[dim], split_size))


def _split_with_sizes_forward(xp, dt, x, split_sizes, dim):
    return _split_views(xp, x, dim, split_sizes)


def _unbind_forward(xp, dt, x, dim):
    lead = (slice(None),) * dim
    return tuple(xp.getitem(x, lead + (i,)) for i in range(x.shape[dim]))


@export()
def tensor_split(input, indices_or_sections, dim=0):
    """Sections of sizes differing by at most one (the first ones larger), or the pieces between the given
    indices, as Python slices take them (torch.tensor_split)."""
    d = input._wrap_dim(dim)
    n = input.shape[d]
    if isinstance(indices_or_sections, Tensor):
        if indices_or_sections.dtype.name != "int64" or indices_or_sections.ndim > 1:
            raise RuntimeError("tensor_split expected tensor_indices_or_sections to have dtype of long, and be a "
                               "0-D or 1-D tensor, but got a tensor with dtype %s and %d dims"
                               % (indices_or_sections.dtype.name, indices_or_sections.ndim))
        indices_or_sections = indices_or_sections.tolist()
    if isinstance(indices_or_sections, int):
        k = indices_or_sections
        if k <= 0:
            raise RuntimeError("number of sections must be larger than 0, got %d" % k)
        q, r = divmod(n, k)
        bounds = [i * q + min(i, r) for i in range(1, k)]
    else:
        bounds = list(indices_or_sections)
    edges = [0] + bounds + [n]
    pieces = []
    for a, b in zip(edges[:-1], edges[1:]):
        a, b, _ = slice(a, b).indices(n)  # x[a:b], negative indices counted from the end
        pieces.append(getitem(input, (slice(None),) * d + (slice(a, max(a, b)),)))
    return tuple(pieces)


def _split_along(name, input, sections, dim, need):
    if input.ndim < need:
        raise RuntimeError("torch.%s requires a tensor with at least %d dimension, but got a tensor with %d dimensions!"
                           % (name, need, input.ndim))
    if isinstance(sections, int) and (sections == 0 or input.shape[dim] % sections):
        raise RuntimeError("torch.%s attempted to split along dimension %d, but the size of the dimension %d is not "
                           "divisible by the split_size %d!" % (name, dim, input.shape[dim], sections))
    return tensor_split(input, sections, dim)


@export()
def hsplit(input, indices_or_sections):
    return _split_along("hsplit", input, indices_or_sections, 1 if input.ndim > 1 else 0, 1)


@export()
def vsplit(input, indices_or_sections):
    return _split_along("vsplit", input, indices_or_sections, 0, 2)


@export()
def dsplit(input, indices_or_sections):
    return _split_along("dsplit", input, indices_or_sections, 2, 3)


@export()
def chunk(input, chunks, dim=0):
    if chunks <= 0:
        raise RuntimeError("chunk expects `chunks` to be greater than 0, got: %d" % chunks)
    d = input._wrap_dim(dim)
    return dispatch(SPLIT, (input,), {"split_size": max(1, -(-input.shape[d] // chunks)), "dim": d})


@export()
def unbind(input, dim=0):
    if input.ndim == 0:
        raise IndexError("Dimension specified as %d but tensor has no dimensions" % dim)
    return dispatch(UNBIND, (input,), {"dim": input._wrap_dim(dim)})


def _same_view(t):
    """A view of the whole tensor (what t() of a 1-D tensor or T of a 0-d tensor return)."""
    return dispatch(RESHAPE, (t,), {"shape": t.shape})


def _T(self):
    if self.ndim != 2:
        warnings.warn("Tensor.T is deprecated on 0-D tensors. This function is the identity in these cases."
                      if self.ndim == 0 else
                      "The use of `x.T` on tensors of dimension other than 2 to reverse their shape is deprecated and "
                      "it will throw an error in a future release. Consider `x.mT` to transpose batches of matrices "
                      "or `x.permute(*torch.arange(x.ndim - 1, -1, -1))` to reverse the dimensions of a tensor.",
                      UserWarning, stacklevel=2)
    return self.permute(tuple(range(self.ndim - 1, -1, -1)))


def _mT(self):
    return self.transpose(-2, -1)


def _H(self):
    if self.ndim != 2 and self.ndim:
        raise RuntimeError("tensor.H is only supported on matrices (2-D tensors). Got %d-D tensor.%s" % (
            self.ndim, " For batches of matrices, consider using tensor.mH" if self.ndim > 2 else ""))
    if not self.ndim:
        warnings.warn("Tensor.H is deprecated on 0-D tensors. Consider using x.conj().", UserWarning, stacklevel=2)
    return self.transpose(0, 1).conj() if self.ndim else self.conj()


@export()
def adjoint(input):
    if input.ndim < 2:
        raise RuntimeError("tensor.adjoint() is only supported on matrices or batches of matrices. Got %d-D tensor."
                           % input.ndim)
    return input.transpose(-2, -1).conj()


def _mH(self):
    if self.ndim == 1:
        raise RuntimeError("tensor.mH is only supported on matrices or batches of matrices. Got 1-D tensor.")
    if not self.ndim:
        warnings.warn("Tensor.mH is deprecated on 0-D tensors. Consider using x.conj().", UserWarning, stacklevel=2)
        return self.conj()
    return adjoint(self)


Tensor.T = property(_T)
Tensor.mT = property(_mT)
Tensor.H = property(_H)
Tensor.mH = property(_mH)


# ---------------------------------------------------------------------- references and samples (see _table.py)
def _cases(*cases):
    """Samples from (shape, *other args) tuples; a shape given as a list makes a non-contiguous input."""
    def samples(rng, dtype):
        return [(((_noncontig if isinstance(c[0], list) else _arr)(rng, tuple(c[0]), -2.0, 2.0, dtype),) + c[1:], {})
                for c in cases]
    return samples


def _np_squeeze(x, dim):
    dims = {d % max(x.ndim, 1) for d in ((dim,) if isinstance(dim, int) else dim)}
    return x.reshape([n for i, n in enumerate(x.shape) if not (i in dims and n == 1)])


def _np_reshape(x, shape):
    return x.reshape(shape)


# ---------------------------------------------------------------------- the entries
def _shape_op(name, forward, vjp, node=None, view=True, samples=None, **kw):
    """A view, or a copy of the values as they are (float16 and bfloat16 too: ``reduced_precision="native"``)."""
    return register(Op(name, forward, vjp=[vjp], dtype="keep", node=node, view=view, reduced_precision="native",
                       samples=samples or unary_samples(), **kw))


VIEW = _shape_op("view", _view_forward, _back_reshape, node="ViewBackward0", call=view, api=("view",), function=False,
                 ref=_np_reshape, samples=_cases(((2, 3), (3, 2)), ((2, 3), (-1,)), ((), (1, 1)), ((4,), (2, -1)),
                                                 ([3, 2], (3, 1, 2))))
RESHAPE = _shape_op("reshape", _reshape_forward, _back_reshape, node="ViewBackward0", call=reshape, api=("reshape",),
                    ref=_np_reshape, samples=_cases(((2, 3), (3, 2)), ((2, 3), (-1,)), ((), (1,)), ([3, 2], (6,)),
                                                    ([3, 2], (2, -1))))
UNSAFE_VIEW = _shape_op("unsafe_view", _reshape_forward, _back_reshape, view=False, ref=_np_reshape, call=_unsafe_view,
                        samples=_cases(((2, 3), (3, 2)), ((2, 3), (-1,))))
SQUEEZE = _shape_op("squeeze", _reshape_forward, _back_reshape, node="SqueezeBackward0", call=squeeze,
                    api=("squeeze",), ref=np.squeeze, samples=_cases(((1, 3, 1),), ((),), ((2, 3),), ([3, 1],)))
SQUEEZE_DIM = _shape_op("squeeze_dim", _reshape_forward, _back_reshape, node="SqueezeBackward1", call=squeeze,
                        ref=_np_squeeze, samples=_cases(((1, 3, 1), 0), ((1, 3, 1), -1), ((2, 3), 1),
                                                        ((1, 3, 1), (0, 2)), ((), 0), ([3, 1], 1)))
UNSQUEEZE = _shape_op("unsqueeze", _reshape_forward, _back_reshape, node="UnsqueezeBackward0", call=unsqueeze,
                      api=("unsqueeze",), ref=np.expand_dims,
                      samples=_cases(((2, 3), 0), ((2, 3), -1), ((2, 3), 1), ((), 0), ([3, 2], 2)))
EXPAND = _shape_op("expand", lambda xp, dt, x, shape: xp.reshape(x, shape) if x.shape == shape else xp.broadcast_to(x, shape),
                   lambda g, s: g.sum_to_size(s.self_shape), node="ExpandBackward0", call=expand, api=("expand",),
                   function=False, ref=np.broadcast_to,
                   samples=_cases(((3, 1), (3, 4)), ((), (2, 2)), ((3,), (2, 3)), ((2, 1), (2, 2, 3)), ([1, 3], (2, 1, 3))))
TRANSPOSE = _shape_op("transpose", lambda xp, dt, x, d0, d1: xp.swapaxes(x, d0, d1),
                      lambda g, s: g.transpose(s.d0, s.d1), node="TransposeBackward0", call=transpose,
                      api=("transpose", "swapaxes", "swapdims"), ref=np.swapaxes,
                      samples=_cases(((2, 3), 0, 1), ((2, 3, 2), 0, 2), ((2, 3), -1, 0), ((2, 3), 1, 1), ([3, 2], 0, 1)))
T_VIEW = _shape_op("t", lambda xp, dt, x: xp.swapaxes(x, 0, 1) if x.ndim == 2 else xp.reshape(x, x.shape),
                   lambda g, s: g.t(), node="TBackward0", call=t,
                   ref=lambda x: x.T, samples=_cases(((2, 3),), ((3,),), ((),), ([3, 2],)))
PERMUTE = _shape_op("permute", lambda xp, dt, x, dims: xp.transpose(x, dims),
                    lambda g, s: g.permute(tuple(np.argsort(s.dims))), node="PermuteBackward0", call=permute,
                    api=("permute",), ref=np.transpose,
                    samples=_cases(((2, 3), (1, 0)), ((2, 3, 2), (2, 0, 1)), ((2, 3, 2), (-1, 0, 1)), ((), ()),
                                   ([3, 2], (1, 0))))
REPEAT = _shape_op("repeat", lambda xp, dt, x, reps: xp.tile(x, reps), lambda g, s: _repeat_grad(g, s), view=False,
                   call=repeat, api=("repeat",), function=False, ref=np.tile,
                   samples=_cases(((2, 3), (2, 1)), ((3,), (2, 2)), ((), (3,)), ((2, 1), (1, 2, 3)), ([3, 2], (2, 2))))
FLIP = _shape_op("flip", lambda xp, dt, x, dims: xp.flip(x, dims), lambda g, s: g.flip(s.dims), view=False,
                 call=flip, api=("flip",), ref=np.flip,
                 samples=_cases(((2, 3), (0,)), ((2, 3), (0, 1)), ((2, 3, 2), (-1,)), ((5,), (0,)), ([3, 2], (1,))))
CLONE = _shape_op("clone", _clone_forward, lambda g, s: g, view=False, ref=lambda x, order=None: np.copy(x),
                  call=clone, api=("clone",))
CAST = _shape_op("cast", lambda xp, dt, x, dtype: xp.astype(x, dtype.np), lambda g, s: g, view=False,
                 node="ToCopyBackward0", call=Tensor.to, ref=lambda x, dtype: x.astype(dtype.np),
                 samples=_cases(((2, 3), D.float32), ((2, 3), D.float64), ((5,), D.int64), ((), D.bool_),
                                ([3, 2], D.int32)))

# Multi-output views: one node for every piece, as PyTorch's (output_nr 0..k-1); backward fills zeros for the
# pieces that got no gradient (OpNode.apply) and joins them back.
def _np_split(x, split_size_or_sections, dim=0):
    n = x.shape[dim]
    sizes = _split_sections(n, split_size_or_sections) if isinstance(split_size_or_sections, int) \
        else split_size_or_sections
    return tuple(np.split(x, np.cumsum(sizes)[:-1], axis=dim))


def _np_unbind(x, dim=0):
    return tuple(np.moveaxis(x, dim, 0))


SPLIT = register(Op("split", _split_forward, vjp=[lambda g, s: cat(g, s.dim)], n_outputs=None, dtype="keep",
                    view=True, reduced_precision="native", call=split, ref=_np_split,
                    samples=_cases(((6, 3), 2), ((5, 3), 2, 0), ((2, 5), 3, -1), ((2, 3), 3, 1), ([4, 3], 2, 1))))
SPLIT_WITH_SIZES = register(Op("split_with_sizes", _split_with_sizes_forward, vjp=[lambda g, s: cat(g, s.dim)],
                               n_outputs=None, dtype="keep", view=True, reduced_precision="native",
                               call=split_with_sizes, ref=_np_split,
                               samples=_cases(((5, 3), [1, 4]), ((2, 5), (2, 0, 3), 1), ([4, 3], [1, 2], -1))))
UNBIND = register(Op("unbind", _unbind_forward, vjp=[lambda g, s: stack(g, s.dim)], n_outputs=None, dtype="keep",
                     view=True, reduced_precision="native", call=unbind, ref=_np_unbind,
                     samples=_cases(((3, 2),), ((2, 3), 1), ((4,), 0), ((2, 3, 2), -1), ([3, 2], 1))))


# ---------------------------------------------------------------------- devices
def _move_forward(xp, dt, x, device, source):
    target = cpu if device.type == "cpu" else cuda_backend()
    return target.from_host(xp.to_host(x))


def move(input, device):
    """A copy of ``input`` on ``device`` (differentiable: the gradient goes back to the source device)."""
    return dispatch(MOVE, (input,), {"device": device, "source": input.device})


def _move_samples(rng, dtype):
    return [(args + (CPU,), kwargs) for args, kwargs in _cases(((2, 3),), ((),), ([3, 2],))(rng, dtype)]


MOVE = register(Op("move", _move_forward, vjp=[lambda g, s: move(g, s.source)], dtype="keep", node="ToCopyBackward0",
                   reduced_precision="native",
                   call=move, ref=lambda x, device: x.copy(), samples=_move_samples))  # CPU to CPU: a copy


# ---------------------------------------------------------------------- fill_ and copy_
# Out-of-place forms of the in-place fill_/copy_ (see _inplace.inplace): the old values get a zero
# gradient, the new value (a 0-d tensor, or copy_'s source) gets the gradient of what it filled.
def fill(input, value):
    """A tensor like ``input`` filled with ``value`` (the out-of-place form of fill_)."""
    return dispatch(FILL, (input, value))


def copy_from(input, src):
    """``src`` broadcast to ``input``'s shape and dtype (the out-of-place form of copy_)."""
    return dispatch(COPY, (input, src))


FILL = register(Op("fill", lambda xp, dt, x, value: xp.full(x.shape, value, x.dtype), inputs=("self", "value"),
                   vjp=[lambda g, s: g.new_zeros(g.shape), lambda g, s: g.sum()], dtype="keep", reduced_precision="native",
                   node="FillBackward0", ref=lambda x, value: np.full_like(x, value), call=fill,
                   samples=lambda rng, dtype: [((rng.uniform(-1, 1, (2, 3)).astype(dtype), 1.5), {})]))
COPY = register(Op("copy_from", lambda xp, dt, x, src: xp.copy(xp.broadcast_to(src, x.shape)),
                   inputs=("self", "src"), vjp=[lambda g, s: g.new_zeros(g.shape), lambda g, s: g],
                   dtype="keep", reduced_precision="native", node="CopyBackwards", ref=lambda x, src: np.broadcast_to(src, x.shape).astype(x.dtype),
                   call=copy_from, samples=lambda rng, dtype: [((rng.uniform(-1, 1, (2, 3)).astype(dtype),
                                                               rng.uniform(-1, 1, (3,)).astype(dtype)), {})]))
