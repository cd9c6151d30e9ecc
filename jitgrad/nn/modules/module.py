"""nn.modules.module: where PyTorch programs import Module from."""
from ..module import Module  # noqa: F401
