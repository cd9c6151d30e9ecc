"""A backward graph as compiled autograd reads it: its full key, the arrays its plan takes, and a walker generated
per plan that reads the next graph of that plan's structure without building the key again.

``walk`` visits the graph breadth first from its roots (a deterministic order) and returns the **full key**
(per node its entry, non-tensor params and saved scalars, the shapes, dtypes, device class and strides of its
saved arrays and tensor params, the metadata of the gradients it returns, the positions of the nodes it points
to, so sharing in the DAG is part of the key; plus the roots' gradients, the targets' positions and which
collected arrays are one array) and, in that order, **every array the backward reads**. It raises ``Eager``
where the graph holds something a plan does not express.

Once a plan exists, ``make_walker`` generates a Python function from the graph that built it: straight-line code
that follows the same edges, checks each fact the full key holds against that graph's value (and the hooks and
versions ``walk`` checks), and collects the same arrays in the same order. A graph it accepts has the plan's full
key; on any difference it returns None and the caller walks the graph in full. A training step's backward thus
costs a few attribute reads per node, not a key of every node built, hashed and compared.
"""
import math
from operator import attrgetter

import numpy as np

from .._graph import AccumulateGrad
from .._op_node import OpNode
from .._saved import SavedTensor
from .._device import is_array
from .._tensor import Tensor

# the dtypes of the arrays a plan reads (float16, bfloat16 and complex values run eagerly)
DTYPES = frozenset(np.dtype(t) for t in (np.float32, np.float64, np.bool_, np.int8, np.int16, np.int32, np.int64,
                                         np.uint8))
FLOATS = frozenset((np.dtype(np.float32), np.dtype(np.float64)))


class Eager(Exception):
    """The graph (this time) needs the node-by-node engine; args[0] is the reason."""


PARAM_ARRAY_LIMIT = 4096  # elements of a param array hashed into a graph's key


def param_key(v, arrays):
    """A param or saved non-tensor value as part of the key; its arrays go to ``arrays`` (read from each graph)."""
    c = v.__class__
    if c is int or c is bool or c is str or v is None:
        return (c, v)
    if c is float:
        return (c, v, math.copysign(1.0, v))  # (0.0 == -0.0, and 2 == 2.0: the type and the sign are kept)
    if isinstance(v, Tensor):  # (a Parameter too)
        d = v._data
        arrays.append(d)
        return array_key(d)
    if c is tuple or c is list or isinstance(v, tuple):  # (jitgrad.Size, named tuples)
        return (c,) + tuple(param_key(x, arrays) for x in v)
    if c is slice:
        return (c, param_key(v.start, arrays), param_key(v.stop, arrays), param_key(v.step, arrays))
    if c is np.ndarray:
        # by value: a VJP formula may make constants from a param array in Python (upsample's weights and
        # indices), which a plan would freeze; such arrays are small, a large one runs eagerly
        if v.size > PARAM_ARRAY_LIMIT:
            raise Eager("a large array param")
        arrays.append(v)
        return array_key(v) + (hash(v.tobytes()),)
    if is_array(v):  # (a device array)
        arrays.append(v)
        return array_key(v)
    if c is dict:
        return (c,) + tuple((k, param_key(x, arrays)) for k, x in v.items())
    if isinstance(v, np.floating):
        return (c, float(v), math.copysign(1.0, v))
    if isinstance(v, (np.generic, np.dtype)) or c is type(Ellipsis) or getattr(c, "__module__", "").startswith(
            "jitgrad._dtype"):
        return (c, v)
    raise Eager("a param of type %s" % c.__name__)


def array_key(d):
    dt = d.dtype
    if dt not in DTYPES:
        raise Eager("float16, bfloat16 or complex values")
    if d.__class__ is np.ndarray:
        return (d.shape, dt, d.strides)
    return (d.shape, dt, d.__class__, d.strides)


