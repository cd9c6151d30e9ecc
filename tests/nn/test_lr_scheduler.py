"""optim.lr_scheduler: PyTorch's step semantics, closed forms from the docs, state dicts and warnings."""
import bisect
import re
import math
import warnings

import numpy as np
import pytest

import jitgrad as jg
from jitgrad import optim
from jitgrad.optim import lr_scheduler as L

BASE = [0.1, 0.5]


def make_optimizer():
    a, b = jg.zeros(2, requires_grad=True), jg.zeros(2, requires_grad=True)
    return optim.SGD([{"params": [a]}, {"params": [b], "lr": BASE[1]}], lr=BASE[0], momentum=0.9)


def schedule(make, epochs):
    """get_last_lr() after construction and after each of ``epochs`` optimizer/scheduler steps."""
    opt = make_optimizer()
    sched = make(opt)
    lrs = [sched.get_last_lr()]
    for _ in range(epochs):
        opt.step()
        sched.step()
        lrs.append(sched.get_last_lr())
        assert [g["lr"] for g in opt.param_groups] == lrs[-1]
    return np.array(lrs)


# closed forms from PyTorch's documentation
CLOSED = {
    "StepLR": (lambda o: L.StepLR(o, step_size=3, gamma=0.5), lambda base, t: base * 0.5 ** (t // 3)),
    "MultiStepLR": (lambda o: L.MultiStepLR(o, milestones=[2, 5, 5, 9], gamma=0.3),
                    lambda base, t: base * 0.3 ** bisect.bisect_right([2, 5, 5, 9], t)),
    "ExponentialLR": (lambda o: L.ExponentialLR(o, gamma=0.9), lambda base, t: base * 0.9 ** t),
    "CosineAnnealingLR": (lambda o: L.CosineAnnealingLR(o, T_max=7, eta_min=0.01),
                          lambda base, t: 0.01 + (base - 0.01) * (1 + math.cos(math.pi * t / 7)) / 2),
    "LambdaLR": (lambda o: L.LambdaLR(o, lambda e: 1 / (1 + e)), lambda base, t: base / (1 + t)),
}


@pytest.mark.parametrize("name", list(CLOSED))
def test_schedule_matches_closed_form(name):
    make, closed = CLOSED[name]
    epochs = 24  # more than three cosine half-periods
    got = schedule(make, epochs)
    expected = np.array([[closed(b, t) for b in BASE] for t in range(epochs + 1)])
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12)


def test_constructor_performs_step_zero():
    opt = make_optimizer()
    sched = L.StepLR(opt, step_size=2)
    assert sched.last_epoch == 0 and sched._step_count == 1
    assert sched.base_lrs == BASE and [g["initial_lr"] for g in opt.param_groups] == BASE
    assert sched.get_last_lr() == BASE


def test_lambda_per_group():
    opt = make_optimizer()
    sched = L.LambdaLR(opt, [lambda e: 0.5 ** e, lambda e: e + 1])
    opt.step()
    sched.step()
    assert sched.get_last_lr() == [0.05, 1.0]
    with pytest.raises(ValueError, match="^Expected 2 lr_lambdas, but got 1$"):
        L.LambdaLR(make_optimizer(), [lambda e: 1.0])


def test_schedule_drives_the_update():
    w = jg.zeros(1, requires_grad=True)
    opt = optim.SGD([w], lr=1.0)
    sched = L.StepLR(opt, step_size=1, gamma=0.5)
    for _ in range(3):
        opt.zero_grad()
        (w * -1.0).sum().backward()  # gradient -1: each step adds the current lr
        opt.step()
        sched.step()
    assert w.item() == 1.0 + 0.5 + 0.25


def test_step_with_epoch_uses_closed_form_and_warns():
    opt = make_optimizer()
    sched = L.StepLR(opt, step_size=3, gamma=0.5)
    opt.step()
    with pytest.warns(UserWarning, match="The epoch parameter in `scheduler.step\\(\\)` was not necessary"):
        sched.step(7)
    assert sched.last_epoch == 7 and sched.get_last_lr() == [b * 0.25 for b in BASE]


def test_state_dict_resume():
    make = CLOSED["CosineAnnealingLR"][0]
    straight = schedule(make, 10)
    opt = make_optimizer()
    sched = make(opt)
    for _ in range(4):
        opt.step()
        sched.step()
    state = sched.state_dict()
    assert "optimizer" not in state and state["last_epoch"] == 4 and state["T_max"] == 7
    opt_state = opt.state_dict()

    opt2 = make_optimizer()
    sched2 = make(opt2)
    opt2.load_state_dict(opt_state)
    sched2.load_state_dict(state)
    lrs = []
    for _ in range(6):
        opt2.step()
        sched2.step()
        lrs.append(sched2.get_last_lr())
    np.testing.assert_allclose(lrs, straight[5:], rtol=1e-12)


def test_lambda_state_dict_keeps_callable_objects_only():
    class Factor:
        def __init__(self):
            self.k = 0.5

        def __call__(self, epoch):
            return self.k ** epoch
    opt = make_optimizer()
    f = Factor()
    sched = L.LambdaLR(opt, [f, lambda e: 1.0])
    state = sched.state_dict()
    assert state["lr_lambdas"] == [{"k": 0.5}, None]
    f.k = 0.9
    sched.load_state_dict(state)
    assert f.k == 0.5 and "lr_lambdas" in state


def test_resume_requires_initial_lr():
    with pytest.raises(KeyError, match="param 'initial_lr' is not specified in param_groups\\[0\\] when resuming"):
        L.StepLR(make_optimizer(), step_size=1, last_epoch=3)


def test_not_an_optimizer():
    with pytest.raises(TypeError, match="^object is not an Optimizer$"):
        L.StepLR(object(), step_size=1)


def test_warnings_follow_pytorch():
    opt = make_optimizer()
    sched = L.ExponentialLR(opt, gamma=0.9)
    with pytest.warns(UserWarning, match="Detected call of `lr_scheduler.step\\(\\)` before `optimizer.step\\(\\)`"):
        sched.step()
    with pytest.warns(UserWarning, match="please use `get_last_lr\\(\\)`"):
        sched.get_lr()
    opt2 = make_optimizer()
    sched2 = L.ExponentialLR(opt2, gamma=0.9)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        opt2.step()
        sched2.step()
    assert sched2.get_last_lr() == pytest.approx([b * 0.9 for b in BASE])


# ---------------------------------------------------------------- side by side with PyTorch
try:
    import torch
except ImportError:  # pragma: no cover
    torch = None
needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed")


def _sgd(lib, ps):
    return lib.optim.SGD([{"params": [ps[0]]}, {"params": [ps[1]], "lr": 0.5}], lr=0.1, momentum=0.9)


def _adam(lib, ps):
    return lib.optim.Adam(ps, lr=0.1)


PLATEAU_METRIC = [5, 4, 4, 4, 4, 3, 3, 3, 3, 3, 3, 2] + [2] * 18
TORCH_CASES = {
    "OneCycleLR": (_sgd, lambda S, o: S.lr_scheduler.OneCycleLR(o, max_lr=[1.0, 2.0], total_steps=30), 29),
    "OneCycleLR-three-phase-linear-adam": (_adam, lambda S, o: S.lr_scheduler.OneCycleLR(
        o, max_lr=1.0, epochs=3, steps_per_epoch=10, three_phase=True, anneal_strategy="linear"), 29),
    "OneCycleLR-no-momentum": (_sgd, lambda S, o: S.lr_scheduler.OneCycleLR(
        o, max_lr=1.0, total_steps=12, pct_start=0.5, cycle_momentum=False, div_factor=10.0), 11),
    "ReduceLROnPlateau": (_sgd, lambda S, o: S.lr_scheduler.ReduceLROnPlateau(
        o, patience=2, cooldown=1, factor=0.5, min_lr=[0.01, 0.1]), 30),
    "ReduceLROnPlateau-max-abs": (_sgd, lambda S, o: S.lr_scheduler.ReduceLROnPlateau(
        o, mode="max", threshold=0.5, threshold_mode="abs", patience=1), 30),
    "CosineAnnealingWarmRestarts": (_sgd, lambda S, o: S.lr_scheduler.CosineAnnealingWarmRestarts(
        o, T_0=3, T_mult=2, eta_min=0.01), 30),
    "MultiplicativeLR": (_sgd, lambda S, o: S.lr_scheduler.MultiplicativeLR(o, [lambda e: 0.95, lambda e: 0.9]), 20),
    "SequentialLR": (_sgd, lambda S, o: S.lr_scheduler.SequentialLR(o, [
        S.lr_scheduler.LinearLR(o, 0.1, total_iters=4), S.lr_scheduler.ExponentialLR(o, 0.9)], milestones=[5]), 20),
    "ChainedScheduler": (_sgd, lambda S, o: S.lr_scheduler.ChainedScheduler([
        S.lr_scheduler.ConstantLR(o, 0.5, total_iters=3), S.lr_scheduler.ExponentialLR(o, 0.9)]), 20),
    "PolynomialLR": (_sgd, lambda S, o: S.lr_scheduler.PolynomialLR(o, total_iters=8, power=2.0), 20),
    "LinearLR": (_sgd, lambda S, o: S.lr_scheduler.LinearLR(o, start_factor=0.2, end_factor=0.9, total_iters=6), 20),
    "ConstantLR": (_sgd, lambda S, o: S.lr_scheduler.ConstantLR(o, factor=0.25, total_iters=4), 20),
    "SWALR-cos": (_sgd, lambda S, o: S.swa_utils.SWALR(o, swa_lr=0.05, anneal_epochs=5), 12),
    "SWALR-linear": (_sgd, lambda S, o: S.swa_utils.SWALR(o, swa_lr=[0.05, 0.2], anneal_epochs=0,
                                                          anneal_strategy="linear"), 5),
}


def _lr_sequence(lib, case):
    make_opt, make_sched, n = TORCH_CASES[case]
    ps = [lib.zeros(2, requires_grad=True), lib.zeros(2, requires_grad=True)]
    opt = make_opt(lib, ps)
    sched = make_sched(lib.optim, opt)
    seq = [sched.get_last_lr()]
    for i in range(n):
        opt.step()
        sched.step(PLATEAU_METRIC[i]) if "Plateau" in case else sched.step()
        momenta = [g.get("momentum", g.get("betas", (0,))[0]) for g in opt.param_groups]
        seq.append(list(sched.get_last_lr()) + [g["lr"] for g in opt.param_groups] + momenta)
    return seq, sched


@needs_torch
@pytest.mark.parametrize("case", list(TORCH_CASES))
def test_lr_sequence_equals_torch(case):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the right calling order warns about nothing
        ours, sched = _lr_sequence(jg, case)
        theirs, tsched = _lr_sequence(torch, case)
    assert ours == theirs
    assert sched.state_dict().keys() == tsched.state_dict().keys()


@needs_torch
def test_warm_restarts_with_fractional_epochs_equal_torch():
    seqs = []
    for lib in (jg, torch):
        opt = _sgd(lib, [lib.zeros(1, requires_grad=True), lib.zeros(1, requires_grad=True)])
        sched = lib.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=2, T_mult=3, eta_min=0.001)
        seq = []
        for epoch in range(6):
            for i in range(4):
                opt.step()
                sched.step(epoch + i / 4)
                seq.append(sched.get_last_lr() + [sched.T_cur, sched.T_i, sched.last_epoch])
        seqs.append(seq)
    assert seqs[0] == seqs[1]


