"""`ug.cond` and `ug.while_loop`.

Eager: plain Python control flow on the current backend, with the same structure checks a
static graph needs (so code that passes on NumPy eager also passes on TF and Paddle).
Tracing: each branch/body is traced into a closed subgraph and becomes one `cond` or
`while_loop` node, which static backends turn into their own control-flow op.
"""

from __future__ import annotations

import contextlib
import contextvars
import sys

import numpy as np

from unigraph import api, config, pytree
from unigraph.dispatch import apply, symbolic, value_of
from unigraph.dtypes import is_int
from unigraph.errors import ControlFlowError, ControlFlowShapeError, TracingError
from unigraph.function import is_array_leaf
from unigraph.ops.base import TensorSpec
from unigraph.tensor import Tensor, tensor
from unigraph.tracing import (
    GraphBuilder,
    _builder,
    _region,
    current_builder,
    note_state,
    open_builders,
    region,
    user_frame,
    user_source,
)


def _leaf_type(x) -> tuple:
    if isinstance(x, Tensor):
        return (tuple(x.shape), x.dtype)
    array = np.asarray(x)
    return (array.shape, array.dtype.name)


def _type_text(leaf_type) -> str:
    shape, dtype = leaf_type
    return f"{dtype}{list(shape)}"


def fits_open(a: tuple, b: tuple) -> bool:
    """Whether shapes `a` and `b` can be one shape when the program runs: one rank, and
    each dim equal or left open (None) on one side. Eagerly both paths must agree; where a
    trace leaves a dim open, the sizes are only known then."""
    return len(a) == len(b) and all(x == y or x is None or y is None for x, y in zip(a, b))


def checked_shape(x, known: tuple, what: str, others=()):
    """`x`, checked when the program runs to have the dims of `known` that it leaves open,
    as each of `others` is (the `ensure_shape` op, raising `ControlFlowShapeError` with
    `what` then), and known from here on; `x` itself when none of them leaves one open."""
    if not any(k is not None and d is None for value in (x, *others)
               for k, d in zip(known, value.shape)):
        return x
    return apply("ensure_shape", [x, *others], {
        "shape": tuple(known), "message": f"{what}, a dim left open by input_spec (static "
        "graphs need the same shape and dtype on every path and iteration, as eagerly: cast "
        "or reshape so they match)"})


def known_shape(a: tuple, b: tuple) -> tuple:
    """The shape of a value that is `a` on one path and `b` on the other (`fits_open`)
    once each is checked to have the other's known dims: known wherever one is."""
    return tuple(y if x is None else x for x, y in zip(a, b))


def merged_shape(a: tuple, b: tuple) -> tuple:
    """The shape of a value that is `a` on one path and `b` on the other (`fits_open`):
    open (None) wherever they differ."""
    return tuple(x if x == y else None for x, y in zip(a, b))