def walk(roots, targets):
    """(key, arrays, nodes, leaves) of the graph below ``roots``; raises Eager where it must run eagerly."""
    nodes = []
    index = {}
    for e, _ in roots:
        n = e[0]
        if n not in index:
            index[n] = len(nodes)
            nodes.append(n)
    arrays = []
    key = []  # one entry per node, in walk order
    leaves = []  # positions of the AccumulateGrad nodes
    add = arrays.append
    for n in nodes:  # (the list grows while it is walked: breadth first)
        if n.__class__ is AccumulateGrad:
            v = n.variable
            if v._hooks or n._post_acc_hooks or n._hooked:
                raise Eager("hooks")
            d = v._data
            if d.dtype not in FLOATS:
                raise Eager("float16, bfloat16 or complex values")
            leaves.append(len(key))
            key.append((d.shape, d.dtype, d.__class__))
            continue
        if n._hooked or not isinstance(n, OpNode):
            raise Eager("hooks" if n._hooked else "a %s node" % type(n).__name__)
        op = n.op
        # (the names and order of the saved values follow from the entry and which inputs take gradients)
        local = [op]
        for v in n.saved.values():
            if v.__class__ is SavedTensor:
                if v._vc[0] != v._version or v._hooks is not None:  # (a freed one's _version is None)
                    raise Eager("saved-tensor hooks" if v._hooks is not None else
                                 "a saved tensor freed or modified in place")
                d = v._data if v._node is not None else v._data._data
                dt = d.dtype
                if dt not in DTYPES:
                    raise Eager("float16, bfloat16 or complex values")
                add(d)
                local += (d.shape, dt, d.strides)
            else:
                local.append(param_key(v, arrays))
        params = n.params
        if params:
            for name, v in params.items():
                local += (name, param_key(v, arrays))
        local += n.input_meta
        for m, nr in n.next_functions:
            if m is None:
                local.append(-1)
            else:
                j = index.get(m)
                if j is None:
                    j = index[m] = len(nodes)
                    nodes.append(m)
                local += (j, nr)
        key.append(tuple(local))
    for e, g in roots:
        d = g._data
        key.append((index[e[0]], e[1], array_key(d)))
    if targets is not None:
        for t in targets:
            fn = t.grad_fn
            n = fn if fn is not None else t._acc_node() if t._acc_node is not None else None  # (weak)
            key.append((index.get(n, -1), t._output_nr if fn is not None else 0))
    key.append(aliasing(arrays))
    kinds = {a.__class__ for a in arrays}
    kinds.update(g._data.__class__ for _, g in roots)
    if len(kinds) > 1:
        raise Eager("arrays on more than one device")
    return tuple(key), arrays, nodes, leaves


def aliasing(arrays):
    """Which collected arrays are one array (None: all distinct): a plan built where two are one reads one value for
    both, so it is part of the key. (Per array the position of its first occurrence; loops in C: a walker runs it
    on every backward.)"""
    ids = list(map(id, arrays))
    n = len(ids)
    first = dict(zip(reversed(ids), range(n - 1, -1, -1)))  # (later pairs win: each id's first position)
    if len(first) == n:
        return None
    return tuple(map(first.__getitem__, ids))


# what a walker may raise on a graph of another form (a missing saved name, a None where a node was): a miss
MISSES = (AttributeError, KeyError, IndexError, TypeError, ValueError, Eager)
WALKER_NODES = 2000  # graphs of more nodes are walked in full (generating a walker costs about 0.4 ms a node)


def _param_check(emit, expr, value, const, gathered):
    """Emit a walker's check of the param or saved non-tensor value at ``expr`` against ``value``'s key; the arrays
    it holds go to a list of their own, spliced into the walker's arrays in walk's order. A value without arrays or
    NaNs is checked by its repr, one call where its key is a recursion (reprs tell apart what the key does: 2 and
    2.0, 0.0 and -0.0, True and 1, a tuple and a Size, NumPy's scalars and Python's)."""
    found = []
    key = param_key(value, found)
    if not found and key == key:
        emit(" if repr(%s) != %s: return" % (expr, const(repr(value))))
        return
    q = "found"  # (arrays of a value that should have none: its key check fails)
    if found:
        q = "q%d" % len(gathered)
        emit(" %s = []" % q)
        gathered.append("*" + q)
    emit(" if %s.__class__ is ST or param_key(%s, %s) != %s: return" % (expr, expr, q, const(key)))


def _one_output(node):
    """Whether every node of ``node``'s class has one output (an edge to it names output 0)."""
    n = getattr(node.__class__, "n_outputs", None)
    return n.__class__ is int and n == 1


