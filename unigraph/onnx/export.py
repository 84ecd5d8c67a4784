"""`unigraph.onnx.export`: a traced function or Module written as an ONNX model.

The function is traced once on the example inputs (`unigraph.export.prepare`: training
graphs and random draws are refused there), then the IR is walked once, each node written
by its entry in the flat table `unigraph.onnx.emitters.EMITTERS`; `cond` becomes `If` and
`while_loop` becomes `Loop`:

    If(pred)                      then_branch / else_branch: the branch's nodes, reading
                                  the operands from the enclosing graph (outer scope)
    Loop("", first, *carried)     first = cond(*carried) written before the loop; the body
                                  graph (iteration, cond_in, *carried) -> (cond(new), *new)
                                  runs the IR body and then the IR cond on its result

Parameters are initializers named after the parameters; inputs are named after the Python
signature, outputs `output` / `output_0`, ... (as every other exporter names them). A dim
the graph knows only at run time (None) is symbolic, a name no other dim has (ONNX reads one
name as one size): `batch` for dim 0 where only one input leaves it open, else `NAME_0`;
`NAME_i` for dim i.

`graph_to_model` writes any IR graph; the onnxruntime backend compiles through it with
the parameters as inputs and the updates as extra outputs.
"""

from __future__ import annotations

import itertools
import os

import numpy as np
import onnx
from onnx import helper, numpy_helper

from unigraph.export.prepare import ExportError, find_node, identifier, prepare
from unigraph.ir import Graph
from unigraph.onnx.emitters import EMITTERS

MIN_OPSET = 13  # Squeeze/Unsqueeze/ReduceSum with axes as inputs, Softmax over one axis
DEFAULT_OPSET = 18


class GraphWriter:
    """Collects the ONNX nodes of one graph (the model's, or a subgraph's). Names are drawn
    from one counter per model, so they are unique across all its subgraphs, as ONNX
    requires; they start with `_`, which no input or output name does (`identifier`)."""

    def __init__(self, opset: int, names=None):
        self.opset = opset
        self.nodes: list = []
        self._names = names if names is not None else itertools.count()

    def fresh(self, prefix: str = "t") -> str:
        return f"_{prefix}{next(self._names)}"

    def child(self) -> GraphWriter:
        """A writer for a subgraph of this one (same counter, same opset)."""
        return GraphWriter(self.opset, self._names)

    def node(self, op_type: str, inputs: list, count: int = 1, outputs: list | None = None,
             name: str | None = None, **attrs):
        """Add one node, its name fresh from `name` (default: `op_type`), which ONNX
        Runtime's error names when the node fails; return its output name (a list of
        `count` names when count != 1)."""
        outputs = outputs or [self.fresh() for _ in range(count)]
        self.nodes.append(helper.make_node(op_type, list(inputs), outputs,
                                           name=self.fresh(name or op_type), **attrs))
        return outputs[0] if count == 1 else outputs

    def const(self, array) -> str:
        """A Constant node holding `array` (inside a subgraph, constants stay local)."""
        array = np.asarray(array)
        return self.node("Constant", [], value=numpy_helper.from_array(array, self.fresh("c")))

    @staticmethod
    def onnx_dtype(dtype: str) -> int:
        return helper.np_dtype_to_tensor_dtype(np.dtype(dtype))


def value_info(name: str, value, dims: list | None = None):
    """The ONNX type of IR `value` under `name`; `dims` overrides its shape (None: ?)."""
    shape = list(value.shape) if dims is None else dims
    return helper.make_tensor_value_info(name, GraphWriter.onnx_dtype(value.dtype), shape)


# -- the walk --------------------------------------------------------------------------------
def write_nodes(w: GraphWriter, graph: Graph, env: dict) -> list:
    """Write `graph`'s nodes into `w`; `env` maps value id -> ONNX name and must hold the
    graph's inputs and params. Returns the names of the graph's outputs."""
    for node in graph.nodes:
        args = [env[v.id] for v in node.inputs]
        if node.op in CONTROL_FLOW:
            outs = CONTROL_FLOW[node.op](w, node, args)
        else:
            emitter = EMITTERS.get(node.op)
            if emitter is None:
                raise ExportError(
                    f"op {node.op!r}{_at(node)} has no ONNX equivalent in unigraph's exporter "
                    f"(it writes: {', '.join(sorted(EMITTERS))}); express it with those ops "
                    "or add an emitter to unigraph.onnx.emitters.EMITTERS")
            outs = [emitter(w, args, node)]
        for value, name in zip(node.outputs, outs, strict=True):
            env[value.id] = name
    return [env[v.id] for v in graph.outputs]


def _at(node) -> str:
    return f" at {node.source}" if node.source else ""


def _inline(w: GraphWriter, graph: Graph, operands: list) -> list:
    """Write a closed subgraph's nodes with its inputs standing for `operands`."""
    return write_nodes(w, graph, {v.id: name for v, name in zip(graph.inputs, operands)})


