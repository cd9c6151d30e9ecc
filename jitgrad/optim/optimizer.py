"""Optimizer: parameter groups, per-parameter state, state dicts; subclasses supply one fused update.

A subclass implements ``_update(p, param, grad, group)``: ``param`` is the parameter's array and
``grad`` its gradient's, in the parameter's dtype, and the update runs one kernel of
``kernels/optim.py`` over them and the state's arrays (``fused_update``: the kernel layer checks
that they fit and takes care of strided ones). The base class does the rest as
``torch.optim.Optimizer`` does: groups with defaults filled in, the non-leaf and duplicate checks,
``zero_grad``, ``state_dict``/``load_state_dict`` in PyTorch's layout, ``step(closure)``.
"""
import copy
import functools
import itertools
import warnings
from collections import defaultdict

import numpy as np

from .._device import backend
from .._dtype import COMPLEX_NP, FLOATING_NP, FROM_NP, REDUCED_NP
from .._grad_mode import enable_grad, no_grad
from .._tensor import Tensor
from .._trace_hooks import NOT_CAPTURED, side_effect, step_call
from ..autograd.profiler import optimizer_range
from ..kernels import optim as cpu_kernels


class _RequiredParameter:
    """Marks a hyper-parameter every group must give (``lr`` of a custom optimizer, say)."""

    def __repr__(self):
        return "<required parameter>"


required = _RequiredParameter()


def typename(obj):
    """``torch.typename``: 'jitgrad.FloatTensor' for tensors, the qualified type name otherwise."""
    if isinstance(obj, Tensor):
        return obj.type()
    cls = type(obj)
    module = getattr(cls, "__module__", "") or ""
    return cls.__qualname__ if module in ("", "builtins") else module + "." + cls.__qualname__


def as_float(value):
    """A hyper-parameter as a Python float (PyTorch allows a one-element tensor for lr and betas)."""
    return float(value.item() if isinstance(value, Tensor) else value)


def check_lr(lr):
    """PyTorch's checks on ``lr``: a Tensor must hold one element, and no lr may be negative."""
    if isinstance(lr, Tensor) and lr.numel() != 1:
        raise ValueError("Tensor lr must be 1-element")
    if not 0.0 <= lr:
        raise ValueError(f"Invalid learning rate: {lr}")


def check_nonnegative(**values):
    """PyTorch's ``Invalid <name> value`` error for the first of ``values`` (checked in order) below 0."""
    for name, value in values.items():
        if not 0.0 <= value:
            raise ValueError(f"Invalid {name} value: {value}")


def check_betas(betas):
    """PyTorch's checks on Adam-style ``betas``; returns them as floats."""
    for i in (0, 1):
        if not 0.0 <= betas[i] < 1.0:
            raise ValueError(f"Invalid beta parameter at index {i}: {betas[i]}")
    return tuple(as_float(b) for b in betas)


def implementation_options(foreach=None, fused=None, capturable=False, differentiable=False):
    """PyTorch's implementation switches, kept in the groups as PyTorch keeps them. Every update here is
    one fused kernel whatever foreach/fused/capturable say; differentiable=True (an update that autograd
    records) is refused."""
    if differentiable:
        raise RuntimeError("differentiable=True is not supported: jitgrad's optimizer updates are fused kernels "
                           "that autograd does not record")
    return dict(foreach=foreach, fused=fused, capturable=capturable, differentiable=differentiable)


def new_state(p, fill=0):
    """A state buffer shaped and typed like parameter ``p``, on its device; ``fill=None`` leaves it empty."""
    data = p._data
    B = backend(data)
    if fill is None:
        return Tensor._wrap(B.empty(data.shape, data.dtype))
    return Tensor._wrap(B.full(data.shape, fill, data.dtype))


def step_state():
    """The step counter PyTorch keeps per parameter: a 0-d float32 tensor on the CPU."""
    return Tensor._wrap(np.zeros((), dtype=np.float32))


def param_state(state, p, *buffers):
    """``state`` (a parameter's), filled on its first step: the step counter, then a zero buffer per name."""
    if len(state) == 0:
        state["step"] = step_state()
        for name in buffers:
            state[name] = new_state(p)
    return state


def advance(step):
    """step += 1 in place; returns the new count."""
    step._data += 1
    step._vc[0] += 1
    return float(step._data)


def state_data(t):
    """The array of a state tensor (the kernel writes it in place); a complex one's real view."""
    return real_view(t._data)


def real_view(a):
    """A complex array as the real array of its parts, interleaved (view_as_real, flattened into the last dim):
    PyTorch's optimizers step a complex parameter, its gradient and its state as their real views."""
    return a.view(a.real.dtype) if a.dtype in COMPLEX_NP else a


