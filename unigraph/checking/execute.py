"""Running an IR graph on a target with every intermediate value fetched.

Static modes compile the graph with `backend.compile` and fetch everything with
`Executable.run_all`; the eager mode interprets the graph op by op through
`backend.eager_op`, with `cond`/`while_loop` run as Python control flow and `grad` through
`backend.eager_grad`, which is what an eager user function does too. The interpreter is the
shared `lower_nodes` walk (`unigraph.backend`) with `eager_op` as its lowering table.

The float64 reference side lives in the core: `unigraph.reference.float64`.
"""

from __future__ import annotations

import functools

import numpy as np

from unigraph.backend import lower_nodes
from unigraph.ir import Graph, Node
from unigraph.shape_checks import check_before_run, needs_check_before_run


def rounded(array, dtype: str) -> np.ndarray:
    """A reference value brought to the dtype the target computes it in."""
    return np.asarray(array).astype(dtype, copy=False)


def single_node_graph(node: Node) -> Graph:
    """A graph holding only `node`: its distinct inputs become the graph's inputs."""
    inputs, seen = [], set()
    for value in node.inputs:
        if value.id not in seen:
            seen.add(value.id)
            inputs.append(value)
    return Graph(f"node_{node.op}", inputs, [], [node], list(node.outputs))


def _to_numpy(backend, value) -> np.ndarray:
    if isinstance(value, np.ndarray):
        return value
    return np.asarray(backend.to_numpy(value))


def target_env(graph: Graph, backend, mode: str, feeds: list, params: list) -> dict:
    """{value id: array} for every top-level value of `graph` run on `backend`:`mode`."""
    if mode == "eager":
        _check_before_eager_run(graph, backend, feeds)
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
        _check_before_eager_run(graph, backend, feeds)
        natives = [backend.to_native(np.asarray(x)) for x in feeds]
        outs = interpret(graph, backend, natives)
    else:
        outs = backend.compile(graph, mode).run(list(feeds))
    return [_to_numpy(backend, value) for value in outs]


def _check_before_eager_run(graph: Graph, backend, feeds: list) -> None:
    """The check every compiled run makes first (`Executable.check_before_run`), for the
    interpreter: it runs only a cond's path taken, where a user's eager call traces the
    other and raises."""
    if needs_check_before_run(graph):
        check_before_run(graph, [np.shape(x) for x in feeds], f"{backend.name}:eager")


# -- the eager interpreter ---------------------------------------------------------------
class _EagerTable:
    """A lowering table whose every entry runs one op now, through `backend.eager_op`."""

    def __init__(self, backend):
        self.backend = backend

    def __getitem__(self, op: str):
        return functools.partial(self._run, op)

    def _run(self, op, *args, **attrs):
        return self.backend.eager_op(op, list(args), attrs)


def interpret(graph: Graph, backend, natives: list) -> list:
    """Run `graph` eagerly on `backend`; `natives` are its inputs then its params."""
    env = interpret_env(graph, backend, natives)
    return [env[v.id] for v in graph.outputs]


def interpret_env(graph: Graph, backend, natives: list) -> dict:
    """{value id: native} for every top-level value of `graph` run op by op on `backend`."""
    env = {v.id: x for v, x in zip([*graph.inputs, *graph.params], natives)}
    control_flow = {op: functools.partial(run, backend) for op, run in _CONTROL_FLOW.items()}
    lower_nodes(graph, env, _EagerTable(backend), control_flow)
    return env


def _truth(backend, native) -> bool:
    return bool(np.asarray(backend.to_numpy(native)).reshape(()))


def _eager_cond(backend, node: Node, args: list) -> list:
    taken = "then" if _truth(backend, args[0]) else "else"
    return interpret(node.subgraphs[taken], backend, args[1:])


def _eager_while(backend, node: Node, args: list) -> list:
    count = node.attrs["num_carried"]
    carried, captured = list(args[:count]), list(args[count:])
    cond, body = node.subgraphs["cond"], node.subgraphs["body"]
    while _truth(backend, interpret(cond, backend, carried + captured)[0]):
        carried = interpret(body, backend, carried + captured)
    return carried


def _eager_grad(backend, node: Node, args: list) -> list:
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


_CONTROL_FLOW = {"cond": _eager_cond, "while_loop": _eager_while, "grad": _eager_grad}
