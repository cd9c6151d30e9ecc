"""Batching rules added for diag and masked_select, PyTorch's vmap errors for ops whose output shape depends on
each sample's values, and ``randomness`` for the random factories (rand, randn, their _like forms) and dropout,
which draw through the table's fill entries inside vmap."""
import warnings

import numpy as np
import pytest

import jitgrad as jg
from jitgrad import func as F

RNG = np.random.default_rng(7)


def T(a):
    return jg.tensor(np.asarray(a, dtype=np.float64))


@pytest.mark.parametrize("shape,k", [((4, 3), 0), ((4, 3), 1), ((4, 2), -2), ((4, 3, 5), 0), ((4, 3, 5), -1),
                                     ((4, 3, 3), 2)])
def test_diag_runs_batched_and_matches_a_loop(shape, k):
    x = RNG.standard_normal(shape)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (no per-sample loop: that warns)
        got = jg.vmap(lambda a: jg.diag(a, k))(T(x))
    np.testing.assert_array_equal(got.numpy(), np.stack([np.diag(s, k) for s in x]))


def test_per_sample_gradients_through_diag_and_masked_select():
    x = RNG.standard_normal((4, 3))
    g = F.vmap(F.grad(lambda a: (jg.diag(a, 1) ** 2).sum()))(T(x))
    np.testing.assert_allclose(g.numpy(), 2 * x, rtol=1e-14)
    m = np.array([True, False, True])
    g = F.vmap(F.grad(lambda a: (jg.masked_select(a, jg.tensor(m)) ** 3).sum()))(T(x))
    np.testing.assert_allclose(g.numpy(), 3 * x ** 2 * m, rtol=1e-14)


def test_masked_select_with_one_mask_for_the_batch():
    x, m = RNG.standard_normal((4, 3, 2)), RNG.standard_normal((3, 2)) > 0
    got = jg.vmap(lambda a: jg.masked_select(a, jg.tensor(m)))(T(x))
    np.testing.assert_array_equal(got.numpy(), np.stack([s[m] for s in x]))


def test_value_shaped_ops_raise_pytorch_s_vmap_errors():
    x = T(RNG.standard_normal((4, 3)))
    with pytest.raises(RuntimeError, match=r"^vmap: Attempted to vmap over `mask` in torch.masked_select\(self, mask\) "
                                           r"We cannot support this because for each batch this would return a "
                                           r"differently shaped Tensor."):
        jg.vmap(lambda a: jg.masked_select(a, a > 0))(x)
    with pytest.raises(RuntimeError, match=r"^vmap: We do not support batching operators that can output dynamic "
                                           r"shape. Attempted to vmap over aten::_unique2."):
        jg.vmap(jg.unique)(x)


@pytest.mark.parametrize("draw", [lambda a: a + jg.randn(3, dtype=jg.float64), lambda a: a + jg.rand(3, dtype=jg.float64),
                                  lambda a: jg.randn_like(a), lambda a: jg.rand_like(a),
                                  lambda a: jg.nn.functional.dropout(a, 0.5)],
                         ids=["randn", "rand", "randn_like", "rand_like", "dropout"])
def test_randomness_applies_to_factories_and_dropout(draw):
    x = T(np.ones((6, 3)))
    with pytest.raises(RuntimeError, match="^vmap: called random operation while in randomness error mode"):
        jg.vmap(draw)(x)
    same = jg.vmap(draw, randomness="same")(x).numpy()
    assert np.all(same == same[0])
    jg.manual_seed(0)
    different = jg.vmap(draw, randomness="different")(x).numpy()
    assert not np.all(different == different[0])
    jg.manual_seed(0)
    np.testing.assert_array_equal(jg.vmap(draw, randomness="different")(x).numpy(), different)  # (seeded)


def test_dropout_keeps_its_scale_under_vmap():
    x = T(np.ones((200, 50)))
    out = jg.vmap(lambda a: jg.nn.functional.dropout(a, 0.25), randomness="different")(x).numpy()
    assert set(np.unique(out)) <= {0.0, 1 / 0.75}
    assert abs((out == 0).mean() - 0.25) < 0.02


@pytest.mark.parametrize("mode", ["LSTM", "GRU", "RNN_TANH"])
def test_recurrent_layers_run_batched_and_match_a_loop(mode):
    """vmap over sequences through nn.LSTM / GRU / RNN: the batch joins each step's rows (one layer call, no loop's
    warning), outputs and input gradients equal a loop over the samples; packed sequences of several lengths."""
    jg.manual_seed(0)
    layer = {"LSTM": jg.nn.LSTM, "GRU": jg.nn.GRU, "RNN_TANH": jg.nn.RNN}[mode](3, 4, num_layers=2,
                                                                            dtype=jg.float64)
    x = T(RNG.standard_normal((5, 6, 2, 3)))  # 5 samples of (time 6, batch 2, features 3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = jg.vmap(lambda s: layer(s)[0])(x)
    np.testing.assert_allclose(got.detach().numpy(), np.stack([layer(s)[0].detach().numpy() for s in x]),
                               rtol=1e-12, atol=1e-12)

    def last(a, b):  # packed sequences of lengths 4 and 2 in every sample
        packed = jg.nn.utils.rnn.pack_sequence([a, b])
        return (layer(packed)[0].data ** 2).sum()
    a, b = T(RNG.standard_normal((5, 4, 3))), T(RNG.standard_normal((5, 2, 3)))
    ga = jg.vmap(jg.func.grad(last))(a, b)
    ref = [jg.func.grad(last)(a[i], b[i]) for i in range(5)]
    np.testing.assert_allclose(ga.numpy(), np.stack([r.numpy() for r in ref]), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("shape", [(5, 3), (3,)])
def test_nll_loss_backward_runs_batched_and_matches_a_loop(reduction, weighted, shape):
    """nll_loss's gradient entry (met under vmap by double backward of nll_loss): every sample's rows in one call,
    ignored targets included (a sample with every target ignored: 'mean' divides by zero as each sample does)."""
    from jitgrad.ops.loss import nll_loss_backward
    tshape = shape[:-1]
    t = jg.tensor(RNG.integers(0, 3, (4,) + tshape))
    if tshape:
        t[1] = -100
        t[2, 0] = -100
    w = T(RNG.uniform(0.5, 2.0, 3)) if weighted else None
    g = T(RNG.standard_normal((4,) + (tshape if reduction == "none" else ())))

    def f(g, t):
        return nll_loss_backward(g, t, shape, w, -100, reduction)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = jg.vmap(f)(g, t)
    np.testing.assert_allclose(got.numpy(), np.stack([f(g[i], t[i]).numpy() for i in range(4)]), rtol=1e-12,
                               atol=1e-12, equal_nan=True)
