"""PyTorch-style printing: ``tensor([[1., 2.]], requires_grad=True)``."""
import numpy as np

from . import _dtype as D

THRESHOLD, EDGE = 1000, 3


def _float_format(values):
    """PyTorch's choice for floats, made from the nonzero finite values shown: integer-valued ('1.'), fixed
    ('1.5000') or scientific ('1.0000e+04', when they span more than 1000x, exceed 1e8 or go below 1e-4)."""
    shown = values[np.isfinite(values) & (values != 0)]
    if shown.size == 0:
        return "%.0f."
    mags = np.abs(shown)
    lo, hi = mags.min(), mags.max()
    if np.all(shown == np.ceil(shown)):
        return "%.4e" if hi / lo > 1000.0 or hi > 1e8 else "%.0f."
    return "%.4e" if hi / lo > 1000.0 or hi > 1e8 or lo < 1e-4 else "%.4f"


def _special(v):
    if np.isnan(v):
        return "nan"
    if np.isinf(v):
        return "inf" if v > 0 else "-inf"
    return None


def _summarized(a):
    """The values printed when ``a`` is summarized: the first and last EDGE entries along each long dim."""
    for ax in range(a.ndim):
        n = a.shape[ax]
        if n > 2 * EDGE:
            a = np.concatenate([a.take(range(EDGE), ax), a.take(range(n - EDGE, n), ax)], ax)
    return a


def _format(a, fmt, indent, summarize):
    if a.ndim == 0:
        return fmt(a[()])
    n = a.shape[0]
    idx = list(range(n))
    if summarize and n > 2 * EDGE:
        idx = list(range(EDGE)) + [None] + list(range(n - EDGE, n))
    if a.ndim == 1:
        parts = [" ..." if i is None else fmt(a[i]) for i in idx]
        per_line = max(1, (80 - indent) // (fmt.width + 2))
        lines = [", ".join(parts[i:i + per_line]) for i in range(0, len(parts), per_line)]
        return "[" + (",\n" + " " * (indent + 1)).join(lines) + "]"
    sep = "," + "\n" * (a.ndim - 1) + " " * (indent + 1)
    rows = ["..." if i is None else _format(a[i], fmt, indent + 1, summarize) for i in idx]
    return "[" + sep.join(rows) + "]"


def format_array(a, indent):
    """The body of a tensor's repr, and the element formatter (right-justified to a common width)."""
    summarize = a.size > THRESHOLD
    shown = (_summarized(a) if summarize else a).reshape(-1)
    if a.dtype == np.bool_:
        base = lambda v: "True" if v else "False"  # noqa: E731
        values = shown
    elif a.dtype.kind in "iu":
        base = lambda v: str(int(v))  # noqa: E731
        values = shown
    elif a.dtype.kind == "c":
        return _format(a, _complex_formatter(shown), indent, summarize), None
    else:
        shown = shown.astype(np.float64)
        spec = _float_format(shown)
        base = lambda v: _special(v) or spec % v  # noqa: E731
        values = shown[np.isfinite(shown) & (shown != 0)]  # the width comes from these only, as in PyTorch

    def fmt(v):
        return base(v).rjust(fmt.width)
    fmt.width = max((len(base(v)) for v in values), default=1)
    return _format(a, fmt, indent, summarize), fmt


def _part_formatter(parts):
    """One part's (real or imaginary) formatter: PyTorch formats each part from its own values."""
    spec = _float_format(parts)
    base = lambda v: _special(v) or spec % v  # noqa: E731
    return base, max((len(base(v)) for v in parts[np.isfinite(parts) & (parts != 0)]), default=1)


def _complex_formatter(shown):
    """PyTorch's complex elements: the real part right-justified, then the signed imaginary part and 'j' (not
    padded: PyTorch strips its padding)."""
    re, re_width = _part_formatter(shown.real.astype(np.float64))
    im, im_width = _part_formatter(shown.imag.astype(np.float64))

    def fmt(v):
        imag = im(v.imag)
        if imag[0] not in "+-":
            imag = "+" + imag
        return re(v.real).rjust(re_width) + imag + "j"
    fmt.width = re_width + im_width + 1
    return fmt


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
    if d not in (D.get_default_dtype(), D.get_default_dtype().to_complex(), D.int64, D.bool_) or (a.size == 0 and d is not D.get_default_dtype()):
        suffix.append("dtype=%r" % d)
    if t.grad_fn is not None:
        suffix.append("grad_fn=<%s>" % t.grad_fn.name())
    elif t._requires_grad:
        suffix.append("requires_grad=True")
    return prefix + body + "".join(", " + s for s in suffix) + ")"
