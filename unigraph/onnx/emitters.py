"""The ONNX emitters: one flat table, op record name -> the function that writes that op as
ONNX nodes (STYLE rule 2).

An emitter is `emit(writer, args, node) -> name`: `args` are the ONNX names of the node's
inputs, `node` the IR node (its input values carry the shapes and dtypes, `node.attrs` the
op's attrs), and the result is the ONNX name holding the op's one output. `writer` (see
`unigraph.onnx.export.GraphWriter`) adds nodes to the graph being written:
`writer.node(op_type, inputs, **attrs)`, `writer.const(array)`, `writer.opset`.

Where ONNX Runtime (the runtime the exporter is verified on) does not follow ONNX's or our
op records' meaning, the emitter routes around it, and says so next to the entry:

* no float64 kernel for Conv and AveragePool: other float dtypes than float32 and float16
  are written as an im2col composition (Pad, Slice, Concat, MatMul), still ONNX ops;
* ReduceMax/ReduceMin, float64 MaxPool and ArgMax skip NaN, where the op records propagate
  it (a NaN is the maximum): an IsNaN test puts the NaN back;
* float64 LogSoftmax of a row holding +inf is not NaN throughout: written as its formula;
* Less/Greater and friends take no bools: bools are compared as int32;
* Where gives +0.0 where it picks a -0.0 from x: `where` multiplies that back to -0.0;
* integer ReduceSum and ReduceProd saturate: int32/int64 sum and prod wrap through CumSum
  and a Loop of Mul (`unigraph.onnx.integer_reductions`);
* the math ops (`unigraph.onnx.emitters_math`, spread into the table): float64 Tan, Asin,
  Acos, Atan, Sinh, Cosh and Erf have no kernel, float Mod is fmod only, float16 and float64
  Softplus overflow, and a -0.0 result must stay out of Where's first operand.
"""

from __future__ import annotations

import numpy as np

from unigraph.export.prepare import ExportError
from unigraph.onnx.emitters_math import MATH_EMITTERS
from unigraph.onnx.integer_reductions import wrapping_sum
from unigraph.ops.pooling import avg_divisor, pool_geometry, pool_pads
from unigraph.shape_checks import MARKER, check_tag

INT64_MAX = np.iinfo(np.int64).max
# ONNX Runtime's CPU kernels for these ops exist only in these dtypes (checked: 1.32).
CONV_KERNEL_DTYPES = ("float16", "float32")
AVG_POOL_KERNEL_DTYPES = ("float16", "float32")
# float64 LogSoftmax of a row holding +inf gives [nan, -inf, ...], not NaN throughout.
LOG_SOFTMAX_KERNEL_DTYPES = ("float16", "float32")


def _ints(values) -> np.ndarray:
    return np.asarray(list(values), dtype=np.int64)


def _dtype(node, index: int = 0) -> str:
    return node.inputs[index].dtype


def _rank(node, index: int = 0) -> int:
    return len(node.inputs[index].shape)


# -- elementwise -----------------------------------------------------------------------------
def _op(op_type: str, **fixed):
    """An op that is one ONNX node with the same inputs (and `fixed` attributes)."""
    return lambda w, args, node: w.node(op_type, args, **fixed)


def _compare(op_type: str):
    """Less and friends take no bools in ONNX: compare bools as int32 (False < True)."""

    def emit(w, args, node):
        if _dtype(node) == "bool":
            args = [w.node("Cast", [a], to=w.onnx_dtype("int32")) for a in args]
        return w.node(op_type, args)

    return emit


def _not_equal(w, args, node):
    return w.node("Not", [w.node("Equal", args)])


def _where(w, args, node):
    """ORT's Where gives +0.0 where it picks a -0.0 from x (quirk "atan2 (floor_divide, sinh,
    erf)" of onnxruntime): there the picked value is multiplied by -1, which gives -0.0 back
    and leaves every other value as it is."""
    cond, x, y = args
    picked = w.node("Where", args)
    dtype = _dtype(node, 1)
    if dtype not in ("float16", "float32", "float64"):
        return picked
    zero = w.const(np.zeros((), dtype))
    minus_zero = w.node("And", [w.node("Equal", [x, zero]), w.node("Less", [
        w.node("Div", [w.const(np.ones((), dtype)), x]), zero])])  # 1 / -0.0 is -inf
    flip = w.node("Where", [w.node("And", [cond, minus_zero]), w.const(np.array(-1, dtype)),
                            w.const(np.ones((), dtype))])
    return w.node("Mul", [picked, flip])


def _cast(w, args, node):
    return w.node("Cast", args, to=w.onnx_dtype(node.attrs["dtype"]))


