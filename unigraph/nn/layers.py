"""Layers: Linear, Conv2D, 2-D pooling, Flatten, Dropout, BatchNorm2D, Sequential.
(More in activations.py, normalization.py, embedding.py and conv_layers.py.)

Each is written once with unigraph ops. Weights are initialised in NumPy from unigraph's
seeded generator (`ug.init`), so a seed gives the same layer on every backend. Images are
NCHW.
"""

from __future__ import annotations

import numpy as np

from unigraph import api
from unigraph import init as initializers
from unigraph.api.operands import _exact_int, _pair
from unigraph.errors import ShapeError
from unigraph.nn import functional as F
from unigraph.nn.module import Module, update_buffer
from unigraph.tensor import Parameter, Tensor

__all__ = [
    "AvgPool2D", "BatchNorm2D", "Conv2D", "Dropout", "Flatten", "Linear", "MaxPool2D",
    "Sequential",
]


def _label(module: Module) -> str:
    return f"{type(module).__name__} {module.path!r}" if module.path else type(module).__name__


def _act_name(act) -> str:
    return act if isinstance(act, str) else getattr(act, "__name__", repr(act))


def _check_features(layer, x) -> None:
    """Refuse an input whose last dim is not the Linear `layer`'s in_features."""
    if type(x) is Tensor:  # (its shape is a tuple: the usual case, one test)
        shape = x.shape
    else:
        shape = tuple(x.shape) if hasattr(x, "shape") else np.shape(x)
    if not shape or shape[-1] != layer.in_features:
        raise ShapeError(
            f"{_label(layer)} expects inputs whose last dimension is in_features = "
            f"{layer.in_features} (weight {list(layer.weight.shape)}), but got an input of "
            f"shape {list(shape)}; flatten images first (ug.nn.Flatten) or fix in_features"
        )


class Linear(Module):
    """y = act(x @ weight + bias), weight [in_features, out_features], bias [out_features].

    Defaults: Xavier-uniform weight, zero bias (Keras' and Paddle's defaults). `lr_scale`
    multiplies the learning rate of both (Paddle's `ParamAttr(learning_rate=...)`). The
    weight carries the storage hint `order="F"`: torch keeps it column-major, as its own
    Linear keeps `weight.t()`, so it runs the same kernels (the values stay [in, out]).

    >>> fc = ug.nn.Linear(784, 10, act="relu")
    """

    torch_transposed = ("weight",)  # torch's nn.Linear stores [out_features, in_features]

    def __init__(self, in_features, out_features, bias=True, act=None, weight_init=None,
                 bias_init=None, lr_scale=1.0, dtype="float32"):
        super().__init__()
        in_features, out_features = int(in_features), int(out_features)
        # Plain attributes of a module that registers nothing yet: set directly, without
        # Module.__setattr__'s checks (a model of 100 layers is built in ~1 ms).
        own = self.__dict__
        own["in_features"] = in_features
        own["out_features"] = out_features
        own["act"] = act
        own["_act"] = F.activation(act)
        own["bias"] = None
        # Drawn when first read (ug.init.parameter): a loaded layer never draws.
        self._register_new("weight", initializers.parameter(
            weight_init or initializers.DEFAULT_WEIGHT, (in_features, out_features),
            dtype, in_features, out_features, lr_scale=lr_scale, order="F"))
        if bias:
            self._register_new("bias", initializers.parameter(
                bias_init or initializers.DEFAULT_BIAS, (out_features,), dtype,
                in_features, out_features, lr_scale=lr_scale))

    def forward(self, x):
        # (the check is a call, not an `if` here: a traced forward then has no control flow
        # for autograph to convert, ~2 us a layer)
        _check_features(self, x)
        return self._act(F.linear(x, self.weight, self.bias))

    def extra_repr(self):
        act = f", act={_act_name(self.act)!r}" if self.act is not None else ""
        return f"{self.in_features}, {self.out_features}, bias={self.bias is not None}{act}"


