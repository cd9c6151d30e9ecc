"""Losses, as modules and functions, against NumPy references written here (every reduction),
gradcheck in float64, numerical stability, and PyTorch's messages for bad targets."""
import numpy as np
import pytest

import jitgrad as jg
import jitgrad.nn as nn
import jitgrad.nn.functional as F
from jitgrad.autograd import gradcheck

REDUCTIONS = ["none", "mean", "sum"]


def T(a, requires_grad=False):
    a = np.asarray(a)
    return jg.tensor(a, requires_grad=requires_grad and a.dtype.kind == "f")


def reduce(loss, reduction):
    return {"none": loss, "mean": np.mean(loss), "sum": np.sum(loss)}[reduction]


def np_log_softmax(x, axis):
    m = x.max(axis=axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))


def check(loss_fn, ref, inputs, reduction, grad=True):
    out = loss_fn(*[T(a) for a in inputs])
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-10, atol=1e-12)
    if grad:
        diff = [T(a, True) if a.dtype.kind == "f" else T(a) for a in inputs[:1]] + [T(a) for a in inputs[1:]]
        assert gradcheck(loss_fn, diff)


# ---------------------------------------------------------------------- regression
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_mse_l1_smooth_l1_huber(rng, reduction):
    x, y = rng.standard_normal((3, 4)) * 2, rng.standard_normal((3, 4))
    d = x - y
    ad = np.abs(d)
    check(nn.MSELoss(reduction=reduction), reduce(d * d, reduction), (x, y), reduction)
    check(nn.L1Loss(reduction=reduction), reduce(ad, reduction), (x, y), reduction)
    beta = 0.8
    check(nn.SmoothL1Loss(reduction=reduction, beta=beta),
          reduce(np.where(ad < beta, 0.5 * d * d / beta, ad - 0.5 * beta), reduction), (x, y), reduction)
    delta = 1.3
    check(nn.HuberLoss(reduction=reduction, delta=delta),
          reduce(np.where(ad < delta, 0.5 * d * d, delta * (ad - 0.5 * delta)), reduction), (x, y), reduction)


def test_regression_loss_details():
    x, y = jg.tensor([1.0, -2.0]), jg.tensor([0.5, 0.0])
    assert F.smooth_l1_loss(x, y, beta=0.0).item() == F.l1_loss(x, y).item()
    with pytest.warns(UserWarning, match=r"Using a target size \(jitgrad.Size\(\[2\]\)\) that is different to the "
                                         r"input size \(jitgrad.Size\(\[2, 1\]\)\)"):
        F.mse_loss(x.reshape(2, 1), y)
    with pytest.raises(ValueError, match="foo is not a valid value for reduction"):
        F.mse_loss(x, y, reduction="foo")
    with pytest.raises(RuntimeError, match="huber_loss does not support non-positive values for delta."):
        F.huber_loss(x, y, delta=0)
    with pytest.raises(RuntimeError, match="smooth_l1_loss does not support negative values for beta."):
        F.smooth_l1_loss(x, y, beta=-1)
    with pytest.warns(UserWarning, match="size_average and reduce args will be deprecated, please use "
                                         "reduction='sum' instead."):
        assert F.mse_loss(x, y, size_average=False).item() == pytest.approx(0.25 + 4.0)


# ---------------------------------------------------------------------- NLL and cross entropy
def ref_nll(logp, target, weight=None, ignore_index=-100, reduction="mean"):
    C = logp.shape[1]
    w = np.ones(C) if weight is None else weight
    valid = target != ignore_index
    safe = np.where(valid, target, 0)
    picked = np.take_along_axis(logp, safe[:, None], 1)[:, 0]
    wt = w[safe] * valid
    loss = -picked * wt
    if reduction == "mean":
        return loss.sum() / wt.sum()
    return reduce(loss, reduction)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_nll_and_cross_entropy_class_indices(rng, reduction):
    x = rng.standard_normal((5, 4))
    t = np.array([1, 0, 3, -100, 2])
    w = np.array([0.5, 1.0, 2.0, 1.5])
    logp = np_log_softmax(x, 1)
    check(nn.NLLLoss(weight=T(w), reduction=reduction), ref_nll(logp, t, w, reduction=reduction), (logp, t), reduction)
    check(nn.CrossEntropyLoss(reduction=reduction), ref_nll(logp, t, reduction=reduction), (x, t), reduction)
    check(nn.CrossEntropyLoss(weight=T(w), ignore_index=3, reduction=reduction),
          ref_nll(logp, np.where(t == -100, 0, t), w, ignore_index=3, reduction=reduction),
          (x, np.where(t == -100, 0, t)), reduction)


