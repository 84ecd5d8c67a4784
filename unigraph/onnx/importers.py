"""The ONNX importers: one flat table, ONNX op type -> the function that writes that node
with unigraph's ops (STYLE rule 2); `unigraph.onnx.load` walks a model through it.

An importer is `run(ctx, args, attrs) -> value or list of values`: `args` are the node's
inputs (unigraph Tensors, or NumPy arrays for what is known at import: Constant nodes,
integer initializers, shapes of inputs whose shape is known; None for an omitted optional
input), `attrs` the node's attributes as Python values (strings decoded), `ctx` the
`unigraph.onnx.load.ImportContext` (`ctx.opset`, `ctx.static(value, what)` for an input
that must be known at import, `ctx.run_graph(graph, bindings)` for If/Loop bodies).
Every op becomes unigraph ops, so an imported model runs on every target, eager and static.
"""

from __future__ import annotations

import numpy as np

import unigraph as ug
from unigraph.onnx.importers_control_flow import CONTROL_FLOW_IMPORTERS
from unigraph.onnx.importers_elementwise import ELEMENTWISE_IMPORTERS
from unigraph.onnx.importers_nn import NN_IMPORTERS


def _op(fn):
    """An importer that is one unigraph function of the inputs."""
    return lambda ctx, args, attrs: fn(*args)


def _to_tensor(value):
    return value if isinstance(value, ug.Tensor) else ug.constant(np.asarray(value))


# -- elementwise -----------------------------------------------------------------------------
def _div(ctx, args, attrs):
    x, y = args
    if np.dtype(_dtype(x)).kind in "iu":  # ONNX's integer Div truncates toward zero
        floor = ug.floor_divide(x, y)
        moved = ug.logical_and(ug.not_equal(ug.mod(x, y), 0),
                               ug.not_equal(ug.less(x, 0), ug.less(y, 0)))
        return floor + ug.cast(moved, _dtype(x))
    return ug.div(x, y)


def _dtype(value) -> str:
    return str(value.dtype) if isinstance(value, ug.Tensor) else np.asarray(value).dtype.name


def _variadic(fn):
    def run(ctx, args, attrs):
        out = args[0]
        for arg in args[1:]:
            out = fn(out, arg)
        return out if len(args) > 1 else ug.add(out, 0)

    return run


def _mean(ctx, args, attrs):
    return _variadic(ug.add)(ctx, args, attrs) / float(len(args))


def _cast(ctx, args, attrs):
    from onnx import helper

    return ug.cast(args[0], np.dtype(helper.tensor_dtype_to_np_dtype(attrs["to"])).name)


def _clip(ctx, args, attrs):
    low = args[1] if len(args) > 1 else attrs.get("min")
    high = args[2] if len(args) > 2 else attrs.get("max")
    return ug.clip(args[0], low, high)


def _leaky_relu(ctx, args, attrs):
    return ug.leaky_relu(args[0], attrs.get("alpha", 0.01))


def _prelu(ctx, args, attrs):
    x, slope = args
    return ug.where(ug.less(x, 0), x * slope, x)  # ONNX: slope * x where x < 0, else x


def _elu(ctx, args, attrs):
    return ug.elu(args[0], attrs.get("alpha", 1.0))


def _selu(ctx, args, attrs):
    alpha = attrs.get("alpha", 1.67326319217681884765625)
    gamma = attrs.get("gamma", 1.05070102214813232421875)
    return ug.elu(args[0], alpha) * gamma


def _gelu(ctx, args, attrs):
    return ug.gelu(args[0], approximate=attrs.get("approximate", "none"))


def _mod(ctx, args, attrs):
    x, y = args
    if not attrs.get("fmod", 0):
        return ug.mod(x, y)
    # fmod: the sign of x; floor-semantics mod moved back by y where the signs differ.
    floor = ug.mod(x, y)
    moved = ug.logical_and(ug.not_equal(floor, 0), ug.not_equal(ug.less(x, 0), ug.less(y, 0)))
    return ug.where(moved, floor - y, floor)


# -- linear algebra ---------------------------------------------------------------------------
def _matmul(ctx, args, attrs):
    a, b = (_to_tensor(v) for v in args)
    vector_a, vector_b = len(a.shape) == 1, len(b.shape) == 1
    if vector_a:
        a = ug.expand_dims(a, 0)
    if vector_b:
        b = ug.expand_dims(b, -1)
    out = ug.matmul(a, b)
    if vector_a and vector_b:  # a dot product: a scalar
        return ug.reshape(out, ())
    if vector_b:
        out = ug.squeeze(out, -1)
    if vector_a:
        out = ug.squeeze(out, -2)
    return out


