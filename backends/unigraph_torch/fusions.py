"""torch:static's fused calls: where two op records in a row are ONE torch call in the code a
torch user writes, the generated `run` makes that call, as torch's own modules do.

- `add(matmul(x, w), b)`, x and w 2-D, b 1-D: `torch.addmm(b, x, w)`, as `nn.Linear`;
- `mean(sparse_softmax_cross_entropy(z, y))`: `F.cross_entropy(z, y)` (reduction mean);
  (torch:eager makes these two calls too, for `ug.nn.functional.linear` and
  `cross_entropy`: `COMPOSITES`)
- a parameter's update `p - s * g`, s a scalar: `p.sub_(s * g)` in place, as
  `torch.optim.SGD` writes its parameters; any other `p - d` (Adam's): `p.sub_(d)`;
- a slot's update `s * c + d` (Adam's moments, Momentum's velocity) whose old value nothing
  else reads: `s.mul_(c)` where the graph makes the product (then `add_`, below), as
  torch.optim writes its moments;
- `x op y` (add, sub, mul, div; sqrt) whose x is a temporary nothing else reads: `x.op_(y)`,
  as torch.optim's Adam writes its temporaries (the same kernel: the same numbers);
- Adam's bias correction `cast(c - pow(beta, t), dtype)` of a 0-d t, c and beta constants:
  made once per value of t, beta, c and dtype in a run (`BiasCorrections`), as torch:eager's
  Adam makes it once a step for every parameter (the same ops on the same numbers);
- a fused Adam update (`adam_update`, `Adam(fused=True)`) whose results are only the
  updates of its parameter and moments: written into them (`adam_update_`), as
  torch.optim.Adam does (the same kernels: the same numbers), at run's end.

Each removes a kernel or a temporary (the update the new parameter tensor: an MLP step
0.9x; an Adam step makes 3 full-size tensors fewer a parameter, the moments' and the
parameter's). The writes into a parameter or slot check at run time that nothing else holds
its tensor or memory (`_sole`), else make a new tensor: the same kernel either way.
addmm and F.cross_entropy round once where the records round twice (a BLAS `beta = 1`
accumulation, one division of the loss sum): their results move by an ulp, within the ops'
budgets; `every_value` (the checker's value of each node) runs the records unfused, so a
disagreement is still pinned to its node. The update keeps the optimizers' rounding (the
product, then the difference: every target's bits): torch's one-kernel forms
(`addcmul_`, `add_(g, alpha=-lr)`) round as a fused multiply-add.

`plan(graph)` decides, once per compile; `_SourceWriter` emits. A producer (the matmul, the
cross-entropy, the update's `mul` and `sub`) is emitted only in `every_value`; its consumer
then makes the fused call in `run` with the producer's operands. The update moves after every
node (with the other parameter writes), so a run that raises leaves the parameter as it was;
a slot's product is made where the graph makes it (its new value is read on).

    >>> fused = plan(graph)
    >>> fused[id(add_node)]            # ("addmm", matmul's output id, bias position)
"""

from __future__ import annotations

import sys

import torch
import torch.nn.functional as F

from unigraph.ir import Graph
from unigraph.ops.updates import adam_updates_in_place
from unigraph_torch.lowerings import LOWERINGS, _check_indices

_FLOATS = ("float32", "float64")


def _uses(graph: Graph, top: bool) -> dict:
    """value id -> how many times `graph`'s nodes, outputs (and, at the top, updates) read it."""
    counts: dict = {}
    reads = [v for node in graph.nodes for v in node.inputs] + list(graph.outputs)
    if top:
        reads += [new for _, new in graph.updates]
    for value in reads:
        counts[value.id] = counts.get(value.id, 0) + 1
    return counts


def _addmm(node, producer, uses) -> tuple | None:
    """("addmm", matmul output id, bias position) when `node` adds a 1-D bias to a 2-D
    matmul read only here."""
    for position in (1, 0):
        product, bias = node.inputs[1 - position], node.inputs[position]
        matmul = producer.get(product.id)
        if matmul is None or matmul.op != "matmul" or uses.get(product.id) != 1:
            continue
        x, w = matmul.inputs
        dtypes = {x.dtype, w.dtype, bias.dtype, node.outputs[0].dtype}
        if len(x.shape) == 2 and len(w.shape) == 2 and len(dtypes) == 1 and \
                dtypes <= set(_FLOATS) and w.shape[1] is not None and \
                tuple(bias.shape) == (w.shape[1],):
            return ("addmm", product.id, position)
    return None


