"""Argument and result trees: a call's structure as a hashable key, and its tensors in order."""
from .._tensor import Tensor


def flatten(obj, leaves):
    """A hashable description of ``obj``'s structure; its tensors are appended to ``leaves``."""
    if isinstance(obj, Tensor):
        leaves.append(obj)
        return "T"
    t = type(obj)
    if t is tuple or t is list:
        return (t.__name__, tuple(flatten(x, leaves) for x in obj))
    if t is dict:
        return ("dict", tuple((k, flatten(v, leaves)) for k, v in obj.items()))
    if isinstance(obj, tuple):  # a named tuple (max's values, indices)
        return ("ntuple", tuple(flatten(x, leaves) for x in obj), t)
    try:
        hash(obj)
    except TypeError:
        return ("id", _ByIdentity(obj))
    return ("c", t, obj)


class _ByIdentity:
    """An unhashable argument or result in a structure key: equal only to itself."""
    __slots__ = ("obj",)

    def __init__(self, obj):
        self.obj = obj

    def __hash__(self):
        return id(self.obj)

    def __eq__(self, other):
        return isinstance(other, _ByIdentity) and other.obj is self.obj


def unflatten(spec, leaves, it=None):
    it = iter(leaves) if it is None else it
    if spec == "T":
        return next(it)
    kind = spec[0]
    if kind in ("tuple", "list"):
        items = [unflatten(s, leaves, it) for s in spec[1]]
        return tuple(items) if kind == "tuple" else items
    if kind == "dict":
        return {k: unflatten(s, leaves, it) for k, s in spec[1]}
    if kind == "ntuple":
        items = [unflatten(s, leaves, it) for s in spec[1]]
        return spec[2](*items) if hasattr(spec[2], "_fields") else spec[2](items)
    return spec[-1] if kind == "c" else spec[1].obj