def _gemm(ctx, args, attrs):
    a, b = args[0], args[1]
    if attrs.get("transA", 0):
        a = ug.transpose(a)
    if attrs.get("transB", 0):
        b = ug.transpose(b)
    out = ug.matmul(a, b)
    alpha, beta = attrs.get("alpha", 1.0), attrs.get("beta", 1.0)
    if alpha != 1.0:
        out = out * alpha
    if len(args) > 2 and args[2] is not None:
        out = out + (args[2] * beta if beta != 1.0 else args[2])
    return out


# -- softmax ----------------------------------------------------------------------------------
def _softmax_like(fn):
    def run(ctx, args, attrs):
        x = args[0]
        rank = len(x.shape)
        axis = attrs.get("axis", -1 if ctx.opset >= 13 else 1) % rank
        if ctx.opset >= 13 or axis == rank - 1:
            return fn(x, axis=axis)
        # Before opset 13: over the flattened dims from `axis` on.
        flat = ug.reshape(x, (-1, int(np.prod(x.shape[axis:]))))
        return ug.reshape(fn(flat, axis=1), tuple(-1 if d is None else d for d in x.shape))

    return run


# -- shape ------------------------------------------------------------------------------------
def _shape(ctx, args, attrs):
    shape = args[0].shape if isinstance(args[0], ug.Tensor) else np.shape(args[0])
    begin, end = attrs.get("start", 0), attrs.get("end", None)
    dims = list(shape)[begin:end]
    if None in dims:
        ctx.refuse("Shape of a dim known only at run time")
    return np.asarray(dims, np.int64)


def _flatten(ctx, args, attrs):
    x = args[0]
    axis = attrs.get("axis", 1) % max(len(x.shape), 1) if x.shape else 0
    rest = int(np.prod(x.shape[axis:], dtype=np.int64))
    return ug.reshape(x, (-1, rest))


def _reshape(ctx, args, attrs):
    x, shape = args[0], ctx.static(args[1], "the shape of Reshape")
    dims = [int(d) for d in shape]
    if not attrs.get("allowzero", 0):
        dims = [x.shape[i] if d == 0 else d for i, d in enumerate(dims)]
    return ug.reshape(x, tuple(-1 if d is None else d for d in dims))


def _transpose(ctx, args, attrs):
    return ug.transpose(args[0], tuple(attrs["perm"]) if "perm" in attrs else None)


def _concat(ctx, args, attrs):
    return ug.concat([_to_tensor(a) for a in args], axis=attrs["axis"])


def _axes(ctx, args, attrs, what):
    if len(args) > 1 and args[1] is not None:
        return tuple(int(a) for a in ctx.static(args[1], f"the axes of {what}").reshape(-1))
    return tuple(attrs["axes"]) if "axes" in attrs else None


def _squeeze(ctx, args, attrs):
    axes = _axes(ctx, args, attrs, "Squeeze")
    return ug.squeeze(args[0], axes)


def _unsqueeze(ctx, args, attrs):
    out = args[0]
    rank = len(out.shape) + len(_axes(ctx, args, attrs, "Unsqueeze"))
    for axis in sorted(a % rank for a in _axes(ctx, args, attrs, "Unsqueeze")):
        out = ug.expand_dims(out, axis)
    return out


def _expand(ctx, args, attrs):
    x, shape = _to_tensor(args[0]), ctx.static(args[1], "the shape of Expand")
    rank = max(len(x.shape), len(shape))
    dims = [1] * (rank - len(x.shape)) + list(x.shape)
    wanted = [1] * (rank - len(shape)) + [int(d) for d in shape]
    return ug.broadcast_to(x, tuple(d if w == 1 else w for d, w in zip(dims, wanted)))


def _slice(ctx, args, attrs):
    """Slice with positive steps: ONNX resolves and clamps starts and ends as Python slices
    do, so it is `x[start:end:step, ...]`, also on a dim of unknown size (a symbolic dim the
    model is traced with: resolved when the program runs)."""
    x = args[0]
    starts = ctx.static(args[1], "the starts of Slice")
    ends = ctx.static(args[2], "the ends of Slice")
    rank = len(x.shape)
    axes = ctx.static(args[3], "the axes of Slice") if len(args) > 3 and args[3] is not None \
        else np.arange(len(starts))
    steps = ctx.static(args[4], "the steps of Slice") if len(args) > 4 and args[4] is not None \
        else np.ones(len(starts), np.int64)
    index = [slice(None)] * rank
    for start, stop, axis, step in zip(starts, ends, axes, steps):
        if step < 0:
            ctx.refuse("Slice with a negative step")
        index[int(axis) % rank] = slice(int(start), int(stop), int(step))
    return x[tuple(index)]