def _check_same(what: str, names: tuple, first, second, open_dims=False) -> None:
    """Raise ControlFlowError unless two results have one structure, shapes and dtypes
    (with `open_dims`, shapes that `fits_open`: a traced cond's paths)."""
    if type(first) is tuple and type(second) is tuple and len(first) == len(second) and all(
            type(a) is Tensor and type(b) is Tensor and a.shape == b.shape and a.dtype == b.dtype
            for a, b in zip(first, second)):
        return  # the common case (a tuple of tensors), checked without flattening
    leaves_a, tree_a = pytree.flatten(first, is_array_leaf)
    leaves_b, tree_b = pytree.flatten(second, is_array_leaf)
    if tree_a != tree_b:
        where = user_source()
        said = (f"{what} at {where}: {names[0]} returns {pytree.describe(tree_a)} but "
                f"{names[1]} returns {pytree.describe(tree_b)}")
        reordered = pytree.reordered_keys(tree_a, tree_b)
        if reordered is not None:
            # Results are matched by position, and eagerly the dict that ran is returned as
            # it is: two orders would make the result's order depend on the path taken.
            order_a, order_b = (", ".join(map(repr, keys)) for keys in reordered)
            raise ControlFlowError(
                f"{said}: the same keys in another order ({order_a} in {names[0]}, {order_b} "
                f"in {names[1]}); a dict's key order counts, as part of the structure both "
                "must share: build both dicts with their keys in one order")
        raise ControlFlowError(f"{said}; both must return the same structure")
    for i, (a, b) in enumerate(zip(leaves_a, leaves_b)):
        type_a, type_b = _leaf_type(a), _leaf_type(b)
        if type_a == type_b or (open_dims and type_a[1] == type_b[1]
                                and fits_open(type_a[0], type_b[0])):
            continue
        where = user_source()
        # (one dtype, two shapes: a shape error too, as when a static run finds it)
        error = ControlFlowShapeError if type_a[1] == type_b[1] else ControlFlowError
        raise error(
            f"{what} at {where}: value {i} is {_type_text(type_a)} in {names[0]} "
            f"but {_type_text(type_b)} in {names[1]}; static graphs need the same "
            "shape and dtype (cast or reshape so they match)"
        )


# A subgraph nested deeper than this is unbounded recursion (each level of a recursive
# function traces both branches of its cond), reported before Python's RecursionError.
MAX_NESTING = 64
_REGION_OF = {"then": "cond", "else": "cond", "check": "cond", "cond": "while_loop",
              "body": "while_loop"}


def trace_subgraph(parent, name, fn, args, capture_eager=False):
    """Trace `fn(*args)` (args: TensorSpecs) into a closed subgraph; return (builder, result)."""
    builder = GraphBuilder(name, parent=parent, capture_eager=capture_eager)
    if builder.depth > MAX_NESTING:
        where, function_name = user_frame()
        raise TracingError(
            f"cond/while_loop nested more than {MAX_NESTING} deep at {where} (in "
            f"{function_name}): a recursion on a traced tensor never ends, because a static "
            "graph traces both branches of a cond whatever the value; make the argument that "
            "ends the recursion static (@ug.function(static_argnums=...)) or write the "
            "recursion as a ug.while_loop"
        )
    with builder, region(_REGION_OF.get(name, "cond")):
        inner = [symbolic(builder, builder.add_input(a.shape, a.dtype)) for a in args]
        result = fn(*inner)
    return builder, result


def _finish(builder, result, extra=()):
    """Set `builder`'s outputs to the leaves of `result` followed by `extra`."""
    leaves, treedef = pytree.flatten(result, is_array_leaf)
    with builder:
        builder.graph.outputs = [value_of(builder, x) for x in [*leaves, *extra]]
    return treedef


# -- predicates ---------------------------------------------------------------------------
def _describe(x) -> str:
    if isinstance(x, Tensor | np.ndarray | np.generic):
        return f"a {np.dtype(x.dtype).name}{list(np.shape(x))} tensor"
    return f"a Python {type(x).__name__} ({x!r})"


def _predicate(pred, what: str, frame):
    """`pred` if it is a bool scalar (Python, NumPy or tensor), else a ControlFlowError
    naming what it is, the user's line and the fix. Checked here, once, so that every
    target (eager included) accepts and refuses the same predicates."""
    if isinstance(pred, bool | np.bool_):
        return pred
    dtype = getattr(pred, "dtype", None)
    if isinstance(pred, Tensor | np.ndarray) and dtype == "bool":
        if tuple(pred.shape) in ((), (1,)):
            return pred
        raise ControlFlowError(
            f"{what} at {user_frame(frame)[0]}: the predicate must be a scalar, got shape "
            f"{list(pred.shape)}; reduce it first (ug.max, ug.min, ug.sum(...) > 0)"
        )
    raise ControlFlowError(
        f"{what} at {user_frame(frame)[0]}: the predicate is {_describe(pred)}, but it must "
        "be a bool scalar on every target; compare it (`pred != 0`) or cast it "
        "(`ug.cast(pred, 'bool')`)"
    )