def make_walker(roots, targets, nodes, arrays, release):
    """A function ``(roots, targets) -> (arrays, leaf nodes, saved tensors to free) or None`` generated from the graph
    ``walk`` returned ``nodes`` and ``arrays`` for: it accepts exactly the graphs whose full key is this one's, and
    collects their arrays in ``walk``'s order. ``release``: the positions of the nodes whose saved tensors a backward
    without ``retain_graph`` frees. None where the graph is one the walker does not express.

    Per node it reads the edges (one unpacking), the saved values and params; what holds for every array or node
    (class, shape, dtype and strides of the arrays, the nodes' input metadata) is compared at the end, a list at a
    time, in C."""
    if len(nodes) > WALKER_NODES:
        return None
    consts = {"ST": SavedTensor, "AG": AccumulateGrad, "param_key": param_key, "aliasing": aliasing,
              "SHAPE": attrgetter("shape"), "DTYPE": attrgetter("dtype"), "STRIDES": attrgetter("strides")}
    lines = ["def walker(roots, targets):", " found = []"]
    emit = lines.append

    def const(value):
        name = "c%d" % len(consts)
        consts[name] = value
        return name

    index = {}
    emit(" if len(roots) != %d: return" % len(roots))
    for k, (e, g) in enumerate(roots):
        emit(" e, g = roots[%d]" % k)
        emit(" if e[1] != %d: return" % e[1])
        n = e[0]
        if n in index:
            emit(" if e[0] is not n%d: return" % index[n])
        else:
            index[n] = len(index)
            emit(" n%d = e[0]" % index[n])
        d = g._data
        emit(" d = g._data")
        emit(" if d.__class__ is not %s or d.shape != %s or d.dtype != %s or d.strides != %s: return" % (
            const(d.__class__), const(d.shape), const(d.dtype), const(d.strides)))
    ran = set(release)
    leaves = []
    metas = []
    gathered, freed = [], []  # the arrays (expressions over the walker's locals, in walk's order), what is freed
    for i, n in enumerate(nodes):
        v = "n%d" % i
        if n.__class__ is AccumulateGrad:
            leaves.append(v)
            emit(" if %s.__class__ is not AG or %s._hooked or %s._post_acc_hooks or %s.variable._hooks: return"
                 % (v, v, v, v))
            d = n.variable._data
            emit(" d = %s.variable._data" % v)
            emit(" if d.__class__ is not %s or d.shape != %s or d.dtype != %s: return" % (
                const(d.__class__), const(d.shape), const(d.dtype)))
            continue
        # (a node class is its entry's own: the class fixes the entry, and with the edges which inputs take
        # gradients, so the names of the saved values and which of them are outputs)
        emit(" if %s.__class__ is not %s or %s._hooked: return" % (v, const(n.__class__), v))
        if n.saved:
            emit(" s = %s.saved" % v)
        for name, x in n.saved.items():
            if x.__class__ is SavedTensor:  # (its array into a local, gathered into the list at the end)
                sv = "v%d" % len(gathered)
                emit(" %s = s[%r]" % (sv, name))
                emit(" if %s.__class__ is not ST or %s._vc[0] != %s._version or %s._hooks is not None: return"
                     % (sv, sv, sv, sv))
                gathered.append(sv + "._data" if x._node is not None else sv + "._data._data")
                if i in ran:
                    freed.append(sv)
            else:
                _param_check(emit, "s[%r]" % name, x, const, gathered)
        if n.params:
            emit(" p = %s.params" % v)
            emit(" if tuple(p) != %s: return" % const(tuple(n.params)))
            for name, x in n.params.items():
                _param_check(emit, "p[%r]" % name, x, const, gathered)
        else:
            emit(" if %s.params: return" % v)
        metas.append((v, list(n.input_meta)))
        targets_, checks = [], []
        for k, (m, nr) in enumerate(n.next_functions):  # (an edge: the node it leads to, and which output of it)
            if m is not None and not _one_output(m):
                checks.append("r%d != %d" % (k, nr))
            if m is None:
                targets_.append("t%d" % k)
                checks.append("t%d is not None" % k)
            elif m in index:
                targets_.append("t%d" % k)
                checks.append("t%d is not n%d" % (k, index[m]))
            else:  # (a new node: its class check fails where it is None)
                index[m] = len(index)
                targets_.append("n%d" % index[m])
        if targets_:
            emit(" %s, = %s.next_functions" % (", ".join("(%s, r%d)" % (t, k) for k, t in enumerate(targets_)), v))
            if checks:
                emit(" if %s: return" % " or ".join(checks))
        else:
            emit(" if %s.next_functions: return" % v)
    names = ", ".join("n%d" % i for i in range(len(nodes)))
    emit(" if len({%s}) != %d: return" % (names, len(nodes)))  # (nodes met by a new edge are new nodes)
    if targets is None:
        emit(" if targets is not None: return")
    else:
        emit(" if targets is None or len(targets) != %d: return" % len(targets))
        for k, t in enumerate(targets):
            fn = t.grad_fn
            n = fn if fn is not None else t._acc_node() if t._acc_node is not None else None
            if n not in index:
                return None  # (a target outside the graph: rare, walked in full)
            emit(" t = targets[%d]" % k)
            if fn is not None:
                emit(" if t.grad_fn is not n%d or t._output_nr != %d: return" % (index[n], t._output_nr))
            else:
                emit(" if t.grad_fn is not None or t._acc_node is None or t._acc_node() is not n%d: return" % index[n])
    emit(" arrays = [%s]" % ", ".join(gathered))
    # the arrays' classes, shapes, dtypes and strides (what walk's key holds of each), and the nodes' input metadata
    emit(" if list(map(type, arrays)) != %s or list(map(SHAPE, arrays)) != %s or list(map(DTYPE, arrays)) != %s or "
         "list(map(STRIDES, arrays)) != %s: return" % (
             const([type(a) for a in arrays]), const([a.shape for a in arrays]), const([a.dtype for a in arrays]),
             const([a.strides for a in arrays])))
    if metas:
        emit(" if [%s] != %s: return" % (", ".join("%s.input_meta" % v for v, _ in metas), const([m for _, m in metas])))
    emit(" if aliasing(arrays) != %s: return" % const(aliasing(arrays)))
    emit(" return arrays, [%s], [%s]" % (", ".join(leaves), ", ".join(freed)))
    code = compile("\n".join(lines) + "\n", "<compiled autograd walker of %d nodes>" % len(nodes), "exec")
    exec(code, consts)
    return consts["walker"]
