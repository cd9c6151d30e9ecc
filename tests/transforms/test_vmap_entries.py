"""The entries without a batching rule, and the entries vmap refuses (their outputs' shapes depend on the values).
vmap over every entry's samples against a loop is a check of the op matrix (tests/ops/test_op_matrix.py)."""
import numpy as np
import pytest

import jitgrad as jg
from jitgrad.func.batching import RULES, missing
from jitgrad.ops import OPS

from helpers import call_of, samples_of

# the entry vmap runs one sample at a time: bincount, whose output's length is read from its input's values before
# dispatch (PyTorch's vmap loops over it too)
WITHOUT_RULE = ["bincount"]


def test_the_entries_without_a_batching_rule():
    assert missing() == WITHOUT_RULE


# entries whose outputs' shapes depend on each sample's values: vmap refuses them, as PyTorch's does
REFUSED = sorted(n for n, r in RULES.items() if r.__qualname__.startswith("dynamic_shape."))


@pytest.mark.parametrize("name", REFUSED)
def test_value_shaped_entries_are_refused(name):
    op = OPS[name]
    (x, *rest), kwargs = _samples(op)[0]
    rest = [jg.tensor(r) if isinstance(r, np.ndarray) else r for r in rest]
    with pytest.raises(RuntimeError, match="dynamic shape"):
        jg.vmap(lambda t: call_of(op)(t, *rest, **kwargs))(jg.tensor(np.stack([x, x])))


def _samples(op):
    for dtype in (np.float64, np.int64, np.bool_, np.complex128):
        s = samples_of(op, dtype)
        if s:
            return s
    return []
