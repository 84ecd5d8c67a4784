"""Convolution and pooling lowerings: NCHW in the IR, NHWC in TensorFlow's kernels.

Our layout is NCHW, but TF's CPU Conv2D/MaxPool/AvgPool kernels take only NHWC, so every
conv/pool pays a transpose in and one out (a copy of the activation each way, roughly the cost
of one elementwise op on it). In a graph, an activation right after a conv or pool is applied
on the NHWC side of that transpose (`before_nchw_transpose`), so Grappler fuses
conv + bias + activation and cancels the transpose pairs between consecutive convs.

This module imports tensorflow: the backend imports it only from `TensorFlowBackend.load`,
after paddle (see `unigraph.backend.import_framework`).
"""

from __future__ import annotations

import functools

import numpy as np
import tensorflow as tf

from unigraph_tensorflow.taping import may_be_differentiated

# [N, C, H, W] <-> [N, H, W, C]
TO_NHWC = (0, 2, 3, 1)
TO_NCHW = (0, 3, 1, 2)
# conv weight [O, C/groups, KH, KW] -> TF filter [KH, KW, C/groups, O]
TO_HWIO = (2, 3, 1, 0)

raw = tf.raw_ops


def conv2d(x, w, bias=None, *, stride, padding, dilation, groups):
    f = tf.transpose(w, TO_HWIO)
    out = nonempty_batch(
        x, lambda: convolve(tf.transpose(x, TO_NHWC), f, stride, padding, dilation, groups),
        kernel=f.shape[:2], stride=stride, padding=padding, dilation=dilation,
        channels=f.shape[3])
    if bias is not None:
        # Once, after whichever route, while the channels are last: BiasAdd on NHWC is
        # the op Grappler folds into the conv (_FusedConv2D) on the plain route.
        out = tf.nn.bias_add(out, bias)
    return tf.transpose(out, TO_NCHW)


def convolve(x, f, stride, padding, dilation, groups):
    """The NHWC conv of `x` by the HWIO filter `f`, by a route TF can differentiate."""
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
    """`compute()` (an NHWC conv or pool of the NCHW `image`), or zeros of its true shape
    when the batch is empty. TF gets N = 0 wrong: Conv2D hands back its input ([0, H, W, C]
    whatever the filter, while the static shape says [0, OH, OW, O]), and in a graph the
    oneDNN MaxPoolGrad aborts the process. A batch known to be non-empty costs nothing; one
    unknown until run time (a loop carry whose shape changes) is chosen by a tf.cond."""
    batch = image.shape[0]
    if batch is not None and batch > 0:
        return compute()
    dims = tf.shape(image) if None in tuple(image.shape) else tuple(image.shape)
    height, width = (
        (size + 2 * pad - rate * (k - 1) - 1) // step + 1
        for size, k, step, pad, rate in zip(
            (dims[2], dims[3]), kernel, stride, padding, dilation)
    )
    zeros = tf.zeros((dims[0], height, width, channels), image.dtype)
    if batch == 0:
        return zeros
    return tf.cond(dims[0] > 0, compute, lambda: zeros)


def dilate_filter(f, dh, dw):
    """[KH, KW, I, O] -> [(KH-1)*dh+1, (KW-1)*dw+1, I, O] with zeros between the taps.
    KH and KW are static: a filter is a parameter or an input of known shape."""
    kh, kw = f.shape[0], f.shape[1]
    # Each tap followed by rate - 1 zeros, flattened back, the trailing zeros cut off.
    f = tf.pad(f[:, None], ((0, 0), (0, dh - 1), (0, 0), (0, 0), (0, 0)))
    f = tf.reshape(f, (kh * dh, kw, f.shape[3], -1))[: (kh - 1) * dh + 1]
    f = tf.pad(f[:, :, None], ((0, 0), (0, 0), (0, dw - 1), (0, 0), (0, 0)))
    return tf.reshape(f, (-1, kw * dw, f.shape[3], f.shape[4]))[:, : (kw - 1) * dw + 1]


def pool(native_pool, fill):
    """The lowering of a pool op over TF's NHWC `native_pool(x, kernel, stride)` (VALID),
    padding with `fill`."""

    def lowering(x, *, kernel, stride, padding):
        (ph, pw) = padding

        def compute():
            nhwc = tf.transpose(x, TO_NHWC)
            if ph or pw:
                # Explicit padding, then VALID: max pads with -inf, avg with zeros that count
                # (TF's SAME avg pool would divide the border windows by fewer elements).
                nhwc = tf.pad(nhwc, ((0, 0), (ph, ph), (pw, pw), (0, 0)),
                              constant_values=fill)
            return native_pool(nhwc, kernel, stride)

        out = nonempty_batch(x, compute, kernel=kernel, stride=stride, padding=padding,
                             dilation=(1, 1), channels=x.shape[1])
        return tf.transpose(out, TO_NCHW)

    return lowering


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


max_pool2d = pool(lambda x, kernel, stride: first_maximum_pool(kernel, stride)(x), -np.inf)
avg_pool2d = pool(lambda x, kernel, stride: tf.nn.avg_pool2d(x, kernel, stride, "VALID"), 0)


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
