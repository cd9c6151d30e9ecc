"""jitgrad.nn: Module, Parameter, layers, losses, init and functional, with PyTorch's API."""
from . import functional, init, utils  # noqa: F401
from .module import Module  # noqa: F401
from .modules import *  # noqa: F401,F403
from .parameter import Parameter  # noqa: F401
