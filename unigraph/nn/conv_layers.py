"""More conv and pool layers: Conv1D, ConvTranspose2D, MaxPool1D, AvgPool1D and
AdaptiveAvgPool2D (Conv2D, MaxPool2D and AvgPool2D are in `layers.py`). Weights come from
unigraph's seeded generator, as every layer's; 1-D layers take [N, C, L].

>>> up = ug.nn.ConvTranspose2D(16, 8, 3, stride=2, padding=1, output_padding=1)
>>> pool = ug.nn.AdaptiveAvgPool2D(1)   # global average pooling
"""

from __future__ import annotations

import numpy as np

from unigraph import init as initializers
from unigraph.api.operands import _exact_int, _pair
from unigraph.errors import ShapeError
from unigraph.nn import functional_layers as F
from unigraph.nn.functional import activation
from unigraph.nn.module import Module

__all__ = ["AdaptiveAvgPool2D", "AvgPool1D", "Conv1D", "ConvTranspose2D", "MaxPool1D"]


def _weight_and_bias(module, shape, fans, bias, weight_init, bias_init, lr_scale, dtype):
    fan_in, fan_out = fans
    module.weight = initializers.parameter(weight_init or initializers.DEFAULT_WEIGHT,
                                           shape, dtype, fan_in, fan_out, lr_scale=lr_scale)
    module.bias = None
    if bias:
        module.bias = initializers.parameter(bias_init or initializers.DEFAULT_BIAS,
                                             (module.out_channels,), dtype, fan_in, fan_out,
                                             lr_scale=lr_scale)


def _check_groups(name, in_channels, out_channels, groups):
    if groups < 1 or in_channels % groups or out_channels % groups:
        raise ValueError(f"{name}: in_channels ({in_channels}) and out_channels "
                         f"({out_channels}) must both be multiples of groups ({groups})")


def _check_input(module, x, rank, layout):
    shape = tuple(x.shape) if hasattr(x, "shape") else np.shape(x)
    if len(shape) != rank or shape[1] != module.in_channels:
        raise ShapeError(
            f"{type(module).__name__} expects {layout} inputs with {module.in_channels} "
            f"channels (weight {list(module.weight.shape)}), but got an input of shape "
            f"{list(shape)}"
        )


class Conv1D(Module):
    """y = act(conv1d(x, weight, bias)) on x [N, C, L]: weight [out_channels, in_channels /
    groups, kernel_size], bias [out_channels]; stride, padding (zeros, both ends), dilation
    and groups as in every framework. Runs as the conv2d op over a unit height. Defaults:
    Xavier-uniform weight, zero bias.

    >>> conv = ug.nn.Conv1D(16, 32, 5, padding=2, act="relu")
    """

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 dilation=1, groups=1, bias=True, act=None, weight_init=None, bias_init=None,
                 lr_scale=1.0, dtype="float32"):
        super().__init__()
        self.in_channels, self.out_channels = int(in_channels), int(out_channels)
        self.kernel_size = _exact_int(kernel_size, "kernel_size")
        self.stride, self.padding = _exact_int(stride, "stride"), _exact_int(padding, "padding")
        self.dilation = _exact_int(dilation, "dilation")
        self.groups = _exact_int(groups, "groups")
        _check_groups("Conv1D", self.in_channels, self.out_channels, self.groups)
        self.act, self._act = act, activation(act)
        shape = (self.out_channels, self.in_channels // self.groups, self.kernel_size)
        _weight_and_bias(self, shape, initializers.fans(shape), bias, weight_init, bias_init,
                         lr_scale, dtype)

    def forward(self, x):
        _check_input(self, x, 3, "[N, C, L]")
        return self._act(F.conv1d(x, self.weight, self.bias, self.stride, self.padding,
                                  self.dilation, self.groups))

    def extra_repr(self):
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}, padding={self.padding}")


