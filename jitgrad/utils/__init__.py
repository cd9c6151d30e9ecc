"""jitgrad.utils: activation checkpointing (``jitgrad.utils.checkpoint``) and data loading (``jitgrad.utils.data``)."""
from . import checkpoint  # noqa: F401
from . import data  # noqa: F401