def test_cross_entropy_higher_dims_and_unbatched(rng):
    x = rng.standard_normal((2, 3, 4))  # (N, C, d1)
    t = np.array([[0, 2, 1, 1], [2, 2, 0, 1]])
    logp = np_log_softmax(x, 1)
    flat_logp = logp.transpose(0, 2, 1).reshape(-1, 3)
    check(lambda a, b: F.cross_entropy(a, b), ref_nll(flat_logp, t.reshape(-1)), (x, t), "mean")
    check(lambda a, b: F.cross_entropy(a, b, reduction="none"),
          ref_nll(flat_logp, t.reshape(-1), reduction="none").reshape(2, 4), (x, t), "none")
    v = rng.standard_normal(4)
    check(lambda a, b: F.cross_entropy(a, b), -np_log_softmax(v, 0)[2], (v, np.array(2)), "mean")


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_cross_entropy_label_smoothing(rng, reduction):
    x = rng.standard_normal((4, 5))
    t = np.array([1, -100, 4, 0])
    w = rng.random(5) + 0.5
    eps = 0.2
    logp = np_log_softmax(x, 1)
    valid = t != -100
    smooth = -(logp * w).sum(1) * valid
    nll = ref_nll(logp, t, w, reduction=reduction)
    if reduction == "mean":
        smooth_red = smooth.sum() / (w[np.where(valid, t, 0)] * valid).sum()
    else:
        smooth_red = reduce(smooth, reduction)
    ref = (1 - eps) * nll + eps / 5 * smooth_red
    check(nn.CrossEntropyLoss(weight=T(w), reduction=reduction, label_smoothing=eps), ref, (x, t), reduction)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_cross_entropy_class_probabilities(rng, reduction):
    x = rng.standard_normal((3, 4))
    p = rng.random((3, 4))
    p /= p.sum(1, keepdims=True)
    w = rng.random(4) + 0.5
    eps = 0.1
    q = p * (1 - eps) + eps / 4
    loss = -(np_log_softmax(x, 1) * q * w).sum(1)
    ref = loss.sum() / 3 if reduction == "mean" else reduce(loss, reduction)
    fn = lambda a, b: F.cross_entropy(a, b, weight=T(w), reduction=reduction, label_smoothing=eps)  # noqa: E731
    check(fn, ref, (x, p), reduction)


def test_cross_entropy_is_stable_for_large_logits():
    x = jg.tensor(np.array([[1000.0, 0.0, -1000.0], [-5e4, 5e4, 0.0]], dtype=np.float32), requires_grad=True)
    loss = F.cross_entropy(x, jg.tensor([0, 2]))
    assert np.isfinite(loss.item()) and loss.item() == pytest.approx(5e4 / 2, rel=1e-6)
    loss.backward()
    assert np.isfinite(x.grad.numpy()).all()
    np.testing.assert_allclose(x.grad.numpy(), np.array([[0, 0, 0], [0, 0.5, -0.5]]), atol=1e-6)


def test_classification_errors():
    x = jg.randn(3, 5)
    with pytest.raises(ValueError, match=r"Expected input batch_size \(3\) to match target batch_size \(2\)."):
        F.cross_entropy(x, jg.tensor([1, 2]))
    with pytest.raises(IndexError, match="Target 7 is out of bounds."):
        F.cross_entropy(x, jg.tensor([1, 2, 7]))
    with pytest.raises(IndexError, match="Target -3 is out of bounds."):
        nn.NLLLoss()(x, jg.tensor([1, 2, -3]))
    with pytest.raises(RuntimeError, match="expected target dtype to be Long or Byte, but got Float"):
        F.cross_entropy(x, jg.tensor([1.0, 2.0, 3.0]))
    with pytest.raises(RuntimeError, match="expected target dtype to be Long or Byte, but got Int"):
        F.nll_loss(x, jg.tensor([1, 2, 3], dtype=jg.int32))
    with pytest.raises(RuntimeError, match="0D or 1D target tensor expected, multi-target not supported"):
        F.cross_entropy(x, jg.randn(3, 4))
    with pytest.raises(RuntimeError, match=r"weight tensor should be defined either for all 5 classes or no classes "
                                           r"but got weight tensor of shape: \[4\]"):
        F.cross_entropy(x, jg.tensor([1, 2, 3]), weight=jg.ones(4))
    with pytest.raises(RuntimeError, match="label_smoothing must be between 0.0 and 1.0. Got: 1.5"):
        F.cross_entropy(x, jg.tensor([1, 2, 3]), label_smoothing=1.5)
    with pytest.raises(RuntimeError, match=r"Expected target size \[3, 2\], got \[3\]"):
        F.nll_loss(jg.randn(3, 5, 2), jg.tensor([1, 2, 3]))
    assert np.isnan(F.cross_entropy(x, jg.tensor([-100, -100, -100])).item())  # 0 / 0, as in PyTorch


