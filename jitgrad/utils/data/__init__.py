"""jitgrad.utils.data: datasets, samplers and the DataLoader, with torch.utils.data's API."""
from .sampler import Sampler  # noqa: F401
from .distributed import DistributedSampler  # noqa: F401
