"""How a graph's updates (param <- new value) become Paddle ops at the end of the Program.

The general form is `paddle.assign(new, output=param)`: a copy into the parameter's
variable. The common optimizer forms run in place on the parameter's own buffer instead,
which saves a full-size temporary and a copy per parameter per step (~0.2 ms for a 784x256
float32 weight on a CPU):

    p <- sub(p, mul(lr, g))   float32, 8k elements      ->  sgd_(p, lr, g)   (Paddle's SGD op)
    p <- sub(p, mul(lr, g))   other sizes, float64      ->  subtract_(p, multiply(g, lr))
    p <- sub(p, d)                                      ->  subtract_(p, d)
    p <- add(p, d), add(d, p)                           ->  add_(p, d)

(lr a scalar of p's dtype), each only where nothing else reads the values it absorbs.

An update whose new value the step reads again (an optimizer's slot: Momentum's velocity,
Adam's moments and step count) is instead made in the slot's own buffer where the graph
makes it (`plan_writes`), when nothing else reads the slot's old value:

    s <- add(s, d), add(d, s), sub(s, d), mul(s, d), mul(d, s)  ->  add_ / subtract_ / multiply_
    s <- add(mul(s, c), d), add(d, mul(c, s))                  ->  multiply_(s, c); add_(s, d)

saving a full-size temporary per slot and step. The update's copy `assign(new, output=s)`
stays at the end: Paddle skips a copy of a buffer onto itself, and the read keeps the new
value alive to the end, so that Paddle's inplace pass cannot write another op's result into
the slot's buffer at what it takes for the value's last use (3.3.1: without it,
`multiply(v_new, lr)` became `multiply_`, and the velocity held lr * v).
`subtract_`/`add_` are the same kernels as `subtract`/`add`. `sgd_` computes `p - lr * g`
with the float32 rounding of `mul` then `sub` only when p has a multiple of 8 elements
(3.3.1: its vectorised loop); otherwise, and in float64, some CPUs round every element as an FMA,
so those take `multiply` (lr expanded to g's shape first from 4096 elements, as the "mul"
lowering does) then `subtract_`. Not `scale(g, lr, bias=-0.0)`, dygraph's form: in a Program
the bias is an IR attribute, and Paddle's IR keeps one float attribute for 0.0 and -0.0 (the
first one made in the process), so the bias could be +0.0, which turns a -0.0 product into
+0.0 (-0.0 - (lr * -0.0) would be -0.0, not +0.0), and a -0.0 made first would turn the user's
own later `scale(..., bias=0.0)` ops into -0.0 ones. tests/test_backend_paddle.py,
tests/test_paddle_eager_kernels.py and tests/test_signed_zero_products.py check the bits.
float16 keeps the general form: the CPU build has no float16 kernel for these ops.

A fused update (`adam_update`, `ug.optim.Adam(fused=True)`: Paddle's `adam_` kernel, see
unigraph_paddle.adam) whose outputs are the updates of the parameter and moments it reads
writes their variables where the node stands, when nothing reads their old values after it
(`plan_fused`). Its updates' copies at the end would then be onto themselves; each is left
out where nothing but its update reads the new value (`uncopied_fused`): the kernel has
written the variable, as `sgd_` does, and with no later read Paddle's inplace pass can give
no later op that buffer (3.3.1: each self-copy still costs the interpreter ~9 us).
"""

from __future__ import annotations

from dataclasses import dataclass

from unigraph.ir import Graph, Node
from unigraph.ops.updates import WRITTEN_INPUTS
from unigraph_paddle.program_scalars import EXPAND_FROM

_IN_PLACE = {"sub": "subtract_", "add": "add_"}
KERNEL_DTYPES = ("float32", "float64")  # what Paddle's adam_ kernel writes


@dataclass(frozen=True)
class InPlaceUpdate:
    param: object  # the parameter's IR Value
    op: str  # "sgd_", "scaled_subtract_", "subtract_" or "add_"
    operands: tuple  # IR Values after the parameter: (lr, g) for the SGD forms, else (d,)
    nodes: tuple  # the IR nodes this op replaces; they are not lowered


