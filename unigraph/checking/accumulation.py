"""How many terms an op sums into one output element: the length its rounding error grows
with, so that the checker's budget can grow with it (see `unigraph.checking.compare`).

The rule: an op's budget (rtol, atol), its record's `tolerance` (or the dtype default),
holds for sums of up to `REFERENCE_TERMS` terms; a node that sums `n` more gets

    rtol * sqrt(n / REFERENCE_TERMS),   atol * n / REFERENCE_TERMS

The relative part: rounding errors of a float sum of n terms behave like a random walk, so
with high probability the error relative to the sum grows like sqrt(n) times the unit
roundoff, not the worst-case n (Higham and Mary, "A new approach to probabilistic rounding
error analysis", SIAM J. Sci. Comput. 41(5), 2019). The absolute part covers the elements
that cancel to near zero (a weight gradient summing positive activations times cotangents
of both signs): there the error is that of the partial sums, as large as the terms, and the
bound is the deterministic n times the unit roundoff. A conv whose weight gradient sums 4096
positions in float32 gets 4x its rtol and 16x its atol; a bug that changes whole terms (a
dropped channel, a skipped row of positions) still moves the result by far more.

Terms per op, forward, and also backward when the op is differentiated (inside a `grad`
node): the VJP of an accumulation is one too (conv2d's weight gradient sums over batch and
output positions, matmul's over the other operand's free dims).

    >>> terms(node)   # a conv2d over 512 input channels, 3x3 kernel
    4608

Across a `while_loop` whose trip count is known when the graph is traced (a counter from a
constant, stepped by a constant, compared with a constant: an ONNX `Loop` with a constant
trip count, `ug.range` with constant bounds, `maximum_iterations`), a value carried from one
iteration to the next accumulates once per trip, in order: every op of the body is tagged
with its terms times the trips ("add@1x3000", see `loop_tags`). That sum is sequential and
its terms are often alike (a running sum of similar values), so its rounding errors add
up rather than walk: the relative part grows linearly with the trips past
`REFERENCE_TERMS` (Higham's deterministic n * u), times the sqrt growth of the op's own
terms. Summing 0.1 10,000 times in float32 is off by 1e-4 relative; a loop over 3,000 trips
by 3e-5, beyond float32's default 1e-5.

A loop whose trip count the graph does not give (a bound computed at run time: an input, an
ONNX Loop's run-time trip count, a condition on the data) accumulates just the same. For
those, `observe(graph, feeds, params)` runs the graph once in float64 (the reference the
checker compares with, on the checked inputs) and records how many times each such loop ran
(the most, over every time it ran); `trip_count` then gives that. The checker calls it when
it sets the budgets of a case (`unigraph.checking.run.prepare`).
"""

from __future__ import annotations

import math

import numpy as np

REFERENCE_TERMS = 256  # the op records' tolerances are calibrated for sums up to this long


def _size(value) -> int:
    return int(np.prod([d if d is not None else 1 for d in value.shape], dtype=np.int64))


