"""Batching rules: how each op-table entry runs on a batch, in ONE call of a table op (JAX's
``batching.primitive_batchers``), declared by kind.

A rule is ``rule(op, args, bdims, params, size)``: ``args`` are the entry's operands with the batch dim of the
level being run in front where ``bdims[i]`` is true (unbatched there otherwise; they may be batched at outer
levels, which dispatch's hook handles when the rule's own table ops reach it), ``params`` the entry's params
as the public function computed them for ONE sample (logical shapes). It returns ``(out, batched)``: the
output (a tuple for entries with several) with the batch dim in front, and whether it is batched.

Kinds (``RULES`` maps every entry with a rule to its rule; ``missing()`` lists the others):

- elementwise: operands broadcast against each other; batched ones get singleton dims after the batch dim
  up to the largest logical rank, so NumPy's broadcasting from the right lines them up.
- reductions, scans and other ops with dim params: the dims shift by one past the batch dim.
- shape ops: the shape params gain the batch size in front (view runs as reshape on the batch).
- matmul family, linear, addmm...: composed of ``matmul`` and elementwise ops, logically (on BatchedTensors,
  so their own rules run).
- leading: ops that treat any leading dims as batch dims (embedding's indices, tril, attention, the linear
  algebra entries) run on the batch as it is; fold: ops with a batch-like first dim (conv, pooling, padding, resampling, RNN cells)
  take the batch folded into it (B*N) and unfolded after.
- losses: computed with reduction 'none' and reduced per sample.
- indexing: the index key gains a full slice in front.
- random: ``randomness`` says whether samples differ ('different': the op draws for the whole batch), are
  the same ('same': drawn once), or whether drawing is an error ('error', the default).
"""
import threading

import numpy as np

from .._op import EMPTY, dispatch
from .._tensor import Tensor
from ..ops._table import OPS
from ._batched import LEVELS, batched, is_batched


# ------------------------------------------------------------------ helpers
def _ndim(x, b):
    """The logical rank of operand ``x`` (batched when ``b``)."""
    return x.ndim - 1 if b else x.ndim


def _pad(x, b, rank):
    """Batched ``x`` with singleton dims after the batch dim up to logical rank ``rank``."""
    n = _ndim(x, b)
    if not b or n >= rank:
        return x
    return x.reshape((x.shape[0],) + (1,) * (rank - n) + tuple(x.shape[1:]))


def _full(x, b, size):
    """``x`` batched: expanded (stride 0) where it is not."""
    if b or not isinstance(x, Tensor):
        return x
    return x.expand((size,) + tuple(x.shape))


def _tensors(args, bdims):
    return [(a, b) for a, b in zip(args, bdims) if isinstance(a, Tensor)]


def _shift(d):
    return tuple(i + 1 for i in d) if isinstance(d, (tuple, list)) else d + 1


def _level():
    return HOOK_LEVEL[0]


class _Running(threading.local):
    """This thread's Level whose rule is running (set by the hook in vmap.py), as HOOK_LEVEL[0]."""
    level = None

    def __getitem__(self, i):
        return self.level

    def __setitem__(self, i, value):
        self.level = value


HOOK_LEVEL = _Running()


def _logical(args, bdims):
    """The operands as BatchedTensors of the running level (for rules composed of other ops)."""
    lv = _level().level
    return [batched(a, lv) if b else a for a, b in zip(args, bdims)]


def _physical(out):
    """A composed rule's result back to (value, batched)."""
    if isinstance(out, (tuple, list)):
        return tuple(_physical(o)[0] for o in out), True
    lv = _level().level
    if is_batched(out) and out._level == lv:
        return out._value, True
    return out, False


# ------------------------------------------------------------------ kinds
def elementwise(op, args, bdims, params, size):
    rank, low = 0, None  # the largest logical rank, the smallest of a batched operand
    for a, b in zip(args, bdims):
        if isinstance(a, Tensor):
            n = a._data.ndim - b
            if n > rank:
                rank = n
            if b and (low is None or n < low):
                low = n
    if low is not None and low < rank:
        return dispatch(op, tuple(_pad(a, b, rank) if isinstance(a, Tensor) else a for a, b in zip(args, bdims)),
                        params), True
    return dispatch(op, tuple(args), params), True


