"""Writing a traced graph as a `torch.export` program (`.pt2`).

`GraphModule` is an `nn.Module` whose `forward` lowers the IR with the torch lowering table
(the one `torch:eager` and `torch:static` use); the weights are its buffers. `torch.export`
traces that forward into an `ExportedProgram`, saved with `torch.export.save`, which torch
alone reloads:

    program = torch.export.load("model.pt2")
    outputs = program.module()(torch.from_numpy(x))      # a tuple, one tensor per output

Control flow stays torch's own: `cond` becomes `torch.cond`, `while_loop` becomes
`torch._higher_order_ops.while_loop` (both preserved as higher-order ops in the program;
captured values travel as extra loop-carried values the body hands back unchanged). A
predicate or loop condition of shape [1] is reshaped to a scalar, which torch.cond needs.
"""

from __future__ import annotations

import keyword
import os

import torch
from torch._higher_order_ops import while_loop as torch_while_loop

from unigraph.backend import lower_nodes
from unigraph.export.prepare import ExportError
from unigraph.export.torch_dims import dynamic_shapes
from unigraph.ir import Graph
from unigraph_torch.lowerings import LOWERINGS


class GraphModule(torch.nn.Module):
    """The IR graph as an nn.Module: weights as buffers, forward lowers the graph."""

    def __init__(self, prepared):
        super().__init__()
        self._graph = prepared.graph
        self._names = []
        for index, array in enumerate(prepared.params):
            name = f"param_{index}"
            # A copy: the exported program must not alias the caller's arrays.
            self.register_buffer(name, torch.from_numpy(array.copy()))
            self._names.append(name)
        self._control_flow = {"cond": self._cond, "while_loop": self._while_loop}

    def run(self, *inputs):
        graph = self._graph
        env = {value.id: x for value, x in zip(graph.inputs, inputs)}
        env.update((p.id, getattr(self, name)) for p, name in zip(graph.params, self._names))
        # Outputs are copies, so that none aliases an input or a buffer (torch.export
        # refuses a program whose output is one of its inputs).
        return tuple(out.clone() for out in self._lower(graph, env))

    def _lower(self, graph: Graph, env: dict) -> list:
        return lower_nodes(graph, env, LOWERINGS, self._control_flow)

    def _subgraph(self, graph: Graph, args) -> list:
        return self._lower(graph, {v.id: a for v, a in zip(graph.inputs, args)})

    def _cond(self, node, args) -> list:
        pred, operands = args[0].reshape(()), tuple(args[1:])

        def branch(name):
            sub = node.subgraphs[name]
            # Fresh tensors: a branch may not return one of its operands as it is.
            return lambda *ops: tuple(o.clone() for o in self._subgraph(sub, ops))

        return list(torch.cond(pred, branch("then"), branch("else"), operands))

    def _while_loop(self, node, args) -> list:
        count = node.attrs["num_carried"]
        cond_graph, body_graph = node.subgraphs["cond"], node.subgraphs["body"]

        def keep_going(*values):
            return self._subgraph(cond_graph, values)[0].reshape(())

        def body(*values):
            new = self._subgraph(body_graph, values)
            # Captured values ride along unchanged (cloned: outputs may not alias inputs).
            return tuple(v.clone() for v in [*new, *values[count:]])

        outs = torch_while_loop(keep_going, body, tuple(args))
        return list(outs[:count])


def named_module(prepared) -> GraphModule:
    """A GraphModule whose `forward` takes the Python argument names (`forward(self, x, y)`),
    so that the exported program's inputs carry them too."""
    names = [n + "_" if keyword.iskeyword(n) or n == "self" else n
             for n in prepared.input_names]
    arguments = ", ".join(names)
    scope: dict = {}
    exec(f"def forward(self, {arguments}):\n    return self.run({arguments})\n", scope)
    named = type("ExportedGraph", (GraphModule,), {"forward": scope["forward"]})
    return named(prepared)


def save_torch(prepared, path: str) -> str:
    """Write `prepared` (a `unigraph.export.Exportable`) as a `.pt2` file at `path`;
    returns `path`."""
    module = named_module(prepared).eval()
    examples = tuple(torch.from_numpy(x.copy()) for x in prepared.example_inputs)
    shapes, examples = dynamic_shapes(prepared, examples)  # the graph's None dims stay free
    try:
        with torch.no_grad():
            program = torch.export.export(module, examples, dynamic_shapes=shapes, strict=False)
    except Exception as error:  # torch.export's own errors carry pages of its internals
        first = str(error).strip().splitlines()[0] if str(error).strip() else repr(error)
        raise ExportError(f"torch.export cannot export {prepared.name}: {first}. Use format "
                          "'onnx' or 'savedmodel' for this model") from None
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    torch.export.save(program, path)
    return path


# format -> writer(prepared, path) -> path, for `Backend.export` and `unigraph.export`.
WRITERS = {"torch": save_torch}