# -- reductions ------------------------------------------------------------------------------
def _reduce(w, op_type: str, x: str, axis, keepdims: bool) -> str:
    """One Reduce* node over `axis` (a tuple, or None for every axis). Opset 18 moved the
    axes of every reduction from an attribute to an input (ReduceSum: opset 13)."""
    if axis is None:
        return w.node(op_type, [x], keepdims=int(keepdims))
    if op_type == "ReduceSum" or w.opset >= 18:
        return w.node(op_type, [x, w.const(_ints(axis))], keepdims=int(keepdims))
    return w.node(op_type, [x], axes=list(axis), keepdims=int(keepdims))


def _any_nan(w, x: str, dtype: str, reduce) -> str:
    """bool: where `reduce` (a function of a 0/1 tensor) finds a NaN of x."""
    flags = w.node("Cast", [w.node("IsNaN", [x])], to=w.onnx_dtype(dtype))
    return w.node("Greater", [reduce(flags), w.const(np.zeros((), dtype))])


def _with_nan(w, x: str, result: str, dtype: str, reduce) -> str:
    """`result`, NaN wherever `reduce` finds a NaN of x (ORT's max/min kernels skip NaN)."""
    if dtype not in ("float16", "float32", "float64"):
        return result
    nan = w.const(np.full((), np.nan, dtype))
    return w.node("Where", [_any_nan(w, x, dtype, reduce), nan, result])


def _extreme(op_type: str):
    def emit(w, args, node):
        axis, keepdims = node.attrs["axis"], node.attrs["keepdims"]
        result = _reduce(w, op_type, args[0], axis, keepdims)
        return _with_nan(w, args[0], result, _dtype(node),
                         lambda flags: _reduce(w, "ReduceMax", flags, axis, keepdims))

    return emit


def _sum(w, args, node):
    axis, keepdims = node.attrs["axis"], node.attrs["keepdims"]
    if _dtype(node) in ("int32", "int64"):  # ORT's integer ReduceSum saturates
        return wrapping_sum(w, args[0], axis, keepdims, _rank(node))
    return _reduce(w, "ReduceSum", args[0], axis, keepdims)


def _mean(w, args, node):
    return _reduce(w, "ReduceMean", args[0], node.attrs["axis"], node.attrs["keepdims"])


def _count_true(w, x: str, node) -> str:
    """How many elements of the bool x are True per slice (int64; 0 over an empty axis):
    ONNX's Reduce* ops take no bools, and ReduceMax of nothing is not False."""
    ones = w.node("Cast", [x], to=w.onnx_dtype("int64"))
    return _reduce(w, "ReduceSum", ones, node.attrs["axis"], node.attrs["keepdims"])


def _any(w, args, node):
    return w.node("Greater", [_count_true(w, args[0], node), w.const(np.zeros((), np.int64))])


def _all(w, args, node):
    falses = _count_true(w, w.node("Not", args), node)
    return w.node("Equal", [falses, w.const(np.zeros((), np.int64))])


# The least float32 magnitude that rounds to a float16 infinity (65504 is float16's largest).
FLOAT16_OVERFLOW = 65520.0


def _isinf(w, args, node):
    if _dtype(node) != "float16":
        return w.node("IsInf", args)
    # IsInf takes no float16 at opset 18, and ORT hands a float16 value that an op without
    # a float16 kernel computed (in float32) to a Cast to float32 unrounded (quirk "isinf"):
    # |x| >= 65520 is where that value rounds to a float16 infinity, and it holds for a
    # float16 x as well.
    wide = w.node("Cast", args, to=w.onnx_dtype("float32"))
    return w.node("GreaterOrEqual", [w.node("Abs", [wide]),
                                     w.const(np.array(FLOAT16_OVERFLOW, np.float32))])


def _isfinite(w, args, node):
    return w.node("Not", [w.node("Or", [w.node("IsNaN", args), _isinf(w, args, node)])])


def _argmax(w, args, node):
    axis, keepdims = node.attrs["axis"], int(node.attrs["keepdims"])
    found = w.node("ArgMax", args, axis=axis, keepdims=keepdims)
    dtype = _dtype(node)
    if dtype not in ("float16", "float32", "float64"):
        return found
    # A NaN counts as the maximum: the first NaN's index where the slice holds one.
    flags = w.node("Cast", [w.node("IsNaN", args)], to=w.onnx_dtype(dtype))
    first_nan = w.node("ArgMax", [flags], axis=axis, keepdims=keepdims)
    has_nan = w.node("Greater", [_reduce(w, "ReduceMax", flags, (axis,), keepdims),
                                 w.const(np.zeros((), dtype))])
    return w.node("Where", [has_nan, first_nan, found])


