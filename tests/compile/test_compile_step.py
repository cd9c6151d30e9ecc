"""Compiled whole training steps: loss.backward(), optimizer.zero_grad()/step() and module.zero_grad() captured in
jitgrad.compile's plan, checked against the same step run eagerly (and against PyTorch), and the cases that
fall back to eager (create_graph, hooks, .grad access) giving eager's results."""
import warnings

import numpy as np
import pytest

import jitgrad as jg
import jitgrad.nn.functional as F
from jitgrad.compiler import Unsupported, explain

STEPS = 5


def _data(n=5, d=6, classes=3, seed=0):
    rng = np.random.default_rng(seed)
    return (jg.tensor(rng.standard_normal((n, d)), dtype=jg.float32),
            jg.tensor(rng.integers(0, classes, n)))


def _model(seed=0):
    jg.manual_seed(seed)
    return jg.nn.Sequential(jg.nn.Linear(6, 8), jg.nn.ReLU(), jg.nn.Linear(8, 3))


def _params(model):
    return [p.detach().numpy().copy() for p in model.parameters()]


def _grads(model):
    return [None if p.grad is None else p.grad.numpy().copy() for p in model.parameters()]


def _assert_same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        if x is None or y is None:
            assert x is None and y is None
        else:
            np.testing.assert_allclose(x, y, rtol=1e-6, atol=1e-7)


def _run_both(make_opt, body, steps=STEPS, check=None):
    """Run ``body(model, opt, x, y)`` ``steps`` times eagerly and compiled, each on its own copy of the model.
    Returns (eager results, compiled results, compiled function)."""
    x, y = _data()
    out = []
    for compiled in (False, True):
        model = _model()
        opt = make_opt(model.parameters())

        def step(x, y):
            return body(model, opt, x, y)
        fn = jg.compile(step) if compiled else step
        results = []
        for _ in range(steps):
            r = fn(x, y)
            results.append((None if r is None else r.detach().numpy().copy(), _params(model), _grads(model)))
            if check is not None:
                check(model, opt)
        out.append((results, model, opt, fn, step))
    return out


def _standard(model, opt, x, y, cross_entropy=F.cross_entropy):
    opt.zero_grad()
    loss = cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss


OPTIMIZERS = {
    "sgd": lambda ps: jg.optim.SGD(ps, lr=0.1),
    "sgd-momentum": lambda ps: jg.optim.SGD(ps, lr=0.1, momentum=0.9),
    "sgd-nesterov-wd": lambda ps: jg.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-2),
    "sgd-dampening": lambda ps: jg.optim.SGD(ps, lr=0.05, momentum=0.5, dampening=0.3, maximize=True),
    "adam": lambda ps: jg.optim.Adam(ps, lr=1e-2),
    "adam-amsgrad-wd": lambda ps: jg.optim.Adam(ps, lr=1e-2, amsgrad=True, weight_decay=1e-2),
    "adamw": lambda ps: jg.optim.AdamW(ps, lr=1e-2),
    "rmsprop": lambda ps: jg.optim.RMSprop(ps, lr=1e-2, momentum=0.5),
}


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_whole_step_matches_eager(name):
    (eager, _, eopt, _, _), (comp, model, copt, fn, step) = _run_both(OPTIMIZERS[name], _standard)
    for (le, pe, ge), (lc, pc, gc) in zip(eager, comp):
        np.testing.assert_allclose(lc, le, rtol=1e-6)
        _assert_same(pc, pe)
        _assert_same(gc, ge)
    # the optimizer's state (made by the first step) as eager's
    for (se, sc) in zip(eopt.state_dict()["state"].values(), copt.state_dict()["state"].values()):
        assert se.keys() == sc.keys()
        for k in se:
            np.testing.assert_allclose(np.asarray(sc[k].numpy() if hasattr(sc[k], "numpy") else sc[k]),
                                       np.asarray(se[k].numpy() if hasattr(se[k], "numpy") else se[k]),
                                       rtol=1e-6, atol=1e-7)
    inner = fn._jitgrad_compiled
    assert len(inner.variants) == 1
    var = next(iter(inner.variants.values()))
    # compiled: the forward and the gradients in one plan (no backward plan), then the update
    assert not var.eager and var.joint is not None and var.bplan is None
    assert var.bgraph is not None and "def forward(" in var.plan.source and var.plan.source.count("\n    return") == 1
    runs = []
    plan = var.plan.fn
    var.plan.fn = lambda *a: runs.append(1) or plan(*a)
    fn(*_data())
    assert runs == [1]  # the call ran the plan, not the function
    rep = explain(step, *_data())
    assert rep.graph_breaks == [] and rep.effects == ["zero_grad", "backward", "step"]
    assert "Training-step effects" in rep