def elementwise_full(op, args, bdims, params, size):
    """Elementwise, the output shaped by its first operand (fill, copy_from): every operand batched."""
    rank = max(_ndim(a, b) for a, b in _tensors(args, bdims))
    vals = tuple(_pad(_full(a, b, size), True, rank) if isinstance(a, Tensor) else a for a, b in zip(args, bdims))
    return dispatch(op, vals, params), True


def reduction(op, args, bdims, params, size):
    x = args[0]
    if x.ndim == 1:  # a 0-d sample: reduced over a dim of one
        x, dims, squeeze = x.reshape((size, 1)), (1,), True
    else:
        dims, squeeze = _shift(params["dims"]), False
    out = dispatch(op, (x,), dict(params, dims=dims))
    if squeeze and params.get("keepdim"):
        out = tuple(o.reshape((size,)) for o in out) if isinstance(out, tuple) else out.reshape((size,))
    return out, True


def shift_dims(*names, full=True):
    """An op whose params ``names`` are dims (ints or tuples): each shifts by one; the tensor operands are
    all batched (expanded where they are not) when ``full``."""
    def rule(op, args, bdims, params, size):
        vals = tuple(_full(a, b, size) for a, b in zip(args, bdims)) if full else args
        p = dict(params)
        for n in names:
            if n in p and p[n] is not None:
                p[n] = _shift(p[n])
            elif n not in p and n in op.exposure.params:
                p[n] = _shift(op.exposure.params[n])
        return dispatch(op, vals, p), True
    return rule


def zero_d_dim(name):
    """An op along dim ``name`` (softmax, cumsum): a 0-d sample is one of a dim of one."""
    inner = shift_dims(name)

    def rule(op, args, bdims, params, size):
        if args[0].ndim == 1:
            out, _ = inner(op, (args[0].reshape((size, 1)),) + tuple(args[1:]), bdims, dict(params, **{name: 0}), size)
            return (tuple(o.reshape((size,)) for o in out) if isinstance(out, tuple) else out.reshape((size,))), True
        return inner(op, args, bdims, params, size)
    return rule


def with_shape(name="shape", via=None):
    """A shape op: param ``name`` gains the batch size in front; ``via`` the entry run instead (view on a
    batch runs as reshape: the batch's layout need not allow the view)."""
    def rule(op, args, bdims, params, size):
        x = args[0]
        shape = tuple(params[name])
        if op.name == "expand":
            x = _pad(x, True, len(shape))
        return dispatch(OPS[via] if via else op, (x,), dict(params, **{name: (size,) + shape})), True
    return rule


def permute(op, args, bdims, params, size):
    return dispatch(op, args, dict(params, dims=(0,) + _shift(params["dims"]))), True


def transpose(op, args, bdims, params, size):
    return dispatch(op, args, dict(params, d0=params["d0"] + 1, d1=params["d1"] + 1)), True


def repeat(op, args, bdims, params, size):
    reps = tuple(params["reps"])
    return dispatch(op, (_pad(args[0], True, len(reps)),), dict(params, reps=(1,) + reps)), True


def clone(op, args, bdims, params, size):
    order = params.get("order")
    return dispatch(op, args, dict(params, order=None if order is None else (0,) + _shift(order))), True


def passthrough(op, args, bdims, params, size):
    """Ops that ignore the shape (cast, move)."""
    return dispatch(op, args, params), True


def constant_pad(op, args, bdims, params, size):
    full = (slice(None),)
    return dispatch(op, args, dict(params, shape=(size,) + tuple(params["shape"]), src=full + tuple(params["src"]),
                                   dst=full + tuple(params["dst"]))), True


def roll(op, args, bdims, params, size):
    x = args[0]
    if not params["dims"]:  # rolled as one flat dim
        shape = tuple(x.shape)
        out = dispatch(op, (x.reshape((size, -1)),), dict(params, dims=(1,)))
        return out.reshape(shape), True
    return dispatch(op, args, dict(params, dims=_shift(params["dims"]))), True


def median_all(op, args, bdims, params, size):
    values, _ = dispatch(OPS["median_dim"], (args[0].reshape((size, -1)),), {"dim": 1, "keepdim": False})
    return values, True


