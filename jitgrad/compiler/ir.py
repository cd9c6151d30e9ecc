"""The compiler's IR: a Graph of values and Nodes, as capture records it and the passes and lowerings read it.

A value is a ``Ref`` (its number); its kind says where it comes from: an input (by position), an external
(a parameter or constant the plan reads live), a constant a backward's formulas made, a gradient placeholder, a forward value read by a backward
graph, or an op's result. A ``Node`` is one table op: the entry, its arguments (Refs or constants), its
params (constants, Refs, or ``Held`` structures holding values' arrays, as an index key's) and its results.
"""
from .._device import is_array
from .._tensor import Tensor


class DerivedArray(Exception):
    """A param holds an array made from a value's array outside the op table (see Graph.param)."""


class Node:
    """One recorded op: the entry, its arguments (value numbers as Ref, or constants), params, results."""
    __slots__ = ("op", "args", "params", "outs", "cnp", "convert")

    def __init__(self, op, args, params, outs, cnp, convert):
        self.op, self.args, self.params, self.outs, self.cnp, self.convert = op, args, params, outs, cnp, convert

    def refs(self):
        return [a for a in self.args if a.__class__ is Ref] + [r for a in self.params.values()
                                                                for r in ((a,) if a.__class__ is Ref else
                                                                          a.refs() if a.__class__ is Held else ())]


class Ref(int):
    """A value number in a graph's arguments (an int subclass, so constants never look like one)."""
    __slots__ = ()

    def __repr__(self):
        return "v%d" % self


class Held:
    """A param whose structure holds values' arrays (an index key's index and mask arrays): the template with
    a Ref where each array was. The plan fills it with the call's arrays, so a key never freezes the
    arrays of the call it was traced on."""
    __slots__ = ("template",)

    def __init__(self, template):
        self.template = template

    def refs(self):
        out = []
        _walk(self.template, out.append)
        return out

    def fill(self, array_of):
        """The param with each Ref replaced by ``array_of(ref)``."""
        return _walk(self.template, array_of)

    def remap(self, f):
        return Held(_walk(self.template, f))

    def fill_args(self, *arrays):
        """The param with the arrays given in ``refs()`` order (a generated plan's call)."""
        by_ref = dict(zip(self.refs(), arrays))
        return _walk(self.template, by_ref.__getitem__)

    def __repr__(self):
        return repr(self.template)


def remap_param(p, f):
    """A node's param with its values renamed by ``f`` (a Ref, or the Refs a Held holds)."""
    return f(p) if p.__class__ is Ref else p.remap(f) if p.__class__ is Held else p


def _walk(x, f):
    """``x`` (nested tuples and lists) with each Ref in it replaced by ``f(ref)``."""
    if x.__class__ is Ref:
        return f(x)
    if x.__class__ in (tuple, list):
        return x.__class__(_walk(y, f) for y in x)
    return x


def _has_array(x):
    if x.__class__ in (tuple, list):
        return any(_has_array(y) for y in x)
    return is_array(x)


class Graph:
    """A trace: values (input, external, gradient placeholder, or op result) and the nodes in order."""

    def __init__(self, parent=None):
        self.parent = parent  # a backward graph reads its forward graph's values as inputs ("fwd", value)
        self.nodes = []
        self.arrays = []  # value -> the array it held while tracing (keeps ids unique while tracing)
        # value -> ("input", position) | ("ext", Tensor) | ("const", Tensor: made by a backward's formulas) |
        # ("grad", k) | ("fwd", forward value) | ("op", node index)
        self.kinds = []
        self.by_id = {}  # id(array) -> value
        self.breaks = []  # (reason, "file:line")
        self.seen = []  # (version counter, version) of every tensor an op read, to detect in-place writes

    def value(self, t, kind=None):
        d = t._data
        v = self.by_id.get(id(d))
        if v is None or kind is not None:
            if kind is None:
                fv = self.parent.by_id.get(id(d)) if self.parent is not None else None
                kind = ("ext", t) if fv is None else ("fwd", fv)
            v = Ref(len(self.arrays))
            self.arrays.append(d)
            self.kinds.append(kind)
            self.by_id[id(d)] = v
        return v

    def array_ref(self, a):
        """The value of a graph (or its forward graph) that holds array ``a``, or None for an array no value
        holds (a constant the function made in Python)."""
        v = self.by_id.get(id(a))
        if v is None and self.parent is not None:
            fv = self.parent.by_id.get(id(a))
            if fv is not None:
                v = self.add(a, ("fwd", fv))
                self.by_id[id(a)] = v
        return v

    def param(self, p):
        """A param as a node holds it: a tensor as its value, a structure holding values' arrays as Held."""
        if isinstance(p, Tensor):
            return self.value(p)
        if _has_array(p):
            found = []

            def ref(a):
                v = self.array_ref(a) if _has_array(a) else None
                if v is not None:
                    found.append(v)
                    return v
                if self._derived(a):
                    raise DerivedArray()
                return a
            template = _walk_arrays(p, ref)  # (a bare array too: its Ref alone)
            return Held(template) if found else p
        return p

    def _derived(self, a):
        """Whether array ``a`` is a view of a value's array made outside the op table (``t._data.reshape``):
        a plan would freeze it."""
        b = getattr(a, "base", None)
        while b is not None:
            if id(b) in self.by_id or self.parent is not None and id(b) in self.parent.by_id:
                return True
            b = getattr(b, "base", None)
        return False

    def add(self, array, kind):
        """A new value (for graphs built from other graphs: no lookup by array)."""
        v = Ref(len(self.arrays))
        self.arrays.append(array)
        self.kinds.append(kind)
        return v

    def meta(self, v):
        a = self.arrays[v]
        return a.shape, a.dtype


def _walk_arrays(x, f):
    if x.__class__ in (tuple, list):
        return x.__class__(_walk_arrays(y, f) for y in x)
    return f(x) if _has_array(x) else x