def unused(param):
    """The stand-in for a state buffer an option leaves unused: an empty array of the kernel's dtype."""
    return backend(param).empty((0,), param.dtype)


def fused_update(kernel, param, *args):
    """Run ``kernel`` of kernels/optim.py over parameter array ``param`` and the kernel's other
    arguments, or its CUDA twin; ``kernels.optim.prepare`` checks and flattens the arrays first.
    A float16/bfloat16 parameter is updated in float32: the kernel runs on float32 copies of it, its
    gradient and state, and the parameter and state are rounded back."""
    if param.dtype in REDUCED_NP:
        B = backend(param)
        low = [i for i, a in enumerate(args) if getattr(a, "dtype", None) == param.dtype]
        c = FROM_NP[param.dtype].compute.np
        wide = list(args)
        for i in low:
            wide[i] = B.astype(args[i], c)
        p32 = B.astype(param, c)
        fused_update(kernel, p32, *wide)
        B.copyto(param, p32)
        for i in low[1:] if low and low[0] == 0 else low:  # (args[0], the gradient, is only read)
            B.copyto(args[i], wide[i])
        return
    if param.__class__ is np.ndarray:
        cpu_kernels.update(kernel, param, *args)
        return
    from ..kernels.cuda import optim as cuda_kernels  # needs numba-cuda: loaded for the first CUDA parameter
    B = backend(param)
    flat, back = cpu_kernels.prepare(kernel, param, args, B)
    cuda_kernels.update(kernel, *flat)
    for dst, src in back:
        B.copyto(dst, src)


def _kernel_ready(a):
    """Whether array ``a`` can go to a kernel as it is: C-contiguous (and writeable, for NumPy)."""
    return a.flags.c_contiguous and a.flags.writeable if a.__class__ is np.ndarray else a.is_c_contiguous()


def _uncapturable(cls, name, fn):
    @functools.wraps(fn)
    def method(self, *args, **kwargs):
        side_effect("%s.%s(), an override of Optimizer.%s" % (cls.__name__, name, name))
        return fn(self, *args, **kwargs)
    return method