# -- shape -----------------------------------------------------------------------------------
def _reshape(w, args, node):
    shape = node.attrs["shape"]
    # In ONNX a 0 in the target shape copies the input's dim unless allowzero (opset 14);
    # sizes computed when the program runs (args[1]) may hold a 0.
    sizes = args[1] if len(args) > 1 else None
    extra = {"allowzero": 1} if (sizes or 0 in shape) and w.opset >= 14 else {}
    return w.node("Reshape", [args[0], sizes or w.const(_ints(shape))], **extra)


def _transpose(w, args, node):
    return w.node("Transpose", args, perm=list(node.attrs["perm"]))


def _concat(w, args, node):
    return w.node("Concat", args, axis=node.attrs["axis"])


def _stack(w, args, node):
    axis = w.const(_ints([node.attrs["axis"]]))
    return w.node("Concat", [w.node("Unsqueeze", [a, axis]) for a in args],
                  axis=node.attrs["axis"])


def _squeeze(w, args, node):
    axis = node.attrs["axis"]
    return w.node("Squeeze", [args[0], w.const(_ints(axis))])


def _ensure_shape(w, args, node):
    # ONNX has no Assert: each value's dims that the check knows and its trace leaves open
    # are compared with the run's Shape, and the value is reshaped to 0s (each dim its own)
    # when they all agree, else to each size + 1, which ONNX Runtime refuses printing the
    # failed node's name, which names the check (MARKER and its tag), and the value's shape
    # ("Name:'_unigraph-shape-check-5-34' ... cannot be reshaped ... Input shape:{2,3}";
    # shape_checks reads them, and no other Reshape's failure).
    # x flows on through its Reshape, and through one to the others' checked Shapes times
    # 0 (its own dims), so the check of every value, a while_loop's variables included,
    # runs with it.
    shape = node.attrs["shape"]
    flow = args[0]
    for value, traced in zip(args, node.inputs):
        dims = [i for i, want in enumerate(shape) if want is not None and traced.shape[i] is None]
        if not dims:
            continue
        sizes = w.node("Shape", [value])
        picked = w.node("Gather", [sizes, w.const(_ints(dims))], axis=0)
        agree = w.node("Equal", [picked, w.const(_ints([shape[i] for i in dims]))])
        wrong = w.node("Cast", [w.node("Not", [agree])], to=w.onnx_dtype("int64"))
        ones = w.const(_ints([1] * len(shape)))
        # (each size + 1) x the count of wrong dims clipped to 1: 0s where they all agree
        count = w.node("Min", [_reduce(w, "ReduceSum", wrong, [0], keepdims=True),
                               w.const(_ints([1]))])
        checked = w.node("Reshape", [value, w.node("Mul", [w.node("Add", [sizes, ones]), count])],
                         name=f"{MARKER}-{check_tag(node.attrs['message'])}-")
        if value is args[0] and flow is args[0]:
            flow = checked
        else:
            zeros = w.node("Mul", [w.node("Shape", [checked]), w.const(_ints([0]))])
            flow = w.node("Reshape", [flow, zeros])
    return flow if flow is not args[0] else w.node("Identity", [args[0]])


def _expand_dims(w, args, node):
    return w.node("Unsqueeze", [args[0], w.const(_ints([node.attrs["axis"]]))])


def _broadcast_to(w, args, node):
    return w.node("Expand", [args[0], w.const(_ints(node.attrs["shape"]))])


def _slice(w, args, node):
    begin, end, stride = (node.attrs[k] for k in ("begin", "end", "stride"))
    axes = range(len(begin))
    return w.node("Slice", [args[0], w.const(_ints(begin)), w.const(_ints(end)),
                            w.const(_ints(axes)), w.const(_ints(stride))])


def _flip(w, args, node):
    # From the last element (-1) back past the first (INT64_MIN), step -1: no size needed.
    axes = node.attrs["axes"]
    return w.node("Slice", [args[0], w.const(_ints([-1] * len(axes))),
                            w.const(_ints([-2**63] * len(axes))), w.const(_ints(axes)),
                            w.const(_ints([-1] * len(axes)))])


def _moved_out(w, indices: str, dtype: str, size: str) -> str:
    """ONNX's Gather wraps a negative index, which unigraph's take refuses: each negative
    i becomes i - size, which Gather then refuses, printing it (unigraph.index_checks)."""
    negative = w.node("Less", [indices, w.const(np.array(0, dtype))])
    return w.node("Where", [negative, w.node("Sub", [indices, size]), indices])


def _dim(w, x: str, shape: tuple, axis: int, dtype: str) -> str:
    """Dim `axis` of `x` as a scalar of `dtype`: a constant when the graph knows it."""
    if shape[axis] is not None:
        return w.const(np.array(shape[axis], dtype))
    dims = w.node("Shape", [x])
    picked = w.node("Gather", [dims, w.const(np.array(axis, np.int64))], axis=0)
    return w.node("Cast", [picked], to=w.onnx_dtype(dtype))


