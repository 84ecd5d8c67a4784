"""Convolution and pooling lowerings: NCHW in the IR, NHWC in TensorFlow's kernels.

Our layout is NCHW, but TF's CPU Conv2D/MaxPool/AvgPool kernels take only NHWC, so every
conv/pool pays a transpose in and one out (a copy of the activation each way, roughly the cost
of one elementwise op on it). In a graph, an activation right after a conv or pool is applied
on the NHWC side of that transpose (`before_nchw_transpose`), so Grappler fuses
conv + bias + activation and cancels the transpose pairs between consecutive convs. The graph
modes go further: `layout.py` calls the NHWC cores (`conv2d_nhwc` ...) directly and keeps
whole conv/pool/elementwise chains NHWC.

This module imports tensorflow: the backend imports it only from `TensorFlowBackend.load`,
after paddle (see `unigraph.backend.import_framework`).
"""

from __future__ import annotations

import functools

import numpy as np
import tensorflow as tf

from unigraph.ops.pooling import pool_geometry, pool_pads
from unigraph_tensorflow.ranks import dims_of
from unigraph_tensorflow.taping import may_be_differentiated

# [N, C, H, W] <-> [N, H, W, C]
TO_NHWC = (0, 2, 3, 1)
TO_NCHW = (0, 3, 1, 2)
# conv weight [O, C/groups, KH, KW] -> TF filter [KH, KW, C/groups, O]
TO_HWIO = (2, 3, 1, 0)

raw = tf.raw_ops


def conv2d(x, w, bias=None, **attrs):
    return tf.transpose(conv2d_nhwc(tf.transpose(x, TO_NHWC), w, bias, **attrs), TO_NCHW)


def conv2d_nhwc(x, w, bias=None, *, stride, padding, dilation, groups):
    """conv2d of the NHWC image `x` (weight and bias as the record's), NHWC out; the
    graph modes' layout pass (`layout.py`) calls it on values it keeps NHWC."""
    f = tf.transpose(w, TO_HWIO)
    kh, kw, _, channels = dims_of(f)
    out = nonempty_batch(
        x, lambda: convolve(x, f, stride, padding, dilation, groups),
        kernel=(kh, kw), stride=stride, padding=padding, dilation=dilation,
        channels=channels)
    if bias is not None:
        # Once, after whichever route, while the channels are last: BiasAdd on NHWC is
        # the op Grappler folds into the conv (_FusedConv2D) on the plain route.
        out = tf.nn.bias_add(out, bias)
    return out


def conv_transpose2d(x, w, bias=None, *, stride, padding, output_padding, dilation, groups):
    # w [C, O/groups, KH, KW] -> TF's transposed-conv filter [KH, KW, O/groups, C].
    f = tf.transpose(w, TO_HWIO)
    (dh, dw), (ph, pw), (oph, opw) = dilation, padding, output_padding
    if (dh, dw) != (1, 1):
        # TF's CPU Conv2DBackpropInput refuses dilations > 1 in float64 (2.21, a quirk
        # record): the filter gets its zeros written in, for every dtype (one route).
        f = dilate_filter(f, dh, dw)
    nhwc = tf.transpose(x, TO_NHWC)

    def compute():
        if nhwc.dtype == tf.float64:
            out = spread(nhwc, f, stride, groups)
        else:
            # Its gradient w.r.t. x is a conv with stride `stride` and one output along an
            # axis where x has one cell: TF's float32 quirk (may_have_one_strided_output).
            # One input cell spreads the same with stride 1, whose gradient is a plain conv.
            sizes = {axis: size for axis, (size, s) in enumerate(zip(spatial_dims(nhwc),
                                                                     stride)) if s > 1}
            out = by_ones(sizes, lambda single: spread(nhwc, f, unstrided(stride, single),
                                                       groups))
        if oph or opw:
            out = tf.pad(out, ((0, 0), (0, oph), (0, opw), (0, 0)))
        full_h, full_w = spatial_dims(out)
        return out[:, ph: full_h - ph, pw: full_w - pw]

    def zeros():
        # Its gradient w.r.t. x is a Conv2D, which hands back its input for an empty batch
        # (see nonempty_batch): an x gradient of the uncropped output's shape
        batch, height, width, _ = dims_of(nhwc)
        kh, kw, per_group, _ = dims_of(f)  # (the dilated filter: dh * (KH - 1) + 1 taps)
        return tf.zeros((batch, (height - 1) * stride[0] - 2 * ph + kh + oph,
                         (width - 1) * stride[1] - 2 * pw + kw + opw, per_group * groups),
                        nhwc.dtype)

    out = if_nonempty_batch(nhwc, compute, zeros)
    if bias is not None:
        out = tf.nn.bias_add(out, bias)
    return tf.transpose(out, TO_NCHW)


