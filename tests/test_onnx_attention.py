"""Fully masked attention rows through ONNX import, on all 9 targets.

ONNX's Softmax of a row of only -inf is NaN (its reference computes exp(x - max(x)), and
ONNX Runtime agrees), which is unigraph's softmax rule too. The expanded Attention function
of opset 24 masks those rows itself (ReduceMax of the bias, Equal -inf, Where 0); it failed
only because the Pad importer filled a run-time pad value as `padded + (1 - inside) * value`,
and -inf times 0 is NaN even where nothing is padded. These tests pin ONNX's expected
outputs, the Pad fill and the Softmax rule against hand-computed values.
"""

import functools

import numpy as np
import pytest
from conftest import TARGETS, run_on

import unigraph as ug
from unigraph.onnx import node_tests

FULLY_MASKED_CASES = [
    "test_attention_24_fullymasked_qk_matmul_output_mode3_zero_expanded",
    "test_attention_24_qk_matmul_output_mode3_softmax_precision_expanded",
]


@functools.cache
def _cases() -> dict:
    # The first collection builds every case of the onnx package (tens of seconds on a busy
    # machine); later calls in the process, test_onnx_node_cases.py's too, reuse it.
    return {case.name: case for case in node_tests.cases() if case.name in FULLY_MASKED_CASES}


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", FULLY_MASKED_CASES)
def test_fully_masked_attention_case_passes(name, target):
    outcome = node_tests.run_case(_cases()[name], target)
    assert outcome.status == "pass", outcome.detail


def _model(nodes, inputs, outputs, opset=24):
    from onnx import helper

    graph = helper.make_graph(nodes, "g", inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    return ug.onnx.load(model)


def _pad_model(pads):
    """Pad whose constant value is a graph input (known only at run time)."""
    from onnx import TensorProto, helper, numpy_helper

    pads = numpy_helper.from_array(np.asarray(pads, np.int64), "pads")
    node = helper.make_node("Pad", ["x", "pads", "value"], ["y"], mode="constant")
    model = _model([helper.make_node("Constant", [], ["pads"], value=pads), node],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2]),
                    helper.make_tensor_value_info("value", TensorProto.FLOAT, [])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    return model


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("fill", [-np.inf, 2.5])
def test_pad_with_run_time_infinite_value(target, fill):
    x = np.array([[0.0, -np.inf], [1.0, 2.0]], np.float32)
    value = np.float32(fill)
    # Nothing padded: the input as it is (an -inf inside stays -inf, no NaN anywhere).
    got = run_on(target, _pad_model([0, 0, 0, 0]), x, value)
    np.testing.assert_array_equal(got, x)
    # One column after: the fill there, the input elsewhere.
    got = run_on(target, _pad_model([0, 0, 0, 1]), x, value)
    expected = np.array([[0.0, -np.inf, fill], [1.0, 2.0, fill]], np.float32)
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("target", TARGETS)
def test_softmax_of_fully_masked_row_is_nan_as_in_onnx(target):
    """ONNX's reference and ONNX Runtime both give NaN for a row of only -inf."""
    from onnx import TensorProto, helper

    model = _model([helper.make_node("Softmax", ["x"], ["y"], axis=-1)],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    x = np.array([[-np.inf, -np.inf, -np.inf], [0.0, -np.inf, 1.0]], np.float32)
    got = run_on(target, model, x)
    assert np.isnan(got[0]).all()
    e = np.exp(1.0)
    np.testing.assert_allclose(got[1], [1 / (1 + e), 0.0, e / (1 + e)], rtol=1e-6, atol=1e-7)