class Optimizer:
    # State entries shaped like the parameter (checked when a state dict is loaded).
    _param_shaped_state = ()

    def __init__(self, params, defaults):
        self.defaults = defaults
        if isinstance(params, Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of Tensors or dicts, "
                            "but got " + typename(params))
        self.state = defaultdict(dict)
        self.param_groups = []
        param_groups = list(params)
        if len(param_groups) == 0:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(param_groups[0], dict):
            param_groups = [{"params": param_groups}]
        for param_group in param_groups:
            self.add_param_group(param_group)

    def __repr__(self):
        s = self.__class__.__name__ + " ("
        for i, group in enumerate(self.param_groups):
            s += "\nParameter Group %d\n" % i
            for key in sorted(group.keys()):
                if key != "params":
                    s += "    %s: %s\n" % (key, group[key])
        return s + ")"

    def __getstate__(self):
        return {"defaults": self.defaults, "state": self.state, "param_groups": self.param_groups}

    def __setstate__(self, state):
        self.__dict__.update(state)

    # ------------------------------------------------------------- groups
    def add_param_group(self, param_group):
        if not isinstance(param_group, dict):
            raise TypeError("param_group must be a dict, but got %s" % type(param_group))
        params = param_group["params"]
        if isinstance(params, Tensor):
            params = [params]
        elif isinstance(params, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections, but the ordering of "
                            "tensors in sets will change between runs. Please use a list instead.")
        else:
            params = list(params)
        names = [p[0] for p in params if isinstance(p, tuple)]
        params = [p[1] if isinstance(p, tuple) else p for p in params]
        param_group["params"] = params
        if names:
            if len(names) != len(params):
                raise ValueError("all optimizer params should be with/without names. Some param names are missing")
            param_group["param_names"] = names

        for p in params:
            if not isinstance(p, Tensor):
                raise TypeError("optimizer can only optimize Tensors, but one of the params is " + typename(p))
            if not (p.is_leaf or p.retains_grad):
                raise ValueError("can't optimize a non-leaf Tensor")

        for name, default in self.defaults.items():
            if default is required and name not in param_group:
                raise ValueError("parameter group didn't specify a value of required optimization parameter " + name)
            param_group.setdefault(name, default)

        ids = [id(p) for p in params]
        if len(ids) != len(set(ids)):
            warnings.warn("optimizer contains a parameter group with duplicate parameters; in future, this will cause "
                          "an error; see github.com/pytorch/pytorch/issues/40967 for more information", stacklevel=3)
        seen = set()
        for group in self.param_groups:
            seen.update(id(p) for p in group["params"])
            if ("param_names" in param_group) != ("param_names" in group):
                kind = "with names" if "param_names" in param_group else "without names"
                raise ValueError("all optimizer param groups should be with/without names. cannot add param group "
                                 "%s to the optimizer" % kind)
        if not seen.isdisjoint(ids):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(param_group)

    # ------------------------------------------------------------- gradients and steps
    def __init_subclass__(cls, **kwargs):
        """A subclass's own step() or zero_grad() is Python a compiled trace cannot capture: it stops there."""
        super().__init_subclass__(**kwargs)
        for name in ("step", "zero_grad"):
            if name in cls.__dict__:
                setattr(cls, name, _uncapturable(cls, name, cls.__dict__[name]))

    def zero_grad(self, set_to_none=True):
        # jitgrad.compile's trace records the call (its plan makes it at run time)
        if step_call("optimizer.zero_grad", self, None, (set_to_none,), {}) is not NOT_CAPTURED:
            return
        with optimizer_range(self, "zero_grad"):
            self._zero_grad(set_to_none)

    def _zero_grad(self, set_to_none):
        for group in self.param_groups:
            for p in group["params"]:
                g = p._grad
                if g is None:
                    continue
                if set_to_none:
                    p._grad = None
                else:
                    if g.grad_fn is not None:
                        g.detach_()
                    else:
                        g.requires_grad_(False)
                    g.zero_()

    def step(self, closure=None):
        """Update every parameter that has a gradient; ``closure`` re-evaluates the loss (returned)."""
        # jitgrad.compile's trace records the call (its plan makes it at run time)
        if step_call("optimizer.step", self, None, (closure,), {}) is not NOT_CAPTURED:
            return None
        with optimizer_range(self, "step"):
            loss = None
            if closure is not None:
                with enable_grad():
                    loss = closure()
            with no_grad():
                for group in self.param_groups:
                    for p in group["params"]:
                        if p._grad is not None:
                            self._step_param(p, group)
        return loss

    def _step_param(self, p, group):
        data = real_view(p._data)
        if data.dtype not in FLOATING_NP:
            raise TypeError("%s can only update floating point parameters, but got a parameter of dtype %s"
                            % (type(self).__name__, p.dtype))
        grad = real_view(p._grad._data)
        if grad.dtype != data.dtype:  # p.data may have been given another dtype than its gradient's
            grad = backend(data).astype(grad, data.dtype)
        self._update(p, data, grad, group)  # shapes (p.data may have been replaced) are checked by the kernel layer
        p._vc[0] += 1

    def _update(self, p, param, grad, group):
        raise NotImplementedError

    # ------------------------------------------------------------- state dicts
    def state_dict(self):
        """{'state': {index: {...}}, 'param_groups': [{..., 'params': [indices]}]}, as PyTorch lays it out."""
        index = {}
        start = 0
        groups = []
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            for i, p in enumerate(group["params"], start):
                index.setdefault(id(p), i)
            packed["params"] = [index[id(p)] for p in group["params"]]
            start += len(packed["params"])
            groups.append(packed)
        state = {(index[id(k)] if isinstance(k, Tensor) else k): v for k, v in self.state.items()}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict):
        groups = self.param_groups
        saved_groups = copy.deepcopy(state_dict["param_groups"])
        if len(groups) != len(saved_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        if any(len(g["params"]) != len(s["params"]) for g, s in zip(groups, saved_groups)):
            raise ValueError("loaded state dict contains a parameter group that doesn't match the size of "
                             "optimizer's group")
        id_map = dict(zip(itertools.chain.from_iterable(g["params"] for g in saved_groups),
                          itertools.chain.from_iterable(g["params"] for g in groups)))
        state = defaultdict(dict)
        for k, v in state_dict["state"].items():
            if k in id_map:
                param = id_map[k]
                state[param] = {key: self._cast_state(param, key, value) for key, value in v.items()}
            else:
                state[k] = v
        for group, saved in zip(groups, saved_groups):
            saved["params"] = group["params"]
            if "param_names" in group and "param_names" not in saved:
                saved["param_names"] = group["param_names"]
        self.__setstate__({"state": state, "param_groups": saved_groups})

    def _cast_state(self, param, key, value):
        """A loaded state entry ready for the kernels: the parameter's device and (but 'step') dtype, contiguous."""
        if key == "step":
            if not isinstance(value, Tensor):  # older files keep the step as a number
                value = Tensor._wrap(np.array(value, dtype=np.float32))
            return value
        if not isinstance(value, Tensor):
            return value
        if key in self._param_shaped_state and value.shape != param.shape:
            raise ValueError("loaded state dict has '%s' of shape %s for a parameter of shape %s"
                             % (key, list(value.shape), list(param.shape)))
        value = value.to(device=param.device, dtype=param.dtype if param.is_floating_point() else None)
        if not _kernel_ready(value._data):
            value = Tensor._wrap(backend(value._data).copy(value._data))
        return value
