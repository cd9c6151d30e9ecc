"""Small graphs as a tape: one compiled numba loop interprets all of a graph's work.

A graph whose values hold at most SMALL elements each, of float32, float64 or bool, runs over one flat
table ``T`` of float64 (exact for those dtypes; float32 where every value is float32 or bool and float32
holds the constants exactly: twice the SIMD lanes, a slot of tanh in half the time), each value in a slot
of its own size, and a tape of instructions. The values may have several sizes (scalars, small vectors, the matrices they stack into):

- an elementwise op applies one scalar function of kernels/scalars.py over its result's elements, each
  operand either a whole slot (read at j) or one element (read once), cast as the fused loops cast them,
  and rounds the result to its value's dtype (an operand broadcast otherwise is gathered first);
- an op that only moves elements (views, select/slice/index with a fixed key, stack, cat, flip, ...) is a
  gather through a map of table positions, made by running the op's own forward on the positions of its
  operands, so the map is the op's definition and not a copy of it (a map that is its operand's slot as it
  is costs no instruction: the value shares the slot);
- ``index_put_zeros`` (the VJP of indexing) scatters its operand through the map of the key;
- sums and means (of all elements, or over dims) and softmax / log_softmax along a dim run over groups of
  their operand's elements (a permutation that puts each group's elements together), accumulated in
  float64 as the eager kernels accumulate.

Backward graphs are traced from the VJP formulas as table ops, so they need no instructions of their own.
The interpreter has one case per (kind, scalar function, operand dtypes, result dtype, which operands are
whole slots) that the graph uses, so numba compiles one function per graph and not one per op: a graph of
thousands of small ops compiles in about the time of its few distinct cases, and a graph using the same
cases loads the interpreter from the disk cache. Larger graphs, and ops with no instruction (GEMMs, indices
read from values), get codegen's fused loops.
"""
import hashlib
import math
import time

import numpy as np

from ..kernels import cpu as CPU_BACKEND
from .ir import Held, Ref
from .codegen import _SCALARS_STAMP, Compiled, _kernel, boundary_values, generate
from .fusion import NUMPY_CASTS, REDUCTIONS, converted, fusable, live_part, scalar_form

SMALL = 4096  # elements per value at most
MAX_TABLE = 1 << 22  # table elements at most (32 MiB)
_TABLE = frozenset((np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.bool_)))
# ops that only move their operands' elements (beside the table's views): a gather each
_SELECTIONS = frozenset(("stack", "cat", "index", "clone", "contiguous", "flip", "repeat", "roll", "movedim",
                         "expand_as", "view_as", "reshape_as", "flatten", "unsafe_view", "narrow"))
_GROUPED = {"sum": "sum", "mean": "mean", "softmax": "softmax", "log_softmax": "log_softmax"}  # over dims
_FIRST = 4  # an instruction: opcode, result offset, elements, aux (an offset into the maps), operand offsets


def compile_plan(graph, outputs, fuse=True, name="plan"):
    """The plan of ``graph``: a tape where the graph is small and tape-shaped, else codegen's."""
    graph = live_part(graph, outputs)
    return (fuse and tape_plan(graph, outputs, name)) or generate(graph, outputs, fuse, name)


_BUILT = {}  # id(graph) -> (graph, its tape): what tape_expressible built, for tape_plan to take (once)


def tape_expressible(graph):
    """Whether a tape runs ``graph`` (its values small, each op with instructions)."""
    tape = _build(graph) if _fits(graph) else None
    _BUILT.clear()
    if tape is not None:
        _BUILT[id(graph)] = (graph, tape)
    return tape is not None


def _fits(graph):
    arrays = graph.arrays
    return bool(graph.nodes) and all(a.__class__ is np.ndarray and a.dtype in _TABLE and a.size <= SMALL
                                     for a in arrays) and sum(a.size for a in arrays) <= MAX_TABLE


def _cast(dt, x):
    """Source of table value ``x`` as an operand of dtype ``dt``."""
    return "(%s != 0.0)" % x if dt == np.bool_ else "%s(%s)" % (NUMPY_CASTS[dt], x)


