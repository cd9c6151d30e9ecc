"""Scaled dot-product attention, nn.MultiheadAttention and the transformer blocks: against NumPy
references and finite differences (float64, tiny sizes), and side by side with PyTorch (weights
copied, dropout 0, eval mode) where it is installed."""
import importlib.util
import math

import numpy as np
import pytest

import jitgrad as jg
from jitgrad import nn
from jitgrad.autograd import gradcheck, gradgradcheck
from jitgrad.nn import functional as F

HAS_TORCH = importlib.util.find_spec("torch") is not None
needs_torch = pytest.mark.skipif(not HAS_TORCH, reason="PyTorch is not installed")


def np_attention(q, k, v, mask=None, causal=False, scale=None):
    """softmax(q k^T * scale + mask) v, a fully masked row giving zeros."""
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = q @ np.swapaxes(k, -1, -2) * scale
    if causal:
        s = np.where(np.tril(np.ones(s.shape[-2:], bool)), s, -np.inf)
    if mask is not None:
        s = np.where(mask, s, -np.inf) if mask.dtype == bool else s + mask
    m = s.max(-1, keepdims=True)
    e = np.exp(s - np.where(np.isfinite(m), m, 0))
    t = e.sum(-1, keepdims=True)
    p = np.where(t > 0, e / np.where(t > 0, t, 1), 0)
    return p @ v, p


def T(a, grad=False):
    return jg.tensor(a, requires_grad=grad)


# ---------------------------------------------------------------------- F.scaled_dot_product_attention
@pytest.mark.parametrize("kw", [{}, {"is_causal": True}, {"scale": 0.25}, {"mask": "float"}, {"mask": "bool"}])
def test_sdpa_matches_numpy_and_gradcheck(kw, rng):
    q, k, v = rng.standard_normal((2, 2, 3, 4)), rng.standard_normal((2, 2, 5, 4)), rng.standard_normal((2, 2, 5, 3))
    kw = dict(kw)
    mask = kw.pop("mask", None)
    m = {"float": rng.standard_normal((3, 5)), "bool": rng.random((2, 1, 3, 5)) > 0.3, None: None}[mask]
    out = F.scaled_dot_product_attention(T(q), T(k), T(v), attn_mask=None if m is None else T(m), **kw)
    ref = np_attention(q, k, v, m, kw.get("is_causal", False), kw.get("scale"))[0]
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-12, atol=1e-12)
    inputs = [T(q, True), T(k, True), T(v, True)] + ([T(m, True)] if mask == "float" else [])

    def fn(q, k, v, *mm):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mm[0] if mm else (None if m is None else T(m)), **kw)
    assert gradcheck(fn, inputs)


def test_sdpa_gradgradcheck(rng):
    q, k, v = (T(rng.standard_normal((2, 3, 2)), True) for _ in range(3))
    assert gradgradcheck(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), [q, k, v])


def test_sdpa_fully_masked_row_gives_zeros_and_zero_gradient(rng):
    q, k, v = (T(rng.standard_normal((3, 4)), True) for _ in range(3))
    mask = np.ones((3, 3), bool)
    mask[1] = False
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=T(mask))
    assert not out.detach().numpy()[1].any() and np.isfinite(out.detach().numpy()).all()
    out.sum().backward()
    assert not q.grad.numpy()[1].any() and np.isfinite(k.grad.numpy()).all()


def test_sdpa_grouped_query_attention_and_node(rng):
    q, k, v = rng.standard_normal((1, 4, 3, 2)), rng.standard_normal((1, 2, 5, 2)), rng.standard_normal((1, 2, 5, 2))
    out = F.scaled_dot_product_attention(T(q, True), T(k, True), T(v, True), enable_gqa=True)
    ref = np_attention(q, np.repeat(k, 2, axis=1), np.repeat(v, 2, axis=1))[0]
    np.testing.assert_allclose(out.detach().numpy(), ref, rtol=1e-12)
    assert type(out.grad_fn).__name__ == "ScaledDotProductFlashAttentionForCpuBackward0"
    with pytest.raises(RuntimeError, match="The size of tensor a"):
        F.scaled_dot_product_attention(T(q), T(k), T(v))