def _reduced(node, backward):
    """Reductions: input elements per output element (the backward only broadcasts)."""
    return max(_size(node.inputs[0]) // max(_size(node.outputs[0]), 1), 1)


def _along_axis(node, backward):
    """softmax, log_softmax, cumsum: the length of the axis, forward and backward."""
    shape = node.inputs[0].shape
    if not shape:
        return 1
    axis = node.attrs.get("axis", -1)
    return shape[axis] or 1 if isinstance(axis, int) else 1


def _matmul(node, backward):
    a, b = node.inputs[:2]
    inner = a.shape[-1] or 1
    if not backward:
        return inner
    # dA sums over b's free dim; dB over a's rows and any broadcast batch.
    return max(inner, b.shape[-1] or 1, _size(a) // inner)


def _conv2d(node, backward):
    x, weight = node.inputs[:2]
    kernel = int(np.prod(weight.shape[1:]))  # input channels per group x kh x kw
    if not backward:
        return kernel
    out = node.outputs[0].shape
    groups = node.attrs.get("groups", 1) or 1
    per_group_out = (weight.shape[0] or 1) // groups
    positions = (out[0] or 1) * (out[2] or 1) * (out[3] or 1)
    return max(kernel, per_group_out * int(np.prod(weight.shape[2:])), positions)


def _conv_transpose2d(node, backward):
    x, weight = node.inputs[:2]
    groups = node.attrs.get("groups", 1) or 1
    kernel = (weight.shape[0] or 1) // groups * int(np.prod(weight.shape[2:]))
    if not backward:
        return kernel
    positions = (x.shape[0] or 1) * (x.shape[2] or 1) * (x.shape[3] or 1)
    return max(kernel, int(np.prod(weight.shape[1:])), positions)


def _einsum(node, backward):
    """The product of all index sizes over the output's size (the contracted part); for
    the backward, over each input's size too."""
    equation = node.attrs.get("equation", "")
    sizes = {}
    for letters, value in zip(equation.split("->")[0].split(","), node.inputs):
        sizes.update(zip(letters, value.shape))
    total = int(np.prod([s or 1 for s in sizes.values()], dtype=np.int64))
    targets = [node.outputs[0]] + (list(node.inputs) if backward else [])
    return max(total // max(_size(v), 1) for v in targets)


def _pool(node, backward):
    return int(np.prod(node.attrs.get("kernel", (1, 1))))


def _classes(node, backward):
    return node.inputs[0].shape[-1] or 1


TERMS = {
    "matmul": _matmul,
    "conv2d": _conv2d,
    "conv_transpose2d": _conv_transpose2d,
    "einsum": _einsum,
    "sum": _reduced,
    "mean": _reduced,
    "prod": _reduced,
    "softmax": _along_axis,
    "log_softmax": _along_axis,
    "cumsum": _along_axis,
    "avg_pool2d": _pool,
    "sparse_softmax_cross_entropy": _classes,
}


def terms(node, backward: bool = False) -> int:
    """Terms one output element of `node` sums (1 for an op that sums nothing); with
    `backward`, the most any of its gradients sums too."""
    rule = TERMS.get(node.op)
    if rule is None:
        return 1
    try:
        return max(int(rule(node, backward)), 1)
    except (IndexError, TypeError, ValueError, ZeroDivisionError):
        return 1  # a shape the rule cannot read: the record's budget as it is


class Terms(int):
    """A count of terms (an int) that also says over how many loop trips they were summed
    (`trips`): what `untag` reads from a loop tag, so `scale` can grow the budget for both."""

    trips = 1

    def __new__(cls, count: int, trips: int = 1):
        value = super().__new__(cls, count)
        value.trips = trips
        return value


def scale(count: int) -> tuple:
    """(rtol factor, atol factor) by which an op's budget grows for a sum of `count` terms;
    for `Terms` summed across loop trips, the rtol grows linearly with the trips too.

    >>> scale(4096)
    (4.0, 16.0)
    >>> scale(Terms(1024, trips=1024))   # an add carried across 1024 iterations
    (4.0, 4.0)
    """
    trips = getattr(count, "trips", 1)
    per_trip = max(1.0, count / trips / REFERENCE_TERMS)
    ratio = max(1.0, count / REFERENCE_TERMS)
    return math.sqrt(per_trip) * max(1.0, trips / REFERENCE_TERMS), ratio


def tag(op: str, count: int, trips: int = 1) -> str:
    """The name `compare.ops_of` gives an accumulating use of `op`: "conv2d@4608"; in a
    loop body run `trips` times, "add@1x3000" (terms per trip x trips)."""
    return f"{op}@{count}" if trips == 1 else f"{op}@{count}x{trips}"


def untag(name: str) -> tuple:
    """(op, terms) of a name from `tag` (a `Terms` for a loop tag), or (name, 1) for a plain
    op name."""
    op, _, count = name.partition("@")
    per_trip, _, trips = count.partition("x")
    if per_trip.isdigit() and trips.isdigit():
        return op, Terms(int(per_trip) * int(trips), int(trips))
    return op, int(count) if count.isdigit() else 1


# -- loops -------------------------------------------------------------------------------
def _constant(value, graph, outer: dict, node) -> int | None:
    """The integer a scalar `value` of `graph` (a while_loop's cond or body) always holds:
    a constant node there, or a captured input bound to a constant of the enclosing graph
    (`outer`: value id -> producing node)."""
    producer = next((n for n in graph.nodes if value in n.outputs), None)
    if producer is None and value in graph.inputs:
        position = graph.inputs.index(value)
        if position >= node.attrs.get("num_carried", 0) and position < len(node.inputs):
            producer = outer.get(node.inputs[position].id)
    if producer is None or producer.op != "constant":
        return None
    array = np.asarray(producer.attrs.get("value"))
    if array.size != 1 or array.dtype.kind not in "iu":
        return None
    return int(array.reshape(()))


def _bounds(value, cond, outer, node):
    """(carried position, bound) for each `counter < bound` the condition ANDs. (Not <=:
    that is the iteration guard's `counter <= max_loop_iterations()` (control_flow), a
    limit of 10 million, not a trip count.)"""
    producer = next((n for n in cond.nodes if value in n.outputs), None)
    if producer is None:
        return []
    if producer.op == "logical_and":
        return [b for v in producer.inputs for b in _bounds(v, cond, outer, node)]
    if producer.op != "less":
        return []
    counter, limit = producer.inputs[:2]
    carried = cond.inputs[:node.attrs.get("num_carried", 0)]
    bound = _constant(limit, cond, outer, node)
    if counter not in carried or bound is None:
        return []
    return [(carried.index(counter), bound)]


def trip_count(node, outer: dict) -> int | None:
    """The most iterations `node`, a while_loop, can run, when its condition bounds a
    counter that starts at a constant and its body steps by a positive constant; else the
    trips `observe` saw it run in the reference, if it did; else None. `outer` maps value
    ids of the enclosing graph to the nodes that produce them.

    >>> trip_count(loop_node, producers)   # ug.while_loop(lambda i, s: i < 3000, ...)
    3000
    """
    known = _graph_trip_count(node, outer)
    if known is not None or node.op != "while_loop" or not node.outputs:
        return known
    return _OBSERVED.get(node.outputs[0].id)


def _graph_trip_count(node, outer: dict) -> int | None:
    """`trip_count` as the graph alone gives it (None when only a run can tell)."""
    if node.op != "while_loop":
        return None
    cond, body = node.subgraphs.get("cond"), node.subgraphs.get("body")
    if cond is None or body is None or not cond.outputs:
        return None
    found = []
    for position, bound in _bounds(cond.outputs[0], cond, outer, node):
        start = outer.get(node.inputs[position].id)
        step_node = next((n for n in body.nodes if body.outputs[position] in n.outputs), None)
        if start is None or start.op != "constant" or step_node is None \
                or step_node.op != "add" or body.inputs[position] not in step_node.inputs:
            continue
        other = [v for v in step_node.inputs if v is not body.inputs[position]]
        step = _constant(other[0], body, outer, node) if len(other) == 1 else None
        first = np.asarray(start.attrs.get("value"))
        if step is None or step <= 0 or first.size != 1 or first.dtype.kind not in "iu":
            continue
        found.append(max(0, -(-(bound - int(first.reshape(()))) // step)))
    return min(found) if found else None


def loop_tags(node, outer: dict, body_names) -> set:
    """Tags for the ops of a while_loop's body (`body_names`, as `compare.ops_of` names
    them) run `trip_count` times: "add@1x3000", "matmul@64x3000"; an op of a loop nested in
    the body has its trips multiplied ("add@1x1000" in a loop of 3 trips: "add@1x3000").
    Empty for a loop whose trips are not known; an op run within `REFERENCE_TERMS` trips in
    all gets no tag."""
    trips = trip_count(node, outer)
    if trips is None:
        return set()
    tags = set()
    for name in body_names:
        op, count = untag(name)
        inner = getattr(count, "trips", 1)
        if trips * inner > REFERENCE_TERMS:
            tags.add(tag(op, count // inner, trips * inner))
    return tags


# -- trip counts seen in a run ----------------------------------------------------------------
# A loop's first output value id -> the most trips the float64 reference ran it (value ids are
# unique in a process, so one table serves every graph). Written by `observe`.
_OBSERVED: dict = {}


def _has_unknown_loop(graph) -> bool:
    """Whether `graph` (its subgraphs included) has a while_loop with no trip count in it."""
    producers = {v.id: n for n in graph.nodes for v in n.outputs}
    for node in graph.nodes:
        if node.op == "while_loop" and _graph_trip_count(node, producers) is None:
            return True
        if any(_has_unknown_loop(sub) for sub in node.subgraphs.values()):
            return True
    return False


def observe(graph, feeds: list, params=()) -> dict:
    """Run `graph` in float64 on `feeds` (its inputs) and `params` (its parameters' values)
    and record, for every while_loop, the most trips it ran (nested loops included, and
    loops inside a `grad` node), so that `trip_count` uses it where the graph does not give
    one. Returns {loop's first output value id: trips}; nothing runs (and {} is returned)
    when every loop's trip count is in the graph, or when the run fails (the checker's own
    reference run reports that).

    >>> observe(graph, [x, np.int64(3000)])   # while i < n: s += x, with n = 3000
    {17: 3000}
    """
    if not _has_unknown_loop(graph):
        return {}
    from unigraph.reference.float64 import promote, upcast
    from unigraph.reference.plan import Plan

    try:
        plan = Plan(promote(graph), fast=False)
        env, residuals = plan.forward([upcast(x) for x in [*feeds, *params]], True)
        found: dict = {}
        _count_trips(plan, env, residuals, found)
    except Exception:  # noqa: BLE001 - the checker's own reference run reports the error
        return {}
    _OBSERVED.update(found)
    return found


def _count_trips(plan, env, residuals, found: dict) -> None:
    """Walk a recorded run of `plan` (`Plan.forward(..., record=True)`): a while step's
    record is its list of iterations, a cond's the branch it took."""
    from unigraph.reference.plan import CondStep, GradStep, WhileStep

    value_of_slot = {slot: value_id for value_id, slot in plan.slots.items()}
    for step, residual in zip(plan.steps, residuals):
        if type(step) is WhileStep and step.outs:
            key = value_of_slot.get(step.outs[0])
            found[key] = max(found.get(key, 0), len(residual))
            for body_env, body_residuals in residual:
                _count_trips(step.body, body_env, body_residuals, found)
        elif type(step) is CondStep:
            index, branch_env, branch_residuals = residual
            _count_trips(step.branches[index], branch_env, branch_residuals, found)
        elif type(step) is GradStep:  # its forward keeps no record: run the function again
            fn_env, fn_residuals = step.fn.forward([env[i] for i in step.operands], True)
            _count_trips(step.fn, fn_env, fn_residuals, found)
