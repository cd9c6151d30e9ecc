"""jitgrad.compile against eager with inputs that change between calls.

Each compiled function is called several times with new values of every input (floats, integer
targets, boolean masks, index tensors) and once with a new batch size, and compared with the same
function run eagerly on the same inputs: values, gradients, parameters after training steps, and
the flags and identity of what it returns. Hypothesis draws the programs; the default run takes a
fixed sample, ``-m slow`` many more.
"""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import jitgrad as jg
import jitgrad.nn.functional as F
from jitgrad import nn
from jitgrad.compiler import explain

C = 4  # classes / features

SAMPLE = settings(max_examples=12, deadline=None, derandomize=True, database=None,
                  suppress_health_check=list(HealthCheck))
FULL = settings(max_examples=150, deadline=None, derandomize=True, database=None,
                suppress_health_check=list(HealthCheck))


def _inputs(rng, batch, dtype):
    """New values of every kind of input: features, class targets, a row mask, an element mask, indices."""
    return {"x": rng.standard_normal((batch, C)).astype(dtype),
            "y": rng.integers(0, C, batch),
            "m": rng.random(batch) < 0.5,
            "m2": rng.random((batch, C)) < 0.5,
            "i": rng.integers(0, batch, 3)}


# ------------------------------------------------------------------ the programs' parts
# a feature map of x (w: a (C, C) parameter the function closes over)
FEATURES = {
    "tanh": lambda x, w: x.tanh(),
    "linear": lambda x, w: x @ w,
    "relu_mul": lambda x, w: (x * 2 - 0.5).relu() + x,
    "softmax": lambda x, w: F.softmax(x @ w, dim=1),
    "exp_div": lambda x, w: x.exp() / (1 + x * x),
}

# a loss that reads the value-dependent inputs (y, m, m2, i)
LOSSES = {
    "cross_entropy": lambda h, d: F.cross_entropy(h, d["y"]),
    "cross_entropy_sum": lambda h, d: F.cross_entropy(h, d["y"], reduction="sum"),
    "cross_entropy_ignore": lambda h, d: F.cross_entropy(h, d["y"], ignore_index=1),
    "cross_entropy_weighted": lambda h, d: F.cross_entropy(h, d["y"], weight=jg.tensor([1.0, 2.0, 0.5, 3.0],
                                                                                        dtype=h.dtype)),
    "cross_entropy_smooth": lambda h, d: F.cross_entropy(h, d["y"], label_smoothing=0.2, ignore_index=2),
    "nll": lambda h, d: F.nll_loss(F.log_softmax(h, 1), d["y"]),
    "nll_none": lambda h, d: (F.nll_loss(F.log_softmax(h, 1), d["y"], reduction="none") * h[:, 0]).sum(),
    "mask_rows": lambda h, d: (h[d["m"]] ** 2).sum(),
    "mask_elements": lambda h, d: h[d["m2"]].sum() * 0.5,
    "masked_fill": lambda h, d: h.masked_fill(d["m2"], 0.0).pow(2).mean(),
    "where": lambda h, d: jg.where(d["m2"], h, -h).sum(),
    "index_rows": lambda h, d: (h[d["i"]] * 3).sum(),
    "index_select": lambda h, d: h.index_select(0, d["i"]).tanh().sum(),
    "gather": lambda h, d: h.gather(1, d["y"].unsqueeze(1)).sum(),
    "one_hot_mse": lambda h, d: F.mse_loss(h, F.one_hot(d["y"], C).to(h.dtype)),
    "mask_mul": lambda h, d: (h * d["m"].unsqueeze(1)).sum(),
}

# what the function returns beside its loss (identity and flags are compared)
EXTRAS = {
    "none": lambda x, h: (),
    "detach_input": lambda x, h: (x.detach(),),
    "detach_result": lambda x, h: (h.detach(),),
    "input": lambda x, h: (x,),
    "view": lambda x, h: (h.view(-1),),
    "result_and_detached": lambda x, h: (h, h.detach()),
}