def _pad(ctx, args, attrs):
    """Pad (constant, reflect, edge), pads as an attribute (opset < 11) or an input, with
    optional axes; negative pads crop."""
    x, mode = args[0], attrs.get("mode", "constant")
    if mode not in ("constant", "reflect", "edge"):
        ctx.refuse(f"Pad with mode={mode!r}")
    rank = len(x.shape)
    if ctx.opset < 11:
        pads, value = list(attrs["pads"]), attrs.get("value", 0.0)
        axes = list(range(rank))
    else:
        pads = [int(p) for p in ctx.static(args[1], "the pads of Pad")]
        value = args[2] if len(args) > 2 and args[2] is not None else 0
        axes = list(range(rank)) if len(args) < 4 or args[3] is None else \
            [int(a) % rank for a in ctx.static(args[3], "the axes of Pad")]
    widths, crop = [(0, 0)] * rank, [(0, 0)] * rank
    for i, axis in enumerate(axes):
        before, after = int(pads[i]), int(pads[i + len(axes)])
        widths[axis] = (max(before, 0), max(after, 0))
        crop[axis] = (max(-before, 0), max(-after, 0))
    if any(b or a for b, a in crop):
        x = ug.slice(x, tuple(b for b, _ in crop),
                     tuple(size - a for size, (_, a) in zip(x.shape, crop)))
    if isinstance(value, ug.Tensor):  # a value computed at run time: pad 0, then fill
        if not any(b or a for b, a in widths):
            return ug.add(x, 0)
        # A select, not `padded + (1 - inside) * value`: an infinite value (the -inf an
        # expanded Attention pads its mask with) times 0 is NaN.
        inside = ug.greater(ug.pad(ug.ones_like(x, dtype="float32"), widths), 0)
        return ug.where(inside, ug.pad(x, widths), ug.cast(ug.reshape(value, ()), _dtype(x)))
    value = np.asarray(value).reshape(-1)[0].item() if np.size(value) else 0
    return ug.pad(x, widths, mode=mode, value=value)