def _scalar(w: GraphWriter, name: str, value) -> str:
    """A one-element bool as the scalar If/Loop conditions are."""
    if tuple(value.shape) == ():
        return name
    return w.node("Reshape", [name, w.const(np.zeros(0, np.int64))])


def _cond(w: GraphWriter, node, args: list) -> list:
    branches = {}
    for key in ("then", "else"):
        sub = node.subgraphs[key]
        branch = w.child()
        outs = _inline(branch, sub, args[1:])
        # Fresh names: a branch may return an operand (an outer name) as it is.
        names = [branch.node("Identity", [name]) for name in outs]
        infos = [value_info(name, value) for name, value in zip(names, sub.outputs)]
        branches[f"{key}_branch"] = helper.make_graph(branch.nodes, w.fresh(key), [], infos)
    return _as_list(w.node("If", [_scalar(w, args[0], node.inputs[0])],
                           count=len(node.outputs), **branches))


def _while_loop(w: GraphWriter, node, args: list) -> list:
    count = node.attrs["num_carried"]
    carried, captured = args[:count], args[count:]
    cond, body = node.subgraphs["cond"], node.subgraphs["body"]
    first = _scalar(w, _inline(w, cond, args)[0], cond.outputs[0])
    inner = w.child()
    iteration, cond_in = inner.fresh("iteration"), inner.fresh("cond_in")
    state = [inner.fresh("state") for _ in carried]
    new = _inline(inner, body, state + captured)
    keep = _scalar(inner, _inline(inner, cond, new + captured)[0], cond.outputs[0])
    outputs = [inner.node("Identity", [name]) for name in [keep, *new]]
    inputs = [helper.make_tensor_value_info(iteration, onnx.TensorProto.INT64, []),
              helper.make_tensor_value_info(cond_in, onnx.TensorProto.BOOL, []),
              *[value_info(name, value) for name, value in zip(state, body.inputs)]]
    infos = [helper.make_tensor_value_info(outputs[0], onnx.TensorProto.BOOL, []),
             *[value_info(name, value) for name, value in zip(outputs[1:], body.outputs)]]
    graph = helper.make_graph(inner.nodes, w.fresh("body"), inputs, infos)
    return _as_list(w.node("Loop", ["", first, *carried], count=count, body=graph))


def _grad(w: GraphWriter, node, args: list) -> list:
    raise ExportError(
        f"a gradient (ug.grad / ug.value_and_grad{_at(node)}) cannot be exported: training "
        "graphs are not written to ONNX. Export the function the gradient is taken of")


CONTROL_FLOW = {"cond": _cond, "while_loop": _while_loop, "grad": _grad}


def _as_list(names) -> list:
    return names if isinstance(names, list) else [names]


# -- the model -------------------------------------------------------------------------------
def check_opset(opset) -> int:
    """The opset to write: `opset`, or DEFAULT_OPSET; refused below MIN_OPSET."""
    opset = DEFAULT_OPSET if opset is None else opset
    newest = onnx.defs.onnx_opset_version()
    if not isinstance(opset, int) or not MIN_OPSET <= opset <= newest:
        raise ExportError(f"opset {opset!r} is not supported: pass an int from {MIN_OPSET} to "
                          f"{newest} (the installed onnx package's newest), or None for "
                          f"{DEFAULT_OPSET}")
    return opset


def _ir_version(opset: int) -> int:
    """The oldest IR version that carries `opset`: what older runtimes still read."""
    for _release, ir_version, ai_onnx, *_ in helper.VERSION_TABLE:
        if ai_onnx >= opset:
            return ir_version
    return onnx.IR_VERSION


def _symbolic_dims(values: list, names: list) -> list:
    """Each input's dims, an open one a dim_param no other dim has: ONNX reads one name as
    one size (ONNX Runtime then reuses a buffer of one input's rows for another's). Dim 0
    is `batch` where only one input leaves it open, else `NAME_0`; dim i is `NAME_i`."""
    open_rows = sum(1 for v in values if v.shape and v.shape[0] is None)
    return [[d if d is not None else ("batch" if i == 0 and open_rows == 1 else f"{name}_{i}")
             for i, d in enumerate(v.shape)] for v, name in zip(values, names)]


def _unique_names(names: list, taken: set) -> list:
    out = []
    for name in names:
        candidate, suffix = name, 1
        while candidate in taken:
            candidate, suffix = f"{name}_{suffix}", suffix + 1
        taken.add(candidate)
        out.append(candidate)
    return out


