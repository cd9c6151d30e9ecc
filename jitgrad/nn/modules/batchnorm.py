"""nn.modules.batchnorm: the batch norm layers at PyTorch's module path (defined in normalization.py)."""
from .normalization import BatchNorm1d, BatchNorm2d, _BatchNorm  # noqa: F401