def _cross_entropy_mean(node, producer, uses) -> tuple | None:
    """("cross_entropy_mean", loss id) when `node` is the mean over a batch of per-sample
    cross-entropies read only here."""
    (losses,) = node.inputs
    entropy = producer.get(losses.id)
    if entropy is None or entropy.op != "sparse_softmax_cross_entropy" or \
            uses.get(losses.id) != 1 or node.attrs.get("keepdims"):
        return None
    logits, labels = entropy.inputs
    axis = node.attrs.get("axis")
    if len(logits.shape) == 2 and len(labels.shape) == 1 and logits.dtype in _FLOATS and \
            logits.shape[0] != 0 and (axis is None or tuple(axis) == (0,)):
        return ("cross_entropy_mean", losses.id)
    return None


def _updates(graph: Graph, producer: dict, uses: dict, roles: dict) -> None:
    """Roles for the updates `p - d`: ("update",) on the `sub` and the `mul` where d is
    `s * g`, s a scalar read only here (`sgd_update`), else ("update_sub",) on the `sub`
    (`sub_update`). Only where nothing else reads the new value (or the product), p is no
    output and no other update's value, and s, g or d are not parameters updated in place
    (the writes come last, one after another)."""
    outputs = {value.id for value in graph.outputs}
    news = {new.id for _, new in graph.updates}
    found = []
    for param, new in graph.updates:
        sub = producer.get(new.id)
        if sub is None or sub.op != "sub" or sub.inputs[0] is not param or \
                uses.get(new.id) != 1 or param.id in outputs or param.id in news:
            continue
        product = sub.inputs[1]
        mul = producer.get(product.id)
        if mul is not None and mul.op == "mul" and uses.get(product.id) == 1:
            scale, grad = mul.inputs if mul.inputs[0].shape == () else mul.inputs[::-1]
            types = {param.dtype, new.dtype, scale.dtype, grad.dtype}
            if scale.shape == () and tuple(grad.shape) == tuple(param.shape) == \
                    tuple(new.shape) and len(types) == 1 and types <= set(_FLOATS):
                found.append((sub, mul, (scale, grad)))
                continue
        types = {param.dtype, new.dtype, product.dtype}
        if product.id != param.id and None not in param.shape and \
                tuple(product.shape) == tuple(param.shape) == tuple(new.shape) and \
                len(types) == 1 and types <= set(_FLOATS):
            found.append((sub, None, (product,)))
    written = {sub.inputs[0].id for sub, _, _ in found}
    for sub, mul, read in found:
        if any(value.id in written for value in read):
            continue
        if mul is None:
            roles[id(sub)] = ("update_sub",)
        else:
            roles[id(sub)] = roles[id(mul)] = ("update",)


def _slot_writes(graph: Graph, producer: dict, uses: dict, roles: dict) -> None:
    """("write_slot",) for the top-level `mul(s, c)` (or `mul(c, s)`) of a slot update
    `s <- add(mul(s, c), d)`: s a parameter updated once, read by this `mul` alone (no other
    node, output or update), the product of s's shape and dtype (a float), read by that
    `add` alone. `slot_mul` makes the product in s's own memory when nothing else holds it:
    s's old value is read nowhere else, and its new value is made from the product."""
    updated: dict = {}
    for param, new in graph.updates:
        updated[param.id] = None if param.id in updated else new
    params = {param.id for param in graph.params}
    for param_id, new in updated.items():
        add = None if new is None else producer.get(new.id)
        if add is None or add.op != "add" or uses.get(param_id) != 1:
            continue
        for product in add.inputs:
            mul = producer.get(product.id)
            if mul is None or mul.op != "mul" or id(mul) in roles or \
                    uses.get(product.id) != 1 or product.id in params:
                continue
            slot = next((v for v in mul.inputs if v.id == param_id), None)
            if (slot is not None and mul.inputs[0].id != mul.inputs[1].id
                    and slot.dtype in _FLOATS and None not in slot.shape
                    and tuple(product.shape) == tuple(slot.shape)
                    and all(v.dtype == slot.dtype for v in (*mul.inputs, product, new))):
                roles[id(mul)] = ("write_slot", slot.id)


