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
    attn_mask, key_padding_mask, is_causal = _masks(attn_mask, key_padding_mask, is_causal, need_weights, query.dtype)
    if use_separate_proj_weight:
        q, k, v = _in_projection(query, key, value, None, in_proj_bias, q_proj_weight, k_proj_weight, v_proj_weight)
    else:
        q, k, v = _in_projection(query, key, value, in_proj_weight, in_proj_bias)
    attn_mask = _checked_attn_mask(attn_mask, N, num_heads, L, S)
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
    attn_mask = _with_padding(attn_mask, key_padding_mask, N, num_heads, S)
    weights, out = attention(q.reshape(N, num_heads, L, head_dim), k.reshape(N, num_heads, S, head_dim),
                             v.reshape(N, num_heads, S, head_dim), _per_batch(attn_mask, N),
                             dropout_p if training else 0.0, is_causal)
    out = out.permute(2, 0, 1, 3).reshape(L * N, E)
    out = linear(out, out_proj_weight, out_proj_bias).reshape(L, N, E)
    if need_weights:
        if average_attn_weights:
            weights = weights.mean(1)
        if not batched:
            return out.squeeze(1), weights.squeeze(0)
        return out, weights
    return (out if batched else out.squeeze(1)), None


def _masks(attn_mask, key_padding_mask, is_causal, need_weights, dtype):
    """Both masks as additive float masks; the causal hint kept only where the kernel can apply it alone."""
    key_padding_mask = _float_mask(key_padding_mask, "key_padding_mask", dtype)
    attn_mask = _float_mask(attn_mask, "attn_mask", dtype)
    if is_causal and key_padding_mask is None and not need_weights:
        return None, None, True  # the kernel masks the future itself
    return attn_mask, key_padding_mask, False


def _checked_attn_mask(attn_mask, N, num_heads, L, S):
    """attn_mask as (1 or N * num_heads, L, S), with PyTorch's shape errors."""
    if attn_mask is None:
        return None
    if attn_mask.ndim == 2:
        if tuple(attn_mask.shape) != (L, S):
            raise RuntimeError("The shape of the 2D attn_mask is %s, but should be %s."
                               % (tuple(attn_mask.shape), (L, S)))
        return attn_mask.unsqueeze(0)
    if attn_mask.ndim == 3:
        if tuple(attn_mask.shape) != (N * num_heads, L, S):
            raise RuntimeError("The shape of the 3D attn_mask is %s, but should be %s."
                               % (tuple(attn_mask.shape), (N * num_heads, L, S)))
        return attn_mask
    raise RuntimeError("attn_mask's dimension %d is not supported" % attn_mask.ndim)


def _with_padding(attn_mask, key_padding_mask, N, num_heads, S):
    """attn_mask with the key padding mask (N, S) added for every head and query."""
    if key_padding_mask is None:
        return attn_mask
    if tuple(key_padding_mask.shape) != (N, S):
        raise AssertionError("expecting key_padding_mask shape of %s, but got %s"
                             % ((N, S), tuple(key_padding_mask.shape)))
    kpm = key_padding_mask.reshape(N, 1, 1, S).expand(N, num_heads, 1, S).reshape(N * num_heads, 1, S)
    return kpm if attn_mask is None else attn_mask + kpm


def _per_batch(attn_mask, N):
    """A (1 or N * heads, L or 1, S) mask as (1 or N, heads or 1, L or 1, S), as the attention entry takes it."""
    if attn_mask is None:
        return None
    return attn_mask.reshape((1 if attn_mask.shape[0] == 1 else N, -1) + tuple(attn_mask.shape[-2:]))


def batch_first_self_attention(query, key, value, embed_dim_to_check, num_heads, in_proj_weight, in_proj_bias,
                               out_proj_weight, out_proj_bias, dropout_p, training, key_padding_mask, need_weights,
                               attn_mask, average_attn_weights, is_causal):
    """multi_head_attention_forward for batch-first (N, L, E) inputs with one in-projection weight and no
    bias_k / zero attention: the heads are taken as strided views of the projections (N, L, E), so no
    transposition to (L, N, E) and back is copied."""
    N, L, E = query.shape
    S = key.shape[1]
    head_dim = E // num_heads
    if E != embed_dim_to_check:
        raise AssertionError("was expecting embedding dimension of %d, but got %d" % (embed_dim_to_check, E))
    if is_causal and attn_mask is None:
        raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use the Transformer module method "
                           "`generate_square_subsequent_mask` to create this mask.")
    attn_mask, key_padding_mask, is_causal = _masks(attn_mask, key_padding_mask, is_causal, need_weights, query.dtype)
    q, k, v = _in_projection(query, key, value, in_proj_weight, in_proj_bias)
    attn_mask = _with_padding(_checked_attn_mask(attn_mask, N, num_heads, L, S), key_padding_mask, N, num_heads, S)

    def heads(t, n):
        return t.reshape(N, n, num_heads, head_dim).transpose(1, 2)
    weights, out = attention(heads(q, L), heads(k, S), heads(v, S), _per_batch(attn_mask, N),
                             dropout_p if training else 0.0, is_causal)
    out = linear(out.transpose(1, 2).reshape(N, L, E), out_proj_weight, out_proj_bias)
    if not need_weights:
        return out, None
    return out, weights.mean(1) if average_attn_weights else weights