def test_sdpa_dropout_keeps_expectation(rng):
    q, k, v = T(rng.standard_normal((2, 4))), T(rng.standard_normal((6, 4))), T(np.ones((6, 3)))
    jg.manual_seed(0)
    outs = np.stack([F.scaled_dot_product_attention(q, k, v, dropout_p=0.5).numpy() for _ in range(400)])
    assert set(np.unique(np.round(outs * 0.5 / outs.max(), 6))) != {0.5}  # some weights were dropped
    np.testing.assert_allclose(outs.mean(0), np.ones((2, 3)), atol=0.12)
    assert not F.scaled_dot_product_attention(q, k, v, dropout_p=1.0).numpy().any()


def test_sdpa_errors():
    q = jg.randn(2, 3, 4)
    with pytest.raises(RuntimeError, match="Explicit attn_mask should not be set when is_causal=True"):
        F.scaled_dot_product_attention(q, q, q, attn_mask=jg.zeros(3, 3), is_causal=True)
    with pytest.raises(RuntimeError, match="Expected query, key, and value to have the same dtype, but got "
                                           "query.dtype: float key.dtype: double and value.dtype: float instead."):
        F.scaled_dot_product_attention(q, q.double(), q)
    with pytest.raises(RuntimeError, match=r"Expected size for first two dimensions of batch2 tensor to be: \[2, 4\] "
                                           r"but got: \[2, 3\]."):
        F.scaled_dot_product_attention(q, jg.randn(2, 5, 3), jg.randn(2, 5, 3))


