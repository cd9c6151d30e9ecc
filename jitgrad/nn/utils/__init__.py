"""nn.utils: gradient clipping and packed sequences."""
from . import clip_grad, rnn  # noqa: F401
from .clip_grad import clip_grad_norm_, clip_grad_value_  # noqa: F401