# -- cond ---------------------------------------------------------------------------------
# `_region.set` and `_region.reset`, bound once (~0.5 k instructions less a call than
# looking the method up on the ContextVar): an eager cond and while_loop mark their region.
_enter_region = _region.set
_leave_region = _region.reset
# _branches_key(...) of the conds checked -> the objects whose ids the key holds
_checked_branches: dict = {}


def cond(pred, true_fn, false_fn, *operands):
    """`true_fn(*operands)` if `pred` else `false_fn(*operands)`.

    `pred` is a bool scalar: a tensor (a `cond` node when traced), or a Python/NumPy bool
    (then plain Python: only the branch taken runs). Any other dtype is a ControlFlowError
    on every target: write `pred != 0`. Both branches must return the same structure of
    tensors with equal shapes and dtypes, in every mode. In a static graph this is one
    `cond` node (tf.cond, paddle's static.nn.cond, an `if` in torch's generated code).

    >>> ug.cond(x > y, lambda: x + y, lambda: x - y)
    """
    frame = sys._getframe(1)
    # An eager bool scalar (the common case) goes straight to the eager cond below.
    if type(pred) is not Tensor or pred._value is not None or pred.dtype != "bool" or \
            pred.shape not in _SCALAR_SHAPES:
        pred = _predicate(pred, "cond", frame)
        builder = current_builder()
        if isinstance(pred, Tensor) and pred.is_symbolic and builder is not None:
            return _traced_cond(builder, pred, true_fn, false_fn, operands)
        if not isinstance(pred, Tensor):  # a Python value: Python's `if`, in every mode
            return (true_fn if pred else false_fn)(*operands)
    # A concrete predicate: the branch taken runs (inside the `cond` region), then the other
    # is traced abstractly, once per signature, to check it would give the same structure
    # (so that code passing here passes on every static target). Here, not in a function of
    # its own: a Python call less in every eager cond.
    taken, other = (true_fn, false_fn) if pred.__bool__() else (false_fn, true_fn)
    token = _enter_region(("cond", frame))  # `region("cond", frame)`, without its object
    try:
        result = taken(*operands)
    finally:
        _leave_region(token)
    if not open_builders or _builder.get() is None:  # (no trace open: no ContextVar read)
        key = _branches_key(taken, other)
        if operands:  # (most conds pass none: no list made for them on every call)
            key += tuple([_leaf_type(x) for x in operands if is_array_leaf(x)])
        if key not in _checked_branches:
            _check_untaken_branch(taken, other, operands, result, key)
    return result


_SCALAR_SHAPES = ((), (1,))  # the shapes a predicate may have


def _branches_key(taken, other) -> tuple:
    """What decides the structures the two branches return: the code of each and the type
    of what its closure holds, each cell's entries in one flat tuple: a tensor's shape and
    dtype (two entries: a tuple, then a str), else the type of what it holds (one: a type),
    None for an empty cell. A code object fixes how many cells follow it, and each cell's
    first entry says whether a second follows, so the flat tuple is unambiguous. Each
    function's code by id: hashing a code object hashes its bytecode (~0.2 us, twice for
    every eager cond), and `_checked_branches` keeps the code objects of every key it
    holds alive, so an id in a stored key is never another object's. When the other
    branch's cells are the taken one's own (two lambdas of one function over the same
    variables: `lambda: x + y`, `lambda: x - y`), they hold the same values, and are not
    read twice: the key then ends after the taken branch's cells, where a key of that code
    pair with both closures in it goes on."""
    try:  # a Python function (a lambda, a def): its attributes read directly
        signature = [id(taken.__code__), id(other.__code__)]
        cells = taken.__closure__
        others = other.__closure__
    except AttributeError:  # another callable: itself stands for its code
        signature = [id(getattr(taken, "__code__", taken)),
                     id(getattr(other, "__code__", other))]
        cells = getattr(taken, "__closure__", None)
        others = getattr(other, "__closure__", None)
    # One run of cells: the taken branch's, then the other's unless they are the same
    # cells (compared by index, and the two groups joined into one tuple: ~0.25 us less
    # than zip() and a loop over each group).
    if cells is None:
        cells = others
    elif others is not None:
        if len(cells) == len(others):
            index = 0
            for cell in cells:
                if cell is not others[index]:
                    cells += others
                    break
                index += 1
        else:
            cells += others
    if cells is None:
        return tuple(signature)
    append = signature.append
    for cell in cells:
        try:
            content = cell.cell_contents
        except ValueError:  # an empty cell (a variable assigned later)
            append(None)
            continue
        if type(content) is Tensor or isinstance(content, Tensor):
            append(content.shape)
            append(content.dtype)
        else:
            append(type(content))
    return tuple(signature)


