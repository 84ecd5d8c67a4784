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

import numpy as np
import tensorflow as tf

# [N, C, H, W] <-> [N, H, W, C]
TO_NHWC = (0, 2, 3, 1)
TO_NCHW = (0, 3, 1, 2)
# conv weight [O, C/groups, KH, KW] -> TF filter [KH, KW, C/groups, O]
TO_HWIO = (2, 3, 1, 0)


def conv2d(x, w, bias=None, *, stride, padding, dilation, groups):
    (ph, pw), (sh, sw), (dh, dw) = padding, stride, dilation
    image, (x, f) = x, (tf.transpose(x, TO_NHWC), tf.transpose(w, TO_HWIO))
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
        out = conv(x, f)
    else:
        # TF's CPU Conv2D runs a grouped filter forward, but its gradient kernels refuse
        # groups on CPU: one conv per group (split channels, concat the outputs).
        pairs = zip(tf.split(x, groups, axis=3), tf.split(f, groups, axis=3))
        out = tf.concat([conv(xg, fg) for xg, fg in pairs], axis=3)
    if image.shape[0] == 0 or image.shape[0] is None:
        out = empty_batch_output(out, image, f, padding, stride, dilation)
    if bias is not None:
        # Once, after whichever route, while the channels are last: BiasAdd on NHWC is
        # the op Grappler folds into the conv (_FusedConv2D) on the plain route.
        out = tf.nn.bias_add(out, bias)
    return tf.transpose(out, TO_NCHW)


def empty_batch_output(out, image, f, padding, stride, dilation):
    """`out`, or zeros of the conv's true shape when the batch is empty: TF's Conv2D
    hands back its input when N = 0 ([0, H, W, C], whatever the filter) while the static
    shape says [0, OH, OW, O]. A batch unknown until run time (a loop carry whose shape
    changes) chooses at run time. `image` is the NCHW input, `f` the HWIO filter."""
    dims = tf.shape(image) if None in tuple(image.shape) else tuple(image.shape)
    height, width = (
        (size + 2 * pad - rate * (kernel - 1) - 1) // step + 1
        for size, kernel, step, pad, rate in zip(
            (dims[2], dims[3]), f.shape[:2], stride, padding, dilation)
    )
    zeros = tf.zeros((dims[0], height, width, f.shape[3]), out.dtype)
    if image.shape[0] == 0:
        return zeros
    return tf.cond(dims[0] > 0, lambda: out, lambda: zeros)


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
    """The lowering of a pool op over TF's NHWC `native_pool`, padding with `fill`."""

    def lowering(x, *, kernel, stride, padding):
        (ph, pw) = padding
        x = tf.transpose(x, TO_NHWC)
        if ph or pw:
            # Explicit padding, then VALID: max pads with -inf, avg with zeros that count
            # (TF's SAME avg pool would divide the border windows by fewer elements).
            x = tf.pad(x, ((0, 0), (ph, ph), (pw, pw), (0, 0)), constant_values=fill)
        out = native_pool(x, kernel, stride, "VALID")
        return tf.transpose(out, TO_NCHW)

    return lowering


max_pool2d = pool(tf.nn.max_pool2d, -np.inf)
avg_pool2d = pool(tf.nn.avg_pool2d, 0)


def before_nchw_transpose(native):
    """An activation `native` applied on the channels-last side of the transpose that
    made `x` NCHW, when `x` is such a transpose in a graph (the output of conv2d or a
    pool): the same values, but Grappler can then fuse conv + bias + activation in NHWC
    and cancel the transpose pair before the next conv or pool. Eagerly: just `native`."""

    def lowering(x):
        op = getattr(x, "op", None)  # eager tensors have no producing op
        if op is not None and op.type == "Transpose" and is_to_nchw(op.inputs[1]):
            return tf.transpose(native(op.inputs[0]), TO_NCHW)
        return native(x)

    return lowering


def is_to_nchw(perm) -> bool:
    # A Transpose's permutation is not always a constant: TF's own softmax over a
    # non-last axis builds it from the input's rank at run time.
    perm = tf.get_static_value(perm)
    return perm is not None and tuple(perm.tolist()) == TO_NCHW
