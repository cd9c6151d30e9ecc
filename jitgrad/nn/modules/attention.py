"""nn.MultiheadAttention, with PyTorch's parameters (in_proj_weight, in_proj_bias, out_proj, ...), init and API."""
from ... import _factories as Fa
from .._attention_functions import batch_first_self_attention, multi_head_attention_forward
from .. import init
from ..module import Module
from ..parameter import Parameter
from .linear import NonDynamicallyQuantizableLinear


class MultiheadAttention(Module):
    """Attention with num_heads heads: out_proj(concat_h softmax(Q_h K_h^T / sqrt(d) + mask) V_h)."""

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False, add_zero_attn=False,
                 kdim=None, vdim=None, batch_first=False, device=None, dtype=None):
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError("embed_dim and num_heads must be greater than 0, got embed_dim=%s and num_heads=%s instead"
                             % (embed_dim, num_heads))
        super().__init__()
        self.embed_dim = embed_dim
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads = num_heads
        self.dropout = dropout
        self.batch_first = batch_first
        self.head_dim = embed_dim // num_heads
        if self.head_dim * num_heads != embed_dim:
            raise AssertionError("embed_dim must be divisible by num_heads")
        kw = {"dtype": dtype, "device": device}
        if not self._qkv_same_embed_dim:
            self.q_proj_weight = Parameter(Fa.empty((embed_dim, embed_dim), **kw))
            self.k_proj_weight = Parameter(Fa.empty((embed_dim, self.kdim), **kw))
            self.v_proj_weight = Parameter(Fa.empty((embed_dim, self.vdim), **kw))
            self.register_parameter("in_proj_weight", None)
        else:
            self.in_proj_weight = Parameter(Fa.empty((3 * embed_dim, embed_dim), **kw))
            self.register_parameter("q_proj_weight", None)
            self.register_parameter("k_proj_weight", None)
            self.register_parameter("v_proj_weight", None)
        if bias:
            self.in_proj_bias = Parameter(Fa.empty(3 * embed_dim, **kw))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias, **kw)
        if add_bias_kv:
            self.bias_k = Parameter(Fa.empty((1, 1, embed_dim), **kw))
            self.bias_v = Parameter(Fa.empty((1, 1, embed_dim), **kw))
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()

    def _reset_parameters(self):
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            init.xavier_uniform_(self.q_proj_weight)
            init.xavier_uniform_(self.k_proj_weight)
            init.xavier_uniform_(self.v_proj_weight)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)
        if self.bias_k is not None:
            init.xavier_normal_(self.bias_k)
        if self.bias_v is not None:
            init.xavier_normal_(self.bias_v)

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
                average_attn_weights=True, is_causal=False):
        batched = query.ndim == 3
        if self.batch_first and batched and self._qkv_same_embed_dim and self.bias_k is None \
                and not self.add_zero_attn:
            return batch_first_self_attention(
                query, key, value, self.embed_dim, self.num_heads, self.in_proj_weight, self.in_proj_bias,
                self.out_proj.weight, self.out_proj.bias, self.dropout, self.training, key_padding_mask, need_weights,
                attn_mask, average_attn_weights, is_causal)
        if self.batch_first and batched:
            query, key, value = (t.transpose(1, 0) for t in (query, key, value))
        out, weights = multi_head_attention_forward(
            query, key, value, self.embed_dim, self.num_heads, self.in_proj_weight, self.in_proj_bias, self.bias_k,
            self.bias_v, self.add_zero_attn, self.dropout, self.out_proj.weight, self.out_proj.bias,
            training=self.training, key_padding_mask=key_padding_mask, need_weights=need_weights, attn_mask=attn_mask,
            use_separate_proj_weight=not self._qkv_same_embed_dim, q_proj_weight=self.q_proj_weight,
            k_proj_weight=self.k_proj_weight, v_proj_weight=self.v_proj_weight,
            average_attn_weights=average_attn_weights, is_causal=is_causal)
        if self.batch_first and batched:
            return out.transpose(1, 0), weights
        return out, weights
