"""Paddle lowerings of the image ops: conv2d, conv_transpose2d, max_pool2d, avg_pool2d.

Split from `lowerings.py` (whose table names them), for the module's size; the same rules
hold: every function calls only Paddle APIs that exist in dygraph and in PIR programs.
This module imports paddle: only `lowerings.py` imports it.
"""

from __future__ import annotations

import paddle
import paddle.nn.functional as F
from paddle import _C_ops

from unigraph.ops.pooling import pool_geometry
from unigraph_paddle.ranks import dims_of

_LARGEST = {dtype: float(paddle.finfo(dtype).max)
            for dtype in (paddle.float16, paddle.float32, paddle.float64)}


def _add_channel_bias(out, bias):
    """out [N, C, H, W] + bias [C], added as [N, C, H * W] + [C, 1]: the same sums, but
    Paddle's CPU add broadcasting a [1, C, 1, 1] (what F.conv2d adds) runs ~3x slower
    (3.3.1, a 64x16x32x32 result: 5.8 ms against 1.8). Sizes unknown until the run (other
    than the batch) or zero keep the 4-D form, and so does a batch of 1, where Paddle's
    4-D add is the fast one (16x32x32: 9 us against 14 with the three reshapes)."""
    n, c, h, w = out.shape
    if n == 1 and type(out) is paddle.Tensor and bias.stop_gradient and min(c, h, w) > 0:
        # Eagerly, with nothing to differentiate for the bias: the bias expanded to the
        # result's shape, then a same-shape add: the same sums, ~1 us sooner (3.3.1,
        # 16x32x32: 9.5 us against 10.6 for the broadcasting add). A tracked bias keeps the
        # broadcasting add, so its gradient is reduced as before.
        channel = _C_ops.reshape(bias, [1, -1, 1, 1])
        return _C_ops.add(out, _C_ops.expand(channel, [1, c, h, w]))
    if min(c, h, w) <= 0 or n == 0 or n == 1:
        return _C_ops.add(out, _C_ops.reshape(bias, [1, -1, 1, 1]))
    rows = _C_ops.reshape(out, [-1, c, h * w])
    return _C_ops.reshape(_C_ops.add(rows, _C_ops.reshape(bias, [c, 1])), [-1, c, h, w])


def conv2d(x, w, bias=None, *, stride, padding, dilation, groups):
    # (groups first: a plain conv reads no shape, ~0.25 us)
    if groups != 1 and x.shape[1] == groups and w.shape[0] % groups == 0:
        # F.conv2d's depthwise kernel
        out = F.conv2d(x, w, stride=list(stride), padding=list(padding),
                       dilation=list(dilation), groups=groups)
    else:  # what F.conv2d runs, without its ~10 us of Python checks
        out = _C_ops.conv2d(x, w, list(stride), list(padding), "EXPLICIT", list(dilation),
                            groups, "NCHW")
    return out if bias is None else _add_channel_bias(out, bias)


def conv_transpose2d(x, w, bias=None, *, stride, padding, output_padding, dilation, groups):
    if (w.shape[0] == -1) != (x.shape[1] == -1):
        # In a Program Paddle compares the channels while building, -1 (open in input_spec)
        # against a count: the open one takes the known count.
        if w.shape[0] == -1:
            w = _with_size(w, 0, x.shape[1])
        else:
            x = _with_size(x, 1, w.shape[0])
    out = _conv_transpose2d(x, w, bias, stride=stride, padding=padding, groups=groups,
                            output_padding=output_padding, dilation=dilation)
    if -1 in w.shape[2:] or -1 in x.shape[2:]:
        # A Program sizes the output from the kernel's and x's sizes, -1 where input_spec
        # leaves them open: wrong numbers (4 rows, a kernel of -1: 2; x's height -1: 0),
        # which later ops check while building. Sliced to the sizes it has when it runs,
        # its spatial sizes are open (a reshape to its run-time shape keeps the wrong
        # numbers).
        sizes = paddle.shape(out)
        out = out[:, :, :sizes[2], :sizes[3]]
    return out


def _with_size(t, axis: int, size: int):
    """Program value `t` reshaped to its run-time shape with `size` at `axis`, which the
    Program then knows, as it knows t's other known dims (a run-time size only where t's
    is open: Paddle reads a list holding a tensor as open throughout). Not reshape's 0,
    "keep this dim": of a tensor with no elements Paddle makes each 0 a size 0."""
    sizes = paddle.shape(t)
    return paddle.reshape(t, [size if i == axis else sizes[i] if d < 0 else d
                              for i, d in enumerate(t.shape)])


