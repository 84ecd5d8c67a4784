"""ONNX Loop scan outputs whose length is known only at run time, imported with
`ug.onnx.load` and run on all 9 targets against ONNX Runtime: a trip count fed as an input,
a body condition that stops the loop early, a run-time initial condition, and no trip count
at all. In a static graph the stacked outputs grow by a row per iteration (a while_loop
carrying a value whose first dim is unknown); eagerly the iterations run as they come.
"""

import numpy as np
import pytest
from conftest import TARGETS, run_on

import unigraph as ug

FLOAT, INT64, BOOL = 1, 7, 9


def _loop_model(trip_count: str, keep: str, stop_early: bool):
    """y = Loop(trip_count, keep, s0=x): carried s += x * i; scan outputs x * i (float
    [3]) and i (int64 scalar). With `stop_early`, the body's condition is i + 1 < stop."""
    from onnx import TensorProto, helper

    v = helper.make_tensor_value_info
    one = helper.make_tensor("one", TensorProto.INT64, [], [1])
    nodes = [
        helper.make_node("Cast", ["i"], ["i_f"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["x", "i_f"], ["row"]),
        helper.make_node("Add", ["s_in", "row"], ["s_out"]),
        helper.make_node("Identity", ["i"], ["i_row"]),
    ]
    if stop_early:
        nodes += [helper.make_node("Constant", [], ["one"], value=one),
                  helper.make_node("Add", ["i", "one"], ["next"]),
                  helper.make_node("Less", ["next", "stop"], ["cond_out"])]
    else:
        nodes.append(helper.make_node("Identity", ["cond_in"], ["cond_out"]))
    body = helper.make_graph(
        nodes, "body",
        [v("i", TensorProto.INT64, []), v("cond_in", TensorProto.BOOL, []),
         v("s_in", TensorProto.FLOAT, [3])],
        [v("cond_out", TensorProto.BOOL, []), v("s_out", TensorProto.FLOAT, [3]),
         v("row", TensorProto.FLOAT, [3]), v("i_row", TensorProto.INT64, [])])
    loop = helper.make_node("Loop", [trip_count, keep, "x"], ["s", "rows", "counts"],
                            body=body)
    inputs = [v("x", TensorProto.FLOAT, [3])]
    if trip_count == "m":
        inputs.append(v("m", TensorProto.INT64, []))
    if keep == "keep":
        inputs.append(v("keep", TensorProto.BOOL, []))
    if stop_early:
        inputs.append(v("stop", TensorProto.INT64, []))
    graph = helper.make_graph(
        [loop], "g", inputs,
        [v("s", TensorProto.FLOAT, [3]), v("rows", TensorProto.FLOAT, ["n", 3]),
         v("counts", TensorProto.INT64, ["n"])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _ort(model, feeds):
    import onnxruntime as ort

    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    return session.run(None, {i.name: np.asarray(f) for i, f in zip(model.graph.input, feeds)})


def _expected(x, trips):
    """The float64 reference by hand: rows x * i for i < trips, their running sum."""
    rows = np.stack([x.astype(np.float64) * i for i in range(trips)]) if trips else \
        np.zeros((0, 3))
    return x + rows.sum(axis=0), rows, np.arange(trips, dtype=np.int64)


def _check(target, model, feeds, trips):
    x = feeds[0]
    got = run_on(target, ug.onnx.load(model), *feeds)
    reference = _ort(model, feeds)
    for index, (g, r, e) in enumerate(zip(got, reference, _expected(x, trips))):
        assert g.shape == r.shape == e.shape, (index, g.shape, r.shape, e.shape)
        assert g.dtype == r.dtype, (index, g.dtype, r.dtype)
        np.testing.assert_allclose(g, r, rtol=1e-6, err_msg=f"output {index} vs ORT")
        np.testing.assert_allclose(g, e, rtol=1e-6, err_msg=f"output {index} vs reference")


X = np.array([1.0, -2.0, 0.5], np.float32)


@pytest.mark.parametrize("target", TARGETS)
def test_trip_count_fed_at_run_time(target):
    model = _loop_model("m", "", stop_early=False)
    for trips in (4, 0, 1):  # one trace on a static target, three lengths
        _check(target, model, (X, np.int64(trips)), trips)


@pytest.mark.parametrize("target", TARGETS)
def test_condition_stops_early(target):
    model = _loop_model("m", "", stop_early=True)
    _check(target, model, (X, np.int64(10), np.int64(3)), 3)  # the condition stops it
    _check(target, model, (X, np.int64(2), np.int64(5)), 2)  # the trip count does


@pytest.mark.parametrize("target", TARGETS)
def test_no_trip_count_and_run_time_initial_condition(target):
    model = _loop_model("", "keep", stop_early=True)
    _check(target, model, (X, np.True_, np.int64(3)), 3)
    _check(target, model, (X, np.False_, np.int64(3)), 0)  # never entered: empty scans


def test_known_trip_count_keeps_known_shapes():
    """A trip count known at import and a condition that stays true: the stacked outputs
    keep their known length (the one-hot buffers), not an unknown one."""
    from onnx import numpy_helper

    model = _loop_model("m", "", stop_early=False)
    model.graph.initializer.append(numpy_helper.from_array(np.asarray(4, np.int64), "m"))
    del model.graph.input[1]
    imported = ug.onnx.load(model)
    graph = ug.function(lambda x: imported(x)).trace_full(X).graph
    assert [tuple(v.shape) for v in graph.outputs] == [(3,), (4, 3), (4,)]
    _check("numpy:static", model, (X,), 4)


@pytest.mark.parametrize("target", TARGETS)
def test_gradient_through_growing_scan_outputs(target):
    """d/dx of sum(s) + sum(rows) with 3 trips (stopped by the condition): s = x + x*(0+1+2)
    and rows = x*0, x*1, x*2, so 1 + 3 + 3 = 7 per element (by hand)."""
    model = ug.onnx.load(_loop_model("m", "", stop_early=True))

    def gradient(x, m, stop):
        def loss(x):
            s, rows, _ = model(x, m, stop)
            return ug.sum(s) + ug.sum(rows)

        return ug.grad(loss)(x)

    got = run_on(target, gradient, X, np.int64(10), np.int64(3))
    np.testing.assert_allclose(got, np.full(3, 7.0), rtol=1e-6)


def _nested_model():
    """rows = Loop(m): each trip emits 4 * x * i, the 4 x from an inner Loop of 2 trips
    doubling x (a loop inside the body whose scan length is known only at run time)."""
    from onnx import TensorProto, helper, numpy_helper

    v = helper.make_tensor_value_info
    inner = helper.make_graph(
        [helper.make_node("Add", ["y_in", "y_in"], ["y_out"]),
         helper.make_node("Identity", ["c_in"], ["c_out"])], "inner",
        [v("j", TensorProto.INT64, []), v("c_in", TensorProto.BOOL, []),
         v("y_in", TensorProto.FLOAT, [3])],
        [v("c_out", TensorProto.BOOL, []), v("y_out", TensorProto.FLOAT, [3])])
    two = numpy_helper.from_array(np.asarray(2, np.int64))
    body = helper.make_graph(
        [helper.make_node("Constant", [], ["two"], value=two),
         helper.make_node("Loop", ["two", "", "x"], ["four_x"], body=inner),
         helper.make_node("Cast", ["i"], ["i_f"], to=TensorProto.FLOAT),
         helper.make_node("Mul", ["four_x", "i_f"], ["row"]),
         helper.make_node("Identity", ["cond_in"], ["cond_out"])], "body",
        [v("i", TensorProto.INT64, []), v("cond_in", TensorProto.BOOL, [])],
        [v("cond_out", TensorProto.BOOL, []), v("row", TensorProto.FLOAT, [3])])
    graph = helper.make_graph(
        [helper.make_node("Loop", ["m", ""], ["rows"], body=body)], "g",
        [v("x", TensorProto.FLOAT, [3]), v("m", TensorProto.INT64, [])],
        [v("rows", TensorProto.FLOAT, ["n", 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


@pytest.mark.parametrize("target", TARGETS)
def test_loop_nested_in_a_growing_body(target):
    model = _nested_model()
    for trips in (3, 0):
        got = run_on(target, ug.onnx.load(model), X, np.int64(trips))
        expected = np.stack([4.0 * X * i for i in range(trips)]) if trips else np.zeros((0, 3))
        np.testing.assert_allclose(got, expected, rtol=1e-6)
        np.testing.assert_allclose(got, _ort(model, (X, np.int64(trips)))[0], rtol=1e-6)


def test_check_with_gradients_of_outputs_whose_length_a_run_tells():
    """ug.check draws the weights of its gradient check with the shapes this run's outputs
    have (a scan output of a run-time trip count has a None length in the graph)."""
    model = ug.onnx.load(_loop_model("m", "", stop_early=True))
    report = ug.check(model, X, np.int64(10), np.int64(3), targets=",".join(TARGETS))
    report.assert_ok()
    for target in TARGETS:
        kinds = [c.kind for c in report[target].comparisons]
        assert "grad" in kinds, (target, kinds)
