"""nn.Module's state dict: state_dict() and load_state_dict(), with PyTorch's dotted keys and messages."""
import itertools
from collections import OrderedDict, namedtuple

from .._grad_mode import no_grad
from .._tensor import Tensor
from .parameter import Parameter


class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    def __repr__(self):
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


class StateDict:
    """Module's state_dict and load_state_dict (parameters and persistent buffers by dotted name)."""

    def state_dict(self, *args, destination=None, prefix="", keep_vars=False):
        """Parameters and persistent buffers by dotted name; tensors are detached unless keep_vars."""
        if args:  # the positional (destination, prefix, keep_vars) form
            destination = args[0]
            prefix = args[1] if len(args) > 1 else prefix
            keep_vars = args[2] if len(args) > 2 else keep_vars
        if destination is None:
            destination = OrderedDict()
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p if keep_vars else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = b if keep_vars else b.detach()
        for name, m in self._modules.items():
            if m is not None:
                m.state_dict(destination=destination, prefix=prefix + name + ".", keep_vars=keep_vars)
        return destination

    def _load_from_state_dict(self, state_dict, prefix, strict, missing_keys, unexpected_keys, error_msgs,
                              assign=False):
        persistent = {k: v for k, v in self._buffers.items() if k not in self._non_persistent_buffers_set}
        local = {k: v for k, v in itertools.chain(self._parameters.items(), persistent.items()) if v is not None}
        for name, param in local.items():
            key = prefix + name
            if key not in state_dict:
                if strict:
                    missing_keys.append(key)
                continue
            value = state_dict[key]
            if not isinstance(value, Tensor):
                error_msgs.append('While copying the parameter named "%s", expected torch.Tensor or Tensor-like '
                                  "object from checkpoint but received %s" % (key, type(value)))
                continue
            if value.shape != param.shape:
                error_msgs.append("size mismatch for %s: copying a param with shape %r from checkpoint, the shape in "
                                  "current model is %r." % (key, value.shape, param.shape))
                continue
            try:
                if assign:  # take the checkpoint's tensor itself (keeping the Parameter type and flag)
                    if name in self._parameters:
                        self._parameters[name] = Parameter(value.detach(), param.requires_grad)
                    else:
                        self._buffers[name] = value
                else:
                    with no_grad():
                        param.copy_(value)
            except Exception as ex:
                error_msgs.append('While copying the parameter named "%s", whose dimensions in the model are %r and '
                                  "whose dimensions in the checkpoint are %r, an exception occurred : %s."
                                  % (key, param.shape, value.shape, ex.args))
        if strict:
            for key in state_dict:
                if key.startswith(prefix):
                    name = key[len(prefix):].split(".", 1)[0]
                    if name not in self._modules and name not in local:
                        unexpected_keys.append(key)

    def load_state_dict(self, state_dict, strict=True, assign=False):
        """Copy ``state_dict``'s tensors into this module's parameters and buffers (in place, no grad), or
        with ``assign=True`` make them this module's tensors."""
        if not hasattr(state_dict, "keys") or not hasattr(state_dict, "__getitem__"):
            raise TypeError("Expected state_dict to be dict-like, got %s." % type(state_dict))
        missing, unexpected, errors = [], [], []

        def load(module, prefix):
            module._load_from_state_dict(state_dict, prefix, True, missing, unexpected, errors, assign)
            for name, child in module._modules.items():
                if child is not None:
                    load(child, prefix + name + ".")
        load(self, "")
        if strict:
            if unexpected:
                errors.insert(0, "Unexpected key(s) in state_dict: %s. " % ", ".join('"%s"' % k for k in unexpected))
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: %s. " % ", ".join('"%s"' % k for k in missing))
        if errors:
            raise RuntimeError("Error(s) in loading state_dict for %s:\n\t%s"
                               % (type(self).__name__, "\n\t".join(errors)))
        return _IncompatibleKeys(missing, unexpected)
