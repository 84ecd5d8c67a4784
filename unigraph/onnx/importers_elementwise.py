"""More ONNX importers: activations, reductions and small shape ops, each a composition of
unigraph ops (same contract as `unigraph.onnx.importers`, whose table spreads this one).

    IMPORTERS = {..., **ELEMENTWISE_IMPORTERS}
"""

from __future__ import annotations

import numpy as np

import unigraph as ug


def _dtype(value) -> str:
    return str(value.dtype) if isinstance(value, ug.Tensor) else np.asarray(value).dtype.name


def _tensor(value):
    return value if isinstance(value, ug.Tensor) else ug.constant(np.asarray(value))


# -- activations ------------------------------------------------------------------------------
def _reciprocal(ctx, args, attrs):
    return ug.div(ug.ones_like(args[0]), args[0])


def _hard_sigmoid(ctx, args, attrs):
    return ug.clip(args[0] * attrs.get("alpha", 0.2) + attrs.get("beta", 0.5), 0.0, 1.0)


def _hard_swish(ctx, args, attrs):
    return args[0] * ug.clip(args[0] * (1.0 / 6.0) + 0.5, 0.0, 1.0)


def _softsign(ctx, args, attrs):
    return args[0] / (ug.abs(args[0]) + 1.0)


def _celu(ctx, args, attrs):
    alpha = attrs.get("alpha", 1.0)
    return ug.relu(args[0]) + ug.minimum(ug.exp(args[0] / alpha) - 1.0, 0.0) * alpha


def _thresholded_relu(ctx, args, attrs):
    x = args[0]
    return ug.where(ug.greater(x, attrs.get("alpha", 1.0)), x, ug.zeros_like(x))


def _mish(ctx, args, attrs):
    return args[0] * ug.tanh(ug.softplus(args[0]))


def _shrink(ctx, args, attrs):
    x, lambd, bias = args[0], attrs.get("lambd", 0.5), attrs.get("bias", 0.0)
    zero = ug.zeros_like(x)
    return ug.where(ug.less(x, -lambd), x + bias, ug.where(ug.greater(x, lambd), x - bias, zero))


def _swish(ctx, args, attrs):
    return args[0] * ug.sigmoid(args[0] * attrs.get("alpha", 1.0))


def _is_inf(ctx, args, attrs):
    x = args[0]
    if attrs.get("detect_positive", 1) and attrs.get("detect_negative", 1):
        return ug.isinf(x)
    # isinf and a sign, not x == inf: ONNX Runtime can hand a float16 value that an op
    # computed in float32 to its reader unrounded (6e8 for an overflowed 6e4 * 1e4; quirk
    # "isinf (isfinite)"), which only ug.isinf's export accounts for.
    positive = ug.logical_and(ug.isinf(x), ug.greater(x, 0.0)) \
        if attrs.get("detect_positive", 1) else None
    negative = ug.logical_and(ug.isinf(x), ug.less(x, 0.0)) \
        if attrs.get("detect_negative", 1) else None
    if positive is None and negative is None:
        return ug.less(ug.abs(x), -1.0)  # nothing to detect: all false, NaN included
    if positive is None or negative is None:
        return positive if negative is None else negative
    return ug.logical_or(positive, negative)


def _cast_like(ctx, args, attrs):
    return ug.cast(args[0], _dtype(args[1]))


def _size(ctx, args, attrs):
    shape = args[0].shape
    if None in shape:
        ctx.refuse("Size of a tensor whose shape is known only at run time")
    return np.asarray(int(np.prod(shape, dtype=np.int64)), np.int64)


# -- reductions -------------------------------------------------------------------------------
def _axes(ctx, args, attrs):
    if len(args) > 1 and args[1] is not None:
        axes = tuple(int(a) for a in ctx.static(args[1], "the axes of a reduction"))
    else:
        axes = tuple(attrs["axes"]) if "axes" in attrs else None
    return axes if axes else None


def _reduction(fn):
    def run(ctx, args, attrs):
        axes = _axes(ctx, args, attrs)
        if axes is None and attrs.get("noop_with_empty_axes", 0):
            return fn(args[0], None, None)
        return fn(args[0], axes, bool(attrs.get("keepdims", 1)))

    return run


def _l1(x, axes, keepdims):
    return ug.abs(x) if keepdims is None else ug.sum(ug.abs(x), axis=axes, keepdims=keepdims)


def _l2(x, axes, keepdims):
    if keepdims is None:
        return ug.abs(x)
    return ug.sqrt(ug.sum(x * x, axis=axes, keepdims=keepdims))


def _sum_square(x, axes, keepdims):
    return x * x if keepdims is None else ug.sum(x * x, axis=axes, keepdims=keepdims)


def _log_sum(x, axes, keepdims):
    return ug.log(x) if keepdims is None else ug.log(ug.sum(x, axis=axes, keepdims=keepdims))


def _log_sum_exp(x, axes, keepdims):
    return ug.add(x, 0) if keepdims is None else ug.logsumexp(x, axis=axes, keepdims=keepdims)


def _argmin(ctx, args, attrs):
    x, axis = args[0], attrs.get("axis", 0)
    keepdims = bool(attrs.get("keepdims", 1))
    if not attrs.get("select_last_index", 0):
        return ug.argmin(x, axis=axis, keepdims=keepdims)
    return (x.shape[axis] - 1) - ug.argmin(ug.flip(x, axis), axis=axis, keepdims=keepdims)


