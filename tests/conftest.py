import numpy as np
import pytest

import jitgrad as jg


@pytest.fixture(autouse=True)
def _grad_mode_restored():
    """Every test starts in default grad mode and must leave it that way."""
    assert jg.is_grad_enabled() and not jg.is_inference_mode_enabled()
    yield
    assert jg.is_grad_enabled() and not jg.is_inference_mode_enabled(), "test left grad mode changed"


@pytest.fixture
def rng():
    return np.random.default_rng(0)
