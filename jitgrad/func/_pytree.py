"""Argument trees for the transforms: tuples, lists, dicts and named tuples of leaves (torch.utils._pytree's
containers), flattened to leaves and a spec, and a prefix tree (vmap's in_dims) broadcast over a tree."""


class Spec:
    """A tree's structure: its container type (None for a leaf), the dict keys, the children's specs."""
    __slots__ = ("kind", "keys", "children")

    def __init__(self, kind, keys, children):
        self.kind, self.keys, self.children = kind, keys, children

    @property
    def num_leaves(self):
        return 1 if self.kind is None else sum(c.num_leaves for c in self.children)

    def __eq__(self, other):
        return isinstance(other, Spec) and (self.kind, self.keys, self.children) == (other.kind, other.keys,
                                                                                      other.children)

    def __repr__(self):
        if self.kind is None:
            return "*"
        name = self.kind.__name__
        inner = ", ".join(repr(c) for c in self.children)
        if self.kind is dict:
            inner = ", ".join("%r: %r" % (k, c) for k, c in zip(self.keys, self.children))
        return "TreeSpec(%s, [%s])" % (name, inner)


LEAF = Spec(None, None, ())


def _is_namedtuple(x):
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


def flatten(tree):
    """(leaves, spec) of ``tree``."""
    leaves = []
    return leaves, _flatten(tree, leaves)


def _flatten(x, leaves):
    t = type(x)
    if t is tuple or t is list or _is_namedtuple(x):
        return Spec(t, None, tuple(_flatten(c, leaves) for c in x))
    if t is dict:
        keys = tuple(x)
        return Spec(dict, keys, tuple(_flatten(x[k], leaves) for k in keys))
    leaves.append(x)
    return LEAF


def unflatten(leaves, spec):
    it = iter(leaves)
    return _unflatten(spec, it)


def _unflatten(spec, it):
    if spec.kind is None:
        return next(it)
    children = [_unflatten(c, it) for c in spec.children]
    if spec.kind is dict:
        return dict(zip(spec.keys, children))
    if spec.kind is tuple or spec.kind is list:
        return spec.kind(children)
    return spec.kind(*children)  # a named tuple


def broadcast_prefix(prefix, spec):
    """The leaves of ``prefix`` repeated over the subtrees of ``spec`` they stand for (vmap's in_dims: one int
    for a whole tuple); None where ``prefix`` is not a prefix of the tree."""
    out = []
    return out if _broadcast(prefix, spec, out) else None


def _broadcast(prefix, spec, out):
    t = type(prefix)
    if t is tuple or t is list or t is dict or _is_namedtuple(prefix):
        if spec.kind is None or (spec.kind is dict) != (t is dict) or len(prefix) != len(spec.children):
            return False
        if t is dict:
            if set(prefix) != set(spec.keys):
                return False
            return all(_broadcast(prefix[k], c, out) for k, c in zip(spec.keys, spec.children))
        return all(_broadcast(p, c, out) for p, c in zip(prefix, spec.children))
    out.extend([prefix] * spec.num_leaves)
    return True


def tree_map(fn, tree):
    leaves, spec = flatten(tree)
    return unflatten([fn(x) for x in leaves], spec)