def _take(w, args, node):
    x, indices = args
    axis, dtype = node.attrs["axis"], _dtype(node, 1)
    moved = _moved_out(w, indices, dtype, _dim(w, x, node.inputs[0].shape, axis, dtype))
    return w.node("Gather", [x, moved], axis=axis)


def _scatter_add(w, args, node):
    """ScatterND with reduction "add" (opset 16) along `axis` moved first; below opset 16
    (no reduction, so repeats would not sum) x + the indices' one-hot matrix @ updates.
    The frontend checked the indices (they went through a take)."""
    x, indices, updates = args
    axis, rank = node.attrs["axis"], len(node.inputs[0].shape)
    perm = [axis, *range(axis), *range(axis + 1, rank)]
    if axis:
        x, updates = (w.node("Transpose", [t], perm=perm) for t in (x, updates))
    if w.opset >= 16:
        index = w.node("Unsqueeze", [w.node("Cast", [indices], to=w.onnx_dtype("int64")),
                                     w.const(_ints([1]))])
        if _dtype(node) == "float16":  # ORT's CPU ScatterND adds no float16: in float32
            wide = [w.node("Cast", [t], to=w.onnx_dtype("float32")) for t in (x, updates)]
            out = w.node("Cast", [w.node("ScatterND", [wide[0], index, wide[1]],
                                         reduction="add")], to=w.onnx_dtype("float16"))
        else:
            out = w.node("ScatterND", [x, index, updates], reduction="add")
    else:
        size, dtype = node.inputs[0].shape[axis], _dtype(node, 1)
        if size is None:  # a dim input_spec leaves open: the rows counted when it runs
            count = _dim(w, args[0], node.inputs[0].shape, axis, dtype)
            line = w.node("Range", [w.const(np.array(0, dtype)), count,
                                    w.const(np.array(1, dtype))])
            rows = w.node("Unsqueeze", [line, w.const(_ints([1]))])
        else:
            rows = w.const(np.arange(size, dtype=dtype).reshape(size, 1))
        picks = w.node("Cast", [w.node("Equal", [rows, w.node("Unsqueeze", [
            indices, w.const(_ints([0]))])])], to=w.onnx_dtype(_dtype(node)))
        flat = w.node("Reshape", [updates, w.const(_ints([0, -1]))])
        added = w.node("Reshape", [w.node("MatMul", [picks, flat]), w.node("Shape", [x])])
        out = w.node("Add", [x, added])
    return w.node("Transpose", [out], perm=[int(p) for p in np.argsort(perm)]) if axis else out


def _one_hot(w, args, node):
    # Not ONNX's OneHot: it wraps negative indices, where ours give a row of zeros.
    depth, rank = node.attrs["depth"], _rank(node)
    positions = w.const(np.arange(depth, dtype=_dtype(node)))
    hits = w.node("Equal", [w.node("Unsqueeze", [args[0], w.const(_ints([rank]))]), positions])
    return w.node("Cast", [hits], to=w.onnx_dtype(node.attrs["dtype"]))


def _constant(w, args, node):
    return w.const(np.asarray(node.attrs["value"]))


# -- neural network --------------------------------------------------------------------------
def _softmax(w, args, node):
    return w.node("Softmax", args, axis=node.attrs["axis"])


def _log_softmax(w, args, node):
    return _log_softmax_of(w, args[0], node.attrs["axis"], _dtype(node))


def _log_softmax_of(w, x: str, axis: int, dtype: str) -> str:
    if dtype in LOG_SOFTMAX_KERNEL_DTYPES:
        return w.node("LogSoftmax", [x], axis=axis)
    # (x - max) - log(sum(exp(x - max))): a row holding +inf is NaN throughout.
    shifted = w.node("Sub", [x, _reduce(w, "ReduceMax", x, (axis,), True)])
    total = _reduce(w, "ReduceSum", w.node("Exp", [shifted]), (axis,), True)
    return w.node("Sub", [shifted, w.node("Log", [total])])


def _pads(padding) -> list:
    ph, pw = padding
    return [ph, pw, ph, pw]


