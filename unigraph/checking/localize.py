"""First-divergence localization: which node of the graph makes a target differ?

1. Run the target's graph with every intermediate fetched (static modes:
   `Executable.run_all`; eager: the traced graph interpreted op by op through
   `backend.eager_op`) and the float64 reference the same way.
2. Walk the nodes in topological order. A node whose value in the full run is within its
   budget is fine. Otherwise run that node *alone* on the target, fed the reference's
   inputs (rounded to the target's dtype), and compare with the reference op on the same
   rounded inputs in float64, with the op's own budget. Feeding the reference's inputs keeps
   upstream error from accumulating into a false blame; rounding them first keeps the
   input rounding itself out of the op's error.
3. The first node whose own error exceeds its budget is blamed. A `cond` or `while_loop`
   is entered (the taken branch; the first iteration of the body) to blame an op inside
   it; a `grad` node is entered twice: its forward pass as above, then its backward pass:
   walking the ops in reverse, each op's VJP on the target, fed the reference's inputs and
   the reference's cotangent, against the op record's VJP in float64.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from unigraph.checking import accumulation
from unigraph.checking import compare as cmp
from unigraph.checking.execute import rounded, single_node_graph, target_env, target_outputs
from unigraph.checking.report import Divergence
from unigraph.config import Target, use_backend
from unigraph.ir import CONTROL_FLOW_OPS, FLOAT_DTYPES, Graph, Node, type_string
from unigraph.ops import OPS
from unigraph.reference import float64


@dataclass
class _Context:
    target: Target
    backend: object
    dtype: str
    labels: dict = field(default_factory=dict)  # id(node) -> how to name it in `within`
    # id(node) -> its graph's producers (value id -> node): a while_loop's trip count is
    # read from the constants around it (see accumulation.trip_count).
    outer: dict = field(default_factory=dict)

    def note_graph(self, graph: Graph) -> None:
        producers = {v.id: n for n in graph.nodes for v in n.outputs}
        self.outer.update((id(n), producers) for n in graph.nodes)

    def budget(self, node: Node, backward: bool = False) -> tuple:
        return _node_budget(node, self.dtype, backward, self.outer.get(id(node)))


def localize(case, target: Target, backend, kind: str) -> Divergence:
    """Where the case's `kind` ("forward" or "gradient") graph diverges on `target`: the
    first node whose own error exceeds its budget; else the first value out of budget
    ("accumulated"); else a note that the graph itself agrees ("outside")."""
    graph = case.graph if kind == "forward" else case.grad_graph
    context = _Context(target, backend, case.dtype)
    if kind == "gradient":
        for node in graph.nodes:
            if node.op == "grad":
                context.labels[id(node)] = "the checked gradient"
    feeds, params = case.feeds(kind)
    reference = case.reference(kind)
    try:
        env = target_env(graph, backend, target.mode, feeds, params)
    except Exception:  # no run_all, or the graph fails as a whole: check node by node
        env = None
    divergence, first_out = _walk(context, graph, reference, env, [])
    if divergence is None and first_out is not None:
        node, figures = first_out
        divergence = _describe(context, node, "accumulated", context.budget(node))
        divergence.carried = figures
    if divergence is None:
        divergence = Divergence(str(target), "outside", note=_outside_note(target))
    divergence.graph = kind
    return divergence


def _outside_note(target: Target) -> str:
    """Why no node is blamed: what lies outside the traced graph in this kind of run."""
    if target.mode == "eager":
        return ("every node of the traced graph agrees with the reference when run op by op "
                "on this target: the difference comes from outside the graph (Python-side "
                "state in an eager run, such as a parameter read after ug.assign, or how the "
                "function feeds and updates it)")
    # A compiled target runs the graph itself: no Python code of the user's runs there.
    return (f"every node of the traced graph agrees with the reference when compiled for "
            f"{target}: the difference comes from how the compiled graph is run as a whole "
            "(how it is fed, how parameter updates are applied, or how outputs are fetched), "
            "not from one op")


# -- the forward walk --------------------------------------------------------------------
def _walk(context: _Context, graph: Graph, reference: dict, env: dict | None, within: list):
    """(Divergence or None, first (node, carried figures) out of budget or None)."""
    first_out = None
    context.note_graph(graph)
    for node in graph.nodes:
        if node.op == "constant":
            continue
        budget = context.budget(node)
        carried = _carried(node, reference, env, budget)
        if carried is not None and carried.ok:
            continue
        inputs = [rounded(reference[v.id], v.dtype) for v in node.inputs]
        try:
            own = _own_error(context, node, inputs, budget)
        except Exception as error:
            divergence = _describe(context, node, "error", budget, within)
            divergence.error = f"{type(error).__name__}: {error}"[:1000]
            return divergence, first_out
        if not own.ok:
            inner = _descend(context, node, inputs, within)
            if inner is not None:
                return inner, first_out
            divergence = _describe(context, node, "forward", budget, within)
            divergence.own, divergence.carried = own, carried
            return divergence, first_out
        if first_out is None and carried is not None:
            first_out = (node, carried)
    return None, first_out


def _carried(node: Node, reference: dict, env: dict | None, budget: tuple):
    if env is None or any(v.id not in env for v in node.outputs):
        return None
    return _worst([cmp.compare(env[v.id], reference[v.id], _value_budget(v, budget))
                   for v in node.outputs])


def _own_error(context: _Context, node: Node, inputs: list, budget: tuple) -> cmp.Figures:
    """Run `node` alone on the target and on the reference, both fed `inputs`."""
    graph = single_node_graph(node)
    feeds = _distinct_feeds(node, inputs)
    actual = target_outputs(graph, context.backend, context.target.mode, feeds)
    expected = float64.outputs(graph, feeds)
    return _worst([cmp.compare(a, e, _value_budget(v, budget), dtype=v.dtype)
                   for a, e, v in zip(actual, expected, node.outputs)])


def _distinct_feeds(node: Node, inputs: list) -> list:
    feeds, seen = [], set()
    for value, array in zip(node.inputs, inputs):
        if value.id not in seen:
            seen.add(value.id)
            feeds.append(array)
    return feeds


def _descend(context: _Context, node: Node, inputs: list, within: list):
    """Blame an op inside a control-flow node whose own output is wrong, if one is."""
    label = context.labels.get(id(node), f"{node.op} at {node.source}")
    if node.op == "cond":
        taken = "then" if bool(np.asarray(inputs[0]).reshape(())) else "else"
        return _walk_subgraph(context, node.subgraphs[taken], inputs[1:],
                              within + [f"{label} ({taken} branch)"])
    if node.op == "while_loop":
        return _walk_subgraph(context, node.subgraphs["body"], inputs,
                              within + [f"{label} (first iteration)"])
    if node.op == "grad":
        inner = within + [label]
        found = _walk_subgraph(context, node.subgraphs["fn"], inputs, inner)
        return found or _walk_backward(context, node, inputs, inner)
    return None


def _walk_subgraph(context: _Context, graph: Graph, inputs: list, within: list):
    reference = float64.values(graph, inputs)
    try:
        env = target_env(graph, context.backend, context.target.mode, inputs, [])
    except Exception:
        env = None
    return _walk(context, graph, reference, env, within)[0]


# -- the backward walk -------------------------------------------------------------------
def _walk_backward(context: _Context, node: Node, operands: list, within: list):
    """The first op of a `grad` node's function, in backward order, whose VJP on the
    target is out of budget."""
    fn = node.subgraphs["fn"]
    seeds = [None] * len(fn.outputs)
    seeds[node.attrs["output"]] = "ones"
    return _backward_walk(context, fn, operands, seeds, within)


def _backward_walk(context: _Context, graph: Graph, operands: list, seeds: list, within: list):
    """Check the VJP of every op of `graph` (fed `operands`), in backward order, with the
    reference's cotangents for the output cotangents `seeds` ("ones", an array or None).

    Any cotangent tests a VJP rule; the reference's own keep the numbers realistic. A
    `cond` is entered on its taken branch, a `while_loop` on its body's first iteration
    (with cotangents of ones there); a nested `grad` (second order) is not entered.
    """
    values, cotangents = float64.cotangents(graph, operands, seeds)
    context.note_graph(graph)
    for inner in reversed(graph.nodes):
        inputs = [rounded(values[v.id], v.dtype) for v in inner.inputs]
        outs = [cotangents.get(v.id) for v in inner.outputs]
        if inner.op in ("cond", "while_loop"):
            found = _backward_into(context, inner, inputs, outs, within)
            if found is not None:
                return found
            continue
        record = OPS.get(inner.op)
        out = inner.outputs[0]
        g = outs[0]
        if (inner.op in CONTROL_FLOW_OPS or record is None or record.vjp is None or g is None
                or out.dtype not in FLOAT_DTYPES):
            continue
        positions = [i for i, v in enumerate(inner.inputs) if v.dtype in FLOAT_DTYPES]
        if positions:
            found = _check_vjp(context, inner, inputs, rounded(g, out.dtype), positions, within)
            if found is not None:
                return found
    return None


def _backward_into(context: _Context, node: Node, inputs: list, out_cotangents: list,
                   within: list):
    label = f"{node.op} at {node.source}"
    if node.op == "cond":
        taken = "then" if bool(np.asarray(inputs[0]).reshape(())) else "else"
        seeds = [g if g is not None and v.dtype in FLOAT_DTYPES else None
                 for g, v in zip(out_cotangents, node.outputs)]
        return _backward_walk(context, node.subgraphs[taken], inputs[1:], seeds,
                              within + [f"{label} ({taken} branch)"])
    body = node.subgraphs["body"]
    seeds = ["ones" if v.dtype in FLOAT_DTYPES else None for v in body.outputs]
    return _backward_walk(context, body, inputs, seeds,
                          within + [f"{label} (first iteration)"])


def _check_vjp(context: _Context, node: Node, inputs: list, cotangent, positions, within):
    budget = context.budget(node, backward=True)
    try:
        actual = _target_vjp(context, node, inputs, cotangent, positions)
    except Exception as error:
        divergence = _describe(context, node, "error", budget, within)
        divergence.error = f"gradient: {type(error).__name__}: {error}"[:1000]
        return divergence
    expected = float64.vjp(node, inputs, cotangent)
    for position, got in zip(positions, actual):
        want = expected[position]
        if want is None:
            want = np.zeros(inputs[position].shape)
        figures = cmp.compare(got, want, budget, dtype=node.inputs[position].dtype)
        if not figures.ok:
            divergence = _describe(context, node, "gradient", budget, within)
            divergence.own = figures
            divergence.note = f"wrong: the gradient with respect to input {position} " \
                              f"({type_string(node.inputs[position])})"
            return divergence
    return None


def _target_vjp(context: _Context, node: Node, inputs: list, cotangent, positions) -> list:
    """The target's own gradient of sum(op(inputs) * cotangent) w.r.t. `positions`."""
    from unigraph import api
    from unigraph.autodiff import value_and_grad
    from unigraph.dispatch import apply

    def weighted(*xs):
        return api.sum(apply(node.op, list(xs), dict(node.attrs)) * cotangent)

    weighted.__name__ = f"vjp_{node.op}"
    both = value_and_grad(weighted, argnums=tuple(positions))
    with use_backend(context.target.backend, context.target.mode):
        _, grads = both(*inputs)
    return [np.asarray(g.numpy()) for g in grads]