def _check_untaken_branch(taken, other, operands, result, key):
    """Trace the branch not taken, abstractly (nothing runs), and compare its result; then
    note `key` (`_branches_key` and the operands' types) as checked."""
    specs = [TensorSpec(*_leaf_type(x)) for x in operands]
    _, other_result = trace_subgraph(None, "check", other, specs, capture_eager=True)
    names = ("the branch taken", "the other branch")
    _check_same("cond", names, result, other_result)
    # the value keeps alive the objects whose ids the key holds (see _branches_key)
    _checked_branches[key] = (getattr(taken, "__code__", taken), getattr(other, "__code__", other))


def _traced_cond(builder, pred, true_fn, false_fn, operands):
    operands = [x if isinstance(x, Tensor) else tensor(x) for x in operands]
    specs = [TensorSpec(x.shape, x.dtype) for x in operands]
    then_builder, then_result = trace_subgraph(builder, "then", true_fn, specs)
    else_builder, else_result = trace_subgraph(builder, "else", false_fn, specs)
    _check_same("cond", ("true_fn", "false_fn"), then_result, else_result, open_dims=True)
    then_result, else_result = _checked_paths(then_builder, then_result, else_builder,
                                              else_result)
    return emit_cond(builder, pred, operands, (then_builder, then_result),
                     (else_builder, else_result))


def _checked_paths(then_builder, then_result, else_builder, else_result):
    """The results of a traced ug.cond's paths (`fits_open`), each value's dims that one
    path leaves open and the other knows checked when the program runs (`checked_shape`):
    eagerly the branch not taken is traced and must give the same shapes. The cond's value
    then has those dims known."""
    then_leaves, treedef = pytree.flatten(then_result, is_array_leaf)
    else_leaves, _ = pytree.flatten(else_result, is_array_leaf)
    where = user_source()
    for i, (a, b) in enumerate(zip(then_leaves, else_leaves)):
        if not isinstance(a, Tensor) or not isinstance(b, Tensor) or a.shape == b.shape:
            continue
        what = (f"cond at {where}: value {i} is {_type_text(_leaf_type(a))} in true_fn but "
                f"{_type_text(_leaf_type(b))} in false_fn")
        known = known_shape(tuple(a.shape), tuple(b.shape))
        with then_builder:
            then_leaves[i] = checked_shape(a, known, what)
        with else_builder:
            else_leaves[i] = checked_shape(b, known, what)
    return pytree.unflatten(treedef, then_leaves), pytree.unflatten(treedef, else_leaves)


