"""PyTorch's legacy constructors: ``Tensor(data)`` / ``Tensor(*sizes)`` and the typed ``FloatTensor``,
``LongTensor``, ... classes (constructors whose ``isinstance`` checks a tensor's dtype and device)."""
from . import _dtype as D
from ._factories import tensor, zeros
from ._tensor import Size, Tensor


def _signature(args, kwargs):
    parts = [type(a).__name__ for a in args] + ["%s=%s" % (k, _kind(v)) for k, v in kwargs.items()]
    return ", ".join(parts)


def _kind(v):
    return "jitgrad.dtype" if isinstance(v, D.dtype) else type(v).__name__


def _bad_arguments(args, kwargs):
    return TypeError(
        "new() received an invalid combination of arguments - got (%s), but expected one of:\n"
        " * (*, jitgrad.device device = None)\n"
        " * (Tensor other)\n"
        " * (tuple of ints size, *, jitgrad.device device = None)\n"
        " * (object data, *, jitgrad.device device = None)\n" % _signature(args, kwargs))


def _is_size(x):
    return isinstance(x, int) and not isinstance(x, bool)


def _options(d):
    return ("TensorOptions(dtype=%s, device=cpu, layout=Strided, requires_grad=false (default), pinned_memory=false "
            "(default), memory_format=(nullopt))" % {"float32": "float", "float64": "double", "int64": "long int",
                                                      "int32": "int", "bool": "bool", "float16": "c10::Half",
                                                      "bfloat16": "c10::BFloat16",
                                                      "uint8": "unsigned char"}.get(d.name, d.name))


def legacy_new(dtype, args, kwargs):
    """What ``Tensor(...)`` / ``FloatTensor(...)`` build: ``dtype`` None means the default dtype, and a
    tensor argument is then taken in whatever dtype it has (as torch.Tensor does)."""
    if set(kwargs) - {"device"}:
        raise _bad_arguments(args, kwargs)
    device = kwargs.get("device")
    target = dtype or D.get_default_dtype()
    if not args:
        return zeros(0, dtype=target, device=device)
    if len(args) == 1 and isinstance(args[0], Tensor):
        other = args[0]
        if dtype is not None and other.dtype is not dtype:
            raise TypeError("expected %s (got %s)" % (_options(dtype), _options(other.dtype)))
        # the same data; a tensor that requires grad comes back as a differentiable alias of itself
        return other.view_as(other) if other.requires_grad else other.detach()
    if len(args) == 1 and isinstance(args[0], Size) or all(_is_size(a) for a in args):
        sizes = tuple(args[0]) if isinstance(args[0], Size) else args
        return zeros(*sizes, dtype=target, device=device)
    if len(args) != 1:
        raise _bad_arguments(args, kwargs)
    data = args[0]
    if isinstance(data, str):
        raise TypeError("new(): invalid data type 'str'")
    if isinstance(data, (int, float, bool, complex)):
        raise TypeError("new(): data must be a sequence (got %s)" % type(data).__name__)
    return tensor(data, dtype=target, device=device)


def tensor_new(cls, *args, **kwargs):
    """``jitgrad.Tensor(...)``: installed as Tensor.__new__ by jitgrad/__init__.py (a subclass gets an
    instance of itself on the same data)."""
    t = legacy_new(None, args, kwargs)
    if cls is Tensor:
        return t
    s = cls._wrap(t._data, t._requires_grad and t.grad_fn is None)
    s._vc = t._vc
    return s


class tensortype(type):
    """The metaclass of FloatTensor & co: calling one builds a tensor of its dtype; ``isinstance``
    holds for CPU tensors of that dtype (as in PyTorch)."""

    def __call__(cls, *args, **kwargs):
        return legacy_new(cls.dtype, args, kwargs)

    def __instancecheck__(cls, obj):
        return isinstance(obj, Tensor) and obj.dtype is cls.dtype and not obj.is_cuda

    def __repr__(cls):
        return "<class 'jitgrad.%s'>" % cls.__name__


def _typed(d):
    return tensortype(d.tensor_type, (), {"dtype": d, "is_cuda": False, "is_sparse": False, "__module__": "jitgrad",
                                          "__doc__": "%s tensors (legacy constructor)" % d.name})


TYPES = {d.tensor_type: _typed(d) for d in D.ALL + (D.uint8,)}  # ByteTensor too (a generator's state)