# -- helpers -----------------------------------------------------------------------------
def _node_budget(node: Node, dtype: str, backward: bool = False, outer=None) -> tuple:
    """The op's budget in the checked dtype, or in a narrower dtype that it reads or
    writes (a cast to float16 in a float32 check), widened as the checker widens it for
    the terms the op (or, backward, its VJP) accumulates, and, for a while_loop, for its
    trips (`outer`: the producers of its graph, where its trip count is read)."""
    names = cmp.node_names(node, backward)
    for sub in node.subgraphs.values():
        inner = cmp.ops_of(sub)
        names |= inner | accumulation.loop_tags(node, outer or {}, inner)
    dtypes = {dtype} | {v.dtype for v in [*node.inputs, *node.outputs]
                        if v.dtype in FLOAT_DTYPES}
    return cmp.widest(cmp.budget_for(names, d) for d in dtypes)


def _value_budget(value, budget: tuple) -> tuple:
    return budget if value.dtype in FLOAT_DTYPES else cmp.EXACT


def _worst(figures: list) -> cmp.Figures:
    failing = [f for f in figures if not f.ok]
    pool = failing or figures
    return max(pool, key=lambda f: f.ratio)


def _attr_text(value) -> str:
    if isinstance(value, np.ndarray):
        if value.size <= 6:
            return np.array2string(value, separator=", ")
        return f"array({value.dtype.name}{list(value.shape)})"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _describe(context: _Context, node: Node, kind: str, budget: tuple,
              within: list | None = None) -> Divergence:
    return Divergence(
        target=str(context.target),
        kind=kind,
        op=node.op,
        source=context.labels.get(id(node), node.source),
        attrs={key: _attr_text(value) for key, value in sorted(node.attrs.items())},
        inputs=[type_string(v) for v in node.inputs],
        outputs=[type_string(v) for v in node.outputs],
        values=[v.id for v in node.outputs],
        budget=budget,
        within=list(within or []),
    )
