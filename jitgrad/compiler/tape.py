"""Small graphs as a tape: one compiled numba loop interprets all of a graph's elementwise work.

A graph whose values all hold one number of elements n (at most SMALL) or a single element, made of
elementwise ops, full sums and means, casts, and reshapes or expands, runs over a table ``T[value, n]``
of float64 (exact for its float32, float64 and bool values; float32 where they are all float32 or bool)
and a tape of instructions. An instruction applies one scalar function of kernels/scalars.py over n elements (or one), its operands
cast as the fused loops cast them, and rounds the result to its value's dtype. The interpreter has
one case per (scalar function, operand dtypes, result dtype, which operands are whole rows) that the
graph uses, so numba compiles a function once per graph and not once per op: a graph of thousands of
scalar ops compiles in about the time of its few distinct functions, and a graph using the same
cases loads the interpreter from the disk cache. Larger graphs get codegen's fused loops.
"""
import hashlib
import time

import numpy as np

from .ir import Ref
from .codegen import _SCALARS_STAMP, Compiled, _kernel, boundary_values, generate
from .fusion import NUMPY_CASTS, REDUCTIONS, converted, full_reduction, fusable, live_part, scalar_form

SMALL = 4096  # elements per value at most
_TABLE = frozenset((np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.bool_)))
_MOVES = frozenset(("reshape", "unsafe_view", "view", "expand", "squeeze", "unsqueeze", "flatten", "clone", "contiguous",
                    "expand_as", "view_as", "reshape_as"))
_FIRST = 3  # an instruction: opcode, result row, elements, then its operands' rows


def compile_plan(graph, outputs, fuse=True, name="plan"):
    """The plan of ``graph``: a tape where the graph is small and tape-shaped, else codegen's."""
    graph = live_part(graph, outputs)
    return (fuse and tape_plan(graph, outputs, name)) or generate(graph, outputs, fuse, name)


def _cast(dt, x):
    """Source of table value ``x`` as an operand of dtype ``dt``."""
    return "(%s != 0.0)" % x if dt == np.bool_ else "%s(%s)" % (NUMPY_CASTS[dt], x)


def _write(dt, expr):
    return "1.0 if %s else 0.0" % expr if dt == np.bool_ else "%s(%s)" % (NUMPY_CASTS[dt], expr)


class _Tape:
    """The instructions of one graph, and the rows of the table they read and write."""

    def __init__(self, graph):
        self.graph = graph
        self.rows = {}  # value -> row
        self.consts = []  # (row, value)
        self.cases = {}  # case key -> opcode
        self.code = []  # [opcode, result row, elements, operand rows...]
        self.listing = []

    def row(self, v):
        r = self.rows.get(v)
        if r is None:
            r = self.rows[v] = len(self.rows) + len(self.consts)
        return r

    def const(self, c):
        r = len(self.rows) + len(self.consts)
        self.consts.append((r, c))
        return r

    def size(self, v):
        return self.graph.arrays[v].size

    def add(self, case, out, operands, text):
        """One instruction: ``operands`` are (row, holds n elements) pairs. Which operands are whole rows
        is part of its case, so that the case's loop reads them at j and the others once, before it."""
        length = self.size(out)
        reduction = case[0] in ("sum", "mean")  # n elements in, one out
        whole = tuple(full and (length > 1 or reduction) for _, full in operands)
        op = self.cases.setdefault(case + (whole,), len(self.cases))
        self.code.append([op, self.row(out), length] + [r for r, _ in operands])
        self.listing.append("    v%d = %s" % (out, text))