# The ops whose torch lowering always returns a new tensor of its own (never an operand or a
# view of one), each with its in-place method: a temporary one of them made and only one
# node reads can take that node's result in its own memory.
IN_PLACE_METHODS = {"add": torch.Tensor.add_, "sub": torch.Tensor.sub_,
                    "mul": torch.Tensor.mul_, "div": torch.Tensor.div_,
                    "sqrt": torch.Tensor.sqrt_}


def _in_place_temporaries(graph: Graph, producer: dict, uses: dict, roles: dict) -> None:
    """("in_place",) for the top-level nodes `x op y` (`op x`) of `IN_PLACE_METHODS` whose x
    is a temporary: made by another such node (written in place itself, into a slot, or
    with no role),
    read by this node alone (not twice, not an output, no update's value), of the result's
    shape (no broadcast) and float dtype, as every operand (no promotion). Adam's step has
    7 such nodes a parameter, each a full-size tensor less to allocate."""
    outputs = {value.id for value in graph.outputs}
    for node in graph.nodes:
        if node.op not in IN_PLACE_METHODS or id(node) in roles:
            continue
        x, out = node.inputs[0], node.outputs[0]
        made = producer.get(x.id)
        if (made is None or made.op not in IN_PLACE_METHODS
                or roles.get(id(made), ("in_place",))[0] not in ("in_place", "write_slot")
                or uses.get(x.id) != 1 or x.id in outputs or x.dtype not in _FLOATS
                or None in x.shape or tuple(x.shape) != tuple(out.shape)
                or any(v.dtype != x.dtype for v in (*node.inputs, out))
                or any(v.id == x.id for v in node.inputs[1:])):
            continue
        roles[id(node)] = ("in_place",)


def _constant(producer: dict, value):
    """The float of a 0-d float64 `constant` node's output, else None."""
    node = producer.get(value.id)
    if node is None or node.op != "constant" or value.dtype != "float64" or value.shape != ():
        return None
    return float(node.attrs["value"])


def _bias_corrections(graph: Graph, producer: dict, uses: dict, roles: dict) -> None:
    """("correction", c, beta) on the top-level `cast(sub(c, pow(beta, t)))` of 0-d float64
    values, c and beta constants, t not one, the `pow` and the `sub` read only by the next
    node, the cast's result (of a float dtype) read only as a later operand (never written
    in place: one result serves every parameter); ("correction_part",) on the `pow` and
    the `sub`, made in every_value only."""
    outputs = {value.id for value in graph.outputs} | {new.id for _, new in graph.updates}
    later_operand_only = {}
    for node in graph.nodes:
        for position, value in enumerate(node.inputs):
            ok = position > 0 and node.op in IN_PLACE_METHODS
            later_operand_only[value.id] = later_operand_only.get(value.id, True) and ok
    for node in graph.nodes:
        if node.op != "cast" or id(node) in roles:
            continue
        out, difference = node.outputs[0], node.inputs[0]
        sub = producer.get(difference.id)
        if (sub is None or sub.op != "sub" or uses.get(difference.id) != 1
                or out.dtype not in _FLOATS or out.shape != () or out.id in outputs
                or not later_operand_only.get(out.id)):
            continue
        power = sub.inputs[1]
        pow_node = producer.get(power.id)
        c = _constant(producer, sub.inputs[0])
        if pow_node is None or pow_node.op != "pow" or uses.get(power.id) != 1 or c is None:
            continue
        beta, t = pow_node.inputs
        beta_value = _constant(producer, beta)
        if (beta_value is None or t.dtype != "float64" or t.shape != ()
                or _constant(producer, t) is not None
                or id(sub) in roles or id(pow_node) in roles):
            continue
        roles[id(node)] = ("correction", c, beta_value)
        roles[id(sub)] = roles[id(pow_node)] = ("correction_part",)


def _adam_updates(graph: Graph, roles: dict) -> None:
    """("adam_in_place",) for the top-level `adam_update` nodes that may write into their
    param, m and v (`updates.adam_updates_in_place`; the writes come last, with the others,
    as `_updates`')."""
    for node in adam_updates_in_place(graph):
        roles[id(node)] = ("adam_in_place",)


