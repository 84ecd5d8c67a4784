"""`ug.nn`: modules, layers and `ug.nn.functional`, written once with unigraph ops."""

from unigraph.nn import functional
from unigraph.nn.containers import ModuleDict, ModuleList
from unigraph.nn.layers import (
    AvgPool2D,
    BatchNorm2D,
    Conv2D,
    Dropout,
    Flatten,
    Linear,
    MaxPool2D,
    ReLU,
    Sequential,
    Sigmoid,
    Softmax,
    Tanh,
)
from unigraph.nn.module import Module, collect_updates
from unigraph.tensor import Parameter

__all__ = [
    "AvgPool2D", "BatchNorm2D", "Conv2D", "Dropout", "Flatten", "Linear", "MaxPool2D",
    "Module", "ModuleDict", "ModuleList", "Parameter", "ReLU", "Sequential", "Sigmoid",
    "Softmax", "Tanh", "collect_updates", "functional",
]
