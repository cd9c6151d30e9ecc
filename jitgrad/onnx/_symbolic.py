"""One ONNX rule per op-table entry that maps one-to-one (or to a fixed handful of ONNX nodes).

A rule is ``rule(b, n, x)``: ``b`` the graph builder, ``n`` the captured node (its op, params, value shapes
through ``b.shape``), ``x`` its arguments as ONNX value names (constants already made initializers of the
compute dtype, None where the argument was None). It returns the ONNX names of the node's results (None for
a result with no ONNX counterpart: max_pool2d's indices). An entry without a rule has no mapping.
"""
import math

import numpy as np

from ..kernels.pool import avg_pool_windows

RULES = {}


def rule(*names):
    def deco(fn):
        for name in names:
            RULES[name] = fn
        return fn
    return deco


def _simple(name, onnx_type, **fixed):
    RULES[name] = lambda b, n, x: [b.op(onnx_type, [x[0]], **fixed)]


for _name, _type in {"relu": "Relu", "sigmoid": "Sigmoid", "tanh": "Tanh", "exp": "Exp", "log": "Log",
                     "sqrt": "Sqrt", "abs": "Abs", "neg": "Neg", "reciprocal": "Reciprocal", "erf": "Erf",
                     "floor": "Floor", "ceil": "Ceil", "sign": "Sign", "sin": "Sin", "cos": "Cos", "tan": "Tan",
                     "asin": "Asin", "acos": "Acos", "atan": "Atan", "sinh": "Sinh", "cosh": "Cosh",
                     "asinh": "Asinh", "acosh": "Acosh", "atanh": "Atanh", "clone": "Identity",
                     "logical_not": "Not", "isnan": "IsNaN", "selu": "Selu"}.items():
    _simple(_name, _type)
_simple("hardsigmoid", "HardSigmoid", alpha=1.0 / 6, beta=0.5)  # (ONNX's default alpha is 0.2)

_BINARY = {"add": "Add", "sub": "Sub", "mul": "Mul", "div": "Div", "pow": "Pow", "maximum": "Max",
           "minimum": "Min", "eq": "Equal", "lt": "Less", "gt": "Greater", "le": "LessOrEqual",
           "ge": "GreaterOrEqual", "logical_and": "And", "logical_or": "Or", "logical_xor": "Xor"}


@rule(*_BINARY)
def _binary(b, n, x):
    other = x[1]
    alpha = n.params.get("alpha", 1)
    if alpha != 1:  # add/sub(input, other, alpha=a): other * a
        other = b.op("Mul", [other, b.const(alpha, n.cnp)])
    return [b.op(_BINARY[n.op.name], [x[0], other])]


@rule("round")
def _round(b, n, x):
    if n.params.get("decimals", 0):
        b.unsupported(n, "decimals=%r" % n.params["decimals"])
    return [b.op("Round", x[:1])]  # (half to even, as PyTorch)


@rule("hardswish")
def _hardswish(b, n, x):
    if b.opset >= 14:
        return [b.op("HardSwish", x)]
    return [b.op("Mul", [x[0], b.op("HardSigmoid", x, alpha=1.0 / 6, beta=0.5)])]


@rule("ne")
def _ne(b, n, x):
    return [b.op("Not", [b.op("Equal", x[:2])])]


@rule("square")
def _square(b, n, x):
    return [b.op("Mul", [x[0], x[0]])]


@rule("rsqrt")
def _rsqrt(b, n, x):
    return [b.op("Reciprocal", [b.op("Sqrt", x)])]


@rule("silu")
def _silu(b, n, x):
    return [b.op("Mul", [x[0], b.op("Sigmoid", x)])]


@rule("mish")
def _mish(b, n, x):
    if b.opset >= 18:
        return [b.op("Mish", x)]
    return [b.op("Mul", [x[0], b.op("Tanh", [b.op("Softplus", x)])])]


