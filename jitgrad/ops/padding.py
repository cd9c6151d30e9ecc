"""F.pad's non-constant modes: reflect, replicate and circular, over the last 1, 2 or 3 dims. Each is a
gather of index arrays, one per padded dim (the padded positions map back into the input), so the VJP
adds the gradient back along the same indices (index_put_zeros with accumulation, a table op)."""
import numpy as np

from .._op import Op, dispatch
from ._table import _arr, _noncontig, register
from .indexing import index_put_zeros
from .layers import pad as constant_pad

_SUPPORTED = ("Supported combinations for non-constant padding:\n"
              "  - 2D or 3D input: padding size = 2 (pads last dimension)\n"
              "  - 3D or 4D input: padding size = 4 (pads last 2 dimensions)\n"
              "  - 4D or 5D input: padding size = 6 (pads last 3 dimensions)")


def source_index(n, lo, hi, mode):
    """For each position of a dim of size n padded by (lo, hi): the input position it copies."""
    if mode == "circular":  # negative pads crop first; positive ones wrap around what is left
        start, m = max(-lo, 0), n + min(lo, 0) + min(hi, 0)
        return (start + np.arange(-max(lo, 0), m + max(hi, 0)) % m).astype(np.int64)
    i = np.arange(-lo, n + hi)
    if mode == "reflect":
        i = (n - 1) - np.abs((n - 1) - np.abs(i))
    elif mode == "replicate":
        i = np.clip(i, 0, n - 1)
    return i.astype(np.int64)


def _gather_forward(xp, dt, x, index):
    for d, idx in index:
        x = xp.take(x, idx, axis=d)
    return x


def add_back(g, dim, idx, shape):
    """zeros(shape) with g's slices along ``dim`` added at positions ``idx`` (repeats accumulate): the VJP of
    a gather along dim, an index_put at ``[:, ..., :, idx]`` (one compiled loop over g as it is laid out)."""
    return index_put_zeros(g, tuple(shape), (slice(None),) * dim + (idx,), True)


def _gather_grad(g, s):
    shape = list(s.self_shape)
    steps = []
    for d, idx in s.index:  # the shape before each gather
        steps.append((d, idx, tuple(shape)))
        shape[d] = len(idx)
    for d, idx, before in reversed(steps):
        g = add_back(g, d, idx, before)
    return g


def pad(input, pad, mode="constant", value=None):
    """torch.nn.functional.pad: constant padding (any dims) or reflect/replicate/circular."""
    if mode == "constant":
        return constant_pad(input, pad, mode, value)
    if mode not in _OPS:
        raise NotImplementedError("Unrecognised padding mode " + str(mode))
    if value is not None and value != 0:
        raise RuntimeError("Padding mode \"%s\" doesn't take in value argument" % mode)
    k = len(pad) // 2
    if len(pad) % 2 or k not in (1, 2, 3) or input.ndim not in (k + 1, k + 2):
        raise NotImplementedError("Padding size %d is not supported for %dD input tensor.\n%s"
                                  % (len(pad), input.ndim, _SUPPORTED))
    index = []
    for j in range(k):
        d = input.ndim - 1 - j
        n, lo, hi = input.shape[d], int(pad[2 * j]), int(pad[2 * j + 1])
        if mode == "reflect" and (lo >= n or hi >= n):
            raise RuntimeError("Argument #4: Padding size should be less than the corresponding input dimension, but "
                               "got: padding (%d, %d) at dimension %d of input [%s]"
                               % (lo, hi, d, ", ".join(map(str, input.shape))))
        if mode == "circular" and (lo > n or hi > n):
            raise RuntimeError("Padding value causes wrapping around more than once.")
        if n + lo + hi < 0 or (n == 0 and lo + hi > 0):
            raise RuntimeError("input tensor has a dimension of size 0 to pad (dimension %d)" % d)
        index.append((d, source_index(n, lo, hi, mode)))
    return dispatch(_OPS[mode][k], (input,), {"index": tuple(index)})


# ---------------------------------------------------------------------- references and samples (see _table.py)
_NP_MODES = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}


def _np_pad(x, pad, mode):
    widths = [(0, 0)] * x.ndim
    for j in range(len(pad) // 2):
        widths[x.ndim - 1 - j] = (pad[2 * j], pad[2 * j + 1])
    crop = tuple(slice(max(-a, 0), x.shape[d] - max(-b, 0)) for d, (a, b) in enumerate(widths))
    return np.pad(x[crop], [(max(a, 0), max(b, 0)) for a, b in widths], mode=_NP_MODES[mode])


_CASES = {1: [((2, 4), (1, 2)), ((1, 2, 3), (2, 0)), ([2, 2, 4], (3, 1))],
          2: [((2, 3, 3), (1, 1, 2, 0)), ((1, 2, 3, 4), (2, 1, 1, 2)), ([1, 3, 4], (0, 2, 1, 1))],
          3: [((1, 3, 3, 3), (1, 1, 1, 0, 0, 2)), ((1, 1, 3, 3, 4), (1, 2, 1, 1, 1, 1))]}


def _samples(mode, k):
    def samples(rng, dtype):
        return [(((_noncontig if isinstance(s, list) else _arr)(rng, tuple(s), -2.0, 2.0, dtype), p), {"mode": mode})
                for s, p in _CASES[k]]
    return samples


# ---------------------------------------------------------------------- the entries: one per mode and padded rank
BENCH_SIZES = {1: [(2, 4, 16), (16, 64, 4096)], 2: [(1, 3, 16, 16), (8, 64, 128, 128)],  # (N, C, spatial...)
               3: [(1, 2, 4, 4, 4), (2, 16, 32, 32, 32)]}
_NODES = {"reflect": "ReflectionPad%dDBackward0", "replicate": "ReplicationPad%dDBackward0",
          "circular": "CircularPad%dDBackward0"}
_OPS = {mode: {k: register(Op("%s_pad%dd" % (mode, k), _gather_forward, vjp=[_gather_grad], dtype="keep",
                              node=_NODES[mode] % k, call=pad, ref=_np_pad, samples=_samples(mode, k),
                              bench={"sizes": BENCH_SIZES[k]}, complex=True))
               for k in (1, 2, 3)} for mode in _NODES}
