"""Tensor: an array, a version counter shared by its views, and its place in the graph.

Ops are not defined here: their methods, operators and functions are generated from the op
table (jitgrad/ops/) by ``jitgrad.ops.install``. Methods that need a layer above Tensor
(``backward``, the ``cast``/``move`` ops behind ``to``, factory methods) are attached in
jitgrad/__init__.py.
"""
import warnings
import weakref

import numpy as np

from . import _dtype as D
from . import _graph as G
from . import _memory_format as MF
from ._layout import LAZY, ConjView, NegView, strided
from ._device import CPU, Device, backend, device_of, to_device
from ._grad_mode import SPECIAL, STATE
from ._trace_hooks import side_effect, value_read
from ._repr import tensor_repr

NON_LEAF_GRAD_WARNING = (
    "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. Its .grad attribute won't be "
    "populated during autograd.backward(). If you indeed want the .grad field to be populated for a non-leaf "
    "Tensor, use .retain_grad() on the non-leaf Tensor. If you access the non-leaf Tensor by mistake, make sure "
    "you access the leaf Tensor instead. See github.com/pytorch/pytorch/pull/30531 for more informations.")
GRAD_ACCESS = "a .grad access (read or write)"  # (what a compiled trace reports of it)


class Size(tuple):
    """A tensor's shape: a tuple that prints like PyTorch's ``torch.Size``."""

    def __repr__(self):
        return "jitgrad.Size([%s])" % ", ".join(map(str, self))

    def numel(self):
        n = 1
        for s in self:
            n *= s
        return n


