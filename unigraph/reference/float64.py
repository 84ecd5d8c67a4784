"""The float64 reference: a graph run by the reference engine in float64.

The reference runs a *promoted* copy of the traced graph: every float16/float32 value,
constant and dtype attribute becomes float64, value ids stay the same. So the reference
computes exactly the user's graph (same constants, same casts to integers), only in float64,
and its intermediates line up with a target's by value id.

>>> env = values(graph, feeds, params)          # {value id: float64 array}
>>> outputs = [env[v.id] for v in graph.outputs]
"""

from __future__ import annotations

import numpy as np

from unigraph.ir import Graph, Node, Value
from unigraph.ops import OPS
from unigraph.reference.executable import ReferenceExecutable
from unigraph.reference.plan import Plan

WIDE_FLOATS = ("float16", "float32")


def wide_dtype(dtype: str) -> str:
    return "float64" if dtype in WIDE_FLOATS else dtype


def upcast(array) -> np.ndarray:
    """A float16/float32 array as float64 (exactly); anything else unchanged."""
    array = np.asarray(array)
    return array.astype(np.float64) if array.dtype.name in WIDE_FLOATS else array


def _wide_attr(name: str, value):
    if name == "dtype" and value in WIDE_FLOATS:
        return "float64"
    if isinstance(value, np.ndarray) and value.dtype.name in WIDE_FLOATS:
        return value.astype(np.float64)
    return value


def promote(graph: Graph, memo: dict | None = None) -> Graph:
    """A float64 copy of `graph` with the same value ids (subgraphs included)."""
    memo = {} if memo is None else memo

    def value(v: Value) -> Value:
        if v.id not in memo:
            memo[v.id] = Value(v.shape, wide_dtype(v.dtype), v.name, id=v.id)
        return memo[v.id]

    copy = Graph(graph.name, [value(v) for v in graph.inputs], [value(v) for v in graph.params])
    for node in graph.nodes:
        copy.nodes.append(Node(
            node.op,
            [value(v) for v in node.inputs],
            [value(v) for v in node.outputs],
            {key: _wide_attr(key, attr) for key, attr in node.attrs.items()},
            {key: promote(sub, memo) for key, sub in node.subgraphs.items()},
            node.source,
        ))
    copy.outputs = [value(v) for v in graph.outputs]
    copy.updates = [(value(p), value(v)) for p, v in graph.updates]
    return copy


def compile_float64(graph: Graph) -> ReferenceExecutable:
    """The reference executable of `graph` promoted to float64 (feed it `upcast` arrays),
    running the op records' references (the definitions), not the engine's fast kernels."""
    wide = promote(graph)
    executable = ReferenceExecutable(wide)
    executable.plan = Plan(wide, fast=False)  # the same slots: lowering is deterministic
    return executable


def values(graph: Graph, feeds: list, params=()) -> dict:
    """{value id: float64 array} for every top-level value of `graph`, run in float64.

    `feeds` and `params` may be in narrower dtypes; they are widened exactly. Raises
    `SecondOrderUnsupported` for a gradient of a gradient.
    """
    executable = compile_float64(graph)
    for index, array in enumerate(params):
        executable.set_param(index, upcast(array))
    return executable.run_all([upcast(x) for x in feeds])


def outputs(graph: Graph, feeds: list, params=()) -> list:
    env = values(graph, feeds, params)
    return [env[v.id] for v in graph.outputs]


def cotangents(graph: Graph, operands: list, seeds: list) -> tuple[dict, dict]:
    """Reverse mode in float64 over a parameter-free `graph` fed `operands`.

    seeds: one per graph output: "ones", an array (the output's cotangent) or None.
    Returns ({value id: value}, {value id: cotangent}) for the top-level values; a value
    that no seeded output depends on has no cotangent.
    """
    plan = Plan(promote(graph), fast=False)  # the op records' references: the definitions
    env, residuals = plan.forward([upcast(x) for x in operands], True)
    grads: dict = {}
    for slot, seed in zip(plan.output_slots, seeds):
        if seed is not None:
            g = np.ones_like(env[slot]) if isinstance(seed, str) else upcast(seed)
            grads[slot] = grads[slot] + g if slot in grads else g
    for step, residual in zip(reversed(plan.steps), reversed(residuals)):
        step.backward(env, residual, grads, None)
    value_of = {value_id: env[slot] for value_id, slot in plan.slots.items()}
    cotangent_of = {value_id: grads[slot] for value_id, slot in plan.slots.items()
                    if slot in grads}
    return value_of, cotangent_of


def vjp(node: Node, inputs: list, cotangent) -> list:
    """The op record's VJP of one op node in float64: the gradient of each input (None where
    the rule gives none) given the output's `cotangent`."""
    record = OPS[node.op]
    wide = promote(Graph("node", [], [], [node], [])).nodes[0]
    args = [upcast(x) for x in inputs]
    output = np.asarray(record.reference(*args, **wide.attrs))
    return list(record.vjp(upcast(cotangent), args, output, **wide.attrs))
