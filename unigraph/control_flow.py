"""`ug.cond` and `ug.while_loop`.

Eager: plain Python control flow on the current backend, with the same structure checks a
static graph needs (so code that passes on NumPy eager also passes on TF and Paddle).
Tracing: each branch/body is traced into a closed subgraph and becomes one `cond` or
`while_loop` node, which static backends turn into their own control-flow op.
"""

from __future__ import annotations

import numpy as np

from unigraph import pytree
from unigraph.dispatch import symbolic, value_of
from unigraph.errors import ControlFlowError
from unigraph.function import is_array_leaf
from unigraph.ops.base import TensorSpec
from unigraph.tensor import Tensor, tensor
from unigraph.tracing import GraphBuilder, current_builder, user_source


def _leaf_type(x) -> tuple:
    if isinstance(x, Tensor):
        return (tuple(x.shape), x.dtype)
    array = np.asarray(x)
    return (array.shape, array.dtype.name)


def _type_text(leaf_type) -> str:
    shape, dtype = leaf_type
    return f"{dtype}{list(shape)}"


def _check_same(what: str, names: tuple, first, second) -> None:
    """Raise ControlFlowError unless two results have one structure, shapes and dtypes."""
    if type(first) is tuple and type(second) is tuple and len(first) == len(second) and all(
            type(a) is Tensor and type(b) is Tensor and a.shape == b.shape and a.dtype == b.dtype
            for a, b in zip(first, second)):
        return  # the common case (a tuple of tensors), checked without flattening
    leaves_a, tree_a = pytree.flatten(first, is_array_leaf)
    leaves_b, tree_b = pytree.flatten(second, is_array_leaf)
    if tree_a != tree_b:
        where = user_source()
        raise ControlFlowError(
            f"{what} at {where}: {names[0]} returns {pytree.describe(tree_a)} but {names[1]} "
            f"returns {pytree.describe(tree_b)}; both must return the same structure"
        )
    for i, (a, b) in enumerate(zip(leaves_a, leaves_b)):
        if _leaf_type(a) != _leaf_type(b):
            where = user_source()
            raise ControlFlowError(
                f"{what} at {where}: value {i} is {_type_text(_leaf_type(a))} in {names[0]} "
                f"but {_type_text(_leaf_type(b))} in {names[1]}; static graphs need the same "
                "shape and dtype (cast or reshape so they match)"
            )


def _trace_subgraph(parent, name, fn, args, capture_eager=False):
    """Trace `fn(*args)` (args: TensorSpecs) into a closed subgraph; return (builder, result)."""
    builder = GraphBuilder(name, parent=parent, capture_eager=capture_eager)
    with builder:
        inner = [symbolic(builder, builder.add_input(a.shape, a.dtype)) for a in args]
        result = fn(*inner)
    return builder, result


def _finish(builder, result):
    leaves, treedef = pytree.flatten(result, is_array_leaf)
    with builder:
        builder.graph.outputs = [value_of(builder, x) for x in leaves]
    return treedef


# -- cond ---------------------------------------------------------------------------------
_checked_branches: set = set()


def cond(pred, true_fn, false_fn, *operands):
    """`true_fn(*operands)` if `pred` else `false_fn(*operands)`.

    Both branches must return the same structure of tensors with equal shapes and dtypes,
    in every mode. In a static graph this is one `cond` node (tf.cond, paddle's
    static.nn.cond, an `if` in torch's generated code).

    >>> ug.cond(x > y, lambda: x + y, lambda: x - y)
    """
    if isinstance(pred, Tensor) and pred.shape not in ((), (1,)):
        raise ControlFlowError(
            f"cond at {user_source()}: the predicate must be a scalar, got shape "
            f"{list(pred.shape)}; reduce it with ug.all/ug.any-style ops (ug.max, ug.min)"
        )
    builder = current_builder()
    symbolic_pred = isinstance(pred, Tensor) and pred.is_symbolic
    if builder is None or not symbolic_pred:
        return _eager_cond(pred, true_fn, false_fn, operands)
    return _traced_cond(builder, pred, true_fn, false_fn, operands)


def _eager_cond(pred, true_fn, false_fn, operands):
    taken, other = (true_fn, false_fn) if bool(pred) else (false_fn, true_fn)
    result = taken(*operands)
    if current_builder() is None:
        _check_untaken_branch(taken, other, operands, result)
    return result


def _closure_signature(fn) -> tuple:
    cells = getattr(fn, "__closure__", None) or ()
    signature = []
    for cell in cells:
        try:
            content = cell.cell_contents
        except ValueError:
            content = None
        signature.append(_leaf_type(content) if isinstance(content, Tensor) else type(content))
    return (getattr(fn, "__code__", fn), tuple(signature))


def _check_untaken_branch(taken, other, operands, result):
    """Trace the branch not taken, abstractly (nothing runs), and compare its result."""
    key = (_closure_signature(taken), _closure_signature(other),
           tuple(_leaf_type(x) for x in operands if is_array_leaf(x)))
    if key in _checked_branches:
        return
    specs = [TensorSpec(*_leaf_type(x)) for x in operands]
    _, other_result = _trace_subgraph(None, "check", other, specs, capture_eager=True)
    names = ("the branch taken", "the other branch")
    _check_same("cond", names, result, other_result)
    _checked_branches.add(key)


