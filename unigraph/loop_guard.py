"""The iteration guard `control_flow._traced_while` adds to a traced loop, found in the IR.

A traced `ug.while_loop` with a loop limit carries an int64 counter after the user's loop
variables: it starts from the constant 0, the body adds 1, and the condition asks
`counter <= limit` (`logical_and` with the user's condition). An engine whose loop is
Python's own `while` can keep that counter as a Python int (torch:static's generated code,
`unigraph_torch.loop_guard`; numpy:static's, `unigraph.reference.codegen`) when the loop has
exactly that shape, which `find_loop_guard` recognises, and nothing else: the counter is the
last carried value, read in the condition only by `less_equal(counter, limit)` whose result
only feeds the condition's output `logical_and(predicate, ...)`, and in the body only by
`add(counter, 1)`, the body's last result and read by nothing; 0, limit and 1 are int
constants of the enclosing graph. Any other loop (a `maximum_iterations`, a loop nested
inside that reports through the counter) keeps its counter as a value.

>>> guard = find_loop_guard(cond, body, num_carried, constant_at)
>>> guard.compare, guard.join, guard.step, guard.limit
"""

from __future__ import annotations

from typing import NamedTuple

from unigraph.ir import Graph, Node


class LoopGuard(NamedTuple):
    compare: Node  # less_equal(counter, limit), in the condition
    join: Node  # logical_and(the user's predicate, compare): the condition's output
    step: Node  # add(counter, 1), in the body
    limit: int


def readers(graph: Graph, value) -> list:
    """The nodes of `graph` (top level) that read `value`."""
    return [node for node in graph.nodes if any(v is value for v in node.inputs)]


def find_loop_guard(cond: Graph, body: Graph, count: int, constant_at) -> LoopGuard | None:
    """The iteration guard of a while_loop node with subgraphs `cond` and `body` and `count`
    carried values (its `num_carried`), as the module docstring describes, or None.
    `constant_at(i)` is the int the node's input i is a constant of (None if it is not one);
    the subgraphs' inputs line up with the node's."""
    last = count - 1
    if count < 2 or constant_at(last) != 0:
        return None

    def captured_constant(graph, value):  # the int constant fed to a captured input
        for position, candidate in enumerate(graph.inputs):
            if candidate is value and position >= count:
                return constant_at(position)
        return None

    counter = cond.inputs[last]
    found = readers(cond, counter)
    if len(found) != 1 or found[0].op != "less_equal" or found[0].inputs[0] is not counter \
            or any(v is counter for v in cond.outputs):
        return None
    compare = found[0]
    limit = captured_constant(cond, compare.inputs[1])
    (within,) = compare.outputs
    joins = readers(cond, within)
    if limit is None or len(joins) != 1 or joins[0].op != "logical_and" or \
            joins[0].inputs[1] is not within or joins[0].inputs[0] is within or \
            len(cond.outputs) != 1 or cond.outputs[0] is not joins[0].outputs[0]:
        return None
    counter = body.inputs[last]
    found = readers(body, counter)
    if len(found) != 1 or found[0].op != "add" or found[0].inputs[0] is not counter or \
            any(v is counter for v in body.outputs):
        return None
    step = found[0]
    (stepped,) = step.outputs
    if captured_constant(body, step.inputs[1]) != 1 or len(body.outputs) != count or \
            body.outputs[last] is not stepped or \
            any(v is stepped for v in body.outputs[:last]) or readers(body, stepped):
        return None
    return LoopGuard(compare, joins[0], step, limit)
