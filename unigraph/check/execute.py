"""Running an IR graph directly: on the float64 NumPy reference, or on a target with every
intermediate value fetched.

The reference runs a *promoted* copy of the traced graph: every float16/float32 value,
constant and dtype attribute becomes float64, value ids stay the same. So the reference
computes exactly the user's graph (same constants, same casts to integers), only in float64,
and its intermediates line up with the target's by value id.

On a target, static modes compile the graph with `backend.compile` and fetch everything
with `Executable.run_all`; the eager mode interprets the graph op by op through
`backend.eager_op`, with `cond`/`while_loop` run as Python control flow and `grad` through
`backend.eager_grad`, which is what an eager user function does too.
"""

from __future__ import annotations

import numpy as np

from unigraph.ir import Graph, Node, Value

WIDE_FLOATS = ("float16", "float32")


def wide_dtype(dtype: str) -> str:
    return "float64" if dtype in WIDE_FLOATS else dtype


def upcast(array) -> np.ndarray:
    """A float16/float32 array as float64 (exactly); anything else unchanged."""
    array = np.asarray(array)
    return array.astype(np.float64) if array.dtype.name in WIDE_FLOATS else array


def rounded(array, dtype: str) -> np.ndarray:
    """A reference value brought to the dtype the target computes it in."""
    return np.asarray(array).astype(dtype, copy=False)


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


def single_node_graph(node: Node) -> Graph:
    """A graph holding only `node`: its distinct inputs become the graph's inputs."""
    inputs, seen = [], set()
    for value in node.inputs:
        if value.id not in seen:
            seen.add(value.id)
            inputs.append(value)
    return Graph(f"node_{node.op}", inputs, [], [node], list(node.outputs))


def reference_backend():
    """The NumPy engine itself, whatever the plugin registry holds."""
    from unigraph_numpy.backend import NumpyBackend

    return NumpyBackend()


# -- the reference -----------------------------------------------------------------------
def reference_env(graph: Graph, feeds: list, params: list) -> dict:
    """{value id: float64 array} for every top-level value of `graph`, run in float64.

    `feeds` and `params` are in the target's dtypes; they are widened exactly.
    """
    executable = reference_backend().compile(promote(graph), "static")
    for index, array in enumerate(params):
        executable.set_param(index, upcast(array))
    return executable.run_all([upcast(x) for x in feeds])


def reference_outputs(graph: Graph, feeds: list, params=()) -> list:
    env = reference_env(graph, feeds, list(params))
    return [env[v.id] for v in graph.outputs]


# -- a target ----------------------------------------------------------------------------
def _to_numpy(backend, value) -> np.ndarray:
    if isinstance(value, np.ndarray):
        return value
    return np.asarray(backend.to_numpy(value))


def target_env(graph: Graph, backend, mode: str, feeds: list, params: list) -> dict:
    """{value id: array} for every top-level value of `graph` run on `backend`:`mode`."""
    if mode == "eager":
        natives = [backend.to_native(np.asarray(x)) for x in [*feeds, *params]]
        env = interpret_env(graph, backend, natives)
        return {key: _to_numpy(backend, value) for key, value in env.items()}
    executable = backend.compile(graph, mode)
    for index, array in enumerate(params):
        executable.set_param(index, np.asarray(array))
    env = executable.run_all(list(feeds))
    return {key: _to_numpy(backend, value) for key, value in env.items()}


def target_outputs(graph: Graph, backend, mode: str, feeds: list) -> list:
    """The outputs of a parameter-free `graph` run on `backend`:`mode`, as arrays."""
    if mode == "eager":
        natives = [backend.to_native(np.asarray(x)) for x in feeds]
        outs = interpret(graph, backend, natives)
    else:
        outs = backend.compile(graph, mode).run(list(feeds))
    return [_to_numpy(backend, value) for value in outs]


def interpret(graph: Graph, backend, natives: list) -> list:
    """Run `graph` eagerly on `backend`; `natives` are its inputs then its params."""
    env = interpret_env(graph, backend, natives)
    return [env[v.id] for v in graph.outputs]


def interpret_env(graph: Graph, backend, natives: list) -> dict:
    env = {v.id: x for v, x in zip([*graph.inputs, *graph.params], natives)}
    for node in graph.nodes:
        args = [env[v.id] for v in node.inputs]
        runner = _EAGER_CONTROL_FLOW.get(node.op)
        outs = runner(node, args, backend) if runner else [
            backend.eager_op(node.op, args, node.attrs)
        ]
        for value, out in zip(node.outputs, outs):
            env[value.id] = out
    return env


def _eager_cond(node: Node, args: list, backend) -> list:
    taken = "then" if bool(np.asarray(backend.to_numpy(args[0])).reshape(())) else "else"
    return interpret(node.subgraphs[taken], backend, args[1:])


def _eager_while(node: Node, args: list, backend) -> list:
    count = node.attrs["num_carried"]
    carried, captured = list(args[:count]), list(args[count:])
    cond, body = node.subgraphs["cond"], node.subgraphs["body"]
    while bool(np.asarray(backend.to_numpy(interpret(cond, backend, carried + captured)[0]))
               .reshape(())):
        carried = interpret(body, backend, carried + captured)
    return carried


def _eager_grad(node: Node, args: list, backend) -> list:
    wrt, output = node.attrs["wrt"], node.attrs["output"]
    fn = node.subgraphs["fn"]

    def differentiated(*leaves):
        operands = list(args)
        for index, leaf in zip(wrt, leaves):
            operands[index] = leaf
        outs = interpret(fn, backend, operands)
        return [outs[output], *outs]

    outputs, grads = backend.eager_grad(differentiated, [args[i] for i in wrt])
    return [*outputs[1:], *grads]


_EAGER_CONTROL_FLOW = {"cond": _eager_cond, "while_loop": _eager_while, "grad": _eager_grad}