# ---------------------------------------------------------------------- MultiheadAttention
def test_mha_parameters_init_and_numpy_reference(rng):
    jg.manual_seed(0)
    m = nn.MultiheadAttention(8, 2).double()
    names = [n for n, _ in m.named_parameters()]
    assert names == ["in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"]
    assert m.in_proj_weight.shape == (24, 8) and not m.in_proj_bias.detach().numpy().any()
    assert not m.out_proj.bias.detach().numpy().any()
    bound = math.sqrt(6 / (24 + 8))  # xavier_uniform_
    assert np.abs(m.in_proj_weight.detach().numpy()).max() <= bound
    x = rng.standard_normal((4, 2, 8))
    out, w = m(T(x), T(x), T(x))
    W, b = m.in_proj_weight.detach().numpy(), m.in_proj_bias.detach().numpy()
    q, k, v = np.split(x @ W.T + b, 3, axis=-1)
    heads = lambda t: t.reshape(4, 2, 2, 4).transpose(1, 2, 0, 3)  # noqa: E731  (N, H, L, hd)
    o, p = np_attention(heads(q), heads(k), heads(v))
    o = o.transpose(2, 0, 1, 3).reshape(4, 2, 8) @ m.out_proj.weight.detach().numpy().T
    np.testing.assert_allclose(out.detach().numpy(), o, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(w.detach().numpy(), p.mean(1), rtol=1e-12, atol=1e-12)
    assert m(T(x), T(x), T(x), need_weights=False)[1] is None
    with pytest.raises(AssertionError, match="embed_dim must be divisible by num_heads"):
        nn.MultiheadAttention(6, 4)


@pytest.mark.parametrize("kw", [{}, {"attn_mask": "bool", "key_padding_mask": True}, {"is_causal": True}])
def test_mha_batch_first_equals_sequence_first(kw, rng):
    """batch_first runs its own path (heads as views of the (N, L, E) projections): same numbers, weights
    and gradients as the (L, N, E) path."""
    jg.manual_seed(0)
    a, b = nn.MultiheadAttention(8, 2, batch_first=True).double(), nn.MultiheadAttention(8, 2).double()
    b.load_state_dict(a.state_dict())
    x = rng.standard_normal((2, 5, 8))
    call = {"need_weights": not kw.get("is_causal"), "is_causal": kw.get("is_causal", False)}
    if kw.get("attn_mask") or kw.get("is_causal"):
        call["attn_mask"] = T(np.triu(np.ones((5, 5), bool), 1))
    if kw.get("key_padding_mask"):
        call["key_padding_mask"] = T(np.array([[False] * 4 + [True], [False] * 5]))
    xa, xb = T(x, True), T(x.transpose(1, 0, 2).copy(), True)
    oa, wa = a(xa, xa, xa, **call)
    ob, wb = b(xb, xb, xb, **call)
    np.testing.assert_allclose(oa.detach().numpy(), ob.detach().numpy().transpose(1, 0, 2), rtol=1e-12, atol=1e-12)
    if wa is not None:
        np.testing.assert_allclose(wa.detach().numpy(), wb.detach().numpy(), rtol=1e-12, atol=1e-12)
    (oa * oa).sum().backward()
    (ob * ob).sum().backward()
    np.testing.assert_allclose(xa.grad.numpy(), xb.grad.numpy().transpose(1, 0, 2), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(a.in_proj_weight.grad.numpy(), b.in_proj_weight.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_mha_gradcheck_with_masks(rng):
    jg.manual_seed(0)
    m = nn.MultiheadAttention(4, 2, kdim=3, vdim=2, add_bias_kv=True).double()
    q, k, v = T(rng.standard_normal((3, 2, 4)), True), T(rng.standard_normal((5, 2, 3)), True), \
        T(rng.standard_normal((5, 2, 2)), True)
    kpm = T(np.array([[False] * 4 + [True], [False] * 5]))
    mask = T(rng.standard_normal((3, 5)))
    assert gradcheck(lambda q, k, v: m(q, k, v, key_padding_mask=kpm, attn_mask=mask)[0], [q, k, v])


def test_transformer_blocks_shapes_mask_and_errors(rng):
    mask = nn.Transformer.generate_square_subsequent_mask(3)
    assert mask.tolist() == [[0.0, -math.inf, -math.inf], [0.0, 0.0, -math.inf], [0.0, 0.0, 0.0]]
    assert mask.dtype is jg.float32
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
    enc = nn.TransformerEncoder(layer, 2)
    x = jg.randn(2, 5, 8)
    out = enc(x, mask=nn.Transformer.generate_square_subsequent_mask(5))
    assert out.shape == (2, 5, 8)
    np.testing.assert_allclose(out.detach().numpy(), enc(x, is_causal=True,
                                                        mask=nn.Transformer.generate_square_subsequent_mask(5))
                               .detach().numpy(), rtol=1e-5, atol=1e-6)
    # causality: the first position does not see the others
    y = x.detach().clone()
    y[:, 1:] = jg.randn(2, 4, 8)
    out2 = enc(y, mask=nn.Transformer.generate_square_subsequent_mask(5))
    np.testing.assert_allclose(out2[:, 0].detach().numpy(), out[:, 0].detach().numpy(), rtol=1e-5, atol=1e-6)
    with pytest.raises(RuntimeError, match="activation should be relu/gelu, not tanh"):
        nn.TransformerEncoderLayer(8, 2, activation="tanh")
    dec = nn.TransformerDecoder(nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0), 2, norm=nn.LayerNorm(8))
    assert dec(jg.randn(4, 2, 8), jg.randn(5, 2, 8)).shape == (4, 2, 8)
    assert len(enc.layers) == 2 and enc.layers[0] is not enc.layers[1]


def test_encoder_layer_gradcheck(rng):
    jg.manual_seed(0)
    layer = nn.TransformerEncoderLayer(4, 2, 6, dropout=0.0, norm_first=True, activation="gelu").double()
    x = T(rng.standard_normal((3, 2, 4)), True)
    assert gradcheck(lambda x: layer(x, is_causal=True, src_mask=nn.Transformer.generate_square_subsequent_mask(3)
                                     .double()), [x])


# ---------------------------------------------------------------------- side by side with PyTorch
def _copy(tm, jm):
    tn, jn = dict(tm.named_parameters()), dict(jm.named_parameters())
    assert list(tn) == list(jn)
    for n, p in tn.items():
        jn[n].data = jg.tensor(p.detach().numpy().copy())


def _close(a, b):
    if a is None:
        assert b is None or not b.detach().numpy().any()
        return
    np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=1e-9, atol=1e-10)


def _compare(tm, jm, targs, jargs, tkw, jkw, pick=lambda o: o):
    import torch
    _copy(tm, jm)
    tm.eval()
    jm.eval()
    to, jo = pick(tm(*targs, **tkw)), pick(jm(*jargs, **jkw))
    _close(to, jo)
    weights = np.arange(to.numel()).reshape(tuple(to.shape)) % 7 * 1.0
    (to * torch.tensor(weights)).sum().backward()
    (jo * jg.tensor(weights)).sum().backward()
    for a, b in zip(targs, jargs):
        _close(a.grad, b.grad)
    for (n, p), (_, q) in zip(tm.named_parameters(), jm.named_parameters()):
        _close(p.grad, q.grad)
    assert repr(jm).replace("jitgrad", "torch") == repr(tm) or "ModuleList" in repr(tm)


def _pair(rng, *shape):
    import torch
    x = rng.standard_normal(shape)
    return torch.tensor(x, requires_grad=True), jg.tensor(x, requires_grad=True)


@needs_torch
@pytest.mark.parametrize("kw", [{}, {"is_causal": True}, {"scale": 0.3}, {"mask": True}])
def test_sdpa_matches_pytorch(kw, rng):
    import torch
    kw = dict(kw)
    (tq, jq), (tk, jk), (tv, jv) = _pair(rng, 2, 3, 4, 5), _pair(rng, 2, 3, 6, 5), _pair(rng, 2, 3, 6, 2)
    if kw.pop("mask", False):
        m = rng.random((4, 6)) > 0.3
        tkw, jkw = dict(kw, attn_mask=torch.tensor(m)), dict(kw, attn_mask=jg.tensor(m))
    else:
        tkw = jkw = kw
    to = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, **tkw)
    jo = F.scaled_dot_product_attention(jq, jk, jv, **jkw)
    _close(to, jo)
    to.sum().backward()
    jo.sum().backward()
    for a, b in ((tq, jq), (tk, jk), (tv, jv)):
        _close(a.grad, b.grad)


