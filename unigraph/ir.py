"""The intermediate representation: a small SSA graph.

A `Graph` has inputs, parameters, nodes in topological order, outputs, and updates
(parameter -> new value, applied after a run: that is how a training step changes weights).
A `Node` applies one op to input `Value`s and produces output `Value`s. The control-flow
nodes `cond`, `while_loop` and `grad` own *closed* subgraphs: a subgraph never refers to a
value of the graph around it; whatever it needs is passed in as an explicit input.

    cond(pred, *operands)            subgraphs then(*operands), else(*operands)
    while_loop(*carried, *captured)  subgraphs cond(*carried, *captured) -> bool scalar,
                                     body(*carried, *captured) -> new carried;
                                     attrs num_carried
    grad(*operands)                  subgraph fn(*operands) -> outputs; attrs wrt (operand
                                     indices), output (index of the scalar to differentiate);
                                     node outputs are fn's outputs, then one gradient per wrt
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field

import numpy as np

from unigraph.errors import GraphError

DTYPES = ("float16", "float32", "float64", "int8", "uint8", "int16", "int32", "int64", "bool")
FLOAT_DTYPES = ("float16", "float32", "float64")
CONTROL_FLOW_OPS = ("cond", "while_loop", "grad")
_DTYPE_NAMES = frozenset(DTYPES)

_ids = itertools.count()


def check_dtype(dtype) -> str:
    """Return `dtype` as one of `DTYPES`, or raise naming the ones we support."""
    name = np.dtype(dtype).name if not isinstance(dtype, str) else dtype
    if name not in DTYPES:
        raise TypeError(f"dtype {dtype!r} is not supported; use one of {', '.join(DTYPES)}")
    return name


@dataclass(eq=False)
class Value:
    """One SSA value: a tensor of `shape` (ints, or None for a dim known only at run time)."""

    shape: tuple
    dtype: str
    name: str = ""
    id: int = field(default_factory=lambda: next(_ids))

    def __init__(self, shape, dtype, name: str = "", id: int | None = None):  # noqa: A002
        # Written out (a dataclass keeps a class's own __init__): every traced op makes one,
        # and the common case, a tuple and a dtype name, needs two type tests, not the
        # generated __init__, __post_init__ and the id factory's lambda.
        self.shape = shape if type(shape) is tuple else tuple(shape)
        self.dtype = dtype if type(dtype) is str and dtype in _DTYPE_NAMES else \
            check_dtype(dtype)
        self.name = name
        self.id = next(_ids) if id is None else id

    def __repr__(self):
        return f"%{self.id}: {type_string(self)}"


def type_string(value: Value) -> str:
    dims = ", ".join("?" if d is None else str(d) for d in value.shape)
    return f"{value.dtype}[{dims}]"


@dataclass(eq=False)
class Node:
    """An op applied to `inputs`, producing `outputs`. `source` is the user's file:line."""

    op: str
    inputs: list
    outputs: list
    attrs: dict = field(default_factory=dict)
    subgraphs: dict = field(default_factory=dict)
    source: str = ""


@dataclass(eq=False)
class Graph:
    """A function as data. `params` are named values bound to parameters outside the graph."""

    name: str = "graph"
    inputs: list = field(default_factory=list)
    params: list = field(default_factory=list)
    nodes: list = field(default_factory=list)
    outputs: list = field(default_factory=list)
    updates: list = field(default_factory=list)  # (param value, new value) pairs

    def walk(self):
        """Every node of this graph and its subgraphs, in order (a node before the nodes of
        its subgraphs)."""
        for node in self.nodes:
            yield node
            for sub in node.subgraphs.values():
                yield from sub.walk()

    def nodes_of(self, op: str) -> list:
        """Every node of `op` in this graph and its subgraphs, in order."""
        return [node for node in self.walk() if node.op == op]

    def verify(self) -> Graph:
        """Check that every value is defined once, before use, with known dtypes; raise
        `GraphError` naming the first problem. Returns the graph, so it can be chained."""
        _verify(self, self.name)
        return self

    def __str__(self):
        return "\n".join(_listing(self, "graph " + self.name, 0))

    def to_json(self) -> str:
        """Serialise to a JSON string; `Graph.from_json` gives back an identical graph."""
        return json.dumps(_graph_to_dict(self), sort_keys=True)

    @staticmethod
    def from_json(text: str) -> Graph:
        return _graph_from_dict(json.loads(text), {})


