"""vmap over every op-table entry's samples against a Python loop over the batch, for several in_dims and
out_dims (a deterministic sample of the entries by default, all of them under ``-m slow``), and the list of
entries without a batching rule."""
import warnings

import numpy as np
import pytest

import jitgrad as jg
from jitgrad.func.batching import RULES, missing, random as random_rule
from jitgrad.ops import OPS

from helpers import build, call_of, outputs, samples_of

B = 3
# entries vmap runs one sample at a time, each for a reason: bincount reads its input's values before dispatch
# (PyTorch's vmap loops over it too); the RNN layers' packed time loop (batch sizes per step) and
# nll_loss_backward (only met by double backward of nll_loss) are correct by the loop, left for later
WITHOUT_RULE = ["bincount", "gru_layer", "lstm_layer", "nll_loss_backward", "rnn_relu_layer", "rnn_tanh_layer"]


def test_the_entries_without_a_batching_rule():
    assert missing() == WITHOUT_RULE


# entries whose outputs' shapes depend on each sample's values: vmap refuses them, as PyTorch's does
REFUSED = sorted(n for n, r in RULES.items() if r.__qualname__.startswith("dynamic_shape."))
ENTRIES = sorted(n for n, op in OPS.items() if op.tests.samples and RULES.get(n) is not random_rule and n not in REFUSED)


@pytest.mark.parametrize("name", REFUSED)
def test_value_shaped_entries_are_refused(name):
    op = OPS[name]
    (x, *rest), kwargs = _samples(op)[0]
    rest = [jg.tensor(r) if isinstance(r, np.ndarray) else r for r in rest]
    with pytest.raises(RuntimeError, match="dynamic shape"):
        jg.vmap(lambda t: call_of(op)(t, *rest, **kwargs))(jg.tensor(np.stack([x, x])))
SAMPLE = ENTRIES[::5]


def _samples(op):
    for dtype in (np.float64, np.int64, np.bool_, np.complex128):  # (complex: the entries of complex inputs only)
        s = samples_of(op, dtype)
        if s:
            return s
    return []


def _variants(n_float, ndims):
    """(in_dims per float array, where its batch dim goes, out_dims): all batched at 0; the first at its
    last dim; the last alone."""
    out = [([0] * n_float, 0)]
    if n_float:
        out.append(([ndims[0]] + [None] * (n_float - 1), -1))
    if n_float > 1:
        out.append(([None] * (n_float - 1) + [0], 0))
    return out


def _check_entry(name):
    op = OPS[name]
    call = call_of(op)
    rng = np.random.default_rng(len(name))
    checked = 0
    for args, kwargs in _samples(op):
        floats = []  # the arrays batched: the floating ones (all of them where there are none)
        build(args, kwargs, lambda a: floats.append(a) or a if a.dtype.kind in "fc" else a)
        kinds = "fc" if floats else "fiub"
        if not floats:
            build(args, kwargs, lambda a: floats.append(a) or a)
        for dims, out_dim in _variants(len(floats), [a.ndim for a in floats]):
            # per float array: the batch of B perturbed copies, stacked at its in_dim
            batches = [None if d is None else np.stack([a + 0.05 * k * rng.standard_normal(a.shape) if kinds == "fc"
                                                        else a for k in range(B)], axis=d) for a, d in zip(floats, dims)]

            def sample_args(k):
                it = iter(range(len(floats)))

                def leaf(a):
                    if a.dtype.kind not in kinds:
                        return jg.tensor(a)
                    i = next(it)
                    return jg.tensor(floats[i] if dims[i] is None else np.take(batches[i], k, axis=dims[i]))
                return build(args, kwargs, leaf)
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    want = [outputs(call(*a, **kw)) for a, kw in (sample_args(k) for k in range(B))]
            except Exception:  # noqa: BLE001  (a sample that raises in eager)
                continue
            flat_in = [jg.tensor(b if d is not None else f) for b, f, d in zip(batches, floats, dims)]

            def f(*ts):
                it = iter(ts)
                a, kw = build(args, kwargs, lambda x: next(it) if x.dtype.kind in kinds else jg.tensor(x))
                return tuple(outputs(call(*a, **kw)))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                got = jg.vmap(f, in_dims=tuple(dims), out_dims=out_dim)(*flat_in)
            for k, g in enumerate(got):
                ref = np.stack([w[k].detach().numpy() for w in want], axis=out_dim)
                assert g.dtype == want[0][k].dtype, (name, k)
                np.testing.assert_allclose(g.detach().numpy(), ref, rtol=1e-10, atol=1e-12, err_msg=name)
            checked += 1
    assert checked, "no sample of %s was checked" % name


@pytest.mark.parametrize("name", SAMPLE)
def test_entry_vmap_matches_a_loop(name):
    _check_entry(name)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(set(ENTRIES) - set(SAMPLE)))
def test_entry_vmap_matches_a_loop_all(name):
    _check_entry(name)