def _program(feature, loss, extra):
    f, lo, ex = FEATURES[feature], LOSSES[loss], EXTRAS[extra]

    def program(x, w, y, m, m2, i):
        h = f(x, w)
        return (lo(h, {"y": y, "m": m, "m2": m2, "i": i}),) + ex(x, h)
    return program


def _tensors(d, w):
    x = jg.tensor(d["x"], requires_grad=True)
    return x, [x, w, jg.tensor(d["y"]), jg.tensor(d["m"]), jg.tensor(d["m2"]), jg.tensor(d["i"])]


def _flags(t):
    return (tuple(t.shape), t.dtype, t.requires_grad, t.is_leaf, t.grad_fn is None)


def _check_same(fn, cf, d, w, tol):
    """Run ``fn`` eagerly and compiled on fresh tensors of ``d``; compare results, flags, identity, gradients."""
    outs = []
    for f in (fn, cf):
        w.grad = None
        x, args = _tensors(d, w)
        res = f(*args)
        res[0].backward()
        outs.append((x, args, res, None if x.grad is None else x.grad.numpy().copy(),
                     None if w.grad is None else w.grad.numpy().copy()))
    (xe, ae, re, gxe, gwe), (xc, ac, rc, gxc, gwc) = outs
    assert len(re) == len(rc)
    for k, (a, b) in enumerate(zip(re, rc)):
        assert _flags(a) == _flags(b), (k, _flags(a), _flags(b))
        np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), **tol)
        # identity: an input returned as it is, or one tensor returned twice, as eager
        for j, inp in enumerate(ae):
            assert (a is inp) == (b is ac[j])
        for j in range(k):
            assert (re[j] is a) == (rc[j] is b)
        assert (a._version == 0) == (b._version == 0)
    for ge, gc in ((gxe, gxc), (gwe, gwc)):
        assert (ge is None) == (gc is None)
        if ge is not None:
            np.testing.assert_allclose(gc, ge, **tol)


def _differential(feature, loss, extra, dtype, seed):
    rng = np.random.default_rng(seed)
    tol = {"rtol": 1e-9, "atol": 1e-11} if dtype == np.float64 else {"rtol": 2e-5, "atol": 2e-6}
    w = jg.tensor(rng.standard_normal((C, C)).astype(dtype) * 0.5, requires_grad=True)
    fn = _program(feature, loss, extra)
    cf = jg.compile(fn)
    for batch in (6, 6, 6, 9):  # new values at each call, then a new batch size
        _check_same(fn, cf, _inputs(rng, batch, dtype), w, tol)


# what hypothesis draws: a program, or a training step
PROGRAMS = dict(feature=st.sampled_from(sorted(FEATURES)), loss=st.sampled_from(sorted(LOSSES)),
                extra=st.sampled_from(sorted(EXTRAS)), dtype=st.sampled_from([np.float32, np.float64]),
                seed=st.integers(0, 2 ** 16))


@SAMPLE
@given(**PROGRAMS)
def test_compiled_programs_match_eager_with_new_inputs(feature, loss, extra, dtype, seed):
    _differential(feature, loss, extra, dtype, seed)


@pytest.mark.parametrize("loss", sorted(LOSSES))
def test_every_loss_reads_the_call_s_inputs(loss):
    """Each value-dependent input kind once, deterministically (the sample above draws among them)."""
    _differential("linear", loss, "none", np.float64, 7)


@pytest.mark.slow
@FULL
@given(**PROGRAMS)
def test_compiled_programs_match_eager_with_new_inputs_full(feature, loss, extra, dtype, seed):
    _differential(feature, loss, extra, dtype, seed)