def _traced_cond(builder, pred, true_fn, false_fn, operands):
    operands = [x if isinstance(x, Tensor) else tensor(x) for x in operands]
    specs = [TensorSpec(x.shape, x.dtype) for x in operands]
    then_builder, then_result = _trace_subgraph(builder, "then", true_fn, specs)
    else_builder, else_result = _trace_subgraph(builder, "else", false_fn, specs)
    _check_same("cond", ("true_fn", "false_fn"), then_result, else_result)
    return emit_cond(builder, pred, operands, (then_builder, then_result),
                     (else_builder, else_result))


def emit_cond(builder, pred, operands, then_branch, else_branch):
    """Add one `cond` node to `builder` from two traced branches, each (builder, result)
    with matching results; return the node's outputs in the results' structure."""
    (then_builder, then_result), (else_builder, else_result) = then_branch, else_branch
    treedef = _finish(then_builder, then_result)
    _finish(else_builder, else_result)
    captured = then_builder.share_captures([else_builder])
    inputs = [value_of(builder, pred)] + [value_of(builder, x) for x in [*operands, *captured]]
    out_specs = [TensorSpec(v.shape, v.dtype) for v in then_builder.graph.outputs]
    outs = builder.add_node("cond", inputs, out_specs, {},
                            {"then": then_builder.graph, "else": else_builder.graph})
    return pytree.unflatten(treedef, [symbolic(builder, v) for v in outs])


# -- while_loop ---------------------------------------------------------------------------
def _call(fn, loop_vars):
    return fn(*loop_vars) if isinstance(loop_vars, tuple | list) else fn(loop_vars)


def while_loop(cond_fn, body_fn, loop_vars):
    """Repeat `loop_vars = body_fn(*loop_vars)` while `cond_fn(*loop_vars)` is true.

    `loop_vars` is a tensor or a tuple/list/dict of them (unpacked into the calls for
    tuples and lists). The body must return the same structure, shapes and dtypes, in every
    mode. In a static graph this is one `while_loop` node (tf.while_loop, paddle's
    static.nn.while_loop, a `while` in torch's generated code).

    >>> ug.while_loop(lambda a, b: a < b, lambda a, b: (a + 2, b + 1), (a, b))
    """
    leaves, treedef = pytree.flatten(loop_vars, is_array_leaf)
    leaves = [x if isinstance(x, Tensor) else tensor(x) for x in leaves]
    loop_vars = pytree.unflatten(treedef, leaves)
    builder = current_builder()
    if builder is None:
        return _eager_while(cond_fn, body_fn, loop_vars)
    return _traced_while(builder, cond_fn, body_fn, leaves, treedef)


def _eager_while(cond_fn, body_fn, loop_vars):
    while bool(_call(cond_fn, loop_vars)):
        new_vars = _call(body_fn, loop_vars)
        if isinstance(loop_vars, tuple) and isinstance(new_vars, list):
            new_vars = tuple(new_vars)
        _check_same("while_loop", ("loop_vars", "the body"), loop_vars, new_vars)
        loop_vars = new_vars
    return loop_vars


def _traced_while(builder, cond_fn, body_fn, leaves, treedef):
    specs = [TensorSpec(x.shape, x.dtype) for x in leaves]
    rebuild = lambda *xs: pytree.unflatten(treedef, list(xs))  # noqa: E731
    cond_builder, pred = _trace_subgraph(builder, "cond", lambda *xs: _call(cond_fn, rebuild(*xs)),
                                         specs)
    if not isinstance(pred, Tensor) or pred.dtype != "bool" or pred.shape not in ((), (1,)):
        got = _type_text(_leaf_type(pred)) if isinstance(pred, Tensor) else type(pred).__name__
        raise ControlFlowError(
            f"while_loop at {user_source()}: cond_fn must return a bool scalar tensor, got {got}"
        )
    body_builder, body_result = _trace_subgraph(builder, "body",
                                                lambda *xs: _call(body_fn, rebuild(*xs)), specs)
    if isinstance(body_result, list) and treedef[0] == "tuple":
        body_result = tuple(body_result)
    _check_same("while_loop", ("loop_vars", "the body"), rebuild(*specs_as_tensors(specs)),
                body_result)
    _finish(cond_builder, pred)
    _finish(body_builder, body_result)
    captured = cond_builder.share_captures([body_builder])
    inputs = [value_of(builder, x) for x in [*leaves, *captured]]
    outs = builder.add_node("while_loop", inputs, specs, {"num_carried": len(leaves)},
                            {"cond": cond_builder.graph, "body": body_builder.graph})
    return pytree.unflatten(treedef, [symbolic(builder, v) for v in outs])


def specs_as_tensors(specs):
    return [Tensor(s.shape, s.dtype) for s in specs]
