"""The ONNX importers of If and Loop (`unigraph.onnx.importers`' table takes them from
`CONTROL_FLOW_IMPORTERS`): If becomes `ug.cond` (or the branch taken, when the condition is
known at import), Loop becomes `ug.while_loop`, its scan outputs stacked rows.
"""

from __future__ import annotations

import numpy as np

import unigraph as ug


def _to_tensor(value):
    return value if isinstance(value, ug.Tensor) else ug.constant(np.asarray(value))


def _scalar_bool(value):
    return ug.reshape(_to_tensor(value), ()) if len(value.shape) else _to_tensor(value)


def _if(ctx, args, attrs):
    then, other = attrs["then_branch"], attrs["else_branch"]
    if isinstance(args[0], np.ndarray):  # known at import: the branch taken, inlined
        return ctx.run_graph(then if bool(args[0].reshape(-1)[0]) else other, {})
    outs = ug.cond(_scalar_bool(args[0]), lambda: tuple(ctx.run_graph(then, {})),
                   lambda: tuple(ctx.run_graph(other, {})))
    return list(outs)


def _passes_condition_through(body) -> bool:
    """Whether the body's condition output is its condition input (directly or through
    Identity nodes): the loop then runs exactly its trip count."""
    name = body.output[0].name
    producers = {out: node for node in body.node for out in node.output}
    while name in producers and producers[name].op_type == "Identity":
        name = producers[name].input[0]
    return name == body.input[1].name


def _loop(ctx, args, attrs):
    body = attrs["body"]
    limit, keep, carried = args[0], args[1], [_to_tensor(v) for v in args[2:]]
    scans = len(body.output) - 1 - len(carried)
    names = [i.name for i in body.input]
    if scans:
        return _loop_with_scans(ctx, body, limit, keep, carried, scans)
    start = (ug.tensor(np.int64(0)),
             ug.tensor(np.True_) if keep is None else _scalar_bool(keep), *carried)

    # A trip count known at import stays a constant in the condition: the checker reads
    # it there to grow the budgets of what the loop accumulates (checking.accumulation).
    bound = int(limit.reshape(-1)[0]) if isinstance(limit, np.ndarray) else limit

    def cond_fn(i, go, *state):
        if bound is None:
            return go
        return ug.logical_and(go, i < (bound if isinstance(bound, int) else _scalar_bool(bound)))

    def body_fn(i, go, *state):
        outs = ctx.run_graph(body, dict(zip(names, (i, go, *state))))
        return (i + 1, _scalar_bool(outs[0]), *(_to_tensor(v) for v in outs[1:]))

    return list(ug.while_loop(cond_fn, body_fn, start)[2:])


def _loop_with_scans(ctx, body, limit, keep, carried, scans):
    """A Loop whose body also emits scan outputs (stacked over iterations). When their
    length is known at import (a trip count known then, at least 1, and a condition that
    stays true), the stacked outputs have known shapes: the first iteration is written
    before the loop (its scan values give the stacked shapes); each later one adds its
    values into a zero buffer at its row (a one-hot mask, so gradients flow to every row).
    Otherwise (`_loop_with_growing_scans`) they grow by a row per iteration."""
    known_trips = isinstance(limit, np.ndarray) and int(limit.reshape(-1)[0]) >= 1
    starts_true = keep is None or (isinstance(keep, np.ndarray) and bool(keep.reshape(-1)[0]))
    if not (known_trips and starts_true and _passes_condition_through(body)):
        return _loop_with_growing_scans(ctx, body, limit, keep, carried)
    trips = int(limit.reshape(-1)[0])
    names = [i.name for i in body.input]
    go = ug.tensor(np.True_)
    first = [_to_tensor(v) for v in ctx.run_graph(
        body, dict(zip(names, (ug.tensor(np.int64(0)), go, *carried))))[1:]]
    state, values = first[:len(carried)], first[len(carried):]
    buffers = []
    for value in values:
        row = ug.reshape(ug.one_hot(ug.tensor(np.int64(0)), trips, dtype=str(value.dtype)),
                         (trips,) + (1,) * len(value.shape))
        buffers.append(row * ug.expand_dims(value, 0))
    if trips == 1:
        return [*state, *buffers]

    def body_fn(i, *loop_state):
        state, stacked = loop_state[:len(carried)], loop_state[len(carried):]
        outs = [_to_tensor(v) for v in ctx.run_graph(body, dict(zip(names, (i, go, *state))))]
        new_state, values = outs[1:1 + len(carried)], outs[1 + len(carried):]
        added = []
        for buffer, value in zip(stacked, values):
            row = ug.reshape(ug.one_hot(i, trips, dtype=str(value.dtype)),
                             (trips,) + (1,) * len(value.shape))
            added.append(buffer + row * ug.expand_dims(value, 0))
        return (i + 1, *new_state, *added)

    out = ug.while_loop(lambda i, *rest: i < trips, body_fn,
                        (ug.tensor(np.int64(1)), *state, *buffers))
    return list(out[1:])