def plan(graph: Graph, top: bool = True, roles: dict | None = None) -> dict:
    """{id(node): role} for the nodes of `graph` and its subgraphs that run fused:
    ("defer",) for a producer, ("addmm", ...) / ("cross_entropy_mean", ...) for its
    consumer, ("update",) for both nodes of a fused parameter update (("update_sub",) for
    a difference's), ("write_slot", slot id) for a slot's product, ("correction", ...) and
    ("correction_part",) for a bias correction's nodes, ("in_place",) for a
    node written into its first operand's memory, ("adam_in_place",) for a fused Adam
    update written into its parameters (those at the top level only)."""
    roles = {} if roles is None else roles
    uses = _uses(graph, top)
    producer = {out.id: node for node in graph.nodes for out in node.outputs}
    for node in graph.nodes:
        role = None
        if node.op == "add":
            role = _addmm(node, producer, uses)
        elif node.op == "mean":
            role = _cross_entropy_mean(node, producer, uses)
        if role is not None:
            roles[id(node)] = role
            roles[id(producer[role[1]])] = ("defer",)
        for subgraph in node.subgraphs.values():
            plan(subgraph, False, roles)
    if top:
        _updates(graph, producer, uses, roles)
        _slot_writes(graph, producer, uses, roles)
        _bias_corrections(graph, producer, uses, roles)
        _adam_updates(graph, roles)
        _in_place_temporaries(graph, producer, uses, roles)
    return roles


# -- the fused calls (globals of the generated code) --------------------------------------


def addmm(bias, x, w):
    return torch.addmm(bias, x, w)


def cross_entropy_mean(logits, labels):
    # The op's label check first: F.cross_entropy would skip a label of -100 (its
    # ignore_index) and divide by the count of the others.
    _check_indices("sparse_softmax_cross_entropy", labels, logits.shape[-1])
    return F.cross_entropy(logits, labels.long())


def linear(x, weight, bias):
    """`ug.nn.functional.linear`'s eager call (see `COMPOSITES`): `addmm`, as above."""
    return torch.addmm(bias, x, weight)


def _written_into_first(name: str):
    """`name`'s in-place call for an ("in_place",) node: x's own method where autograd tracks
    no operand (the optimizers' steps run after the gradients), else the plain op. The same
    kernel either way, so the same numbers."""
    method, plain = IN_PLACE_METHODS[name], getattr(torch, name)

    def call(x, *rest):
        if x.requires_grad or (rest and getattr(rest[0], "requires_grad", False)):
            return plain(x, *rest)
        return method(x, *rest)

    call.__name__ = f"{name}_into_first"
    return call


# Globals of the generated code: the ("in_place",) nodes' calls.
IN_PLACE_CALLS = {f"op_in_place_{name}": _written_into_first(name) for name in IN_PLACE_METHODS}


# torch:eager's native calls for `ug.nn.functional`'s composites (`Backend.composites`): the
# same functions torch:static's plan calls, so both targets give the same bits.
COMPOSITES = {"linear": linear, "cross_entropy_mean": cross_entropy_mean}


def _references_when_free() -> int:
    """sys.getrefcount of a parameter inside `sgd_update`, `sub_update` and `slot_mul` when
    only the parameter list and the generated function's local hold it, measured on a probe
    run through the lines `compile_graph` writes for them (the count depends on how the
    interpreter passes arguments); the smallest, should they differ."""
    seen = []

    def record(param, *rest):
        seen.append(sys.getrefcount(param))
        return param

    scope = {"op_sgd_update": record, "op_sub_update": record, "op_slot_mul": record,
             "column_major": lambda x: x}
    exec("def run(P):\n    p0 = P[0]\n    p1 = P[1]\n    p2 = P[2]\n"
         "    t3 = op_slot_mul(p2, None)\n    P[2] = t3\n"
         "    P[0] = column_major(op_sgd_update(p0, None, None))\n"
         "    P[1] = column_major(op_sub_update(p1, None))\n", scope)
    scope["run"]([torch.zeros(1), torch.zeros(1), torch.zeros(1)])
    return min(seen)


_FREE = _references_when_free()


def _sole(references: int, param) -> bool:
    """Whether the update may write `param` (a parameter or slot tensor) in place:
    `references`, its sys.getrefcount taken in the caller (before `param` is on the call's
    stack: hence the order of the arguments), is at most what the parameter
    list and the generated function's local make (`_FREE`), autograd does not track it, and
    nothing else holds its memory (no view)."""
    # 2: this tensor's own reference plus the temporary storage object asked about.
    return references <= _FREE and not param.requires_grad and \
        torch._C._storage_Use_Count(param.untyped_storage()._cdata) == 2


