"""jitgrad.utils.data: datasets, samplers and the DataLoader, with torch.utils.data's API."""
from ._collate import default_collate, default_convert  # noqa: F401
from ._worker import WorkerInfo, get_worker_info  # noqa: F401
from .dataloader import DataLoader  # noqa: F401
from .dataset import (ChainDataset, ConcatDataset, Dataset, IterableDataset, StackDataset, Subset,  # noqa: F401
                      TensorDataset, random_split)
from .sampler import (BatchSampler, RandomSampler, Sampler, SequentialSampler, SubsetRandomSampler,  # noqa: F401
                      WeightedRandomSampler)
from .distributed import DistributedSampler  # noqa: F401
