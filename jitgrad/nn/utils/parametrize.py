"""nn.utils.parametrize: a module's tensor computed from other tensors by modules (PyTorch's API and layout).

``register_parametrization(module, "weight", P)`` moves ``module.weight`` to
``module.parametrizations.weight.original`` (or ``original0``, ``original1``, ... when ``P.right_inverse``
returns several tensors) and makes ``weight`` a property of a subclass injected for this module
(``ParametrizedLinear``) that returns ``P(original)`` on every access, or once per ``cached()`` block.
Assigning to ``module.weight`` runs the parametrizations' ``right_inverse`` chain. State dicts hold
``parametrizations.weight.original``, as PyTorch's do.
"""
import collections.abc
import copy
import copyreg
from contextlib import contextmanager

from ..._grad_mode import no_grad
from ..._tensor import Tensor
from ..modules.container import ModuleDict, ModuleList
from ..module import Module
from ..parameter import Parameter

__all__ = ["cached", "ParametrizationList", "register_parametrization", "is_parametrized", "remove_parametrizations",
           "type_before_parametrizations", "transfer_parametrizations_and_params"]

_cache_enabled = 0
_cache = {}


@contextmanager
def cached():
    """Inside the block each parametrized tensor is computed once, on first access, and reused."""
    global _cache_enabled, _cache
    _cache_enabled += 1
    try:
        yield
    finally:
        _cache_enabled -= 1
        if not _cache_enabled:
            _cache = {}


def _register_parameter_or_buffer(module, name, x):
    if isinstance(x, Parameter):
        module.register_parameter(name, x)
    else:
        module.register_buffer(name, x)


def _set(dest, src):
    """dest takes src's values in place, keeping its identity (PyTorch's ``dest.set_(src)``)."""
    dest.data = src.detach()
    dest._vc[0] += 1


class ParametrizationList(ModuleList):
    """The parametrizations of one tensor, applied in order to ``original`` (or ``original0``, ...)."""

    def __init__(self, modules, original, unsafe=False):
        if len(modules) == 0:
            raise ValueError("ParametrizationList requires one or more modules.")
        super().__init__(modules)
        self.unsafe = unsafe
        original_shape, original_dtype = original.shape, original.dtype
        with no_grad():
            new = original
            for module in reversed(self):
                if hasattr(module, "right_inverse"):
                    try:
                        new = module.right_inverse(new)
                    except NotImplementedError:
                        pass
        if not isinstance(new, (Tensor, collections.abc.Sequence)):
            raise ValueError("'right_inverse' must return a Tensor or a Sequence of tensors (list, tuple...). "
                             "Got %s" % type(new).__name__)
        self.is_tensor = isinstance(new, Tensor)
        self.ntensors = 1 if self.is_tensor else len(new)
        if self.is_tensor:
            if original.dtype != new.dtype:
                raise ValueError("When `right_inverse` outputs one tensor, it may not change the dtype.\n"
                                 "original.dtype: %s\nright_inverse(original).dtype: %s" % (original.dtype, new.dtype))
            if original.device != new.device:
                raise ValueError("When `right_inverse` outputs one tensor, it may not change the device.\n"
                                 "original.device: %s\nright_inverse(original).device: %s"
                                 % (original.device, new.device))
            with no_grad():
                _set(original, new)
            _register_parameter_or_buffer(self, "original", original)
        else:
            for i, originali in enumerate(new):
                if not isinstance(originali, Tensor):
                    raise ValueError("'right_inverse' must return a Tensor or a Sequence of tensors (list, tuple...). "
                                     "Got element %d of the sequence with type %s." % (i, type(originali).__name__))
                if isinstance(original, Parameter):
                    originali = Parameter(originali, original.requires_grad)
                originali.requires_grad_(original.requires_grad)
                _register_parameter_or_buffer(self, "original%d" % i, originali)
        if not self.unsafe:
            z = self()
            if not isinstance(z, Tensor):
                raise ValueError("A parametrization must return a tensor. Got %s." % type(z).__name__)
            if z.dtype != original_dtype:
                raise ValueError("Registering a parametrization may not change the dtype of the tensor, unless "
                                 "`unsafe` flag is enabled.\nunparametrized dtype: %s\nparametrized dtype: %s"
                                 % (original_dtype, z.dtype))
            if z.shape != original_shape:
                raise ValueError("Registering a parametrization may not change the shape of the tensor, unless "
                                 "`unsafe` flag is enabled.\nunparametrized shape: %s\nparametrized shape: %s"
                                 % (original_shape, z.shape))

    def right_inverse(self, value):
        """Set the originals so that the parametrized tensor is ``value``: the right_inverse chain, backwards."""
        with no_grad():
            for module in reversed(self):
                if not hasattr(module, "right_inverse"):
                    raise RuntimeError("parametrization %s does not implement right_inverse." % type(module).__name__)
                value = module.right_inverse(value)
            if self.is_tensor:
                if not isinstance(value, Tensor):
                    raise ValueError("`right_inverse` should return a tensor. Got %s" % type(value).__name__)
                if value.dtype != self.original.dtype:
                    raise ValueError("The tensor returned by `right_inverse` has dtype %s while `original` has dtype %s"
                                     % (value.dtype, self.original.dtype))
                _set(self.original, value)
            else:
                if not isinstance(value, collections.abc.Sequence):
                    raise ValueError("'right_inverse' must return a sequence of tensors. Got %s."
                                     % type(value).__name__)
                if len(value) != self.ntensors:
                    raise ValueError("'right_inverse' must return a sequence of tensors of length %d. Got a sequence "
                                     "of length %d." % (self.ntensors, len(value)))
                for i, tensor in enumerate(value):
                    original_i = getattr(self, "original%d" % i)
                    if not isinstance(tensor, Tensor):
                        raise ValueError("`right_inverse` must return a sequence of tensors. Got element %d of type %s"
                                         % (i, type(tensor).__name__))
                    if original_i.dtype != tensor.dtype:
                        raise ValueError("Tensor %d returned by `right_inverse` has dtype %s while `original%d` has "
                                         "dtype %s" % (i, tensor.dtype, i, original_i.dtype))
                    _set(original_i, tensor)

    def forward(self):
        if self.is_tensor:
            x = self[0](self.original)
        else:
            x = self[0](*(getattr(self, "original%d" % i) for i in range(self.ntensors)))
        for module in list(self)[1:]:
            x = module(x)
        return x


