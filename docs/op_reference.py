"""Write the op reference (docs/ops.md) from the op table, ``jitgrad.ops.OPS``.

    python docs/op_reference.py            # rewrites docs/ops.md
    python docs/op_reference.py OUT.md     # writes the page somewhere else

One section per entry, grouped by the module of ``jitgrad/ops/`` that defines it and sorted by name:
its public names, inputs and outputs, dtype rule and unsupported dtypes, whether it is a view, its
autograd node, the derivative formula of each input (the formula's own source), its fused VJP kernel,
its forward kernel and devices. The page holds nothing that changes from run to run (no addresses, no
timings), so tests/test_docs.py can regenerate it and compare it with the checked-in copy.
"""
import ast
import inspect
import os
import sys
import textwrap

# the op table of this checkout, whatever jitgrad is installed
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import jitgrad  # noqa: E402
import jitgrad.nn.functional as F  # noqa: E402
from jitgrad.ops import OPS  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))

DTYPE_RULES = {
    "promote": "PyTorch's type promotion of the operands",
    "float": "type promotion; an integer or bool result becomes the default float dtype",
    "same": "the promoted operand dtype (for one input: its own)",
    "bool": "computes in the promoted dtype, returns bool",
    "int64": "computes in the promoted dtype, returns int64",
    "keep": "the first tensor operand's dtype, unconverted",
}


def _unwrap(fn):
    while hasattr(fn, "__wrapped__"):
        fn = fn.__wrapped__
    return fn


def _module_attr(fn):
    """Whether ``fn`` is a module-level lambda or the module attribute its name says (not made by a factory)."""
    q = getattr(fn, "__qualname__", "")
    if q == "<lambda>":
        return True
    mod = sys.modules.get(getattr(fn, "__module__", None) or "")
    return q == getattr(fn, "__name__", None) and getattr(mod, fn.__name__, None) is fn


def defining_module(op):
    """The module of jitgrad/ops/ whose source builds the entry: that of the first of its public callable,
    VJP formulas, fused VJP functions and forward that is written there (not made by a helper of another
    module), else that of the first callable from jitgrad/ops/ at all."""
    fns = [op.exposure.call] + [f for f in op.derivatives.vjp if f] + [f for f in op.derivatives.fused if callable(f)] + [op.forward]
    fns = [_unwrap(f) for f in fns if f is not None]
    ours = [f for f in fns if (getattr(f, "__module__", None) or "").startswith("jitgrad.ops.")
            and f.__module__ != "jitgrad.ops._table"]
    for f in ours:
        if _module_attr(f):
            return f.__module__
    return ours[0].__module__ if ours else "jitgrad.ops"


# ------------------------------------------------------------------ source of formulas and forwards
_TREES = {}


def _tree(filename):
    if filename not in _TREES:
        with open(filename, encoding="utf-8") as f:
            text = f.read()
        _TREES[filename] = (text, ast.parse(text))
    return _TREES[filename]


def _lambda_source(fn):
    """The source of lambda ``fn`` alone (not the whole line it sits on), with its original line breaks."""
    code = fn.__code__
    text, tree = _tree(code.co_filename)
    nodes = [n for n in ast.walk(tree) if isinstance(n, ast.Lambda) and n.lineno == code.co_firstlineno]
    if len(nodes) > 1:  # several lambdas start on that line: the one that compiles to the same code
        same = [n for n in nodes if _same_code(ast.get_source_segment(text, n), code)]
        nodes = same or nodes
    if not nodes:
        return None
    src = ast.get_source_segment(text, nodes[0], padded=True)
    return textwrap.dedent(src).strip() if src else None


def _same_code(src, code):
    try:
        compiled = compile("(%s)" % src, code.co_filename, "eval")
    except SyntaxError:
        return False
    lam = next((c for c in compiled.co_consts if inspect.iscode(c)), None)
    return lam is not None and lam.co_code == code.co_code and lam.co_names == code.co_names \
        and lam.co_varnames == code.co_varnames and _consts(lam) == _consts(code)


def _consts(code):
    return tuple(c for c in code.co_consts if not inspect.iscode(c))


def source(fn):
    """(one line or None, block or None): a single-line lambda inline, anything else as a code block."""
    fn = _unwrap(fn)
    if getattr(fn, "__name__", None) == "<lambda>":
        src = _lambda_source(fn)
        if src is not None:
            return (src, None) if "\n" not in src else (None, src)
    try:
        return None, textwrap.dedent(inspect.getsource(fn)).rstrip()
    except (OSError, TypeError):
        return "%s" % getattr(fn, "__qualname__", fn), None


def code(s):
    """``s`` as inline Markdown code."""
    s = str(s)
    return "`` %s ``" % s if "`" in s else "`%s`" % s


def text(s):
    """``s`` as plain Markdown text (what would format, escaped)."""
    for c in "\\`*_<>|[]":
        s = s.replace(c, "\\" + c)
    return s


