"""The IR: verification, printing, exact JSON round trip."""

import numpy as np
import pytest

import unigraph as ug
from unigraph.errors import GraphError
from unigraph.ir import Graph, Node, Value


@ug.function
def counter(a, b):
    return ug.while_loop(lambda a, b: a < b, lambda a, b: (a + 2, b + 1), (a, b))


@ug.function
def branchy(x, y):
    z = ug.cond(ug.sum(x) > ug.sum(y), lambda: x + y, lambda: x - y)
    return ug.grad(lambda v: ug.sum(v * v * z))(x)


def test_traced_graph_verifies_and_prints_control_flow():
    graph = counter.trace(0, 10).verify()
    listing = str(graph)
    assert "while_loop[num_carried=3]" in listing  # a, b and the iteration counter
    assert "cond(" in listing and "body(" in listing
    assert "test_ir.py:" in listing  # the user's source line of each node


@pytest.mark.parametrize("fn,args", [(counter, (0, 10)),
                                     (branchy, (np.ones(3, np.float32), np.zeros(3, np.float32)))])
def test_json_round_trip_is_exact(fn, args):
    graph = fn.trace(*args)
    text = graph.to_json()
    again = Graph.from_json(text)
    assert again.to_json() == text
    assert str(again) == str(graph)
    again.verify()


def test_constant_attrs_round_trip_with_dtype():
    graph = ug.function(lambda x: x * np.array([1.5, 2.5], np.float64)).trace(
        np.ones(2, np.float64))
    again = Graph.from_json(graph.to_json())
    (node,) = [n for n in again.nodes if n.op == "constant"]
    assert node.attrs["value"].dtype == np.float64
    np.testing.assert_array_equal(node.attrs["value"], [1.5, 2.5])


def test_verify_names_use_before_definition():
    a = Value((2,), "float32")
    b = Value((2,), "float32")
    graph = Graph("bad", inputs=[a], nodes=[Node("add", [a, b], [Value((2,), "float32")])])
    with pytest.raises(GraphError, match="node 0 \\(add\\) uses %.* before it is defined"):
        graph.verify()


def test_verify_names_double_definition_and_missing_output():
    a = Value((2,), "float32")
    with pytest.raises(GraphError, match="defined twice"):
        Graph("bad", inputs=[a, a]).verify()
    with pytest.raises(GraphError, match="never defined"):
        Graph("bad", inputs=[a], outputs=[Value((2,), "float32")]).verify()


def test_values_reject_unsupported_dtypes():
    with pytest.raises(TypeError, match="complex64.*is not supported"):
        Value((2,), "complex64")


def test_unknown_dims_are_allowed_in_the_ir():
    value = Value((None, 3), "float32")
    assert "float32[?, 3]" in repr(value)