def _write(dt, expr):
    return "1.0 if %s else 0.0" % expr if dt == np.bool_ else "%s(%s)" % (NUMPY_CASTS[dt], expr)


class _Tape:
    """The instructions of one graph, the table slots they read and write, and their maps."""

    def __init__(self, graph):
        self.graph = graph
        self.slots = {}  # value -> offset in the table
        self.top = 0  # the table's size so far
        self.consts = []  # (offset, value)
        self.cases = {}  # case key -> opcode
        self.code = []  # [opcode, result offset, elements, aux, operand offsets...]
        self.maps = [np.zeros(1, np.int64)]  # int64 arrays, concatenated: aux points into them
        self.mapped = 1
        self.listing = []

    def _alloc(self, size):
        at, self.top = self.top, self.top + size
        return at

    def slot(self, v):
        at = self.slots.get(v)
        if at is None:
            at = self.slots[v] = self._alloc(max(self.size(v), 1))
        return at

    def const(self, c):
        at = self._alloc(1)
        self.consts.append((at, c))
        return at

    def size(self, v):
        return self.graph.arrays[v].size

    def positions(self, v):
        """Value ``v``'s table positions, in its shape."""
        a = self.graph.arrays[v]
        return np.arange(self.slot(v), self.slot(v) + a.size, dtype=np.int64).reshape(a.shape)

    def map(self, *parts):
        at = self.mapped
        for p in parts:
            p = np.asarray(p, np.int64).reshape(-1)
            self.maps.append(p)
            self.mapped += p.size
        return at

    def add(self, case, out, length, aux, operands, text, at=None):
        """One instruction: ``operands`` are (offset, whole slot) pairs. Which operands are whole slots is part
        of its case, so that the case's loop reads them at j and the others once, before it."""
        whole = tuple(full for _, full in operands)
        op = self.cases.setdefault(case + (whole,), len(self.cases))
        self.code.append([op, self.slot(out) if at is None else at, length, aux] + [r for r, _ in operands])
        self.listing.append("    %s = %s" % ("v%d" % out if out is not None else "t", text))

    def gather(self, out, where, text):
        """``out`` as the elements at table positions ``where`` (in ``out``'s shape); no instruction where those
        are a slot as it is (the value then shares it)."""
        where = np.ascontiguousarray(where, np.int64).reshape(-1)
        if where.size and np.array_equal(where, np.arange(where[0], where[0] + where.size)) and out not in self.slots:
            self.slots[out] = int(where[0])
            self.listing.append("    v%d = %s  # (shares its operand's slot)" % (out, text))
            return
        self.add(("gather",), out, where.size, self.map(where), [], text)

    def broadcast(self, a, shape):
        """The offset of value ``a`` broadcast to ``shape`` (a slot of its own, gathered)."""
        where = np.broadcast_to(self.positions(a), shape).reshape(-1)
        at = self._alloc(where.size)
        self.add(("gather",), None, where.size, self.map(where), [], "broadcast(v%d, %s)" % (a, list(shape)), at)
        return at


def _build(graph):
    """The tape of ``graph``, or None where an op has no instruction."""
    tape = _Tape(graph)
    for node in graph.nodes:
        if not _instruction(tape, graph, node):
            return None
    return tape


