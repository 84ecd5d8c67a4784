"""`unigraph.onnx.load`: an ONNX model as a unigraph model that runs on every target.

The model's graph is checked once for ops unigraph cannot write (all of them named in one
error), then each call walks it, node by node, through the flat table
`unigraph.onnx.importers.IMPORTERS`, inside a `ug.function`: eager targets run the ops one
by one, static targets trace the walk once per input signature into one graph. `If` becomes
`ug.cond`, `Loop` becomes `ug.while_loop`.

Float initializers become `ug.Parameter`s of the returned `OnnxModel` (a `ug.nn.Module`),
named as in the file, so the model can be fine-tuned, saved and checked like any other.
Integer initializers, Constant nodes and the shapes of inputs are known at import: nodes
whose inputs are all known are folded then, by ONNX's own reference evaluator
(`onnx.reference`), so shape arithmetic (Shape -> Gather -> Concat -> Reshape) becomes the
static shapes unigraph's ops take.
"""

from __future__ import annotations

import os
import weakref

import numpy as np
import onnx
from onnx import helper, numpy_helper

import unigraph as ug
from unigraph.errors import UnigraphError
from unigraph.onnx.importers import IMPORTERS
from unigraph.tracing import current_builder, user_source

CONTROL_FLOW = ("If", "Loop")
# OnnxModel -> {(input dtypes, symbolic): Function}
_FUNCTIONS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_FIXED: weakref.WeakSet = weakref.WeakSet()  # models whose symbolic dims a node needs


class OnnxImportError(UnigraphError):
    """An ONNX model, or one of its nodes, that unigraph cannot import."""


def _attrs(node) -> dict:
    out = {}
    for attr in node.attribute:
        value = helper.get_attribute_value(attr)
        if isinstance(value, bytes):
            value = value.decode()
        elif isinstance(value, list) and value and isinstance(value[0], bytes):
            value = [v.decode() for v in value]
        out[attr.name] = value
    return out


def _nodes(graph):
    """Every node of `graph`, those of its subgraphs included."""
    for node in graph.node:
        yield node
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                yield from _nodes(attr.g)
            for sub in attr.graphs:
                yield from _nodes(sub)


def unsupported_nodes(model: onnx.ModelProto) -> list:
    """(op type, node name) of every node unigraph has no importer for."""
    return [(node.op_type, node.name or "(unnamed)") for node in _nodes(model.graph)
            if node.domain not in ("", "ai.onnx") or node.op_type not in IMPORTERS]


class ImportContext:
    """What an importer may ask for while one node is written (see `importers`)."""

    def __init__(self, opset: int, env: dict, origin: str = "the ONNX model"):
        self.opset = opset
        self.env = env
        self.origin = origin  # the file (or graph) name a node's `source` names
        self.node = None

    def refuse(self, what: str):
        name = self.node.name or "(unnamed)" if self.node is not None else "(model)"
        raise OnnxImportError(f"ONNX node {name!r} ({self.node.op_type if self.node else ''}): "
                              f"{what} is not supported by unigraph's importer "
                              f"(unigraph.onnx.importers); rewrite that part of the model")

    def static(self, value, what: str) -> np.ndarray:
        """`value` as an array known at import, or a clear refusal."""
        if isinstance(value, np.ndarray):
            return value
        self.refuse(f"{what} computed at run time (it must be a constant or fold to one)")

    def run_graph(self, graph, bindings: dict) -> list:
        """Write `graph`'s nodes with `bindings` (name -> value) over the enclosing scope."""
        inner = ImportContext(self.opset, {**self.env, **bindings}, self.origin)
        return inner.walk(graph)

    def walk(self, graph) -> list:
        for node in graph.node:
            self.node = node
            args = [self.env[name] if name else None for name in node.input]
            known = all(a is None or isinstance(a, np.ndarray) for a in args)
            if known and node.op_type not in CONTROL_FLOW and args:
                outs = _fold(node, args, self.opset)
            else:
                outs = self._write(node, args)
            outs = outs if isinstance(outs, list) else [outs]
            for name, value in zip(node.output, outs):
                if name:
                    self.env[name] = value
        self.node = None
        return [self.env[out.name] for out in graph.output]

    def _write(self, node, args: list):
        """The node's importer; the graph nodes it records (when tracing) get as `source`
        the ONNX node they come from, so a check's report names it (`model.onnx: node
        'conv_12' (Conv)`) rather than the line that called the model."""
        builder = current_builder()
        first = len(builder.graph.nodes) if builder is not None else 0
        where = f"{self.origin}: node {node.name or '(unnamed)'!r} ({node.op_type})"
        try:
            outs = IMPORTERS[node.op_type](self, args, _attrs(node))
        except UnigraphError as error:
            # An op refusing what this node gives it (a shape the file declares wrongly):
            # say which node of the file, once (an If/Loop around it re-raises it).
            if error.args and isinstance(error.args[0], str) and "ONNX node" not in \
                    error.args[0] and ": node '" not in error.args[0]:
                error.args = (f"{error.args[0]} [in {where}]", *error.args[1:])
            raise
        if builder is not None:
            for recorded in builder.graph.nodes[first:]:
                recorded.source = where
        return outs