@needs_torch
@pytest.mark.parametrize("kw", [{}, {"batch_first": True}, {"add_bias_kv": True, "add_zero_attn": True},
                                {"kdim": 3, "vdim": 5, "bias": False}])
@pytest.mark.parametrize("call,output", [(c, o) for c in ("plain", "attn_mask", "key_padding_mask") for o in (0, 1)]
                         + [("no_weights", 0)])  # (need_weights=False returns no weights)
def test_mha_matches_pytorch(kw, call, output, rng):
    import torch
    tm, jm = torch.nn.MultiheadAttention(8, 2, **kw).double(), nn.MultiheadAttention(8, 2, **kw).double()
    shape = (lambda L, N, E: (N, L, E)) if kw.get("batch_first") else (lambda L, N, E: (L, N, E))
    (tq, jq), (tk, jk), (tv, jv) = (_pair(rng, *shape(4, 2, 8)), _pair(rng, *shape(6, 2, kw.get("kdim", 8))),
                                    _pair(rng, *shape(6, 2, kw.get("vdim", 8))))
    extra = {"plain": {}, "attn_mask": {"attn_mask": rng.standard_normal((4, 6))},
             "key_padding_mask": {"key_padding_mask": np.array([[False] * 5 + [True], [False] * 6]),
                                  "average_attn_weights": False},
             "no_weights": {"need_weights": False, "attn_mask": rng.random((4, 6)) > 0.7}}[call]
    tkw = {k: torch.tensor(v) if isinstance(v, np.ndarray) else v for k, v in extra.items()}
    jkw = {k: jg.tensor(v) if isinstance(v, np.ndarray) else v for k, v in extra.items()}
    _compare(tm, jm, (tq, tk, tv), (jq, jk, jv), tkw, jkw, pick=lambda o: o[output])


@needs_torch
@pytest.mark.parametrize("kw", [{}, {"norm_first": True, "activation": "gelu", "batch_first": True},
                                {"bias": False}])
@pytest.mark.parametrize("masking", ["causal", "padding"])
def test_transformer_encoder_matches_pytorch(kw, masking, rng):
    import torch
    tm = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, **kw), 2,
                                     norm=torch.nn.LayerNorm(8), enable_nested_tensor=False).double()
    jm = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, **kw), 2,
                               norm=nn.LayerNorm(8)).double()
    tx, jx = _pair(rng, *((3, 5, 8) if kw.get("batch_first") else (5, 3, 8)))
    if masking == "causal":
        tkw = {"mask": torch.nn.Transformer.generate_square_subsequent_mask(5).double()}
        jkw = {"mask": nn.Transformer.generate_square_subsequent_mask(5).double()}
    else:
        kpm = np.array([[False] * 5, [False] * 4 + [True], [False] * 3 + [True] * 2])
        tkw, jkw = {"src_key_padding_mask": torch.tensor(kpm)}, {"src_key_padding_mask": jg.tensor(kpm)}
    _compare(tm, jm, (tx,), (jx,), tkw, jkw)


@needs_torch
def test_transformer_matches_pytorch(rng):
    import torch
    torch.manual_seed(0)
    tm = torch.nn.Transformer(8, 2, 2, 2, 16, dropout=0.0).double()
    jm = nn.Transformer(8, 2, 2, 2, 16, dropout=0.0).double()
    (ts, js), (tt, jt) = _pair(rng, 5, 2, 8), _pair(rng, 4, 2, 8)
    _compare(tm, jm, (ts, tt), (js, jt),
             {"tgt_mask": torch.nn.Transformer.generate_square_subsequent_mask(4).double()},
             {"tgt_mask": nn.Transformer.generate_square_subsequent_mask(4).double()})