def spread(x, f, stride, groups):
    """The transposed conv of the NHWC `x` by the [KH, KW, O/groups, C] filter `f`, VALID
    (every position some input reaches; conv_transpose2d crops the padding), NHWC out."""
    (sh, sw), (batch, height, width, _), (kh, kw, _, _) = stride, dims_of(x), dims_of(f)

    def transposed(xg, fg):
        shape = tf.stack([batch, (height - 1) * sh + kh, (width - 1) * sw + kw,
                          dims_of(fg)[2]])
        return tf.nn.conv2d_transpose(xg, fg, shape, strides=(1, sh, sw, 1), padding="VALID")

    if groups == 1:
        return transposed(x, f)
    # one per group, as convolve does (split input channels, concat the outputs)
    pairs = zip(tf.split(x, groups, axis=3), tf.split(f, groups, axis=3))
    return tf.concat([transposed(xg, fg) for xg, fg in pairs], axis=3)


def spatial_dims(x) -> tuple:
    """The NHWC `x`'s (height, width): ints where its static shape knows them, else (both)
    read when the graph runs."""
    known = tuple(x.shape[1:3])
    return known if None not in known else tuple(dims_of(x)[1:3])


def unstrided(stride, axes) -> tuple:
    """`stride` with 1 along `axes`."""
    return tuple(1 if axis in axes else s for axis, s in enumerate(stride))


def by_ones(counts: dict, route):
    """`route(axes)`, where `axes` are the keys of `counts` whose count is 1. A count is an
    int, or a scalar tensor read when the graph runs (a dim the trace leaves open): each of
    those is chosen by a tf.cond, so known counts cost nothing."""
    known = tuple(axis for axis, count in counts.items() if isinstance(count, int)
                  and count == 1)
    pending = [axis for axis, count in counts.items() if not isinstance(count, int)]

    def choose(ones, rest):
        if not rest:
            return route(ones)
        axis, rest = rest[0], rest[1:]
        # tf.equal, not ==: a TF1 graph compares tensors by identity
        return tf.cond(tf.equal(counts[axis], 1), lambda: choose((*ones, axis), rest),
                       lambda: choose(ones, rest))

    return choose(known, pending)


def window_count(size, kernel, stride, padding, dilation):
    """The outputs of a conv or pool along one spatial axis of `size` cells (an int, or a
    scalar tensor read when the graph runs): windows of `kernel` taps `dilation` apart,
    every `stride` cells, over the cells padded by `padding` (one int for each side, or a
    pair (before, after))."""
    pads = sum(padding) if isinstance(padding, tuple) else 2 * padding
    return (size + pads - dilation * (kernel - 1) - 1) // stride + 1


def may_have_one_strided_output(x_hw, kernel, stride, padding, dilation) -> bool:
    """Whether a spatial axis whose stride is above 1 has one output, or may have (its size
    or kernel open in the trace). TF's CPU Conv2D gets float32 convs wrong there (2.21:
    stride (1, 2), one output column, one input channel and a batch of 2 give values of
    uninitialised memory, eager and in graphs, forward and gradient)."""
    return any(s > 1 and (size is None or k is None or window_count(size, k, s, p, d) == 1)
               for size, k, s, p, d in zip(x_hw, kernel, stride, padding, dilation))


def convolve(x, f, stride, padding, dilation, groups):
    """The NHWC conv of `x` by the HWIO filter `f`, by a route TF can differentiate."""
    if x.dtype == tf.float64:
        return convolve_as_is(x, f, stride, padding, dilation, groups)
    # Stride 1 along an axis with one output (known, or read when the graph runs), then its
    # first output: the same window (see may_have_one_strided_output).
    sizes, taps = spatial_dims(x), tuple(f.shape[:2])
    if None in taps:
        taps = dims_of(f)[:2]
    counts = {axis: window_count(*each) for axis, each in enumerate(zip(
        sizes, taps, stride, padding, dilation)) if stride[axis] > 1}

    def route(single):
        out = convolve_as_is(x, f, unstrided(stride, single), padding, dilation, groups)
        if not single:
            return out
        return out[:, :1 if 0 in single else None, :1 if 1 in single else None]

    return by_ones(counts, route)


