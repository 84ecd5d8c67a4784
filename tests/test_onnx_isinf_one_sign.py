"""An imported ONNX IsInf that detects one sign (detect_positive=0 or detect_negative=0) of a
float16 value an op computed: on onnxruntime:static such a value reaches its reader unrounded
(a float16 6e4 * 1e4 is read as 6e8, not inf: quirk "isinf (isfinite)"), so a test
`x == inf` missed it; each sign is now isinf(x) and the sign of x, on all 9 targets and
onnxruntime:static."""

import numpy as np
import onnx
import pytest
from conftest import FORWARD_TARGETS, run_on
from onnx import TensorProto, helper

import unigraph as ug
import unigraph.onnx

HALF, BOOL = TensorProto.FLOAT16, TensorProto.BOOL
DETECTS = {"both": {}, "positive": {"detect_negative": 0}, "negative": {"detect_positive": 0},
           "neither": {"detect_positive": 0, "detect_negative": 0}}


def product_then_isinf() -> onnx.ModelProto:
    nodes = [helper.make_node("Mul", ["x", "k"], ["m"])]
    nodes += [helper.make_node("IsInf", ["m"], [name], **attrs) for name, attrs in DETECTS.items()]
    graph = helper.make_graph(
        nodes, "isinf", [helper.make_tensor_value_info("x", HALF, [6]),
                         helper.make_tensor_value_info("k", HALF, [])],
        [helper.make_tensor_value_info(name, BOOL, [6]) for name in DETECTS])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    model.ir_version = 9
    onnx.checker.check_model(model, full_check=True)
    return model


@pytest.mark.parametrize("target", FORWARD_TARGETS)
def test_isinf_of_one_sign_sees_a_float16_product_that_overflowed(target):
    x = np.array([6e4, -6e4, 1.0, -1.0, np.inf, np.nan], np.float16)
    k = np.array(1e4, np.float16)
    with np.errstate(over="ignore"):
        product = x * k  # NumPy rounds each product to float16: the first two are +-inf
    expected = {"both": np.isinf(product), "positive": np.isposinf(product),
                "negative": np.isneginf(product), "neither": np.zeros(6, bool)}
    got = run_on(target, ug.onnx.load(product_then_isinf()), x, k)
    for name, value in zip(DETECTS, got):
        np.testing.assert_array_equal(value, expected[name], err_msg=f"{name} on {target}")
