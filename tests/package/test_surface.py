"""Names programs reach: torch.pi/e/inf/nan, Tensor.is_* predicates, PyTorch's nn.modules paths."""
import importlib
import math

import pytest

import jitgrad as jg


def test_constants():
    assert jg.pi == math.pi and jg.e == math.e and jg.inf == math.inf and math.isnan(jg.nan)


def test_device_predicates():
    t = jg.ones(2)
    assert t.is_cpu and not t.is_cuda
    assert not any(getattr(t, n) for n in ("is_xpu", "is_mps", "is_meta", "is_ipu", "is_xla", "is_hpu", "is_maia",
                                           "is_mtia", "is_vulkan", "is_mkldnn", "is_quantized", "is_nested"))
    assert t.is_signed() and not jg.ones(2, dtype=jg.bool).is_signed()
    assert jg.tensor([2]).is_nonzero() and not jg.tensor(0.0).is_nonzero()
    with pytest.raises(RuntimeError, match="Boolean value of Tensor with more than one value is ambiguous"):
        t.is_nonzero()
    assert t.is_same_size(jg.zeros(2)) and not t.is_same_size(jg.zeros(3))
    assert not (t.is_shared() or t.is_pinned() or t.is_conj() or t.is_neg() or t.is_distributed())


@pytest.mark.parametrize("path,names", [
    ("linear", ["NonDynamicallyQuantizableLinear", "Linear", "Identity", "Bilinear"]),
    ("batchnorm", ["_BatchNorm", "BatchNorm1d", "BatchNorm2d"]), ("module", ["Module"]),
    ("utils", ["_single", "_pair", "_triple", "_quadruple", "_ntuple"]), ("activation", ["MultiheadAttention", "ReLU"]),
    ("upsampling", ["Upsample", "UpsamplingNearest2d", "UpsamplingBilinear2d"]), ("padding", ["ZeroPad2d"]),
    ("dropout", ["_DropoutNd", "Dropout2d"]), ("pixelshuffle", ["PixelShuffle"]), ("conv", ["_ConvNd"]),
    ("loss", ["_Loss", "_WeightedLoss"])])
def test_module_paths(path, names):
    mod = importlib.import_module("jitgrad.nn.modules." + path)
    assert all(hasattr(mod, n) for n in names)


def test_nn_modules_linear_subclass_and_utils():
    from jitgrad.nn.modules.linear import NonDynamicallyQuantizableLinear
    from jitgrad.nn.modules.utils import _pair
    assert issubclass(NonDynamicallyQuantizableLinear, jg.nn.Linear) and _pair(3) == (3, 3) and _pair((1, 2)) == (1, 2)
    up = jg.nn.UpsamplingBilinear2d(scale_factor=2)
    assert repr(up) == "UpsamplingBilinear2d(scale_factor=2.0, mode='bilinear')"
    assert up(jg.ones(1, 1, 2, 2)).shape == (1, 1, 4, 4)


def test_sum_to_size_to_an_incompatible_size():
    x = jg.ones(2, 3)
    for size in [(4,), (1, 2, 3, 4)]:
        with pytest.raises(RuntimeError, match=r"size \{\[%s\]\} is not expandable to size \{\[2, 3\]\}\."
                                               % ", ".join(map(str, size))):
            x.sum_to_size(*size)
    assert x.sum_to_size(2, 1).tolist() == [[3.0], [3.0]]
