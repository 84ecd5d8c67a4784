"""Normalisation layers over one sample at a time: LayerNorm and GroupNorm (PyTorch's
semantics and defaults). BatchNorm2D, which keeps running statistics, is in `layers.py`.

>>> norm = ug.nn.LayerNorm(64)
>>> norm = ug.nn.GroupNorm(4, 32)
"""

from __future__ import annotations

import numpy as np

from unigraph.errors import ShapeError
from unigraph.nn import functional_layers as F
from unigraph.nn.module import Module
from unigraph.tensor import Parameter

__all__ = ["GroupNorm", "LayerNorm"]


class LayerNorm(Module):
    """y = (x - mean) / sqrt(var + eps) * weight + bias, mean and (biased) variance over the
    last dims given by `normalized_shape` (an int or a tuple), per sample. weight starts at
    1 and bias at 0, both of shape normalized_shape (`elementwise_affine=False`: neither).

    >>> ug.nn.LayerNorm(64)(x)           # x [..., 64]
    >>> ug.nn.LayerNorm((8, 8))(images)  # over the last two dims
    """

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, dtype="float32"):
        super().__init__()
        shape = (normalized_shape,) if isinstance(normalized_shape, int | np.integer) else \
            tuple(normalized_shape)
        self.normalized_shape = tuple(int(d) for d in shape)
        self.eps, self.elementwise_affine = float(eps), bool(elementwise_affine)
        self.weight = self.bias = None
        if elementwise_affine:
            self.weight = Parameter(np.ones(self.normalized_shape, dtype=dtype))
            self.bias = Parameter(np.zeros(self.normalized_shape, dtype=dtype))

    def forward(self, x):
        return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")


class GroupNorm(Module):
    """Split the channels of x [N, C, ...] into `num_groups` groups; normalise each group of
    each sample over its channels and positions (mean, biased variance, eps), then
    `* weight + bias` per channel. weight starts at 1, bias at 0 ([C] each; `affine=False`:
    neither). GroupNorm(C, C) is instance norm; GroupNorm(1, C) is layer norm over C, H, W.

    >>> ug.nn.GroupNorm(2, 4)(x)   # x [N, 4, H, W]
    """

    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True, dtype="float32"):
        super().__init__()
        self.num_groups, self.num_channels = int(num_groups), int(num_channels)
        if self.num_groups < 1 or self.num_channels % self.num_groups:
            raise ValueError(f"GroupNorm: num_channels ({self.num_channels}) must be a "
                             f"multiple of num_groups ({self.num_groups})")
        self.eps, self.affine = float(eps), bool(affine)
        self.weight = self.bias = None
        if affine:
            self.weight = Parameter(np.ones(self.num_channels, dtype=dtype))
            self.bias = Parameter(np.zeros(self.num_channels, dtype=dtype))

    def forward(self, x):
        shape = tuple(x.shape) if hasattr(x, "shape") else np.shape(x)
        if len(shape) < 2 or shape[1] != self.num_channels:
            raise ShapeError(f"GroupNorm expects [N, {self.num_channels}, ...] inputs, but "
                             f"got an input of shape {list(shape)}")
        return F.group_norm(x, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}"