def _default_deepcopy(self, memo):
    obj = memo.get(id(self))
    if obj is not None:
        return obj
    replica = self.__new__(self.__class__)
    memo[id(self)] = replica
    replica.__dict__ = copy.deepcopy(self.__dict__, memo)
    for slot in copyreg._slotnames(self.__class__):
        if hasattr(self, slot):
            setattr(replica, slot, copy.deepcopy(getattr(self, slot), memo))
    return replica


def _getstate(self):
    raise RuntimeError("Serialization of parametrized modules is only supported through state_dict(). See:\n"
                       "https://pytorch.org/tutorials/beginner/saving_loading_models.html"
                       "#saving-loading-a-general-checkpoint-for-inference-and-or-resuming-training")


def _inject_new_class(module):
    """Give ``module`` a class of its own (``Parametrized<Class>``), to hold its parametrized properties."""
    cls = module.__class__
    dct = {"__getstate__": _getstate}
    if not hasattr(cls, "__deepcopy__"):
        dct["__deepcopy__"] = _default_deepcopy
    module.__class__ = type("Parametrized" + cls.__name__, (cls,), dct)


def _inject_property(module, tensor_name):
    if hasattr(module, tensor_name):
        raise AssertionError("Module already has an attribute named '%s'" % tensor_name)

    def get_parametrized(self):
        parametrization = self.parametrizations[tensor_name]
        if not _cache_enabled:
            return parametrization()
        key = (id(module), tensor_name)
        tensor = _cache.get(key)
        if tensor is None:
            tensor = _cache[key] = parametrization()
        return tensor

    def set_original(self, value):
        self.parametrizations[tensor_name].right_inverse(value)
    setattr(module.__class__, tensor_name, property(get_parametrized, set_original))