def _fold(node, args: list, opset: int) -> list:
    """A node whose inputs are all known, run once at import by onnx's reference evaluator."""
    from onnx.reference import ReferenceEvaluator

    names = [f"in{i}" if a is not None else "" for i, a in enumerate(args)]
    infos = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
             for n, a in zip(names, args) if n]
    outs = [f"out{i}" for i in range(len(node.output))]
    one = helper.make_node(node.op_type, names, outs, **_attrs(node))
    graph = helper.make_graph([one], "fold", infos, [onnx.ValueInfoProto(name=n) for n in outs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    feeds = {n: a for n, a in zip(names, args) if n}
    return [np.asarray(v) for v in ReferenceEvaluator(model).run(None, feeds)]


def _declared_shape(value_info):
    """The shape an ONNX graph input declares, None for a symbolic or missing dim (None
    itself when the rank is unknown)."""
    tensor = value_info.type.tensor_type
    if not tensor.HasField("shape"):
        return None
    return tuple(d.dim_value if d.HasField("dim_value") else None for d in tensor.shape.dim)


def _shape_of(value) -> tuple:
    return tuple(value.shape) if hasattr(value, "shape") else np.shape(value)


def _attribute_name(name: str, taken) -> str:
    """A Parameter name for initializer `name`: as in the file, unless it hides a Module
    attribute (`forward`, `training`, ...)."""
    return name if name not in taken else f"initializer_{name}"


class OnnxModel(ug.nn.Module):
    """An imported ONNX model (see `unigraph.onnx.load`). Call it with the graph's inputs,
    in order; it returns one output, or a tuple of them."""

    def __init__(self, model: onnx.ModelProto, origin: str = ""):
        super().__init__()
        object.__setattr__(self, "proto", model)
        # How a report names this model: the file's name, else the graph's.
        self.origin = origin or (f"ONNX graph {model.graph.name!r}" if model.graph.name
                                 else "the ONNX model")
        graph = model.graph
        self.opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")),
                          onnx.defs.onnx_opset_version())
        constants, self.parameter_names = {}, {}
        taken = set(dir(self))
        for tensor in graph.initializer:
            array = numpy_helper.to_array(tensor)
            if array.dtype.kind == "f":
                attribute = _attribute_name(tensor.name, taken)
                self.add_parameter(attribute, array)
                self.parameter_names[tensor.name] = attribute
            else:
                constants[tensor.name] = array
        object.__setattr__(self, "constants", constants)
        initialized = {t.name for t in graph.initializer}
        self.input_names = [i.name for i in graph.input if i.name not in initialized]
        # A dim_param (a symbolic dim such as "batch") or a missing dim is None: the model
        # takes any size there, and a static target traces it once for all of them where
        # every node allows (see `forward`).
        self.input_shapes = [_declared_shape(i) for i in graph.input if i.name not in initialized]
        self.output_names = [o.name for o in graph.output]

    def _traced(self, inputs, symbolic: bool):
        """This model's `ug.function` for these inputs' dtypes: with `symbolic`, one whose
        `input_spec` has None for the symbolic dims the file declares (kept outside the
        Module, so `copy()` makes a twin with its own traces rather than a deep copy)."""
        functions = _FUNCTIONS.setdefault(self, {})
        dtypes = tuple(str(x.dtype) if hasattr(x, "dtype") else np.asarray(x).dtype.name
                       for x in inputs)
        key = (dtypes, symbolic)
        if key not in functions:
            name = "".join(c if c.isalnum() else "_" for c in self.proto.graph.name)
            spec = None
            if symbolic:
                spec = [ug.Spec(shape, dtype) for shape, dtype in zip(self.input_shapes, dtypes)]
            functions[key] = ug.function(self._run, name=name or "onnx_model", input_spec=spec)
        return functions[key]

    def _symbolic(self, inputs) -> bool:
        """Whether the file declares a symbolic dim on an input that fits it."""
        return any(shape is not None and None in shape for shape in self.input_shapes) and all(
            shape is not None and len(shape) == len(_shape_of(x)) and all(
                d is None or d == n for d, n in zip(shape, _shape_of(x)))
            for shape, x in zip(self.input_shapes, inputs))

    def forward(self, *inputs):
        if len(inputs) != len(self.input_names):
            raise OnnxImportError(
                f"the ONNX model takes {len(self.input_names)} inputs "
                f"({', '.join(self.input_names)}); got {len(inputs)} at {user_source()}")
        if self._symbolic(inputs) and self not in _FIXED:
            try:
                return self._traced(inputs, symbolic=True)(*inputs)
            except (UnigraphError, ValueError, TypeError):
                # A node needs the symbolic dim's size (Shape of it, a pad of a dim known
                # only at run time): trace per size instead, from now on.
                _FIXED.add(self)
        return self._traced(inputs, symbolic=False)(*inputs)

    def _run(self, *inputs):
        env = dict(self.constants)
        env.update((name, getattr(self, attribute))
                   for name, attribute in self.parameter_names.items())
        env.update(zip(self.input_names, (ug.tensor(x) if not isinstance(x, ug.Tensor) else x
                                          for x in inputs)))
        outs = ImportContext(self.opset, env, self.origin).walk(self.proto.graph)
        outs = [ug.constant(o) if isinstance(o, np.ndarray) else o for o in outs]
        return outs[0] if len(outs) == 1 else tuple(outs)


def load(path_or_model) -> OnnxModel:
    """An ONNX model (a path, bytes, or an `onnx.ModelProto`) as a unigraph model that runs
    on every target, eager and static, and in `ug.check`. Float initializers become
    Parameters (named as in the file); an op unigraph cannot write raises one
    `OnnxImportError` listing every such op type and node name.

    >>> model = ug.onnx.load("mlp.onnx")
    >>> with ug.use_backend("paddle", "static"):
    ...     y = model(x)
    >>> [name for name, _ in model.named_parameters()]
    ['fc1.weight', 'fc1.bias', 'fc2.weight', 'fc2.bias']
    """
    origin = ""
    if isinstance(path_or_model, onnx.ModelProto):
        model = path_or_model
    elif isinstance(path_or_model, bytes):
        model = onnx.load_from_string(path_or_model)
    else:
        model = onnx.load(os.fspath(path_or_model))
        origin = os.path.basename(os.fspath(path_or_model))
    missing = unsupported_nodes(model)
    if missing:
        listed = ", ".join(f"{op} ({name})" for op, name in missing)
        types = sorted({op for op, _ in missing})
        raise OnnxImportError(
            f"the ONNX model uses {len(missing)} node(s) of op type(s) unigraph cannot import "
            f"({', '.join(types)}): {listed}. Supported op types: "
            f"{', '.join(sorted(IMPORTERS))}")
    return OnnxModel(model, origin)
