"""jitgrad.compile: trace a function once, run it as generated code with fused numba loops.

    model = jitgrad.compile(model)          # an nn.Module: an OptimizedModule sharing its parameters
    @jitgrad.compile
    def f(x, w): return (x * w).tanh().sum()

A pipeline, a module a stage: the IR (ir.py: a Graph of values and Nodes) is recorded by dispatch
(capture.py); the forward and the VJP formulas' backward become generated plans (codegen.py) whose
elementwise runs are fused loops (fusion.py) or tapes (tape.py); a call finds its variant by guards
(driver.py, guards.py, pytree.py), which runs its plans (variant.py, replay.py); to eager autograd a
compiled call is one node (nodes.py). A whole training step (``loss.backward()``, optimizer and
module ``zero_grad()``, ``optimizer.step()``, ``lr_scheduler.step()`` inside the function) is captured
too: its plan runs the forward, the backward and the calls in order. ``explain`` shows what was
captured and generated.
"""
import functools

from ..nn.module import Module
from . import compiled_autograd  # noqa: F401  (registers compiled autograd with the engine)
from .capture import Unsupported
from .explain import explain
from .driver import CompiledFunction
from .guards import module_guard
from .nodes import CompiledFunctionBackward

_BACKENDS = {"jitgrad": True, "inductor": True, "eager": False, "aot_eager": False}


class OptimizedModule(Module):
    """A compiled module: calls run the compiled ``_orig_mod``; attributes, parameters, state_dict
    (keys under ``_orig_mod.``, as PyTorch), train()/eval() are the original module's."""

    def __init__(self, mod, compiled):
        super().__init__()
        self._orig_mod = mod
        object.__setattr__(self, "_compiled", compiled)

    def __call__(self, *args, **kwargs):
        return self._compiled(*args, **kwargs)

    def forward(self, *args, **kwargs):
        return self._compiled(*args, **kwargs)

    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self._modules["_orig_mod"], name)


def compile(model=None, *, fullgraph=False, dynamic=None, backend="jitgrad", mode=None, options=None,
            disable=False):
    """Compile a function or an nn.Module (also usable as ``@compile`` or ``@compile(fullgraph=True)``).

    ``fullgraph=True`` raises where the function needs a value in Python (a graph break) instead of
    running the rest eagerly. ``backend``: "jitgrad" (or PyTorch's "inductor") fuses elementwise ops;
    "eager" / "aot_eager" run the captured plan op by op. A change of input shapes traces again (in
    milliseconds: compiled loops are reused); unless ``dynamic=False``, variants that differ only in shapes
    count once towards the limit of 8 traces, after which the function runs eagerly. ``mode`` and
    ``options`` are accepted for PyTorch compatibility and change nothing.
    """
    if model is None:
        return functools.partial(compile, fullgraph=fullgraph, dynamic=dynamic, backend=backend, mode=mode,
                                 options=options, disable=disable)
    if not callable(model):
        raise RuntimeError("compile(): model must be a callable (a function or an nn.Module), got %s"
                           % type(model).__name__)
    if backend not in _BACKENDS:
        raise RuntimeError("compile(): invalid backend %r: jitgrad compiles with 'jitgrad' (alias 'inductor') or "
                           "'eager' (alias 'aot_eager')" % (backend,))
    if mode not in (None, "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"):
        raise RuntimeError("Unrecognized mode=%s, should be one of: default, reduce-overhead, max-autotune, "
                           "max-autotune-no-cudagraphs" % mode)
    if disable:
        return model
    fuse = _BACKENDS[backend]
    if isinstance(model, Module):
        compiled = CompiledFunction(model.__call__, fullgraph, fuse, module_guard(model), type(model).__name__,
                                    dynamic)
        return OptimizedModule(model, compiled)
    compiled = CompiledFunction(model, fullgraph, fuse, dynamic=dynamic)
    wrapper = functools.wraps(model)(lambda *args, **kwargs: compiled(*args, **kwargs))
    wrapper._jitgrad_compiled = compiled
    wrapper._torchdynamo_orig_callable = model
    return wrapper


__all__ = ["compile", "explain", "OptimizedModule", "CompiledFunctionBackward", "Unsupported"]
