"""NaN-propagating maximum and minimum as LLVM intrinsics (vectorizable), and the stand-ins device backends compile."""
from llvmlite import ir
from numba import types
from numba.core.extending import intrinsic


# LLVM vectorizes a fold over llvm.maximum / llvm.minimum (NaN-propagating, as PyTorch's max), not
# the compare-and-select that spells the same thing; integers use smax/umax, booleans or/and.
def _extremum(float_name, signed_name, unsigned_name, bool_op):
    @intrinsic
    def extremum(typingctx, a, b):
        ty = typingctx.unify_types(a, b)
        if not isinstance(ty, (types.Float, types.Integer, types.Boolean)):
            return None

        def codegen(context, builder, sig, args):
            t = sig.return_type
            x, y = (context.cast(builder, v, s, t) for v, s in zip(args, sig.args))
            if isinstance(t, types.Boolean):
                return getattr(builder, bool_op)(x, y)
            name = float_name if isinstance(t, types.Float) else signed_name if t.signed else unsigned_name
            lt = context.get_value_type(t)
            return builder.call(builder.module.declare_intrinsic(name, [lt], ir.FunctionType(lt, [lt, lt])), (x, y))
        return ty(ty, ty), codegen
    return extremum


maximum = _extremum("llvm.maximum", "llvm.smax", "llvm.umax", "or_")
minimum = _extremum("llvm.minimum", "llvm.smin", "llvm.umin", "and_")


def device_maximum(a, b):
    """maximum() where there is no LLVM intrinsic: a NaN wins."""
    return a if a != a or a > b else b


def device_minimum(a, b):
    return a if a != a or a < b else b