def _name_of(fn):
    """A function's name as its source file knows it: ``_reduce_forward.<locals>.forward`` reads as
    "``forward``, made by ``_reduce_forward``"."""
    q = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or type(fn).__name__
    if "<locals>" in q:
        parts = q.split(".<locals>.")
        return "%s, made by %s" % (code(parts[-1]), code(parts[-2]))
    return code(q)


# ------------------------------------------------------------------ public names
def _public_index():
    """id(function) -> the public names it has: jitgrad.X, jitgrad.nn.functional.X, Tensor.X."""
    index = {}
    spaces = ((vars(jitgrad), "jitgrad."), (vars(F), "jitgrad.nn.functional."), (vars(jitgrad.Tensor), "Tensor."))
    for namespace, prefix in spaces:
        for name, value in sorted(namespace.items()):
            if name.startswith("_"):
                continue
            if callable(value):
                index.setdefault(id(_unwrap(value)), []).append(prefix + name)
    return index


def public_names(op):
    """The names the entry publishes (its api, in-place forms, operators, nn module), as register() does."""
    names = []
    for n in op.exposure.api:
        if op.exposure.function:
            names.append(code("jitgrad." + n))
        if op.exposure.method:
            names.append(code("Tensor." + n))
    for n in op.exposure.api:
        if op.exposure.inplace is True or n in (op.exposure.inplace or ()):
            names.append("in place " + code("Tensor.%s_" % n))
    if op.exposure.operators:
        names.append("operators " + ", ".join(code(o) for o in op.exposure.operators))
    if op.exposure.module:
        names.append("nn module " + code("jitgrad.nn." + op.exposure.module))
        names.append(code("jitgrad.nn.functional." + op.name) + " and " + code("jitgrad.nn.functional.%s_" % op.name))
    return names


# ------------------------------------------------------------------ the page
def _outputs(op):
    if op.n_outputs is None:
        return "one per piece (the node's `output_nr` 0..k-1)"
    if len(op.outputs) == op.n_outputs:
        return ", ".join(code(o) + (" (workspace: hidden, takes no gradient)" if k in op.workspace else "")
                         for k, o in enumerate(op.outputs))
    return "%d (formulas read %s)" % (op.n_outputs, ", ".join(code(o) for o in op.outputs))


def _fused(spec):
    if spec is None:
        return None
    if isinstance(spec, tuple):
        return "kernel %s" % code("%s(%s)" % (spec[0], ", ".join(spec[1])))
    return "function %s" % _name_of(spec)


def _devices(op):
    try:
        first = next(iter(inspect.signature(op.forward).parameters), None)
    except (TypeError, ValueError):
        first = None
    return "cpu, cuda" if first == "xp" else "cpu"


