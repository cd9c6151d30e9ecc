"""nn.Module: parameters, buffers and submodules registered on attribute assignment (its state dict
is in _state_dict.py, its forward hooks in _module_hooks.py).

Registration keeps definition order (dicts), so ``parameters()``, ``state_dict()`` and the repr
list things in the order ``__init__`` created them, with PyTorch's dotted key names.
"""
from collections import OrderedDict

from .. import _dtype as D
from .._grad_mode import no_grad
from .._tensor import Tensor
from .._trace_hooks import NOT_CAPTURED, step_call
from ._module_hooks import ForwardHooks, RemovableHandle  # noqa: F401  (RemovableHandle: nn.module's name for it)
from ._state_dict import StateDict
from .parameter import Parameter


def _addindent(s, n):
    lines = s.split("\n")
    return lines[0] if len(lines) == 1 else lines[0] + "\n" + "\n".join(" " * n + line for line in lines[1:])


def _tensor_type(value):
    return value.type() if isinstance(value, Tensor) else type(value).__name__


class Module(StateDict, ForwardHooks):
    """Base class of every layer and model: subclass it, assign layers in ``__init__``, define ``forward``."""

    training = True
    _version = 1

    def __init__(self, *args, **kwargs):
        if args or kwargs:
            raise TypeError("%s.__init__() got an unexpected argument" % type(self).__name__)
        sa = object.__setattr__
        sa(self, "training", True)
        sa(self, "_parameters", {})
        sa(self, "_buffers", {})
        sa(self, "_non_persistent_buffers_set", set())
        sa(self, "_modules", {})
        sa(self, "_forward_pre_hooks", OrderedDict())
        sa(self, "_forward_pre_hooks_with_kwargs", set())
        sa(self, "_forward_hooks", OrderedDict())
        sa(self, "_forward_hooks_with_kwargs", set())
        sa(self, "_forward_hooks_always_called", set())

    def forward(self, *input):
        raise NotImplementedError('Module [%s] is missing the required "forward" function' % type(self).__name__)

    # ------------------------------------------------------------------ registration
    def register_buffer(self, name, tensor, persistent=True):
        if "_buffers" not in self.__dict__:
            raise AttributeError("cannot assign buffer before Module.__init__() call")
        if not isinstance(name, str):
            raise TypeError("buffer name should be a string. Got %s" % type(name).__name__)
        if "." in name:
            raise KeyError('buffer name can\'t contain "."')
        if name == "":
            raise KeyError('buffer name can\'t be empty string ""')
        if hasattr(self, name) and name not in self._buffers:
            raise KeyError("attribute '%s' already exists" % name)
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError("cannot assign '%s' object to buffer '%s' (torch Tensor or None required)"
                            % (type(tensor).__name__, name))
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def register_parameter(self, name, param):
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign parameter before Module.__init__() call")
        if not isinstance(name, str):
            raise TypeError("parameter name should be a string. Got %s" % type(name).__name__)
        if "." in name:
            raise KeyError('parameter name can\'t contain "."')
        if name == "":
            raise KeyError('parameter name can\'t be empty string ""')
        if hasattr(self, name) and name not in self._parameters:
            raise KeyError("attribute '%s' already exists" % name)
        if param is not None and not isinstance(param, Parameter):
            raise TypeError("cannot assign '%s' object to parameter '%s' (torch.nn.Parameter or None required)"
                            % (_tensor_type(param), name))
        if param is not None and param.grad_fn is not None:
            raise ValueError("Cannot assign non-leaf Tensor to parameter '%s'. Model parameters must be created "
                             "explicitly. To express '%s' as a function of another Tensor, compute the value in the "
                             "forward() method." % (name, name))
        self._parameters[name] = param

    def add_module(self, name, module):
        if module is not None and not isinstance(module, Module):
            raise TypeError("%s is not a Module subclass" % type(module).__name__)
        if not isinstance(name, str):
            raise TypeError("module name should be a string. Got %s" % type(name).__name__)
        if hasattr(self, name) and name not in self._modules:
            raise KeyError("attribute '%s' already exists" % name)
        if "." in name:
            raise KeyError('module name can\'t contain ".", got: %s' % name)
        if name == "":
            raise KeyError('module name can\'t be empty string ""')
        self._modules[name] = module

    register_module = add_module

    def get_submodule(self, target):
        mod = self
        for item in target.split(".") if target else []:
            if not hasattr(mod, item):
                raise AttributeError(mod._get_name() + " has no attribute `" + item + "`")
            mod = getattr(mod, item)
            if not isinstance(mod, Module):
                raise AttributeError("`" + item + "` is not an nn.Module")
        return mod

    def get_parameter(self, target):
        path, _, name = target.rpartition(".")
        mod = self.get_submodule(path)
        if not hasattr(mod, name):
            raise AttributeError(mod._get_name() + " has no attribute `" + name + "`")
        param = getattr(mod, name)
        if not isinstance(param, Parameter):
            raise AttributeError("`" + name + "` is not an nn.Parameter")
        return param

    # ------------------------------------------------------------------ attribute protocol
    def __getattr__(self, name):
        d = self.__dict__
        for store in ("_parameters", "_buffers", "_modules"):
            if store in d and name in d[store]:
                return d[store][name]
        raise AttributeError("'%s' object has no attribute '%s'" % (type(self).__name__, name))

    def __setattr__(self, name, value):
        d = self.__dict__
        params = d.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            self._remove_from(name, d, "_buffers", "_modules")
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError("cannot assign '%s' as parameter '%s' (torch.nn.Parameter or None expected)"
                                % (_tensor_type(value), name))
            self.register_parameter(name, value)
        elif isinstance(value, Module):
            if "_modules" not in d:
                raise AttributeError("cannot assign module before Module.__init__() call")
            self._remove_from(name, d, "_parameters", "_buffers")
            d["_modules"][name] = value
        elif "_modules" in d and name in d["_modules"]:
            if value is not None:
                raise TypeError("cannot assign '%s' as child module '%s' (torch.nn.Module or None expected)"
                                % (_tensor_type(value), name))
            d["_modules"][name] = value
        elif "_buffers" in d and name in d["_buffers"]:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError("cannot assign '%s' as buffer '%s' (torch.Tensor or None expected)"
                                % (_tensor_type(value), name))
            d["_buffers"][name] = value
        else:
            object.__setattr__(self, name, value)

    def _remove_from(self, name, d, *stores):
        d.pop(name, None)
        for store in stores:
            if store in d:
                d[store].pop(name, None)
                if store == "_buffers":
                    d["_non_persistent_buffers_set"].discard(name)

    def __delattr__(self, name):
        d = self.__dict__
        for store in ("_parameters", "_buffers", "_modules"):
            if store in d and name in d[store]:
                del d[store][name]
                d["_non_persistent_buffers_set"].discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self):
        keys = list(dir(type(self))) + list(self.__dict__) + list(self._parameters) + list(self._modules) \
            + list(self._buffers)
        return sorted(k for k in set(keys) if not k[0].isdigit())

    def __setstate__(self, state):
        self.__dict__.update(state)

    # ------------------------------------------------------------------ iteration
    def _named_members(self, get, prefix="", recurse=True, remove_duplicate=True):
        memo = set()
        modules = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse else \
            [(prefix, self)]
        for mod_prefix, mod in modules:
            for k, v in get(mod):
                if v is None or (remove_duplicate and id(v) in memo):
                    continue
                if remove_duplicate:
                    memo.add(id(v))
                yield (mod_prefix + ("." if mod_prefix else "") + k, v)

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        """(name, parameter) pairs, shared parameters once."""
        return self._named_members(lambda m: m._parameters.items(), prefix, recurse, remove_duplicate)

    def parameters(self, recurse=True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        return self._named_members(lambda m: m._buffers.items(), prefix, recurse, remove_duplicate)

    def buffers(self, recurse=True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def named_children(self):
        memo = set()
        for name, m in self._modules.items():
            if m is not None and id(m) not in memo:
                memo.add(id(m))
                yield name, m

    def children(self):
        for _, m in self.named_children():
            yield m

    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        """This module and all below it (depth first, in registration order); shared modules once."""
        if memo is None:
            memo = set()
        if id(self) in memo:
            return
        if remove_duplicate:
            memo.add(id(self))
        yield prefix, self
        for name, m in self._modules.items():
            if m is None:
                continue
            yield from m.named_modules(memo, prefix + ("." if prefix else "") + name, remove_duplicate)

    def modules(self):
        for _, m in self.named_modules():
            yield m

    # ------------------------------------------------------------------ modes and bulk changes
    def train(self, mode=True):
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for m in self.children():
            m.train(mode)
        return self

    def eval(self):
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none=True):
        if step_call("zero_grad", self, Module.zero_grad, (set_to_none,), {}) is not NOT_CAPTURED:
            return  # a compiled training step's plan makes the call
        for p in self.parameters():
            if p.grad is None:
                continue
            if set_to_none:
                p.grad = None
            else:
                g = p.grad
                if g.grad_fn is not None:
                    g.detach_()
                else:
                    g.requires_grad_(False)
                g.zero_()

    def apply(self, fn):
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    def _apply(self, fn):
        """Replace every parameter's and buffer's data by ``fn(data)``, keeping the Parameter objects."""
        for m in self.children():
            m._apply(fn)
        with no_grad():
            for p in self._parameters.values():
                if p is None:
                    continue
                new = fn(p)
                if new is not p:
                    p.data = new
                    if p._grad is not None:
                        p._grad = fn(p._grad)
            for k, b in self._buffers.items():
                if b is not None:
                    self._buffers[k] = fn(b)
        return self

    def to(self, *args, **kwargs):
        """``to(dtype)``, ``to(device)`` or ``to(device, dtype)``: floating-point tensors change dtype; and
        ``to(memory_format=...)``: 4-D and 5-D parameters and buffers take that layout (the values stay)."""
        dtype = kwargs.pop("dtype", None)
        device = kwargs.pop("device", None)
        kwargs.pop("non_blocking", None)
        memory_format = kwargs.pop("memory_format", None)
        for a in args:
            if isinstance(a, Tensor):
                dtype, device = a.dtype, a.device
            elif isinstance(a, D.dtype):
                dtype = a
            elif a is not None:
                device = a
        if dtype is not None:
            dtype = D.to_dtype(dtype)
            if not dtype.is_floating_point:
                raise TypeError("nn.Module.to only accepts floating point or complex dtypes, but got desired dtype="
                                + repr(dtype))
        def convert(t):
            if memory_format is not None and t.ndim in (4, 5):
                return t.to(device=device, dtype=dtype if t.dtype.is_floating_point else None,
                            memory_format=memory_format)
            return t.to(device=device, dtype=dtype if t.dtype.is_floating_point else None)
        return self._apply(convert)

    def float(self):
        return self._apply(lambda t: t.float() if t.dtype.is_floating_point else t)

    def double(self):
        return self._apply(lambda t: t.double() if t.dtype.is_floating_point else t)

    def half(self):
        return self._apply(lambda t: t.half() if t.dtype.is_floating_point else t)

    def bfloat16(self):
        return self._apply(lambda t: t.bfloat16() if t.dtype.is_floating_point else t)

    def cpu(self):
        return self

    def cuda(self, device=None):
        return self._apply(lambda t: t.cuda(device))

    def type(self, dst_type):
        return self._apply(lambda t: t.to(dst_type))

    # ------------------------------------------------------------------ repr
    def extra_repr(self):
        return ""

    def _get_name(self):
        return type(self).__name__

    def __repr__(self):
        extra = self.extra_repr()
        lines = extra.split("\n") if extra else []
        for name, m in self._modules.items():
            lines.append("(" + name + "): " + _addindent(repr(m), 2))
        main = self._get_name() + "("
        if lines:
            if len(lines) == 1 and not self._modules:
                main += lines[0]
            else:
                main += "\n  " + "\n  ".join(lines) + "\n"
        return main + ")"
