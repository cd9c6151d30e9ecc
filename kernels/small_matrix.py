"""The math of one small matrix of a batch, written once: kernels/linalg.py compiles it into its parallel loops over
the batch (``@njit``), kernels/cuda/linalg.py into its grid-stride kernels (device functions), each matrix one
thread. For these sizes a LAPACK call per matrix costs more than the math: the adjugate forms take 2x2 and 3x3
matrices (SIZES), the triangular ones (Cholesky, triangular solves, the Cholesky gradient) orders up to ORDER.

Each function reads and writes matrix ``b`` of (B, n, n) arrays (right-hand sides (B, n, k)), C-order where it
does not say column-major (LAPACK's layout, which the triangular ones keep), and allocates nothing (CUDA device code
cannot): scratch matrices come in as arrays of the batch's shape. A helper
is called by its underscored name, which each compiling module binds to its own build (as kernels/loss.py does).
"""
import numpy as np
from numba import njit

SIZES = (2, 3)
ORDER = 8


def det_at(a, b):
    """det A by cofactors along the first row."""
    if a.shape[1] == 2:
        return a[b, 0, 0] * a[b, 1, 1] - a[b, 0, 1] * a[b, 1, 0]
    return (a[b, 0, 0] * (a[b, 1, 1] * a[b, 2, 2] - a[b, 1, 2] * a[b, 2, 1])
            - a[b, 0, 1] * (a[b, 1, 0] * a[b, 2, 2] - a[b, 1, 2] * a[b, 2, 0])
            + a[b, 0, 2] * (a[b, 1, 0] * a[b, 2, 1] - a[b, 1, 1] * a[b, 2, 0]))


def inv_at(a, b, o):
    """o[b] := A^-1 by the adjugate; whether det A is nonzero (a zero one leaves infs and NaNs)."""
    if a.shape[1] == 2:
        det = a[b, 0, 0] * a[b, 1, 1] - a[b, 0, 1] * a[b, 1, 0]
        r = 1 / det
        o[b, 0, 0], o[b, 0, 1] = a[b, 1, 1] * r, -a[b, 0, 1] * r
        o[b, 1, 0], o[b, 1, 1] = -a[b, 1, 0] * r, a[b, 0, 0] * r
        return det != 0
    c00 = a[b, 1, 1] * a[b, 2, 2] - a[b, 1, 2] * a[b, 2, 1]
    c01 = a[b, 1, 2] * a[b, 2, 0] - a[b, 1, 0] * a[b, 2, 2]
    c02 = a[b, 1, 0] * a[b, 2, 1] - a[b, 1, 1] * a[b, 2, 0]
    det = a[b, 0, 0] * c00 + a[b, 0, 1] * c01 + a[b, 0, 2] * c02
    r = 1 / det
    o[b, 0, 0], o[b, 1, 0], o[b, 2, 0] = c00 * r, c01 * r, c02 * r
    o[b, 0, 1] = (a[b, 0, 2] * a[b, 2, 1] - a[b, 0, 1] * a[b, 2, 2]) * r
    o[b, 1, 1] = (a[b, 0, 0] * a[b, 2, 2] - a[b, 0, 2] * a[b, 2, 0]) * r
    o[b, 2, 1] = (a[b, 0, 1] * a[b, 2, 0] - a[b, 0, 0] * a[b, 2, 1]) * r
    o[b, 0, 2] = (a[b, 0, 1] * a[b, 1, 2] - a[b, 0, 2] * a[b, 1, 1]) * r
    o[b, 1, 2] = (a[b, 0, 2] * a[b, 1, 0] - a[b, 0, 0] * a[b, 1, 2]) * r
    o[b, 2, 2] = (a[b, 0, 0] * a[b, 1, 1] - a[b, 0, 1] * a[b, 1, 0]) * r
    return det != 0