def test_returned_loss_is_spent_like_eager():
    (eager, *_), (comp, model, opt, fn, step) = _run_both(OPTIMIZERS["sgd-momentum"], _standard, steps=2)
    x, y = _data()
    loss = fn(x, y)
    assert loss.requires_grad and loss.grad_fn is not None
    eloss = step(x, y)
    for t in (eloss, loss):  # backward has freed the step's graph, in both
        with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
            t.backward()


@pytest.mark.parametrize("variant", ["set_to_none_false", "zero_grad_last", "no_zero_grad", "module_zero_grad",
                                     "zero_grad_after_forward"])
def test_zero_grad_variants(variant):
    def body(model, opt, x, y):
        if variant == "set_to_none_false":
            opt.zero_grad(set_to_none=False)
        elif variant == "module_zero_grad":
            model.zero_grad()
        loss = F.cross_entropy(model(x), y)
        if variant == "zero_grad_after_forward":
            opt.zero_grad()
        loss.backward()
        opt.step()
        if variant == "zero_grad_last":
            opt.zero_grad()
        return loss
    (eager, *_), (comp, model, opt, fn, step) = _run_both(OPTIMIZERS["sgd-momentum"], body)
    for (le, pe, ge), (lc, pc, gc) in zip(eager, comp):
        np.testing.assert_allclose(lc, le, rtol=1e-6)
        _assert_same(pc, pe)
        _assert_same(gc, ge)  # .grad after each call: None, zeros, or accumulated over the calls, as eager
    assert not next(iter(fn._jitgrad_compiled.variants.values())).eager
    if variant == "set_to_none_false":
        assert all(p.grad is not None for p in model.parameters())
    if variant == "zero_grad_last":
        assert all(p.grad is None for p in model.parameters())


def test_scheduler_changes_lr_without_retrace():
    x, y = _data()
    results = []
    for compiled in (False, True):
        model = _model()
        opt = jg.optim.SGD(model.parameters(), lr=0.2, momentum=0.9)
        sched = jg.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)

        def step(x, y):
            return _standard(model, opt, x, y)
        fn = jg.compile(step) if compiled else step
        for _ in range(STEPS):
            fn(x, y)
            sched.step()
        results.append(_params(model))
        if compiled:
            assert len(fn._jitgrad_compiled.variants) == 1  # lr is read from param_groups at each call
    _assert_same(results[1], results[0])


def test_scheduler_made_after_the_first_call():
    x, y = _data()
    model = _model()
    opt = jg.optim.SGD(model.parameters(), lr=0.2)
    fn = jg.compile(_standard)
    fn(model, opt, x, y)
    sched = jg.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "lr_scheduler.step() before optimizer.step()" warning
        fn(model, opt, x, y)
        sched.step()
    assert opt.param_groups[0]["lr"] == pytest.approx(0.1)


def test_scheduler_stepped_inside_the_compiled_step():
    def make(ps):
        opt = jg.optim.SGD(ps, lr=0.2, momentum=0.9)
        opt.sched = jg.optim.lr_scheduler.ExponentialLR(opt, gamma=0.7)
        return opt

    def body(model, opt, x, y):
        loss = _standard(model, opt, x, y)
        opt.sched.step()  # replayed by the plan at each call, after the update
        return loss
    (eager, _, eopt, _, _), (comp, _, copt, fn, step) = _run_both(make, body)
    for (_, pe, _), (_, pc, _) in zip(eager, comp):
        _assert_same(pc, pe)
    assert copt.param_groups[0]["lr"] == pytest.approx(eopt.param_groups[0]["lr"]) == pytest.approx(0.2 * 0.7 ** STEPS)
    assert explain(step, *_data()).effects == ["zero_grad", "backward", "step", "lr_scheduler.step"]


def test_optimizer_given_as_an_argument_is_guarded():
    x, y = _data()
    model = _model()
    fn = jg.compile(_standard)
    twin = _model()
    o1 = jg.optim.SGD(model.parameters(), lr=0.1)
    o2 = jg.optim.SGD(model.parameters(), lr=0.0)  # another optimizer: traced again, and its lr is used
    fn(model, o1, x, y)
    before = _params(model)
    fn(model, o2, x, y)
    _assert_same(_params(model), before)
    assert len(fn._jitgrad_compiled.variants) == 2
    o3 = jg.optim.SGD(twin.parameters(), lr=0.1)
    _standard(twin, o3, x, y)
    fn(model, o1, x, y)  # the first variant again
    assert len(fn._jitgrad_compiled.variants) == 2
    _standard(twin, o3, x, y)
    _assert_same(_params(model), _params(twin))