@rule("gelu", "gelu_tanh")
def _gelu(b, n, x):
    tanh = n.op.name == "gelu_tanh"
    if b.opset >= 20:
        return [b.op("Gelu", x, approximate="tanh" if tanh else "none")]
    half = b.op("Mul", [x[0], b.const(0.5, n.cnp)])
    if tanh:  # 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
        cube = b.op("Mul", [b.op("Mul", [x[0], x[0]]), x[0]])
        inner = b.op("Add", [x[0], b.op("Mul", [cube, b.const(0.044715, n.cnp)])])
        t = b.op("Tanh", [b.op("Mul", [inner, b.const(math.sqrt(2 / math.pi), n.cnp)])])
    else:  # 0.5 x (1 + erf(x / sqrt(2)))
        t = b.op("Erf", [b.op("Mul", [x[0], b.const(1 / math.sqrt(2), n.cnp)])])
    return [b.op("Mul", [half, b.op("Add", [t, b.const(1.0, n.cnp)])])]


@rule("leaky_relu")
def _leaky_relu(b, n, x):
    return [b.op("LeakyRelu", x, alpha=float(n.params.get("negative_slope", 0.01)))]


@rule("elu")
def _elu(b, n, x):
    return [b.op("Elu", x, alpha=float(n.params.get("alpha", 1.0)))]


@rule("celu")
def _celu(b, n, x):
    return [b.op("Celu", x, alpha=float(n.params.get("alpha", 1.0)))]


@rule("softplus")
def _softplus(b, n, x):
    beta = float(n.params.get("beta", 1.0))
    if beta == 1.0:
        return [b.op("Softplus", x)]
    return [b.op("Div", [b.op("Softplus", [b.op("Mul", [x[0], b.const(beta, n.cnp)])]), b.const(beta, n.cnp)])]


@rule("hardtanh")
def _hardtanh(b, n, x):
    return [b.op("Clip", [x[0], b.const(n.params.get("min_val", -1.0), n.cnp),
                          b.const(n.params.get("max_val", 1.0), n.cnp)])]


@rule("clamp")
def _clamp(b, n, x):
    lo, hi = (x + [None, None])[1:3]
    if all(v is None or b.shape(v) == () for v in (lo, hi)):  # scalar bounds: Clip
        return [b.op("Clip", [x[0], lo or "", hi or ""])]
    out = x[0]
    if lo is not None:
        out = b.op("Max", [out, lo])
    if hi is not None:
        out = b.op("Min", [out, hi])
    return [out]


@rule("threshold")
def _threshold(b, n, x):
    keep = b.op("Greater", [x[0], b.const(n.params["threshold"], n.cnp)])
    return [b.op("Where", [keep, x[0], b.const(n.params["value"], n.cnp)])]


@rule("where")
def _where(b, n, x):
    return [b.op("Where", x)]


@rule("cast")
def _cast(b, n, x):
    return [b.op("Cast", x, to=b.dtype_code(n.params["dtype"].np))]


# ------------------------------------------------------------------ matrix products, conv, pooling
@rule("mm", "matmul", "bmm", "mv", "dot")
def _matmul(b, n, x):
    return [b.op("MatMul", x)]


@rule("linear", "linear_mm")
def _linear(b, n, x):
    bias, inp, wt = x if n.op.name == "linear" else [None] + x  # (the weight comes as its transpose: t's node)
    if len(b.shape(inp)) == 2:
        return [b.op("Gemm", [inp, wt] + ([bias] if bias is not None else []))]
    y = b.op("MatMul", [inp, wt])
    return [y if bias is None else b.op("Add", [y, bias])]


@rule("addmm")
def _addmm(b, n, x):
    return [b.op("Gemm", [x[1], x[2], x[0]], alpha=float(n.params.get("alpha", 1)),
                 beta=float(n.params.get("beta", 1)))]


@rule("conv2d")
def _conv(b, n, x):
    p = n.params
    nd = p.get("nd", 2)
    k = list(p["k_hw"])[-nd:]
    pads = list(p["padding"])[-nd:]
    inputs = [x[0], x[1]] + ([x[2]] if len(x) > 2 and x[2] is not None else [])
    return [b.op("Conv", inputs, kernel_shape=k, strides=list(p["stride"])[-nd:], pads=pads + pads,
                 dilations=list(p["dilation"])[-nd:], group=int(p["groups"]))]


