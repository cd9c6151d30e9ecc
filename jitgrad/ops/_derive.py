"""Fused VJP kernels derived from the VJP formulas: an elementwise entry states its derivative once.

``fused=[derive("tanh_vjp")]`` in an entry: its formula, written over tensor methods and operators
(``lambda g, s: g * (1 - s.result * s.result)``), runs once on symbols, which record it as the body of
a scalar function ``tanh_vjp(g, out)`` taking what the formula reads. kernels/derived.py holds those
functions, written from the entries by ``python -m jitgrad.ops`` (a test checks it is current):
the eager backward, the compiler's fused loops and the CUDA kernels run them as every scalar function.
A formula that branches on values in Python, or calls something that is not an elementwise entry, is
refused when its entry is built.
"""
import math

from ..kernels.scalars import SCALARS
from ._table import OPS

SOURCES = {}  # kernel name -> the source of its scalar function, in the order the entries declare them
_ARG = {"self": "x", "other": "y", "result": "out"}  # the functions' names for the formulas' operands


def _node(v, ctx):
    """An operand as a node: a symbol's, or a number's in the gradient's type."""
    if isinstance(v, Sym):
        return v
    if isinstance(v, bool):
        return ctx.node(repr(v), ())
    if isinstance(v, (int, float)):
        text = repr(v) if math.isfinite(v) else "math.nan" if v != v else "%smath.inf" % ("-" if v < 0 else "")
        return ctx.node("like(g, %s)" % text, ())
    raise TypeError("a derived VJP formula used %r, which is neither a symbol nor a number" % (v,))


class _Context:
    """One formula's run on symbols: its expression nodes, each made once (a repeated subexpression is one
    node, which the source computes once), and the scalar functions it calls."""

    def __init__(self):
        self.nodes = {}  # expression text -> Sym
        self.calls = set()

    def node(self, fmt, kids, truth=False):
        text = fmt % tuple(k.text for k in kids) if kids else fmt
        sym = self.nodes.get(text)
        if sym is None:
            sym = self.nodes[text] = Sym(self, fmt, kids, text, truth)
        return sym

    def source(self, name, args, out):
        """The function computing node ``out``: a node read twice or more gets a name of its own."""
        uses, order, seen = {}, [], set()

        def visit(n):
            for k in n.kids:
                uses[k] = uses.get(k, 0) + 1
                if k not in seen:
                    seen.add(k)
                    visit(k)
            order.append(n)
        visit(out)
        names, lines = {}, []

        def render(n):
            if n in names:
                return names[n]
            return n.fmt % tuple(render(k) for k in n.kids) if n.kids else n.fmt
        for n in order:
            if n is not out and n.kids and uses.get(n, 0) > 1:
                text = render(n)
                names[n] = "t%d" % len(names)
                lines.append("    %s = %s\n" % (names[n], text))
        return "@scalar\ndef %s(%s):\n%s    return %s\n" % (name, ", ".join(args), "".join(lines), render(out))