def _windows_nhwc(w, x: str, kernel, stride, dilation, padding, value: float,
                  dtype: str) -> list:
    """One [N, OH, OW, C] slice of padded NHWC x per kernel offset (i, j), row-major: the
    input element each output position reads at that offset. Shape-free: the slice ends
    count from the end, so the batch and the image size may be known only at run time."""
    (kh, kw), (sh, sw), (dh, dw) = kernel, stride, dilation
    (top, bottom), (left, right) = pool_pads(padding)  # a pair, or pairs (before, after)
    pads = [0, top, left, 0, 0, bottom, right, 0]
    nhwc = w.node("Transpose", [x], perm=[0, 2, 3, 1])
    if any(pads):
        nhwc = w.node("Pad", [nhwc, w.const(_ints(pads)), w.const(np.array(value, dtype))])
    windows = []
    for i in range(kh):
        for j in range(kw):
            end_h = -(kh - 1 - i) * dh or INT64_MAX
            end_w = -(kw - 1 - j) * dw or INT64_MAX
            windows.append(w.node("Slice", [
                nhwc, w.const(_ints([i * dh, j * dw])), w.const(_ints([end_h, end_w])),
                w.const(_ints([1, 2])), w.const(_ints([sh, sw]))]))
    return windows


def _conv2d(w, args, node):
    attrs = node.attrs
    if _dtype(node) in CONV_KERNEL_DTYPES:
        return w.node("Conv", args, strides=list(attrs["stride"]), pads=_pads(attrs["padding"]),
                      dilations=list(attrs["dilation"]), group=attrs["groups"])
    return _conv2d_im2col(w, args, node)


def _conv2d_im2col(w, args, node):
    """conv2d as one MatMul over the windows (im2col), for dtypes ORT has no Conv for."""
    attrs, dtype = node.attrs, _dtype(node)
    out_channels, per_group, kh, kw = node.inputs[1].shape
    groups = attrs["groups"]
    if None in (per_group, kh, kw):
        where = f" at {node.source}" if node.source else ""
        raise ExportError(
            f"{dtype} conv2d{where}: ONNX Runtime has no {dtype} Conv kernel, and its im2col "
            "form needs the weight's input channels and kernel size while tracing, which "
            "input_spec leaves open; give those dims sizes in the spec, or use float32")
    # (out channels left open by input_spec: -1, the one size each Reshape infers)
    out_channels = -1 if out_channels is None else out_channels
    per_output_group = -1 if out_channels == -1 else out_channels // groups
    windows = _windows_nhwc(w, args[0], (kh, kw), attrs["stride"], attrs["dilation"],
                            attrs["padding"], 0.0, dtype)
    grouped = _ints([0, 0, 0, groups, 1, per_group])  # 0: keep N, OH, OW as they are
    columns = w.node("Concat", [w.node("Reshape", [win, w.const(grouped)]) for win in windows],
                     axis=-1)  # [N, OH, OW, G, 1, KH*KW*C/G], ordered (i, j, c)
    kernel = w.node("Reshape", [args[1], w.const(_ints(
        [groups, per_output_group, per_group, kh, kw]))])
    kernel = w.node("Transpose", [kernel], perm=[0, 3, 4, 2, 1])  # [G, KH, KW, C/G, O/G]
    kernel = w.node("Reshape", [kernel, w.const(_ints(
        [groups, kh * kw * per_group, per_output_group]))])
    product = w.node("MatMul", [columns, kernel])  # [N, OH, OW, G, 1, O/G]
    if out_channels == -1:  # (-1 beside the 0 rows of an empty batch names no size)
        first = [w.const(_ints([0])), w.const(_ints([3]))]
        rows = w.node("Slice", [w.node("Shape", [product]), *first])  # [N, OH, OW]
        outs = w.node("Slice", [w.node("Shape", [args[1]]), first[0], w.const(_ints([1]))])
        flat_shape = w.node("Concat", [rows, outs], axis=0)
    else:
        flat_shape = w.const(_ints([0, 0, 0, out_channels]))
    flat = w.node("Reshape", [product, flat_shape])
    out = w.node("Transpose", [flat], perm=[0, 3, 1, 2])
    if len(args) == 3:
        out = w.node("Add", [out, w.node("Reshape", [args[2], w.const(
            _ints([out_channels, 1, 1]))])])
    return out


def _conv_transpose2d(w, args, node):
    attrs = node.attrs
    # ORT's ConvTranspose refuses output_padding >= stride, which the record allows below
    # the dilation: that case takes the conv route too.
    small = all(a < s for a, s in zip(attrs["output_padding"], attrs["stride"]))
    if _dtype(node) in CONV_KERNEL_DTYPES and small:
        (ph, pw) = attrs["padding"]
        return w.node("ConvTranspose", args, strides=list(attrs["stride"]),
                      pads=[ph, pw, ph, pw], output_padding=list(attrs["output_padding"]),
                      dilations=list(attrs["dilation"]), group=attrs["groups"])
    return _conv_transpose2d_as_conv(w, args, node)