class Conv2D(Module):
    """y = act(conv2d(x, weight, bias)) on NCHW x: the bias goes into the conv op itself.

    weight [out_channels, in_channels / groups, kh, kw], bias [out_channels]; symmetric zero
    `padding`; `stride`, `dilation` and `groups` as in every framework. Defaults:
    Xavier-uniform weight, zero bias.

    >>> conv = ug.nn.Conv2D(3, 2, 3, act="relu", weight_init=ug.init.xavier_normal(),
    ...                     lr_scale=0.001)
    """

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 dilation=1, groups=1, bias=True, act=None, weight_init=None, bias_init=None,
                 lr_scale=1.0, dtype="float32"):
        super().__init__()
        self.in_channels, self.out_channels = int(in_channels), int(out_channels)
        self.kernel_size = _pair(kernel_size, "kernel_size")
        self.stride = _pair(stride, "stride")
        self.padding = _pair(padding, "padding")
        self.dilation = _pair(dilation, "dilation")
        self.groups = _exact_int(groups, "groups")
        if self.in_channels % self.groups or self.out_channels % self.groups:
            raise ValueError(
                f"Conv2D: in_channels ({self.in_channels}) and out_channels "
                f"({self.out_channels}) must both be multiples of groups ({self.groups})"
            )
        self.act = act
        self._act = F.activation(act)
        shape = (self.out_channels, self.in_channels // self.groups, *self.kernel_size)
        fan_in, fan_out = initializers.fans(shape)
        self.weight = initializers.parameter(weight_init or initializers.DEFAULT_WEIGHT,
                                             shape, dtype, fan_in, fan_out, lr_scale=lr_scale)
        self.bias = None
        if bias:
            self.bias = initializers.parameter(bias_init or initializers.DEFAULT_BIAS,
                                               (self.out_channels,), dtype, fan_in, fan_out,
                                               lr_scale=lr_scale)

    def forward(self, x):
        shape = tuple(x.shape) if hasattr(x, "shape") else np.shape(x)
        if len(shape) != 4 or shape[1] != self.in_channels:
            raise ShapeError(
                f"{_label(self)} expects NCHW inputs with {self.in_channels} channels "
                f"(weight {list(self.weight.shape)}), but got an input of shape {list(shape)}"
            )
        out = api.conv2d(x, self.weight, self.bias, stride=self.stride, padding=self.padding,
                         dilation=self.dilation, groups=self.groups)
        return self._act(out)

    def extra_repr(self):
        act = f", act={_act_name(self.act)!r}" if self.act is not None else ""
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}, padding={self.padding}{act}")


def _pool_padding(padding):
    """An int, (ph, pw) or ((top, bottom), (left, right)), as ug.max_pool2d takes it."""
    if isinstance(padding, int | np.integer):
        return _pair(padding, "padding")
    return tuple(tuple(int(v) for v in p) if isinstance(p, tuple | list) else int(p)
                 for p in padding)


class MaxPool2D(Module):
    """Maximum over each window of NCHW x. stride defaults to the kernel size; padding (an
    int, (ph, pw) or ((top, bottom), (left, right))) is -inf and at most kernel // 2 on each
    side; `dilation` spaces the window's taps; `ceil_mode` keeps a last partial window
    (PyTorch's rule).

    >>> ug.nn.MaxPool2D(3, stride=2, padding=1, ceil_mode=True)
    """

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False):
        super().__init__()
        self.kernel_size = _pair(kernel_size, "kernel_size")
        self.stride = _pair(stride, "stride") if stride is not None else self.kernel_size
        self.padding = _pool_padding(padding)
        self.dilation, self.ceil_mode = _pair(dilation, "dilation"), bool(ceil_mode)

    def forward(self, x):
        return api.max_pool2d(x, self.kernel_size, self.stride, self.padding, self.dilation,
                              self.ceil_mode)

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, "
                f"padding={self.padding}, dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class AvgPool2D(Module):
    """Mean over each window of NCHW x; stride and padding as MaxPool2D's, zeros. With
    `count_include_pad` (the default, as PyTorch) the padding counts in the mean; without
    it, a window divides by the input cells it covers. `ceil_mode` keeps a last partial
    window, whose cells past the padding never count.

    >>> ug.nn.AvgPool2D(2, padding=1, count_include_pad=False)
    """

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False,
                 count_include_pad=True):
        super().__init__()
        self.kernel_size = _pair(kernel_size, "kernel_size")
        self.stride = _pair(stride, "stride") if stride is not None else self.kernel_size
        self.padding = _pool_padding(padding)
        self.ceil_mode, self.count_include_pad = bool(ceil_mode), bool(count_include_pad)

    def forward(self, x):
        return api.avg_pool2d(x, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                              self.count_include_pad)

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, "
                f"padding={self.padding}, ceil_mode={self.ceil_mode}, "
                f"count_include_pad={self.count_include_pad}")


class Flatten(Module):
    """[N, d1, d2, ...] -> [N, d1 * d2 * ...] (from `start_axis` on)."""

    def __init__(self, start_axis=1):
        super().__init__()
        self.start_axis = int(start_axis)

    def forward(self, x):
        return F.flatten(x, self.start_axis)


class Dropout(Module):
    """Inverted dropout with drop probability `p` in training mode; the identity in eval mode.

    The mask comes from unigraph's generator (`ug.random.uniform`), so every backend drops
    the same units for the same seed, and a static graph draws a fresh mask on every run.
    """

    def __init__(self, p=0.5):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"Dropout: p must lie in [0, 1], got {p}")
        self.p = float(p)

    def forward(self, x):
        return F.dropout(x, self.p, self.training)

    def extra_repr(self):
        return f"p={self.p}"