# ------------------------------------------------------------------ training steps
OPTIMIZERS = {"sgd": lambda p: jg.optim.SGD(p, lr=0.1, momentum=0.9),
              "adam": lambda p: jg.optim.Adam(p, lr=0.01),
              "adamw": lambda p: jg.optim.AdamW(p, lr=0.01, weight_decay=0.1)}


def _model(dtype, seed):
    jg.manual_seed(seed)
    return nn.Sequential(nn.Linear(C, 8), nn.ReLU(), nn.Linear(8, C)).to(jg.float64 if dtype == np.float64 else jg.float32)


def _step_fn(model, opt, loss, form):
    lo = LOSSES[loss]

    def step(x, y, m, m2, i):
        opt.zero_grad()
        out = lo(model(x), {"y": y, "m": m, "m2": m2, "i": i})
        out.backward()
        opt.step()
        return out.item() if form == "item" else out if form == "loss" else None
    return step


def _training(loss, optimizer, form, dtype, seed):
    rng = np.random.default_rng(seed)
    tol = {"rtol": 1e-9, "atol": 1e-11} if dtype == np.float64 else {"rtol": 1e-4, "atol": 1e-5}
    eager_model, comp_model = _model(dtype, seed), _model(dtype, seed)
    eager_step = _step_fn(eager_model, OPTIMIZERS[optimizer](eager_model.parameters()), loss, form)
    comp_step = jg.compile(_step_fn(comp_model, OPTIMIZERS[optimizer](comp_model.parameters()), loss, form))
    for batch in (8, 8, 8, 8, 5):
        d = _inputs(rng, batch, dtype)
        args = lambda: (jg.tensor(d["x"]), jg.tensor(d["y"]), jg.tensor(d["m"]), jg.tensor(d["m2"]),  # noqa: E731
                        jg.tensor(d["i"]))
        le, lc = eager_step(*args()), comp_step(*args())
        if form == "loss":
            np.testing.assert_allclose(lc.detach().numpy(), le.detach().numpy(), **tol)
        elif form == "item":
            np.testing.assert_allclose(lc, le, **tol)
        for (name, pe), pc in zip(eager_model.named_parameters(), comp_model.parameters()):
            np.testing.assert_allclose(pc.detach().numpy(), pe.detach().numpy(), err_msg=name, **tol)


STEP_LOSSES = ["cross_entropy", "cross_entropy_ignore", "cross_entropy_smooth", "nll", "mask_rows", "index_rows",
               "gather", "masked_fill"]
STEPS = dict(loss=st.sampled_from(STEP_LOSSES), optimizer=st.sampled_from(sorted(OPTIMIZERS)),
             form=st.sampled_from(["loss", "item", "none"]), dtype=st.sampled_from([np.float32, np.float64]),
             seed=st.integers(0, 2 ** 16))


@SAMPLE
@given(**STEPS)
def test_compiled_training_steps_match_eager_with_new_batches(loss, optimizer, form, dtype, seed):
    _training(loss, optimizer, form, dtype, seed)


@pytest.mark.parametrize("optimizer", sorted(OPTIMIZERS))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_compiled_classifier_step_trains_on_each_batch_s_labels(optimizer, dtype):
    _training("cross_entropy", optimizer, "loss", dtype, 3)


@pytest.mark.slow
@FULL
@given(**STEPS)
def test_compiled_training_steps_match_eager_with_new_batches_full(loss, optimizer, form, dtype, seed):
    _training(loss, optimizer, form, dtype, seed)


# ------------------------------------------------------------------ the three causes, each in a few lines
def test_cross_entropy_backward_reads_each_call_s_targets():
    f = jg.compile(lambda x, y: F.cross_entropy(x, y))
    x = jg.tensor(np.random.default_rng(0).standard_normal((4, 3)), requires_grad=True)
    for y in ([0, 1, 2, 0], [2, 2, 1, 0], [1, 0, 0, 2]):
        y = jg.tensor(y)
        x.grad = None
        f(x, y).backward()
        got = x.grad.numpy().copy()
        x.grad = None
        F.cross_entropy(x, y).backward()
        np.testing.assert_allclose(got, x.grad.numpy(), rtol=1e-12)


