"""The lowering table: op name -> TensorFlow function, one entry per op record.

Built once from the imported `tensorflow` module by `make_lowerings(tf)` (importing
TensorFlow here at module level would defeat the lazy import and the paddle-first order).
The same functions serve all three modes: TF2 eager op by op, a `tf.compat.v1.Graph` fed by a
Session, and a `tf.function` trace; TF's public ops build graph nodes in the last two.

Hot ops call `tf.raw_ops` (the op itself, through TF's eager fast path) rather than the
`tf.math` wrappers, whose dtype-conversion and dispatch layers cost several microseconds per
eager call and add nothing here: inputs arrive as tensors of one dtype, attrs normalised.

Where TF's own op differs from the op record, a small wrapper next to the entry says how:
bool comparisons go through int8, argmax treats NaN as the maximum, and conv/pool images
are transposed to NHWC because TF's CPU kernels only take that layout.
"""

from __future__ import annotations

import numpy as np

# [N, C, H, W] <-> [N, H, W, C]
TO_NHWC = (0, 2, 3, 1)
TO_NCHW = (0, 3, 1, 2)
# conv weight [O, C/groups, KH, KW] -> TF filter [KH, KW, C/groups, O]
TO_HWIO = (2, 3, 1, 0)


def make_lowerings(tf) -> dict:
    """Return {op name: callable(*natives, **attrs) -> native} over the module `tf`."""
    raw = tf.raw_ops
    dtypes = {name: tf.as_dtype(name) for name in
              ("float16", "float32", "float64", "int32", "int64", "bool")}
    bool_, int8 = tf.bool, tf.int8

    def unary(op):
        return lambda x: op(x=x)

    def binary(op):
        return lambda x, y: op(x=x, y=y)

    def ordered(op):
        # TF's Less/Greater kernels take no bool; False < True holds in int8 as well.
        def lowering(x, y):
            if x.dtype is bool_:  # DTypes are interned: `is` is the cheap test
                x, y = raw.Cast(x=x, DstT=int8), raw.Cast(x=y, DstT=int8)
            return op(x=x, y=y)

        return lowering

    def cast(x, *, dtype):
        return raw.Cast(x=x, DstT=dtypes[dtype])

    def matmul(a, b):
        # MatMul for plain matrices (Grappler fuses it with a following bias add);
        # BatchMatMulV2 broadcasts batch dims, also between ranks.
        if len(a.shape) == 2 and len(b.shape) == 2:
            return raw.MatMul(a=a, b=b)
        return raw.BatchMatMulV2(x=a, y=b)

    def reduction(op):
        def lowering(x, *, axis, keepdims):
            if axis is None:
                axis = tuple(range(len(x.shape)))
            if not axis:
                return x  # nothing to reduce (and an empty axis list has no dtype)
            return op(input=x, axis=axis, keep_dims=keepdims)

        return lowering

    def argmax(x, *, axis, keepdims):
        if x.dtype.is_floating:
            # TF's ArgMax skips NaN; ours (NumPy's) counts NaN as the maximum. A slice holding
            # both +inf and NaN picks whichever comes first.
            x = raw.SelectV2(condition=raw.IsNan(x=x), t=tf.constant(np.inf, x.dtype), e=x)
        out = raw.ArgMax(input=x, dimension=axis, output_type=tf.int64)
        return raw.ExpandDims(input=out, axis=axis) if keepdims else out

    def transpose(x, *, perm):
        return raw.Transpose(x=x, perm=perm) if perm else x

    def concat(*xs, axis):
        return tf.concat(xs, axis)

    def stack(*xs, axis):
        return tf.stack(xs, axis)

    def squeeze(x, *, axis):
        return tf.squeeze(x, axis) if axis else x

    def slice_(x, *, begin, end, stride):
        return tf.strided_slice(x, begin, end, stride) if begin else x

    def take(x, indices, *, axis):
        return tf.gather(x, indices, axis=axis)

    def one_hot(indices, *, depth, dtype):
        if dtype == "bool":
            # OneHot's default on/off values are ints and do not convert to bool.
            return tf.one_hot(indices, depth, on_value=True, off_value=False, dtype=tf.bool)
        return tf.one_hot(indices, depth, dtype=dtypes[dtype])

    def constant(*, value):
        return tf.constant(value)

    def softmax(x, *, axis):
        return tf.nn.softmax(x, axis=axis)

    def log_softmax(x, *, axis):
        return tf.nn.log_softmax(x, axis=axis)

    # Images: our layout is NCHW, but TF's CPU Conv2D/MaxPool/AvgPool kernels take only NHWC,
    # so every conv/pool pays a transpose in and one out (a copy of the activation each way,
    # roughly the cost of one elementwise op on it). Grappler cannot fuse these away on CPU.

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

    def sparse_softmax_cross_entropy(logits, labels):
        return tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)

    return {
        # elementwise
        "add": binary(raw.AddV2),
        "sub": binary(raw.Sub),
        "mul": binary(raw.Mul),
        "div": binary(raw.RealDiv),  # floats only, as the record says
        "pow": binary(raw.Pow),
        "maximum": binary(raw.Maximum),
        "minimum": binary(raw.Minimum),
        "equal": binary(raw.Equal),
        "not_equal": binary(raw.NotEqual),
        "less": ordered(raw.Less),
        "less_equal": ordered(raw.LessEqual),
        "greater": ordered(raw.Greater),
        "greater_equal": ordered(raw.GreaterEqual),
        "logical_and": binary(raw.LogicalAnd),
        "logical_or": binary(raw.LogicalOr),
        "logical_not": unary(raw.LogicalNot),
        "neg": unary(raw.Neg),
        "abs": unary(raw.Abs),
        "exp": unary(raw.Exp),
        "log": unary(raw.Log),
        "sqrt": unary(raw.Sqrt),
        "where": lambda cond, x, y: raw.SelectV2(condition=cond, t=x, e=y),
        "cast": cast,
        # linalg
        "matmul": matmul,
        # reductions
        "sum": reduction(raw.Sum),
        "mean": reduction(raw.Mean),
        "max": reduction(raw.Max),
        "min": reduction(raw.Min),
        "argmax": argmax,
        # shape
        "reshape": lambda x, *, shape: tf.reshape(x, shape),
        "transpose": transpose,
        "concat": concat,
        "stack": stack,
        "squeeze": squeeze,
        "expand_dims": lambda x, *, axis: tf.expand_dims(x, axis),
        "broadcast_to": lambda x, *, shape: tf.broadcast_to(x, shape),
        "slice": slice_,
        "take": take,
        "one_hot": one_hot,
        "constant": constant,
        # nn
        "relu": before_nchw_transpose(lambda x: raw.Relu(features=x)),
        "sigmoid": before_nchw_transpose(unary(raw.Sigmoid)),
        "tanh": before_nchw_transpose(unary(raw.Tanh)),
        "softmax": softmax,
        "log_softmax": log_softmax,
        "conv2d": conv2d,
        "max_pool2d": pool(tf.nn.max_pool2d, -np.inf),
        "avg_pool2d": pool(tf.nn.avg_pool2d, 0),
        "sparse_softmax_cross_entropy": sparse_softmax_cross_entropy,
    }
