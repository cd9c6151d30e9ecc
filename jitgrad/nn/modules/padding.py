"""nn.modules.padding: the padding layers at PyTorch's module path (made in sampling.py)."""
from .sampling import PADDING

globals().update(PADDING)
__all__ = sorted(PADDING)
