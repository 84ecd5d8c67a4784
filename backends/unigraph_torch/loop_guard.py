"""torch:static's generated `while` keeps a loop's iteration guard as a Python int.

Every traced `ug.while_loop` carries an int64 iteration counter (see
`unigraph.control_flow._traced_while`): it starts at 0, the body adds 1, the condition
asks `counter <= limit` (`logical_and` with the user's condition), and after the loop
`counter > limit` says whether the loop ran past `max_loop_iterations`. Written as torch
ops on 0-d tensors that is three ops per iteration (~1 us each) beside the user's own: a
counter loop of two adds cost twice its native `while`. torch:static's loop is Python's
own `while`, so the counter can be a Python int there (`n <= limit`, `n += 1`), made a
tensor once after the loop for whatever reads it.

`find_guard` recognises exactly that shape and nothing else: the counter is the last
carried value, starts from the constant 0, is read in the condition only by
`less_equal(counter, limit)` whose result only feeds the final `logical_and`, and in the
body only by `add(counter, 1)`, which is the body's last result; limit, 0 and 1 are
constants of the enclosing graph. Any other loop (a `maximum_iterations`, a loop nested
inside that reports through the counter) keeps the tensor counter.

>>> guard = find_guard(node, [scope.get(name) for name in args])
>>> guard.cond, guard.body, guard.limit      # the subgraphs without the counter's ops
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from unigraph.ir import Graph


class Guard(NamedTuple):
    cond: Graph  # the condition without the counter's ops: outputs the user's condition
    body: Graph  # the body without the counter's add: the user's results only
    limit: int


def counter_tensor(count: int) -> torch.Tensor:
    """The counter after the loop, as the int64 scalar tensor the graph reads."""
    return torch.tensor(count, dtype=torch.int64)


# After a top-level loop its counter stays a Python int too: the graph reads it only to make
# the loop's flag (`cast(counter > limit, int64)`, times the loop's number, the maximum over
# loops), which the run returns as a NumPy scalar (its fetch), so the 2-trip counter no
# longer pays 4 torch calls (~5 us) after its loop. The ops below, on Python ints and int
# constants, are Python expressions; any other use makes the int a tensor first.
HOST_EXPRESSIONS = {
    "greater": "({} > {})", "less": "({} < {})", "greater_equal": "({} >= {})",
    "less_equal": "({} <= {})", "equal": "({} == {})", "not_equal": "({} != {})",
    "add": "({} + {})", "sub": "({} - {})", "mul": "({} * {})", "neg": "(-{})",
    "maximum": "max({}, {})", "minimum": "min({}, {})",
}
HOST_CASTS = {"int64": "int({})", "bool": "bool({})"}
_COMPARISONS = {"greater", "less", "greater_equal", "less_equal", "equal", "not_equal"}


def host_dtype(op: str, attrs: dict, dtypes: list) -> str | None:
    """The dtype of `op` on Python scalars of `dtypes`, or None when it has no Python
    expression here (then the scalars become tensors)."""
    if op == "cast":
        return attrs["dtype"] if attrs["dtype"] in HOST_CASTS else None
    if op not in HOST_EXPRESSIONS or any(d != "int64" for d in dtypes):
        return None
    return "bool" if op in _COMPARISONS else "int64"


def scalar_tensor(value, dtype: torch.dtype) -> torch.Tensor:
    return torch.tensor(value, dtype=dtype)


def _int_constant(value):
    """The value of an int64 scalar torch constant, else None."""
    if isinstance(value, torch.Tensor) and value.dim() == 0 and value.dtype == torch.int64:
        return int(value)
    return None


def _readers(graph: Graph, value) -> list:
    return [node for node in graph.nodes if any(v is value for v in node.inputs)]


def _constant_input(graph: Graph, value, constants: list, first: int):
    """The int constant fed to `graph`'s input `value`, if it is a captured input (at or
    after position `first`) fed a known constant."""
    for position, candidate in enumerate(graph.inputs):
        if candidate is value and position >= first:
            return _int_constant(constants[position])
    return None


def find_guard(node, constants: list) -> Guard | None:
    """The iteration guard of while_loop `node` as described in the module docstring, or
    None. `constants[i]` is the torch constant the node's input i is (None otherwise)."""
    count = node.attrs["num_carried"]
    cond, body = node.subgraphs["cond"], node.subgraphs["body"]
    last = count - 1
    if count < 2 or _int_constant(constants[last]) != 0:
        return None
    counter = cond.inputs[last]
    readers = _readers(cond, counter)
    if len(readers) != 1 or readers[0].op != "less_equal" or \
            readers[0].inputs[0] is not counter or counter in cond.outputs:
        return None
    compare = readers[0]
    limit = _constant_input(cond, compare.inputs[1], constants, count)
    (within,) = compare.outputs
    joins = _readers(cond, within)
    if limit is None or len(joins) != 1 or joins[0].op != "logical_and" or \
            joins[0].inputs[1] is not within or joins[0].inputs[0] is within or \
            len(cond.outputs) != 1 or cond.outputs[0] is not joins[0].outputs[0]:
        return None
    join = joins[0]
    counter = body.inputs[last]
    readers = _readers(body, counter)
    if len(readers) != 1 or readers[0].op != "add" or readers[0].inputs[0] is not counter \
            or counter in body.outputs:
        return None
    step = readers[0]
    (stepped,) = step.outputs
    if _constant_input(body, step.inputs[1], constants, count) != 1 or \
            len(body.outputs) != count or body.outputs[last] is not stepped or \
            stepped in body.outputs[:last] or _readers(body, stepped):
        return None
    new_cond = Graph(cond.name, cond.inputs, cond.params,
                     [n for n in cond.nodes if n is not compare and n is not join],
                     [join.inputs[0]])
    new_body = Graph(body.name, body.inputs, body.params,
                     [n for n in body.nodes if n is not step], body.outputs[:last])
    return Guard(new_cond, new_body, limit)