def register_parametrization(module, tensor_name, parametrization, *, unsafe=False):
    """Parametrize ``module.<tensor_name>`` (a parameter, a buffer, or an already parametrized tensor, to
    which ``parametrization`` is then appended) by the module ``parametrization``."""
    parametrization.train(module.training)
    if is_parametrized(module, tensor_name):
        if not unsafe:
            y = getattr(module, tensor_name)
            x = parametrization(y)
            if not isinstance(x, Tensor):
                raise ValueError("A parametrization must return a tensor. Got %s." % type(x).__name__)
            if x.dtype != y.dtype:
                raise ValueError("Registering a parametrization may not change the dtype of the tensor, unless the "
                                 "`unsafe` flag is enabled.\nmodule.%s.dtype: %s\nparametrization(module.%s).dtype: %s"
                                 % (tensor_name, y.dtype, tensor_name, x.dtype))
            if x.shape != y.shape:
                raise ValueError("Registering a parametrization may not change the shape of the tensor, unless the "
                                 "`unsafe` flag is enabled.\nmodule.%s.shape: %s\nparametrization(module.%s).shape: %s"
                                 % (tensor_name, y.shape, tensor_name, x.shape))
            if hasattr(parametrization, "right_inverse"):
                try:
                    z = parametrization.right_inverse(x)
                except NotImplementedError:
                    pass
                else:
                    if not isinstance(z, Tensor):
                        raise ValueError("parametrization.right_inverse must return a tensor. Got: %s"
                                         % type(z).__name__)
                    if z.dtype != y.dtype:
                        raise ValueError("The tensor returned by parametrization.right_inverse must have the same "
                                         "dtype as module.%s, unless the `unsafe` flag is enabled.\nmodule.%s.dtype: "
                                         "%s\nreturned dtype: %s" % (tensor_name, tensor_name, y.dtype, z.dtype))
                    if z.shape != y.shape:
                        raise ValueError("The tensor returned by parametrization.right_inverse must have the same "
                                         "shape as module.%s, unless the `unsafe` flag is enabled.\nmodule.%s.shape: "
                                         "%s\nreturned shape: %s" % (tensor_name, tensor_name, y.shape, z.shape))
        module.parametrizations[tensor_name].append(parametrization)
        module.parametrizations[tensor_name].unsafe |= unsafe
    elif tensor_name in module._buffers or tensor_name in module._parameters:
        original = getattr(module, tensor_name)
        parametrizations = ParametrizationList([parametrization], original, unsafe=unsafe)
        delattr(module, tensor_name)
        if not is_parametrized(module):
            _inject_new_class(module)
            module.parametrizations = ModuleDict()
        _inject_property(module, tensor_name)
        module.parametrizations[tensor_name] = parametrizations
    else:
        raise ValueError("Module '%s' does not have a parameter, a buffer, or a parametrized element with name '%s'"
                         % (module, tensor_name))
    return module


def is_parametrized(module, tensor_name=None):
    """Whether ``module`` has a parametrization (on ``tensor_name``, if given)."""
    parametrizations = getattr(module, "parametrizations", None)
    if parametrizations is None or not isinstance(parametrizations, ModuleDict):
        return False
    return len(parametrizations) > 0 if tensor_name is None else tensor_name in parametrizations


def remove_parametrizations(module, tensor_name, leave_parametrized=True):
    """Undo the parametrizations on ``tensor_name``: it becomes a parameter (or buffer) again, holding the
    parametrized value (``leave_parametrized=True``) or the original."""
    if not is_parametrized(module, tensor_name):
        raise ValueError("Module %s does not have a parametrization on %s" % (module, tensor_name))
    parametrizations = module.parametrizations[tensor_name]
    if parametrizations.is_tensor:
        original = parametrizations.original
        if leave_parametrized:
            with no_grad():
                t = getattr(module, tensor_name)
                _set(original, t)
    else:
        if not leave_parametrized:
            raise ValueError("Cannot leave unparametrized (`leave_parametrized=False`) a tensor that is parametrized "
                             "in terms of a sequence of tensors.")
        t = getattr(module, tensor_name)
        original = Parameter(t.detach()) if t.requires_grad else t.detach()
    delattr(module.__class__, tensor_name)
    del module.parametrizations[tensor_name]
    _register_parameter_or_buffer(module, tensor_name, original)
    if not is_parametrized(module):
        delattr(module, "parametrizations")
        module.__class__ = module.__class__.__bases__[0]
    return module


def type_before_parametrizations(module):
    """The module's class before parametrizations were registered on it."""
    return module.__class__.__bases__[0] if is_parametrized(module) else type(module)


def transfer_parametrizations_and_params(from_module, to_module, tensor_name=None):
    """Register ``from_module``'s parametrizations (of ``tensor_name``, or all) on ``to_module``, sharing the
    original tensors."""
    if is_parametrized(from_module):
        for name in (list(from_module.parametrizations) if tensor_name is None else [tensor_name]):
            if not hasattr(to_module, name):
                setattr(to_module, name, Parameter(getattr(from_module, name).detach()))
            for fn in from_module.parametrizations[name]:
                register_parametrization(to_module, name, fn)
            source, target = from_module.parametrizations[name], to_module.parametrizations[name]
            if hasattr(source, "original"):
                target.original = source.original
            else:
                i = 0
                while hasattr(source, "original%d" % i):
                    setattr(target, "original%d" % i, getattr(source, "original%d" % i))
                    i += 1
    return to_module