def _conv_transpose2d(x, w, bias, *, stride, padding, output_padding, dilation, groups):
    if all(extra < step for extra, step in zip(output_padding, stride)):
        return F.conv2d_transpose(
            x, w, bias=bias, stride=list(stride), padding=list(padding),
            output_padding=list(output_padding), dilation=list(dilation), groups=groups,
        )
    # Paddle refuses output_padding >= stride (3.3.1), which the record allows when it is
    # below the dilation: the uncropped output, its output_padding rows of zeros written
    # in at the end, then the padding cropped off both sides.
    # The bias goes on last: the rows written in get it too, as every other row.
    full = F.conv2d_transpose(x, w, stride=list(stride), dilation=list(dilation),
                              groups=groups)
    (ph, pw), (oph, opw) = padding, output_padding
    full = F.pad(full, [0, opw, 0, oph], data_format="NCHW")
    # Stops from the end: in a Program a size input_spec leaves open (the kernel's) is -1
    out = full[:, :, ph: -ph or None, pw: -pw or None]
    return out if bias is None else out + paddle.reshape(bias, [1, -1, 1, 1])


def _pool_padded(x, fill, kernel, stride, padding, dilation=(1, 1), ceil_mode=False):
    """x with the pool's padding, and its ceil-mode cells after it, written in as `fill`:
    one geometry for every option (`unigraph.ops.pooling`), then a VALID pool."""
    _, ((t, b), (left, r)), (eh, ew) = pool_geometry(
        tuple(x.shape[2:]), kernel, stride, padding, dilation, ceil_mode)
    widths = [left, r + ew, t, b + eh]
    return _pad(x, widths, fill) if any(widths) else x


def _pad(x, widths, fill=0.0):
    """F.pad of NCHW x by [left, right, top, bottom]. F.pad has no CPU float16 kernel
    (3.3.1): float16 pads in float32, exactly (the fill is 0 or -inf)."""
    if x.dtype == paddle.float16:
        return paddle.cast(_pad(paddle.cast(x, paddle.float32), widths, fill), x.dtype)
    return F.pad(x, widths, value=fill, data_format="NCHW")


def max_pool2d(x, *, kernel, stride, padding, dilation=(1, 1), ceil_mode=False):
    # Paddle's max pool never picks a padded cell: the same as padding with -inf. It drops a
    # NaN in some window positions (3.3.1); the record propagates it, the gradient going to
    # the first maximum with a NaN counting as the maximum (above +inf, as argmax). So the
    # pool runs over x with NaN read as +inf and +inf as the largest finite value, only for
    # the position of each window's first maximum; the result is x gathered there (NaN
    # where that was a NaN), and its gradient lands on that element.
    # (Scalars by `full`, which keeps a double: `full_like` rounds its value to float32.)
    x = _pool_padded(x, float("-inf"), kernel, stride, padding, dilation, ceil_mode)
    inf = paddle.full([], float("inf"), x.dtype)
    largest = paddle.full([], _LARGEST[x.dtype], x.dtype)
    wide = paddle.where(paddle.isnan(x), inf, paddle.where(x == inf, largest, x))
    if tuple(dilation) != (1, 1):
        return _dilated_max_pool2d(x, wide, kernel, stride, dilation)
    _, where = F.max_pool2d(wide, list(kernel), list(stride), 0, return_mask=True)
    flat, index = paddle.flatten(x, start_axis=2), paddle.flatten(where, start_axis=2)
    picked = paddle.take_along_axis(flat, index, axis=2)
    shape = list(where.shape)  # in a Program the batch may be unknown (-1)
    # Paddle's reshape infers one -1 only from the other dims' sizes: none beside a 0
    known = shape.count(-1) == 0 or (shape.count(-1) == 1 and 0 not in shape)
    return paddle.reshape(picked, shape if known else paddle.shape(where))


