"""Building `cond`, `while_loop` and `grad` nodes as TensorFlow's own constructs.

Shared by both graph modes: inside a `tf.compat.v1.Graph` (tensorflow:static) and inside a
`tf.function` trace (tensorflow:function), `tf.cond` and `tf.while_loop` build the
functional control-flow ops (`If`/`StatelessIf`, `While`/`StatelessWhile`: control flow v2
is on by default, also in a v1 graph, and we never switch it off process-wide). Only the
gradient differs: the v1 graph uses `tf.compat.v1.gradients`, the tf.function a
`tf.GradientTape`.
"""

from __future__ import annotations

from unigraph.backend import lower_nodes
from unigraph.ir import Graph


def make_control_flow(tf, lowerings: dict, gradients: str) -> dict:
    """{op: builder(node, args) -> outputs} for `lower_nodes`; `gradients` is "graph"
    (tf.compat.v1.gradients) or "tape" (tf.GradientTape)."""
    # Here, not at the top: backend.py imports this module before tensorflow may be imported.
    from unigraph_tensorflow.lowerings import PRINTS, last_print
    from unigraph_tensorflow.taping import differentiating

    control_flow: dict = {}

    def after_prints(outs: list) -> list:
        """`outs` of a branch or loop body, made to run after the prints made in its graph:
        in a v1 Graph (tensorflow:static), a stateful op of a body that no output depends
        on does not run (a `print(x * 3)` in a loop whose value is used nowhere). The
        cond or while op is then a print of the graph around it, fetched or depended on
        in its turn."""
        graph = tf.compat.v1.get_default_graph()
        prints = [p for p in graph.get_collection(PRINTS) if p.graph is graph]
        if not prints:
            return outs
        with tf.control_dependencies(prints):
            return [tf.identity(out) for out in outs]

    def note_prints(before: int, outs: list) -> None:
        # The prints of the branches or body are now the cond's or while's.
        graph = tf.compat.v1.get_default_graph()
        if len(graph.get_collection(PRINTS)) != before and outs:
            tf.compat.v1.add_to_collection(PRINTS, outs[0].op)

    def lower_several(node, args):  # an output per result: a fused update (adam_update)
        return list(lowerings[node.op](*args, **node.attrs))

    control_flow["adam_update"] = lower_several

    def lower_subgraph(graph: Graph, args: list) -> list:
        env = {value.id: arg for value, arg in zip(graph.inputs, args)}
        return lower_nodes(graph, env, lowerings, control_flow)

    def lower_cond(node, args):
        pred, operands = args[0], args[1:]  # a [1] predicate is fine: tf.cond squeezes it
        then_graph, else_graph = node.subgraphs["then"], node.subgraphs["else"]
        before = len(tf.compat.v1.get_collection(PRINTS))
        with tf.control_dependencies(last_print()):  # (its prints after those before it)
            outs = tf.cond(
                pred,
                lambda: after_prints(lower_subgraph(then_graph, operands)),
                lambda: after_prints(lower_subgraph(else_graph, operands)),
            )
        note_prints(before, list(outs))
        return list(outs)

    def lower_while_loop(node, args):
        count = node.attrs["num_carried"]
        carried, captured = args[:count], args[count:]
        cond_graph, body_graph = node.subgraphs["cond"], node.subgraphs["body"]
        # The IR's types are the loop invariants: a dim the frontend left unknown (None) may
        # change from one iteration to the next.
        invariants = [tf.TensorShape(value.shape) for value in node.inputs[:count]]

        def body(*values):
            outs = after_prints(lower_subgraph(body_graph, list(values) + captured))
            # A lowering may know less of a shape than the IR (a size read when the graph
            # runs, where input_spec left a dim open); TF then finds the value more general
            # after an iteration than its invariant. The IR's shape is what it is.
            for out, value in zip(outs, body_graph.outputs):
                if isinstance(out, tf.Tensor):
                    out.set_shape(value.shape)
            return outs

        before = len(tf.compat.v1.get_collection(PRINTS))
        with tf.control_dependencies(last_print()):  # (its prints after those before it)
            outs = tf.while_loop(
                lambda *values: after_prints(
                    lower_subgraph(cond_graph, list(values) + captured))[0],
                body,
                carried,
                shape_invariants=invariants,
            )
        note_prints(before, list(outs))
        return list(outs)

    def leaves_of(args):
        # A fresh tensor per operand: the same tensor passed twice, or used again outside
        # the subgraph, must still get its own partial derivative.
        return [tf.identity(arg) for arg in args]

    def lower_grad_graph(node, args):
        leaves = leaves_of(args)
        with differentiating():  # forward-only routes (NCHW convs) stay out
            outs = lower_subgraph(node.subgraphs["fn"], leaves)
        wrt = [leaves[i] for i in node.attrs["wrt"]]
        floats = floating(wrt)
        grads = tf.compat.v1.gradients(outs[node.attrs["output"]], floats,
                                       unconnected_gradients="zero") if floats else []
        return outs + per_leaf(tf, wrt, grads)

    def lower_grad_tape(node, args):
        with tf.GradientTape() as tape:
            leaves = leaves_of(args)
            wrt = [leaves[i] for i in node.attrs["wrt"]]
            floats = floating(wrt)
            tape.watch(floats)
            with differentiating():  # forward-only routes (NCHW convs) stay out
                outs = lower_subgraph(node.subgraphs["fn"], leaves)
        grads = tape.gradient(outs[node.attrs["output"]], floats,
                              unconnected_gradients=tf.UnconnectedGradients.ZERO) if floats else []
        return outs + per_leaf(tf, wrt, grads)

    control_flow["cond"] = lower_cond
    control_flow["while_loop"] = lower_while_loop
    control_flow["grad"] = lower_grad_graph if gradients == "graph" else lower_grad_tape
    return control_flow


def floating(leaves: list) -> list:
    """The leaves that can have a gradient (ints and bools have none)."""
    return [leaf for leaf in leaves if leaf.dtype.is_floating]


def per_leaf(tf, leaves: list, grads: list) -> list:
    """One gradient per leaf: `grads` (for the floating leaves, in order) as plain tensors,
    and zeros for the others. tf.gather's gradient is an IndexedSlices, made dense here."""
    found = iter(grads)
    return [tf.convert_to_tensor(next(found)) if leaf.dtype.is_floating else tf.zeros_like(leaf)
            for leaf in leaves]
