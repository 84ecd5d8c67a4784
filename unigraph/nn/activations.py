"""Activation layers: each applies one function of `ug` / `ug.nn.functional` elementwise
(Softmax along an axis), with the function's own options as the constructor's."""

from __future__ import annotations

from unigraph import api
from unigraph.nn import functional as F
from unigraph.nn.module import Module

__all__ = ["ELU", "GELU", "Identity", "LeakyReLU", "ReLU", "SiLU", "Sigmoid", "Softmax", "Tanh"]


class ReLU(Module):
    """max(x, 0)."""

    def forward(self, x):
        return F.relu(x)


class Sigmoid(Module):
    """1 / (1 + exp(-x))."""

    def forward(self, x):
        return F.sigmoid(x)


class Tanh(Module):
    """tanh(x)."""

    def forward(self, x):
        return F.tanh(x)


class Softmax(Module):
    """softmax along `axis`."""

    def __init__(self, axis=-1):
        super().__init__()
        self.axis = axis

    def forward(self, x):
        return F.softmax(x, self.axis)


class GELU(Module):
    """x * Phi(x) (`approximate="none"`, erf) or its tanh approximation (`"tanh"`), as
    torch.nn.GELU."""

    def __init__(self, approximate="none"):
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError(f"GELU: approximate must be 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate

    def forward(self, x):
        return api.gelu(x, self.approximate)

    def extra_repr(self):
        return f"approximate={self.approximate!r}"


class SiLU(Module):
    """x * sigmoid(x) (swish)."""

    def forward(self, x):
        return api.silu(x)


class LeakyReLU(Module):
    """x where x > 0, else negative_slope * x."""

    def __init__(self, negative_slope=0.01):
        super().__init__()
        self.negative_slope = float(negative_slope)

    def forward(self, x):
        return api.leaky_relu(x, self.negative_slope)

    def extra_repr(self):
        return f"negative_slope={self.negative_slope}"


class ELU(Module):
    """x where x > 0, else alpha * (exp(x) - 1)."""

    def __init__(self, alpha=1.0):
        super().__init__()
        self.alpha = float(alpha)

    def forward(self, x):
        return api.elu(x, self.alpha)

    def extra_repr(self):
        return f"alpha={self.alpha}"


class Identity(Module):
    """x itself (a placeholder layer, as torch.nn.Identity)."""

    def forward(self, x):
        return x
