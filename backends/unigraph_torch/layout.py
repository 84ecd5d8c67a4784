"""torch:static's parameter layouts: the weights of matmuls column-major, as torch's Linear
keeps its own (`weight.t()` of a contiguous [out, in] tensor), and the optimizer slots their
updates read in the same layout (see `TorchExecutable`)."""

from __future__ import annotations

from unigraph.ir import Graph


def column_major(x):
    """2-D `x` with column-major strides, as torch's Linear keeps its weight (the `.t()` of
    a contiguous [out, in] tensor): `x` itself when it already is, else one copy. torch's mm
    backward reads the layout of its second operand (`mm_mat2_backward`): for such a weight
    it computes the weight gradient as `(g.T @ x).T`, as torch's Linear does, instead of
    `x.T @ g`, which runs 4-8x slower with subnormal values in g. Other ranks unchanged."""
    if x.dim() != 2 or x.stride() == (1, x.shape[0]):
        return x
    return x.t().contiguous().t()


def matmul_weights(graph: Graph) -> set:
    """The indices of `graph.params` that some matmul takes as its 2-D right operand, in the
    graph or in its subgraphs (a `grad` node's function, a branch, a loop body, which get
    them as operands): `TorchExecutable` stores those column-major (see `column_major`)."""
    found: set = set()

    def walk(graph: Graph, params: dict) -> None:  # params: value id -> param index
        for node in graph.nodes:
            right = node.inputs[1] if node.op == "matmul" else None
            if right is not None and right.id in params and len(right.shape) == 2:
                found.add(params[right.id])
            operands = node.inputs[1:] if node.op == "cond" else node.inputs
            for subgraph in node.subgraphs.values():
                inner = {inside.id: params[operand.id]
                         for operand, inside in zip(operands, subgraph.inputs)
                         if operand.id in params}
                if inner:
                    walk(subgraph, inner)

    walk(graph, {value.id: index for index, value in enumerate(graph.params)})
    return found


def update_slots(graph: Graph, weights: set) -> set:
    """The indices of the params shaped like a weight at `weights` whose value the weight's
    update reads through ordinary ops (an optimizer's velocity, Adam's m and v). Stored in
    the weight's layout, the update's elementwise ops read one layout: a column-major weight
    with a row-major velocity made a Momentum step 14-17% slower than both row-major."""
    index_of = {value.id: index for index, value in enumerate(graph.params)}
    producer = {out.id: node for node in graph.nodes for out in node.outputs}
    found: set = set()
    for param, new in graph.updates:
        if index_of[param.id] not in weights:
            continue
        stack, seen = [new], set()
        while stack:
            value = stack.pop()
            if value.id in seen:
                continue
            seen.add(value.id)
            node = producer.get(value.id)
            if value.id in index_of:
                if tuple(value.shape) == tuple(param.shape):
                    found.add(index_of[value.id])
            elif node is not None and not node.subgraphs:  # not into gradients or branches
                stack.extend(node.inputs)
    return found
