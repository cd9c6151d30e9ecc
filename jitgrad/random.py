"""jitgrad.random (``torch.random``): the default generator's seed and state, and ``fork_rng``."""
import contextlib

from ._generator import default_generator, get_rng_state, initial_seed, manual_seed, seed, set_rng_state  # noqa: F401


@contextlib.contextmanager
def fork_rng(devices=None, enabled=True, _caller="fork_rng", _devices_kw="devices", device_type="cuda"):
    """Run a block with the default generator's state saved, and put it back afterwards (CUDA tensors draw
    from the same generator, so ``devices`` has nothing more to save)."""
    if not enabled:
        yield
        return
    state = get_rng_state()
    try:
        yield
    finally:
        set_rng_state(state)