def emit_cond(builder, pred, operands, then_branch, else_branch):
    """Add one `cond` node to `builder` from two traced branches, each (builder, result)
    with matching results; return the node's outputs in the results' structure."""
    (then_builder, then_result), (else_builder, else_result) = then_branch, else_branch
    # A loop inside a branch reports running past the iteration limit through an extra
    # int64 output (see _traced_while), taken by the graph around the cond.
    flagged = bool(then_builder.loop_flags or else_builder.loop_flags)
    flags = [[_loop_flag(b)] if flagged else [] for b in (then_builder, else_builder)]
    treedef = _finish(then_builder, then_result, flags[0])
    _finish(else_builder, else_result, flags[1])
    captured = then_builder.share_captures([else_builder])
    inputs = [value_of(builder, pred)] + [value_of(builder, x) for x in [*operands, *captured]]
    # (a dim one path knows and the other leaves open is open: its size is the run's)
    out_specs = [TensorSpec(merged_shape(tuple(a.shape), tuple(b.shape)), a.dtype)
                 for a, b in zip(then_builder.graph.outputs, else_builder.graph.outputs)]
    outs = builder.add_node("cond", inputs, out_specs, {},
                            {"then": then_builder.graph, "else": else_builder.graph})
    results = [symbolic(builder, v) for v in outs]
    if flagged:
        builder.loop_flags.append(results.pop())
    return pytree.unflatten(treedef, results)


# -- the loop-iteration guard -------------------------------------------------------------
_loop_limit_override: contextvars.ContextVar = contextvars.ContextVar(
    "unigraph_loop_limit", default=None)


def max_loop_iterations() -> int | None:
    """The most iterations any while_loop may run before raising ControlFlowError (None:
    no limit): `loop_limit(n)` if active, else `config.max_loop_iterations()` (the
    environment variable UNIGRAPH_MAX_LOOP_ITERATIONS, else `max_loop_iterations` in the
    config file, else 10,000,000). Static graphs bake it in when traced (a different
    limit traces again)."""
    override = _loop_limit_override.get()
    if override is None:
        # (the value config read, without its call: a static call with a loop checks it)
        return config._max_loop_iterations or config.max_loop_iterations()
    return override or None


@contextlib.contextmanager
def loop_limit(iterations: int | None):
    """Run the block with `max_loop_iterations` set to `iterations` (None or 0: no limit).

    >>> with unigraph.control_flow.loop_limit(1000):
    ...     f(x)            # a while_loop running past 1000 iterations raises
    """
    if iterations is not None and (isinstance(iterations, bool) or
                                   not isinstance(iterations, int | np.integer)):
        raise TypeError(f"loop_limit: expected a whole number of iterations, got "
                        f"{iterations!r}")
    token = _loop_limit_override.set(int(iterations or 0))
    try:
        yield
    finally:
        _loop_limit_override.reset(token)


def _traced_limit():
    """max_loop_iterations(), recorded as state the trace depends on."""
    limit = max_loop_iterations()
    note_state("max_loop_iterations", max_loop_iterations, limit, "max_loop_iterations")
    return limit


def loop_error(line: str, limit: int) -> ControlFlowError:
    return ControlFlowError(
        f"while_loop at {line} ran more than {limit:,} iterations (max_loop_iterations), so "
        "it may never end: check its condition, pass maximum_iterations=N to stop it after "
        "N iterations, or raise the limit (UNIGRAPH_MAX_LOOP_ITERATIONS, max_loop_iterations "
        "in the config file, or `with unigraph.control_flow.loop_limit(n):`)"
    )


def _loop_flag(builder):
    """One int64 scalar for all the loop flags of `builder` (0: every loop stayed within
    the limit), as a tensor of `builder`'s graph."""
    if current_builder() is not builder:
        with builder:
            return _loop_flag(builder)
    if not builder.loop_flags:
        return tensor(np.int64(0))
    flag = builder.loop_flags[0]
    for other in builder.loop_flags[1:]:
        flag = api.maximum(flag, other)
    return flag


# -- while_loop ---------------------------------------------------------------------------
def _call(fn, loop_vars):
    return fn(*loop_vars) if isinstance(loop_vars, tuple | list) else fn(loop_vars)


