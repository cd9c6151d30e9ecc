"""PyTorch-style printing: ``tensor([[1., 2.]], requires_grad=True)``."""
import numpy as np

from . import _dtype as D

THRESHOLD, EDGE = 1000, 3


def _float_formatter(values):
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return lambda v: _special(v) or "%.4f" % v
    absf = np.abs(finite)
    nonzero = absf[absf > 0]
    if np.all(finite == np.round(finite)):
        if nonzero.size and (nonzero.max() >= 1e8):
            return lambda v: _special(v) or "%.4e" % v
        return lambda v: _special(v) or "%.0f." % v
    if nonzero.size and (nonzero.max() / nonzero.min() > 1000.0 or nonzero.max() > 1e8 or nonzero.min() < 1e-4):
        return lambda v: _special(v) or "%.4e" % v
    return lambda v: _special(v) or "%.4f" % v


def _special(v):
    if np.isnan(v):
        return "nan"
    if np.isinf(v):
        return "inf" if v > 0 else "-inf"
    return None


def _summarize(a):
    """Indices to show along each dim when the tensor is too large to print whole."""
    return a.size > THRESHOLD


def _format(a, fmt, indent, summarize):
    if a.ndim == 0:
        return fmt(a[()])
    n = a.shape[0]
    idx = list(range(n))
    if summarize and n > 2 * EDGE:
        idx = list(range(EDGE)) + [None] + list(range(n - EDGE, n))
    if a.ndim == 1:
        parts = ["..." if i is None else fmt(a[i]) for i in idx]
        width = max((len(p) for p in parts if p != "..."), default=0)
        parts = [p if p == "..." else p.rjust(width) for p in parts]
        per_line = max(1, (80 - indent) // (width + 2))
        lines = [", ".join(parts[i:i + per_line]) for i in range(0, len(parts), per_line)]
        return "[" + (",\n" + " " * (indent + 1)).join(lines) + "]"
    sep = "," + "\n" * (a.ndim - 1) + " " * (indent + 1)
    rows = ["..." if i is None else _format(a[i], fmt, indent + 1, summarize) for i in idx]
    return "[" + sep.join(rows) + "]"


def format_array(a, indent):
    summarize = _summarize(a)
    if a.dtype == np.bool_:
        fmt = lambda v: "True" if v else "False"  # noqa: E731
        return _format(a, fmt, indent, summarize), fmt
    if a.dtype.kind in "iu":
        shown = a
        width = max((len(str(v)) for v in shown.reshape(-1)), default=1)
        fmt = lambda v: str(int(v)).rjust(width)  # noqa: E731
        return _format(a, fmt, indent, summarize), fmt
    base = _float_formatter(a.reshape(-1).astype(np.float64))
    width = max((len(base(v)) for v in a.reshape(-1)), default=1)
    fmt = lambda v: base(v).rjust(width)  # noqa: E731
    return _format(a, fmt, indent, summarize), fmt


def tensor_repr(t, prefix="tensor("):
    a = t._host()
    suffix = []
    if a.size == 0 and a.ndim != 1:
        body = "[]"
        suffix.append("size=(%s)" % ", ".join(map(str, a.shape)) + ("," if a.ndim == 1 else ""))
    else:
        body, _ = format_array(a, len(prefix))
    if t.device.type != "cpu":
        suffix.append("device='%s'" % t.device)
    d = t.dtype
    if d not in (D.get_default_dtype(), D.int64, D.bool_) or (a.size == 0 and d is not D.get_default_dtype()):
        suffix.append("dtype=%r" % d)
    if t.grad_fn is not None:
        suffix.append("grad_fn=<%s>" % t.grad_fn.name())
    elif t._requires_grad:
        suffix.append("requires_grad=True")
    return prefix + body + "".join(", " + s for s in suffix) + ")"
