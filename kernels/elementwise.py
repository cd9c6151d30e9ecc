"""The CPU elementwise loops generated from the scalar functions of kernels/scalars.py, and ``run``, which applies them.

``run(name, out_dtype, *args)`` applies scalar function ``name`` over arrays: it picks (and on first
use generates) a flat loop for the argument pattern -- which arguments are arrays and which
are broadcast scalars -- serial or ``prange``-parallel by size. The CUDA twins
(``kernels.cuda.elementwise``) are generated from the same scalar functions.

The generated loops are compiled into this module's namespace with this file as their source,
so numba's on-disk cache keys them on this file; their names carry scalars.STAMP, a hash of the
scalar functions' sources, so editing a scalar function (or the math it inlines) invalidates the
cached loops too.
"""
import math

import numpy as np
from numba import prange  # noqa: F401  (used by the generated loops)

from . import config
from ._jit import compiled
from .layout_copy import flat
from . import derived  # noqa: F401  (registers the fused VJPs, derived from the op table, in SCALARS)
from .scalars import SCALARS, STAMP

_LOOP = """
def {name}({params}out):
    for i in {rng}(out.size):
        out[i] = {fn}({call})
"""


def _make_loop(fn, pattern, parallel):
    """Generate the flat loop applying scalar ``fn``; pattern[k] says whether arg k is an array."""
    name = "_loop_%s_%s_%s_%s" % (fn, "".join("a" if p else "s" for p in pattern), "par" if parallel else "ser", STAMP)
    params = "".join("x%d, " % k for k in range(len(pattern)))
    call = ", ".join(("x%d[i]" if p else "x%d") % k for k, p in enumerate(pattern))
    src = _LOOP.format(name=name, params=params, rng="prange" if parallel else "range", fn="SCALARS_%s" % fn, call=call)
    return _compiled(src, name, fn, parallel, _make_loop, (fn, pattern), (fn, False) + tuple(pattern))


# An operand broadcast along the leading dims of the output (a bias row) or along its trailing
# dims (a per-row value) is read in place by a loop over (rows, cols), instead of being expanded
# to the output's size first. Per operand: "a" full (a 2-D view, [i, j]), "t" repeated per row
# ([j]), "h" one value per row ([i]), "s" a scalar. (2-D indexing, not i * cols + j: numba cannot
# tell that a computed flat index is non-negative, and the wraparound check stops vectorization.)
_LOOP2D = """
def {name}({params}out):
    for i in {rng}(out.shape[0]):
        for j in range(out.shape[1]):
            out[i, j] = {fn}({call})
"""
_INDEX2D = {"a": "x%d[i, j]", "t": "x%d[j]", "h": "x%d[i]", "s": "x%d"}


def _make_loop2d(fn, kinds, parallel):
    name = "_loop2d_%s_%s_%s_%s" % (fn, "".join(kinds), "par" if parallel else "ser", STAMP)
    params = "".join("x%d, " % k for k in range(len(kinds)))
    call = ", ".join(_INDEX2D[c] % k for k, c in enumerate(kinds))
    src = _LOOP2D.format(name=name, params=params, rng="prange" if parallel else "range", fn="SCALARS_%s" % fn,
                         call=call)
    return _compiled(src, name, fn, parallel, _make_loop2d, (fn, tuple(kinds)), (fn, False, "2d") + tuple(kinds))


def _compiled(src, name, fn, parallel, make, args, serial_key):
    """Loop ``name`` of ``src`` compiled. A parallel loop's serial twin (``make(*args, False)``, kept in
    _loops at ``serial_key``) runs its first calls while it builds in the background."""
    namespace = globals()
    namespace["SCALARS_%s" % fn] = SCALARS[fn]
    exec(compile(src, __file__, "exec"), namespace)
    if not parallel:
        return compiled(namespace[name])

    def twin():
        loop = _loops.get(serial_key)
        if loop is None:
            loop = _loops[serial_key] = make(*args, False)
        return loop
    return compiled(namespace[name], parallel=True, twin=twin, remake=(__name__, make.__name__, args + (True,)))


def _scalar_like(a):
    """A NumPy scalar, or an array of one value, maybe broadcast (sum's gradient): passed as a scalar."""
    return a.__class__ is not np.ndarray or a.size == 1 or not any(a.strides)


def _split(args, shape):
    """(s, kinds): a split of ``shape`` at dim s into rows x cols such that every array operand is
    full, a row repeated (its dims before s are 1, after s the output's) or one value per row (the
    reverse); None when there is none."""
    nd = len(shape)
    padded = [None if _scalar_like(a) else (1,) * (nd - a.ndim) + a.shape for a in args]
    for s in range(1, nd):
        kinds = []
        for p in padded:
            if p is None:
                kinds.append("s")
            elif p == shape:
                kinds.append("a")
            elif all(d == 1 for d in p[:s]) and p[s:] == shape[s:]:
                kinds.append("t")
            elif p[:s] == shape[:s] and all(d == 1 for d in p[s:]):
                kinds.append("h")
            else:
                break
        else:
            return s, kinds
    return None


_loops = {}  # (fn, parallel, *pattern) -> compiled loop


def flat_loop(fn, pattern):
    """The serial flat loop of scalar ``fn``, ``loop(*args, out)``: pattern[k] says whether arg k is
    an array (1-D, of out's length) or a scalar (compiled on first call, as every loop)."""
    key = (fn, False) + pattern
    loop = _loops.get(key)
    if loop is None:
        loop = _loops[key] = _make_loop(fn, pattern, False)
    return loop