def _reads_and_producers(graph: Graph, also_read) -> tuple[dict, dict]:
    """({value id: how many node inputs and `also_read` entries read it}, {value id: the
    node that makes it}) for the top-level nodes of `graph`."""
    reads = {}
    for node in graph.nodes:
        for value in node.inputs:
            reads[value.id] = reads.get(value.id, 0) + 1
    for value in also_read:
        reads[value.id] = reads.get(value.id, 0) + 1
    return reads, {v.id: node for node in graph.nodes for v in node.outputs}


def plan_in_place(graph: Graph) -> dict:
    """{id(new value): InPlaceUpdate} for the updates of `graph` that can run in place."""
    reads, producers = _reads_and_producers(graph, graph.outputs)
    updated = [param.id for param, _ in graph.updates]
    plan = {}
    for param, new in graph.updates:
        node = producers.get(new.id)
        if (
            node is None
            or node.op not in _IN_PLACE
            or reads.get(new.id)
            or updated.count(param.id) > 1
            or param.dtype == "float16"
        ):
            continue
        x, y = node.inputs
        if x.id == y.id:
            continue
        if x.id == param.id:
            operand = y
        elif node.op == "add" and y.id == param.id:
            operand = x
        else:
            continue
        sgd = _sgd_form(param, node, operand, producers, reads)
        plan[id(new)] = sgd or InPlaceUpdate(param, _IN_PLACE[node.op], (operand,), (node,))
    return plan


def _sgd_form(param, sub_node, operand, producers, reads):
    """`sub(p, mul(lr, g))` with a scalar lr of p's dtype, float32 or float64, the product
    read only here: `sgd_` where it rounds as `mul` then `sub` (float32, a multiple of 8
    elements), else `scaled_subtract_`."""
    if (sub_node.op != "sub" or param.dtype not in ("float32", "float64")
            or reads.get(operand.id) != 1):
        return None
    product = producers.get(operand.id)
    if product is None or product.op != "mul":
        return None
    a, b = product.inputs
    lr, grad = (a, b) if a.shape == () else (b, a)
    if (lr.shape != () or lr.dtype != param.dtype or tuple(grad.shape) != tuple(param.shape)
            or param.id in (a.id, b.id)):
        return None
    op = ("sgd_" if param.dtype == "float32" and _size(param.shape) % 8 == 0
          else "scaled_subtract_")
    return InPlaceUpdate(param, op, (lr, grad), (sub_node, product))


_WRITES = ("add", "sub", "mul")


def plan_writes(graph: Graph, planned: dict) -> dict:
    """{id(node): its in-place replacement} for the updates of `graph` not in `planned`
    (`plan_in_place`) whose new value can be made in the parameter's own buffer where the
    graph makes it. A replacement is a `write_<op>` node whose first input is the buffer
    written (the parameter, or the previous write's result); `ProgramBuilder` lowers it
    with the in-place kernel of the op's lowering."""
    reads, producers = _reads_and_producers(
        graph, [*graph.outputs, *(new for _, new in graph.updates)])
    updated = [param.id for param, _ in graph.updates]
    replaced = {}
    for param, new in graph.updates:
        node = producers.get(new.id)
        if (id(new) in planned or node is None or updated.count(param.id) > 1
                or param.dtype not in ("float32", "float64") or reads.get(param.id) != 1
                or tuple(new.shape) != tuple(param.shape) or new.dtype != param.dtype):
            continue
        chain = _write_chain(param, node, producers, reads)
        if chain is None:
            continue
        target = param
        for step, operand in chain:
            replaced[id(step)] = Node(f"write_{step.op}", [target, operand], step.outputs,
                                      source=step.source)
            target = step.outputs[0]
    return replaced