def _verify(graph: Graph, where: str) -> None:
    defined: set[int] = set()

    def define(value: Value, what: str) -> None:
        if not isinstance(value, Value):
            raise GraphError(f"{where}: {what} is {value!r}, not a Value")
        if value.id in defined:
            raise GraphError(f"{where}: value %{value.id} is defined twice ({what})")
        defined.add(value.id)

    # (Each check's common case inline, `define` only where it may fail: a 100-layer model
    # has 200 params and 300 nodes.)
    for value in graph.inputs:
        define(value, "graph input")
    for value in graph.params:
        if type(value) is Value and value.id not in defined:
            defined.add(value.id)
        else:
            define(value, "parameter")
    for index, node in enumerate(graph.nodes):
        for value in node.inputs:
            if not isinstance(value, Value) or value.id not in defined:
                name = getattr(value, "id", value)
                raise GraphError(f"{_label(where, index, node)} uses %{name} before it is "
                                 "defined")
        if node.subgraphs:
            for name, sub in node.subgraphs.items():
                _verify(sub, f"{_label(where, index, node)}/{name}")
        for value in node.outputs:
            if type(value) is Value and value.id not in defined:  # (the label only if wrong)
                defined.add(value.id)
            else:
                define(value, f"output of {_label(where, index, node)}")
    for value in graph.outputs:
        if value.id not in defined:
            raise GraphError(f"{where}: graph output %{value.id} is never defined")
    param_ids = {p.id for p in graph.params}
    for param, new in graph.updates:
        if param.id not in param_ids:
            raise GraphError(f"{where}: update of %{param.id}, which is not a parameter")
        if new.id not in defined:
            raise GraphError(f"{where}: update value %{new.id} is never defined")
        if (param.shape, param.dtype) != (new.shape, new.dtype):
            raise GraphError(
                f"{where}: update of parameter {param.name!r} changes its type from "
                f"{type_string(param)} to {type_string(new)}"
            )


def _label(where: str, index: int, node: Node) -> str:
    return f"{where}: node {index} ({node.op}{' at ' + node.source if node.source else ''})"


def format_attr(value) -> str:
    """An attribute as text for listings: small arrays in full, large ones as their type."""
    if isinstance(value, np.ndarray):
        if value.size <= 8:
            return np.array2string(value, separator=", ")
        return f"array({type_string(Value(value.shape, value.dtype.name, id=-1))})"
    return repr(value)


def _listing(graph: Graph, title: str, depth: int) -> list[str]:
    pad = "  " * depth
    params = ", ".join(f"%{p.id} {p.name}: {type_string(p)}" for p in graph.params)
    inputs = ", ".join(f"%{v.id}: {type_string(v)}" for v in graph.inputs)
    lines = [f"{pad}{title}({inputs})" + (f" params({params})" if params else "") + ":"]
    for node in graph.nodes:
        outs = ", ".join(f"%{v.id}: {type_string(v)}" for v in node.outputs)
        attrs = ", ".join(f"{k}={format_attr(v)}" for k, v in sorted(node.attrs.items()))
        args = ", ".join(f"%{v.id}" for v in node.inputs)
        line = f"{pad}  {outs} = {node.op}" + (f"[{attrs}]" if attrs else "") + f"({args})"
        lines.append(line + (f"  # {node.source}" if node.source else ""))
        for name, sub in node.subgraphs.items():
            lines.extend(_listing(sub, name, depth + 2))
    for param, new in graph.updates:
        lines.append(f"{pad}  update {param.name} <- %{new.id}")
    lines.append(f"{pad}  return " + ", ".join(f"%{v.id}" for v in graph.outputs))
    return lines


def _attr_to_json(value):
    if isinstance(value, np.ndarray):
        return {"array": value.tolist(), "dtype": value.dtype.name, "shape": list(value.shape)}
    if isinstance(value, tuple):
        return {"tuple": [_attr_to_json(v) for v in value]}
    if isinstance(value, np.generic):
        return value.item()
    return value


def _attr_from_json(value):
    if isinstance(value, dict) and "array" in value:
        return np.array(value["array"], dtype=value["dtype"]).reshape(value["shape"])
    if isinstance(value, dict) and "tuple" in value:
        return tuple(_attr_from_json(v) for v in value["tuple"])
    return value


def _value_to_dict(value: Value) -> dict:
    return {"id": value.id, "shape": list(value.shape), "dtype": value.dtype, "name": value.name}


def _graph_to_dict(graph: Graph) -> dict:
    return {
        "name": graph.name,
        "inputs": [_value_to_dict(v) for v in graph.inputs],
        "params": [_value_to_dict(v) for v in graph.params],
        "nodes": [
            {
                "op": node.op,
                "inputs": [v.id for v in node.inputs],
                "outputs": [_value_to_dict(v) for v in node.outputs],
                "attrs": {k: _attr_to_json(v) for k, v in node.attrs.items()},
                "subgraphs": [[k, _graph_to_dict(g)] for k, g in node.subgraphs.items()],
                "source": node.source,
            }
            for node in graph.nodes
        ],
        "outputs": [v.id for v in graph.outputs],
        "updates": [[p.id, v.id] for p, v in graph.updates],
    }


def _graph_from_dict(data: dict, values: dict) -> Graph:
    def make(d: dict) -> Value:
        value = Value(tuple(d["shape"]), d["dtype"], d["name"], id=d["id"])
        values[value.id] = value
        return value

    inputs = [make(d) for d in data["inputs"]]
    graph = Graph(data["name"], inputs, [make(d) for d in data["params"]])
    for nd in data["nodes"]:
        inputs = [values[i] for i in nd["inputs"]]
        subgraphs = {k: _graph_from_dict(g, values) for k, g in nd["subgraphs"]}
        outputs = [make(d) for d in nd["outputs"]]
        attrs = {k: _attr_from_json(v) for k, v in nd["attrs"].items()}
        graph.nodes.append(Node(nd["op"], inputs, outputs, attrs, subgraphs, nd["source"]))
    graph.outputs = [values[i] for i in data["outputs"]]
    graph.updates = [(values[p], values[v]) for p, v in data["updates"]]
    return graph
