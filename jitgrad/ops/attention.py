"""Scaled dot-product attention as one entry: softmax(scale * Q K^T + mask) fused in one kernel
(kernels/attention.py), the GEMMs in BLAS, and a fused backward of the softmax.

The entry's outputs are (weights, result): the attention weights P (saved for the backward, not
returned by F.scaled_dot_product_attention) and P V. The VJP formulas are written in terms of P,
so create_graph records them and higher-order gradients follow.
"""
import math

import numpy as np

from .._device import backend
from .._factories import generator, zeros
from .._op import Op, broadcast_shapes, dispatch
from .._tensor import Tensor
from ._table import LOWER, _arr, autocasts, register
from .linalg import _NAMES


def _forward(xp, dt, q, k, v, mask, dmask, scale, causal):
    p = xp.attention_softmax(xp.matmul(q, xp.swapaxes(k, -1, -2)), mask, scale, causal)
    pd = p if dmask is None else xp.run("mul", dt, p, dmask)
    return p, xp.matmul(pd, v)


# ---------------------------------------------------------------------- VJP formulas (over table ops)
def _dp(g, s):
    """The gradient of the weights P: from the result through V (and dropout), plus P's own."""
    dp = g[1].matmul(s.value.transpose(-2, -1))
    if s.dropout_mask is not None:
        dp = dp * s.dropout_mask
    return dp + g[0]


def _dscores(g, s):
    """The gradient of scale * Q K^T + mask (softmax's VJP)."""
    p = s.weights
    dp = _dp(g, s)
    return p * (dp - (dp * p).sum(-1, keepdim=True))


def _dropped(s):
    return s.weights if s.dropout_mask is None else s.weights * s.dropout_mask


_VJP = [lambda g, s: (_dscores(g, s) * s.scale).matmul(s.key),
        lambda g, s: (_dscores(g, s) * s.scale).transpose(-2, -1).matmul(s.query),
        lambda g, s: _dropped(s).transpose(-2, -1).matmul(g[1]),
        _dscores]


# ---------------------------------------------------------------------- the fused backward
def _parts(g, s):
    """(scale * dS, the dropped weights), computed once per node and backward pass."""
    d = s.__dict__
    parts = d.get("_fused_parts")
    if parts is None:
        g0, g1 = g[0]._data, g[1]._data
        xp = backend(g1)
        p = s.weights._data
        dt = p.dtype
        dp = xp.matmul(g1, xp.swapaxes(s.value._data, -1, -2))
        dmask = s.dropout_mask
        if dmask is not None:
            dp = xp.run("mul", dt, dp, dmask._data, out=dp)
        dp = xp.run("add", dt, dp, g0, out=dp)
        pd = p if dmask is None else xp.run("mul", dt, p, dmask._data)
        parts = d["_fused_parts"] = (dp, xp.attention_softmax_vjp(dp, p, s.scale), pd)
    return parts


def _done(s, k, grad):
    if all(nf[0] is None for nf in s.next_functions[k + 1:]):
        s.__dict__.pop("_fused_parts", None)
    return Tensor._wrap(grad)


def _fused(k):
    def fused(g, s):
        dp, ds, pd = _parts(g, s)
        xp = backend(ds)
        if k == 0:
            grad = xp.matmul(ds, s.key._data)
        elif k == 1:
            grad = xp.matmul(xp.swapaxes(ds, -1, -2), s.query._data)
        elif k == 2:
            grad = xp.matmul(xp.swapaxes(pd, -1, -2), g[1]._data)
        else:
            grad = xp.attention_softmax_vjp(dp, s.weights._data, 1.0)
        return _done(s, k, grad)
    return fused


# ---------------------------------------------------------------------- the API
def _float_mask(mask, dtype, device):
    """A boolean mask (True: take part) as an additive one (0 / -inf); a float mask as it is."""
    if mask.dtype.name != "bool":
        return mask
    return zeros(tuple(mask.shape), dtype=dtype, device=device).masked_fill(mask.logical_not(), -math.inf)


def _check(query, key, value):
    if not (query.dtype is key.dtype is value.dtype):
        raise RuntimeError("Expected query, key, and value to have the same dtype, but got query.dtype: %s key.dtype: "
                           "%s and value.dtype: %s instead." % (_NAMES[query.dtype.name], _NAMES[key.dtype.name],
                                                                _NAMES[value.dtype.name]))
    for name, t in (("query", query), ("key", key), ("value", value)):
        if t.ndim < 2:
            raise RuntimeError("scaled_dot_product_attention: expected %s to have at least 2 dimensions, got %d"
                               % (name, t.ndim))
    batch = tuple(query.shape[:-2])
    if query.shape[-1] != key.shape[-1]:
        raise RuntimeError("Expected size for first two dimensions of batch2 tensor to be: [%d, %d] but got: [%d, %d]."
                           % (max(math.prod(batch), 1), query.shape[-1], max(math.prod(key.shape[:-2]), 1),
                              key.shape[-1]))
    if key.shape[-2] != value.shape[-2]:
        raise RuntimeError("Expected size for first two dimensions of batch2 tensor to be: [%d, %d] but got: [%d, %d]."
                           % (max(math.prod(batch), 1), key.shape[-2], max(math.prod(value.shape[:-2]), 1),
                              value.shape[-2]))


