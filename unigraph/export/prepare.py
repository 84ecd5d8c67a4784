"""What every exporter starts from: a traced inference graph, its weights and its names.

`prepare(fn_or_module, example_inputs)` traces the function (or the Module's forward) once
with the frontend, takes each parameter's current value, names the inputs after the Python
signature and the outputs after the result's structure, and refuses what a saved model for
serving cannot hold: parameter updates (a training step, BatchNorm in training mode),
`grad` nodes, and random draws (Dropout in training mode).

>>> prepared = prepare(model.eval(), (x,))
>>> prepared.input_names, prepared.output_names
(['x'], ['output'])
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from unigraph import pytree
from unigraph.errors import UnigraphError
from unigraph.function import is_array_leaf, leaf_spec, parameter_names
from unigraph.ir import Graph
from unigraph.tensor import Tensor


class ExportError(UnigraphError):
    """A model cannot be written in the requested format (said why, in the user's terms)."""


@dataclass
class Exportable:
    """A traced inference graph ready to be lowered into a saved format.

    graph: the IR (no updates, no grad nodes, no random inputs);
    params: one NumPy array per `graph.params`, the weights to store;
    input_names / output_names: identifiers, one per graph input / output;
    example_inputs: the example inputs as NumPy arrays, one per graph input;
    name: the function's or model's name.
    """

    graph: Graph
    params: list
    input_names: list
    output_names: list
    example_inputs: list
    name: str


def prepare(fn_or_module, example_inputs: tuple, name: str | None = None,
            input_spec=None, dynamic_batch: bool = False) -> Exportable:
    """Trace `fn_or_module` on `example_inputs` into an `Exportable` (see the module doc).

    The graph's inputs have the shapes of the example inputs, or of `input_spec` (a
    `ug.Spec` or None per positional argument; default: the function's own `input_spec`)
    where it gives one: a `None` dim stays unknown in the artifact. `dynamic_batch=True`
    makes dim 0 of every input of rank >= 1 unknown (a spec for each).

    >>> prepared = prepare(net.eval(), (x,), dynamic_batch=True)
    >>> prepared.graph.inputs[0].shape
    (None, 784)
    """
    from unigraph.checking.run import as_function, output_names, trace_with_params
    from unigraph.control_flow import loop_limit
    from unigraph.function import input_specs

    fn, signature_of = as_function(fn_or_module, name)
    fn.argument_names = parameter_names(signature_of)  # spec errors name `x`, not `args`
    if input_spec is None:
        input_spec = getattr(fn_or_module, "input_spec", None)
    if dynamic_batch:
        input_spec = batch_specs(tuple(example_inputs), input_spec)
    fn.input_spec = input_specs(input_spec)
    # No iteration guard in a saved model: it would stop a long loop early, silently (the
    # guard's error is raised by unigraph, which the artifact runs without).
    with loop_limit(None):
        graph, params, out_treedef, randoms = trace_with_params(fn, tuple(example_inputs))
    refuse_training(graph, fn.name)
    if randoms:
        raise ExportError(_random_message(graph, fn.name, len(randoms)))
    arrays = [np.array(p.numpy(), dtype=v.dtype, copy=True) for p, v in zip(params, graph.params)]
    feeds = [as_array(x) for x in pytree.flatten(tuple(example_inputs), is_array_leaf)[0]]
    inputs = _unique(_input_names(signature_of, tuple(example_inputs)))
    outputs = _unique([identifier(n) for n in output_names(out_treedef)])
    return Exportable(graph, arrays, inputs, outputs, feeds, fn.name)


def batch_specs(example_inputs: tuple, input_spec=None) -> list:
    """`input_spec` with dim 0 unknown for each argument that is an array of rank >= 1
    (a given spec keeps its dims, with dim 0 made unknown)."""
    from unigraph.function import input_specs
    from unigraph.spec import Spec

    given = list(input_specs(input_spec) or ())
    given += [None] * (len(example_inputs) - len(given))
    specs = []
    for arg, spec in zip(example_inputs, given):
        if spec is None and is_array_leaf(arg):
            shape, dtype = leaf_spec(arg if isinstance(arg, Tensor) else as_array(arg))
            spec = Spec(shape, dtype) if shape else None
        if spec is not None and spec.shape:
            spec = Spec((None, *spec.shape[1:]), spec.dtype, spec.name)
        specs.append(spec)
    return specs


def refuse_training(graph: Graph, name: str) -> None:
    """Raise ExportError when `graph` updates parameters or holds a `grad` node."""
    if graph.updates:
        updated = ", ".join(repr(p.name or f"%{p.id}") for p, _ in graph.updates)
        raise ExportError(
            f"cannot export {name}: it updates parameters ({updated}), so it is a training "
            "step, and a saved model for inference holds no training. Export the forward "
            "pass alone (for a Module: call model.eval() first, which also stops BatchNorm "
            "updating its statistics)"
        )
    node = find_node(graph, "grad")
    if node is not None:
        where = f" at {node.source}" if node.source else ""
        raise ExportError(
            f"cannot export {name}: it computes a gradient (ug.grad / ug.value_and_grad"
            f"{where}), and training graphs are not exported. Export the function the "
            "gradient is taken of"
        )


def find_node(graph: Graph, op: str):
    """The first node running `op` in `graph` or any of its subgraphs, else None."""
    return next((node for node in graph.walk() if node.op == op), None)


def _random_message(graph: Graph, name: str, count: int) -> str:
    randoms = {v.id for v in graph.inputs[-count:]}
    users = [n for n in graph.nodes if any(v.id in randoms for v in n.inputs)]
    where = f" at {users[0].source}" if users and users[0].source else ""
    return (f"cannot export {name}: it draws random numbers{where} (Dropout in training "
            "mode?), which an exported model would draw the same way on every run. Call "
            "model.eval() before exporting, or take the randomness out of the function")


def as_array(x) -> np.ndarray:
    """An argument leaf as the array an artifact is fed (a copy of a tensor's value)."""
    if isinstance(x, Tensor):
        return np.array(x.numpy(), copy=True)
    return np.asarray(x, dtype=leaf_spec(x)[1])


def _input_names(signature_of, args: tuple) -> list:
    """One name per input leaf: the argument's name, with `_0`, `_1` for nested leaves."""
    from unigraph.checking.run import argument_names

    names = []
    for arg_name, arg in zip(argument_names(signature_of, len(args)), args):
        count = len(pytree.flatten(arg, is_array_leaf)[0])
        base = identifier(arg_name)
        names.extend([base] if count == 1 else [f"{base}_{i}" for i in range(count)])
    return names


def identifier(text: str) -> str:
    """`output[0]` -> `output_0`: a name every format accepts (TF signature keys included)."""
    name = re.sub(r"[^0-9A-Za-z_]+", "_", text).strip("_") or "value"
    return name if not name[0].isdigit() else "v_" + name


def _unique(names: list) -> list:
    seen: dict = {}
    out = []
    for name in names:
        count = seen.get(name, 0)
        seen[name] = count + 1
        out.append(name if count == 0 else f"{name}_{count}")
    return out