def convolve_as_is(x, f, stride, padding, dilation, groups):
    """convolve without the workaround of TF's one-strided-output quirk."""
    (ph, pw), (sh, sw), (dh, dw) = padding, stride, dilation
    if (dh, dw) == (1, 1):
        def conv(x, f):
            explicit = ((0, 0), (ph, ph), (pw, pw), (0, 0))
            return tf.nn.conv2d(x, f, strides=(1, sh, sw, 1), padding=explicit)
    else:
        # TF's CPU Conv2D runs dilations forward, but its gradient kernels refuse them.
        # With stride 1, tf.nn.convolution takes TF's own route (SpaceToBatchND, a plain
        # conv, BatchToSpaceND), which differentiates; TF has no dilated strided conv
        # that does, so there the filter gets its zeros written in (dh*dw times the
        # multiply-adds of the dilated kernel).
        if ph or pw:
            x = tf.pad(x, ((0, 0), (ph, ph), (pw, pw), (0, 0)))
        if (sh, sw) == (1, 1):
            def conv(x, f):
                return tf.nn.convolution(x, f, padding="VALID", dilations=(dh, dw))
        else:
            def conv(x, f):
                return tf.nn.conv2d(x, dilate_filter(f, dh, dw), strides=(1, sh, sw, 1),
                                    padding="VALID")
    if groups == 1:
        return conv(x, f)
    # TF's CPU Conv2D runs a grouped filter forward, but its gradient kernels refuse
    # groups on CPU: one conv per group (split channels, concat the outputs).
    pairs = zip(tf.split(x, groups, axis=3), tf.split(f, groups, axis=3))
    return tf.concat([conv(xg, fg) for xg, fg in pairs], axis=3)


def nonempty_batch(image, compute, *, kernel, stride, padding, dilation, channels):
    """`compute()` (an NHWC conv or pool of the NHWC `image`), or zeros of its true shape
    when the batch is empty. TF gets N = 0 wrong: Conv2D hands back its input ([0, H, W, C]
    whatever the filter, while the static shape says [0, OH, OW, O]), and in a graph the
    oneDNN MaxPoolGrad aborts the process. A batch known to be non-empty costs nothing; one
    unknown until run time (a loop carry whose shape changes) is chosen by a tf.cond."""
    def zeros():
        dims = dims_of(image)  # known sizes stay static: the result keeps them
        height, width = (window_count(*each) for each in zip(
            (dims[1], dims[2]), kernel, stride, padding, dilation))
        return tf.zeros((dims[0], height, width, channels), image.dtype)

    return if_nonempty_batch(image, compute, zeros)


def if_nonempty_batch(image, compute, zeros):
    """`compute()`, or `zeros()` (the result's true shape) when the NHWC `image`'s batch
    is empty: known, or chosen by a tf.cond when the graph runs (see nonempty_batch)."""
    batch = image.shape[0]
    if batch is not None and batch > 0:
        return compute()
    empty = zeros()
    if batch == 0:
        return empty
    return tf.cond(dims_of(image)[0] > 0, compute, lambda: empty)


def dilate_filter(f, dh, dw):
    """[KH, KW, I, O] -> [(KH-1)*dh+1, (KW-1)*dw+1, I, O] with zeros between the taps.
    A dim the graph does not know (a filter input whose input_spec leaves it open) is
    read when it runs."""
    kh, kw, channels, _ = dims_of(f)
    # Each tap followed by rate - 1 zeros, flattened back, the trailing zeros cut off.
    f = tf.pad(f[:, None], ((0, 0), (0, dh - 1), (0, 0), (0, 0), (0, 0)))
    f = tf.reshape(f, (kh * dh, kw, channels, -1))[: (kh - 1) * dh + 1]
    f = tf.pad(f[:, :, None], ((0, 0), (0, 0), (0, dw - 1), (0, 0), (0, 0)))
    _, _, _, channels, out = dims_of(f)
    return tf.reshape(f, (-1, kw * dw, channels, out))[:, : (kw - 1) * dw + 1]