def pivoted_inv_at(a, b, w, o):
    """o[b] := A^-1 by Gauss-Jordan elimination with partial pivoting (the largest magnitude below the diagonal,
    the first of equals, as getrf picks), for a matrix whose adjugate failed (det A rounded to zero), so that a
    nearly singular one still gets LAPACK's finite answer. Returns getrf's info: the 1-based column of the first
    exactly-zero pivot (o is then left partly eliminated), 0 where there is none. w[b]: scratch for A."""
    n = a.shape[1]
    for i in range(n):
        for j in range(n):
            w[b, i, j] = a[b, i, j]
            o[b, i, j] = 1.0 if i == j else 0.0
    for k in range(n):
        p = k
        for i in range(k + 1, n):
            if abs(w[b, i, k]) > abs(w[b, p, k]):
                p = i
        if w[b, p, k] == 0:  # (a NaN pivot is not zero, as in LAPACK's test)
            return k + 1
        for j in range(n):
            w[b, k, j], w[b, p, j] = w[b, p, j], w[b, k, j]
            o[b, k, j], o[b, p, j] = o[b, p, j], o[b, k, j]
        r = 1 / w[b, k, k]
        for j in range(n):
            w[b, k, j] *= r
            o[b, k, j] *= r
        for i in range(n):
            if i != k:
                m = w[b, i, k]
                for j in range(n):
                    w[b, i, j] -= m * w[b, k, j]
                    o[b, i, j] -= m * o[b, k, j]
    return 0


def solve_at(inv, x, out, b):
    """out[b] := inv[b] @ x[b]."""
    n, k = inv.shape[1], x.shape[2]
    for r in range(n):
        for c in range(k):
            s = inv[b, r, 0] * x[b, 0, c]
            for j in range(1, n):
                s += inv[b, r, j] * x[b, j, c]
            out[b, r, c] = s


def inv_grad_at(r, g, out, t, b):
    """out[b] := -R^T g R^T, the gradient of R = A^-1 (t[b]: scratch for g R^T)."""
    n = r.shape[1]
    for i in range(n):
        for j in range(n):
            acc = 0.0
            for k in range(n):
                acc += g[b, i, k] * r[b, j, k]
            t[b, i, j] = acc
    for i in range(n):
        for j in range(n):
            acc = 0.0
            for k in range(n):
                acc += r[b, k, i] * t[b, k, j]
            out[b, i, j] = -acc


def solve_grad_at(a, x, g, ga, gb, inv, b):
    """gB = A^-T g and gA = -gB X^T, the gradients of X = A^-1 B (inv[b]: scratch for A^-1)."""
    n, k = a.shape[1], x.shape[2]
    _inv_at(a, b, inv)
    for i in range(n):
        for c in range(k):
            acc = 0.0
            for j in range(n):
                acc += inv[b, j, i] * g[b, j, c]
            gb[b, i, c] = acc
    for i in range(n):
        for j in range(n):
            acc = 0.0
            for c in range(k):
                acc += gb[b, i, c] * x[b, j, c]
            ga[b, i, j] = -acc


def det_grad_at(a, s, out, b):
    """out[b] := s[b] times the cofactor matrix of A (det A A^-T, defined at singular matrices too)."""
    g = s[b]
    if a.shape[1] == 2:
        out[b, 0, 0], out[b, 0, 1] = a[b, 1, 1] * g, -a[b, 1, 0] * g
        out[b, 1, 0], out[b, 1, 1] = -a[b, 0, 1] * g, a[b, 0, 0] * g
        return
    for i in range(3):
        i1, i2 = (i + 1) % 3, (i + 2) % 3
        for j in range(3):
            j1, j2 = (j + 1) % 3, (j + 2) % 3
            out[b, i, j] = (a[b, i1, j1] * a[b, i2, j2] - a[b, i1, j2] * a[b, i2, j1]) * g


def cholesky_at(f, b, upper):
    """potrf of f[b] in place, column-major as LAPACK holds it (A(i, j) = f[b, j, i]): L of the lower triangle (U of
    the upper one, A = U^T U, with ``upper``), the other triangle zeroed; returns potrf's info, the order of the first
    leading minor that is not positive-definite (0: none; the factor stops there). Multipliers by the pivot's
    reciprocal, as OpenBLAS's potf2."""
    n = f.shape[1]
    info = 0
    # G(i, j): A(i, j) where lower, A(j, i) where upper: the lower algorithm on G gives L, or U^T (in U's places)
    for j in range(n):
        s = f[b, _pick(j, j, upper), _pick(j, j, not upper)]
        for k in range(j):
            v = f[b, _pick(j, k, upper), _pick(j, k, not upper)]
            s -= v * v
        if not s > 0:  # (NaN too; the diagonal keeps what was left of it, as in potrf)
            f[b, j, j] = s
            info = j + 1
            break
        d = s ** 0.5
        f[b, j, j] = d
        r = 1 / d
        for i in range(j + 1, n):
            s = f[b, _pick(i, j, upper), _pick(i, j, not upper)]
            for k in range(j):
                s -= f[b, _pick(i, k, upper), _pick(i, k, not upper)] * f[b, _pick(j, k, upper), _pick(j, k, not upper)]
            f[b, _pick(i, j, upper), _pick(i, j, not upper)] = s * r
    for j in range(n):
        for i in range(j):
            f[b, _pick(i, j, upper), _pick(i, j, not upper)] = 0
    return info


