"""jitgrad.utils: activation checkpointing (``jitgrad.utils.checkpoint``)."""
from . import checkpoint  # noqa: F401