def pool_pads_of(x, kernel, stride, padding, dilation, ceil_mode):
    """((top, bottom), (left, right)) to write around NHWC x before a VALID pool: the
    record's padding plus its ceil-mode cells (`unigraph.ops.pooling.pool_geometry`)."""
    if None in tuple(x.shape[1:3]):  # the record refuses ceil_mode there: no extra cells
        return pool_pads(padding), (0, 0)
    _, pads, extra = pool_geometry(tuple(x.shape[1:3]), kernel, stride, padding, dilation,
                                   ceil_mode)
    return pads, extra


def pool(native_pool, fill):
    """The lowering of a pool op over TF's NHWC `native_pool(x, kernel, stride, dilation)`
    (VALID), padding with `fill`: NHWC in, NHWC out (callers transpose)."""

    def lowering(x, *, kernel, stride, padding, dilation=(1, 1), ceil_mode=False):
        ((t, b), (left, r)), (eh, ew) = pool_pads_of(x, kernel, stride, padding, dilation,
                                                     ceil_mode)
        widths = ((t, b + eh), (left, r + ew))

        def compute():
            nhwc = x
            if any(widths[0] + widths[1]):
                # Explicit padding, then VALID: max pads with -inf, avg with zeros (TF's SAME
                # avg pool would divide the border windows by fewer elements).
                nhwc = tf.pad(nhwc, ((0, 0), *widths, (0, 0)), constant_values=fill)
            return native_pool(nhwc, kernel, stride, dilation)

        return nonempty_batch(x, compute, kernel=kernel, stride=stride, padding=widths,
                              dilation=dilation, channels=dims_of(x)[3])

    return lowering


def dilated(native_pool, kernel, stride, dilation):
    """An NHWC VALID pool with dilation, for TF pools that have none: with stride 1 a
    dilated pool is a plain pool over each of the dh * dw interleaved sub-images
    (SpaceToBatchND, as tf.nn.pool does); the stride then keeps every sh-th row. The zeros
    SpaceToBatchND pads with reach only the outputs its crop removes."""
    (dh, dw), (sh, sw) = dilation, stride

    def pooled(x):
        if (dh, dw) == (1, 1):
            return native_pool(x, kernel, stride)
        if None in tuple(x.shape[1:3]):
            fill = tf.math.floormod(-tf.shape(x)[1:3], (dh, dw))
            wide = tf.stack([tf.zeros((2,), fill.dtype), fill], axis=1)  # [[0, fh], [0, fw]]
        else:  # known sizes keep the static shape
            wide = ((0, -x.shape[1] % dh), (0, -x.shape[2] % dw))
        batches = tf.space_to_batch_nd(x, (dh, dw), wide)
        out = tf.batch_to_space(native_pool(batches, kernel, (1, 1)), (dh, dw), wide)
        return out[:, ::sh, ::sw] if (sh, sw) != (1, 1) else out

    return pooled


def _max_pool(x, kernel, stride, dilation):
    return dilated(lambda v, k, s: first_maximum_pool(k, s)(v), kernel, stride, dilation)(x)


def max_pool2d(x, **attrs):
    return tf.transpose(max_pool2d_nhwc(tf.transpose(x, TO_NHWC), **attrs), TO_NCHW)


def max_pool2d_nhwc(x, *, kernel, stride, padding, dilation=(1, 1), ceil_mode=False):
    """max_pool2d of the NHWC image `x`, NHWC out (for `layout.py`)."""
    return pool(_max_pool, -np.inf)(x, kernel=kernel, stride=stride, padding=padding,
                                    dilation=dilation, ceil_mode=ceil_mode)


def _avg_pool(x, kernel, stride, dilation):
    return tf.nn.avg_pool2d(x, kernel, stride, "VALID")


def avg_pool2d(x, **attrs):
    return tf.transpose(avg_pool2d_nhwc(tf.transpose(x, TO_NHWC), **attrs), TO_NCHW)