@pytest.mark.parametrize("make", [
    lambda o: L.OneCycleLR(o, max_lr=1.0, total_steps=10),
    lambda o: L.SequentialLR(o, [L.ConstantLR(o, 0.5, total_iters=2), L.ExponentialLR(o, 0.9)], milestones=[3]),
    lambda o: L.ChainedScheduler([L.LinearLR(o, 0.5, total_iters=3), L.ExponentialLR(o, 0.9)]),
    lambda o: L.CosineAnnealingWarmRestarts(o, T_0=2, T_mult=2),
    lambda o: L.ReduceLROnPlateau(o, patience=0)])
def test_state_dict_resume_continues_the_schedule(make):
    def run(steps, resume_from=None):
        opt = make_optimizer()
        sched = make(opt)
        if resume_from is not None:
            opt.load_state_dict(resume_from[0])
            sched.load_state_dict(resume_from[1])
        for i in range(steps):
            opt.step()
            sched.step(10 - i) if isinstance(sched, L.ReduceLROnPlateau) else sched.step()
        return opt, sched
    full = run(8)[1].get_last_lr()
    opt, sched = run(4)
    saved = (opt.state_dict(), sched.state_dict())
    resumed = run(4, saved)[1].get_last_lr()
    if not isinstance(sched, L.ReduceLROnPlateau):  # (its metric sequence restarts)
        assert resumed == full