def _scan_types(ctx, body, names, carried) -> list:
    """(shape, dtype) of each scan value of `body`, from a trace that is thrown away (so
    nothing of it runs); refused where a shape is known only at run time."""
    from unigraph.control_flow import trace_subgraph
    from unigraph.ops.base import TensorSpec
    from unigraph.tracing import current_builder

    specs = [TensorSpec((), "int64"), TensorSpec((), "bool"),
             *(TensorSpec(tuple(v.shape), str(v.dtype)) for v in carried)]
    builder = current_builder()
    # A loop nested in the body notes its line at the root; this trace is not kept.
    lines = list(builder.root.loop_lines) if builder is not None else None
    _, outs = trace_subgraph(builder, "body", lambda *xs: [_to_tensor(v) for v in ctx.run_graph(
        body, dict(zip(names, xs)))], specs, capture_eager=builder is None)
    if builder is not None:
        builder.root.loop_lines[:] = lines
    types = [(tuple(v.shape), str(v.dtype)) for v in outs[1 + len(carried):]]
    if any(None in shape for shape, _ in types):
        ctx.refuse("Loop with a scan output whose shape is known only at run time, and a "
                   "scan length known only at run time")
    return types


def _unknown_rows(x):
    """`x` (no rows yet) as a value whose first dim the graph leaves unknown, so that a
    while_loop may carry it growing: a reshape to (-1, ...), typed (None, ...). The op
    records infer known dims from known dims, so the node is written with its type."""
    from unigraph.dispatch import symbolic, value_of
    from unigraph.ops.base import TensorSpec
    from unigraph.tracing import current_builder

    builder = current_builder()
    rest = tuple(x.shape[1:])
    (out,) = builder.add_node("reshape", [value_of(builder, x)],
                              [TensorSpec((None, *rest), str(x.dtype))], {"shape": (-1, *rest)})
    return symbolic(builder, out)


def _loop_with_growing_scans(ctx, body, limit, keep, carried):
    """Scan outputs whose length is known only at run time (a trip count computed then, a
    condition the body may turn false, a run-time initial condition, or no trip count):
    each iteration appends a row. In a static graph a while_loop carries each stacked
    output with its first dim unknown (None), grown by a concat; eagerly, the iterations
    run as they come and their rows are stacked at the end."""
    from unigraph.tracing import current_builder

    names = [i.name for i in body.input]
    go = ug.tensor(np.True_) if keep is None else _scalar_bool(keep)
    bound = None if limit is None else _scalar_bool(limit)
    if current_builder() is None:
        return _eager_loop_with_scans(ctx, body, names, bound, go, carried)
    count = len(carried)
    buffers = [_unknown_rows(ug.zeros((0, *shape), dtype=dtype))
               for shape, dtype in _scan_types(ctx, body, names, carried)]

    def cond_fn(i, go, *rest):
        return go if bound is None else ug.logical_and(go, i < bound)

    def body_fn(i, go, *rest):
        state, stacked = rest[:count], rest[count:]
        outs = [_to_tensor(v) for v in ctx.run_graph(body, dict(zip(names, (i, go, *state))))]
        grown = [ug.concat([buffer, ug.expand_dims(value, 0)], axis=0)
                 for buffer, value in zip(stacked, outs[1 + count:])]
        return (i + 1, _scalar_bool(outs[0]), *outs[1:1 + count], *grown)

    out = ug.while_loop(cond_fn, body_fn, (ug.tensor(np.int64(0)), go, *carried, *buffers))
    return list(out[2:])


def _eager_loop_with_scans(ctx, body, names, bound, go, carried):
    """The eager form of `_loop_with_growing_scans`: the condition and the trip count are
    read each iteration, as an eager while_loop reads its condition. (A loop that runs no
    iteration takes its empty outputs' shapes from a trace of the body.)"""
    from unigraph.control_flow import loop_error, max_loop_iterations

    limit = max_loop_iterations()
    scans = len(body.output) - 1 - len(carried)
    state, rows = list(carried), [[] for _ in range(scans)]
    trips = None if bound is None else int(bound)
    i = 0
    while bool(go) and (trips is None or i < trips):
        if limit is not None and i >= limit:
            raise loop_error(f"{ctx.origin}: node {ctx.node.name or '(unnamed)'!r} (Loop)", limit)
        outs = [_to_tensor(v) for v in ctx.run_graph(
            body, dict(zip(names, (ug.tensor(np.int64(i)), go, *state))))]
        go, state = _scalar_bool(outs[0]), outs[1:1 + len(state)]
        for row, value in zip(rows, outs[1 + len(state):]):
            row.append(value)
        i += 1
    if i == 0:
        types = _scan_types(ctx, body, names, carried)
        return [*state, *(ug.zeros((0, *shape), dtype=dtype) for shape, dtype in types)]
    return [*state, *(ug.stack(row, axis=0) for row in rows)]


CONTROL_FLOW_IMPORTERS = {
    "If": _if,
    "Loop": _loop,
}