def _conv_transpose2d_as_conv(w, args, node):
    """float64 (no ConvTranspose kernel in ORT): a stride-1 conv2d (im2col) of x with
    stride - 1 zeros between its elements, padded by dilation * (k - 1) (plus output_padding
    at the end), by the kernel flipped, in and out channels swapped per group; then the
    padding cropped off the output."""
    from types import SimpleNamespace

    attrs, dtype = node.attrs, _dtype(node)
    _, channels, height, width = node.inputs[0].shape
    _, per_group, kh, kw = node.inputs[1].shape
    groups = attrs["groups"]
    (sh, sw), (dh, dw), (oph, opw) = attrs["stride"], attrs["dilation"], attrs["output_padding"]
    channels = node.inputs[1].shape[0] if channels is None else channels
    if None in (channels, per_group, kh, kw) + ((height, width) if (sh, sw) != (1, 1) else ()):
        where = f" at {node.source}" if node.source else ""
        why = "refuses output_padding >= stride" if dtype in CONV_KERNEL_DTYPES else \
            f"has no {dtype} kernel"
        raise ExportError(
            f"{dtype} conv_transpose2d{where}: ONNX Runtime's ConvTranspose {why}, and the "
            "conv form it is written as there needs the weight's channels and kernel size "
            "(with a stride above 1, the input's height and width too) while tracing, which "
            "input_spec leaves open; give those dims sizes in the spec")
    x = args[0]
    if (sh, sw) != (1, 1):
        spread = w.node("Unsqueeze", [x, w.const(_ints([3, 5]))])  # [N, C, H, 1, W, 1]
        spread = w.node("Pad", [spread, w.const(_ints([0] * 6 + [0, 0, 0, sh - 1, 0, sw - 1]))])
        spread = w.node("Reshape", [spread, w.const(_ints([0, 0, height * sh, width * sw]))])
        x = w.node("Slice", [spread, w.const(_ints([0, 0])), w.const(_ints(
            [(height - 1) * sh + 1, (width - 1) * sw + 1])), w.const(_ints([2, 3]))])
    rim_h, rim_w = dh * (kh - 1), dw * (kw - 1)
    if rim_h or rim_w or oph or opw:
        x = w.node("Pad", [x, w.const(_ints([0, 0, rim_h, rim_w, 0, 0, rim_h + oph,
                                             rim_w + opw]))])
    # [C, O/G, KH, KW] -> [G, O/G, C/G, KH, KW] -> [O, C/G, KH, KW], flipped in KH and KW.
    kernel = w.node("Reshape", [args[1], w.const(_ints(
        [groups, channels // groups, per_group, kh, kw]))])
    kernel = w.node("Transpose", [kernel], perm=[0, 2, 1, 3, 4])
    kernel = w.node("Reshape", [kernel, w.const(_ints(
        [groups * per_group, channels // groups, kh, kw]))])
    kernel = w.node("Slice", [kernel, w.const(_ints([-1, -1])), w.const(_ints(
        [-INT64_MAX, -INT64_MAX])), w.const(_ints([2, 3])), w.const(_ints([-1, -1]))])
    conv = SimpleNamespace(
        attrs={"stride": (1, 1), "padding": (0, 0), "dilation": (dh, dw), "groups": groups},
        inputs=[SimpleNamespace(dtype=dtype),
                SimpleNamespace(shape=(groups * per_group, channels // groups, kh, kw))])
    full = _conv2d_im2col(w, [x, kernel, *args[2:]], conv)
    (ph, pw) = attrs["padding"]
    if not (ph or pw):
        return full
    return w.node("Slice", [full, w.const(_ints([ph, pw])), w.const(_ints([-ph or INT64_MAX,
                                                                         -pw or INT64_MAX])),
                            w.const(_ints([2, 3]))])


def _pool_attrs(attrs) -> dict:
    (top, bottom), (left, right) = pool_pads(attrs["padding"])
    return {"kernel_shape": list(attrs["kernel"]), "strides": list(attrs["stride"]),
            "pads": [top, left, bottom, right]}


def _max_pool2d(w, args, node):
    attrs, shape = node.attrs, node.inputs[0].shape
    dilation = attrs.get("dilation", (1, 1))
    pool = _pool_attrs(attrs)
    if attrs.get("ceil_mode", False):
        # ONNX's ceil_mode keeps a last window that starts in the end padding, which the
        # record (as PyTorch) drops: the record's extra cells go into the end pads instead.
        _, pads, extra = pool_geometry(shape[2:], attrs["kernel"], attrs["stride"],
                                       attrs["padding"], dilation, True)
        pool["pads"] = [pads[0][0], pads[1][0], pads[0][1] + extra[0], pads[1][1] + extra[1]]
    pool["dilations"] = list(dilation)
    pooled = w.node("MaxPool", args, **pool)
    # float64 MaxPool skips NaN in ORT; a window holding one is NaN (first maximum rule).
    return _with_nan(w, args[0], pooled, _dtype(node),
                     lambda flags: w.node("MaxPool", [flags], **pool))


def _avg_geometry(node):
    """(padding with the ceil-mode cells added, constant divisor or None) of an avg pool."""
    attrs, shape = node.attrs, node.inputs[0].shape
    ceil_mode, include = attrs.get("ceil_mode", False), attrs.get("count_include_pad", True)
    if None in shape[2:]:  # the record refuses ceil_mode there
        pads, extra = pool_pads(attrs["padding"]), (0, 0)
    else:
        _, pads, extra = pool_geometry(shape[2:], attrs["kernel"], attrs["stride"],
                                       attrs["padding"], (1, 1), ceil_mode)
    padded = tuple((a, b + more) for (a, b), more in zip(pads, extra))
    if include and extra == (0, 0):
        return padded, attrs["kernel"][0] * attrs["kernel"][1]
    if not include and not any(pads[0] + pads[1] + extra):
        return padded, attrs["kernel"][0] * attrs["kernel"][1]
    divisor = None if None in shape[2:] else avg_divisor(
        shape[2:], attrs["kernel"], attrs["stride"], pads, extra, include)
    return padded, divisor


def _avg_pool2d(w, args, node):
    attrs, dtype = node.attrs, _dtype(node)
    include = attrs.get("count_include_pad", True)
    padded, divisor = _avg_geometry(node)
    plain = not attrs.get("ceil_mode", False) and (divisor is not None or not include)
    if dtype in AVG_POOL_KERNEL_DTYPES and plain:
        # ORT's count_include_pad is the record's, except where ceil_mode windows run past
        # the padding: those take the summed route below.
        return w.node("AveragePool", args, count_include_pad=int(include),
                      **_pool_attrs(attrs))
    windows = _windows_nhwc(w, args[0], attrs["kernel"], attrs["stride"], (1, 1), padded,
                            0.0, dtype)
    total = w.node("Sum", windows) if len(windows) > 1 else windows[0]
    # The count of cells each window averages over: a graph constant of the image geometry.
    count = np.asarray(divisor, dtype)
    count = w.const(count[None, :, :, None] if count.ndim else count)
    return w.node("Transpose", [w.node("Div", [total, count])], perm=[0, 3, 1, 2])


def _sparse_softmax_cross_entropy(w, args, node):
    logits, labels = args
    log_p = _log_softmax_of(w, logits, 1, _dtype(node))
    classes, labels_type = node.inputs[0].shape[1], _dtype(node, 1)
    if classes is not None:
        # GatherElements wraps a negative label and its refusal names no value: a Gather
        # of zeros at the labels (negative ones moved out of range) refuses first, printing
        # the label; the labels read by GatherElements wait for it (plus its zeros).
        size = w.const(np.array(classes, labels_type))
        zeros = w.const(np.zeros(classes, labels_type))
        check = w.node("Gather", [zeros, _moved_out(w, labels, labels_type, size)], axis=0)
        labels = w.node("Add", [labels, check])
    column = w.node("Unsqueeze", [labels, w.const(_ints([1]))])
    picked = w.node("GatherElements", [log_p, column], axis=1)
    return w.node("Neg", [w.node("Squeeze", [picked, w.const(_ints([1]))])])


def _argsort(w, args, node):
    # TopK of every element, smallest first (sorted=1), its indices: ORT orders equal
    # values by index and NaN last, as the record, for every int dtype too
    # (tests/test_argsort.py).
    axis = node.attrs["axis"]
    size = w.node("Reshape", [w.node("Gather", [w.node("Shape", args), w.const(_ints([axis]))]),
                              w.const(_ints([1]))])
    return w.node("TopK", [args[0], size], count=2, axis=axis, largest=0, sorted=1)[1]


def _topk(w, args, node):
    # TopK's indices (sorted=1): ORT orders equal values by index and NaN as the largest,
    # smallest first or largest first, as the record, ints too (tests/test_topk.py).
    attrs = node.attrs
    return w.node("TopK", [args[0], w.const(_ints([attrs["k"]]))], count=2, axis=attrs["axis"],
                  largest=int(attrs["largest"]), sorted=1)[1]


def _trilu(upper: int):
    def emit(w, args, node):
        return w.node("Trilu", [args[0], w.const(np.array(node.attrs["k"], np.int64))],
                      upper=upper)

    return emit


def _print(w, args, node):
    # ONNX has no op that prints: an exported model computes what the graph computes, and
    # its ug.print calls become Identity (the printed value flows on; nothing is printed).
    return w.node("Identity", [args[0]])


# -- int8 / uint8 / int16 --------------------------------------------------------------------
SMALL_INTS = ("int8", "uint8", "int16")


def _widen_small_ints(emit, dtype_input: int = 0, dtypes: tuple = SMALL_INTS):
    """An emitter run in int32 when input `dtype_input` is int8, uint8 or int16 (or one of
    `dtypes`; the inputs from `dtype_input` on of that dtype are cast), its int32 result
    cast back (wrapping modulo 2**bits, as NumPy's arithmetic): ONNX gives ReduceSum,
    ReduceProd, CumSum, Floor and Neg (uint8) no such types, and ONNX Runtime 1.32 has no
    int16 Max, Min, ArgMax or Where kernel (quirk "small ints" of onnxruntime), nor a bool
    Where (quirk "where")."""
    from unigraph.ir import Node, Value

    def emit_wide(w, args, node):
        dtype = _dtype(node, dtype_input)
        if dtype not in dtypes:
            return emit(w, args, node)
        int32 = w.onnx_dtype("int32")
        # Inputs before `dtype_input` keep their dtype (where's bool condition).
        widened = [k >= dtype_input and v.dtype == dtype for k, v in enumerate(node.inputs)]
        args = [w.node("Cast", [a], to=int32) if cast else a for a, cast in zip(args, widened)]
        wide = Node(node.op,
                    [Value(v.shape, "int32" if cast else v.dtype)
                     for v, cast in zip(node.inputs, widened)],
                    [Value(v.shape, "int32" if v.dtype == dtype else v.dtype)
                     for v in node.outputs],
                    node.attrs, node.subgraphs, node.source)
        out = emit(w, args, wide)
        if node.outputs[0].dtype == dtype:
            return w.node("Cast", [out], to=w.onnx_dtype(dtype))
        return out

    return emit_wide


EMITTERS = {
    "add": _op("Add"),
    "sub": _op("Sub"),
    "mul": _op("Mul"),
    "div": _op("Div"),
    "pow": _op("Pow"),
    "maximum": _op("Max"),  # ORT's Max and Min propagate NaN, as the records do
    "minimum": _op("Min"),
    "equal": _op("Equal"),
    "not_equal": _not_equal,
    "less": _compare("Less"),
    "less_equal": _compare("LessOrEqual"),
    "greater": _compare("Greater"),
    "greater_equal": _compare("GreaterOrEqual"),
    "logical_and": _op("And"),
    "logical_or": _op("Or"),
    "logical_not": _op("Not"),
    "logical_xor": _op("Xor"),
    "isnan": _op("IsNaN"),
    "isinf": _isinf,
    "isfinite": _isfinite,
    "neg": _op("Neg"),
    "abs": _op("Abs"),
    "exp": _op("Exp"),
    "log": _op("Log"),
    "sqrt": _op("Sqrt"),
    "where": _where,
    "cast": _cast,
    "matmul": _op("MatMul"),
    "sum": _sum,
    "mean": _mean,
    "max": _extreme("ReduceMax"),
    "min": _extreme("ReduceMin"),
    "argmax": _argmax,
    "any": _any,
    "all": _all,
    "reshape": _reshape,
    "transpose": _transpose,
    "concat": _concat,
    "stack": _stack,
    "squeeze": _squeeze,
    "ensure_shape": _ensure_shape,
    # (open dims: checked before the run, by check_before_run; not in the ONNX model)
    "ensure_size": lambda w, args, node: w.node("Identity", [args[0]]),
    "expand_dims": _expand_dims,
    "broadcast_to": _broadcast_to,
    "slice": _slice,
    "flip": _flip,
    "take": _take,
    "scatter_add": _scatter_add,
    "one_hot": _one_hot,
    "constant": _constant,
    "relu": _op("Relu"),
    "sigmoid": _op("Sigmoid"),
    "tanh": _op("Tanh"),
    "softmax": _softmax,
    "log_softmax": _log_softmax,
    "conv2d": _conv2d,
    "conv_transpose2d": _conv_transpose2d,
    "max_pool2d": _max_pool2d,
    "avg_pool2d": _avg_pool2d,
    "sparse_softmax_cross_entropy": _sparse_softmax_cross_entropy,
    "print": _print,
    "argsort": _argsort,
    "topk": _topk,
    "tril": _trilu(upper=0),
    "triu": _trilu(upper=1),
    # inference computes no gradient: the value flows on
    "stop_gradient": _op("Identity"),
    **MATH_EMITTERS,
}
# The ops ONNX or ONNX Runtime cannot run on small ints (see _widen_small_ints).
EMITTERS.update({name: _widen_small_ints(EMITTERS[name]) for name in (
    "neg", "maximum", "minimum", "sum", "max", "min", "argmax", "floor_divide", "mod",
    "prod", "cumsum", "tril", "triu")})
EMITTERS["where"] = _widen_small_ints(EMITTERS["where"], dtype_input=1,
                                     dtypes=SMALL_INTS + ("bool",))