def _instruction(tape, graph, node):
    """Append ``node``'s instructions to ``tape``; False where it has none."""
    name = node.op.name
    if any(p.__class__ in (Ref, Held) for p in node.params.values()):
        return False  # (an index read from a value's array)
    if len(node.outs) == 1 and fusable(graph, node):
        return _elementwise(tape, graph, node)
    args = node.args
    if not args or args[0].__class__ is not Ref:
        return False
    a = args[0]
    odt = graph.arrays[node.outs[0]].dtype
    if name == "cast" and tape.size(a) == tape.size(node.outs[0]):
        # between the table's dtypes: the value rounded to (or widened from) odt
        tape.add(("cast", odt), node.outs[0], tape.size(a), 0, [(tape.slot(a), True)], "cast(v%d, %s)" % (a, odt))
        return True
    if any(graph.arrays[r].dtype != odt for r in node.refs()):
        return False
    if node.op.view or name in _SELECTIONS:
        if any(x.__class__ in (list, tuple) and any(y.__class__ is Ref for y in x) for x in args):
            return False  # (values in a list)
        try:
            where = node.op.forward(CPU_BACKEND, np.dtype(np.int64), *[
                tape.positions(x) if x.__class__ is Ref else x for x in args], **node.params)
        except Exception:
            return False
        where = where if isinstance(where, (tuple, list)) else (where,)
        if len(where) != len(node.outs) or any(np.shape(w) != graph.arrays[o].shape for w, o in zip(where, node.outs)):
            return False
        for w, o in zip(where, node.outs):
            tape.gather(o, w, "%s(%s)" % (name, ", ".join(map(repr, args))))
        return True
    out = node.outs[0]
    if name == "index_put_zeros" and len(args) == 1:
        p = node.params
        try:  # the positions in the result that the key selects (index_put_zeros is indexing's VJP)
            sel = np.asarray(CPU_BACKEND.getitem(np.arange(math.prod(p["shape"]), dtype=np.int64).reshape(p["shape"]),
                                                 p["key"]))
        except Exception:
            return False
        try:
            if np.broadcast_shapes(sel.shape, graph.arrays[a].shape) != sel.shape:
                return False
        except ValueError:
            return False
        at = tape.slot(a) if graph.arrays[a].shape == sel.shape else tape.broadcast(a, sel.shape)
        tape.add(("scatter", bool(p["accumulate"]), odt), out, tape.size(out), tape.map([sel.size], sel),
                 [(at, True)], "index_put_zeros(v%d, %r)" % (a, p))
        return True
    kind = REDUCTIONS.get(name) or _GROUPED.get(name)
    if kind is None or odt.kind != "f" or len(args) != 1:
        return False
    shape = graph.arrays[a].shape
    nd = len(shape)
    if name in REDUCTIONS:
        dims = node.params.get("dims")
        dims = tuple(range(nd)) if dims is None else tuple(sorted({d % nd for d in dims})) if nd else ()
    elif kind in ("sum", "mean"):
        if set(node.params) - {"dims", "keepdim"}:
            return False
        dims = tuple(sorted({d % nd for d in node.params["dims"]})) if nd else ()
    else:
        dims = (node.params["dim"] % nd,) if nd else ()
    # each group's elements together: the reduced dims last
    perm = np.moveaxis(np.arange(tape.size(a), dtype=np.int64).reshape(shape), dims, range(nd - len(dims), nd))
    perm = perm.reshape(-1)
    length = math.prod(shape[d] for d in dims)
    if length == 0:
        return False
    permuted = not np.array_equal(perm, np.arange(perm.size))
    aux = tape.map([length], perm) if permuted else tape.map([length])
    tape.add(("group", kind, odt, permuted), out, tape.size(out), aux, [(tape.slot(a), True)],
             "%s(v%d, dims=%s)" % (name, a, list(dims)))
    return True


def _elementwise(tape, graph, node):
    out = node.outs[0]
    n = tape.size(out)
    fn, args = scalar_form(node)
    dts, operands, shown = [], [], []
    for pos, a in enumerate(args):
        if a.__class__ is Ref:
            dt = node.cnp if converted(graph, node, pos, a) else graph.arrays[a].dtype
            if tape.size(a) == n or tape.size(a) == 1:  # (broadcasting to n elements leaves their order)
                operands.append((tape.slot(a), tape.size(a) == n and n > 1))
            else:
                operands.append((tape.broadcast(a, graph.arrays[out].shape), True))
            shown.append("v%d" % a)
        else:
            c = np.asarray(a).reshape(())[()]
            dt = np.asarray(c).dtype
            if dt not in NUMPY_CASTS:
                return False
            operands.append((tape.const(c), False))
            shown.append(repr(c.item() if isinstance(c, np.generic) else c))
        dts.append(np.dtype(dt))
    tape.add(("fn", fn, tuple(dts), graph.arrays[out].dtype), out, n, 0, operands,
             "%s(%s)" % (fn, ", ".join(shown)))
    return True