def test_new_scheduler_errors():
    opt = make_optimizer()
    for call, exc, msg in [
            (lambda: L.OneCycleLR(opt, max_lr=1.0), ValueError, "You must define either total_steps OR"),
            (lambda: L.OneCycleLR(opt, max_lr=1.0, total_steps=5, pct_start=1), ValueError,
             "Expected float between 0 and 1 pct_start, but got 1"),
            (lambda: L.OneCycleLR(opt, max_lr=[1.0], total_steps=5), ValueError,
             "max_lr must have the same length as optimizer.param_groups"),
            (lambda: L.ReduceLROnPlateau(opt, factor=1.0), ValueError, "Factor should be < 1.0."),
            (lambda: L.ReduceLROnPlateau(opt, mode="mid"), ValueError, "mode mid is unknown!"),
            (lambda: L.CosineAnnealingWarmRestarts(opt, T_0=0), ValueError, "Expected positive integer T_0, but got 0"),
            (lambda: L.LinearLR(opt, start_factor=0), ValueError, "Starting multiplicative factor expected"),
            (lambda: L.ConstantLR(opt, factor=2), ValueError, "Constant multiplicative factor expected"),
            (lambda: L.SequentialLR(opt, [L.ConstantLR(opt)], milestones=[1]), ValueError,
             "Sequential Schedulers expects number of schedulers provided to be one more"),
            (lambda: L.ChainedScheduler([L.ReduceLROnPlateau(opt)]), ValueError,
             "ChainedScheduler does not support `ReduceLROnPlateau`"),
            (lambda: L.MultiplicativeLR(opt, 0.9), TypeError, "lr_lambda should be a function, but got float")]:
        with pytest.raises(exc, match=re.escape(msg)):
            call()
    sched = L.OneCycleLR(make_optimizer(), max_lr=1.0, total_steps=2)
    sched.optimizer.step()
    sched.step()
    sched.step()
    with pytest.raises(ValueError, match="Tried to step 3 times. The specified number of total steps is 2"):
        sched.step()


def test_new_schedulers_warn_when_stepped_before_the_optimizer():
    for make in (lambda o: L.OneCycleLR(o, max_lr=1.0, total_steps=10), lambda o: L.LinearLR(o),
                 lambda o: L.PolynomialLR(o), lambda o: L.MultiplicativeLR(o, lambda e: 0.9)):
        sched = make(make_optimizer())
        with pytest.warns(UserWarning, match="Detected call of `lr_scheduler.step\\(\\)` before `optimizer.step\\(\\)`"):
            sched.step()