def sgd_update(param, scale, grad):
    """`param - scale * grad`, rounded as the product and then the difference (the
    optimizers' formula, bit for bit every other target's), written into `param` when
    nothing else holds it or its memory (no other name or container, no view: the caller's
    tensors and earlier outputs keep their numbers), else a new tensor."""
    step = torch.mul(scale, grad)
    if _sole(sys.getrefcount(param), param) and not step.requires_grad:
        return param.sub_(step)
    return torch.sub(param, step)


def sub_update(param, delta):
    """`param - delta` (an ("update_sub",) update: Adam's), written into `param` as
    `sgd_update` writes it, else a new tensor; the same kernel either way."""
    if _sole(sys.getrefcount(param), param) and not delta.requires_grad:
        return param.sub_(delta)
    return torch.sub(param, delta)


def slot_mul(slot, factor):
    """`slot * factor` (a ("write_slot",) product: a moment times its beta), made in the
    slot's own tensor as `sgd_update` writes a parameter, else a new tensor; the same kernel
    either way."""
    if _sole(sys.getrefcount(slot), slot) and not getattr(factor, "requires_grad", False):
        return slot.mul_(factor)
    return torch.mul(slot, factor)


class BiasCorrections:
    """A ("correction",) node's call in one compiled `run`: `cast(c - pow(beta, t), dtype)`
    by the records' own lowerings, made once per (t's value, c, beta, dtype) and then handed
    to every parameter whose step has that value (its readers only read it). Holds the
    results of one value of t at a time: a step's, for every parameter.

    >>> corrections(t, one, beta, dtype, 1.0, 0.9)   # t, one, beta: 0-d float64 tensors
    """

    def __init__(self):
        # (t's value, {(c, beta, dtype): result}) as one tuple, replaced whole: a run on
        # another thread reads a pair that belongs together (at worst it computes anew).
        self._latest: tuple = (None, {})

    def __call__(self, t, one, beta, dtype, c: float, beta_value: float):
        value = t.item()
        known, made = self._latest
        if value != known:  # NaN too: never equal, made anew
            made = {}
            self._latest = (value, made)
        key = (c, beta_value, dtype)
        found = made.get(key)
        if found is None:
            found = made[key] = LOWERINGS["sub"](one, LOWERINGS["pow"](beta, t)).to(dtype)
        return found


def _adam_references_when_free() -> int:
    """sys.getrefcount of the parameter, m and v inside `adam_in_place` when only the
    parameter list and the generated function's locals hold them, measured as
    `_references_when_free` does, through the line `compile_graph` writes."""
    seen = []

    def record(param, grad, m, v, lr, step, beta1, beta2, eps):
        seen.extend((sys.getrefcount(param), sys.getrefcount(m), sys.getrefcount(v)))
        return param, m, v

    scope = {"op_adam_in_place": record, "column_major": lambda x: x}
    exec("def run(P):\n    p0 = P[0]\n    p1 = P[1]\n    p2 = P[2]\n"
         "    u0 = op_adam_in_place(p0, None, p1, p2, None, None, beta1=0.9, beta2=0.999, "
         "eps=1e-08)\n    P[0] = column_major(u0[0])\n    P[1] = u0[1]\n    P[2] = u0[2]\n",
         scope)
    scope["run"]([torch.zeros(1), torch.zeros(1), torch.zeros(1)])
    return max(seen)


_ADAM_FREE = _adam_references_when_free()


def adam_in_place(param, grad, m, v, lr, step, beta1, beta2, eps):
    """`adam_update` (torch.optim.Adam's kernels) written into param, m and v when nothing
    else holds them (no other name or container; `adam_update_` checks their memory and
    autograd), else new tensors: the same numbers either way. (The table's entries, looked
    up at each call: a replaced entry is the one that runs, as in torch:eager.)"""
    if sys.getrefcount(param) <= _ADAM_FREE and sys.getrefcount(m) <= _ADAM_FREE and \
            sys.getrefcount(v) <= _ADAM_FREE:
        return LOWERINGS["adam_update_"](param, grad, m, v, lr, step, beta1, beta2, eps)
    return LOWERINGS["adam_update"](param, grad, m, v, lr, step, beta1, beta2, eps)