def _ceil_mode(in_hw, k, s, pads, out_hw):
    """1 where ONNX's floor formula gives fewer outputs than the captured (ceil_mode=True) pooling did."""
    floor = [(in_hw[i] + 2 * pads[i] - k[i]) // s[i] + 1 for i in range(2)]
    return int(list(floor) != list(out_hw))


@rule("max_pool2d")
def _max_pool(b, n, x):
    p = n.params
    k, s, pads, d = list(p["kernel_size"]), list(p["stride"]), list(p["padding"]), list(p["dilation"])
    eff = [d[i] * (k[i] - 1) + 1 for i in range(2)]
    in_hw = b.shape(x[0])[-2:]
    return [b.op("MaxPool", [x[0]], kernel_shape=k, strides=s, pads=pads + pads, dilations=d,
                 ceil_mode=_ceil_mode(in_hw, eff, s, pads, p["out_hw"])), None]


def _avg_pool_args(windows, in_hw):
    """kernel_shape, strides, pads and count_include_pad of an AveragePool computing the captured windows
    (found among the few candidates the windows suggest, checked exactly), or None."""
    hs, he, ws, we, div = windows
    out = (len(hs), len(ws))
    cands = []
    for starts, ends, size in ((hs, he, in_hw[0]), (ws, we, in_hw[1])):
        steps = {int(starts[i + 1] - starts[i]) for i in range(len(starts) - 1)} | {int(ends[-1] - ends[-2])
                                                                                   if len(ends) > 1 else size}
        widths = {int(e - s) for s, e in zip(starts, ends)}
        cands.append([(kk, ss, pp) for kk in widths | {w + p for w in widths for p in range(1, 4)}
                      for ss in steps | widths if ss > 0 for pp in range(0, kk // 2 + 1)])
    for kh, sh, ph in cands[0]:
        for kw, sw, pw in cands[1]:
            for cip in (True, False):
                try:
                    got = avg_pool_windows(in_hw, (kh, kw), (sh, sw), (ph, pw), out, cip, None)
                except ValueError:
                    continue
                if all(np.array_equal(a, c) for a, c in zip(got, windows)):
                    return [kh, kw], [sh, sw], [ph, pw], cip
    return None


@rule("avg_pool2d", "adaptive_avg_pool2d")
def _avg_pool(b, n, x):
    hs, he, ws, we, div = n.params["windows"]
    in_hw = tuple(n.params["in_hw"])
    if len(hs) == len(ws) == 1 and he[0] - hs[0] == in_hw[0] and we[0] - ws[0] == in_hw[1] and \
            div[0, 0] == in_hw[0] * in_hw[1]:
        return [b.op("GlobalAveragePool", [x[0]])]
    found = _avg_pool_args(n.params["windows"], in_hw)
    if found is None:
        b.unsupported(n, "its windows (output size %s of input %s) are not one AveragePool's"
                      % ((len(hs), len(ws)), in_hw))
    k, s, pads, cip = found
    return [b.op("AveragePool", [x[0]], kernel_shape=k, strides=s, pads=pads + pads, count_include_pad=int(cip),
                 ceil_mode=_ceil_mode(in_hw, k, s, pads, (len(hs), len(ws))))]


@rule("embedding")
def _embedding(b, n, x):
    return [b.op("Gather", [x[0], x[1]], axis=0)]


@rule("pixel_shuffle")
def _pixel_shuffle(b, n, x):
    if len(b.shape(x[0])) != 4:
        b.unsupported(n, "a %d-d input (DepthToSpace takes 4-d)" % len(b.shape(x[0])))
    return [b.op("DepthToSpace", [x[0]], blocksize=int(n.params["r"]), mode="CRD")]


# ------------------------------------------------------------------ softmax, reductions
@rule("softmax")
def _softmax(b, n, x):
    return [b.op("Softmax", x[:1], axis=int(n.params["dim"]))]


@rule("log_softmax")
def _log_softmax(b, n, x):
    return [b.op("LogSoftmax", x[:1], axis=int(n.params["dim"]))]


_REDUCE = {"sum": "ReduceSum", "sum_all": "ReduceSum", "mean": "ReduceMean", "mean_all": "ReduceMean",
           "amax": "ReduceMax", "max_all": "ReduceMax", "amin": "ReduceMin", "min_all": "ReduceMin",
           "logsumexp": "ReduceLogSumExp"}


def reduce(b, onnx_type, value, dims, keepdim):
    """ONNX reduction over ``dims``: the axes an input from opset 13 (ReduceSum) or 18 (the others)."""
    if onnx_type == "ReduceSum" and b.opset >= 13 or b.opset >= 18:
        return b.op(onnx_type, [value, b.const(list(dims), np.int64)], keepdims=int(keepdim))
    return b.op(onnx_type, [value], axes=list(dims), keepdims=int(keepdim))


@rule(*_REDUCE)
def _reduce(b, n, x):
    dims = n.params.get("dims", n.params.get("dim"))
    dims = tuple(range(len(b.shape(x[0])))) if dims is None else tuple(np.atleast_1d(dims).tolist())
    return [reduce(b, _REDUCE[n.op.name], x[0], dims, n.params.get("keepdim", False))]


@rule("max_dim", "min_dim")
def _max_dim(b, n, x):
    dims, keep = n.params["dims"], n.params["keepdim"]
    kind = "Max" if n.op.name == "max_dim" else "Min"
    values = reduce(b, "Reduce" + kind, x[0], dims, keep)
    return [values, b.op("Arg" + kind, [x[0]], axis=int(dims[0]), keepdims=int(keep), select_last_index=0)]


@rule("var", "std")
def _var(b, n, x):
    shape = b.shape(x[0])
    dims = tuple(n.params["dims"]) if n.params.get("dims") is not None else tuple(range(len(shape)))
    count = int(np.prod([shape[d] for d in dims])) - n.params.get("correction", 1)
    centred = b.op("Sub", [x[0], reduce(b, "ReduceMean", x[0], dims, True)])
    total = reduce(b, "ReduceSum", b.op("Mul", [centred, centred]), dims, n.params.get("keepdim", False))
    var = b.op("Div", [total, b.const(max(count, 0), n.cnp)])
    return [b.op("Sqrt", [var]) if n.op.name == "std" else var]


@rule("native_layer_norm")
def _layer_norm(b, n, x):
    """LayerNormalization from opset 17, its reductions before; the mean and 1/std (workspace) have no output."""
    shape = b.shape(x[0])
    k, eps = n.params["normalized_ndim"], n.params["eps"]
    dims = tuple(range(len(shape) - k, len(shape)))
    if b.opset >= 17:
        scale = x[1] if x[1] is not None else b.const(np.ones(shape[len(shape) - k:]), n.cnp)
        return [b.op("LayerNormalization", [x[0], scale] + ([x[2]] if x[2] is not None else []),
                     axis=-k, epsilon=float(eps)), None, None]
    centred = b.op("Sub", [x[0], reduce(b, "ReduceMean", x[0], dims, True)])
    var = reduce(b, "ReduceMean", b.op("Mul", [centred, centred]), dims, True)
    y = b.op("Div", [centred, b.op("Sqrt", [b.op("Add", [var, b.const(eps, n.cnp)])])])
    if x[1] is not None:
        y = b.op("Mul", [y, x[1]])
    return [y if x[2] is None else b.op("Add", [y, x[2]]), None, None]


# ------------------------------------------------------------------ shapes
@rule("reshape", "view", "squeeze", "squeeze_dim", "unsqueeze")
def _reshape(b, n, x):
    return [b.reshape(x[0], n.params["shape"])]


@rule("transpose")
def _transpose(b, n, x):
    perm = list(range(len(b.shape(x[0]))))
    d0, d1 = n.params["d0"], n.params["d1"]
    perm[d0], perm[d1] = perm[d1], perm[d0]
    return [b.op("Transpose", x[:1], perm=perm)]


@rule("t")
def _t(b, n, x):
    return [b.op("Transpose", x[:1], perm=[1, 0]) if len(b.shape(x[0])) == 2 else b.op("Identity", x[:1])]


@rule("permute")
def _permute(b, n, x):
    return [b.op("Transpose", x[:1], perm=[int(d) for d in n.params["dims"]])]


@rule("expand")
def _expand(b, n, x):
    # 1 where the input's size is kept: Expand broadcasts it, so a dynamic axis stays dynamic
    shape, src = tuple(n.params["shape"]), b.shape(x[0])
    src = (1,) * (len(shape) - len(src)) + tuple(src)
    return [b.op("Expand", [x[0], b.const([1 if s == t else s for s, t in zip(shape, src)], np.int64)])]


@rule("repeat")
def _repeat(b, n, x):
    reps = list(n.params["reps"])
    shape = b.shape(x[0])
    v = x[0]
    if len(reps) > len(shape):
        v = b.op("Reshape", [v, b.const([1] * (len(reps) - len(shape)) + [0] * len(shape), np.int64)])
    return [b.op("Tile", [v, b.const(reps, np.int64)])]


@rule("cat")
def _cat(b, n, x):
    return [b.op("Concat", [v for v in x if v is not None], axis=int(n.params["dim"]))]


@rule("stack")
def _stack(b, n, x):
    dim = int(n.params["dim"])
    dim = dim if dim >= 0 else dim + len(b.shape(x[0])) + 1
    axes = b.const([dim], np.int64)
    return [b.op("Concat", [b.op("Unsqueeze", [v, axes]) for v in x], axis=dim)]


def _index_key(b, n, key, ndim):
    """An index key of ints, slices, None and one Ellipsis, with the Ellipsis spelled out as slices."""
    key = key if isinstance(key, tuple) else (key,)
    if any(not (k is None or k is Ellipsis or isinstance(k, (slice, int, np.integer))) for k in key):
        b.unsupported(n, "an index key %r (ints, slices, None and ... map to Slice/Gather/Unsqueeze)" % (key,))
    if Ellipsis in key:
        i = key.index(Ellipsis)
        used = sum(1 for k in key if k is not None and k is not Ellipsis)
        key = key[:i] + (slice(None),) * (ndim - used) + key[i + 1:]
    return key


@rule("slice", "select")
def _slice(b, n, x):
    shape = b.shape(x[0])
    key = _index_key(b, n, n.params["key"], len(shape))
    starts, ends, axes, steps = [], [], [], []
    picks, new_axes = [], []
    axis = out_axis = 0
    for k in key:
        if k is None:  # a new axis of size 1, at this place of the result
            new_axes.append(out_axis)
            out_axis += 1
            continue
        if isinstance(k, slice):
            start, stop, step = k.indices(shape[axis])
            if step < 0:
                b.unsupported(n, "a negative step")
            if (start, stop, step) != (0, shape[axis], 1):  # (the whole axis is left alone: a dynamic one stays)
                starts.append(start)
                ends.append(stop)
                axes.append(axis)
                steps.append(step)
            out_axis += 1
        else:
            picks.append((axis, int(k) % shape[axis]))
        axis += 1
    v = x[0]
    if axes:
        v = b.op("Slice", [v, b.const(starts, np.int64), b.const(ends, np.int64), b.const(axes, np.int64),
                           b.const(steps, np.int64)])
    for axis, i in reversed(picks):  # a scalar index drops its axis (Gather with a 0-d index)
        v = b.op("Gather", [v, b.const(np.int64(i), np.int64)], axis=axis)
    if new_axes:
        v = b.op("Unsqueeze", [v, b.const(new_axes, np.int64)])
    return [v]


@rule("constant_pad_nd")
def _pad(b, n, x):
    p = n.params
    shape = b.shape(x[0])
    src = _index_key(b, n, p["src"], len(shape))
    if any(s.indices(shape[i]) != (0, shape[i], 1) for i, s in enumerate(src)):
        b.unsupported(n, "a negative padding (cropping)")
    before, after = [0] * len(shape), [0] * len(shape)
    for i, d in enumerate(_index_key(b, n, p["dst"], len(shape))):
        start, stop, _ = d.indices(p["shape"][i])
        before[i], after[i] = start, p["shape"][i] - stop
    return [b.op("Pad", [x[0], b.const(before + after, np.int64), b.const(p.get("value", 0), n.cnp)],
                 mode="constant")]
