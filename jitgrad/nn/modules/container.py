"""Sequential, ModuleList and ModuleDict."""
import operator
from collections import OrderedDict

from ..module import Module


def _index(idx, size):
    i = operator.index(idx)
    if not -size <= i < size:
        raise IndexError("index {} is out of range".format(idx))
    return i % size


class _Indexed(Module):
    """Shared by Sequential and ModuleList: submodules named '0', '1', ... in order."""

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return self._from_list(list(self._modules.values())[idx])
        return list(self._modules.values())[_index(idx, len(self))]

    def __setitem__(self, idx, module):
        setattr(self, list(self._modules)[_index(idx, len(self))], module)

    def __delitem__(self, idx):
        if isinstance(idx, slice):
            for key in list(self._modules)[idx]:
                delattr(self, key)
        else:
            delattr(self, list(self._modules)[_index(idx, len(self))])
        self._renumber()

    def _renumber(self):
        self.__dict__["_modules"] = {str(i): m for i, m in enumerate(self._modules.values())}

    def __dir__(self):
        return [k for k in super().__dir__() if not k.isdigit()]

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules):
        for m in modules:
            self.append(m)
        return self

    def insert(self, index, module):
        n = len(self)
        if not -n <= index <= n:
            raise IndexError("Index out of range: {}".format(index))
        index = index + n if index < 0 else index
        items = list(self._modules.values())
        items.insert(index, module)
        self.__dict__["_modules"] = {}
        for m in items:
            self.append(m)
        return self

    def pop(self, key):
        m = self[key]
        del self[key]
        return m

    def __add__(self, other):
        return self._from_list(list(self) + list(other))

    def __iadd__(self, modules):
        return self.extend(modules)


class Sequential(_Indexed):
    """Modules applied one after another: ``Sequential(a, b)(x) == b(a(x))``."""

    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for key, module in args[0].items():
                self.add_module(key, module)
        else:
            for i, module in enumerate(args):
                self.add_module(str(i), module)

    def __getitem__(self, idx):
        if isinstance(idx, slice):  # keeps the names (and so the state_dict keys) of the slice
            return type(self)(OrderedDict(list(self._modules.items())[idx]))
        return super().__getitem__(idx)

    def _from_list(self, modules):
        return type(self)(*modules)

    def forward(self, input):
        for module in self:
            input = module(input)
        return input


class ModuleList(_Indexed):
    """A list of modules whose parameters the owner registers (no forward of its own)."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def _from_list(self, modules):
        return type(self)(modules)


class ModuleDict(Module):
    """A dict of modules, in insertion order, whose parameters the owner registers."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key):
        return self._modules[key]

    def __setitem__(self, key, module):
        self.add_module(key, module)

    def __delitem__(self, key):
        del self._modules[key]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, key):
        return key in self._modules

    def clear(self):
        self._modules.clear()

    def pop(self, key):
        v = self[key]
        del self[key]
        return v

    def keys(self):
        return self._modules.keys()

    def items(self):
        return self._modules.items()

    def values(self):
        return self._modules.values()

    def update(self, modules):
        items = modules.items() if hasattr(modules, "items") else modules
        for key, module in items:
            self[key] = module
