"""The unpickler behind ``jitgrad.load(..., weights_only=True)`` (PyTorch 2.6+'s default) and its allowlist.

A pickle names every class and function it calls by a GLOBAL; this unpickler resolves a GLOBAL only from
the allowlist -- tensors (which a jitgrad file holds apart from the pickle, as persistent ids), containers,
dtypes, devices, sizes -- and the globals the user marked safe (``add_safe_globals``, ``safe_globals``).
Anything else raises PyTorch's ``UnpicklingError`` before it is imported, so nothing outside the list is
ever called or built. The modules in ``BLOCKED`` are refused even when the user allowlists them.
"""
import _codecs
import _compat_pickle
import collections
import io
import pickle
import re

BLOCKED = ("sys", "os", "posix", "nt")
_user_globals = set()  # what add_safe_globals marked safe: callables, or (callable, "module.qualname")

UNSAFE_MESSAGE = (
    "In PyTorch 2.6, we changed the default value of the `weights_only` argument in `torch.load` "
    "from `False` to `True`. Re-running `torch.load` with `weights_only` set to `False` will likely succeed, "
    "but it can result in arbitrary code execution. Do it only if you got the file from a trusted source.")
DOCS_MESSAGE = ("\n\nCheck the documentation of torch.load to learn more about types accepted by default with "
                "weights_only https://pytorch.org/docs/stable/generated/torch.load.html.")


def add_safe_globals(safe_globals):
    """Mark classes and functions (or ``(callable, "module.qualname")`` pairs) as safe for weights_only loads."""
    global _user_globals
    _user_globals = _user_globals | set(safe_globals)


def get_safe_globals():
    """The globals the user marked safe for weights_only loads."""
    return list(_user_globals)


def clear_safe_globals():
    """Forget every global the user marked safe."""
    global _user_globals
    _user_globals = set()


class safe_globals:
    """Context manager: ``safe_globals`` are safe for weights_only loads inside the ``with`` block."""

    def __init__(self, safe_globals):
        self.safe_globals = safe_globals

    def __enter__(self):
        add_safe_globals(self.safe_globals)

    def __exit__(self, *exc):
        global _user_globals
        _user_globals = _user_globals - set(self.safe_globals)


def _user_allowed():
    out = {}
    for f in _user_globals:
        if isinstance(f, tuple):
            if len(f) != 2:
                raise ValueError("Expected tuple of length 2 (global, str of callable full path), but got tuple of "
                                 "length: %d" % len(f))
            if type(f[1]) is not str:
                raise TypeError("Expected second item in tuple to be str of callable full path, but got: %s"
                                % type(f[1]))
            out[f[1]] = f[0]
        else:
            out["%s.%s" % (f.__module__, f.__qualname__)] = f
    return out


def _allowed():
    """The globals every weights_only load may use (PyTorch's list, in jitgrad's names)."""
    from . import _dtype, _device, _tensor
    return {"collections.OrderedDict": collections.OrderedDict, "collections.Counter": collections.Counter,
            "jitgrad._tensor.Size": _tensor.Size, "jitgrad._device.Device": _device.Device,
            "jitgrad._dtype._by_name": _dtype._by_name, "_codecs.encode": _codecs.encode,
            "builtins.bytearray": bytearray, "builtins.set": set, "builtins.complex": complex}


def _python3_name(module, name):
    """A protocol-2 pickle's Python 2 names (``__builtin__.set``) as Python 3's, as pickle itself maps them."""
    if (module, name) in _compat_pickle.NAME_MAPPING:
        return _compat_pickle.NAME_MAPPING[(module, name)]
    return _compat_pickle.IMPORT_MAPPING.get(module, module), name


class Unpickler(pickle.Unpickler):
    """pickle's unpickler whose globals come from the allowlist only; tensors come from ``persistent_load``."""

    def __init__(self, file, persistent_load):
        super().__init__(file)
        self._tensor = persistent_load

    def find_class(self, module, name):
        module, name = _python3_name(module, name)
        full = "%s.%s" % (module, name)
        if module in BLOCKED:
            raise pickle.UnpicklingError("Trying to load unsupported GLOBAL %s whose module %s is blocked."
                                         % (full, module))
        for table in (_allowed(), _user_allowed()):
            if full in table:
                return table[full]
        if full.startswith("builtins"):  # PyTorch names a builtin without its module
            full = full[len("builtins."):] if full.startswith("builtins.") else full
        raise pickle.UnpicklingError(
            "Unsupported global: GLOBAL %s was not an allowed global by default. Please use "
            "`torch.serialization.add_safe_globals([%s])` or the `torch.serialization.safe_globals([%s])` context "
            "manager to allowlist this global if you trust this class/function." % (full, full, full))

    def persistent_load(self, pid):
        if type(pid) is not int:
            raise pickle.UnpicklingError("persistent_load id must be tuple or int, but got %s" % type(pid))
        return self._tensor(pid)


class FullUnpickler(pickle.Unpickler):
    """``weights_only=False``: any global (the caller trusts the file); tensors from ``persistent_load``."""

    def __init__(self, file, persistent_load):
        super().__init__(file)
        self._tensor = persistent_load

    def persistent_load(self, pid):
        return self._tensor(pid)


def weights_only_message(message):
    """PyTorch's text around an error of the weights_only unpickler (torch.load's _get_wo_message)."""
    if re.search(r"GLOBAL (\S+) was not an allowed global by default.", message):
        return ("Weights only load failed. This file can still be loaded, to do so you have two options, "
                "\033[1mdo those steps only if you trust the source of the checkpoint\033[0m. "
                "\n\t(1) %s\n\t(2) Alternatively, to load with `weights_only=True` please check the recommended "
                "steps in the following error message.\n\tWeightsUnpickler error: %s%s"
                % (UNSAFE_MESSAGE, message, DOCS_MESSAGE))
    out = "Weights only load failed. %s\n" % UNSAFE_MESSAGE
    if not re.search(r"whose module (\S+) is blocked", message):
        out += ("Please file an issue with the following so that we can make `weights_only=True` compatible with "
                "your use case: WeightsUnpickler error: ")
    return out + "\n\n" + message + DOCS_MESSAGE


def load(data, persistent_load, weights_only):
    """Unpickle ``data`` (bytes), restricted unless ``weights_only`` is False."""
    if not weights_only:
        return FullUnpickler(io.BytesIO(data), persistent_load).load()
    try:
        return Unpickler(io.BytesIO(data), persistent_load).load()
    except pickle.UnpicklingError as e:
        raise pickle.UnpicklingError(weights_only_message(str(e))) from None


def globals_in(data):
    """``module.name`` of every GLOBAL a pickle names (without running it)."""
    import pickletools
    out, strings = set(), []
    for op, arg, _ in pickletools.genops(data):
        if op.name == "GLOBAL":
            module, name = arg.split(" ", 1)
            out.add("%s.%s" % _python3_name(module, name))
        elif op.name == "STACK_GLOBAL" and len(strings) >= 2:
            out.add("%s.%s" % _python3_name(strings[-2], strings[-1]))
        elif isinstance(arg, str):
            strings.append(arg)
    return out


def unsafe_globals_in(data):
    """The globals a pickle names that a weights_only load would refuse."""
    safe = set(_allowed()) | set(_user_allowed())
    return sorted(g for g in globals_in(data) if g not in safe)


__all__ = ["add_safe_globals", "clear_safe_globals", "get_safe_globals", "safe_globals"]
