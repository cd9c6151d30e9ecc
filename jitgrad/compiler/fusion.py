"""Fusion: which recorded ops are elementwise (one scalar function of kernels/scalars.py each),
and their grouping into loops -- with the reductions that consume them (full, or over leading dims) -- for
codegen."""
import math

import numpy as np

from ..kernels import config
from ..ops import OPS
from .ir import Graph, Node, Ref, remap_param

REDUCTIONS = {"sum_all": "sum", "mean_all": "mean"}  # the full reductions a loop (or a tape) computes
# reductions over leading dims (a bias's gradient: the column sums of a matrix) a loop computes
LEADING = {"sum": "sum", "mean": "mean"}
# ops per fused loop at most: numba's compile time grows faster than linearly with a function's size
MAX_MEMBERS = 48


def full_reduction(graph, node):
    """Whether ``node`` is a sum or mean of all of its input's elements (under vmap, sum_all and mean_all reduce
    each sample: dims that leave the batch's)."""
    if node.op.name not in REDUCTIONS:
        return False
    dims, a = node.params.get("dims"), node.args[0] if node.args else None
    if dims is None or a.__class__ is not Ref:
        return True
    n = len(graph.meta(a)[0])
    return len({d % n for d in dims}) == n if n else True


def scalar_form(node):
    """(scalar function name, argument list) of an elementwise node, or None. Arguments are value
    Refs or constants already in the compute dtype."""
    op, args, p, cnp = node.op, node.args, node.params, node.cnp
    name = op.name
    if any(v.__class__ is Ref for v in p.values()):
        return None
    kernel = getattr(op.forward, "kernel", None)
    if name in ("add", "sub"):  # (their kernel is for alpha == 1)
        alpha = p.get("alpha", 1)
        if alpha == 1:
            fn, extra = name, []
        else:
            fn, extra = "add_alpha", [cnp.type(alpha if name == "add" else -alpha)]
    elif kernel is not None:
        fn, extra = kernel, [cnp.type(v) for v in p.values()]
    elif name == "where":
        fn, extra = "where", []
    elif name == "masked_fill":
        return "where", [args[1], cnp.type(p["value"]), args[0]]
    elif name == "expand" or name == "clone" and not p:  # (a clone in C order: a fused loop's output is a copy)
        return "identity", [args[0]]
    else:
        return None
    if any(isinstance(v, (list, tuple, dict)) or v is None for v in args):
        return None
    out = []
    for i, a in enumerate(args):
        if a.__class__ is not Ref and i in node.convert:
            a = cnp.type(a)
        out.append(a)
    return fn, out + extra


def converted(graph, node, pos, a):
    """Whether operand ``pos`` of ``node`` (value ``a``) enters its scalar function cast to the node's
    compute dtype, as dispatch converts operands (masks and indices stay as they are)."""
    return graph.meta(a)[1] != node.cnp and pos in node.convert


class Group:
    """Elementwise nodes over one iteration shape, and the reductions of their values: full ones, or (never
    both in one group) ones over the leading dims, whose results have ``columns`` elements."""

    def __init__(self, shape):
        self.shape = shape
        self.size = math.prod(shape)
        self.members = []  # (node index, scalar name, args)
        self.reductions = []  # (node index, kind, input Ref)
        self.columns = None
        self.produced = set()
        self.outputs = []  # values written to arrays (used outside the group)

    def indices(self):
        return [m[0] for m in self.members] + [r[0] for r in self.reductions]


def _fusable_dtype(dt):
    return dt.kind in "fb" or dt.kind in "iu"


def fusable(graph, node):
    """Whether ``node`` can be a member of a fused loop."""
    form = scalar_form(node)
    return form is not None and len(node.outs) == 1 and _fusable_dtype(graph.meta(node.outs[0])[1]) and all(
        _fusable_dtype(graph.meta(a)[1]) for a in form[1] if a.__class__ is Ref)


# scalar functions cheaper to recompute in the backward loop than to save and read back (a few
# arithmetic operations); transcendental ones (exp, tanh, sigmoid, ...) are saved by the forward
CHEAP = frozenset(("add", "add_alpha", "sub", "mul", "neg", "identity", "where", "relu", "square", "abs", "maximum",
                   "minimum", "clamp", "eq", "ne", "lt", "le", "gt", "ge", "logical_not", "leaky_relu", "hardtanh"))