def leading(*positions):
    """Ops that treat leading dims as batch dims: the operands at ``positions`` batched (expanded where they
    are not), the others must be unbatched."""
    def rule(op, args, bdims, params, size):
        if any(b for i, b in enumerate(bdims) if i not in positions):
            return loop(op, args, bdims, params, size)
        vals = tuple(_full(a, b, size) if i in positions else a for i, (a, b) in enumerate(zip(args, bdims)))
        return dispatch(op, vals, params), True
    return rule


def view_as_complex(op, args, bdims, params, size):
    """The batch at the front; a layout whose (re, im) pairs are not adjacent (a batch dim that was last) is
    copied first, as view_as_complex needs them adjacent."""
    x = _full(args[0], bdims[0], size)
    if x.stride(-1) != 1 or any(st % 2 for st in x.stride()[:-1]):
        x = x.contiguous()
    return dispatch(op, (x,), params), True


def fold(*positions):
    """Ops whose operands at ``positions`` have a batch-like first dim (N): the batch folds into it, B*N, and
    out of every output after; other operands must be unbatched."""
    def rule(op, args, bdims, params, size):
        if any(b for i, b in enumerate(bdims) if i not in positions):
            return loop(op, args, bdims, params, size)
        vals = tuple(_fold(_full(a, b, size)) if i in positions and a is not None else a
                     for i, (a, b) in enumerate(zip(args, bdims)))
        out = dispatch(op, vals, params)
        unfold = (lambda o: o.reshape((size, -1) + tuple(o.shape[1:])))
        return (tuple(unfold(o) for o in out) if isinstance(out, tuple) else unfold(out)), True
    return rule


def _fold(x):
    return x.reshape((x.shape[0] * x.shape[1],) + tuple(x.shape[2:])) if x.ndim > 1 else x