def op_section(op, public):
    lines = ["### %s" % code(op.name), ""]
    names = public_names(op)
    # other public names of the entry's callable (jitgrad.sum for sum_all, F.pad for the padding entries)
    reached = [] if op.exposure.call is None else [code(n) for n in public.get(id(_unwrap(op.exposure.call)), [])
                                          if not any(code(n) in x for x in names)]
    if names:
        lines.append("- **Public names:** " + ", ".join(names) + ("; also " + ", ".join(reached) if reached else ""))
    else:
        lines.append("- **Public names:** none of its own" + ("; called through " + ", ".join(reached)
                                                               if reached else ""))
    if op.exposure.params:
        lines.append("- **Parameters:** " + ", ".join(code("%s=%r" % kv) for kv in op.exposure.params.items()))
    inputs = "any number of tensors (one formula, given the input's position)" if op.inputs is None \
        else ", ".join(code(i) for i in op.inputs)
    lines.append("- **Inputs:** %s; **outputs:** %s" % (inputs, _outputs(op)))
    rule = "%s: %s" % (code(op.types.rule), DTYPE_RULES.get(op.types.rule, op.types.rule))
    if op.types.keep_inputs:
        rule += "; inputs at positions %s keep their own dtype" % ", ".join(str(i) for i in sorted(op.types.keep_inputs))
    lines.append("- **dtype:** " + rule)
    if op.types.unsupported:
        lines.append("- **Unsupported dtypes:** " + "; ".join(
            "%s (%s: %s)" % (code(d), exc.__name__, text(msg)) for d, (exc, msg) in sorted(op.types.unsupported.items())))
    half = {"float32": "computed in float32, rounded to the storage dtype",
            "refused": "refused, as PyTorch refuses them"}.get(op.types.reduced_precision, "run on the stored values")
    lines.append("- **float16 / bfloat16:** " + half)
    if op.types.autocast:
        lines.append("- **Autocast:** " + ", ".join("%s: %s" % (code(k), code(v))
                                                    for k, v in sorted(op.types.autocast.items())))
    node = code(op.node_name)
    if op.scalar_nodes:
        node += "".join("; %s when input %d is a Python number" % (code(c.__name__), k)
                        for k, c in enumerate(op.scalar_nodes) if c is not op.node_cls)
    lines.append("- **View:** %s; **autograd node:** %s; **devices:** %s"
                 % ("yes" if op.view else "no", node, _devices(op)))
    fwd = op.forward
    if op.kernel:
        lines.append("- **Forward kernel:** " + code(op.kernel))
    else:
        one, block = source(fwd) if getattr(fwd, "__name__", None) == "<lambda>" else (None, None)
        if one:
            lines.append("- **Forward:** " + code(one))
        elif block:
            lines += ["- **Forward:**", "", textwrap.indent("```python\n%s\n```" % block, "  ")]
        else:
            lines.append("- **Forward:** " + _name_of(fwd))
    if not op.differentiable:
        lines.append("- **Derivative:** not differentiable")
    else:
        lines.append("- **Derivatives:**" if op.derivatives.double_backward else "- **Derivatives** (no double backward):")
        inputs = ("tensors",) if op.inputs is None else op.inputs
        groups = {}  # inputs sharing one formula (and what it saves, and its fused kernel) are listed together
        for name, formula, fused, saves in zip(inputs, op.derivatives.vjp, op.derivatives.fused, op.derivatives.saves):
            key = (source(formula) if formula is not None else None, _fused(fused), saves)
            groups.setdefault(key, [formula, fused, saves, []])[3].append(name)
        for formula, fused, saves, names in groups.values():
            head = "  - " + ", ".join(code(n) for n in names)
            if formula is None:
                lines.append(head + ": not differentiable")
                continue
            extra = []
            if "<locals>" in getattr(formula, "__qualname__", ""):
                extra.append("made by " + code(formula.__qualname__.split(".<locals>.")[-2]))
            if saves:
                extra.append("saves " + ", ".join(code(s) for s in saves))
            f = _fused(fused)
            extra.append("fused VJP " + f if f else "no fused VJP")
            one, block = source(formula)
            if one is not None:
                lines.append("%s: %s (%s)" % (head, code(one), "; ".join(extra)))
            else:
                lines.append("%s (%s):" % (head, "; ".join(extra)))
                lines += ["", textwrap.indent("```python\n%s\n```" % block, "    "), ""]
    lines.append("")
    return lines


def render():
    public = _public_index()
    groups = {}
    for name in sorted(OPS):
        groups.setdefault(defining_module(OPS[name]), []).append(OPS[name])
    out = ["# Op reference", "",
           "Generated from the op table (`jitgrad.ops.OPS`) by `python docs/op_reference.py`; do not edit by hand.",
           "%d entries, grouped by the module of `jitgrad/ops/` that defines them. How an entry is built and "
           "what is generated from it: [design.md](design.md#the-op-table); the ops as a user sees them: "
           "[tensors-and-ops.md](tensors-and-ops.md)." % len(OPS), "",
           "In a formula, `g` is the gradient of the output and `s` the node: `s.self`, `s.other`, `s.result` "
           "are the saved inputs and outputs, other attributes the call's parameters. A fused VJP computes the "
           "same formula in one kernel when no graph of the backward is being built (`create_graph=False`). "
           "\"Devices: cpu, cuda\" means the forward is written against the backend interface (`xp`), which "
           "the CPU and CUDA backends both implement.", ""]
    for mod in sorted(groups):
        ops = groups[mod]
        out.append("- [%s](#%s): %s" % (code(mod), mod.replace(".", ""),
                                        ", ".join("[%s](#%s)" % (code(op.name), op.name) for op in ops)))
    out.append("")
    for mod in sorted(groups):
        path = mod.replace(".", "/") + ".py" if mod.startswith("jitgrad.ops.") else None  # as in the repository
        out += ["## %s" % code(mod), ""]
        doc = inspect.getdoc(sys.modules[mod]) if mod in sys.modules else None
        if doc:
            first = " ".join(doc.split("\n\n")[0].split()).replace("``", "`")
            out += [first, ""]
        if path:
            out += ["Source: [%s](../%s)" % (path, path), ""]
        for op in groups[mod]:
            out += op_section(op, public)
    return _tidy(out)


def _tidy(lines):
    """The page's lines joined, with no run of blank lines outside code blocks."""
    kept, fenced = [], False
    for line in "\n".join(lines).split("\n"):
        if line.strip().startswith("```"):
            fenced = not fenced
        if not fenced and not line.strip() and kept and not kept[-1].strip():
            continue
        kept.append(line.rstrip() if not fenced else line)
    return "\n".join(kept).rstrip() + "\n"


def main(argv):
    path = argv[1] if len(argv) > 1 else os.path.join(HERE, "ops.md")
    page = render()
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write(page)
    print("wrote %s (%d entries)" % (path, len(OPS)))


if __name__ == "__main__":
    main(sys.argv)
