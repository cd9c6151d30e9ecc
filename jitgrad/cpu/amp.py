"""jitgrad.cpu.amp: the deprecated CPU spellings of jitgrad.amp's autocast and GradScaler."""
from .. import _dtype as D
from ..amp._deprecated import spellings

__all__ = ["autocast", "GradScaler"]

autocast, GradScaler = spellings("cpu", D.bfloat16, __name__)
