"""Capture changes no class: the code a trace runs tells this thread's tracer of value reads, side effects
and training-step calls, so other threads, running eager code or tracing too, see nothing of it."""
import threading

import numpy as np

import jitgrad as jg
from jitgrad import nn
from jitgrad.autograd import engine
from jitgrad.optim.lr_scheduler import StepLR


def _attributes():
    classes = [jg.Tensor, nn.Module, jg.optim.Optimizer, jg.optim.SGD, StepLR]
    return {(c.__name__, k): v for c in classes for k, v in vars(c).items()}, engine.run


def test_tracing_replaces_no_method_of_a_shared_class():
    seen = []
    before = _attributes()

    def step(x, y):
        seen.append(_attributes())  # while the trace runs
        loss = ((model(x) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        return loss

    model = nn.Linear(3, 1)
    opt = jg.optim.SGD(model.parameters(), lr=0.1)
    sched = StepLR(opt, 2)
    jg.compile(step)(jg.randn(4, 3), jg.randn(4, 1))
    assert seen and all(s == before for s in seen)
    assert _attributes() == before


def test_eager_code_in_another_thread_runs_as_usual_while_a_trace_runs():
    tracing, done = threading.Event(), threading.Event()
    errors = []

    def traced(x):
        y = x * 2
        tracing.set()
        done.wait(30)  # the other thread runs its eager code now
        return y.sum()

    def eager():
        tracing.wait(30)
        try:
            w = jg.tensor([1.0, 2.0], requires_grad=True)
            loss = (w * w).sum()
            loss.backward()  # the engine, .grad, in-place writes, item(): none is captured or stopped
            np.testing.assert_array_equal(w.grad.numpy(), [2.0, 4.0])
            with jg.no_grad():
                w.add_(1.0)
            assert w.detach().sum().item() == 5.0
            m = nn.Linear(2, 1)
            m(w).sum().backward()
            m.zero_grad()
            assert m.weight.grad is None
        except BaseException as e:  # noqa: BLE001
            errors.append(e)
        finally:
            done.set()

    t = threading.Thread(target=eager)
    t.start()
    f = jg.compile(traced)
    x = jg.tensor([1.0, 2.0, 3.0])
    assert float(f(x)) == 12.0
    t.join()
    assert not errors, errors
    assert not f._jitgrad_compiled.variants[next(iter(f._jitgrad_compiled.variants))].eager


def test_two_threads_trace_at_once():
    barrier = threading.Barrier(2)
    results, errors = {}, []

    def worker(k):
        try:
            first = [True]

            def fn(x, y):
                if first[0]:  # the two traces run at the same time
                    first[0] = False
                    barrier.wait(30)
                out = (x * k).tanh().sum()
                if k == 2 and out.item() > 1e9:  # a value read in one trace: a break for that one alone
                    return out
                return out + y.sum()
            f = jg.compile(fn)
            x, y = jg.tensor([0.1, 0.2]), jg.tensor([1.0])
            results[k] = [float(f(x, y)) for _ in range(2)], float((x * k).tanh().sum() + y.sum())
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,)) for k in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for got, want in results.values():
        np.testing.assert_allclose(got, [want, want], rtol=1e-6)
    assert _attributes() == _attributes()