def with_recompute(fg, bg, outputs):
    """``bg`` (a backward graph over forward graph ``fg``) with the cheap elementwise forward values it
    reads recomputed at its start from what they derive from, so that the forward saves nothing for them and
    the backward's fused loop computes them in registers. A value that a backward op outside the loops reads
    (a GEMM's operand) is saved: recomputed, it would take a pass and a buffer of its own.
    Returns (graph, outputs in it)."""
    saved = {bg.kinds[a][1] for node in bg.nodes if not fusable(bg, node) for a in node.refs()
             if bg.kinds[a][0] == "fwd"}
    need, stack = set(), [k[1] for k in bg.kinds if k[0] == "fwd" and fg.kinds[k[1]][0] == "op"]
    while stack:
        v = stack.pop()
        i = fg.kinds[v][1]
        node = fg.nodes[i]
        # small values are always recomputed: saving them costs more (allocations, arguments) than the math
        if i not in need and v not in saved and fusable(fg, node) and (scalar_form(node)[0] in CHEAP or fg.arrays[
                node.outs[0]].size < config.PARALLEL_THRESHOLD):
            need.add(i)
            stack += [a for a in node.refs() if fg.kinds[a][0] == "op"]
    if not need:
        return bg, outputs
    ng = Graph(fg)
    fmap = {}

    def fval(fv):
        if fv not in fmap:
            fmap[fv] = ng.add(fg.arrays[fv], ("fwd", fv))
        return fmap[fv]

    for i in sorted(need):
        _append(ng, fg, fg.nodes[i], fval, fmap)
    bmap = {}
    for v, kind in enumerate(bg.kinds):
        if kind[0] == "fwd":
            bmap[v] = fval(kind[1])
        elif kind[0] != "op":
            bmap[v] = ng.add(bg.arrays[v], kind)
    for node in bg.nodes:
        _append(ng, bg, node, bmap.__getitem__, bmap)
    return ng, [bmap[v] for v in outputs]


def _append(ng, src, node, remap, vmap):
    """Append a copy of ``node`` of graph ``src`` to graph ``ng``, its operands renamed by ``remap``; its
    results' new values go into ``vmap``."""
    args = tuple(remap(a) if a.__class__ is Ref else a for a in node.args)
    params = {k: remap_param(p, remap) for k, p in node.params.items()}
    outs = tuple(ng.add(src.arrays[o], ("op", len(ng.nodes))) for o in node.outs)
    vmap.update(zip(node.outs, outs))
    ng.nodes.append(Node(node.op, args, params, outs, node.cnp, node.convert))


def elementwise_backward(bg):
    """Whether backward graph ``bg`` is elementwise math, full sums and views only (what fuses into loops)."""
    return all(fusable(bg, node) or full_reduction(bg, node) or node.op.view for node in bg.nodes)


def joint_graph(fg, bg, outputs, grad):
    """Forward graph ``fg`` followed by its backward graph ``bg`` (of one output), whose output gradient is
    ``grad``: a value of ``fg`` (a Ref) or an external tensor (ones). One plan then computes the forward and
    the gradients (``outputs`` of ``bg``), in the same loops where they fuse, and keeps nothing for a backward
    plan. Returns (graph, the gradient values in it)."""
    ng = Graph()
    ng.arrays, ng.kinds, ng.nodes = list(fg.arrays), list(fg.kinds), list(fg.nodes)
    bmap = {}
    for v, kind in enumerate(bg.kinds):
        if kind[0] == "fwd":
            bmap[v] = Ref(kind[1])
        elif kind[0] == "grad":
            bmap[v] = grad if grad.__class__ is Ref else ng.add(grad._data, ("ext", grad))
        elif kind[0] != "op":
            bmap[v] = ng.add(bg.arrays[v], kind)
    for node in bg.nodes:
        _append(ng, bg, node, bmap.__getitem__, bmap)
    return ng, [bmap[v] for v in outputs]


# view ops whose result, where it has its input's shape, is the input as it is (the VJP formulas reshape
# gradients to the shapes they have already)
SAME_SHAPE_IS_INPUT = frozenset(("reshape", "unsafe_view", "view", "expand", "squeeze", "squeeze_dim"))