def _write_chain(param, node, producers, reads):
    """[(node, its other operand), ...] writing `param` in place, in order, or None."""

    def fits(value):
        return value.dtype == param.dtype and tuple(value.shape) in ((), tuple(param.shape))

    if node.op not in _WRITES:
        return None
    x, y = node.inputs
    if x.id == param.id and y.id != param.id and fits(y):
        return [(node, y)]
    if node.op != "sub" and y.id == param.id and x.id != param.id and fits(x):
        return [(node, x)]  # a + b is b + a, a * b is b * a, bit for bit
    if node.op != "add":
        return None
    for made, operand in ((x, y), (y, x)):
        product = producers.get(made.id)
        if (product is None or product.op != "mul" or reads.get(made.id) != 1
                or made.id == operand.id or tuple(made.shape) != tuple(param.shape)
                or not fits(operand)):
            continue
        a, b = product.inputs
        factor = b if a.id == param.id else a if b.id == param.id else None
        if factor is not None and factor.id != param.id and fits(factor):
            return [(product, factor), (node, operand)]
    return None


def _size(shape) -> int:
    size = 1
    for dim in shape:
        size *= dim
    return size


def emit_in_place(paddle, update: InPlaceUpdate, env: dict) -> None:
    """Append the in-place op of `update` to the current Program."""
    param = env[update.param.id]
    operands = [env[v.id] for v in update.operands]
    if update.op == "sgd_":
        lr, grad = operands
        paddle._C_ops.sgd_(param, lr, grad, None, False)
    elif update.op == "scaled_subtract_":
        lr, grad = operands
        if _size(update.param.shape) >= EXPAND_FROM:  # the same-shape kernel: faster there
            lr = paddle._C_ops.expand(lr, list(update.param.shape))
        paddle._C_ops.subtract_(param, paddle._C_ops.multiply(grad, lr))
    else:
        getattr(paddle._C_ops, update.op)(param, *operands)


def plan_fused(graph: Graph) -> dict:
    """{id(node): its in-place replacement} for the fused updates whose outputs are the
    graph's updates of the very values they replace, each updated once, where nothing reads
    those old values after the node (no later node, output or update): the kernel then
    writes those variables themselves (`write_adam_update`) where the node stands; the
    update's copy at the end is of a buffer onto itself, which Paddle skips. Elsewhere the
    node's lowering writes copies."""
    new_of, times = {}, {}
    for param, new in graph.updates:
        new_of[param.id] = new.id
        times[param.id] = times.get(param.id, 0) + 1
    read_at_end = {v.id for v in graph.outputs} | {new.id for _, new in graph.updates}
    last_reader = {}  # value id -> index of the last top-level node reading it
    for index, node in enumerate(graph.nodes):
        for value in node.inputs:
            last_reader[value.id] = index
    replaced = {}
    for index, node in enumerate(graph.nodes):
        positions = WRITTEN_INPUTS.get(node.op)
        if positions is None:
            continue
        targets = [node.inputs[i].id for i in positions]
        # The kernel writes float32 and float64 variables; a float16 update runs in float32
        # copies (adam._widened), which a fused write would never bring back.
        if any(node.inputs[i].dtype not in KERNEL_DTYPES for i in positions):
            continue
        if (len({v.id for v in node.inputs}) == len(node.inputs)
                and all(new_of.get(target) == out.id and times[target] == 1
                        and last_reader[target] == index and target not in read_at_end
                        for target, out in zip(targets, node.outputs))):
            replaced[id(node)] = Node(f"write_{node.op}", node.inputs, node.outputs,
                                      node.attrs, source=node.source)
    return replaced


def uncopied_fused(graph: Graph, fused: dict) -> set:
    """The ids of the new values that the fused writes of `fused` (`plan_fused`) make in
    their variables and that nothing else reads (no node, no graph output, no other
    update: q <- p's new value is a copy): their updates need no copy at the end."""
    sources = [new.id for _, new in graph.updates]
    read = ({v.id for node in graph.nodes for v in node.inputs} | {v.id for v in graph.outputs}
            | {i for i in sources if sources.count(i) > 1})
    return {v.id for node in graph.nodes if id(node) in fused for v in node.outputs
            if v.id not in read}
