"""Budgets across loops whose trip count is known only at run time (issue 18): a running sum
`while i < n: s += x` with n an input accumulates 3,000 float32 roundings just like a loop
with a constant bound, but the traced graph cannot tell how many. `accumulation.observe`
runs the graph once in float64 on the checked inputs and records each such loop's trips;
the budgets then grow with them, as for a constant trip count
(tests/test_accumulation_loops.py). A correct 3,000-trip sum is within the grown budget on
every target; a sum one trip short is still outside it."""

import numpy as np
import onnx_loops
import pytest
from conftest import TARGETS, run_on

import unigraph as ug
import unigraph.onnx
from unigraph.checking import accumulation
from unigraph.checking import compare as cmp

TRIPS = 3000
X = np.array([0.1, 0.37, 1.3], np.float32)


def running_sum(x, n):
    """x added n times to zeros; n known only at run time."""
    start = ug.tensor(np.int64(0))
    return ug.while_loop(lambda i, s: i < n, lambda i, s: (i + 1, s + x),
                         (start, ug.zeros_like(x)))[1]


def onnx_running_sum():
    """The same sum as an ONNX Loop whose trip count M is a graph input."""
    return ug.onnx.load(onnx_loops.running_sum(None))


def loops_of(graph) -> list:
    return [n for n in graph.nodes if n.op == "while_loop"]


def budget_of(fn, *args) -> tuple:
    """The budget `ug.check` gives fn's first output: the ops of its cone, with the trips
    the float64 run observes (as the checker's `prepare` does)."""
    graph = ug.function(fn).trace(*args)
    accumulation.observe(graph, list(args))
    value = graph.outputs[0]
    return cmp.value_budget(value.dtype, "float32", cmp.cone_ops(graph, [value.id]))


@pytest.mark.parametrize("fn", [running_sum, onnx_running_sum()], ids=["while_loop", "onnx"])
def test_observe_counts_the_trips_the_graph_does_not_give(fn):
    traced = ug.function(fn).trace_full(X, np.int64(TRIPS))
    graph, params = traced.graph, [p.numpy() for p in traced.params]  # onnx: the zeros
    (loop,) = loops_of(graph)
    producers = {v.id: n for n in graph.nodes for v in n.outputs}
    assert accumulation.trip_count(loop, producers) in (None, TRIPS)  # None unless observed
    observed = accumulation.observe(graph, [X, np.int64(TRIPS)], params)
    assert observed == {loop.outputs[0].id: TRIPS}
    assert accumulation.trip_count(loop, producers) == TRIPS
    assert f"add@1x{TRIPS}" in cmp.cone_ops(graph, [graph.outputs[0].id])


def test_observe_runs_nothing_when_the_graph_gives_every_trip_count():
    def constant_bound(x):
        start = ug.tensor(np.int64(0))
        return ug.while_loop(lambda i, s: i < 5, lambda i, s: (i + 1, s + x), (start, x))[1]

    assert accumulation.observe(ug.function(constant_bound).trace(X), [X]) == {}


def test_observe_counts_loops_inside_a_gradient_and_nested_loops():
    def grad_of_sum(x, n):
        return ug.grad(lambda x: ug.sum(running_sum(x, n)))(x)

    graph = ug.function(grad_of_sum).trace(X, np.int64(TRIPS))
    assert list(accumulation.observe(graph, [X, np.int64(TRIPS)]).values()) == [TRIPS]
    assert f"add@1x{TRIPS}" in cmp.ops_of(graph)

    def nested(x, n):  # n outer trips of 3 inner ones: the inner loop's tags multiply
        def outer(i, s):
            return i + 1, ug.while_loop(lambda j, t: j < n, lambda j, t: (j + 1, t + x),
                                        (ug.tensor(np.int64(0)), s))[1]

        return ug.while_loop(lambda i, s: i < 3, outer, (ug.tensor(np.int64(0)), x))[1]

    graph = ug.function(nested).trace(X, np.int64(1000))
    assert sorted(accumulation.observe(graph, [X, np.int64(1000)]).values()) == [3, 1000]
    assert "add@1x3000" in cmp.cone_ops(graph, [graph.outputs[0].id])


def sum_and_one_short(x, n):
    """(x added n times, x added n - 1 times), by one loop (one slow eager run)."""
    start = ug.tensor(np.int64(0))
    _, total, before = ug.while_loop(lambda i, s, p: i < n, lambda i, s, p: (i + 1, s + x, s),
                                     (start, ug.zeros_like(x), ug.zeros_like(x)))
    return total, before


@pytest.mark.parametrize("target", TARGETS)
def test_observed_budget_holds_a_correct_sum_and_not_one_trip_short(target):
    got, one_short = run_on(target, sum_and_one_short, X, np.int64(TRIPS))
    want = X.astype(np.float64) * TRIPS
    grown = budget_of(running_sum, X, np.int64(TRIPS))
    assert grown == cmp.op_budget(f"add@1x{TRIPS}", "float32")
    assert cmp.compare(got, want, grown).ok
    # The reason for growing it: 3,000 float32 roundings are outside one add's budget.
    assert not cmp.compare(got, want, cmp.op_budget("add", "float32")).ok
    assert not cmp.compare(one_short, want, grown).ok


def test_check_passes_a_run_time_counted_loop():
    # ug.check itself grows the budgets with the observed trips (unigraph/checking/run.py),
    # for the values and the gradients: the float32 error of 3,000 adds passes everywhere.
    ug.check(running_sum, X, np.int64(TRIPS), targets=",".join(TARGETS)).assert_ok()