def _case_lines(case):
    """The interpreter's lines for one case (the instruction's fields are o, m, k and its operands')."""
    whole = case[-1]
    # operand i: a whole slot at offset a<i>, read at j, or one value c<i>, read before the loop
    lines = ["            %s = %s" % (("a%d" if w else "c%d") % i, ("code[p, %d]" if w else "T[code[p, %d]]")
                                      % (_FIRST + i)) for i, w in enumerate(whole)]
    kind = case[0]
    if kind in ("fn", "cast") and any(whole):
        # through views of the slots, indexed from 0: an index known not to be negative lets LLVM vectorize
        lines += ["            r = T[o:o + m]"] + ["            u%d = T[a%d:a%d + m]" % (i, i, i)
                                                      for i, w in enumerate(whole) if w]
    if kind == "fn":
        _, fn, dts, odt, _ = case
        reads = [_cast(dt, ("u%d[j]" if w else "c%d") % i) for i, (dt, w) in enumerate(zip(dts, whole))]
        return lines + ["            for j in range(m):",
                        "                %s = %s" % ("r[j]" if any(whole) else "T[o + j]",
                                                     _write(odt, "F_%s(%s)" % (fn, ", ".join(reads))))]
    if kind == "cast":  # rounded to float32, or to bool by its truth (NaN is true), as NumPy's astype
        return lines + ["            for j in range(m):",
                        "                r[j] = %s" % _write(case[1], "u0[j]")]
    if kind == "gather":
        return lines + ["            for j in range(m):",
                        "                T[o + j] = T[I[k + j]]"]
    if kind == "scatter":  # into zeros; accumulated in the value's dtype, as the eager index_add
        add = "T[o + q] + T[a0 + j]" if case[1] else "T[a0 + j]"
        return lines + ["            for j in range(m):",
                        "                T[o + j] = 0.0",
                        "            for j in range(I[k]):",
                        "                q = I[k + 1 + j]",
                        "                T[o + q] = %s" % _write(case[2], add)]
    _, what, odt, permuted, _ = case  # groups of L elements: at I[k + 1 + g * L + i], else at g * L + i
    elem = "I[k + 1 + g * L + %s]" if permuted else "g * L + %s"
    at = "a0 + " + elem % "i"
    lines += ["            L = I[k]"]
    if what in ("sum", "mean"):  # in float64, as the eager kernels accumulate
        return lines + ["            for g in range(m):",
                        "                s = 0.0",
                        "                for i in range(L):",
                        "                    s += T[%s]" % at,
                        "                T[o + g] = %s" % _write(odt, "s" if what == "sum" else "s / L")]
    # softmax, log_softmax: kernels/softmax.py's arithmetic (max-shifted, exp in the value's dtype, the sum in
    # float64), the result written where its element was
    to = "o + " + elem % "i"
    x = _cast(odt, "T[%s]" % at)
    lines += ["            for g in range(m // L):",
              "                mx = T[a0 + %s]" % elem % "0",
              "                for i in range(1, L):",
              "                    mx = max(mx, T[%s])" % at,
              "                if mx == -np.inf:",
              "                    mx = 0.0",
              "                mx = %s" % _cast(odt, "mx"),
              "                s = 0.0",
              "                for i in range(L):",
              "                    s += F_exp(%s - mx)" % x]
    if what == "softmax":
        return lines + ["                for i in range(L):",
                        "                    T[%s] = %s" % (to, _write(odt, "F_exp(%s - mx) / s" % x))]
    return lines + ["                ls = np.log(s)",
                    "                for i in range(L):",
                    "                    T[%s] = %s" % (to, _write(odt, "(%s - mx) - ls" % x))]


def _interpreter_source(tape, kname):
    lines = ["def %s(code, T, I, x, at):" % kname,
             "    for q in range(at.shape[0]):  # the inputs, into their slots",
             "        for j in range(at[q, 2]):",
             "            T[at[q, 0] + j] = x[at[q, 1] + j]",
             "    for p in range(code.shape[0]):",
             "        op = code[p, 0]",
             "        o = code[p, 1]",
             "        m = code[p, 2]",
             "        k = code[p, 3]"]
    fns = set()
    for n, (case, op) in enumerate(sorted(tape.cases.items(), key=lambda kv: kv[1])):
        lines.append("        %s op == %d:" % ("if" if n == 0 else "elif", op))
        lines += _case_lines(case)
        if case[0] == "fn":
            fns.add(case[1])
        elif case[0] == "group" and case[1] in ("softmax", "log_softmax"):
            fns.add("exp")
    return "\n".join(lines) + "\n", sorted(fns), max((len(c) - _FIRST for c in tape.code), default=0)