class BatchNorm2D(Module):
    """Batch normalisation over the channels of NCHW x (PyTorch's semantics and defaults).

    Training mode (`module.train()`): with the batch's per-channel mean and *biased* variance
    (divide by n = N * H * W),

        y = (x - mean) / sqrt(var + eps) * weight + bias
        running_mean = (1 - momentum) * running_mean + momentum * mean
        running_var  = (1 - momentum) * running_var  + momentum * var * n / (n - 1)

    (the running variance takes the *unbiased* estimate, like PyTorch; momentum 0.1 like
    PyTorch, i.e. Paddle's momentum 0.9). Evaluation mode (`module.eval()`): normalises
    with running_mean and running_var and changes nothing.

    weight (gamma) starts at 1, bias (beta) at 0; running_mean at 0, running_var at 1; the
    running statistics are buffers: saved in `state_dict`, never trained. Inside a static
    training step they are graph updates (ug.assign), applied after the run like the
    weights' updates.
    """

    torch_only = ("num_batches_tracked",)  # (torch counts steps; momentum 0.1 needs no count)

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, dtype="float32"):
        super().__init__()
        self.num_features, self.eps, self.momentum = int(num_features), float(eps), \
            float(momentum)
        self.affine = affine
        if affine:
            self.weight = Parameter(np.ones(self.num_features, dtype=dtype))
            self.bias = Parameter(np.zeros(self.num_features, dtype=dtype))
        self.register_buffer("running_mean", np.zeros(self.num_features, dtype=dtype))
        self.register_buffer("running_var", np.ones(self.num_features, dtype=dtype))

    def forward(self, x):
        shape = tuple(x.shape) if hasattr(x, "shape") else np.shape(x)
        if len(shape) != 4 or shape[1] != self.num_features:
            raise ShapeError(
                f"{_label(self)} expects NCHW inputs with {self.num_features} channels, but "
                f"got an input of shape {list(shape)}"
            )
        channels = (1, self.num_features, 1, 1)
        if self.training:
            # (checked while tracing where N, H, W are known; else before each run)
            x = api.ensure_size(x, 2, axis=(0, 2, 3), message=(
                f"{_label(self)}: training mode needs more than one value per channel to "
                "estimate a variance"))
            unbiased = self._unbiased_factor(x, shape)
            mean = api.mean(x, axis=(0, 2, 3))
            centered = x - api.reshape(mean, channels)
            var = api.mean(centered * centered, axis=(0, 2, 3))
            m = self.momentum
            update_buffer(self, self.running_mean, self.running_mean * (1 - m) + mean * m)
            update_buffer(self, self.running_var,
                          self.running_var * (1 - m) + var * unbiased)
        else:
            mean, var = self.running_mean, self.running_var
            centered = x - api.reshape(mean, channels)
        out = centered / api.reshape(api.sqrt(var + self.eps), channels)
        if self.affine:
            out = out * api.reshape(self.weight, channels) + api.reshape(self.bias, channels)
        return out

    def _unbiased_factor(self, x, shape):
        """momentum * n / (n - 1), n = N * H * W the values per channel: a Python float
        where those dims are known; where input_spec leaves one open, counted when the
        program runs (a float64 sum of ones, the same float64 arithmetic, cast once to x's
        dtype: the bits the known sizes give)."""
        sizes = (shape[0], shape[2], shape[3])
        if None not in sizes:
            count = sizes[0] * sizes[1] * sizes[2]
            return self.momentum * count / (count - 1)
        count = api.sum(api.ones_like(x, "float64"), axis=(0, 2, 3))
        return api.cast(count * self.momentum / (count - 1.0), x.dtype)

    def extra_repr(self):
        return f"{self.num_features}, eps={self.eps}, momentum={self.momentum}"


class Sequential(Module):
    """Layers applied in order; children are named "0", "1", ...

    >>> ug.nn.Sequential(ug.nn.Linear(64, 256, act="relu"), ug.nn.Linear(256, 10))
    """

    def __init__(self, *layers):
        super().__init__()
        if len(layers) == 1 and isinstance(layers[0], list | tuple):
            layers = tuple(layers[0])
        for index, layer in enumerate(layers):
            if not isinstance(layer, Module):
                raise TypeError(f"Sequential: item {index} is a {type(layer).__name__}, "
                                "not a ug.nn.Module")
            self._register_new(str(index), layer)

    def __len__(self):
        return len(self._modules)

    def __getitem__(self, index):
        return list(self._modules.values())[index]

    def __iter__(self):
        return iter(self._modules.values())

    def append(self, layer: Module) -> Sequential:
        setattr(self, str(len(self._modules)), layer)
        return self

    def forward(self, x):
        return _chain(self._modules.values(), x)


def _chain(layers, x):
    """`x` through each of `layers` in turn. (A helper, not a loop in Sequential.forward:
    a traced forward then has no Python loop for autograph to convert, ~1 us a layer.)"""
    for layer in layers:
        x = layer(x)
    return x