def _split(ctx, args, attrs):
    """Split by sizes (an input from opset 13, else the `split` attribute), or into
    `num_outputs` pieces of ceil(size / n) (the last smaller), or into equal pieces."""
    x = args[0]
    axis = attrs.get("axis", 0) % len(x.shape)
    size, count = x.shape[axis], len(ctx.node.output)
    if len(args) > 1 and args[1] is not None:
        sizes = [int(v) for v in ctx.static(args[1], "the sizes of Split")]
    elif "split" in attrs:
        sizes = list(attrs["split"])
    elif "num_outputs" in attrs:
        chunk = -(-size // attrs["num_outputs"])
        sizes = [chunk] * (attrs["num_outputs"] - 1)
        sizes.append(size - sum(sizes))
    else:
        sizes = [size // count] * count
    points = list(np.cumsum(sizes)[:-1])
    return list(ug.split(x, [int(p) for p in points], axis=axis)) if points else [ug.add(x, 0)]



def _top_k(ctx, args, attrs):
    """TopK -> ug.topk: k an input from opset 10 (known at import), else the attribute;
    ONNX's order (ties by index, sorted) is the record's. sorted=0 leaves the order open in
    ONNX: the sorted one is one of the orders it allows."""
    if len(args) > 1:
        k = int(ctx.static(args[1], "k of TopK").reshape(-1)[0])
    else:
        k = attrs["k"]
    values, indices = ug.topk(args[0], k, axis=attrs.get("axis", -1),
                              largest=bool(attrs.get("largest", 1)))
    return [values, indices]


def _gather_elements(ctx, args, attrs):
    """out[i, j, ...] = data[..., index[i, j, ...] on `axis`, ...]: one `take` from the
    flattened data at flat positions (index * stride of `axis` + the other coordinates'
    offsets, known from the shapes at import)."""
    data, index = args
    rank = len(data.shape)
    axis = attrs.get("axis", 0) % rank
    strides = [int(np.prod(data.shape[d + 1:], dtype=np.int64)) for d in range(rank)]
    grid = np.indices(tuple(index.shape), dtype=np.int64)
    offsets = sum(grid[d] * strides[d] for d in range(rank) if d != axis)
    if isinstance(index, np.ndarray):
        index = np.where(index < 0, index + data.shape[axis], index).astype(np.int64)
        return ug.take(ug.reshape(data, (-1,)), index * strides[axis] + offsets)
    index = ug.cast(index, "int64")
    index = ug.where(ug.less(index, 0), index + data.shape[axis], index)
    flat = index * strides[axis] + ug.constant(np.asarray(offsets, np.int64))
    return ug.take(ug.reshape(_to_tensor(data), (-1,)), flat)


def _constant_of_shape(ctx, args, attrs):
    from onnx import numpy_helper

    value = numpy_helper.to_array(attrs["value"]) if "value" in attrs else np.zeros(1, np.float32)
    shape = tuple(int(d) for d in ctx.static(args[0], "the shape of ConstantOfShape"))
    return ug.full(shape, value.reshape(-1)[0].item(), dtype=value.dtype.name)


def _cumsum(ctx, args, attrs):
    """reverse: the sums from the end (flip, sum, flip); exclusive: each sum leaves its own
    element out (the sums of x with a zero put first, less the last), exactly."""
    x = args[0]
    axis = int(ctx.static(args[1], "the axis of CumSum").reshape(-1)[0]) % len(x.shape)
    if attrs.get("reverse", 0):
        x = ug.flip(x, axis)
    if attrs.get("exclusive", 0):
        pads = [(0, 0)] * len(x.shape)
        pads[axis] = (1, 0)
        out = ug.cumsum(ug.pad(x, pads), axis=axis)[(slice(None),) * axis + (slice(None, -1),)]
    else:
        out = ug.cumsum(x, axis=axis)
    return ug.flip(out, axis) if attrs.get("reverse", 0) else out


def _einsum(ctx, args, attrs):
    if "..." in attrs["equation"]:
        ctx.refuse("Einsum with '...' in its equation")
    return ug.einsum(attrs["equation"].replace(" ", ""), *args)


def _gather(ctx, args, attrs):
    return ug.take(args[0], args[1], axis=attrs.get("axis", 0))


def _reduce(fn):
    def run(ctx, args, attrs):
        axes = _axes(ctx, args, attrs, "a reduction")
        if axes is None or len(axes) == 0:
            if attrs.get("noop_with_empty_axes", 0):
                return ug.add(args[0], 0)
            axes = None
        return fn(args[0], axis=axes, keepdims=bool(attrs.get("keepdims", 1)))

    return run


def _extreme(fn, empty: float):
    """ReduceMax/ReduceMin: bool inputs through int32; over no elements, ONNX's identity
    (-inf for max, +inf for min) rather than an error."""
    def reduce(x, axis, keepdims):
        rank = len(x.shape)
        axes = tuple(range(rank)) if axis is None else tuple(a % rank for a in axis)
        if any(x.shape[a] == 0 for a in axes):
            shape = tuple(1 if d in axes else n for d, n in enumerate(x.shape) if keepdims or
                          d not in axes)
            return ug.full(shape, bool(empty > 0) if _dtype(x) == "bool" else empty,
                           dtype=_dtype(x))
        if _dtype(x) == "bool":
            return ug.cast(fn(ug.cast(x, "int32"), axis=axes, keepdims=keepdims), "bool")
        return fn(x, axis=axes, keepdims=keepdims)

    return _reduce(reduce)


def _argmax(ctx, args, attrs):
    x, axis = args[0], attrs.get("axis", 0)
    keepdims = bool(attrs.get("keepdims", 1))
    if not attrs.get("select_last_index", 0):
        return ug.argmax(x, axis=axis, keepdims=keepdims)
    # The last maximum: the first one of the reversed axis, counted from the end.
    return (x.shape[axis] - 1) - ug.argmax(ug.flip(x, axis), axis=axis, keepdims=keepdims)


def _constant(ctx, args, attrs):
    for key in ("value", "value_float", "value_floats", "value_int", "value_ints"):
        if key in attrs:
            value = attrs[key]
            if key == "value":
                from onnx import numpy_helper

                return numpy_helper.to_array(value)
            dtype = np.float32 if "float" in key else np.int64
            return np.asarray(value, dtype)
    ctx.refuse("Constant without a value/value_float(s)/value_int(s) attribute")


def _identity(ctx, args, attrs):
    return args[0]


def _dropout(ctx, args, attrs):
    """Inference: the input as it is, and an all-true mask where one is asked for."""
    training = args[2] if len(args) > 2 else None
    if training is not None and not (isinstance(training, np.ndarray) and not training.any()):
        ctx.refuse("Dropout in training mode")
    if len(ctx.node.output) > 1 and ctx.node.output[1]:
        return [args[0], ug.full(tuple(args[0].shape), True, dtype="bool")]
    return args[0]


def _pow(ctx, args, attrs):
    """ONNX's Pow has the base's dtype, whatever the exponent's."""
    x, y = args
    if _dtype(x) == _dtype(y) and np.dtype(_dtype(x)).kind == "f":
        return ug.pow(x, y)
    if np.dtype(_dtype(x)).kind == "f":
        return ug.pow(x, ug.cast(_to_tensor(y), _dtype(x)))
    return ug.cast(ug.pow(ug.cast(_to_tensor(x), "float64"), ug.cast(_to_tensor(y), "float64")),
                   _dtype(x))


IMPORTERS = {
    "Add": _op(ug.add),
    "Sub": _op(ug.sub),
    "Mul": _op(ug.mul),
    "Div": _div,
    "Pow": _pow,
    "Neg": _op(ug.neg),
    "Abs": _op(ug.abs),
    "Exp": _op(ug.exp),
    "Log": _op(ug.log),
    "Sqrt": _op(ug.sqrt),
    "Erf": _op(ug.erf),
    "Equal": _op(ug.equal),
    "Less": _op(ug.less),
    "Greater": _op(ug.greater),
    "Not": _op(ug.logical_not),
    "And": _op(ug.logical_and),
    "Or": _op(ug.logical_or),
    "Where": _op(ug.where),
    "LessOrEqual": _op(ug.less_equal),
    "GreaterOrEqual": _op(ug.greater_equal),
    "Xor": _op(ug.logical_xor),
    "IsNaN": _op(ug.isnan),
    "Mod": _mod,
    "Sign": _op(ug.sign),
    "Floor": _op(ug.floor),
    "Ceil": _op(ug.ceil),
    "Round": _op(ug.round),
    "Sin": _op(ug.sin),
    "Cos": _op(ug.cos),
    "Tan": _op(ug.tan),
    "Asin": _op(ug.asin),
    "Acos": _op(ug.acos),
    "Atan": _op(ug.atan),
    "Sinh": _op(ug.sinh),
    "Cosh": _op(ug.cosh),
    "Max": _variadic(ug.maximum),
    "Min": _variadic(ug.minimum),
    "Sum": _variadic(ug.add),
    "Mean": _mean,
    "Cast": _cast,
    "Clip": _clip,
    "Relu": _op(ug.relu),
    "LeakyRelu": _leaky_relu,
    "PRelu": _prelu,
    "Elu": _elu,
    "Selu": _selu,
    "Gelu": _gelu,
    "Sigmoid": _op(ug.sigmoid),
    "Tanh": _op(ug.tanh),
    "Softplus": _op(ug.softplus),
    "Softmax": _softmax_like(ug.softmax),
    "LogSoftmax": _softmax_like(ug.log_softmax),
    "MatMul": _matmul,
    "Gemm": _gemm,
    "Dropout": _dropout,
    "Shape": _shape,
    "Flatten": _flatten,
    "Reshape": _reshape,
    "Transpose": _transpose,
    "Concat": _concat,
    "Squeeze": _squeeze,
    "Unsqueeze": _unsqueeze,
    "Gather": _gather,
    "Expand": _expand,
    "Slice": _slice,
    "Pad": _pad,
    "TopK": _top_k,
    "Split": _split,
    "GatherElements": _gather_elements,
    "ConstantOfShape": _constant_of_shape,
    "CumSum": _cumsum,
    "Einsum": _einsum,
    "ReduceProd": _reduce(ug.prod),
    "ReduceSum": _reduce(ug.sum),
    "ReduceMean": _reduce(ug.mean),
    "ReduceMax": _extreme(ug.max, -np.inf),
    "ReduceMin": _extreme(ug.min, np.inf),
    "ArgMax": _argmax,
    "Identity": _identity,
    "Constant": _constant,
    **CONTROL_FLOW_IMPORTERS,
    **ELEMENTWISE_IMPORTERS,
    **NN_IMPORTERS,
}
