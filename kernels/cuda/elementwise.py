"""CUDA twins of kernels/elementwise.py: grid-stride kernels generated from the scalar functions of kernels/scalars.py.

``run(fn, out_dtype, *args, out=None)`` has the CPU signature and meaning, on device arrays. Each
scalar function of ``kernels.scalars.SCALARS`` is compiled, from its unchanged Python source,
as a CUDA device function, and one kernel is generated per pattern of arguments. An argument is
passed to the kernel in one of four forms:

    'a'    C-contiguous with the output's shape: a flat view, read at i;
    's'    a scalar: a kernel argument;
    'o'    an array of one element broadcast to the output: read at 0 (its value never visits
           the host, unlike the CPU path, which passes it as a scalar);
    'dN'   anything else (broadcast or strided, N dims): the array itself, read at the output
           coordinates of its trailing N dims (a size-1 dim reads index 0).

Broadcast operands are never materialised, and strided ones are not copied first.
"""
import inspect
import math
import types

import numpy as np
from numba import cuda

from .. import scalars, vmath
from . import _launch as L

_numpy_on_cuda = None


def _numpy_for_device():
    """``np`` as the scalar functions see it on a GPU: numba-cuda lacks the rounding ufuncs, so
    floor/ceil/trunc come from math (whose CUDA versions keep the float type, as NumPy's do) and
    rint from libdevice; every other name is NumPy's."""
    global _numpy_on_cuda
    if _numpy_on_cuda is None:
        from numba import types as nt
        from numba.cuda import libdevice
        from numba.cuda.extending import overload

        def rint(x):
            return np.rint(x)

        @overload(rint)
        def _rint(x):
            if x == nt.float32:
                return lambda x: libdevice.rintf(x)
            return lambda x: libdevice.rint(x)  # float64; integers convert, as np.rint's do

        shim = types.ModuleType("numpy_on_cuda")
        shim.floor, shim.ceil, shim.trunc, shim.rint = math.floor, math.ceil, math.trunc, rint
        shim.__getattr__ = lambda name: getattr(np, name)
        _numpy_on_cuda = shim
    return _numpy_on_cuda


_device_fns = {}
_device_math = None


def _math_for_device():
    """The names kernels.vmath's vectorizable math takes on a GPU: math's functions, and the
    device versions of vmath.DEVICE_FUNCTIONS."""
    global _device_math
    if _device_math is None:
        _device_math = dict(vmath.DEVICE_MATH, **{n: L.device_jit(f) for n, f in vmath.DEVICE_FUNCTIONS.items()})
    return _device_math


def device_function(name):
    """Scalar function ``name`` of kernels.scalars compiled as a CUDA device function."""
    f = _device_fns.get(name)
    if f is None:
        py = scalars.SCALARS[name].py_func
        # the scalar functions a derived VJP calls (S_exp: kernels/derived.py), as device functions too
        called = {n: device_function(n[2:]) for n in py.__code__.co_names if n.startswith("S_")}
        if not L.SIM:  # the simulator runs the Python source as it is
            py = L.function_with_globals(py, np=_numpy_for_device(), **_math_for_device(), **called)
        elif called:
            py = L.function_with_globals(py, **called)
        f = _device_fns[name] = L.device_jit(py)
    return f


def scalar_source(name):
    """The source of scalar function ``name`` and of the scalar functions it calls (a kernel's cache salt)."""
    py = scalars.SCALARS[name].py_func
    return inspect.getsource(py) + "".join(scalar_source(n[2:]) for n in py.__code__.co_names if n.startswith("S_"))


# ---------------------------------------------------------------- kernel generation
_KERNEL = """
def {name}({params}out{shape}):
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
{coords}        out[i] = {fn}({call})
"""


def coords_source(ndim, indent=" " * 8):
    """Source computing the coordinates c0..c{ndim-1} of flat index i over the C-order ``shape``."""
    lines = ["r = i"]
    for d in range(ndim - 1, 0, -1):
        lines += ["c%d = r %% shape[%d]" % (d, d), "r //= shape[%d]" % d]
    lines.append("c0 = r")
    return "".join(indent + line + "\n" for line in lines)


