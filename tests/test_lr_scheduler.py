"""optim.lr_scheduler: PyTorch's step semantics, closed forms from the docs, state dicts and warnings."""
import bisect
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
