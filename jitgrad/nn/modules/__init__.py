"""The layers of jitgrad.nn."""
from .attention import MultiheadAttention  # noqa: F401
from .activation import GELU, LogSoftmax, Sigmoid, Softmax, Softplus, Tanh  # noqa: F401
from .activation import GENERATED as _GENERATED  # modules named by op-table entries (ReLU, ELU, Hardtanh, ...)
from .container import ModuleDict, ModuleList, Sequential  # noqa: F401
from .conv import Conv1d, Conv2d, ConvTranspose1d, ConvTranspose2d  # noqa: F401
from .dropout import AlphaDropout, Dropout, Dropout1d, Dropout2d, Dropout3d, FeatureAlphaDropout  # noqa: F401
from .activation import (Hardshrink, PReLU, ReLU6, RReLU, Softmax2d, Softmin, Softshrink, Softsign,  # noqa: F401
                         Tanhshrink, Threshold)
from .pixelshuffle import PixelShuffle, PixelUnshuffle  # noqa: F401
from .upsampling import UpsamplingBilinear2d, UpsamplingNearest2d  # noqa: F401
from .linear import NonDynamicallyQuantizableLinear  # noqa: F401
from . import batchnorm, module, padding, upsampling, utils  # noqa: F401  (PyTorch's module paths)
from .flatten import Flatten, Unflatten  # noqa: F401
from .linear import Bilinear, Identity, Linear  # noqa: F401
from .loss import (BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, HuberLoss, KLDivLoss, L1Loss, MSELoss,  # noqa: F401
                   NLLLoss, SmoothL1Loss)
from .normalization import BatchNorm1d, BatchNorm2d, GroupNorm, LayerNorm  # noqa: F401
from .pooling import AdaptiveAvgPool2d, AvgPool2d, MaxPool2d  # noqa: F401
from .rnn import GRU, GRUCell, LSTM, LSTMCell, RNN, RNNBase, RNNCell, RNNCellBase  # noqa: F401
from .sparse import Embedding  # noqa: F401
from .transformer import (Transformer, TransformerDecoder, TransformerDecoderLayer, TransformerEncoder,  # noqa: F401
                          TransformerEncoderLayer)
from .distance import CosineSimilarity, PairwiseDistance  # noqa: F401
from .sampling import Fold, Unfold, Upsample  # noqa: F401
from .sampling import PADDING as _PADDING  # ReflectionPad2d, ReplicationPad1d, ZeroPad2d, ...
from .activation import GLU  # noqa: F401

__all__ = ["AdaptiveAvgPool2d", "AvgPool2d", "BCELoss", "BCEWithLogitsLoss", "BatchNorm1d", "BatchNorm2d", "Bilinear",
           "Conv1d", "Conv2d", "ConvTranspose1d", "ConvTranspose2d", "CrossEntropyLoss", "Dropout", "Embedding",
           "Flatten", "GELU", "GRU", "GRUCell", "LSTM", "LSTMCell", "GroupNorm", "HuberLoss", "Identity", "KLDivLoss",
           "L1Loss", "LayerNorm", "Linear", "LogSoftmax", "MSELoss", "MaxPool2d", "MultiheadAttention",
           "ModuleDict", "ModuleList", "NLLLoss", "RNN", "RNNBase", "RNNCell", "RNNCellBase", "Sequential",
           "Sigmoid", "SmoothL1Loss", "Softmax", "Softplus", "Tanh", "Transformer", "TransformerDecoder",
           "TransformerDecoderLayer", "TransformerEncoder", "TransformerEncoderLayer", "Unflatten"]
globals().update(_GENERATED)
globals().update(_PADDING)
__all__ += ["CosineSimilarity", "Fold", "GLU", "PairwiseDistance", "Unfold", "Upsample"] + sorted(_PADDING)
__all__ += sorted(_GENERATED)
__all__ += ["AlphaDropout", "Dropout1d", "Dropout2d", "Dropout3d", "FeatureAlphaDropout", "Hardshrink", "PReLU",
            "PixelShuffle", "PixelUnshuffle", "RReLU", "ReLU6", "Softmax2d", "Softmin", "Softshrink", "Softsign",
            "Tanhshrink", "Threshold", "UpsamplingBilinear2d", "UpsamplingNearest2d"]
