"""nn.init.orthogonal_, sparse_, dirac_ and the deprecated names without the underscore."""
import numpy as np
import pytest

import jitgrad as jg
import jitgrad.nn.functional as F
from jitgrad import nn


@pytest.mark.parametrize("shape", [(3, 5), (5, 3), (4, 2, 3)])
def test_orthogonal(shape):
    jg.manual_seed(0)
    w = nn.init.orthogonal_(jg.empty(*shape, dtype=jg.float64), gain=2.0).numpy().reshape(shape[0], -1)
    small = min(w.shape)
    gram = w @ w.T if w.shape[0] <= w.shape[1] else w.T @ w
    np.testing.assert_allclose(gram, 4.0 * np.eye(small), atol=1e-12)
    with pytest.raises(ValueError, match="Only tensors with 2 or more dimensions are supported"):
        nn.init.orthogonal_(jg.empty(3))


def test_sparse():
    jg.manual_seed(0)
    w = nn.init.sparse_(jg.empty(10, 6), sparsity=0.3, std=0.5).numpy()
    assert ((w == 0).sum(0) == 3).all()  # ceil(0.3 * 10) zeros in every column
    with pytest.raises(ValueError, match="Only tensors with 2 dimensions are supported"):
        nn.init.sparse_(jg.empty(2, 2, 2), 0.1)


def test_dirac_is_the_identity_convolution():
    w = nn.init.dirac_(jg.empty(4, 4, 3, 3))
    x = jg.randn(2, 4, 5, 5)
    np.testing.assert_allclose(F.conv2d(x, w, padding=1).numpy(), x.numpy(), atol=1e-6)
    w = nn.init.dirac_(jg.empty(6, 3, 3), groups=2)
    x = jg.randn(1, 6, 7)
    np.testing.assert_allclose(F.conv1d(x, w, padding=1, groups=2).numpy(), x.numpy(), atol=1e-6)
    with pytest.raises(ValueError, match="dim 0 must be divisible by groups"):
        nn.init.dirac_(jg.empty(5, 2, 3), groups=2)
    with pytest.raises(ValueError, match="Only tensors with 3, 4, or 5 dimensions are supported"):
        nn.init.dirac_(jg.empty(2, 2))


def test_deprecated_names():
    with pytest.warns(FutureWarning, match=r"`nn.init.uniform` is now deprecated in favor of `nn.init.uniform_`."):
        t = nn.init.uniform(jg.empty(3), 2.0, 3.0)
    assert (t.numpy() >= 2).all()
    with pytest.warns(FutureWarning, match="nn.init.dirac"):
        nn.init.dirac(jg.empty(2, 2, 3))


@pytest.mark.torch
def test_every_torch_init_function_exists():
    torch = pytest.importorskip("torch")
    helpers = {"Callable", "Literal", "ParamSpec", "TypeVar", "torch", "warnings"}
    assert [n for n in dir(torch.nn.init) if not n.startswith("_") and n not in helpers and not hasattr(nn.init, n)] \
        == []