def while_loop(cond_fn, body_fn, loop_vars, maximum_iterations=None):
    """Repeat `loop_vars = body_fn(*loop_vars)` while `cond_fn(*loop_vars)` is true, and
    at most `maximum_iterations` times when given (as tf.while_loop).

    `loop_vars` is a tensor or a tuple/list/dict of them (unpacked into the calls for
    tuples and lists). `cond_fn` returns a bool scalar (anything else is a
    ControlFlowError on every target: write `x != 0`). The body must return the same
    structure, shapes and dtypes, in every mode. A loop that runs past
    `max_loop_iterations()` (10,000,000 unless configured) raises ControlFlowError naming
    its line, on every target. In a static graph this is one `while_loop` node
    (tf.while_loop, paddle's static.nn.while_loop, a `while` in torch's generated code).

    >>> ug.while_loop(lambda a, b: a < b, lambda a, b: (a + 2, b + 1), (a, b))
    >>> ug.while_loop(lambda x: x > 0, lambda x: x - 1, x, maximum_iterations=10)
    """
    frame = sys._getframe(1)
    if maximum_iterations is not None:
        maximum_iterations = _checked_maximum(maximum_iterations, frame)
    builder = _builder.get() if open_builders else None  # (no trace open: no read)
    if builder is None and type(loop_vars) is tuple:
        for x in loop_vars:  # (a loop, not all() over a generator: every eager loop asks)
            if type(x) is not Tensor or x._value is not None:
                break
        else:  # eager tensors already: nothing to convert
            token = _enter_region(("while_loop", frame))  # `region(...)`, without its object
            try:
                return _eager_while_tensors(cond_fn, body_fn, loop_vars, maximum_iterations,
                                            frame)
            finally:
                _leave_region(token)
    leaves, treedef = pytree.flatten(loop_vars, is_array_leaf)
    leaves = [x if isinstance(x, Tensor) else tensor(x) for x in leaves]
    loop_vars = pytree.unflatten(treedef, leaves)
    if builder is None:
        with region("while_loop", frame):
            return _eager_while(cond_fn, body_fn, loop_vars, maximum_iterations, frame)
    return _traced_while(builder, cond_fn, body_fn, leaves, treedef, maximum_iterations, frame)


def _checked_maximum(maximum, frame):
    if maximum is None:
        return None
    if isinstance(maximum, Tensor) and maximum.shape == () and is_int(maximum.dtype):
        return maximum if maximum.is_symbolic else int(maximum)
    if isinstance(maximum, int | np.integer) and not isinstance(maximum, bool) and maximum >= 0:
        return int(maximum)
    raise ControlFlowError(
        f"while_loop at {user_frame(frame)[0]}: maximum_iterations must be a whole number "
        f">= 0 (or an integer scalar tensor), got {_describe(maximum)}"
    )


def _going(pred, frame) -> bool:
    """Whether an eager while_loop goes on: `pred`, cond_fn's result, as a Python bool."""
    if type(pred) is Tensor and pred._value is None and pred.dtype == "bool" and \
            pred.shape in _SCALAR_SHAPES:
        return pred.__bool__()  # the common case: an eager bool scalar
    return bool(_predicate(pred, "while_loop cond_fn", frame))


def _eager_while(cond_fn, body_fn, loop_vars, maximum, frame):
    limit = max_loop_iterations()
    count = 0
    while maximum is None or count < maximum:
        if not _going(_call(cond_fn, loop_vars), frame):
            break
        if limit is not None and count >= limit:
            raise loop_error(user_frame(frame)[0], limit)
        new_vars = _call(body_fn, loop_vars)
        if isinstance(loop_vars, tuple) and isinstance(new_vars, list):
            new_vars = tuple(new_vars)
        _check_same("while_loop", ("loop_vars", "the body"), loop_vars, new_vars)
        loop_vars = new_vars
        count += 1
    return loop_vars