def rnn_layer(op, args, bdims, params, size):
    """A recurrent layer over packed rows (each step's rows, longest sequences first): the vmap batch joins every
    step's batch, rows ordered (row, sample), so a step's active rows stay first and one layer call runs all the
    samples. Batched weights (an ensemble of layers) run per sample. The workspace output is the joined call's
    (its node's backward reads it there), not each sample's."""
    states = 3 if op.name == "lstm_layer" else 2  # igates, hx (and cx): rows first
    if any(b for b in bdims[states:]):
        return loop(op, args, bdims, params, size)

    def join(x, b):  # (V, R, ...) -> (R * V, ...)
        x = _full(x, b, size)
        return x.transpose(0, 1).reshape((x.shape[1] * size,) + tuple(x.shape[2:]))

    def split(o):  # (R * V, ...) -> (V, R, ...)
        return o.reshape((o.shape[0] // size, size) + tuple(o.shape[1:])).transpose(0, 1)
    vals = tuple(join(a, b) if i < states else a for i, (a, b) in enumerate(zip(args, bdims)))
    outs = dispatch(op, vals, dict(params, batch_sizes=tuple(n * size for n in params["batch_sizes"])))
    return (outs[0].reshape((size, -1)),) + tuple(split(o) for o in outs[1:]), True


def attention(op, args, bdims, params, size):
    """scaled_dot_product_attention takes any leading dims: every operand batched, the masks with singleton
    dims up to the query's rank."""
    rank = _ndim(args[0], bdims[0])
    vals = tuple(a if a is None else _pad(_full(a, b, size), True, rank) for a, b in zip(args, bdims))
    return dispatch(op, vals, params), True


def max_pool2d_backward(op, args, bdims, params, size):
    """The batch folds into N; the forward's indices (a param) are each sample's, repeated over the batch."""
    idx = params["indices"]
    idx = idx._value if is_batched(idx) and idx._level == _level().level else _full(idx, False, size)
    out = dispatch(op, (_fold(args[0]),), dict(params, indices=_fold(idx)))
    return out.reshape((size, -1) + tuple(out.shape[1:])), True


def conv(op, args, bdims, params, size):
    """conv2d, conv_transpose2d (operands x, w, bias) and conv2d_weight (x, grad_output): a batch of inputs only
    folds into N; otherwise each sample's channels form a group of one convolution with ``groups * B``:
    x (B, N, C, ...) is viewed as (N, B*C, ...), w (B, O, C/g, ...) as (B*O, C/g, ...), the bias as (B*O,)."""
    def batched_out(out, unfold):  # (conv2d's columns, its workspace, are not each sample's: none under vmap)
        if op.workspace:
            return (unfold(out[0]), out[0].new_empty((size, 0))), True
        return unfold(out), True
    if op.name != "conv2d_weight" and not any(bdims[1:]):
        x = _fold(_full(args[0], bdims[0], size))
        return batched_out(dispatch(op, (x,) + tuple(args[1:]), params),
                           lambda o: o.reshape((size, -1) + tuple(o.shape[1:])))
    nd = params["nd"]
    vals = [_full(a, b, size) for a, b in zip(args, bdims)]
    if vals[0].ndim != nd + 3:
        return loop(op, args, bdims, params, size)

    def grouped(t):  # (B, N, C, ...) -> (N, B*C, ...)
        t = t.movedim(0, 1)
        return t.reshape((t.shape[0], t.shape[1] * t.shape[2]) + tuple(t.shape[3:]))
    if op.name == "conv2d_weight":
        operands = (grouped(vals[0]), grouped(vals[1]))
    else:
        w = vals[1]
        operands = (grouped(vals[0]), w.reshape((w.shape[0] * w.shape[1],) + tuple(w.shape[2:])),
                    None if vals[2] is None else vals[2].reshape((-1,)))
    out = dispatch(op, operands, dict(params, groups=params["groups"] * size))
    if op.name == "conv2d_weight":  # (B*O, C/g, ...)
        return out.reshape((size, -1) + tuple(out.shape[1:])), True
    # (N, B*O, ...) -> (B, N, O, ...)
    return batched_out(out, lambda o: o.reshape((o.shape[0], size, -1) + tuple(o.shape[2:])).movedim(1, 0))


def composed(fn):
    """A rule written as the op's logical formula over other ops (whose rules then run)."""
    def rule(op, args, bdims, params, size):
        return _physical(fn(*_logical(args, bdims), **params))
    return rule


def _matmul(a, b):
    from ..ops.linalg import matmul
    return matmul(a, b)


def linear(op, args, bdims, params, size):
    """linear's operands: (bias, input, weight.t()), linear_mm's (input, weight.t())."""
    x = 1 if op.name == "linear" else 0
    if bdims[x] and not any(b for i, b in enumerate(bdims) if i != x):  # a batch of inputs: any leading dims
        return dispatch(op, args, params), True
    # matmul's and add's rules on the batch as it is (what the logical x @ wt + b would reach through the hook)
    if bdims[x] or bdims[x + 1]:
        out, b = matmul(OPS["matmul"], args[x:x + 2], bdims[x:x + 2], EMPTY, size)
    else:
        out, b = dispatch(OPS["matmul"], tuple(args[x:x + 2])), False
    if x:
        return elementwise(OPS["add"], (out, args[0]), (b, bdims[0]), EMPTY, size)
    return out, b


def matmul(op, args, bdims, params, size):
    """matmul on a batch: vectors batched become matrices (and back), ranks aligned after the batch dim."""
    (a, b), (ba, bb) = args, bdims
    ra, rb = _ndim(a, ba), _ndim(b, bb)
    if ra == 1 and rb == 1:  # a dot product
        return composed(lambda x, y: (x * y).sum(-1))(op, args, bdims, params, size)
    sa = ba and ra == 1
    sb = bb and rb == 1
    # a matrix and a batch of vectors: one GEMM of the batch's rows (x A^T, x A), not a product per sample
    if sb and not ba and ra == 2:  # (the transpose's entry itself: a's dims are 0 and 1)
        return dispatch(OPS["matmul"], (b, dispatch(OPS["transpose"], (a,), {"d0": 0, "d1": 1}))), True
    if sa and not bb and rb == 2:
        return dispatch(OPS["matmul"], (a, b)), True
    if sa:
        a, ra = a.unsqueeze(1), 2
    if sb:
        b, rb = b.unsqueeze(-1), 2
    rank = max(ra, rb)
    a, b = _pad(a, ba, rank), _pad(b, bb, rank)
    out = dispatch(OPS["matmul"], (a, b))
    if sb:
        out = out.squeeze(-1)
    if sa:
        out = out.squeeze(-2 if not sb else -1)
    return out, True


def _addmm(c, a, b, beta=1, alpha=1):
    p = _matmul(a, b)
    p = p if alpha == 1 else p * alpha
    return p if beta == 0 else p + (c if beta == 1 else c * beta)


def _addbmm(c, a, b, beta=1, alpha=1):
    p = _matmul(a, b).sum(0)
    p = p if alpha == 1 else p * alpha
    return p if beta == 0 else p + (c if beta == 1 else c * beta)


def pointwise_loss(op, args, bdims, params, size):
    if any(is_batched(params.get(n)) for n in ("weight", "pos_weight")) or params["reduction"] == "none":
        return elementwise(op, args, bdims, params, size) if params["reduction"] == "none" else \
            loop(op, args, bdims, params, size)
    out, _ = elementwise(op, args, bdims, dict(params, reduction="none"), size)
    out = out.reshape((size, -1))
    return (out.mean(1) if params["reduction"] == "mean" else out.sum(1)), True


def nll_loss(op, args, bdims, params, size):
    """nll_loss per sample: computed with reduction 'none' on the batch folded into N, reduced per sample
    (the mean weighted by the targets' class weights, ignored targets left out, as PyTorch's)."""
    target, w = params["target"], params.get("weight")
    if is_batched(w):
        return loop(op, args, bdims, params, size)
    target = target._value if is_batched(target) and target._level == _level().level else _full(target, False, size)
    x = _full(args[0], bdims[0], size)
    unfolded = target
    if x.ndim > 2:  # (a sample of one row, (C,), is a batch of rows as it is)
        x, target = _fold(x), _fold(target)
    folded = dispatch(op, (x,), dict(params, target=target, reduction="none"))
    if params["reduction"] == "none":
        return folded.reshape((size,) + tuple(params["target"].shape)), True
    if params["reduction"] == "mean" and w is None and folded.shape == (size,):
        # one row a sample: its loss over whether it counts (0 / 0 where ignored), without sums over one row
        return folded / (target != params["ignore_index"]), True
    losses = folded.reshape((size, -1))
    if params["reduction"] == "sum":
        return losses.sum(1), True
    return losses.sum(1) / _total_weight(unfolded.reshape((size, -1)), w, params["ignore_index"]), True


def _total_weight(t, w, ignore_index, keepdim=False):
    """Per sample (row of ``t``, the targets) the weight 'mean' divides by: the targets' class weights, ignored
    targets left out."""
    keep = t != ignore_index
    weights = keep if w is None else \
        w.index_select(0, t.masked_fill(~keep, 0).reshape(-1)).reshape(tuple(t.shape)) * keep
    return weights.sum(1, keepdim=keepdim)


def nll_loss_backward(op, args, bdims, params, size):
    """nll_loss's gradient in its input per sample: every sample's rows in one call with reduction 'none', each row
    given its sample's gradient (over the sample's total weight for 'mean'). nll_loss2d's (class dim not last) and
    batched class weights run per sample."""
    target, w, shape = params["target"], params.get("weight"), tuple(params["input_shape"])
    if is_batched(w) or len(shape) > 2:
        return loop(op, args, bdims, params, size)
    target = target._value if is_batched(target) and target._level == _level().level else _full(target, False, size)
    t = target.reshape((size, -1))  # (samples, rows): one row where the input is (C,)
    g = _full(args[0], bdims[0], size)
    if params["reduction"] == "none":
        rows = g.reshape(tuple(t.shape))
    else:
        rows = g.reshape((size, 1))
        if params["reduction"] == "mean":
            rows = rows / _total_weight(t, w, params["ignore_index"], keepdim=True)
        rows = rows.expand(tuple(t.shape))
    out = dispatch(op, (rows.reshape(-1),), dict(params, target=t.reshape(-1), input_shape=(t.numel(), shape[-1]),
                                                 reduction="none"))
    return out.reshape((size,) + shape), True


def index(op, args, bdims, params, size):
    """Indexing (select, slice, advanced): a full slice in front of the key. Advanced indices that NumPy
    moves to the front (separated by a slice) leave the batch dim after them: moved back to the front."""
    key = tuple(params["key"])
    out = dispatch(op, args, dict(params, key=(slice(None),) + key))
    n = _front_advanced(key)
    return (out.movedim(n, 0) if n else out), True


def index_put_zeros(op, args, bdims, params, size):
    key = tuple(params["key"])
    g = args[0]
    n = _front_advanced(key)
    if n:
        g = g.movedim(0, n)
    return dispatch(op, (g,), dict(params, shape=(size,) + tuple(params["shape"]), key=(slice(None),) + key)), True


def _front_advanced(key):
    """How many leading dims NumPy's result of ``key`` gives its advanced indices when it moves them to the
    front (they are not adjacent); 0 when they stay in place."""
    arrays = [i for i, k in enumerate(key) if isinstance(k, np.ndarray) or (
        isinstance(k, (int, np.integer)) and not isinstance(k, bool))]
    if not any(isinstance(key[i], np.ndarray) for i in arrays) or arrays[-1] - arrays[0] + 1 == len(arrays):
        return 0
    shapes = [((int(np.count_nonzero(k)),) if k.dtype == np.bool_ else k.shape) if isinstance(k, np.ndarray) else ()
              for k in (key[i] for i in arrays)]
    return len(np.broadcast_shapes(*shapes))


RANDOM_ERROR = ("vmap: called random operation while in randomness error mode. Please either use the 'same' or "
                "'different' randomness flags on vmap or perform the randomness operation out of vmap")
SAME_BATCHED_ERROR = ("vmap: Cannot ask for same randomness with a batched tensor input. Please use "
                      "randomness='different' or move the randomness out of vmap")


def random(op, args, bdims, params, size):
    mode = _level().randomness
    if mode == "error":
        raise RuntimeError(RANDOM_ERROR)
    if mode == "same":
        if op.name in _FILLS:  # the tensor operand only gives the shape: one draw, the same for every sample
            vals = tuple(a.select(0, 0) if b else a for a, b in zip(args, bdims))
            out = dispatch(op, vals, params)
            return (_full(out, False, size) if any(bdims) else out), any(bdims)
        if any(bdims):
            raise RuntimeError(SAME_BATCHED_ERROR)
        return dispatch(op, args, params), False
    return dispatch(op, tuple(_full(a, b, size) for a, b in zip(args, bdims)), params), True


def diag(op, args, bdims, params, size):
    """diag of a matrix sample is its diagonal; of a vector sample, the matrix with it on the diagonal (written
    into zeros through an index, so that it is recorded)."""
    x, k = args[0], params["diagonal"]
    if x.ndim == 3:
        return x.diagonal(k, 1, 2).clone(), True
    n = x.shape[1] + abs(k)
    rows = np.arange(x.shape[1]) + max(-k, 0)
    out = x.new_zeros((size, n, n))
    out[:, rows, rows + k] = x
    return out, True


def masked_select(op, args, bdims, params, size):
    """A batch of inputs under one mask (a batched mask is refused in ops/selection.py): each sample's
    selection, the key after a full slice."""
    shape = tuple(params["shape"])
    x = _pad(args[0], True, len(shape))
    return dispatch(op, (x,), dict(params, shape=(size,) + shape, key=(slice(None),) + tuple(params["key"]))), True


DYNAMIC_SHAPE_ERROR = ("vmap: We do not support batching operators that can output dynamic shape. Attempted to vmap "
                       "over aten::%s. Please file an issue at https://github.com/pytorch/pytorch/issues if you need "
                       "this feature.")


def dynamic_shape(aten):
    """Ops whose output's shape depends on each sample's values: refused, as PyTorch's vmap refuses them."""
    def rule(op, args, bdims, params, size):
        raise RuntimeError(DYNAMIC_SHAPE_ERROR % aten)
    return rule


def loop(op, args, bdims, params, size):
    """The per-sample loop: for entries without a rule (listed by ``missing()``, each one a call per
    sample), and for operand patterns a rule does not cover."""
    outs = [dispatch(op, tuple(a.select(0, i) if b else a for a, b in zip(args, bdims)), params)
            for i in range(size)]
    stack = OPS["stack"]
    if op.n_outputs != 1:
        return tuple(dispatch(stack, tuple(o[k] for o in outs), {"dim": 0}) for k in range(len(outs[0]))), True
    return dispatch(stack, tuple(outs), {"dim": 0}), True


def getitem(x, key):
    """``x[key]`` where the key holds index tensors batched by vmap: each sample's index picks from its own
    sample (an advanced index with the batch's arange in front); None for other keys (the entries' rules)."""
    parts = key if isinstance(key, tuple) else (key,)
    if not any(is_batched(k) for k in parts):
        return None
    return _batched_index(x, parts)


def _batched_index(x, parts):
    level = max(k._level for k in (x,) + parts if is_batched(k))
    size = LEVELS[level - 1].size
    from ._batched import move_in, move_out
    # each sample's key indexes its sample: arange(B) as one more advanced index, in front of the others
    v = move_out(x, level, size)
    keys = []
    for k in parts:
        if isinstance(k, Tensor):
            keys.append(move_out(k, level, size) if is_batched(k) else k.unsqueeze(0).expand((size,) + tuple(k.shape)))
        else:
            keys.append(k)
    if not all(isinstance(k, Tensor) for k in keys):
        raise NotImplementedError("vmap: indexing with batched index tensors mixed with slices is not supported")
    ar = Tensor._wrap(np.arange(size)).to(x.device)
    ar = ar.reshape((size,) + (1,) * (keys[0].ndim - 1))
    out = v[(ar,) + tuple(keys)]
    return move_in(out, level)


# ------------------------------------------------------------------ the table
_FILLS = ("uniform", "normal_fill", "log_normal", "cauchy", "exponential", "geometric", "random", "bernoulli_fill")
_REDUCTIONS = ("sum", "sum_all", "mean", "mean_all", "prod", "var", "std", "norm", "logsumexp", "all", "any", "amax",
               "amin", "max_all", "min_all", "max_dim", "min_dim", "argmax", "argmin")

RULES = {}


def _declare():
    for name, op in OPS.items():
        if op.kernel is not None:
            RULES[name] = elementwise
        elif "rng" in _forward_params(op):
            RULES[name] = random
    for name in ("div_rounded", "where", "masked_fill", "logaddexp", "lerp", "one_hot", "rsub"):
        RULES[name] = elementwise
    for op in OPS.values():  # the fused VJP kernels' ops (forward mode runs them on jacfwd's batched tangents)
        for fop in op.derivatives.fused_ops:
            if fop is not None:
                RULES.setdefault(fop.name, elementwise)
    for name in ("fill", "copy_from"):
        RULES[name] = elementwise_full
    for name in _REDUCTIONS:
        RULES[name] = reduction
    for name in ("cumsum", "cumprod", "cummax", "cummin", "logcumsumexp", "softmax", "log_softmax", "sort", "topk", "kthvalue",
                 "median_dim"):
        RULES[name] = zero_d_dim("dim")
    for name in ("glu", "gather", "scatter_add", "cat", "stack", "split", "split_with_sizes", "unbind"):
        RULES[name] = shift_dims("dim")
    for name in ("fft_c2c", "fft_r2c", "fft_c2r"):  # transforms over dims: the batch dim is one more
        RULES[name] = shift_dims("dim")
    RULES["index_select"] = leading_or_loop(shift_dims("dim", full=False), 0)
    RULES["flip"] = shift_dims("dims")
    RULES["diagonal"] = shift_dims("dim1", "dim2")
    RULES["median"] = median_all
    RULES["roll"] = roll
    RULES["constant_pad_nd"] = constant_pad
    for name in ("view", "reshape", "unsafe_view", "squeeze", "squeeze_dim", "unsqueeze"):
        RULES[name] = with_shape(via="reshape")
    RULES["expand"] = with_shape()
    RULES["transpose"] = transpose
    RULES["t"] = composed(lambda x: x.transpose(0, 1) if x.ndim == 2 else x.reshape(x.shape))
    RULES["permute"] = permute
    RULES["repeat"] = repeat
    RULES["clone"] = clone
    for name in ("cast", "move"):
        RULES[name] = passthrough
    for name in ("mm", "bmm", "matmul", "mv", "dot", "outer"):
        RULES[name] = matmul
    RULES["outer"] = composed(lambda a, b: a.unsqueeze(1) * b.unsqueeze(0))
    RULES["dot"] = composed(lambda a, b: (a * b).sum())
    RULES["linear"] = RULES["linear_mm"] = linear
    RULES["addmm"] = RULES["baddbmm"] = RULES["addmv"] = composed(_addmm)
    RULES["addbmm"] = composed(_addbmm)
    for name in ("tril", "triu"):
        RULES[name] = leading(0)
    RULES["scaled_dot_product_attention"] = attention
    RULES["native_layer_norm"] = layer_norm
    RULES["embedding"] = leading(1)
    for name in ("conv2d", "conv_transpose2d", "conv2d_weight"):
        RULES[name] = conv
    for name in ("max_pool2d", "avg_pool2d", "adaptive_avg_pool2d", "im2col", "col2im",
                 "avg_pool2d_backward"):
        RULES[name] = fold(0)
    RULES["max_pool2d_backward"] = max_pool2d_backward
    RULES["grid_sampler_2d"] = fold(0, 1)
    RULES["grid_sampler_2d_backward"] = RULES["grid_sampler_2d_grid_jvp"] = fold(0, 1, 2)
    RULES["affine_grid_generator"] = fold(0)
    RULES["pixel_shuffle"] = RULES["pixel_unshuffle"] = leading(0)
    for name, op in OPS.items():
        if name.startswith(("reflect_pad", "replicate_pad", "circular_pad", "upsample_")):
            RULES[name] = fold(0)
    for name in ("lstm_cell_step", "gru_cell_step", "rnn_tanh_cell_step", "rnn_relu_cell_step"):
        RULES[name] = fold(0, 1, 4)
    for name in ("lstm_layer", "gru_layer", "rnn_tanh_layer", "rnn_relu_layer"):
        RULES[name] = rnn_layer
    for name in ("mse_loss", "smooth_l1_loss", "huber_loss", "binary_cross_entropy", "binary_cross_entropy_with_logits"):
        RULES[name] = pointwise_loss
    RULES["nll_loss"] = RULES["nll_loss2d"] = nll_loss
    RULES["nll_loss_backward"] = nll_loss_backward
    for name in ("select", "slice", "index"):
        RULES[name] = index
    RULES["index_put_zeros"] = index_put_zeros
    for name in ("real", "imag", "complex", "polar", "conj", "resolve_conj_stored"):  # (ops/complex.py)
        RULES[name] = elementwise
    RULES["view_as_real"] = leading(0)
    RULES["view_as_complex"] = view_as_complex
    RULES["diag"] = diag
    RULES["masked_select"] = masked_select
    RULES["unique"] = dynamic_shape("_unique2")
    RULES["_standard_gamma_grad"] = elementwise
    # linear algebra: matrices in the last two dims, every leading dim a batch dim (LAPACK's loops take them)
    for name, op in OPS.items():
        if op.forward.__module__ in ("jitgrad.ops.decompositions", "jitgrad.ops.solvers",
                                     "jitgrad.ops.matrix_functions", "jitgrad.ops.eig", "jitgrad.ops.products"):
            RULES[name] = leading(*range(len(op.inputs)))


def layer_norm(op, args, bdims, params, size):
    """native_layer_norm normalizes the last dims: a batched input alone is one more leading dim; batched
    weights or biases (an ensemble) scale and shift the normalized input as elementwise ops."""
    if not bdims[1] and not bdims[2]:
        return leading(0)(op, args, bdims, params, size)
    return composed(_layer_norm_affine)(op, args, bdims, params, size)


def _layer_norm_affine(x, weight, bias, normalized_ndim, eps):
    y, mean, rstd = dispatch(OPS["native_layer_norm"], (x, None, None), {"normalized_ndim": normalized_ndim, "eps": eps})
    if weight is not None:
        y = y * weight
    return (y if bias is None else y + bias), mean, rstd


def leading_or_loop(rule, *positions):
    """``rule`` where only the operands at ``positions`` are batched; the loop otherwise."""
    def chosen(op, args, bdims, params, size):
        if any(b for i, b in enumerate(bdims) if i not in positions):
            return loop(op, args, bdims, params, size)
        return rule(op, args, bdims, params, size)
    return chosen


def _forward_params(op):
    code = getattr(op.forward, "__code__", None)
    return code.co_varnames[:code.co_argcount + code.co_kwonlyargcount] if code is not None else ()


def missing():
    """The entries without a batching rule (vmap runs them one sample at a time)."""
    return sorted(n for n in OPS if n not in RULES)


_declare()