def _hardmax(ctx, args, attrs):
    """1 at the first maximum along `axis` (opset 13; before: over the flattened dims from
    `axis` on), 0 elsewhere."""
    x = args[0]
    rank = len(x.shape)
    axis = attrs.get("axis", -1 if ctx.opset >= 13 else 1) % rank
    if ctx.opset < 13 and axis != rank - 1:
        flat = ug.reshape(x, (-1, int(np.prod(x.shape[axis:]))))
        return ug.reshape(_hardmax(ctx, [flat], {"axis": 1}), tuple(x.shape))
    first = ug.argmax(x, axis=axis, keepdims=True)
    positions = np.arange(x.shape[axis]).reshape([-1 if d == axis else 1 for d in range(rank)])
    return ug.cast(ug.equal(first, ug.constant(positions.astype(np.int64))), _dtype(x))


def _layer_norm(ctx, args, attrs):
    """(x - mean) / sqrt(var + epsilon) * scale + bias over the dims from `axis` on; the
    Mean and InvStdDev outputs where asked for."""
    x = args[0]
    rank = len(x.shape)
    axes = tuple(range(attrs.get("axis", -1) % rank, rank))
    mean = ug.mean(x, axis=axes, keepdims=True)
    centred = x - mean
    inverse = 1.0 / ug.sqrt(ug.mean(centred * centred, axis=axes, keepdims=True)
                            + attrs.get("epsilon", 1e-5))
    out = centred * inverse * args[1]
    if len(args) > 2 and args[2] is not None:
        out = out + args[2]
    return [out, mean, inverse]


# -- shape ------------------------------------------------------------------------------------
def _tile(ctx, args, attrs):
    reps = tuple(int(r) for r in ctx.static(args[1], "the repeats of Tile"))
    return ug.tile(args[0], reps)


def _trilu(ctx, args, attrs):
    x = args[0]
    k = int(ctx.static(args[1], "k of Trilu").reshape(-1)[0]) if len(args) > 1 and \
        args[1] is not None else 0
    return ug.triu(x, k) if attrs.get("upper", 1) else ug.tril(x, k)


def _eye_like(ctx, args, attrs):
    """Ones on diagonal k of a 2-D tensor's shape, in `dtype` or the input's dtype."""
    from onnx import helper

    x = args[0]
    if None in x.shape:
        ctx.refuse("EyeLike of a tensor whose shape is known only at run time")
    dtype = _dtype(x) if "dtype" not in attrs else \
        np.dtype(helper.tensor_dtype_to_np_dtype(attrs["dtype"])).name
    return ug.eye(x.shape[0], x.shape[1], attrs.get("k", 0), dtype=dtype)


def _range(ctx, args, attrs):
    """start, start + delta, ... before limit, in start's dtype: the length depends on the
    values, so they must be known at import (a Range of known values folds before this)."""
    start, limit, delta = (ctx.static(a, f"the {what} of Range").reshape(-1)[0]
                           for a, what in zip(args, ("start", "limit", "delta")))
    return ug.arange(start.item(), limit.item(), delta.item(), dtype=start.dtype.name)


def _one_hot(ctx, args, attrs):
    """values[1] where an index (negative ones from the end) equals its position along the
    new `axis` of size depth, values[0] elsewhere (an index outside [-depth, depth): all
    values[0]), as ONNX's reference."""
    indices, values = _tensor(args[0]), _tensor(args[2])
    depth = int(ctx.static(args[1], "the depth of OneHot").reshape(-1)[0])
    rank = len(indices.shape)
    axis = attrs.get("axis", -1) % (rank + 1)
    wrapped = ug.where(ug.less(indices, 0), indices + depth, indices)
    positions = ug.reshape(ug.arange(depth, dtype=_dtype(indices)),
                           (1,) * axis + (depth,) + (1,) * (rank - axis))
    return ug.where(ug.equal(ug.expand_dims(wrapped, axis), positions), values[1], values[0])


def _depth_to_space(ctx, args, attrs):
    x, b = args[0], attrs["blocksize"]
    n, c, h, w = x.shape
    if attrs.get("mode", "DCR") == "DCR":
        tmp = ug.transpose(ug.reshape(x, (n, b, b, c // (b * b), h, w)), (0, 3, 4, 1, 5, 2))
    else:
        tmp = ug.transpose(ug.reshape(x, (n, c // (b * b), b, b, h, w)), (0, 1, 4, 2, 5, 3))
    return ug.reshape(tmp, (n, c // (b * b), h * b, w * b))


def _space_to_depth(ctx, args, attrs):
    x, b = args[0], attrs["blocksize"]
    n, c, h, w = x.shape
    order = (0, 3, 5, 1, 2, 4) if attrs.get("mode", "DCR") == "DCR" else (0, 1, 3, 5, 2, 4)
    tmp = ug.transpose(ug.reshape(x, (n, c, h // b, b, w // b, b)), order)
    return ug.reshape(tmp, (n, c * b * b, h // b, w // b))


ELEMENTWISE_IMPORTERS = {
    "Reciprocal": _reciprocal,
    "HardSigmoid": _hard_sigmoid,
    "HardSwish": _hard_swish,
    "Softsign": _softsign,
    "Celu": _celu,
    "ThresholdedRelu": _thresholded_relu,
    "Mish": _mish,
    "Swish": _swish,
    "Shrink": _shrink,
    "IsInf": _is_inf,
    "CastLike": _cast_like,
    "Size": _size,
    "ReduceL1": _reduction(_l1),
    "ReduceL2": _reduction(_l2),
    "ReduceSumSquare": _reduction(_sum_square),
    "ReduceLogSum": _reduction(_log_sum),
    "ReduceLogSumExp": _reduction(_log_sum_exp),
    "ArgMin": _argmin,
    "Hardmax": _hardmax,
    "LayerNormalization": _layer_norm,
    "Tile": _tile,
    "Trilu": _trilu,
    "EyeLike": _eye_like,
    "Range": _range,
    "OneHot": _one_hot,
    "DepthToSpace": _depth_to_space,
    "SpaceToDepth": _space_to_depth,
}
