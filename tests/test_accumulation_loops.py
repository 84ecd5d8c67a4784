"""Budgets across loops (issue 18): a value carried through a while_loop whose trip count is
known when the graph is traced (an ONNX Loop with a constant trip count, a counter compared
with a constant) accumulates once per trip; `unigraph.checking.accumulation` reads the trip
count from the traced graph and grows the budget of the body's ops with it.

A running sum of 3,000 float32 terms is off by 3e-5 relative on every target (rounding, not
a bug: float32's default budget is 1e-5); with the trips counted it is within budget, while
a target that computes a different sum is still far outside it."""

import numpy as np
import pytest
from conftest import TARGETS, run_on
from onnx_loops import running_sum

import unigraph as ug
import unigraph.onnx
from unigraph import plugins
from unigraph.checking import accumulation, compare

TRIPS = 3000
X = np.array([0.1, 0.37, 1.3], np.float32)


def trips_of(fn, *args):
    """The trip count `accumulation.trip_count` reads from the first while_loop of `fn`'s
    traced graph (None: not known)."""
    graph = ug.function(fn).trace(*args)
    producers = {v.id: n for n in graph.nodes for v in n.outputs}
    (loop, *_) = [n for n in graph.nodes if n.op == "while_loop"]
    return accumulation.trip_count(loop, producers), loop, producers


def test_the_trip_count_is_read_from_the_traced_graph():
    assert trips_of(ug.onnx.load(running_sum(TRIPS)), X)[0] == TRIPS

    def stepped(x):  # from 5 to 100 by 2: 48 trips
        start = ug.tensor(np.int64(5))
        return ug.while_loop(lambda i, s: i < 100, lambda i, s: (i + 2, s + x), (start, x))[1]

    def capped(x):  # a condition known only at run time, at most 7 trips
        return ug.while_loop(lambda s: ug.sum(s) < 1e9, lambda s: s * 1.5 + x, x,
                             maximum_iterations=7)

    def unbounded(x, n):  # a trip count known only at run time (n): none
        start = ug.tensor(np.int64(0))
        return ug.while_loop(lambda i, s: i < n, lambda i, s: (i + 1, s + x), (start, x))[1]

    assert trips_of(stepped, X)[0] == 48
    assert trips_of(capped, X)[0] == 7
    # Not the iteration guard's limit (max_loop_iterations, 10 million) either.
    assert trips_of(unbounded, X, np.int64(4))[0] is None


def test_loop_tags_grow_the_budget_with_the_trips():
    _, loop, producers = trips_of(ug.onnx.load(running_sum(TRIPS)), X)
    body = compare.ops_of(loop.subgraphs["body"])
    tags = accumulation.loop_tags(loop, producers, body)
    assert f"add@1x{TRIPS}" in tags
    rtol, atol = compare.op_budget(f"add@1x{TRIPS}", "float32")
    default_rtol, default_atol = compare.op_budget("add", "float32")
    # Linear in the trips past 256 terms: 3000 / 256 times float32's default.
    assert rtol == pytest.approx(default_rtol * TRIPS / 256)
    assert atol == pytest.approx(default_atol * TRIPS / 256)
    # A loop within 256 trips keeps the op budgets as they are.
    _, short, short_producers = trips_of(ug.onnx.load(running_sum(200)), X)
    assert accumulation.loop_tags(short, short_producers, body) == set()


@pytest.mark.parametrize("target", TARGETS)
def test_the_grown_budget_holds_a_correct_running_sum_and_not_a_wrong_one(target):
    """On each target, the running sum against the float64 sum: outside the default budget
    (the reason for growing it), inside the grown one; a sum one trip short is outside."""
    model = ug.onnx.load(running_sum(TRIPS))
    got = np.asarray(run_on(target, model, X), np.float64)
    want = X.astype(np.float64) * TRIPS
    grown = compare.op_budget(f"add@1x{TRIPS}", "float32")
    assert compare.compare(got, want, grown).ok
    assert not compare.compare(got, want, compare.op_budget("add", "float32")).ok
    one_short = np.asarray(run_on(target, ug.onnx.load(running_sum(TRIPS - 1)), X))
    assert not compare.compare(one_short, want, grown).ok


def test_check_passes_the_correct_loop_on_every_target_and_fails_a_wrong_one():
    """ug.check of the 3,000-trip running sum passes on all 9 targets (it failed on all of
    them with the budgets of one trip); a target computing tanh as sigmoid in the body is
    still caught, at the ONNX node."""
    from test_check import BADTANH

    report = ug.check(ug.onnx.load(running_sum(TRIPS)), X, targets=",".join(TARGETS))
    report.assert_ok()
    assert len(report.targets) == len(TARGETS)
    plugins.register_plugin(BADTANH, name="badtanh")
    try:
        wrong = ug.check(ug.onnx.load(running_sum(TRIPS, "Tanh")), X,
                         targets="numpy:static,badtanh:static", grads=False)
    finally:
        plugins.unregister_plugin(BADTANH)
    assert wrong["numpy:static"].ok and not wrong["badtanh:static"].ok
    divergence = wrong["badtanh:static"].divergence
    assert divergence.op == "tanh" and "node 'term' (Tanh)" in divergence.source