def graph_to_model(graph: Graph, params: list | None, input_names: list, output_names: list,
                   opset: int | None = None, updates_as_outputs: bool = False,
                   every_value: bool = False) -> onnx.ModelProto:
    """The ONNX model of IR `graph`.

    params: one array per `graph.params`, written as initializers; None: the parameters
        become extra graph inputs after the inputs (named as `parameter_names` gives);
    updates_as_outputs: the graph's updates become extra outputs, after the outputs, one
        per update (else a graph with updates is refused, as a training step);
    every_value: every value of the top-level graph is an extra output too (named
        `_value<id>`), for localizing a disagreement.

    >>> model = graph_to_model(graph, [w], ["x"], ["output"])
    """
    opset = check_opset(opset)
    if graph.updates and not updates_as_outputs:
        updated = ", ".join(repr(p.name or f"%{p.id}") for p, _ in graph.updates)
        raise ExportError(f"cannot export {graph.name}: it updates parameters ({updated}), so "
                          "it is a training step; export the forward pass alone (for a "
                          "Module: call model.eval() first)")
    w = GraphWriter(opset)
    taken: set = set()
    input_names = _unique_names(list(input_names), taken)
    param_names = _unique_names([p.name or "param" for p in graph.params], taken)
    env = {v.id: name for v, name in zip(graph.inputs, input_names)}
    env.update((p.id, name) for p, name in zip(graph.params, param_names))
    inputs = [value_info(name, v, dims) for v, name, dims in
              zip(graph.inputs, input_names, _symbolic_dims(graph.inputs, input_names))]
    initializers = []
    if params is None:
        inputs += [value_info(name, p) for p, name in zip(graph.params, param_names)]
    else:
        initializers = [numpy_helper.from_array(np.asarray(array, dtype=p.dtype), name)
                        for p, array, name in zip(graph.params, params, param_names)]
    results = write_nodes(w, graph, env)
    values = list(graph.outputs)
    if updates_as_outputs:
        results += [env[new.id] for _, new in graph.updates]
        values += [new for _, new in graph.updates]
        output_names = list(output_names) + [f"_update{i}" for i in range(len(graph.updates))]
    if every_value:
        top = [*graph.inputs, *graph.params, *(v for n in graph.nodes for v in n.outputs)]
        results += [env[v.id] for v in top]
        values += top
        output_names = list(output_names) + [f"_value{v.id}" for v in top]
    output_names = _unique_names(list(output_names), taken)
    # Every output its own Identity: an output may be an input, a parameter, or repeated.
    for result, name in zip(results, output_names, strict=True):
        w.node("Identity", [result], outputs=[name])
    outputs = [value_info(name, v) for v, name in zip(values, output_names)]
    onnx_graph = helper.make_graph(w.nodes, identifier(graph.name), inputs, outputs,
                                   initializer=initializers)
    model = helper.make_model(onnx_graph, producer_name="unigraph",
                              opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = _ir_version(opset)
    return model


def parameter_names(graph: Graph, input_names: list) -> list:
    """The names `graph_to_model(params=None)` gives the parameter inputs."""
    taken: set = set()
    _unique_names(list(input_names), taken)
    return _unique_names([p.name or "param" for p in graph.params], taken)


# -- the public function ---------------------------------------------------------------------
def to_model(fn_or_module, *example_inputs, opset: int | None = None, input_spec=None,
             dynamic_batch: bool = False) -> onnx.ModelProto:
    """The checked ONNX model of `fn_or_module` traced on `example_inputs` (see `export`).

    >>> model = ug.onnx.to_model(net.eval(), x)
    >>> [i.name for i in model.graph.input]
    ['x']
    """
    opset = check_opset(opset)
    prepared = prepare(fn_or_module, tuple(example_inputs), input_spec=input_spec,
                       dynamic_batch=dynamic_batch)
    grad = find_node(prepared.graph, "grad")  # prepare refuses it; kept for hand-made graphs
    if grad is not None:
        _grad(None, grad, [])
    model = graph_to_model(prepared.graph, prepared.params, prepared.input_names,
                           prepared.output_names, opset)
    model.graph.name = identifier(prepared.name)
    onnx.checker.check_model(model, full_check=True)
    return model


def export(fn_or_module, *example_inputs, path, opset: int | None = None, input_spec=None,
           dynamic_batch: bool = False) -> str:
    """Trace `fn_or_module` (a `@ug.function`, a plain function or a `ug.nn.Module`) on
    `example_inputs` and write it as an ONNX model at `path`; returns `path`.

    Every op becomes ONNX ops, `ug.cond` an `If`, `ug.while_loop` a `Loop`, parameters
    initializers; inputs are named after the Python signature. The model passes
    `onnx.checker.check_model(model, full_check=True)`. `opset`: the ai.onnx opset to
    write (13 to the installed onnx's newest; default 18). Training graphs (parameter
    updates, `ug.grad`) and random draws are refused (`ExportError`), naming the line.
    A dim that `input_spec` (a `ug.Spec` or None per positional argument) or
    `dynamic_batch=True` (dim 0 of every array input) leaves unknown is symbolic, each its
    own name: `batch` for dim 0 where one input alone leaves it open (several inputs:
    `<input>_0` each, sizes that may differ), `<input>_<axis>` for the others.

    >>> ug.onnx.export(counter, 0, 10, path="counter.onnx")
    'counter.onnx'
    >>> import onnxruntime
    >>> onnxruntime.InferenceSession("counter.onnx").run(None, {"a": np.int64(0),
    ...                                                         "b": np.int64(10)})
    [array(20), array(20)]
    """
    model = to_model(fn_or_module, *example_inputs, opset=opset, input_spec=input_spec,
                     dynamic_batch=dynamic_batch)
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    onnx.save_model(model, path)
    return path