def tape_plan(graph, outputs, name="plan"):
    """``graph`` compiled as a tape (a codegen.Compiled), or None where it is not small and tape-shaped."""
    arrays = graph.arrays
    if not _fits(graph):
        return None
    start = time.perf_counter()
    built = _BUILT.pop(id(graph), None)
    tape = built[1] if built is not None and built[0] is graph else _build(graph)
    if tape is None:
        return None
    # the constants a backward's formulas made go into the table once; the other boundary values come with each call
    frozen = [v for v in boundary_values(graph) if graph.kinds[v][0] == "const"]
    boundary = [v for v in boundary_values(graph) if graph.kinds[v][0] != "const"]
    for v in frozen + boundary + list(outputs):
        tape.slot(v)
    tdt = np.dtype(np.float32 if all(a.dtype != np.float64 for a in arrays) and all(
        np.float32(c) == c or c != c for _, c in tape.consts) else np.float64)
    # named by its source, the scalar functions' sources and the table's dtype: the disk cache never serves a
    # stale build
    src, fns, arity = _interpreter_source(tape, "KERNEL")
    kname = "tape_" + hashlib.sha1((_SCALARS_STAMP + src + tdt.name).encode()).hexdigest()[:20]
    src = src.replace("KERNEL", kname, 1)
    width = _FIRST + arity
    code = np.zeros((len(tape.code), width), np.int64)
    for i, c in enumerate(tape.code):
        code[i, :len(c)] = c
    table = np.zeros(max(tape.top, 1), tdt)
    for r, c in tape.consts:
        table[r] = c
    for v in frozen:
        table[tape.slots[v]:tape.slots[v] + arrays[v].size] = arrays[v].reshape(-1)
    maps = np.concatenate(tape.maps)
    at = np.zeros((len(boundary), 3), np.int64)  # (offset in the table, offset in the inputs, elements) per argument
    offset = 0
    for k, v in enumerate(boundary):
        size = arrays[v].size
        at[k] = (tape.slots[v], offset, size)
        offset += size
    kernel, hit = _kernel(kname, src, fns, False, [code, table, maps, np.zeros(1, tdt), at])
    unique = list(dict.fromkeys(outputs))
    outs = [(tape.slots[v], arrays[v].size, arrays[v].shape, arrays[v].dtype) for v in unique]
    # a value asked for twice (returned, and saved for the backward) is one array, as generated code returns it
    picks = [unique.index(v) for v in outputs] if len(unique) < len(outputs) else None
    fn = _plan_function(kernel, code, table, maps, at, outs, picks)
    sizes = sorted({a.size for a in arrays})
    listing = ["def %s(%s):  # a tape of %d instructions over values of %s element(s), run by %s" % (
        name, ", ".join("v%d" % v for v in boundary), len(tape.code), ", ".join(map(str, sizes)), kname)] + \
        tape.listing + ["    return (%s)" % "".join("v%d, " % v for v in outputs)]
    return Compiled(fn, "\n".join(listing) + "\n", [src], [], time.perf_counter() - start, hit, boundary,
                    list(outputs), len(tape.code))


def _plan_function(kernel, code, table, maps, at, outs, picks):
    # every slot is written before it is read (inputs first, then each instruction's result), and the
    # constants' slots are never written: a table is reused between calls. One per concurrent call
    # (list.pop and list.append are atomic), so threads and re-entrant calls get tables of their own.
    spare = [table.copy()]

    def plan(*arrays):
        T = spare.pop() if spare else table.copy()
        x = np.concatenate(arrays, axis=None, dtype=T.dtype) if arrays else np.zeros(1, T.dtype)  # (flattened)
        kernel(code, T, maps, x, at)
        res = tuple(T[r:r + size].reshape(shape).astype(dt) for r, size, shape, dt in outs)  # (arrays of their own)
        spare.append(T)
        return res if picks is None else tuple(res[k] for k in picks)
    return plan
