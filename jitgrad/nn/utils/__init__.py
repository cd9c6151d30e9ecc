"""nn.utils: gradient clipping, packed sequences, parametrizations and the hook-based weight and spectral norms."""
from . import clip_grad, parametrizations, parametrize, rnn  # noqa: F401
from .clip_grad import clip_grad_norm_, clip_grad_value_  # noqa: F401
from .weight_norm import remove_weight_norm, weight_norm  # noqa: F401
from .spectral_norm import remove_spectral_norm, spectral_norm  # noqa: F401