def test_param_groups_with_their_own_lr():
    def make(ps):
        ps = list(ps)
        return jg.optim.SGD([{"params": ps[:2], "lr": 0.3}, {"params": ps[2:]}], lr=0.05, momentum=0.9)
    (eager, *_), (comp, *_) = _run_both(make, _standard)
    for (_, pe, _), (_, pc, _) in zip(eager, comp):
        _assert_same(pc, pe)


def test_backward_with_gradient_inputs_with_grad_and_ops_after_the_step():
    """backward(gradient) of a non-scalar, an input that requires grad (its .grad accumulates over calls), and an
    op on forward values after the step (stays in the plan)."""
    rng = np.random.default_rng(1)
    xs = rng.standard_normal((5, 6)).astype(np.float32)
    results = []
    for compiled in (False, True):
        model = _model()
        opt = jg.optim.Adam(model.parameters(), lr=1e-2)
        x = jg.tensor(xs, requires_grad=True)

        def step(x, weights):
            opt.zero_grad()
            out = model(x)
            out.backward(weights)
            opt.step()
            return (out * 2).sum(1)
        fn = jg.compile(step) if compiled else step
        w = jg.tensor(np.linspace(-1, 1, 15, dtype=np.float32).reshape(5, 3))
        got = [fn(x, w).detach().numpy().copy() for _ in range(3)]
        results.append((got, _params(model), x.grad.numpy().copy()))
        if compiled:
            var = next(iter(fn._jitgrad_compiled.variants.values()))
            assert not var.eager
    (ge, pe, xe), (gc, pc, xc) = results
    _assert_same(gc, ge)
    _assert_same(pc, pe)
    np.testing.assert_allclose(xc, xe, rtol=1e-6)


def test_fullgraph_step_and_fullgraph_errors():
    x, y = _data()
    model = _model()
    opt = jg.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    @jg.compile(fullgraph=True)
    def step(x, y):
        return _standard(model, opt, x, y)
    step(x, y)
    step(x, y)

    @jg.compile(fullgraph=True)
    def double(x, y):
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward(create_graph=True)
        opt.step()
    with pytest.raises(Unsupported, match="create_graph"):
        double(x, y)


def _fallback_case(body, reason, steps=3, setup=None):
    (eager, *_), (comp, model, opt, fn, step) = _run_both(OPTIMIZERS["sgd-momentum"], body, steps=steps)
    for (le, pe, ge), (lc, pc, gc) in zip(eager, comp):
        if le is not None:
            np.testing.assert_allclose(lc, le, rtol=1e-6)
        _assert_same(pc, pe)
        _assert_same(gc, ge)
    rep = explain(step, *_data())
    assert any(reason in r for r, _ in rep.graph_breaks), rep.graph_breaks
    assert next(iter(fn._jitgrad_compiled.variants.values())).eager