def _eager_while_tensors(cond_fn, body_fn, loop_vars: tuple, maximum, frame):
    """`_eager_while` of the common loop, a tuple of eager tensors: each iteration checks
    the body's result against the loop variables' first shapes and dtypes, inline, and
    goes through `_check_same` (which raises in the user's terms, or accepts what it
    accepts) only when that quick comparison fails. The same checks, in fewer steps: the
    (shape, dtype) equality is transitive, so matching the first iteration's types is
    matching the previous one's."""
    limit = max_loop_iterations()
    shapes = [x.shape for x in loop_vars]
    dtypes = [x.dtype for x in loop_vars]
    size = len(shapes)
    # The iterations that run with one test of the count: up to the fewer of `maximum` and
    # the limit (then the `else` below says which stopped the loop).
    stop = sys.maxsize if maximum is None and limit is None else \
        maximum if limit is None or (maximum is not None and maximum <= limit) else limit
    count = 0
    while count < stop:
        pred = cond_fn(*loop_vars)
        # `_going`, inline for a bool scalar (a Python call less per iteration; a traced
        # one's `__bool__` raises as `_going`'s `bool()` does)
        if type(pred) is Tensor and pred.dtype == "bool" and pred.shape in _SCALAR_SHAPES:
            if not pred.__bool__():
                break
        elif not _going(pred, frame):
            break
        new_vars = body_fn(*loop_vars)
        if type(new_vars) is list:
            new_vars = tuple(new_vars)
        same = type(new_vars) is tuple and len(new_vars) == size
        if same:  # a loop, not all() over a generator: every iteration asks
            index = 0  # (an index, not zip() and unpacking: ~0.1 us less an iteration)
            for x in new_vars:
                # (no (shape, dtype) tuple made for each variable of every iteration)
                if type(x) is not Tensor or x.dtype != dtypes[index] or \
                        x.shape != shapes[index]:
                    same = False
                    break
                index += 1
        if not same:
            # Raises, or accepts (a tuple, since loop_vars is one): e.g. Python numbers of
            # the loop variables' dtypes, as `_eager_while` accepts them.
            _check_same("while_loop", ("loop_vars", "the body"), loop_vars, new_vars)
        loop_vars = new_vars
        count += 1
    else:  # `stop` iterations ran: at `maximum` the loop ends; at the limit, if it goes on
        if (maximum is None or count < maximum) and _going(cond_fn(*loop_vars), frame):
            raise loop_error(user_frame(frame)[0], limit)
    return loop_vars


