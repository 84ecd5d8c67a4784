"""Integer `sum` and `prod` for ONNX that wrap on overflow, as NumPy's int32 and int64 do.

ONNX Runtime's (1.32) integer ReduceSum and ReduceProd saturate: the int32 sum of
[2**31 - 1, 1] is 2**31 - 1, not -2**31 (quirks "integer ReduceSum saturates" and "integer
ReduceProd saturates" of onnxruntime). Its CumSum and Mul wrap, so the reduced axes are taken
one at a time, each kept as a size-1 axis, and squeezed at the end unless keepdims:

* sum: CumSum along the axis, its last element (one zero put in front, so that an empty axis
  sums to 0);
* prod: a Loop over the axis's elements that multiplies them into a slice of ones (an empty
  axis gives 1). One trip per element: an integer product along a long axis is slow this
  way (a float product stays one ReduceProd).
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

INT64_MAX = np.iinfo(np.int64).max


def _ints(values) -> np.ndarray:
    return np.asarray(list(values), dtype=np.int64)


def _axes(axis, rank: int) -> list:
    return list(range(rank)) if axis is None else sorted(k % rank for k in axis)


def _reduce_each_axis(w, x: str, axis, keepdims: bool, rank: int, reduce_one) -> str:
    """`reduce_one(w, x, k)` (axis k reduced to size 1) over every axis of `axis`."""
    axes = _axes(axis, rank)
    for k in axes:
        x = reduce_one(w, x, k, rank)
    if keepdims or not axes:
        return x
    return w.node("Squeeze", [x, w.const(_ints(axes))])


def _sum_along(w, x: str, k: int, rank: int) -> str:
    pads = [0] * (2 * rank)
    pads[k] = 1  # one zero before the first element
    padded = w.node("Pad", [x, w.const(_ints(pads))])
    running = w.node("CumSum", [padded, w.const(np.array(k, np.int64))])
    return w.node("Slice", [running, w.const(_ints([-1])), w.const(_ints([INT64_MAX])),
                            w.const(_ints([k]))])


def _prod_along(w, x: str, k: int, rank: int, dtype: str) -> str:
    shape = w.node("Shape", [x])
    count = w.node("Gather", [shape, w.const(np.array(k, np.int64))])  # a scalar: the trips
    others = w.node("Concat", [w.node("Slice", [shape, w.const(_ints([0])), w.const(_ints([k]))]),
                               w.node("Slice", [shape, w.const(_ints([k + 1])),
                                                w.const(_ints([INT64_MAX]))])], axis=0)
    ones = w.node("ConstantOfShape", [others],
                  value=numpy_helper.from_array(np.ones(1, dtype), w.fresh("c")))
    body = w.child()
    step, keep, product = body.fresh("step"), body.fresh("keep"), body.fresh("product")
    item = body.node("Gather", [x, step], axis=k)  # x from the enclosing graph
    outputs = [body.node("Identity", [keep]), body.node("Mul", [product, item])]
    elem = w.onnx_dtype(dtype)
    graph = helper.make_graph(
        body.nodes, w.fresh("body"),
        [helper.make_tensor_value_info(step, TensorProto.INT64, []),
         helper.make_tensor_value_info(keep, TensorProto.BOOL, []),
         helper.make_tensor_value_info(product, elem, None)],
        [helper.make_tensor_value_info(outputs[0], TensorProto.BOOL, []),
         helper.make_tensor_value_info(outputs[1], elem, None)])
    total = w.node("Loop", [count, "", ones], body=graph)
    return w.node("Unsqueeze", [total, w.const(_ints([k]))])


def wrapping_sum(w, x: str, axis, keepdims: bool, rank: int) -> str:
    """The int32 or int64 sum of `x` over `axis` (a tuple, or None: all), wrapping."""
    return _reduce_each_axis(w, x, axis, keepdims, rank, _sum_along)


def wrapping_prod(w, x: str, axis, keepdims: bool, rank: int, dtype: str) -> str:
    """The int32 or int64 product of `x` over `axis` (a tuple, or None: all), wrapping."""

    def one_axis(w, x, k, rank):
        return _prod_along(w, x, k, rank, dtype)

    return _reduce_each_axis(w, x, axis, keepdims, rank, one_axis)