def avg_pool2d_nhwc(x, *, kernel, stride, padding, ceil_mode=False, count_include_pad=True):
    """avg_pool2d of the NHWC image `x`, NHWC out (for `layout.py`)."""
    if x.dtype == tf.float16:
        # TF's float16 AvgPool sums in float16 (quirk "avg_pool2d"): in float32, rounded once
        wide = avg_pool2d_nhwc(tf.cast(x, tf.float32), kernel=kernel, stride=stride,
                               padding=padding, ceil_mode=ceil_mode,
                               count_include_pad=count_include_pad)
        return tf.cast(wide, tf.float16)
    total = pool(_avg_pool, 0)(x, kernel=kernel, stride=stride, padding=padding,
                               ceil_mode=ceil_mode)
    ((t, b), (left, r)), (eh, ew) = pool_pads_of(x, kernel, stride, padding, (1, 1),
                                                 ceil_mode)
    if not (count_include_pad and (eh, ew) == (0, 0)):
        # Not kh * kw everywhere: divide by the same pool of a mask of ones over the cells
        # counted (the two 1 / (kh * kw) cancel). Known image size: the record says so.
        h, w = (x.shape[1], x.shape[2]) if None not in tuple(x.shape[1:3]) else (
            tf.shape(x)[1], tf.shape(x)[2])
        if count_include_pad:
            ones = tf.ones((1, h + t + b, w + left + r, 1), x.dtype)
            mask = tf.pad(ones, ((0, 0), (0, eh), (0, ew), (0, 0)))
        else:
            mask = tf.pad(tf.ones((1, h, w, 1), x.dtype),
                          ((0, 0), (t, b + eh), (left, r + ew), (0, 0)))
        total = total / _avg_pool(mask, kernel, stride, (1, 1))
    return total


@functools.cache
def first_maximum_pool(kernel: tuple, stride: tuple):
    """An NHWC VALID max pool that follows the op record where TF's MaxPool does not: a
    window holding a NaN gives NaN (TF's kernel skips NaN), and its gradient goes to the
    window's first NaN; other windows send it to their first maximum, as TF's kernel does.
    One function per (kernel, stride), built once."""
    ksize, strides = (1, *kernel, 1), (1, *stride, 1)

    def pool(v):
        return raw.MaxPool(input=v, ksize=ksize, strides=strides, padding="VALID")

    def pool_grad(v, pooled, g):
        return raw.MaxPoolGrad(orig_input=v, orig_output=pooled, grad=g, ksize=ksize,
                               strides=strides, padding="VALID")

    def forward(x):
        pooled = pool(x)
        nans = raw.Cast(x=raw.IsNan(x=x), DstT=x.dtype)  # 1 at each NaN, else 0
        nans_pooled = pool(nans)
        has_nan = raw.Greater(x=nans_pooled, y=tf.zeros((), x.dtype))
        out = raw.SelectV2(condition=has_nan, t=tf.constant(np.nan, x.dtype), e=pooled)
        return out, pooled, nans, nans_pooled, has_nan

    @tf.custom_gradient
    def differentiable(x):
        # The gradient reads a copy made here: inside a tf.cond branch, `x` may be a tensor
        # of the enclosing graph, which the branch's gradient cannot take in.
        x = raw.Identity(input=x)
        out, pooled, nans, nans_pooled, has_nan = forward(x)

        def grad(g):
            none = tf.zeros_like(g)
            to_values = pool_grad(x, pooled, raw.SelectV2(condition=has_nan, t=none, e=g))
            to_nans = pool_grad(nans, nans_pooled, raw.SelectV2(condition=has_nan, t=g, e=none))
            return to_values + to_nans

        return out, grad

    def max_pool(x):
        if tf.executing_eagerly() and not bool(raw.Any(input=raw.IsNan(x=x), axis=(0, 1, 2, 3))):
            return pool(x)  # no NaN here: TF's kernel and its gradient are the op's
        return differentiable(x) if may_be_differentiated() else forward(x)[0]

    return max_pool




def before_nchw_transpose(native):
    """An activation `native` applied on the channels-last side of the transpose that
    made `x` NCHW, when `x` is such a transpose (the output of conv2d or a pool): the same
    values, but Grappler can then fuse conv + bias + activation in NHWC and cancel the
    transpose pair before the next conv or pool. For graphs only: `x.op` is its producer."""

    def lowering(x):
        op = x.op
        if op.type == "Transpose" and is_to_nchw(op.inputs[1]):
            return tf.transpose(native(op.inputs[0]), TO_NCHW)
        return native(x)

    return lowering


def is_to_nchw(perm) -> bool:
    # A Transpose's permutation is not always a constant: TF's own softmax over a
    # non-last axis builds it from the input's rank at run time.
    perm = tf.get_static_value(perm)
    return perm is not None and tuple(perm.tolist()) == TO_NCHW