def test_create_graph_runs_eagerly():
    def body(model, opt, x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward(create_graph=True)
        for p in model.parameters():  # break the reference cycle create_graph makes
            p.grad = p.grad.detach()
        opt.step()
        return loss
    _fallback_case(body, "create_graph")


def test_hooks_run_eagerly():
    def body(model, opt, x, y):
        opt.zero_grad()
        h = model[0](x)
        h.retain_grad()
        loss = F.cross_entropy(model[2](model[1](h)), y)
        loss.backward()
        opt.step()
        return h.grad.sum()
    _fallback_case(body, "retain_grad")

    def leaf_hook(model, opt, x, y):
        handle = model[0].weight.register_hook(lambda g: g * 2)
        try:
            return _standard(model, opt, x, y)
        finally:
            handle.remove()
    _fallback_case(leaf_hook, "hooks")


def test_hook_registered_after_compiling_makes_the_call_eager():
    x, y = _data()
    results = []
    for compiled in (False, True):
        model = _model()
        opt = jg.optim.SGD(model.parameters(), lr=0.1)

        def step(x, y):
            return _standard(model, opt, x, y)
        fn = jg.compile(step) if compiled else step
        fn(x, y)
        seen = []
        model[0].weight.register_hook(lambda g: seen.append(1) or g * 3)
        model[2].bias.register_post_accumulate_grad_hook(lambda p: seen.append(2))
        fn(x, y)
        assert seen == [1, 2] or seen == [2, 1]
        results.append(_params(model))
    _assert_same(results[1], results[0])


def test_grad_access_and_clipping_run_eagerly_and_step_once():
    def body(model, opt, x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        jg.nn.utils.clip_grad_norm_(model.parameters(), 0.1)
        opt.step()
        return loss
    _fallback_case(body, ".grad")

    def after_item(model, opt, x, y):  # a value break first: the rest of the trace must not apply the step
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        if loss.item() > -1:
            loss.backward()
            opt.step()
        return loss
    _fallback_case(after_item, "item", steps=1)

    def functional_backward(model, opt, x, y):  # the engine called directly: not captured, applied once
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        jg.autograd.backward(loss)
        opt.step()
        return loss
    _fallback_case(functional_backward, "autograd.backward()", steps=2)


def test_op_reading_updated_parameters_after_the_step_runs_eagerly():
    def body(model, opt, x, y):
        loss = _standard(model, opt, x, y)
        return F.cross_entropy(model(x), y)  # the loss after the update: reads the updated parameters
    _fallback_case(body, "reads a parameter it updated")


@pytest.mark.torch
@pytest.mark.parametrize("name", ["sgd-momentum", "adam"])
def test_whole_step_matches_pytorch(name):
    torch = pytest.importorskip("torch")
    x, y = _data(n=16, seed=3)
    model = _model()
    tmodel = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    with torch.no_grad():
        for tp, p in zip(tmodel.parameters(), model.parameters()):
            tp.copy_(torch.from_numpy(p.detach().numpy().copy()))
    make = {"sgd-momentum": (lambda lib, ps: lib.optim.SGD(ps, lr=0.1, momentum=0.9)),
            "adam": (lambda lib, ps: lib.optim.Adam(ps, lr=1e-2))}[name]
    opt, topt = make(jg, model.parameters()), make(torch, tmodel.parameters())

    @jg.compile
    def step(x, y):
        return _standard(model, opt, x, y)
    tx, ty = torch.from_numpy(x.numpy()), torch.from_numpy(y.numpy())
    for _ in range(STEPS):
        loss = step(x, y)
        tloss = _standard(tmodel, topt, tx, ty, torch.nn.functional.cross_entropy)
        np.testing.assert_allclose(loss.item(), tloss.item(), rtol=1e-5)
    for p, tp in zip(model.parameters(), tmodel.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), tp.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_other_step_shapes():
    """zero_grad inside and backward outside (the output gets the compiled node), two optimizers, and an input
    with a history at run time (its backward must reach that history: the call runs eagerly)."""
    x, y = _data()

    def zero_then_loss(model, opt, x, y):
        opt.zero_grad()
        return F.cross_entropy(model(x), y)
    results = []
    for compiled in (False, True):
        model = _model()
        opt = jg.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        fn = jg.compile(zero_then_loss) if compiled else zero_then_loss
        for _ in range(3):
            loss = fn(model, opt, x, y)
            loss.backward()
            opt.step()
        results.append(_params(model))
        if compiled:
            assert type(loss.grad_fn).__name__ == "CompiledFunctionBackward"
    _assert_same(results[1], results[0])

    def two_optimizers(model, opts, x, y):
        for o in opts:
            o.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        for o in opts:
            o.step()
        return loss
    results = []
    for compiled in (False, True):
        model = _model()
        ps = list(model.parameters())
        opts = (jg.optim.SGD(ps[:2], lr=0.1, momentum=0.9), jg.optim.Adam(ps[2:], lr=1e-2))
        fn = jg.compile(two_optimizers) if compiled else two_optimizers
        for _ in range(3):
            fn(model, opts, x, y)
        results.append(_params(model))
    _assert_same(results[1], results[0])

    def with_input_grad(model, opt, h, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(h), y)
        loss.backward()
        opt.step()
        return loss
    grads = []
    for compiled in (False, True):
        model = _model()
        opt = jg.optim.SGD(model.parameters(), lr=0.1)
        fn = jg.compile(with_input_grad) if compiled else with_input_grad
        for history in (False, True):
            x0 = jg.tensor(x.numpy(), requires_grad=True)
            h = x0 * 2 if history else x0
            fn(model, opt, h, y)
            grads.append(x0.grad.numpy().copy())
    for a, b in zip(grads[:2], grads[2:]):
        np.testing.assert_allclose(b, a, rtol=1e-6)


def test_side_effects_of_a_broken_trace_are_applied_once():
    """The trace stops at a side effect it cannot capture, before it runs: the eager run of the call is the only
    one to apply it (an in-place write to an external tensor, a .grad write)."""
    counter = jg.zeros(())
    w = jg.tensor([1.0, 2.0], requires_grad=True)

    def f(x):
        counter.add_(1)
        w.grad = x * 1
        return (x * 2).sum()
    cf = jg.compile(f)
    x = jg.tensor([3.0, 4.0])
    assert cf(x).item() == 14
    assert counter.item() == 1
    np.testing.assert_array_equal(w.grad.numpy(), [3.0, 4.0])
    cf(x)
    assert counter.item() == 2
    assert any("in-place" in r for r, _ in explain(f, x).graph_breaks)