class Tensor:
    # Every tensor sets the four slots; the fields most tensors never change are class-level defaults,
    # stored in the instance's __dict__ only by the few tensors that set them (views, leaves with .grad,
    # hooks or an AccumulateGrad node, outputs after the first of an op, inference tensors).
    __slots__ = ("_data", "_vc", "_requires_grad", "grad_fn", "__dict__", "__weakref__")
    _grad = None
    _fw_grad = None  # a dual tensor's tangents (autograd.forward_ad): {level: tangent}
    _output_nr = 0
    _base = None
    _view_chain = ()
    _acc_node = None
    _acc_lock = None  # the lock of its AccumulateGrad nodes (jitgrad/_graph.py)
    _hooks = None
    _inference = False
    layout = strided  # sparse tensors (jitgrad/sparse/) have their own
    is_sparse = is_sparse_csr = False
    __array_priority__ = 1000  # NumPy scalars and arrays defer to Tensor's operators

    # jitgrad.Tensor(data) / Tensor(*sizes): the legacy constructor, jitgrad/_legacy.py's tensor_new,
    # installed as __new__ by jitgrad/__init__.py; __new__ builds the whole tensor
    def __init__(self, *args, **kwargs):
        pass

    @classmethod
    def _wrap(cls, data, requires_grad=False):
        """A new leaf around a NumPy array (no copy): the one constructor on the hot path."""
        t = object.__new__(cls)
        t._data = data
        t._vc = [0]
        t._requires_grad = requires_grad
        t.grad_fn = None
        if SPECIAL[0] and STATE.inference:
            t._inference = True
        return t

    def _alias(self, grad_fn=None, output_nr=0, share_version=True):
        """A new Tensor object on the same array (and version counter), with the given history."""
        t = Tensor._wrap(self._data, grad_fn is not None)
        if share_version:
            t._vc = self._vc
        t.grad_fn = grad_fn
        if output_nr:
            t._output_nr = output_nr
        if t._inference is not self._inference:
            t._inference = self._inference
        return t

    # ------------------------------------------------------------- basic attributes
    @property
    def dtype(self):
        return D.FROM_NP[self._data.dtype]

    @property
    def device(self):
        return CPU if self._data.__class__ is np.ndarray else device_of(self._data)  # (ConjView: CPU too)

    @property
    def shape(self):
        return Size(self._data.shape)

    def size(self, dim=None):
        if dim is None:
            return Size(self._data.shape)
        return self._data.shape[self._wrap_dim(dim)]

    @property
    def ndim(self):
        return self._data.ndim

    def dim(self):
        return self._data.ndim

    ndimension = dim

    def numel(self):
        return self._data.size

    nelement = numel

    def element_size(self):
        return self._data.dtype.itemsize

    @property
    def is_cuda(self):
        return not isinstance(self._data, np.ndarray)

    @property
    def is_cpu(self):
        return isinstance(self._data, np.ndarray)

    # PyTorch's predicates of devices and layouts jitgrad has none of, for code that branches on them
    is_xpu = is_mps = is_meta = is_ipu = is_xla = is_hpu = is_maia = is_mtia = is_vulkan = is_mkldnn = is_quantized = \
        is_nested = property(lambda self: False)

    def is_signed(self):
        return self.dtype.name not in ("bool", "uint8")

    def is_nonzero(self):
        if self.numel() == 0:
            raise RuntimeError("Boolean value of Tensor with no values is ambiguous")
        if self.numel() > 1:
            raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
        return bool(self._host().reshape(()).item())

    def is_same_size(self, other):
        return tuple(self.shape) == tuple(other.shape)

    def is_shared(self):
        return False

    def is_pinned(self, device=None):
        return False

    def is_conj(self):
        """Whether this is a lazy conjugate (``z.conj()`` of a complex ``z``, and views of one)."""
        return self._data.__class__ is ConjView

    def is_neg(self):
        """Whether this is a lazy negation (``z.conj().imag``, and views of one)."""
        return self._data.__class__ is NegView

    def is_distributed(self):
        return False

    @property
    def __cuda_array_interface__(self):
        """Zero-copy view for CUDA libraries (CuPy, PyTorch, numba kernels); CPU tensors have none."""
        if self._data.__class__ is np.ndarray:
            raise AttributeError("Can't get __cuda_array_interface__ on non-CUDA tensor type: %s. If CUDA data is "
                                 "required use tensor.cuda() to copy tensor to device memory." % self.type())
        if self._requires_grad:
            raise RuntimeError("Can't get __cuda_array_interface__ on Variable that requires grad. If gradients "
                               "aren't required, use var.detach() to get Variable that doesn't require grad.")
        return self._data.__cuda_array_interface__

    def __dlpack__(self, stream=None, **kwargs):
        """DLPack export of a CPU tensor (zero copy; GPU tensors export __cuda_array_interface__)."""
        if self._requires_grad:
            raise RuntimeError("Can't export tensors that require gradient, use tensor.detach()")
        if self._data.__class__ is not np.ndarray:
            raise BufferError("DLPack export of CUDA tensors is not supported: use __cuda_array_interface__")
        return self._data.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return (1, 0) if self._data.__class__ is np.ndarray else (2, 0)  # kDLCPU, kDLCUDA

    def _host(self):
        """The data as a NumPy array (a copy from the device for CUDA tensors)."""
        if SPECIAL[0]:  # (a compiled trace hears of it; a plain call pays one check)
            value_read("a tensor's values read in Python (nonzero, masked_select, ...)")
        d = self._data
        if d.__class__ is np.ndarray:
            return d
        return d.resolved() if d.__class__ in LAZY else backend(d).to_host(d)

    @property
    def is_leaf(self):
        return self.grad_fn is None

    @property
    def output_nr(self):
        """Which output of its grad_fn this tensor is (0 for a leaf)."""
        return self._output_nr

    @property
    def _version(self):
        return self._vc[0]

    def is_floating_point(self):
        return self.dtype.is_floating_point

    def is_complex(self):
        return self.dtype.is_complex

    def is_inference(self):
        return self._inference

    def is_contiguous(self, memory_format=MF.contiguous_format):
        d = self._data
        if memory_format is MF.contiguous_format or MF.check(memory_format, "is_contiguous") is MF.preserve_format:
            return backend(d).is_contiguous(d)
        return MF.is_in(d.shape, self.stride(), memory_format)

    def data_ptr(self):
        d = self._data
        return backend(d).address(d)

    def stride(self, dim=None):
        st = tuple(s // self._data.dtype.itemsize for s in self._data.strides)
        return st if dim is None else st[self._wrap_dim(dim)]

    def storage_offset(self):
        base = self._base._data if self._base is not None else self._data
        return (self.data_ptr() - backend(base).address(base)) // self._data.dtype.itemsize

    def _wrap_dim(self, dim, ndim=None):
        n = self._data.ndim if ndim is None else ndim
        lo, hi = (-1, 0) if n == 0 else (-n, n - 1)
        if not isinstance(dim, (int, np.integer)) or isinstance(dim, bool):
            raise TypeError("dim must be an int, but got %s" % type(dim).__name__)
        if dim < lo or dim > hi:
            raise IndexError("Dimension out of range (expected to be in range of [%d, %d], but got %d)" % (lo, hi, dim))
        return dim % n if n else 0

    # ------------------------------------------------------------- autograd attributes
    @property
    def requires_grad(self):
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, value):
        self._set_requires_grad(value, "only Tensors of floating point and complex dtype can require gradients")

    def requires_grad_(self, requires_grad=True):
        return self._set_requires_grad(requires_grad, "only Tensors of floating point dtype can require gradients")

    def _set_requires_grad(self, requires_grad, not_float_error):
        # PyTorch words the integer-dtype error differently for the setter, the method and the factories
        if self.grad_fn is not None:
            if requires_grad:
                return self
            raise RuntimeError(
                "you can only change requires_grad flags of leaf variables. If you want to use a computed variable "
                "in a subgraph that doesn't require differentiation use var_no_grad = var.detach().")
        if requires_grad and not self.dtype.is_inexact:
            raise RuntimeError(not_float_error)
        if requires_grad and self._inference and not STATE.inference:
            raise RuntimeError("Setting requires_grad=True on inference tensor outside InferenceMode is not allowed.")
        self._requires_grad = bool(requires_grad)
        return self

    @property
    def grad(self):
        if SPECIAL[0]:  # (a compiled trace hears of it; a plain call pays one check)
            side_effect(GRAD_ACCESS)
        if self.grad_fn is not None and self._grad is None and not self.retains_grad:
            warnings.warn(NON_LEAF_GRAD_WARNING, UserWarning, stacklevel=2)
        return self._grad

    @grad.setter
    def grad(self, value):
        if SPECIAL[0]:  # (a compiled trace hears of it; a plain call pays one check)
            side_effect(GRAD_ACCESS)
        if value is not None:
            if not isinstance(value, Tensor):
                raise TypeError("assigned grad expected to be a Tensor or None but got grad of type "
                                + type(value).__name__)
            if value.shape != self.shape:
                raise RuntimeError("assigned grad has data of a different size")
            if value.dtype is not self.dtype:
                raise RuntimeError("assigned grad has data of a different type")
        self._grad = value

    @grad.deleter
    def grad(self):
        if SPECIAL[0]:  # (a compiled trace hears of it; a plain call pays one check)
            side_effect(GRAD_ACCESS)
        self._grad = None

    @property
    def retains_grad(self):
        fn = self.grad_fn
        return bool(fn is not None and fn._retain_hooks and fn._retain_hooks.get(self._output_nr))

    def retain_grad(self):
        if not self._requires_grad:
            raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
        if self.grad_fn is None or self.retains_grad:
            return
        ref = weakref.ref(self)

        def retain(grad):
            t = ref()
            if t is None or grad is None:
                return
            if t._grad is None:
                t._grad = grad._owned_copy() if not STATE.grad_enabled else grad
            else:
                t._grad = t._grad + grad
        self.grad_fn._register_tensor_hook(self._output_nr, retain, retain=True)

    def register_hook(self, hook):
        """``hook(grad)`` runs when the gradient of this tensor is computed; it may return a new one."""
        if not self._requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        if self.grad_fn is not None:
            return self.grad_fn._register_tensor_hook(self._output_nr, hook)
        if self._hooks is None:
            self._hooks = G._HookDict()
        return G.add_hook(self._hooks, hook)

    def register_post_accumulate_grad_hook(self, hook):
        """``hook(tensor)`` runs after the gradient has been accumulated into ``tensor.grad`` (leaves only)."""
        if self.grad_fn is not None:
            raise RuntimeError("post accumulate grad hooks cannot be registered on non-leaf tensors")
        if not self._requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        node = G.accumulate_node(self)
        self.__dict__.setdefault("_acc_node_keepalive", node)  # the hook lives as long as the tensor
        if node._post_acc_hooks is None:
            node._post_acc_hooks = G._HookDict()
        return G.add_hook(node._post_acc_hooks, hook)

    # backward(): the engine's (jitgrad/autograd/engine.py, a layer above), attached in jitgrad/__init__.py

    def detach(self):
        """Same data and version counter, no history."""
        return self._alias()

    def detach_(self):
        side_effect("an in-place op (Tensor.detach_)")
        if self._base is not None and self._base._requires_grad:
            raise RuntimeError("Can't detach views in-place. Use detach() instead. If you are using DistributedDataParallel "
                               "(DDP) for training, and gradient_as_bucket_view is set as True, gradients are views of "
                               "DDP buckets, and hence detach_() cannot be called on these gradients. To fix this error, "
                               "please refer to the Optimizer.zero_grad() function in torch/optim/optimizer.py as the "
                               "solution.")
        self.grad_fn = None
        self._requires_grad = False
        return self

    @property
    def data(self):
        """Same data, new version counter, no history (in-place changes through it are not tracked)."""
        return Tensor._wrap(self._data)

    @data.setter
    def data(self, value):
        if not isinstance(value, Tensor):
            raise TypeError("data must be a Tensor")
        self._data = value._data

    def _owned_copy(self):
        """A detached tensor whose array nobody else writes to (for .grad)."""
        d = self._data
        return Tensor._wrap(np.array(d, order="C") if d.__class__ is np.ndarray else backend(d).copy(d))

    def _accumulate_(self, other):
        """self += other in place (gradient accumulation; no autograd, no version check)."""
        d, o = self._data, other._data
        xp = backend(d)
        if d.dtype in D.REDUCED_NP:  # float16/bfloat16: the sum computed in float32, rounded back
            c = D.FROM_NP[d.dtype].compute.np
            xp.copyto(d, xp.run("add", c, xp.astype(d, c), xp.astype(o, c)))
        else:
            xp.run("add", d.dtype, d, o if o.dtype == d.dtype else xp.astype(o, d.dtype), out=d)
        self._vc[0] += 1

    # ------------------------------------------------------------- conversion
    def numpy(self, *, force=False):
        value_read("Tensor.numpy()")
        if self._requires_grad and not force:
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.")
        if self._data.dtype == D.bfloat16.np:  # NumPy has no bfloat16 (the array is ml_dtypes'): PyTorch refuses too
            raise TypeError("Got unsupported ScalarType BFloat16")
        if self._data.__class__ is ConjView:  # (force=True: the resolved values, as PyTorch's)
            if not force:
                raise RuntimeError("Can't call numpy() on Tensor that has conjugate bit set. Use "
                                   "tensor.resolve_conj().numpy() instead.")
            return self._data.resolved()
        if self._data.__class__ is NegView:
            if not force:
                raise RuntimeError("Can't call numpy() on Tensor that has negative bit set. Use "
                                   "tensor.resolve_neg().numpy() instead.")
            return self._data.resolved()
        if self._data.__class__ is not np.ndarray:
            if not force:
                raise TypeError("can't convert %s device type tensor to numpy. Use Tensor.cpu() to copy the tensor to "
                                "host memory first." % self.device)
            return self._host()
        return self._data

    def __array__(self, dtype=None, copy=None):
        value_read("a tensor converted to a NumPy array")
        a = self.numpy()
        return a if dtype is None else a.astype(dtype)

    def item(self):
        value_read("Tensor.item()")
        if self._data.size != 1:
            raise RuntimeError("a Tensor with %d elements cannot be converted to Scalar" % self._data.size)
        return self._host().reshape(()).item()

    def tolist(self):
        value_read("Tensor.tolist()")
        return self._host().tolist()

    def __float__(self):
        value_read("float(tensor)")
        return float(_real_scalar(self._scalar(), "double"))

    def __int__(self):
        value_read("int(tensor)")
        return int(_real_scalar(self._scalar(), "int64_t"))

    def _scalar(self):
        if self._data.size != 1:
            raise ValueError("only one element tensors can be converted to Python scalars")
        return self.item()

    def __index__(self):
        value_read("a tensor used as an index")
        if self.dtype.is_inexact or self._data.size != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self.item())

    def __bool__(self):
        value_read("bool(tensor)")
        if self._data.size != 1:
            raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
        return bool(self.item())

    def __len__(self):
        if self._data.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self._data.shape[0]

    def __iter__(self):
        if self._data.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return iter(self.unbind(0))

    def __hash__(self):
        return id(self)

    def __contains__(self, element):
        return bool((self == element).any())

    def __repr__(self, *, tensor_contents=None):
        return tensor_repr(self)

    __str__ = __repr__

    def __format__(self, spec):
        # as PyTorch: a 0-d Tensor (requiring grad or not; not a subclass) formats as its value
        if self._data.ndim == 0 and type(self) is Tensor:
            return self.item().__format__(spec)
        return object.__format__(self, spec)

    def __reduce_ex__(self, proto):
        return (_rebuild, (backend(self._data).copy(self._data), self._requires_grad))

    def __deepcopy__(self, memo):
        if self.grad_fn is not None:
            raise RuntimeError("Only Tensors created explicitly by the user (graph leaves) support the deepcopy protocol "
                               "at the moment.  If you were attempting to deepcopy a module, this may be because of a "
                               "torch.nn.utils.weight_norm usage, see https://github.com/pytorch/pytorch/pull/103001")
        t = type(self).__new__(type(self))
        Tensor.__setstate_from(t, backend(self._data).copy(self._data), self._requires_grad)
        if self._grad is not None:
            t._grad = self._grad._owned_copy()
        memo[id(self)] = t
        return t

    @staticmethod
    def __setstate_from(t, data, requires_grad):
        w = Tensor._wrap(data, requires_grad)
        for s in Tensor.__slots__:
            if s not in ("__dict__", "__weakref__"):
                object.__setattr__(t, s, getattr(w, s))
        t.__dict__.update(w.__dict__)

    def to(self, *args, **kwargs):
        """``to(dtype)``, ``to(device)``, ``to(device, dtype)`` or ``to(other)``, and ``memory_format``; returns self
        if nothing changes."""
        dtype = kwargs.pop("dtype", None)
        device = kwargs.pop("device", None)
        kwargs.pop("non_blocking", None)
        copy = kwargs.pop("copy", False)
        memory_format = MF.check(kwargs.pop("memory_format", MF.preserve_format), "to")
        for a in args:
            if isinstance(a, Tensor):
                dtype, device = a.dtype, a.device
            elif isinstance(a, (str, Device)):
                device = a
            elif a is not None:
                dtype = a
        t = self  # _cast, _move: the cast and move ops (jitgrad/ops/shape.py), attached in jitgrad/__init__.py
        if dtype is not None and D.to_dtype(dtype) is not self.dtype:
            t = t._cast(D.to_dtype(dtype))
        if device is not None and to_device(device) != t.device:
            t = t._move(to_device(device))
        elif copy and t is self:
            t = t.clone()
        if memory_format is not MF.preserve_format and MF.suggested(t.shape, t.stride()) is not memory_format:
            t = t.clone(memory_format=memory_format)  # (PyTorch's rule: a copy unless the strides suggest the format)
        return t

    def type(self, dtype=None, non_blocking=False, **kwargs):
        """The legacy type name ('jitgrad.FloatTensor'), or a copy converted to the type given as a name
        ('torch.LongTensor', 'jitgrad.cuda.FloatTensor'), a legacy type class or a dtype."""
        if dtype is None:
            return ("jitgrad." if self._data.__class__ is np.ndarray else "jitgrad.cuda.") + self.dtype.tensor_type
        if isinstance(dtype, str):
            return self.to(*_type_from_name(dtype))
        return self.to(getattr(dtype, "dtype", dtype) if isinstance(getattr(dtype, "dtype", None), D.dtype) else dtype)

    def float(self):
        return self.to(D.float32)

    def double(self):
        return self.to(D.float64)

    def half(self):
        return self.to(D.float16)

    def bfloat16(self):
        return self.to(D.bfloat16)

    def long(self):
        return self.to(D.int64)

    def int(self):
        return self.to(D.int32)

    def bool(self):
        return self.to(D.bool_)

    def type_as(self, other):
        return self.to(other.dtype)

    def cpu(self):
        return self.to("cpu")

    def cuda(self, device=None, non_blocking=False):
        return self.to("cuda" if device is None else device)


def _real_scalar(v, c_type):
    """A complex tensor's value as a real number: PyTorch's error unless its imaginary part is 0."""
    if v.__class__ is complex:
        if v.imag:
            raise RuntimeError("value cannot be converted to type %s without overflow" % c_type)
        return v.real
    return v


def has_tangent(t):
    """Whether forward-mode AD gives tensor ``t`` a tangent: its own, or (a view) its base's."""
    return t._fw_grad is not None or t._base is not None and t._base._fw_grad is not None


def _type_from_name(name):
    """(dtype, device) for a legacy type name: 'torch.FloatTensor', 'jitgrad.cuda.LongTensor'."""
    parts = name.split(".")
    if len(parts) in (2, 3) and parts[0] in ("torch", "jitgrad") and (len(parts) == 2 or parts[1] == "cuda"):
        for d in D.ALL + (D.uint8,):
            if d.tensor_type == parts[-1]:
                return d, "cuda" if len(parts) == 3 else "cpu"
    raise ValueError("invalid type: %r" % name)


def _rebuild(data, requires_grad):
    return Tensor._wrap(data, requires_grad)
