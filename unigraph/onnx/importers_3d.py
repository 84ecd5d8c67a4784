"""3-D convolutions and pools, and dilated average pools, imported as exact compositions of
the 2-D op records (conv2d, conv_transpose2d, max_pool2d, avg_pool2d) and take/pad/reshape.

Why compositions and not conv3d/pool3d records: the 2-D records' lowerings already route
around every framework's gaps (TF's float64 dilated conv gradients, Paddle's float16 pads,
ONNX Runtime's missing float64 Conv), so 3-D inherits them on all 9 targets and on
onnxruntime:static without a new quirk. Each composition does the 2-D op once:

* Conv: the depth taps (o * stride + k * dilation, after the depth pads) are gathered with one
  `take`, depth is folded into the batch and kernel depth into the channels (group-major, as
  grouped conv2d reads them); one conv2d with the kernel reshaped alike.
* ConvTranspose: depth folded into the batch and kernel depth into the output channels; one
  conv_transpose2d; each kernel depth's slice is then spread to its output depths (zeros
  inserted and padded, so only exact additions of zero), and the slices summed.
* MaxPool/AveragePool: a box window is separable, and so is ONNX's divisor (the cells counted
  along each axis multiply), so a 3-D pool is a pool over (depth, height * width) with a
  (kd, 1) window, then a 2-D pool over (height, width).
* AveragePool with dilations (any rank; avg_pool2d has none): per spatial axis, the taps
  gathered with one `take` and summed; then one division by the count, computed at import.

An importer here has the contract of `unigraph.onnx.importers` (`run(ctx, args, attrs)`);
the 2-D importer it builds on is passed in, so this module does not import `importers_nn`.
"""

from __future__ import annotations

import numpy as np

import unigraph as ug


def _dtype(value) -> str:
    return str(value.dtype) if isinstance(value, ug.Tensor) else np.asarray(value).dtype.name


