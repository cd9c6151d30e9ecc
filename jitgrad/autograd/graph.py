"""jitgrad.autograd.graph: the backward graph's public names and the saved-tensor hook contexts.

The contexts (saved_tensors_hooks, save_on_cpu) are defined here. Node, AccumulateGrad, edges and
hooks are defined in jitgrad/_graph.py and SavedTensor in jitgrad/_saved.py, below Tensor and
dispatch, which use them; they are re-exported here, as PyTorch has them in torch.autograd.graph."""
from .._grad_mode import STATE
from .._graph import (LEAF_SEQUENCE, NO_EDGE, OVERLAP_MESSAGE, AccumulateGrad, Node,  # noqa: F401
                      RemovableHandle, accumulate_into, accumulate_locked, accumulate_node, add_hook, edge,
                      type_name)
from .._saved import FREED_MESSAGE, SavedTensor  # noqa: F401


class saved_tensors_hooks:
    """Context manager: every tensor saved for backward inside it goes through ``pack_hook`` and comes
    back through ``unpack_hook`` (thread-local; the innermost pair wins)."""

    def __init__(self, pack_hook, unpack_hook):
        self.pair = (pack_hook, unpack_hook)

    def __enter__(self):
        STATE.saved_tensors_hooks = STATE.saved_tensors_hooks + (self.pair,)
        return self

    def __exit__(self, *exc):
        STATE.saved_tensors_hooks = STATE.saved_tensors_hooks[:-1]


class save_on_cpu(saved_tensors_hooks):
    """Context manager: tensors saved for backward inside it are kept in host memory. A device tensor
    is copied to the CPU when saved and back to its device when backward reads it (its history
    re-attached); a CPU tensor is already there and is kept as it is, as in PyTorch."""

    def __init__(self, pin_memory=False, device_type="cuda"):
        super().__init__(_pack_on_cpu, _unpack_from_cpu)


def _pack_on_cpu(t):
    if t.device.type == "cpu":
        return None, t, None, 0
    return t.device, t.detach().cpu(), t.grad_fn, t._output_nr


def _unpack_from_cpu(packed):
    device, t, grad_fn, output_nr = packed
    if device is None:
        return t
    t = t.to(device)
    return t._alias(grad_fn=grad_fn, output_nr=output_nr) if grad_fn is not None else t
