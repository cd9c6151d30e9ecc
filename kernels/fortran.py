"""Calling LAPACK and BLAS routines by address from numba kernels.

The routines are SciPy's (its Cython function pointers), looked up in each process: their addresses are run-time
values, arguments of a kernel, so that the compiled kernel stays in numba's on-disk cache (a function pointer
captured as a constant would not be cached).
"""
import numpy as np
from llvmlite import ir
from numba import types
from numba.core.extending import intrinsic
from numba.extending import get_cython_function_address


@intrinsic
def call(typingctx, fn, args, keep):
    """The Fortran routine at address ``fn`` called with ``args``, a tuple of addresses (of its arguments).

    ``keep``: a tuple of the arrays whose addresses ``args`` holds. numba frees an array after its last use, and an
    address is no use: taking one would let the array's memory go (and another allocation take it) before the call
    reads it. Passed here, the arrays live until the call has returned."""
    if not isinstance(args, types.UniTuple) or not isinstance(args.dtype, types.Integer) or \
            not isinstance(keep, types.BaseTuple):
        return None

    def codegen(context, builder, signature, llargs):
        address, values, _ = llargs
        count = signature.args[1].count
        byte_ptr = ir.IntType(8).as_pointer()
        fnty = ir.FunctionType(ir.VoidType(), [byte_ptr] * count)
        fn_ptr = builder.inttoptr(context.cast(builder, address, signature.args[0], types.int64), fnty.as_pointer())
        builder.call(fn_ptr, [builder.inttoptr(builder.extract_value(values, i), byte_ptr) for i in range(count)])
        return context.get_dummy_value()
    return types.void(fn, args, keep), codegen


@intrinsic
def address(typingctx, a):
    """The address of array ``a``'s data, as an int64."""
    if not isinstance(a, types.Array):
        return None

    def codegen(context, builder, signature, args):
        data = context.make_array(signature.args[0])(context, builder, args[0]).data
        return builder.ptrtoint(data, ir.IntType(64))
    return types.int64(a), codegen


_SCIPY = {}


def scipy(dtype, routines):
    """The addresses of SciPy's LAPACK/BLAS routines for ``dtype`` (float32 or float64), ``routines`` given as
    (module, name) pairs: ("lapack", "getrf") is dgetrf's address for float64."""
    key = (np.dtype(dtype), routines)
    found = _SCIPY.get(key)
    if found is None:
        c = "s" if key[0] == np.float32 else "d"
        found = _SCIPY[key] = tuple(get_cython_function_address("scipy.linalg.cython_" + module, c + name)
                                    for module, name in routines)
    return found