# ---------------------------------------------------------------------- binary cross entropy
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_bce_and_bce_with_logits(rng, reduction):
    p = rng.uniform(0.05, 0.95, (3, 4))
    t = rng.random((3, 4))
    w = rng.random(4) + 0.5
    ref = -w * (t * np.log(p) + (1 - t) * np.log(1 - p))
    check(nn.BCELoss(weight=T(w), reduction=reduction), reduce(ref, reduction), (p, t), reduction)
    z = rng.standard_normal((3, 4)) * 3
    pw = rng.random(4) + 0.5
    s = 1 / (1 + np.exp(-z))
    ref = -w * (pw * t * np.log(s) + (1 - t) * np.log(1 - s))
    check(nn.BCEWithLogitsLoss(weight=T(w), pos_weight=T(pw), reduction=reduction), reduce(ref, reduction), (z, t),
          reduction)
    assert "pos_weight" in nn.BCEWithLogitsLoss(pos_weight=T(pw)).state_dict()


def test_bce_saturation_and_stability():
    # probabilities of exactly 0 and 1: the logs clamp at -100 and the gradient stays finite
    p = jg.tensor(np.array([0.0, 1.0, 0.5]), requires_grad=True)
    t = jg.tensor(np.array([1.0, 0.0, 1.0]))
    loss = F.binary_cross_entropy(p, t, reduction="sum")
    assert loss.item() == pytest.approx(200 + np.log(2))
    loss.backward()
    assert np.isfinite(p.grad.numpy()).all() and p.grad.numpy()[2] == pytest.approx(-2.0)
    z = jg.tensor(np.array([-200.0, 200.0, 0.0]), requires_grad=True)
    lz = F.binary_cross_entropy_with_logits(z, t, reduction="none")
    np.testing.assert_allclose(lz.detach().numpy(), [200.0, 200.0, np.log(2)], rtol=1e-12)
    lz.sum().backward()
    np.testing.assert_allclose(z.grad.numpy(), [-1.0, 1.0, -0.5], rtol=1e-12)
    with pytest.raises(NotImplementedError, match="\"binary_cross_entropy\" not implemented for 'Long'"):
        F.binary_cross_entropy(jg.tensor([1]), jg.tensor([1]))
    with pytest.raises(RuntimeError, match="all elements of input should be between 0 and 1"):
        F.binary_cross_entropy(jg.tensor([1.5]), jg.tensor([1.0]))
    with pytest.raises(ValueError, match=r"Target size \(jitgrad.Size\(\[4\]\)\) must be the same as input size "
                                         r"\(jitgrad.Size\(\[3\]\)\)"):
        F.binary_cross_entropy_with_logits(jg.randn(3), jg.rand(4))
    with pytest.raises(ValueError, match="is deprecated. Please ensure they have the same size."):
        F.binary_cross_entropy(jg.rand(3), jg.rand(4))


# ---------------------------------------------------------------------- KL divergence
@pytest.mark.parametrize("reduction", REDUCTIONS + ["batchmean"])
def test_kl_div(rng, reduction):
    logq = np_log_softmax(rng.standard_normal((3, 4)), 1)
    p = rng.random((3, 4)) * (rng.random((3, 4)) > 0.3)  # some zero targets: 0 * log 0 = 0
    pointwise = np.where(p > 0, p * np.log(np.where(p > 0, p, 1)), 0) - p * logq
    ref = pointwise.sum() / 3 if reduction == "batchmean" else reduce(pointwise, reduction)
    with pytest.warns(UserWarning, match="divides the total loss by both the batch size") if reduction == "mean" \
            else _no_warning():
        check(nn.KLDivLoss(reduction=reduction), ref, (logq, p), reduction, grad=reduction != "mean")
    logp = np.log(p + 0.1)
    ref_log = np.exp(logp) * (logp - logq)
    out = F.kl_div(T(logq), T(logp), reduction="none", log_target=True)
    np.testing.assert_allclose(out.numpy(), ref_log, rtol=1e-10)
    assert gradcheck(lambda a, b: F.kl_div(a, b, reduction="sum", log_target=True), (T(logq, True), T(logp, True)))


class _no_warning:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_loss_module_reprs_and_state():
    assert repr(nn.MSELoss()) == "MSELoss()" and repr(nn.KLDivLoss()) == "KLDivLoss()"
    assert list(nn.CrossEntropyLoss(weight=jg.ones(3)).state_dict()) == ["weight"]
    assert list(nn.CrossEntropyLoss().state_dict()) == []
    assert nn.NLLLoss(reduction="sum").reduction == "sum"