def _read(k, p, ndim):
    if p == "a":
        return "x%d[i]" % k
    if p == "s":
        return "x%d" % k
    if p == "o":
        return "x%d[0]" % k
    d = int(p[1:])  # trailing dims of the output; a size-1 dim of the operand reads index 0
    return "x%d[%s]" % (k, ", ".join("min(c%d, x%d.shape[%d] - 1)" % (ndim - d + j, k, j) for j in range(d)))


_kernels = {}


def _kernel(fn, pattern, ndim):
    key = (fn, pattern, ndim)
    k = _kernels.get(key)
    if k is None:
        globals()["_device_" + fn] = device_function(fn)
        strided = ndim > 0
        k = _kernels[key] = L.generate(
            _KERNEL, "_ew_%s_%s%s" % (fn, "_".join(pattern), "_n%d" % ndim if strided else ""), globals(), __file__,
            salt=scalar_source(fn),
            params="".join("x%d, " % j for j in range(len(pattern))), shape=", shape" if strided else "",
            coords=coords_source(ndim) if strided else "", fn="_device_" + fn,
            call=", ".join(_read(j, p, ndim) for j, p in enumerate(pattern)))
    return k


# ---------------------------------------------------------------- entry points
def run(fn, out_dtype, *args, out=None):
    """Apply scalar function ``fn`` elementwise over ``args`` with NumPy broadcasting.

    ``args`` are device arrays (any strides) or NumPy scalars already in the dtype to compute in.
    ``out`` may be given (in-place ops, fills): C-contiguous, with the broadcast shape of the
    arguments or a shape they broadcast to. Returns the output array; the launch is asynchronous.
    """
    shapes = [tuple(a.shape) for a in args if L.is_array(a)]
    shape = shapes[0] if shapes and shapes.count(shapes[0]) == len(shapes) else np.broadcast_shapes(*shapes)
    if out is None:
        out = L.empty(shape, out_dtype)
    elif tuple(out.shape) != shape:
        if np.broadcast_shapes(shape, tuple(out.shape)) != tuple(out.shape):
            raise ValueError("output of shape %s cannot hold the broadcast shape %s" % (tuple(out.shape), shape))
        shape = tuple(out.shape)
    size = math.prod(shape)
    if size == 0:
        return out
    kargs, pattern = [], []
    for a in args:
        if not L.is_array(a):
            pattern.append("s")
        elif a.size == 1:
            a = L.flat(a)
            pattern.append("o")
        elif tuple(a.shape) == shape and L.is_c_contiguous(a):
            a = L.flat(a)
            pattern.append("a")
        else:
            pattern.append("d%d" % a.ndim)
        kargs.append(a)
    pattern = tuple(pattern)
    strided = any(p[0] == "d" for p in pattern)
    kargs.append(L.flat(out))
    if strided:
        kargs.append(shape)
    L.launch(_kernel(fn, pattern, len(shape) if strided else 0), L.blocks_for(size), L.THREADS, *kargs)
    return out



# ---------------------------------------------------------------- fused loops (jitgrad.compile)
_FUSED = """
def {name}(n, {params}):
{pre}    for i in range(cuda.grid(1), n, cuda.gridsize(1)):
{body}
"""


def fused_kernel(name, params, pre, body, fns):
    """A grid-stride kernel of a fused group of jitgrad.compile: ``pre`` and ``body`` are the lines of
    the CPU loop's source (``F_<fn>(...)`` calls of scalar functions ``fns``), here calling their device
    versions; ``name`` hashes the source, so numba's cache never serves a stale build."""
    namespace = dict(globals(), **{"F_" + f: device_function(f) for f in fns})
    return L.generate(_FUSED, name, namespace, __file__, salt="".join(scalar_source(f) for f in sorted(fns)),
        params=", ".join(params), pre="".join(ln + "\n" for ln in pre), body="\n".join(body))


def launch_fused(kernel, n, *args):
    """Run a fused kernel over ``n`` elements (asynchronously)."""
    L.launch(kernel, L.blocks_for(n), L.THREADS, n, *args)