def without_own_shape_views(graph, outputs):
    """``graph`` without the views of a value to its own shape (but those returned, which stay arrays of their
    own): later nodes read the value itself, so that, say, a bias gradient's sum of a reshaped loop result
    joins that loop."""
    same = {}
    for node in graph.nodes:
        if (node.op.name in SAME_SHAPE_IS_INPUT and node.args[0].__class__ is Ref
                and graph.meta(node.args[0]) == graph.meta(node.outs[0]) and node.outs[0] not in outputs):
            same[node.outs[0]] = same.get(node.args[0], node.args[0])
    if not same:
        return graph
    nodes = []
    for node in graph.nodes:
        if node.outs[0] in same:
            continue
        if any(a in same for a in node.refs()):
            node = Node(node.op, tuple(same.get(a, a) if a.__class__ is Ref else a for a in node.args),
                        {k: remap_param(p, lambda r: same.get(r, r)) for k, p in node.params.items()},
                        node.outs, node.cnp, node.convert)
        nodes.append(node)
    return _rebuilt(graph, nodes)


def reductions_first(graph):
    """``graph`` with each sum or mean of an elementwise op's result moved up to just after that op, so that it
    joins the op's loop: in a backward, a bias gradient's column sum comes after the GEMMs that read the same
    gradient, which would end the loop first. (A reduction only reads its input: any place after it will do.)"""
    later = {}  # producer node index -> reductions moved to follow it
    for i, node in enumerate(graph.nodes):
        if _loop_reduction(graph, node) is not None:
            kind = graph.kinds[node.args[0]]
            if kind[0] == "op" and kind[1] < i - 1 and fusable(graph, graph.nodes[kind[1]]):
                later.setdefault(kind[1], []).append(i)
    if not later:
        return graph
    moved = {i for ids in later.values() for i in ids}
    return _rebuilt(graph, [n for i, node in enumerate(graph.nodes) if i not in moved
                            for n in [node] + [graph.nodes[j] for j in later.get(i, ())]])


def split_bias(graph):
    """``graph`` with each linear whose result an elementwise op reads split into its GEMM (``linear_mm``) and
    the bias add, so that the add joins that op's loop: the bias and, say, a ReLU then take one pass over the
    GEMM's result instead of two. Value numbers stay (the GEMM's result is a new value); node indices move."""
    read = set()
    for node in graph.nodes:
        if fusable(graph, node):
            read.update(node.refs())
    if not any(n.op.name == "linear" and n.outs[0] in read for n in graph.nodes):
        return graph
    nodes, gemms = [], []  # (gemms: the arrays of the GEMMs' results, new values after the graph's)
    for node in graph.nodes:
        if node.op.name == "linear" and node.outs[0] in read:
            b, x, wt = node.args
            mm = Ref(len(graph.arrays) + len(gemms))
            gemms.append(graph.arrays[node.outs[0]])
            nodes.append(Node(OPS["linear_mm"], (x, wt), {}, (mm,), node.cnp,
                              tuple(i - 1 for i in node.convert if i)))
            nodes.append(Node(OPS["add"], (mm, b), {}, node.outs, node.cnp, (1,) if 0 in node.convert else ()))
        else:
            nodes.append(node)
    return _rebuilt(graph, nodes, gemms)


def live_part(graph, outputs):
    """``graph`` without the ops no output needs (every recorded op is pure): a transform's trace holds values its
    result does not read (jacrev's and hessian's primal outputs, a gradient's loss). Its boundary is kept whole;
    the values of the ops dropped are made by none ("op", None)."""
    live = set(outputs)
    keep = []
    for i in range(len(graph.nodes) - 1, -1, -1):
        node = graph.nodes[i]
        if any(o in live for o in node.outs):
            keep.append(node)
            live.update(node.refs())
    if len(keep) == len(graph.nodes):
        return graph
    ng = _rebuilt(graph, keep[::-1])
    kept = {id(node) for node in keep}
    for node in graph.nodes:
        if id(node) not in kept:
            for o in node.outs:
                ng.kinds[o] = ("op", None)
    return ng


def _rebuilt(graph, nodes, new_arrays=()):
    """A graph of ``graph``'s values (and of ``new_arrays``, numbered after them) with ``nodes`` as its ops."""
    ng = Graph(graph.parent)
    ng.arrays, ng.kinds, ng.breaks = list(graph.arrays) + list(new_arrays), list(graph.kinds), graph.breaks
    ng.kinds += [None] * len(new_arrays)
    ng.nodes = list(nodes)
    for i, node in enumerate(ng.nodes):
        for o in node.outs:
            ng.kinds[o] = ("op", i)
    return ng