def test_a_mask_input_is_not_frozen_into_the_graph():
    f = jg.compile(lambda t, m: t[m] * 2)
    t = jg.tensor([1.0, 2.0, 3.0, 4.0, 5.0])
    for m in ([True, False, True, False, False], [False, True, True, True, False], [False] * 5):
        m = jg.tensor(m)
        np.testing.assert_array_equal(f(t, m).numpy(), (t[m] * 2).numpy())
    report = explain(lambda t, m: t[m] * 2, t, jg.tensor([True] * 5))
    assert "depends on its operands' values" in report.graph_breaks[0][0]


def test_nonzero_and_masked_select_are_graph_breaks_not_constants():
    for fn in (lambda t: jg.nonzero(t > 0).sum(), lambda t: t.masked_select(t > 0).sum()):
        cf = jg.compile(fn)
        for v in ([1.0, -1.0, 2.0], [-1.0, -1.0, 3.0], [5.0, 6.0, 7.0]):
            t = jg.tensor(v)
            assert float(cf(t)) == float(fn(t))
        assert explain(fn, jg.tensor([1.0, -1.0, 2.0])).graph_breaks


def test_an_index_tensor_is_an_input_of_the_plan():
    f = jg.compile(lambda t, i: (t[i] * 2).sum())
    for i in ([0, 2], [4, 1], [3, 3]):
        t = jg.tensor([1.0, 2.0, 3.0, 4.0, 5.0], requires_grad=True)
        f(t, jg.tensor(i)).backward()
        want = np.zeros(5)
        np.add.at(want, i, 2.0)
        np.testing.assert_array_equal(t.grad.numpy(), want)


def test_detach_of_an_input_is_a_new_tensor_without_grad():
    f = jg.compile(lambda x: x.detach())
    x = jg.tensor([1.0, 2.0], requires_grad=True)
    for _ in range(2):
        r = f(x)
        assert r is not x and not r.requires_grad and r.is_leaf and r.grad_fn is None
        r.add_(1)  # the same storage and version counter, as eager's detach
        assert x._version == r._version
    np.testing.assert_array_equal(x.detach().numpy(), [3.0, 4.0])


def test_a_result_and_its_detached_twin_are_two_tensors():
    f = jg.compile(lambda x: (lambda y: (y, y.detach()))(x * 2))
    a, b = f(jg.tensor([1.0, 2.0], requires_grad=True))
    assert a is not b and a.requires_grad and not b.requires_grad and b.grad_fn is None


def test_a_vjp_reading_an_index_array_made_outside_the_table_runs_eagerly():
    """A formula that hands a kernel ``t._data.reshape(...)`` (a view made outside the op table) would have
    its plan keep the traced call's array: the function runs eagerly instead, as explain reports."""
    from jitgrad._op import Op, dispatch
    from jitgrad.ops.indexing import index_put_zeros
    op = Op("rows_outside_table", lambda xp, dt, x, i: x[i.reshape(-1)], inputs=("self", "index"), keep_inputs=(1,),
            dtype="keep", vjp=[lambda g, s: index_put_zeros(g, s.self_shape, (s.index._data.reshape(-1),), True)])

    def fn(x, i):
        return (dispatch(op, (x, i)) * 2).sum()
    cf = jg.compile(fn)
    for i in ([[0, 1]], [[2, 2]], [[3, 0]]):
        grads = []
        for f in (fn, cf):
            x = jg.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
            f(x, jg.tensor(i)).backward()
            grads.append(x.grad.numpy())
        np.testing.assert_array_equal(grads[1], grads[0])
    report = explain(fn, jg.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True), jg.tensor([[0, 1]]))
    assert "outside the op table (in a VJP formula)" in report.graph_breaks[-1][0]