def spatial_pads(ctx, sizes, attrs, kernel, what: str):
    """(begin, end, strides, dilations) of an ONNX window op over spatial `sizes`: auto_pad
    SAME_UPPER/SAME_LOWER resolved (the odd cell after, or before), VALID as no pads."""
    n = len(sizes)
    strides = list(attrs.get("strides", [1] * n))
    dilations = list(attrs.get("dilations", [1] * n))
    auto = attrs.get("auto_pad", "NOTSET")
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        begin, end = [], []
        for size, k, s, d in zip(sizes, kernel, strides, dilations):
            if size is None:
                ctx.refuse(f"{what} with auto_pad={auto} on an image size known only at run time")
            total = max((-(-size // s) - 1) * s + (k - 1) * d + 1 - size, 0)
            small, large = total // 2, total - total // 2
            begin.append(small if auto == "SAME_UPPER" else large)
            end.append(large if auto == "SAME_UPPER" else small)
    elif auto == "VALID":
        begin, end = [0] * n, [0] * n
    else:
        flat = list(attrs.get("pads", [0] * 2 * n))
        begin, end = flat[:n], flat[n:]
    return begin, end, strides, dilations


def ceil_extra(sizes, kernel, strides, dilations, begin, end) -> list:
    """Cells ceil_mode adds after `end` on each axis so that floor division gives ONNX's ceil
    output size; a last window must still start inside the image or its begin pad."""
    extra = []
    for size, k, s, d, b, e in zip(sizes, kernel, strides, dilations, begin, end):
        window = (k - 1) * d + 1
        padded = size + b + e
        count = -(-(padded - window) // s) + 1
        if (count - 1) * s >= size + b:
            count -= 1
        extra.append(max(0, (count - 1) * s + window - padded))
    return extra


def _known(ctx, x, what):
    """x's shape, its batch dim possibly None; the other dims must be known."""
    shape = tuple(x.shape)
    if any(d is None for d in shape[1:]):
        ctx.refuse(f"3-D {what} on an input of shape {shape}, whose channels or spatial "
                   "sizes are known only at run time (give them fixed sizes in the file; "
                   "only the batch may vary)")
    return shape


def _taps(x, axis, count, kernel, stride, dilation):
    """x gathered along `axis` at o * stride + k * dilation for o < count, k < kernel, as two
    axes (count, kernel); none when that is x itself."""
    index = [o * stride + k * dilation for o in range(count) for k in range(kernel)]
    if index != list(range(x.shape[axis])):
        x = ug.take(x, index, axis=axis)
    shape = tuple(-1 if d is None else d for d in x.shape)
    return ug.reshape(x, shape[:axis] + (count, kernel) + shape[axis + 1:])


def _pad_axis(x, axis, before, after, value=0.0):
    if not before and not after:
        return x
    widths = [(0, 0)] * len(x.shape)
    widths[axis] = (before, after)
    return ug.pad(x, widths, value=value)


def conv3d(ctx, args, attrs, conv2d):
    """A 3-D Conv as one 2-D one (see the module doc); `conv2d` is the 2-D Conv importer,
    which takes the height/width pads, strides, dilations and the bias."""
    x, weight = args[0], args[1]
    bias = args[2] if len(args) > 2 else None
    n, channels, depth, height, width = _known(ctx, x, "Conv")
    out_channels, group_channels, kd, kh, kw = weight.shape
    kernel = list(attrs.get("kernel_shape", weight.shape[2:]))
    begin, end, strides, dilations = spatial_pads(ctx, (depth, height, width), attrs,
                                                  kernel, "Conv")
    groups = attrs.get("group", 1)
    padded = depth + begin[0] + end[0]
    out_depth = (padded - (kd - 1) * dilations[0] - 1) // strides[0] + 1
    if out_depth < 1:
        ctx.refuse(f"Conv with a depth window ({(kd - 1) * dilations[0] + 1}) larger than the "
                   f"padded depth ({padded})")
    x = _pad_axis(x, 2, begin[0], end[0])
    taps = _taps(x, 2, out_depth, kd, strides[0], dilations[0])  # [N, C, OD, kd, H, W]
    taps = ug.reshape(taps, (-1, groups, channels // groups, out_depth, kd, height, width))
    taps = ug.transpose(taps, (0, 3, 1, 4, 2, 5, 6))  # [N, OD, groups, kd, C/groups, H, W]
    taps = ug.reshape(taps, (-1, channels * kd, height, width))
    kernel2d = ug.reshape(ug.transpose(weight, (0, 2, 1, 3, 4)),
                          (out_channels, kd * group_channels, kh, kw))
    flat = {"kernel_shape": [kh, kw], "strides": strides[1:], "dilations": dilations[1:],
            "pads": begin[1:] + end[1:], "group": groups}
    out = conv2d(ctx, [taps, kernel2d, bias], flat)  # [N * OD, O, OH, OW]
    out = ug.reshape(out, (-1, out_depth, out_channels) + tuple(out.shape[2:]))
    return ug.transpose(out, (0, 2, 1, 3, 4))


def conv_transpose3d_full(ctx, x, weight, strides, dilations, groups):
    """Every contribution of a 3-D ConvTranspose, no pads: [N, O, (D - 1) * s + (k - 1) * d
    + 1, ...] per spatial dim (see the module doc)."""
    n, channels, depth, height, width = _known(ctx, x, "ConvTranspose")
    _, group_out, kd, kh, kw = weight.shape
    flat = ug.reshape(ug.transpose(x, (0, 2, 1, 3, 4)), (-1, channels, height, width))
    kernel2d = ug.reshape(ug.transpose(weight, (0, 2, 1, 3, 4)),
                          (channels, kd * group_out, kh, kw))
    y = ug.conv_transpose2d(flat, kernel2d, None, stride=tuple(strides[1:]),
                            dilation=tuple(dilations[1:]), groups=groups)
    full_h, full_w = y.shape[2:]
    y = ug.reshape(y, (-1, depth, groups, kd, group_out, full_h, full_w))
    y = ug.transpose(y, (0, 2, 4, 1, 3, 5, 6))  # [N, groups, O/groups, D, kd, FH, FW]
    out_channels = groups * group_out
    y = ug.reshape(y, (-1, out_channels, depth * kd, full_h, full_w))
    stride, dilation = strides[0], dilations[0]
    spread_depth = (depth - 1) * stride + 1
    full_depth = spread_depth + (kd - 1) * dilation
    out = None
    for k in range(kd):
        part = y if kd == 1 else ug.slice(
            y, (0, 0, k, 0, 0), (y.shape[0], out_channels, depth * kd, full_h, full_w),
            (1, 1, kd, 1, 1))
        if stride > 1:  # input depth i lands on i * stride: stride - 1 zeros after each
            part = _pad_axis(ug.expand_dims(part, 3), 3, 0, stride - 1)
            part = ug.reshape(part, (-1, out_channels, depth * stride, full_h, full_w))
            part = ug.slice(part, (0, 0, 0, 0, 0),
                            (part.shape[0], out_channels, spread_depth, full_h, full_w))
        part = _pad_axis(part, 2, k * dilation, full_depth - spread_depth - k * dilation)
        out = part if out is None else out + part
    return out


def pool3d(ctx, args, attrs, pool2d):
    """A 3-D MaxPool/AveragePool as a (kd, 1) pool over (depth, height * width), then a 2-D
    pool over (height, width); `pool2d` is the 2-D importer (pads, ceil_mode, divisor)."""
    x = args[0]
    n, channels, depth, height, width = _known(ctx, x, ctx.node.op_type)
    kernel = list(attrs["kernel_shape"])
    begin, end, strides, dilations = spatial_pads(ctx, (depth, height, width), attrs,
                                                  kernel, ctx.node.op_type)
    common = {k: v for k, v in attrs.items() if k in ("ceil_mode", "count_include_pad")}
    if kernel[0] != 1 or strides[0] != 1 or begin[0] or end[0]:
        along_depth = dict(common, kernel_shape=[kernel[0], 1], strides=[strides[0], 1],
                           dilations=[dilations[0], 1], pads=[begin[0], 0, end[0], 0])
        x = pool2d(ctx, [ug.reshape(x, (-1, channels, depth, height * width))], along_depth)
        depth = x.shape[2]
    x = ug.reshape(x, (-1, channels * depth, height, width))
    if kernel[1:] != [1, 1] or strides[1:] != [1, 1] or any(begin[1:] + end[1:]):
        plane = dict(common, kernel_shape=kernel[1:], strides=strides[1:],
                     dilations=dilations[1:], pads=begin[1:] + end[1:])
        x = pool2d(ctx, [x], plane)
    return ug.reshape(x, (-1, channels, depth) + tuple(x.shape[2:]))


def average_pool_dilated(ctx, args, attrs):
    """AveragePool with dilations, any rank: per spatial axis, zero pads (plus the ceil_mode
    cells), the window taps gathered and summed; then divided by ONNX's count (the cells in
    the image, and in the pads with count_include_pad=1, never the ceil_mode cells), a
    product over the axes computed at import."""
    x = args[0]
    shape = _known(ctx, x, "AveragePool")
    sizes, kernel = shape[2:], list(attrs["kernel_shape"])
    begin, end, strides, dilations = spatial_pads(ctx, sizes, attrs, kernel, "AveragePool")
    extra = [0] * len(sizes)
    if attrs.get("ceil_mode", 0) and attrs.get("auto_pad", "NOTSET") in ("NOTSET", "VALID"):
        extra = ceil_extra(sizes, kernel, strides, dilations, begin, end)
    include = bool(attrs.get("count_include_pad", 0))
    counts = np.ones(())
    for axis, (size, k, s, d, b, e, more) in enumerate(
            zip(sizes, kernel, strides, dilations, begin, end, extra), start=2):
        window = (k - 1) * d + 1
        out = (size + b + e + more - window) // s + 1
        x = _pad_axis(x, axis, b, e + more)
        x = ug.sum(_taps(x, axis, out, k, s, d), axis=axis + 1)
        counted = np.pad(np.ones(size), (b, e), constant_values=1.0 if include else 0.0)
        counted = np.pad(counted, (0, more))
        along = np.array([counted[o * s: o * s + window: d].sum() for o in range(out)])
        counts = np.multiply.outer(counts, along)
    return x / counts.astype(_dtype(x))