class ConvTranspose2D(Module):
    """y = act(conv_transpose2d(x, weight, bias)) on NCHW x: the layer that upsamples
    (PyTorch's ConvTranspose2d). weight [in_channels, out_channels / groups, kh, kw], bias
    [out_channels]. Output size (H - 1) * stride - 2 * padding + dilation * (kh - 1) +
    output_padding + 1; output_padding (< stride or dilation) picks among the sizes a
    strided conv maps to the same input size. Defaults: Xavier-uniform weight (fans of the
    conv it transposes), zero bias.

    >>> up = ug.nn.ConvTranspose2D(16, 8, 3, stride=2, padding=1, output_padding=1)  # 2x
    """

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 output_padding=0, dilation=1, groups=1, bias=True, act=None,
                 weight_init=None, bias_init=None, lr_scale=1.0, dtype="float32"):
        super().__init__()
        self.in_channels, self.out_channels = int(in_channels), int(out_channels)
        self.kernel_size = _pair(kernel_size, "kernel_size")
        self.stride, self.padding = _pair(stride, "stride"), _pair(padding, "padding")
        self.output_padding = _pair(output_padding, "output_padding")
        self.dilation, self.groups = _pair(dilation, "dilation"), _exact_int(groups, "groups")
        _check_groups("ConvTranspose2D", self.in_channels, self.out_channels, self.groups)
        self.act, self._act = act, activation(act)
        shape = (self.in_channels, self.out_channels // self.groups, *self.kernel_size)
        transposed = (self.out_channels, self.in_channels // self.groups, *self.kernel_size)
        _weight_and_bias(self, shape, initializers.fans(transposed), bias, weight_init,
                         bias_init, lr_scale, dtype)

    def forward(self, x):
        _check_input(self, x, 4, "NCHW")
        return self._act(F.conv_transpose2d(
            x, self.weight, self.bias, self.stride, self.padding, self.output_padding,
            self.dilation, self.groups))

    def extra_repr(self):
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}, padding={self.padding}, "
                f"output_padding={self.output_padding}")


class MaxPool1D(Module):
    """Maximum over windows of x [N, C, L]; stride defaults to the kernel size; padding an
    int or (left, right), -inf, at most kernel // 2; dilation and ceil_mode as MaxPool2D.

    >>> ug.nn.MaxPool1D(2)(ug.ones((1, 3, 8))).shape     # (1, 3, 4)
    """

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False):
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding
        self.dilation, self.ceil_mode = dilation, bool(ceil_mode)

    def forward(self, x):
        return F.max_pool1d(x, self.kernel_size, self.stride, self.padding, self.dilation,
                            self.ceil_mode)

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, "
                f"padding={self.padding}, dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class AvgPool1D(Module):
    """Mean over windows of x [N, C, L]; options as AvgPool2D (ceil_mode,
    count_include_pad).

    >>> ug.nn.AvgPool1D(2)(ug.ones((1, 3, 8))).shape     # (1, 3, 4)
    """

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False,
                 count_include_pad=True):
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding
        self.ceil_mode, self.count_include_pad = bool(ceil_mode), bool(count_include_pad)

    def forward(self, x):
        return F.avg_pool1d(x, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad)

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, "
                f"padding={self.padding}, ceil_mode={self.ceil_mode}, "
                f"count_include_pad={self.count_include_pad}")


class AdaptiveAvgPool2D(Module):
    """Average-pool NCHW x to `output_size` (an int or (oh, ow); None keeps that dim),
    whatever H and W are, with PyTorch's windows (they overlap where the size does not
    divide). AdaptiveAvgPool2D(1) is global average pooling.

    >>> ug.nn.AdaptiveAvgPool2D((2, 3))(x)   # [N, C, 2, 3]
    """

    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, x):
        return F.adaptive_avg_pool2d(x, self.output_size)

    def extra_repr(self):
        return f"output_size={self.output_size}"