def _build(graph):
    """The tape of ``graph``, or None where an op has no instruction."""
    tape = _Tape(graph)
    for node in graph.nodes:
        if len(node.outs) != 1:
            return None
        out = node.outs[0]
        odt = graph.arrays[out].dtype
        name = node.op.name
        a = node.args[0] if node.args else None
        if name in _MOVES and a.__class__ is Ref and graph.arrays[a].dtype == odt and tape.size(a) == tape.size(out) \
                and out not in tape.rows:  # the same values: the same row (every row is written once)
            tape.rows[out] = tape.row(a)
            tape.listing.append("    v%d = %s(v%d)  # v%d's row" % (out, name, a, a))
        elif fusable(graph, node):
            fn, args = scalar_form(node)
            dts, operands, shown = [], [], []
            for pos, a in enumerate(args):
                if a.__class__ is Ref:
                    dt = node.cnp if converted(graph, node, pos, a) else graph.arrays[a].dtype
                    operands.append((tape.row(a), tape.size(a) > 1))
                    shown.append("v%d" % a)
                else:
                    c = np.asarray(a).reshape(())[()]
                    dt = np.asarray(c).dtype
                    if dt not in NUMPY_CASTS:
                        return None
                    operands.append((tape.const(c), False))
                    shown.append(repr(c.item() if isinstance(c, np.generic) else c))
                dts.append(np.dtype(dt))
            tape.add(("fn", fn, tuple(dts), odt), out, operands, "%s(%s)" % (fn, ", ".join(shown)))
        elif node.args and node.args[0].__class__ is Ref and graph.arrays[node.args[0]].dtype == odt and (
                name in _MOVES or name in REDUCTIONS and tape.size(node.args[0]) == 1) and (
                tape.size(node.args[0]) in (1, tape.size(out))):
            a = node.args[0]
            tape.add(("move", odt), out, [(tape.row(a), tape.size(a) > 1)], "%s(v%d)" % (name, a))
        elif name == "cast" and node.args[0].__class__ is Ref and tape.size(node.args[0]) == tape.size(out):
            a = node.args[0]  # between the table's dtypes: the value rounded to (or widened from) odt
            tape.add(("cast", odt), out, [(tape.row(a), tape.size(a) > 1)], "cast(v%d, %s)" % (a, odt))
        elif full_reduction(graph, node) and node.args[0].__class__ is Ref and odt.kind == "f":
            a = node.args[0]
            tape.add((REDUCTIONS[name], odt), out, [(tape.row(a), True)], "%s(v%d)" % (name, a))
        else:
            return None
    return tape


def _interpreter_source(tape, kname):
    lines = ["def %s(code, T, n, x, at):" % kname,
             "    for k in range(at.shape[0]):  # the inputs, into their rows",
             "        for j in range(at[k, 2]):",
             "            T[at[k, 0], j] = x[at[k, 1] + j]",
             "    for p in range(code.shape[0]):",
             "        op = code[p, 0]",
             "        r = T[code[p, 1]]",
             "        m = code[p, 2]"]
    fns = set()
    for k, (case, op) in enumerate(sorted(tape.cases.items(), key=lambda kv: kv[1])):
        lines.append("        %s op == %d:" % ("if" if k == 0 else "elif", op))
        whole = case[-1]
        # operand i: a whole row u<i>, read at j, or one value c<i>, read before the loop
        lines += ["            %s = T[code[p, %d]]%s" % (("u%d" if w else "c%d") % i, _FIRST + i, "" if w else "[0]")
                  for i, w in enumerate(whole)]
        if case[0] == "fn":
            _, fn, dts, odt, _ = case
            fns.add(fn)
            reads = [_cast(dt, ("u%d[j]" if w else "c%d") % i) for i, (dt, w) in enumerate(zip(dts, whole))]
            lines += ["            for j in range(m):",
                      "                r[j] = %s" % _write(odt, "F_%s(%s)" % (fn, ", ".join(reads)))]
        elif case[0] == "move":
            lines += ["            for j in range(m):",
                      "                r[j] = %s" % ("u0[j]" if whole[0] else "c0")]
        elif case[0] == "cast":  # rounded to float32, or to bool by its truth (NaN is true), as NumPy's astype
            lines += ["            for j in range(m):",
                      "                r[j] = %s" % _write(case[1], "u0[j]" if whole[0] else "c0")]
        else:  # sum or mean of n elements, accumulated in float64 as the eager kernels do
            lines += ["            s = 0.0",
                      "            for j in range(n):",
                      "                s += u0[j]",
                      "            r[0] = %s" % _write(case[1], "s" if case[0] == "sum" else "s / n")]
    return "\n".join(lines) + "\n", sorted(fns), max((len(c) - _FIRST for c in tape.code), default=0)