def pick(i, j, first):
    """i where ``first``, else j: an index of a matrix read as itself or as its transpose."""
    return i if first else j


def triangular_at(a, x, b, left, upper, trans, unit):
    """trsm on x[b] in place: X := op(A)^-1 X (X op(A)^-1 where not ``left``), op(A) = A^T where ``trans``; A
    triangular (upper or lower), unit diagonal where ``unit``; both column-major (A(i, j) = a[b, j, i], X(r, c) =
    x[b, c, r]). Each column of X (row, where not left) is one substitution with M = op(A) (op(A)^T)."""
    n = a.shape[1]
    t = trans == left  # M = A^T
    lower = upper if t else not upper
    for v in range(x.shape[1] if left else x.shape[2]):
        for p in range(n):
            i = p if lower else n - 1 - p
            s = x[b, _pick(v, i, left), _pick(i, v, left)]
            for q in range(p):
                j = q if lower else n - 1 - q
                s -= a[b, _pick(i, j, t), _pick(j, i, t)] * x[b, _pick(v, j, left), _pick(j, v, left)]
            if not unit:
                s /= a[b, i, i]
            x[b, _pick(v, i, left), _pick(i, v, left)] = s


def cholesky_grad_at(l, g, out, b):
    """out[b] := L^-T Phi L^-1 (all C-order), Phi = (T + tril(T, -1)^T) / 2, T = tril(L^T gL): PyTorch's
    cholesky_backward, exactly symmetric (its lower triangle mirrored)."""
    n = l.shape[1]
    for i in range(n):
        for j in range(i + 1):
            acc = 0.0
            for k in range(i, n):
                acc += l[b, k, i] * g[b, k, j]
            out[b, i, j] = 0.5 * acc
            out[b, j, i] = 0.5 * acc
    for c in range(n):  # Y = L^-T Phi: back substitution with L^T, column by column, in place
        for i in range(n - 1, -1, -1):
            s = out[b, i, c]
            for j in range(i + 1, n):
                s -= l[b, j, i] * out[b, j, c]
            out[b, i, c] = s / l[b, i, i]
    for r in range(n):  # gA = Y L^-1: row r solves gA[r] L = Y[r], backwards
        for j in range(n - 1, -1, -1):
            s = out[b, r, j]
            for i in range(j + 1, n):
                s -= out[b, r, i] * l[b, i, j]
            out[b, r, j] = s / l[b, j, j]
    for i in range(n):
        for j in range(i):
            out[b, j, i] = out[b, i, j]


# How each function runs over a batch, as (statement for matrix b, the loop's parameters; the first one's leading
# dim is the batch): kernels/linalg.py's parallel loops and kernels/cuda/linalg.py's grid-stride kernels are both
# generated from these (``at`` is the function; inv_at's loop is each module's own: LAPACK or Gauss-Jordan decides
# where the adjugate fails).
BATCH = {
    det_at: ("out[b] = at(a, b)", "a, out"),
    solve_at: ("at(inv, x, out, b)", "inv, x, out"),
    inv_grad_at: ("at(r, g, out, scratch, b)", "r, g, out, scratch"),
    solve_grad_at: ("at(a, x, g, ga, gb, scratch, b)", "a, x, g, ga, gb, scratch"),
    det_grad_at: ("at(a, g, out, b)", "a, g, out"),
    cholesky_at: ("info[b] = at(f, b, upper)", "f, info, upper"),
    triangular_at: ("at(a, x, b, left, upper, trans, unit)", "a, x, left, upper, trans, unit"),
    cholesky_grad_at: ("at(l, g, out, b)", "l, g, out"),
}


def small(a):
    """Whether ``a`` (host or device arrays: the simulator's shapes take no negative index) holds 2x2 / 3x3 real
    matrices, which the adjugate forms take."""
    shape = tuple(a.shape)
    return len(shape) >= 2 and shape[-1] in SIZES and shape[-2] == shape[-1] and a.dtype in (np.float32, np.float64)


# CPU builds, inlined into kernels/linalg.py's loops (solve_grad_at finds its helper as _inv_at; CUDA swaps in its own)
_inv_at = njit(inline="always")(inv_at)
_pick = njit(inline="always")(pick)
