"""F.multi_head_attention_forward: nn.MultiheadAttention's computation, as PyTorch's, over the fused
attention entry (ops/attention.py) and table ops."""
import math

from .. import _factories as Fa
from ..ops.attention import attention
from ..ops.join import cat
from ..ops.layers import linear, pad


def _float_mask(mask, name, dtype):
    """A boolean mask (True: masked out) as an additive float one (-inf / 0); a float mask as it is."""
    if mask is None:
        return None
    if mask.dtype.name == "bool":
        return Fa.zeros(tuple(mask.shape), dtype=dtype, device=mask.device).masked_fill(mask, -math.inf)
    if not mask.dtype.is_floating_point:
        raise AssertionError("only bool and floating types of %s are supported" % name)
    return mask


def _in_projection(query, key, value, w, b, q_w=None, k_w=None, v_w=None):
    E = query.shape[-1]
    if w is not None:
        q_w, k_w, v_w = w[:E], w[E:2 * E], w[2 * E:]
    bq = bk = bv = None
    if b is not None:
        bq, bk, bv = b[:E], b[E:2 * E], b[2 * E:]
    if query is key and key is value and w is not None:  # self-attention: one GEMM, as PyTorch does
        q, k, v = linear(query, w, b).chunk(3, -1)
        return q, k, v
    return linear(query, q_w, bq), linear(key, k_w, bk), linear(value, v_w, bv)


def multi_head_attention_forward(query, key, value, embed_dim_to_check, num_heads, in_proj_weight, in_proj_bias,
                                 bias_k, bias_v, add_zero_attn, dropout_p, out_proj_weight, out_proj_bias,
                                 training=True, key_padding_mask=None, need_weights=True, attn_mask=None,
                                 use_separate_proj_weight=False, q_proj_weight=None, k_proj_weight=None,
                                 v_proj_weight=None, static_k=None, static_v=None, average_attn_weights=True,
                                 is_causal=False):
    """Attention of query (L, N, E) over key/value (S, N, *) (or unbatched (L, E)): (output, weights or None)."""
    batched = query.ndim == 3
    if not batched:
        query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.unsqueeze(0)
    L, N, E = query.shape
    S = key.shape[0]
    if E != embed_dim_to_check:
        raise AssertionError("was expecting embedding dimension of %d, but got %d" % (embed_dim_to_check, E))
    head_dim = E // num_heads
    if head_dim * num_heads != E:
        raise AssertionError("embed_dim %d not divisible by num_heads %d" % (E, num_heads))
    if is_causal and attn_mask is None:
        raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use the Transformer module method "
                           "`generate_square_subsequent_mask` to create this mask.")
    key_padding_mask = _float_mask(key_padding_mask, "key_padding_mask", query.dtype)
    attn_mask = _float_mask(attn_mask, "attn_mask", query.dtype)
    if is_causal and key_padding_mask is None and not need_weights:
        attn_mask = None  # the kernel masks the future itself
    else:
        is_causal = False
    if use_separate_proj_weight:
        q, k, v = _in_projection(query, key, value, None, in_proj_bias, q_proj_weight, k_proj_weight, v_proj_weight)
    else:
        q, k, v = _in_projection(query, key, value, in_proj_weight, in_proj_bias)
    if attn_mask is not None:
        if attn_mask.ndim == 2:
            if tuple(attn_mask.shape) != (L, S):
                raise RuntimeError("The shape of the 2D attn_mask is %s, but should be %s."
                                   % (tuple(attn_mask.shape), (L, S)))
            attn_mask = attn_mask.unsqueeze(0)
        elif attn_mask.ndim == 3:
            if tuple(attn_mask.shape) != (N * num_heads, L, S):
                raise RuntimeError("The shape of the 3D attn_mask is %s, but should be %s."
                                   % (tuple(attn_mask.shape), (N * num_heads, L, S)))
        else:
            raise RuntimeError("attn_mask's dimension %d is not supported" % attn_mask.ndim)
    if bias_k is not None and bias_v is not None:
        k = cat([k, bias_k.expand(1, N, E)])
        v = cat([v, bias_v.expand(1, N, E)])
        attn_mask = pad(attn_mask, (0, 1)) if attn_mask is not None else None
        key_padding_mask = pad(key_padding_mask, (0, 1)) if key_padding_mask is not None else None
    q = q.reshape(L, N * num_heads, head_dim).transpose(0, 1)
    k = (k.reshape(k.shape[0], N * num_heads, head_dim).transpose(0, 1) if static_k is None else static_k)
    v = (v.reshape(v.shape[0], N * num_heads, head_dim).transpose(0, 1) if static_v is None else static_v)
    if add_zero_attn:
        k = cat([k, Fa.zeros((N * num_heads, 1, head_dim), dtype=k.dtype, device=k.device)], 1)
        v = cat([v, Fa.zeros((N * num_heads, 1, head_dim), dtype=v.dtype, device=v.device)], 1)
        attn_mask = pad(attn_mask, (0, 1)) if attn_mask is not None else None
        key_padding_mask = pad(key_padding_mask, (0, 1)) if key_padding_mask is not None else None
    S = k.shape[1]
    if key_padding_mask is not None:
        if tuple(key_padding_mask.shape) != (N, S):
            raise AssertionError("expecting key_padding_mask shape of %s, but got %s"
                                 % ((N, S), tuple(key_padding_mask.shape)))
        kpm = key_padding_mask.reshape(N, 1, 1, S).expand(N, num_heads, 1, S).reshape(N * num_heads, 1, S)
        attn_mask = kpm if attn_mask is None else attn_mask + kpm
    if not training:
        dropout_p = 0.0
    weights, out = attention(q.reshape(N, num_heads, L, head_dim), k.reshape(N, num_heads, S, head_dim),
                             v.reshape(N, num_heads, S, head_dim),
                             None if attn_mask is None else attn_mask.reshape(
                                 (1 if attn_mask.shape[0] == 1 else N, -1) + tuple(attn_mask.shape[-2:])),
                             dropout_p, is_causal)
    out = out.permute(2, 0, 1, 3).reshape(L * N, E)
    out = linear(out, out_proj_weight, out_proj_bias).reshape(L, N, E)
    if need_weights:
        if average_attn_weights:
            weights = weights.mean(1)
        if not batched:
            return out.squeeze(1), weights.squeeze(0)
        return out, weights
    return (out if batched else out.squeeze(1)), None