def plan_groups(graph, live_out, reductions=True):
    """Group the graph's elementwise nodes (and, with ``reductions``, the full reductions of their values).
    Returns (groups, node index -> group). A group is emitted where its last member stands: every other
    node between its members reads none of its values."""
    groups, owner = [], {}
    cur = None
    reduced = set()  # the current group's reduction results: known only once its loop has ended
    for i, node in enumerate(graph.nodes):
        if fusable(graph, node):
            form = scalar_form(node)
            shape = graph.meta(node.outs[0])[0]
            if (cur is None or cur.shape != shape or len(cur.members) >= MAX_MEMBERS
                    or any(a in reduced for a in node.refs())):
                cur = Group(shape)
                groups.append(cur)
                reduced = set()
            cur.members.append((i, form[0], form[1]))
            cur.produced.add(node.outs[0])
            owner[i] = cur
            continue
        columns = _leading_reduction(graph, node, cur) if reductions and cur is not None else None
        if columns is not None:
            kind = REDUCTIONS[node.op.name] if columns == 1 else LEADING[node.op.name]
            cur.reductions.append((i, kind, node.args[0]))
            cur.columns = columns if columns > 1 else None
            reduced.add(node.outs[0])
            owner[i] = cur
            continue
        if cur is not None and any(a in cur.produced or a in reduced for a in node.refs()):
            cur = None  # this node needs the group's values: the group runs before it
    # values read outside their group are written out
    used_outside = {}
    for i, node in enumerate(graph.nodes):
        for a in node.refs():
            used_outside.setdefault(a, set()).add(owner.get(i))
    for g in groups:
        for idx, _, _ in g.members:
            v = graph.nodes[idx].outs[0]
            if v in live_out or any(o is not g for o in used_outside.get(v, ())):
                g.outputs.append(v)
    return [g for g in groups if len(g.members) > 1 or g.reductions], owner


def _loop_reduction(graph, node):
    """For a sum or mean a loop can compute (of a float value, over all its dims or over leading ones): its
    result's element count (1 for a full one). None otherwise."""
    a = node.args[0] if node.args else None
    if a.__class__ is not Ref or graph.meta(node.outs[0])[1].kind != "f" or node.refs()[1:]:
        return None
    if node.op.name in REDUCTIONS:
        return 1 if full_reduction(graph, node) else None
    dims, shape = tuple(node.params.get("dims") or ()), graph.meta(a)[0]
    if node.op.name in LEADING and dims and dims == tuple(range(len(dims))) and len(dims) < len(shape):
        columns = math.prod(shape[len(dims):])
        return columns if columns > 1 else None  # (a full reduction written with dims: left to the kernel)
    return None


def _leading_reduction(graph, node, g):
    """_loop_reduction's count for a reduction group ``g`` can compute: of a value it makes, over its shape,
    and of the kind its other reductions are (the loop runs over blocks, or over column tiles)."""
    columns = _loop_reduction(graph, node)
    if columns is None or node.args[0] not in g.produced or graph.meta(node.args[0])[0] != g.shape:
        return None
    return columns if (g.columns or 1) == columns or not g.reductions else None


def load_kind(shape, full):
    """How a loop over ``full`` (flat index i) reads an input of ``shape``: ('scalar',), ('full',),
    ('mod', m) for a trailing block, ('div', m) for a leading block, or ('copy',) to broadcast first."""
    size = math.prod(shape)
    if size == 1:
        return ("scalar",)
    padded = (1,) * (len(full) - len(shape)) + tuple(shape)
    if padded == tuple(full):
        return ("full",)
    for j in range(len(full) + 1):
        if padded[:j] == (1,) * j and padded[j:] == tuple(full[j:]):
            return ("mod", math.prod(full[j:]))
        if padded[:j] == tuple(full[:j]) and padded[j:] == (1,) * (len(full) - j):
            return ("div", math.prod(full[j:]))
    return ("copy",)


NUMPY_CASTS = {np.dtype(np.float32): "np.float32", np.dtype(np.float64): "np.float64", np.dtype(np.bool_): "bool",
               np.dtype(np.int64): "np.int64", np.dtype(np.int32): "np.int32"}
