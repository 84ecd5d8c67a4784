"""ONNX importers for the layers of CNNs: Conv, ConvTranspose, MaxPool/AveragePool (pads,
auto_pad, ceil_mode, count_include_pad, dilations), GlobalAveragePool/GlobalMaxPool,
BatchNormalization and LRN, each written with unigraph's ops (same contract as
`unigraph.onnx.importers`, whose table spreads this one). 1-D convs and pools run as 2-D ones
with a trailing size-1 dim; 3-D ones and dilated average pools are compositions of the 2-D
ones (`unigraph.onnx.importers_3d`).
"""

from __future__ import annotations

import numpy as np

import unigraph as ug
import unigraph.nn.functional as F
from unigraph.ir import FLOAT_DTYPES
from unigraph.onnx.importers_3d import (
    average_pool_dilated,
    ceil_extra,
    conv3d,
    conv_transpose3d_full,
    pool3d,
    spatial_pads,
)


def _dtype(value) -> str:
    return str(value.dtype) if isinstance(value, ug.Tensor) else np.asarray(value).dtype.name


def _lrn(ctx, args, attrs):
    """x / (bias + alpha / size * sum of x^2 over `size` neighbouring channels) ^ beta, the
    window floor((size-1)/2) channels before and ceil((size-1)/2) after, zeros outside."""
    x, size = args[0], int(attrs["size"])
    squares = ug.pad(x * x, [(0, 0), ((size - 1) // 2, size // 2)]
                     + [(0, 0)] * (len(x.shape) - 2))
    channels = x.shape[1]
    total = None
    for k in range(size):
        begin = (0, k) + (0,) * (len(x.shape) - 2)
        end = (x.shape[0], k + channels) + tuple(x.shape[2:])
        part = ug.slice(squares, begin, end)  # an open dim (None): to its end
        total = part if total is None else total + part
    scale = total * (attrs.get("alpha", 1e-4) / size) + attrs.get("bias", 1.0)
    return x / ug.pow(scale, attrs.get("beta", 0.75))


def _spatial(ctx, x, attrs, kernel, what: str):
    """(x padded where ONNX's pads are asymmetric or auto, symmetric (ph, pw)) for a 2-D
    window op; strides and dilations as pairs."""
    if len(x.shape) != 4:
        ctx.refuse(f"{what} over {len(x.shape) - 2} spatial dims (unigraph has 2-D only)")
    begin, end, strides, dilations = spatial_pads(ctx, x.shape[2:], attrs, kernel, what)
    strides, dilations = tuple(strides), tuple(dilations)
    if begin == end:
        return x, tuple(begin), strides, dilations
    return (x, (begin, end)), None, strides, dilations


def _pad_asymmetric(x, pads, value):
    begin, end = pads
    return ug.pad(x, [(0, 0), (0, 0), (begin[0], end[0]), (begin[1], end[1])], value=value)


def _as_2d(attrs, n_pads: int) -> dict:
    """A 1-D op's attrs for the 2-D one over (length, 1)."""
    two = {key: list(attrs[key]) + [extra] for key, extra in (
        ("kernel_shape", 1), ("strides", 1), ("dilations", 1), ("output_padding", 0),
        ("output_shape", 1)) if key in attrs}
    if "pads" in attrs:
        two["pads"] = [attrs["pads"][0], 0, attrs["pads"][n_pads], 0]
    return {**attrs, **two}


def _conv(ctx, args, attrs):
    x, weight = args[0], args[1]
    bias = args[2] if len(args) > 2 else None
    if len(x.shape) == 5:
        return conv3d(ctx, args, attrs, _conv)
    if len(x.shape) == 3:
        out = _conv(ctx, [ug.expand_dims(x, -1), ug.expand_dims(weight, -1), bias],
                    _as_2d(attrs, 1))
        return ug.squeeze(out, -1)
    kernel = tuple(attrs.get("kernel_shape", weight.shape[2:]))
    x, padding, strides, dilations = _spatial(ctx, x, attrs, kernel, "Conv")
    if padding is None:
        x, padding = _pad_asymmetric(*x, 0.0), (0, 0)
    return ug.conv2d(x, weight, bias, stride=strides, padding=padding, dilation=dilations,
                     groups=attrs.get("group", 1))


def _conv_transpose(ctx, args, attrs):
    """ConvTranspose as `conv_transpose2d` without padding (every contribution, size
    (H - 1) * s + (k - 1) * d + 1), then cropped by ONNX's begin/end pads, or widened with
    zeros where output_padding or output_shape asks for more; the bias added last. A 1-D
    one runs with a trailing size-1 dim; a 3-D one as `importers_3d.conv_transpose3d_full`."""
    x, weight = args[0], args[1]
    bias = args[2] if len(args) > 2 else None
    if len(x.shape) == 3:
        out = _conv_transpose(ctx, [ug.expand_dims(x, -1), ug.expand_dims(weight, -1), bias],
                              _as_2d(attrs, 1))
        return ug.squeeze(out, -1)
    if len(x.shape) not in (4, 5):
        ctx.refuse(f"ConvTranspose over {len(x.shape) - 2} spatial dims (unigraph has 1-D, "
                   "2-D and 3-D)")
    n = len(x.shape) - 2
    kernel = tuple(attrs.get("kernel_shape", weight.shape[2:]))
    strides = tuple(attrs.get("strides", (1,) * n))
    dilations = tuple(attrs.get("dilations", (1,) * n))
    extra = tuple(attrs.get("output_padding", (0,) * n))
    sizes = x.shape[2:]
    full = [(size - 1) * s + (k - 1) * d + 1 for size, s, k, d in zip(sizes, strides, kernel,
                                                                      dilations)]
    auto = attrs.get("auto_pad", "NOTSET")
    if "output_shape" in attrs or auto in ("SAME_UPPER", "SAME_LOWER"):
        wanted = list(attrs.get("output_shape", [size * s for size, s in zip(sizes, strides)]))
        totals = [f + e - w for f, e, w in zip(full, extra, wanted[-n:])]
        upper = auto == "SAME_UPPER"
        begin = [t // 2 if upper else t - t // 2 for t in totals]
        end = [t - t // 2 if upper else t // 2 for t in totals]
    elif auto == "VALID":
        begin, end = [0] * n, [0] * n
    else:
        pads = list(attrs.get("pads", (0,) * 2 * n))
        begin, end = pads[:n], pads[n:]
    groups = attrs.get("group", 1)
    if n == 3:
        out = conv_transpose3d_full(ctx, x, weight, strides, dilations, groups)
    else:
        out = ug.conv_transpose2d(x, weight, None, stride=strides, dilation=dilations,
                                  groups=groups)
    # Output index i of ONNX's result is index i + begin of `full`, for i < full - begin
    # - end + output_padding: pad with zeros where that reaches outside, then crop.
    before = [max(-b, 0) for b in begin]
    after = [max(e - en, 0) for e, en in zip(extra, end)]
    if any(before) or any(after):
        out = ug.pad(out, [(0, 0), (0, 0)] + list(zip(before, after)))
    start = [b + p for b, p in zip(begin, before)]
    stop = [s + f - b - en + e for s, f, b, en, e in zip(start, full, begin, end, extra)]
    out = ug.slice(out, (0, 0, *start), (out.shape[0], out.shape[1], *stop))
    if bias is not None:
        out = out + ug.reshape(bias, (-1,) + (1,) * n)
    return out


def _explicit_pads(ctx, x, attrs, kernel, what):
    """(begin, end, extra, strides, dilations) of a 2-D window op, auto_pad resolved; `extra`
    is what ceil_mode adds after `end` (`importers_3d.ceil_extra`)."""
    x_pads, padding, strides, dilations = _spatial(ctx, x, attrs, kernel, what)
    begin, end = (list(padding), list(padding)) if padding is not None else \
        (list(x_pads[1][0]), list(x_pads[1][1]))
    extra = [0, 0]
    if attrs.get("ceil_mode", 0) and attrs.get("auto_pad", "NOTSET") in ("NOTSET", "VALID"):
        extra = ceil_extra(x.shape[2:], kernel, strides, dilations, begin, end)
    return begin, end, extra, strides, dilations


def _pool_in_2d(run):
    """A 1-D pool as the 2-D one with a trailing size-1 dim; a 3-D pool as two 2-D ones
    (`importers_3d.pool3d`)."""
    def pool(ctx, args, attrs):
        x = args[0]
        if len(x.shape) == 5:
            return pool3d(ctx, args, attrs, run)
        if len(x.shape) == 3:
            out = run(ctx, [ug.expand_dims(x, -1)], _as_2d(attrs, 1))
            return ug.squeeze(out, -1)
        if len(x.shape) != 4:
            ctx.refuse(f"{ctx.node.op_type} over {len(x.shape) - 2} spatial dims (unigraph "
                       "pools in 1-D, 2-D and 3-D)")
        return run(ctx, args, attrs)

    return pool


def _max_pool(ctx, args, attrs):
    if len(ctx.node.output) > 1 and ctx.node.output[1]:
        ctx.refuse("MaxPool's Indices output")
    kernel = tuple(attrs["kernel_shape"])
    begin, end, extra, strides, dilations = _explicit_pads(ctx, args[0], attrs, kernel,
                                                           "MaxPool")
    end = [e + more for e, more in zip(end, extra)]
    x, padding = args[0], tuple(begin)
    dtype = _dtype(x)
    if dtype not in FLOAT_DTYPES:
        # ONNX's MaxPool of int8/uint8 gives their dtype; ug.max_pool2d pools floats. A max
        # of float64 copies of integers is exact, and so is the cast back.
        x = ug.cast(x, "float64")
    if begin != end or any(b > k // 2 for b, k in zip(begin, kernel)):
        x, padding = _pad_asymmetric(x, (begin, end), -np.inf), (0, 0)
    out = ug.max_pool2d(x, kernel, stride=strides, padding=padding, dilation=dilations)
    return out if dtype in FLOAT_DTYPES else ug.cast(out, dtype)


def _average_pool(ctx, args, attrs):
    """A window sum over the padded image divided by ONNX's count: the window's positions
    inside the image, plus those in the pads with count_include_pad=1 (never those added
    for ceil_mode). The counts depend only on shapes, so they are computed at import."""
    x, kernel = args[0], tuple(attrs["kernel_shape"])
    if any(d != 1 for d in attrs.get("dilations", ())):
        return average_pool_dilated(ctx, args, attrs)
    begin, end, extra, strides, _ = _explicit_pads(ctx, x, attrs, kernel, "AveragePool")
    include = bool(attrs.get("count_include_pad", 0))
    if begin == end and not any(extra) and (include or not any(begin)) and all(
            b <= k // 2 for b, k in zip(begin, kernel)):
        return ug.avg_pool2d(x, kernel, stride=strides, padding=tuple(begin))
    mask = np.pad(np.ones(tuple(x.shape[2:])), list(zip(begin, end)),
                  constant_values=1.0 if include else 0.0)
    mask = np.pad(mask, [(0, e) for e in extra])
    windows = np.lib.stride_tricks.sliding_window_view(mask, kernel)
    counts = windows[::strides[0], ::strides[1]].sum(axis=(-2, -1))
    scale = (kernel[0] * kernel[1] / counts).astype(_dtype(x))
    padded = _pad_asymmetric(x, (begin, [e + more for e, more in zip(end, extra)]), 0.0)
    return ug.avg_pool2d(padded, kernel, stride=strides) * scale


def _global_average_pool(ctx, args, attrs):
    return ug.mean(args[0], axis=tuple(range(2, len(args[0].shape))), keepdims=True)


def _global_max_pool(ctx, args, attrs):
    return ug.max(args[0], axis=tuple(range(2, len(args[0].shape))), keepdims=True)


def _batch_norm(ctx, args, attrs):
    if attrs.get("training_mode", 0):
        ctx.refuse("BatchNormalization with training_mode=1 (export the model in eval mode)")
    x, scale, bias, mean, var = args[:5]
    shape = (-1,) + (1,) * (len(x.shape) - 2)
    inverse = ug.reshape(scale, shape) / ug.sqrt(ug.reshape(var, shape)
                                                  + attrs.get("epsilon", 1e-5))
    return (x - ug.reshape(mean, shape)) * inverse + ug.reshape(bias, shape)


def _per_channel(value, rank: int):
    return ug.reshape(value, (-1,) + (1,) * (rank - 2))


def _instance_norm(ctx, args, attrs):
    """(x - mean) / sqrt(var + epsilon) * scale + bias, mean and var over each sample's and
    channel's positions (dims 2 on), scale and bias per channel."""
    x, scale, bias = args[:3]
    rank = len(x.shape)
    return F.group_norm(x, x.shape[1], None, None, attrs.get("epsilon", 1e-5)) \
        * _per_channel(scale, rank) + _per_channel(bias, rank)


def _group_norm(ctx, args, attrs):
    """F.group_norm; scale and bias are per channel from opset 21, per group before it."""
    x, scale, bias = args[:3]
    groups, rank = int(attrs["num_groups"]), len(x.shape)
    if ctx.opset < 21:  # one scale and bias per group: each group's channels share them
        spread = ug.ones((1, x.shape[1] // groups), _dtype(scale))
        scale = ug.reshape(ug.reshape(scale, (groups, 1)) * spread, (-1,))
        bias = ug.reshape(ug.reshape(bias, (groups, 1)) * spread, (-1,))
    return F.group_norm(x, groups, None, None, attrs.get("epsilon", 1e-5)) \
        * _per_channel(scale, rank) + _per_channel(bias, rank)


NN_IMPORTERS = {
    "InstanceNormalization": _instance_norm,
    "GroupNormalization": _group_norm,
    "LRN": _lrn,
    "Conv": _conv,
    "ConvTranspose": _conv_transpose,
    "MaxPool": _pool_in_2d(_max_pool),
    "AveragePool": _pool_in_2d(_average_pool),
    "GlobalAveragePool": _global_average_pool,
    "GlobalMaxPool": _global_max_pool,
    "BatchNormalization": _batch_norm,
}
