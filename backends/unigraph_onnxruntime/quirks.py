"""The ONNX Runtime behaviours the ONNX emitters route around (see `unigraph.quirks` and
`unigraph.onnx.emitters`).

Listing them imports nothing; each `pin` builds a one-node ONNX model, runs it in ONNX
Runtime and returns True while ONNX Runtime still behaves as written down here.
"""

from __future__ import annotations

from unigraph.quirks import Quirk

VERSIONS = "1.32.0"


def _run(op_type: str, inputs: list, **attrs):
    """Run one ONNX node on NumPy `inputs`; its one output, or the error it raised."""
    import onnx
    from onnx import helper

    from unigraph_onnxruntime.static import open_session

    names = [f"i{k}" for k in range(len(inputs))]
    infos = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(x.dtype), x.shape)
             for n, x in zip(names, inputs)]
    node = helper.make_node(op_type, names, ["o"], **attrs)
    graph = helper.make_graph([node], "pin", infos, [onnx.ValueInfoProto(name="o")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    try:
        return open_session(model).run(None, dict(zip(names, inputs)))[0]
    except Exception as error:
        return error


def _no_float64_kernel(op_type: str, **attrs):
    def pin() -> bool:
        import numpy as np

        inputs = [np.ones((1, 1, 2, 2))] + ([np.ones((1, 1, 1, 1))] if op_type == "Conv" else [])
        return "NOT_IMPLEMENTED" in str(_run(op_type, inputs, **attrs))

    return pin


def _no_float64_unary_kernel() -> bool:
    import numpy as np

    from unigraph.onnx.emitters_math import NO_FLOAT64_KERNEL

    ops = [op.capitalize() for op in NO_FLOAT64_KERNEL]
    return all("NOT_IMPLEMENTED" in str(_run(op, [np.array([0.5])])) for op in ops)


def _no_int16_kernels() -> bool:
    import numpy as np

    x = np.array([1, 2], np.int16)
    cases = [("Max", [x, x]), ("Min", [x, x]), ("ArgMax", [x]),
             ("Where", [np.array([True, False]), x, x]),
             ("Trilu", [np.ones((2, 2), np.int8)])]
    return all("NOT_IMPLEMENTED" in str(_run(op, inputs)) for op, inputs in cases)


def _no_bool_where() -> bool:
    import numpy as np

    x = np.array([True, False])
    return "NOT_IMPLEMENTED" in str(_run("Where", [x, x, x]))


def _reduce_prod_saturates() -> bool:
    import numpy as np

    out = _run("ReduceProd", [np.array([[2**20, 2**20]], np.int32), np.array([1])])
    return int(np.asarray(out).ravel()[0]) == np.iinfo(np.int32).max


def _reduce_sum_saturates() -> bool:
    import numpy as np

    out = _run("ReduceSum", [np.array([[2**31 - 1, 1]], np.int32), np.array([1])])
    return int(np.asarray(out).ravel()[0]) == np.iinfo(np.int32).max


def _softplus_overflows() -> bool:
    import numpy as np

    half = np.asarray(_run("Softplus", [np.array([100.0], np.float16)]))
    double = np.asarray(_run("Softplus", [np.array([710.0, -40.0])]))
    return bool(np.isinf(half[0]) and np.isinf(double[0]) and double[1] == 0.0)


def _where_drops_minus_zero() -> bool:
    import numpy as np

    picked = np.asarray(_run("Where", [np.array([True, False]), np.array([-0.0, 1.0]),
                                       np.array([1.0, -0.0])]))
    return picked.tolist() == [0.0, 0.0] and np.signbit(picked).tolist() == [False, True]


def _reduce_max_skips_nan() -> bool:
    import numpy as np

    out = _run("ReduceMax", [np.array([[1.0, np.nan]], np.float32), np.array([1])])
    return float(np.asarray(out).ravel()[0]) == 1.0


def _max_pool_float64_skips_nan() -> bool:
    import numpy as np

    out = _run("MaxPool", [np.array([[[[1.0, np.nan]]]])], kernel_shape=[1, 2])
    return float(np.asarray(out).ravel()[0]) == 1.0


def _argmax_skips_nan() -> bool:
    import numpy as np

    out = _run("ArgMax", [np.array([1.0, np.nan], np.float32)], axis=0)
    return int(np.asarray(out).ravel()[0]) == 0


def _log_softmax_float64_inf_row() -> bool:
    import numpy as np

    out = np.asarray(_run("LogSoftmax", [np.array([[np.inf, 1.0]])], axis=1))
    return not np.isnan(out).all()


def _less_refuses_bool() -> bool:
    import numpy as np

    return isinstance(_run("Less", [np.array([True]), np.array([False])]), Exception)


def _isinf_of_float16_refused_or_unrounded() -> bool:
    import numpy as np
    import onnx
    from onnx import helper

    from unigraph_onnxruntime.static import open_session

    refused = isinstance(_run("IsInf", [np.array([np.inf, 1.0], np.float16)]), Exception)
    # float16 6e4 * 1e4 is inf (NumPy, and ORT's own output of the Mul), but the Cast to
    # float32 after it reads 6e8.
    half, single = helper.TensorProto.FLOAT16, helper.TensorProto.FLOAT
    nodes = [helper.make_node("Mul", ["x", "k"], ["m"]),
             helper.make_node("Cast", ["m"], ["c"], to=single),
             helper.make_node("IsInf", ["c"], ["o"])]
    graph = helper.make_graph(nodes, "pin", [helper.make_tensor_value_info("x", half, [1]),
                                             helper.make_tensor_value_info("k", half, [])],
                              [onnx.ValueInfoProto(name="o")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    seen = open_session(model).run(None, {"x": np.array([6e4], np.float16),
                                          "k": np.array(1e4, np.float16)})[0]
    return refused and not bool(seen[0])


def _conv_transpose_refusals() -> bool:
    import numpy as np

    ones = np.ones((1, 1, 2, 2))
    no_float64 = "NOT_IMPLEMENTED" in str(_run("ConvTranspose", [ones, ones]))
    x, w = np.ones((1, 1, 4, 3), np.float32), np.ones((1, 1, 3, 2), np.float32)
    large = _run("ConvTranspose", [x, w], strides=[1, 2], dilations=[2, 2],
                 output_padding=[1, 1])
    return no_float64 and "output_padding (1) may be too large for stride (1)" in str(large)


def _gather_wraps_negative_indices() -> bool:
    import numpy as np

    x = np.array([1.0, 2.0, 3.0], np.float32)
    wrapped = np.asarray(_run("Gather", [x, np.array([-1], np.int64)], axis=0)).tolist()
    refused = _run("Gather", [x, np.array([-4], np.int64)], axis=0)
    return wrapped == [3.0] and "must be within the inclusive range [-3," in str(refused)


def _max_pool_ceil_mode_shape() -> bool:
    import numpy as np
    import onnx
    from onnx import helper, shape_inference

    from unigraph.onnx.export import DEFAULT_OPSET

    # A row of 5, kernel 2, stride 2, pads 1: windows start at -1, 1, 3 and 5 (the end pad).
    attrs = {"kernel_shape": [1, 2], "strides": [1, 2], "pads": [0, 1, 0, 1], "ceil_mode": 1}
    node = helper.make_node("MaxPool", ["x"], ["o"], **attrs)
    graph = helper.make_graph([node], "pin", [helper.make_tensor_value_info(
        "x", onnx.TensorProto.FLOAT, [1, 1, 1, 5])], [onnx.ValueInfoProto(name="o")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", DEFAULT_OPSET)])
    inferred = shape_inference.infer_shapes(model).graph.output[0].type.tensor_type.shape
    ran = np.asarray(_run("MaxPool", [np.arange(5.0, dtype=np.float32).reshape(1, 1, 1, 5)],
                          **attrs))
    return [d.dim_value for d in inferred.dim][-1] == 4 and ran.shape[-1] == 3


QUIRKS = (
    Quirk("conv2d", "onnxruntime", VERSIONS, "the CPU Conv kernel has no float64 (NOT_IMPLEMENTED)",
          "float64 conv2d is written as im2col: Pad, strided Slices, Concat, one MatMul",
          _no_float64_kernel("Conv")),
    Quirk("avg_pool2d", "onnxruntime", VERSIONS, "AveragePool has no float64 kernel",
          "float64 avg_pool2d is the Sum of strided Slices divided by kh * kw",
          _no_float64_kernel("AveragePool", kernel_shape=[2, 2])),
    Quirk("max (min)", "onnxruntime", VERSIONS, "ReduceMax/ReduceMin skip NaN: max([1, nan]) = 1",
          "Where(any IsNaN over the same axes, NaN, ReduceMax(x))", _reduce_max_skips_nan),
    Quirk("max_pool2d", "onnxruntime", VERSIONS,
          "float64 MaxPool skips a NaN after a window's first element",
          "Where(MaxPool of IsNaN > 0, NaN, MaxPool(x))", _max_pool_float64_skips_nan),
    Quirk("argmax", "onnxruntime", VERSIONS, "ArgMax skips NaN: argmax([1, nan]) = 0",
          "Where(the slice holds a NaN, ArgMax(IsNaN(x)), ArgMax(x)): a NaN is the maximum",
          _argmax_skips_nan),
    Quirk("log_softmax", "onnxruntime", VERSIONS,
          "float64 LogSoftmax of [inf, 1] is [nan, -inf], not NaN throughout",
          "float64 is written as (x - max) - log(sum(exp(x - max)))",
          _log_softmax_float64_inf_row),
    Quirk("less (less_equal, greater, greater_equal)", "onnxruntime", VERSIONS,
          "Less, LessOrEqual, Greater, GreaterOrEqual take no bool inputs (invalid model)",
          "bools are cast to int32 first", _less_refuses_bool),
    Quirk("isinf (isfinite)", "onnxruntime", VERSIONS,
          "IsInf takes no float16 input at opset 18 (invalid model); and "
          "IsInf(Cast(Mul(float16 6e4, 1e4), float32)) is False, though the Mul's own "
          "float16 output is inf: the Cast reads the product unrounded",
          "float16: |Cast(x, float32)| >= 65520, where a float32 value rounds to a float16 "
          "infinity (emitters._isinf)",
          _isinf_of_float16_refused_or_unrounded),
    Quirk("tan (asin, acos, atan, atan2, sinh, cosh, erf)", "onnxruntime", VERSIONS,
          "Tan, Asin, Acos, Atan, Sinh, Cosh and Erf have no float64 kernel (NOT_IMPLEMENTED)",
          "float64 is written with ops that have one: sin/cos, exp, a float32 Atan seed and a "
          "float64 Newton step, erf's series and asymptotic tail (unigraph.onnx.emitters_math)",
          _no_float64_unary_kernel),
    Quirk("prod", "onnxruntime", VERSIONS,
          "integer ReduceProd saturates: prod([2**20, 2**20]) in int32 is 2**31 - 1, where "
          "NumPy wraps to 0",
          "int32 and int64 are multiplied by Mul in a Loop over the axis, which wraps as NumPy "
          "(unigraph.onnx.integer_reductions)", _reduce_prod_saturates),
    Quirk("sum", "onnxruntime", VERSIONS,
          "integer ReduceSum saturates: sum([2**31 - 1, 1]) in int32 is 2**31 - 1, where "
          "NumPy wraps to -2**31 (int64 alike)",
          "int32 and int64 sums are the last element of a CumSum (which wraps) along each "
          "axis, one zero put in front (unigraph.onnx.integer_reductions)",
          _reduce_sum_saturates),
    Quirk("softplus", "onnxruntime", VERSIONS,
          "Softplus overflows: float16 softplus(100) is inf (its exp is float32), float64 "
          "softplus(710) is inf and softplus(-40) is 0, not 4.2e-18 (log(1 + exp(x)) as "
          "written)",
          "float16 runs the float32 kernel and rounds once; float64 is written as "
          "max(x, 0) + log1p(exp(-|x|)), log1p(u) as log(1 + u) * u / ((1 + u) - 1) "
          "(unigraph.onnx.emitters_math)", _softplus_overflows),
    Quirk("where (atan2, floor_divide, sinh, erf, log1p, expm1)", "onnxruntime", VERSIONS,
          "Where returns +0.0 where it takes a -0.0 from its first operand (X); from Y the "
          "sign stays; its graph optimiser also rewrites Where(Not(c), a, b) as "
          "Where(c, b, a)",
          "ug.where multiplies what it picked by -1 where that is a -0.0 of x "
          "(emitters._where); inside an emitter, a result that may be -0.0 goes in Where's "
          "Y, the condition written without Not; log1p and expm1 end in x * factor, Where "
          "picking only among positive factors (unigraph.onnx.emitters_math; "
          "tests/test_special_values.py)",
          _where_drops_minus_zero),
    Quirk("maximum (minimum, max, min, argmax, where, mod, sign, clip, tril, triu) "
          "on int16", "onnxruntime",
          VERSIONS, "Max, Min, ArgMax, Where and Trilu have no int16 kernel (NOT_IMPLEMENTED); "
          "Trilu none for int8 or uint8 either",
          "int8/uint8/int16 operands are cast to int32 and the result cast back "
          "(unigraph.onnx.emitters._widen_small_ints; ONNX itself gives ReduceSum, "
          "ReduceProd, CumSum, Floor and uint8 Neg no such types)", _no_int16_kernels),
    Quirk("where", "onnxruntime", VERSIONS, "Where has no bool kernel (NOT_IMPLEMENTED)",
          "bool operands are cast to int32 and the result cast back, as int16's "
          "(unigraph.onnx.emitters._widen_small_ints; tests/test_open_dim_where.py)",
          _no_bool_where),
    Quirk("conv_transpose2d", "onnxruntime", VERSIONS,
          "ConvTranspose has no float64 kernel (NOT_IMPLEMENTED), and refuses output_padding "
          ">= stride, which the op allows below the dilation ('output_padding (1) may be too "
          "large for stride (1)')",
          "those cases are a stride-1 im2col conv (Pad, Slice, Concat, MatMul) of x spread "
          "with stride - 1 zeros and padded by dilation * (k - 1) (plus output_padding at the "
          "end), by the flipped kernel, the padding then sliced off "
          "(emitters._conv_transpose2d_as_conv)", _conv_transpose_refusals),
    Quirk("take (sparse_softmax_cross_entropy)", "onnxruntime", VERSIONS,
          "Gather wraps a negative index (-1 reads the last, as ONNX specifies); below -n it "
          "refuses, printing the value",
          "each negative index i becomes i - n first (emitters._moved_out), so Gather refuses "
          "it and index_checks.translate_run_error turns that into IndexOutOfRangeError",
          _gather_wraps_negative_indices),
    Quirk("max_pool2d", "onnx", "1.23.2 (opset 18)",
          "MaxPool's ceil_mode output size (the spec before opset 22, and "
          "onnx.shape_inference) keeps a last window that starts in the end padding: a row "
          "of 5, kernel 2, stride 2, pads 1 is declared 4 wide, where PyTorch (and ORT 1.32 "
          "when it runs) gives 3",
          "no ceil_mode in the model: the op's ceil-mode cells (ops.pooling.pool_geometry) "
          "are added to the end pads, so every reader sizes the output alike",
          _max_pool_ceil_mode_shape),
)
