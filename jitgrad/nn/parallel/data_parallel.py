"""nn.DataParallel and nn.parallel.data_parallel on one device: PyTorch's single-process data parallelism
replicates a module over the visible GPUs; with one (or none, for DataParallel) it runs the module itself,
which is what jitgrad does. Several devices are refused (jitgrad.nn.parallel.DistributedDataParallel
trains over processes instead)."""
from ... import cuda
from ..._tensor import Tensor
from ..module import Module


def _devices(device_ids):
    ids = list(range(cuda.device_count())) if device_ids is None and cuda.is_available() else list(device_ids or ())
    if len(ids) > 1:
        raise NotImplementedError("DataParallel over %d devices is not supported by jitgrad: run one process per "
                                  "device with jitgrad.nn.parallel.DistributedDataParallel" % len(ids))
    return ids


def _to(inputs, kwargs, device_ids):
    """The tensor arguments on the one device (PyTorch's scatter to a single device)."""
    if not device_ids:
        return inputs, kwargs
    dev = "cuda:%d" % int(getattr(device_ids[0], "index", device_ids[0]) or 0)
    move = lambda a: a.to(dev) if isinstance(a, Tensor) else a  # noqa: E731
    return tuple(move(a) for a in inputs), {k: move(v) for k, v in kwargs.items()}


class DataParallel(Module):
    """``DataParallel(module, device_ids=None, output_device=None, dim=0)``: calls ``module`` (its state dict
    keys gain the ``module.`` prefix, as PyTorch's)."""

    def __init__(self, module, device_ids=None, output_device=None, dim=0):
        super().__init__()
        self.module = module
        self.device_ids = _devices(device_ids)
        self.output_device = output_device
        self.dim = dim
        if not self.device_ids:
            self.device_ids = []

    def forward(self, *inputs, **kwargs):
        inputs, kwargs = _to(inputs, kwargs, self.device_ids)
        return self.module(*inputs, **kwargs)


def data_parallel(module, inputs, device_ids=None, output_device=None, dim=0, module_kwargs=None):
    """torch.nn.parallel.data_parallel: ``module(*inputs)`` on the one GPU (PyTorch needs one: without it raises
    "device type could not be determined")."""
    if not isinstance(inputs, tuple):
        inputs = (inputs,) if inputs is not None else ()
    if not cuda.is_available():
        raise RuntimeError("device type could not be determined")
    ids = _devices(device_ids if device_ids is not None else [0])
    inputs, kwargs = _to(inputs, module_kwargs or {}, ids)
    return module(*inputs, **kwargs)
