"""An ONNX running-sum Loop, shared by the accumulation-budget tests."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def running_sum(trips: int | None, term="Identity") -> onnx.ModelProto:
    """y = term(x) added `trips` times to zeros (x of shape [3]) by an ONNX Loop: a constant
    trip count, or with trips=None a graph input M (int64 scalar) known only at run time."""
    body = helper.make_graph(
        [helper.make_node(term, ["x"], ["t"], name="term"),
         helper.make_node("Add", ["acc", "t"], ["acc_out"], name="accumulate"),
         helper.make_node("Identity", ["go"], ["go_out"], name="keep_going")],
        "body", [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                 helper.make_tensor_value_info("go", TensorProto.BOOL, []),
                 helper.make_tensor_value_info("acc", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("go_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc_out", TensorProto.FLOAT, [3])])
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])]
    initializers = [numpy_helper.from_array(np.zeros(3, np.float32), "zero")]
    if trips is None:
        inputs.append(helper.make_tensor_value_info("M", TensorProto.INT64, []))
    else:
        initializers.append(numpy_helper.from_array(np.array(trips, np.int64), "M"))
    graph = helper.make_graph(
        [helper.make_node("Loop", ["M", "", "zero"], ["y"], name="running_sum", body=body)],
        "loop", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])],
        initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model
