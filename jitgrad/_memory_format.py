"""torch.memory_format: the element layouts that ``clone``, ``contiguous``, ``to`` and ``is_contiguous`` take.

A layout is an order of the dims from outermost to innermost: ``contiguous_format`` is C order,
``channels_last`` is N, H, W, C for a 4-D tensor (``channels_last_3d``: N, D, H, W, C for 5-D), and
``preserve_format`` keeps the order of a tensor's strides, by PyTorch's rule. A copy in a layout is made
by permuting the tensor into that order, copying it to C order and permuting it back, so it is dense;
the strides of its size-1 dims may differ from PyTorch's, which copies them from a dense input (a size-1
dim's stride addresses no other element).
"""


class memory_format:
    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return "jitgrad." + self.name

    def __reduce__(self):  # pickled by name: one object per format
        return self.name


contiguous_format = memory_format("contiguous_format")
preserve_format = memory_format("preserve_format")
channels_last = memory_format("channels_last")
channels_last_3d = memory_format("channels_last_3d")

_CHANNELS_LAST = {channels_last: (4, (0, 2, 3, 1)), channels_last_3d: (5, (0, 2, 3, 4, 1))}


def check(fmt, fn):
    """``fmt``, a memory format argument of ``fn``; PyTorch's TypeError for anything else."""
    if not isinstance(fmt, memory_format):
        raise TypeError("%s(): argument 'memory_format' must be torch.memory_format, not %s" % (fn, type(fmt).__name__))
    return fmt


def dim_order(fmt, ndim):
    """The dims of an ``ndim``-dim tensor in layout ``fmt`` (not preserve_format), outermost first; PyTorch's
    error for a channels-last format of another rank."""
    rank_order = _CHANNELS_LAST.get(fmt)
    if rank_order is None:
        return tuple(range(ndim))
    rank, order = rank_order
    if ndim != rank:
        raise RuntimeError("required rank %d tensor to use %s format" % (rank, fmt.name))
    return order


def unpermute(order):
    """The permutation that undoes ``order`` (a layout's dims, outermost first)."""
    back = [0] * len(order)
    for k, d in enumerate(order):
        back[d] = k
    return tuple(back)


def is_in(shape, strides, fmt):
    """Whether element ``strides`` lay ``shape`` out in format ``fmt`` (a channels-last format of another rank:
    no; preserve_format asks for C order, as in PyTorch)."""
    rank_order = _CHANNELS_LAST.get(fmt)
    if rank_order is not None and rank_order[0] != len(shape):
        return False
    return is_laid_out(shape, strides, rank_order[1] if rank_order else tuple(range(len(shape))))


def is_laid_out(shape, strides, order):
    """Whether element ``strides`` are those of ``shape`` laid out in dim ``order`` (dims of size 1 may have
    any stride, an empty tensor is in every layout: PyTorch's rule)."""
    if 0 in shape:
        return True
    expected = 1
    for d in reversed(order):
        if shape[d] != 1:
            if strides[d] != expected:
                return False
            expected *= shape[d]
    return True


def suggested(shape, strides):
    """PyTorch's suggest_memory_format: channels_last (channels_last_3d) for a 4-D (5-D) tensor whose strides
    fall as that layout's do, else contiguous_format; ambiguous cases (N111, N1H1, 1C1W) go to
    contiguous_format, by PyTorch's rules."""
    for fmt, (rank, order) in _CHANNELS_LAST.items():
        if len(shape) != rank or strides[1] == 0:
            continue
        low = 0
        for d in order[::-1]:  # C, then the spatial dims innermost first, then N
            if shape[d] == 0 or strides[d] < low or d == 0 and low == strides[1]:
                break
            low = strides[d] * shape[d] if shape[d] > 1 else strides[d]
        else:
            return fmt
    return contiguous_format


def preserved_order(shape, strides, c_contiguous=False):
    """The dim order preserve_format keeps, outermost first: the input's strides' order (element or byte
    strides alike), by PyTorch's rule (infer_dense_strides, TensorIterator's order): an insertion sort from
    the innermost dim, larger strides outwards, equal strides with the larger size outwards, a zero stride
    (a broadcast dim) staying where C order puts it. ``c_contiguous``: the input is known to be C-contiguous
    (then, without size-1 dims, the order is C order, without the sort)."""
    if len(shape) < 2 or c_contiguous and 1 not in shape:
        return tuple(range(len(shape)))
    perm = list(range(len(shape)))[::-1]  # innermost first
    for i in range(1, len(perm)):
        d1 = i
        for d0 in range(i - 1, -1, -1):
            a, b = perm[d0], perm[d1]
            sa, sb = strides[a], strides[b]
            swap = 0 if sa == 0 or sb == 0 else 1 if sa > sb else -1 if sa < sb else 1 if shape[a] > shape[b] else 0
            if swap > 0:
                perm[d0], perm[d1] = b, a
                d1 = d0
            elif swap < 0:
                break
    return tuple(perm[::-1])
