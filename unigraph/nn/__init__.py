"""`ug.nn`: modules, layers and `ug.nn.functional`, written once with unigraph ops."""

from unigraph.nn import functional
from unigraph.nn.activations import (
    ELU,
    GELU,
    Identity,
    LeakyReLU,
    ReLU,
    Sigmoid,
    SiLU,
    Softmax,
    Tanh,
)
from unigraph.nn.containers import ModuleDict, ModuleList
from unigraph.nn.conv_layers import (
    AdaptiveAvgPool2D,
    AvgPool1D,
    Conv1D,
    ConvTranspose2D,
    MaxPool1D,
)
from unigraph.nn.embedding import Embedding
from unigraph.nn.layers import (
    AvgPool2D,
    BatchNorm2D,
    Conv2D,
    Dropout,
    Flatten,
    Linear,
    MaxPool2D,
    Sequential,
)
from unigraph.nn.module import Module, collect_updates
from unigraph.nn.normalization import GroupNorm, LayerNorm
from unigraph.nn.recurrent import GRU, LSTM
from unigraph.tensor import Parameter

__all__ = [
    "AdaptiveAvgPool2D", "AvgPool1D", "AvgPool2D", "BatchNorm2D", "Conv1D", "Conv2D",
    "ConvTranspose2D", "Dropout", "ELU", "Embedding", "Flatten", "GELU", "GroupNorm", "GRU",
    "Identity", "LayerNorm", "LeakyReLU", "Linear", "LSTM", "MaxPool1D", "MaxPool2D", "Module",
    "ModuleDict", "ModuleList", "Parameter", "ReLU", "Sequential", "SiLU", "Sigmoid",
    "Softmax", "Tanh", "collect_updates", "functional",
]
