"""torch:static's generated `while` keeps a loop's iteration guard as a Python int.

Every traced `ug.while_loop` carries an int64 iteration counter (see
`unigraph.control_flow._traced_while`): it starts at 0, the body adds 1, the condition
asks `counter <= limit` (`logical_and` with the user's condition), and after the loop
`counter > limit` says whether the loop ran past `max_loop_iterations`. Written as torch
ops on 0-d tensors that is three ops per iteration (~1 us each) beside the user's own: a
counter loop of two adds cost twice its native `while`. torch:static's loop is Python's
own `while`, so the counter can be a Python int there (`n <= limit`, `n += 1`), made a
tensor once after the loop for whatever reads it.

`find_guard` recognises exactly that shape and nothing else (`unigraph.loop_guard`, shared
with numpy:static's generated code); any other loop keeps the tensor counter.

>>> guard = find_guard(node, [scope.get(name) for name in args])
>>> guard.cond, guard.body, guard.limit      # the subgraphs without the counter's ops
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from unigraph.ir import Graph
from unigraph.loop_guard import find_loop_guard


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


def find_guard(node, constants: list) -> Guard | None:
    """The iteration guard of while_loop `node` (`unigraph.loop_guard.find_loop_guard`), or
    None. `constants[i]` is the torch constant the node's input i is (None otherwise)."""
    cond, body = node.subgraphs["cond"], node.subgraphs["body"]
    found = find_loop_guard(cond, body, node.attrs["num_carried"],
                            lambda position: _int_constant(constants[position]))
    if found is None:
        return None
    new_cond = Graph(cond.name, cond.inputs, cond.params,
                     [n for n in cond.nodes if n is not found.compare and n is not found.join],
                     [found.join.inputs[0]])
    new_body = Graph(body.name, body.inputs, body.params,
                     [n for n in body.nodes if n is not found.step], body.outputs[:-1])
    return Guard(new_cond, new_body, found.limit)