def tape_plan(graph, outputs, name="plan"):
    """``graph`` compiled as a tape (a codegen.Compiled), or None where it is not small and tape-shaped."""
    arrays = graph.arrays
    if not graph.nodes or any(a.__class__ is not np.ndarray or a.dtype not in _TABLE for a in arrays):
        return None
    n = max(a.size for a in arrays)
    if n > SMALL or any(a.size not in (1, n) for a in arrays):
        return None
    start = time.perf_counter()
    tape = _build(graph)
    if tape is None:
        return None
    boundary = boundary_values(graph)
    for v in list(boundary) + list(outputs):
        tape.row(v)
    # float32 and bool values, and constants that float32 holds exactly: a float32 table, whose rows take twice
    # the SIMD lanes of float64 ones (a row of tanh in half the time)
    tdt = np.dtype(np.float32 if all(a.dtype != np.float64 for a in arrays) and all(
        np.float32(c) == c or c != c for _, c in tape.consts) else np.float64)
    # named by its cases, its table's dtype and the scalar functions' sources: the disk cache never serves a stale build
    kname = "tape_" + hashlib.sha1((_SCALARS_STAMP + repr(sorted(tape.cases.items(), key=lambda kv: kv[1])) + (
        "" if tdt == np.float64 else tdt.name)).encode()).hexdigest()[:20]
    src, fns, arity = _interpreter_source(tape, kname)
    width = _FIRST + arity
    code = np.zeros((len(tape.code), width), np.int64)
    for i, c in enumerate(tape.code):
        code[i, :len(c)] = c
    rows = 1 + max(list(tape.rows.values()) + [r for r, _ in tape.consts])  # (a move's value shares a row)
    table = np.zeros((rows, n), tdt)
    for r, c in tape.consts:
        table[r, :] = c
    at = np.zeros((len(boundary), 3), np.int64)  # (row, offset in the inputs, elements) per argument
    offset = 0
    for k, v in enumerate(boundary):
        size = arrays[v].size
        at[k] = (tape.rows[v], offset, size)
        offset += size
    kernel, hit = _kernel(kname, src, fns, False, [code, table, np.int64(n), np.zeros(1, tdt), at])
    outs = [(tape.rows[v], arrays[v].size, arrays[v].shape, arrays[v].dtype) for v in outputs]
    fn = _plan_function(kernel, code, table, n, at, outs)
    listing = ["def %s(%s):  # a tape of %d instructions over values of %d element(s), run by %s" % (
        name, ", ".join("v%d" % v for v in boundary), len(tape.code), n, kname)] + tape.listing + [
        "    return (%s)" % "".join("v%d, " % v for v in outputs)]
    return Compiled(fn, "\n".join(listing) + "\n", [src], [], time.perf_counter() - start, hit, boundary,
                    list(outputs), len(tape.code))


def _plan_function(kernel, code, table, n, at, outs):
    # every row is written before it is read (inputs first, then each instruction's result), and the
    # constants' rows are never written: a table is reused between calls. One per concurrent call
    # (list.pop and list.append are atomic), so threads and re-entrant calls get tables of their own.
    spare = [table.copy()]

    def plan(*arrays):
        T = spare.pop() if spare else table.copy()
        x = np.concatenate([a.reshape(-1) for a in arrays], dtype=table.dtype) if arrays else np.zeros(1, table.dtype)
        kernel(code, T, n, x, at)
        res = tuple(T[r, :size].reshape(shape).astype(dt) for r, size, shape, dt in outs)  # (arrays of their own)
        spare.append(T)
        return res
    return plan