def _repeat_heads(t, groups):
    """Each of t's heads (dim -3) ``groups`` times in a row (grouped-query attention)."""
    shape = tuple(t.shape)
    e = t.unsqueeze(-3).expand(shape[:-2] + (groups,) + shape[-2:])
    return e.reshape(shape[:-3] + (shape[-3] * groups,) + shape[-2:])


@autocasts("scaled_dot_product_attention")
def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    """softmax(query key^T * scale + attn_mask) value, over the last two dims (PyTorch's semantics)."""
    return attention(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)[1]


def attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    """(attention weights after dropout, output) of scaled dot-product attention (the weights are what
    nn.MultiheadAttention returns with need_weights=True)."""
    _check(query, key, value)
    if is_causal and attn_mask is not None:
        raise RuntimeError("_scaled_dot_product_attention: Explicit attn_mask should not be set when is_causal=True")
    if enable_gqa and query.ndim >= 3 and key.ndim >= 3 and key.shape[-3] != query.shape[-3]:
        hq, hk = query.shape[-3], key.shape[-3]
        if hq % hk or hq % value.shape[-3]:
            raise RuntimeError("Number of heads in key and value must divide the number of heads in query")
        key, value = _repeat_heads(key, hq // hk), _repeat_heads(value, hq // value.shape[-3])
    batch = broadcast_shapes(tuple(query.shape[:-2]), tuple(key.shape[:-2]), tuple(value.shape[:-2]))
    L, S = query.shape[-2], key.shape[-2]
    if attn_mask is not None:
        attn_mask = _float_mask(attn_mask, query.dtype, query.device)
        broadcast_shapes(tuple(attn_mask.shape), batch + (L, S))  # PyTorch's message for a mask that does not fit
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else float(scale)
    dmask = None
    if dropout_p > 0.0:
        keep = generator().random(batch + (L, S)) >= dropout_p
        dmask = Tensor._wrap((keep * (1.0 / (1.0 - dropout_p)) if dropout_p < 1.0 else np.zeros(keep.shape))
                             .astype(query.dtype.np)).to(query.device)
    weights, out = dispatch(SDPA, (query, key, value, attn_mask, dmask), {"scale": scale, "causal": bool(is_causal)})
    return (weights if dmask is None else weights * dmask), out


# ---------------------------------------------------------------------- reference and samples
def _np_sdpa(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = q @ np.swapaxes(k, -1, -2) * scale
    L, S = s.shape[-2:]
    if is_causal:
        s = np.where(np.tril(np.ones((L, S), bool)), s, -np.inf)
    if attn_mask is not None:
        s = np.where(attn_mask, s, -np.inf) if attn_mask.dtype == bool else s + attn_mask
    m = s.max(-1, keepdims=True)
    e = np.exp(s - np.where(np.isfinite(m), m, 0))
    total = e.sum(-1, keepdims=True)
    p = np.where(total > 0, e / np.where(total > 0, total, 1), 0)
    return (p @ v,)  # the public call's one output


def _samples(rng, dtype):
    if np.dtype(dtype).kind != "f":
        return []
    A = lambda *s: _arr(rng, s, -1.0, 1.0, dtype)  # noqa: E731
    return [((A(3, 4), A(5, 4), A(5, 2)), {}),
            ((A(2, 3, 4), A(2, 5, 4), A(2, 5, 3)), {"is_causal": True}),
            ((A(2, 2, 3, 4), A(2, 2, 3, 4), A(2, 2, 3, 4)), {"attn_mask": A(3, 3), "scale": 0.7}),
            ((A(2, 3, 4), A(2, 3, 4), A(2, 3, 2)), {"attn_mask": np.array([[True, False, True]] * 3)})]


SDPA = register(Op("scaled_dot_product_attention", _forward,
                   inputs=("query", "key", "value", "attn_mask", "dropout_mask"), n_outputs=2,
                   outputs=("weights", "result"), vjp=_VJP, fused=[_fused(k) for k in range(4)],
                   node="ScaledDotProductFlashAttentionForCpuBackward0", call=scaled_dot_product_attention,
                   ref=_np_sdpa, samples=_samples, autocast=LOWER))