def _dilated_max_pool2d(x, wide, kernel, stride, dilation):
    """F.max_pool2d has no dilation: the windows as columns (F.unfold, which has), x
    gathered at the argmax of `wide` in each (the first maximum)."""
    # In a Program, a dim input_spec leaves open is -1: read when it runs (dims_of)
    _, channels, height, width = x.shape if min(x.shape[1:]) >= 0 else dims_of(x)
    rows, cols = ((size - rate * (k - 1) - 1) // step + 1 for size, k, step, rate in zip(
        (height, width), kernel, stride, dilation))

    def columns(v):  # [N * C, KH * KW, OH * OW]
        return F.unfold(paddle.reshape(v, [-1, 1, height, width]), list(kernel),
                        strides=list(stride), dilations=list(dilation))

    first = paddle.argmax(columns(wide), axis=1, keepdim=True)
    picked = paddle.take_along_axis(columns(x), first, axis=1)
    return paddle.reshape(picked, [-1, channels, rows, cols])


def _ones_mask(x, kernel, stride, padding, ceil_mode, count_include_pad):
    """[1, 1, H', W']: 1 at each cell an avg pool window counts, over the padded x."""
    _, ((t, b), (left, r)), (eh, ew) = pool_geometry(
        tuple(x.shape[2:]), kernel, stride, padding, (1, 1), ceil_mode)
    # A dim input_spec leaves open is -1 in a Program: its size is read when the program
    # runs (paddle.ones takes a shape with Tensor elements; ceil_mode needs known sizes).
    height, width = dims_of(x)[2:]
    if count_include_pad:
        ones = paddle.ones([1, 1, height + t + b, width + left + r], dtype=x.dtype)
        return _pad(ones, [0, ew, 0, eh])
    ones = paddle.ones([1, 1, height, width], dtype=x.dtype)
    return _pad(ones, [left, r + ew, t, b + eh])


def avg_pool2d(x, *, kernel, stride, padding, ceil_mode=False, count_include_pad=True):
    # Zeros written in (one geometry for every option, as max_pool2d), then each window's
    # sum divided by the count of cells it counts: kh * kw unless padding is left out or a
    # ceil-mode window runs past the padding, and then a mask of ones pooled the same way.
    _, _, extra = pool_geometry(tuple(x.shape[2:]), kernel, stride, padding, (1, 1),
                                ceil_mode)
    constant = count_include_pad and extra == (0, 0)
    if x.dtype == paddle.float16 and not constant:  # no CPU float16 divide (3.3.1)
        wide = avg_pool2d(paddle.cast(x, paddle.float32), kernel=kernel, stride=stride,
                          padding=padding, ceil_mode=ceil_mode,
                          count_include_pad=count_include_pad)
        return paddle.cast(wide, x.dtype)
    padded = _pool_padded(x, 0.0, kernel, stride, padding, (1, 1), ceil_mode)
    if x.dtype != paddle.float64:
        total = F.avg_pool2d(padded, list(kernel), list(stride), 0, exclusive=False)
        if constant:
            return total
        mask = _ones_mask(x, kernel, stride, padding, ceil_mode, count_include_pad)
        return total / F.avg_pool2d(mask, list(kernel), list(stride), 0, exclusive=False)
    # F.avg_pool2d's backward scales by a float32 1 / (kh * kw), even in float64 (3.3.1:
    # 0.1111111119 for 1/9). In float64 the window sums are a depthwise convolution with a
    # kernel of ones (exact backward), divided by the count in float64.
    channels = x.shape[1]
    if channels is None or channels < 0:
        # Channels left open by input_spec: the depthwise conv's groups must be known, so
        # each channel of each image is pooled as an image of its own (one filter of ones).
        ones = paddle.ones([1, 1, *kernel], dtype=x.dtype)
        size = paddle.shape(padded)
        rows = paddle.reshape(padded, [-1, 1, size[2], size[3]])
        window = F.conv2d(rows, ones, stride=list(stride))
        pooled = paddle.shape(window)
        window = paddle.reshape(window, [size[0], size[1], pooled[2], pooled[3]])
    else:
        ones = paddle.ones([channels, 1, *kernel], dtype=x.dtype)
        window = F.conv2d(padded, ones, stride=list(stride), groups=channels)
    if constant:
        return paddle.divide(window, paddle.full([], kernel[0] * kernel[1], x.dtype))
    mask = _ones_mask(x, kernel, stride, padding, ceil_mode, count_include_pad)
    return window / F.conv2d(mask, ones[:1], stride=list(stride))