def run(fn, out_dtype, *args, out=None):
    """Apply scalar function ``fn`` elementwise over ``args`` with NumPy broadcasting.

    ``args`` are NumPy arrays or NumPy scalars already in the dtype to compute in (a size-1 array
    is passed to the loop as a scalar). ``out`` may be given (in-place ops); it must have the
    broadcast shape and be C-contiguous. Returns the output array.
    """
    # Fast paths for the common calls: one array, or an array with an array of the same shape or a
    # scalar. Spelled out: on 16-element tensors this Python is most of an op's cost. A 1-D array
    # goes to the flat loop as it is (no reshape).
    if out is None:
        a = args[0]
        if a.__class__ is np.ndarray:
            nd = a.ndim
            if nd:
                n = len(args)
                shape = a.shape
                if n == 1:
                    loop = _loops.get((fn, a.size >= config.PARALLEL_THRESHOLD, True))
                    if loop is not None:
                        out = np.empty(shape, out_dtype)
                        if nd == 1:
                            loop(a, out)
                        else:
                            loop(flat(a), out.reshape(-1))
                        return out
                elif n == 2:
                    b = args[1]
                    if b.__class__ is not np.ndarray:
                        loop = _loops.get((fn, a.size >= config.PARALLEL_THRESHOLD, True, False))
                        if loop is not None:
                            out = np.empty(shape, out_dtype)
                            if nd == 1:
                                loop(a, b, out)
                            else:
                                loop(flat(a), b, out.reshape(-1))
                            return out
                    elif b.shape == shape:
                        loop = _loops.get((fn, a.size >= config.PARALLEL_THRESHOLD, True, True))
                        if loop is not None:
                            out = np.empty(shape, out_dtype)
                            if nd == 1:
                                loop(a, b, out)
                            else:
                                loop(flat(a), flat(b), out.reshape(-1))
                            return out
            elif len(args) <= 2 and (len(args) == 1 or args[1].__class__ is not np.ndarray or not args[1].ndim):
                # 0-d operands (and numbers): passed to the loop as scalars, as _run_general passes them
                loop = _loops.get((fn, False, False) if len(args) == 1 else (fn, False, False, False))
                if loop is not None:
                    out = np.empty((), out_dtype)
                    if len(args) == 1:
                        loop(a[()], out.reshape(1))
                    else:
                        b = args[1]
                        loop(a[()], b[()] if b.__class__ is np.ndarray else b, out.reshape(1))
                    return out
    elif len(args) == 2:  # in place (out=), both operands of its shape (gradient accumulation): the flat loop
        a, b = args
        shape = out.shape
        if a.__class__ is np.ndarray and b.__class__ is np.ndarray and a.shape == shape and b.shape == shape \
                and out.__class__ is np.ndarray:
            loop = _loops.get((fn, out.size >= config.PARALLEL_THRESHOLD, True, True))
            if loop is not None:
                loop(flat(a), flat(b), out.reshape(-1))
                return out
    if len(args) == 2:  # a matrix and a row of it (a bias): the 2-D loop _run_general would pick
        a, b = args
        if (a.__class__ is np.ndarray and b.__class__ is np.ndarray and a.ndim == 2 and b.ndim == 1
                and a.shape[0] > 1 and 1 < b.shape[0] == a.shape[1] and (out is None or out.shape == a.shape)):
            loop = _loops.get((fn, a.size >= config.PARALLEL_THRESHOLD, "2d", "a", "t"))
            if loop is not None:
                if out is None:
                    out = np.empty(a.shape, out_dtype)
                loop(a, b, out)
                return out
    return _run_general(fn, out_dtype, args, out)


def _run_general(fn, out_dtype, args, out):
    shapes = [a.shape for a in args if a.__class__ is np.ndarray]
    shape = np.broadcast_shapes(*shapes) if shapes else ()
    if out is None:
        out = np.empty(shape, out_dtype)
    size = out.size
    if size == 0:
        return out
    parallel = size >= config.PARALLEL_THRESHOLD
    if len(shape) > 1 and any(a.shape != shape for a in args if not _scalar_like(a)):
        split = _split(args, shape)
        if split is not None:
            s, kinds = split
            key = (fn, parallel, "2d") + tuple(kinds)
            loop = _loops.get(key)
            if loop is None:
                loop = _loops[key] = _make_loop2d(fn, kinds, parallel)
            rows = math.prod(shape[:s])
            cols = size // rows
            operands = [a.reshape(rows, cols) if k == "a" else a.reshape(-1) if k != "s" else
                        a if a.__class__ is not np.ndarray else a[(0,) * a.ndim] for a, k in zip(args, kinds)]
            loop(*operands, out.reshape(rows, cols))
            return out
    flat = []
    key = [fn, parallel]
    for a in args:
        if a.__class__ is not np.ndarray:
            flat.append(a)
            key.append(False)
        elif _scalar_like(a):
            flat.append(a[(0,) * a.ndim])
            key.append(False)
        elif a.shape == shape:
            flat.append(a.reshape(-1))  # a view when contiguous, else a C-ordered copy
            key.append(True)
        else:
            flat.append(np.broadcast_to(a, shape).reshape(-1))
            key.append(True)
    key = tuple(key)
    loop = _loops.get(key)
    if loop is None:
        loop = _loops[key] = _make_loop(fn, key[2:], key[1])
    loop(*flat, out.reshape(-1))
    return out