def _traced_while(builder, cond_fn, body_fn, leaves, treedef, maximum, frame):
    """One `while_loop` node. With a limit or `maximum`, an int64 iteration counter is
    carried after the loop variables: the condition also asks `counter < maximum` and
    `counter <= limit`, and after the loop `counter > limit` becomes this loop's flag (see
    GraphBuilder.loop_flags), which the function checks after the run. A loop nested in
    the body that ran past the limit sets the counter to minus its flag, which ends this
    loop too and hands the flag on."""
    limit = _traced_limit()
    counted = limit is not None or maximum is not None
    specs = [TensorSpec(x.shape, x.dtype) for x in leaves]
    count = len(specs)
    rebuild = lambda *xs: pytree.unflatten(treedef, list(xs))  # noqa: E731
    counter_spec = [TensorSpec((), "int64")] if counted else []
    inner_flags = []
    if counted:
        # Constants of the enclosing graph, captured: not rebuilt in every iteration.
        def constant(value):
            return symbolic(builder, builder.constant(np.asarray(value, np.int64)))

        zero, one = constant(0), constant(1)
        stop = constant(limit) if limit is not None else None
        most = constant(maximum) if isinstance(maximum, int) else maximum

    def body(*xs):
        result = _checked_body(_call(body_fn, rebuild(*xs[:count])), xs[:count], frame)
        if not counted:
            return result, []
        counter = xs[count] + one
        if current_builder().loop_flags:
            inner = _loop_flag(current_builder())
            inner_flags.append(inner)
            counter = counter * api.cast(api.equal(inner, 0), "int64") - inner
        return result, [counter]

    def loop_cond(*xs):
        pred = _predicate(_call(cond_fn, rebuild(*xs[:count])), "while_loop cond_fn", frame)
        pred = pred if isinstance(pred, Tensor) else tensor(np.bool_(pred))
        if counted:
            counter = xs[count]
            if maximum is not None:
                pred = api.logical_and(pred, counter < most)
            if limit is not None:
                pred = api.logical_and(pred, counter <= stop)
            if inner_flags:
                pred = api.logical_and(pred, counter >= zero)
        return pred

    # The body first: whether a loop inside it can report decides the condition.
    body_builder, (body_result, body_counter) = trace_subgraph(
        builder, "body", body, specs + counter_spec)
    if isinstance(body_result, list) and treedef[0] == "tuple":
        body_result = tuple(body_result)
    _check_same("while_loop", ("loop_vars", "the body"), rebuild(*specs_as_tensors(specs)),
                body_result, open_dims=True)  # (a dim open on one side: `_checked_body`)
    cond_builder, pred = trace_subgraph(builder, "cond", loop_cond, specs + counter_spec)
    _finish(cond_builder, pred)
    _finish(body_builder, body_result, body_counter)
    captured = cond_builder.share_captures([body_builder])
    inputs = [value_of(builder, x) for x in leaves]
    if counted:
        inputs.append(value_of(builder, zero))
    inputs += [value_of(builder, x) for x in captured]
    outs = builder.add_node("while_loop", inputs, specs + counter_spec,
                            {"num_carried": count + len(counter_spec)},
                            {"cond": cond_builder.graph, "body": body_builder.graph})
    results = [symbolic(builder, v) for v in outs]
    if limit is not None:
        counter = results[count]
        builder.root.loop_lines.append((user_frame(frame)[0], limit))
        flag = api.cast(counter > stop, "int64")
        if len(builder.root.loop_lines) > 1:
            flag = flag * len(builder.root.loop_lines)
        if inner_flags:
            flag = api.maximum(flag, api.cast(counter < 0, "int64") * -counter)
        builder.loop_flags.append(flag)
    return pytree.unflatten(treedef, results[:count])


def _checked_body(result, carried, frame):
    """A traced body's `result`, each value whose shape differs from its loop variable's
    (`carried`: the body's inputs) where one leaves a dim open (`fits_open`) checked when
    the program runs: the body's value and the loop variable it replaces must have the
    sizes either knows (`checked_shape`), as eagerly each iteration's result must have the
    loop variables' first shapes, and only when the body runs. Anything else as it is, for
    `_check_same` to judge."""
    leaves, treedef = pytree.flatten(result, is_array_leaf)
    if len(leaves) != len(carried):
        return result
    where = None
    for i, (x, old) in enumerate(zip(leaves, carried)):
        if isinstance(x, np.ndarray | np.generic) and x.shape != old.shape:
            x = leaves[i] = tensor(x)  # (a constant, as the graph's output would make it)
        if isinstance(x, Tensor) and x.dtype == old.dtype and x.shape != old.shape and \
                fits_open(tuple(old.shape), tuple(x.shape)):
            where = where or user_frame(frame)[0]
            what = (f"while_loop at {where}: value {i} is {_type_text(_leaf_type(old))} in "
                    f"loop_vars but {_type_text(_leaf_type(x))} in the body")
            leaves[i] = checked_shape(x, known_shape(tuple(old.shape), tuple(x.shape)), what,
                                      [old])
    return pytree.unflatten(treedef, leaves)


def specs_as_tensors(specs):
    return [Tensor(s.shape, s.dtype) for s in specs]