class Sym:
    """A scalar in a formula run on symbols: a node of its expression (``fmt`` over its ``kids``)."""
    __slots__ = ("ctx", "fmt", "kids", "text", "truth")
    __hash__ = object.__hash__

    def __init__(self, ctx, fmt, kids, text, truth):
        self.ctx, self.fmt, self.kids, self.text, self.truth = ctx, fmt, kids, text, truth

    def _op(self, fmt, *operands, truth=False):
        return self.ctx.node(fmt, tuple(_node(o, self.ctx) for o in operands), truth)

    def __add__(self, o): return self._op("(%s + %s)", self, o)
    def __radd__(self, o): return self._op("(%s + %s)", o, self)
    def __sub__(self, o): return self._op("(%s - %s)", self, o)
    def __rsub__(self, o): return self._op("(%s - %s)", o, self)
    def __mul__(self, o): return self._op("(%s * %s)", self, o)
    def __rmul__(self, o): return self._op("(%s * %s)", o, self)
    def __truediv__(self, o): return self._op("(%s / %s)", self, o)
    def __rtruediv__(self, o): return self._op("(%s / %s)", o, self)
    def __neg__(self): return self._op("(-%s)", self)
    def __lt__(self, o): return self._op("(%s < %s)", self, o, truth=True)
    def __le__(self, o): return self._op("(%s <= %s)", self, o, truth=True)
    def __gt__(self, o): return self._op("(%s > %s)", self, o, truth=True)
    def __ge__(self, o): return self._op("(%s >= %s)", self, o, truth=True)
    def __eq__(self, o): return self._op("(%s == %s)", self, o, truth=True)
    def __ne__(self, o): return self._op("(%s != %s)", self, o, truth=True)
    def __and__(self, o): return self._op("(%s and %s)", self, o, truth=True)
    def __or__(self, o): return self._op("(%s or %s)", self, o, truth=True)
    def __invert__(self): return self._op("(not %s)", self, truth=True)

    def __pow__(self, o):
        if isinstance(o, int) and 2 <= o <= 4:  # a small power as products (numba's float ** int widens)
            return self._op("(%s)" % " * ".join(["%s"] * o), *[self] * o)
        return self._op("(%s ** %s)", self, o)

    def __bool__(self):
        raise TypeError("a derived VJP formula cannot branch on a value in Python: use where()")

    # the tensor methods formulas use, as scalar expressions
    def where(self, condition, other):
        return self._op("(%s if %s else %s)", self, condition, other)

    def masked_fill(self, mask, value):
        return self._op("(%s if %s else %s)", value, mask, self)

    def to(self, dtype):
        return self._op("(like(g, 1) if %s else like(g, 0))", self) if self.truth else self

    def abs(self):
        return self._op("abs(%s)", self)

    @property
    def dtype(self):
        return None  # (read by .to(x.dtype))

    def __getattr__(self, name):
        """``x.exp()``, ``x.softplus()``, ``x.polygamma(1)``: an elementwise entry's scalar function, its params
        given positionally or at their defaults."""
        op = OPS.get(name)  # (an entry built after the one deriving: its scalar function, without params)
        kernel = getattr(op.forward, "kernel", None) if op is not None else name if name in SCALARS else None
        if kernel is None or name.startswith("_"):
            raise AttributeError("a derived VJP formula called %r, which is not an elementwise entry" % name)

        def method(*given):
            params = list(op.exposure.params.values()) if op is not None else []
            params[:len(given)] = given
            self.ctx.calls.add("S_" + kernel)
            return self._op("S_%s(%s)" % (kernel, ", ".join(["%s"] * (1 + len(params)))), self, *params)
        return method


class _Saved:
    """The ``s`` a formula reads, its attributes as symbols; records what it reads, in order."""

    def __init__(self, op, ctx):
        object.__setattr__(self, "_op", op)
        object.__setattr__(self, "_ctx", ctx)
        object.__setattr__(self, "order", [])

    def __getattr__(self, name):
        op = self._op
        if name == "params":
            return {k: getattr(self, k) for k in op.exposure.params}
        if name not in (op.inputs or ()) + op.outputs and name not in op.exposure.params:
            raise AttributeError("a derived VJP formula read s.%s, which %r has not" % (name, op.name))
        if name not in self.order:
            self.order.append(name)
        return self._ctx.node(_ARG.get(name, name), ())


class derive:
    """The fused VJP spec of an entry whose kernel is made from its formula: ``fused=[derive("tanh_vjp")]``.
    The entry resolves it when it is built (``spec``), giving ('tanh_vjp', ('g', 'result'))."""
    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def spec(self, op, k):
        ctx = _Context()
        s = _Saved(op, ctx)
        out = _node(op.derivatives.vjp[k](ctx.node("g", ()), s), ctx)
        if self.name in SOURCES:
            raise ValueError("two entries derive kernels named %r" % self.name)
        SOURCES[self.name] = (ctx.source(self.name, ["g"] + [_ARG.get(n, n) for n in s.order], out), sorted(ctx.calls))
        return (self.name, ("g",) + tuple(s.order))


def module_source():
    """kernels/derived.py: every derived kernel, for the scalar functions of kernels/scalars.py."""
    names = sorted({n for _, reads in SOURCES.values() for n in reads})
    head = ['"""The fused VJP scalar functions, derived from the op table\'s VJP formulas (jitgrad/ops/_derive.py).',
            "",
            "Written by ``python -m jitgrad.ops``: do not edit; change the formula in its entry.",
            '"""',
            "import math  # noqa: F401  (math.nan, math.inf: read by the functions)",
            "",
            "from .scalars import SCALARS, like, scalar  # noqa: F401  (like: read by the functions)",
            ""]
    head += ["%s = SCALARS[%r]" % (n, n[2:]) for n in names]
    return "\n".join(head) + "\n\n\n" + "\n\n".join(src for src, _ in SOURCES.values())


def write(path):
    """Write kernels/derived.py (at ``path``) from the entries' formulas."""
    with open(path, "w") as f:
        f.write(module_source())
