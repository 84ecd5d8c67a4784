"""ONNX OneHot imported (ug ops: a compare with a range along the new axis, then where), on
all 9 targets and onnxruntime:static, against ONNX's reference evaluator: a negative index
counts from the end, one outside [-depth, depth) gives a row of off values, the new axis
anywhere. (ONNX's own node cases feed depth as a float input, which the importer needs known:
`python -m unigraph.onnx.node_tests` counts them unsupported.)"""

import numpy as np
import onnx
import pytest
from conftest import FORWARD_TARGETS, run_on
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import unigraph as ug
import unigraph.onnx

AXES = (-1, 0, 1)


def one_hot_model() -> onnx.ModelProto:
    nodes = [helper.make_node("OneHot", ["indices", "depth", "values"], [f"y{i}"], axis=axis)
             for i, axis in enumerate(AXES)]
    initializers = [numpy_helper.from_array(np.array(4, np.int64), "depth"),
                    numpy_helper.from_array(np.array([-0.5, 2.25], np.float32), "values")]
    graph = helper.make_graph(
        nodes, "one_hot", [helper.make_tensor_value_info("indices", TensorProto.INT64, [2, 3])],
        [helper.make_tensor_value_info(f"y{i}", TensorProto.FLOAT, shape)
         for i, shape in enumerate(([2, 3, 4], [4, 2, 3], [2, 4, 3]))], initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model


@pytest.mark.parametrize("target", FORWARD_TARGETS)
def test_one_hot_agrees_with_onnx_reference(target):
    model = one_hot_model()
    indices = np.array([[0, 3, -1], [-4, 4, -5]], np.int64)
    expected = ReferenceEvaluator(model).run(None, {"indices": indices})
    got = run_on(target, ug.onnx.load(model), indices)
    for axis, value, want in zip(AXES, got, expected):
        assert value.dtype == want.dtype and value.shape == want.shape, (axis, target)
        np.testing.assert_array_equal(value, want, err_msg=f"axis {axis} on {target}")
