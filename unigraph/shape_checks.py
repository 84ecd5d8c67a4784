"""A `cond`'s paths and a `while_loop`'s iterations give one shape: checked when a static
program runs where a dim left open by `input_spec` decides.

Eagerly every shape is known, and `ug.cond` (the branch not taken, traced abstractly) and
`ug.while_loop` (each iteration against the loop variables' first shapes) raise
`ControlFlowShapeError` where two differ. A trace may know a dim on one side and leave it
open on the other (a loop variable made [1, 3] inside the function, a body result `v + x`
with x [None, 3]); the trace then keeps the known dim, and the value on the open side goes
through an `ensure_shape` node (`ug.ensure_shape`, its record in unigraph/ops/shape.py),
which raises that error when the program runs and the sizes differ, as eagerly:

* the NumPy engine, torch and the eager lowerings: the op raises it at once, its message
  (made while tracing: the op, the user's line, the values) completed by the shape the run
  gave (`shape_check_error`);
* graph targets: the check is part of the native graph (TensorFlow: `tf.debugging.Assert`
  carrying `MARKER` and the message; Paddle: a reshape to -2 - (each size * TAGS + the
  check's tag), ONNX: a Reshape named by `MARKER` and the tag to each size + 1, where the
  run's sizes differ), so the run fails with the framework's error, and
  `translate_check_error` turns that into ours, naming the check that failed
  (`Executable._translated` calls it).

A static run takes one path of a cond, so the other path's check does not run, where
eagerly the branch not taken is traced and raises: a @ug.function call of a graph with
checked paths first checks every path's shapes for its inputs' shapes (`check_before_run`,
once per input shape, in `Executable.run`: every run of a compiled graph, the checker's
included; a while_loop's condition and body on the loop variables' first shapes, which
every iteration keeps: a body that a run never enters is checked all the same, where
eagerly it checks nothing).

The same call-time walk checks the ops whose shape rule refuses sizes only a run knows
(`RULE_CHECKED`: a max, min or argmax over an open axis a run gives 0 elements, a reshape to
-1 of open dims that does not divide): eagerly a `ShapeError`, where a static run's
framework raised its own error or returned -inf; the rule, given the run's shapes, raises
eager's error on every static target, naming the target and the user's line.

>>> v = ug.while_loop(lambda i, v: i < 2, lambda i, v: (i + 1, v + x), (i, v))  # x [None, 3]
ControlFlowShapeError: while_loop at model.py:7: value 1 is float32[1, 3] in loop_vars but
float32[None, 3] in the body, a dim left open by input_spec (static graphs need the same
shape and dtype on every path and iteration, ...); when the program ran it had shape [2, 3].
"""

from __future__ import annotations

import re
import zlib

from unigraph.errors import ControlFlowShapeError, ShapeError

OP = "ensure_shape"

# The ops whose shape rule refuses sizes that only a run knows where eagerly it raises
# `ShapeError` (a max or min over an empty axis, a reshape whose -1 does not divide, an
# `ensure_size` of too few elements: BatchNorm's training): a
# static run of such a node over a dim left open by `input_spec` is checked before it runs,
# by the same rule, for the run's shapes (`check_before_run`). TensorFlow and ONNX Runtime
# return -inf for a max of nothing, the other frameworks each raise their own error.
# (Not a max with `initial` -inf, `ug.logsumexp`'s shift: over nothing it is -inf.)
RULE_CHECKED = ("max", "min", "argmax", "reshape", "ensure_size")

# The text a graph-mode check carries in its failure (TensorFlow's Assert prints it; an
# ONNX check's Reshape is named by it).
MARKER = "unigraph-shape-check"

# How many tags there are (`check_tag`): Paddle's refused shape holds size * TAGS + tag, so
# a size up to 2**43 fits its int64.
TAGS = 2 ** 20


def check_tag(message: str) -> int:
    """The number that names the check of `message` in a failure whose text cannot hold the
    message (Paddle's refused shape, ONNX Runtime's failed node's name): the same in every
    process, so `translate_check_error` finds the check by it. Two checks of one message
    share it (they mean one thing); two messages sharing one is a 1 in TAGS chance, and
    then the error names both.

    >>> check_tag("one row")  # == check_tag("one row"), another number for "two rows"
    """
    return zlib.crc32(message.encode()) % TAGS


def differs(expected: tuple, actual: tuple) -> bool:
    """Whether a run's shape `actual` breaks `expected` (None: any size there)."""
    return len(expected) != len(actual) or any(
        want is not None and want != got for want, got in zip(expected, actual))


def shape_check_error(message: str, actual=None) -> ControlFlowShapeError:
    """The error of a failed check: the trace's `message`, and the shape the run gave
    (`actual`; None where the framework did not say)."""
    ran = "another shape" if actual is None else f"shape {[int(d) for d in actual]}"
    return ControlFlowShapeError(f"{message}; when the program ran it had {ran}.")


def check(x, *others, shape: tuple, message: str):
    """The `ensure_shape` op run in Python (its reference, torch's lowering, the eager
    lowerings): `x`, or the error when its shape or one of `others`' breaks `shape`."""
    for value in (x, *others):
        actual = tuple(value.shape)
        if differs(tuple(shape), actual):
            raise shape_check_error(message, actual)
    return x


def check_size(x, *, axes: tuple, minimum: int, message: str, multiple: int = 1):
    """The `ensure_size` op: `x`, or a `ShapeError` with `message` and x's shape where its
    dims `axes` hold fewer than `minimum` elements, or a count that `multiple` does not
    divide (`ug.split` by a count along an open dim; its shape rule, its reference and
    every backend's lowering). A dim a graph leaves open (None; Paddle's -1) is not checked
    here: `check_before_run` checks it, for the run's shapes, before the run."""
    sizes = [x.shape[a] for a in axes]
    if all(size is not None and size >= 0 for size in sizes):
        count = 1
        for size in sizes:
            count *= int(size)
        if count < minimum or count % multiple:
            raise ShapeError(f"{message}, got an input of shape {list(x.shape)}")
    return x


# -- the framework's failure, translated ---------------------------------------------------
_SHAPES_AFTER = re.compile(r"(?:\s*\]?\s*\[[\d ]*\])+")
_SHAPE = re.compile(r"\[([\d ]*)\]")
# Paddle's reshape to -2 - (each size * TAGS + tag)
_NEGATED_SHAPE = re.compile(r"ReshapeOp must not be negative.*?received\s+shape = \[([-\d, ]*)\]",
                            re.S)
# ONNX Runtime's Reshape of a check to each size + 1, the node named by MARKER and the tag
_RESHAPED = re.compile(r"Name:'_" + re.escape(MARKER) + r"-(\d+)-\d+'.*?cannot be reshaped"
                       r".*?Input shape:\{([\d,]*)\}", re.S)


def _tagged_failure(text: str) -> tuple:
    """(the failed check's tag, the shape the run gave) that Paddle's or ONNX Runtime's
    error `text` holds, or (None, None) where no check of theirs failed."""
    negated = _NEGATED_SHAPE.search(text)
    if negated:
        coded = [-2 - int(d) for d in negated.group(1).split(",")]
        return coded[0] % TAGS, [d // TAGS for d in coded]
    reshaped = _RESHAPED.search(text)
    if reshaped:
        return int(reshaped.group(1)), [int(d) for d in reshaped.group(2).split(",")]
    return None, None


def translate_check_error(error: BaseException, executable) -> ControlFlowShapeError | None:
    """The `ControlFlowShapeError` a failed run of `executable` means when one of its
    `ensure_shape` nodes failed, or None (another failure, an unrelated Reshape's
    included). Names the failed check's message (TensorFlow's text holds it, Paddle's and
    ONNX Runtime's its tag) and the shape the run gave."""
    checks = executable.graph.nodes_of(OP)
    if not checks or isinstance(error, ControlFlowShapeError):
        return None
    text = str(error)
    if MARKER in text:
        for node in checks:
            message = node.attrs["message"]
            at = text.find(f"{MARKER} {message}")
            if at >= 0:  # the Assert's data: the message, then each checked value's shape
                found = _SHAPES_AFTER.match(text, at + len(MARKER) + 1 + len(message))
                shapes = [tuple(int(d) for d in dims.split())
                          for dims in _SHAPE.findall(found.group(0) if found else "")]
                bad = [shape for shape in shapes if differs(node.attrs["shape"], shape)]
                return shape_check_error(message, bad[0] if bad else None)
    tag, actual = _tagged_failure(text)
    messages = []
    for node in checks:  # (an Assert whose message the text did not hold: each check's)
        message = node.attrs["message"]
        if (tag is None and MARKER in text or check_tag(message) == tag) and \
                message not in messages:
            messages.append(message)
    return shape_check_error(" or ".join(messages), actual) if messages else None


# -- the path a static run does not take ---------------------------------------------------
# Eagerly `ug.cond` traces the branch not taken and raises where its value has another
# shape; a static run takes one path, and the check of the other does not run. Every shape
# is a function of the inputs' shapes, so the paths' shapes for a run's inputs are found
# without running either, from the op records' shape rules (once per input shape).
def needs_check_before_run(graph, in_path: bool = False) -> bool:
    """Whether a `cond` of `graph` (`in_path`: `graph` is one's path), or of one of its
    subgraphs, has a checked path (a value of a dim the trace leaves open and the other
    path knows), or a `RULE_CHECKED` node reads such a dim: `check_before_run` then has work.
    (One pass, no list: every compile asks.)"""
    for node in graph.nodes:
        op = node.op
        # (`_rule_checked`'s first test inline: a 300-node model made 300 calls for nothing)
        if in_path and op == OP or op in RULE_CHECKED and _rule_checked(node):
            return True
        if node.subgraphs and any(needs_check_before_run(sub, in_path or node.op == "cond")
                                  for sub in node.subgraphs.values()):
            return True
    return False


def check_before_run(graph, shapes: list, target: str = "") -> None:
    """Raise the `ControlFlowShapeError` eager raises where, for inputs of `shapes`, a check
    in a `cond`'s path (the path not taken included) fails, a `grad`'s function's conds
    included, and a while_loop's condition's and body's on the loop variables' first
    shapes (eagerly a body that never runs checks nothing; here it is checked all the
    same). Raise the `ShapeError` eager raises, naming `target`
    and the op's line, where a `RULE_CHECKED` node's rule refuses the sizes. A shape the
    rules cannot find (an op without one) is left to the run, and so is everything after a
    node outside a cond's paths whose check fails or whose rule refuses the sizes: the run,
    as eager, raises that node's error first.

    >>> check_before_run(graph, [(2, 3)])  # cond(p, lambda: x * 2, lambda: z): x [None, 3]
    ControlFlowShapeError: cond at model.py:7: value 0 is float32[None, 3] in true_fn ...
    """
    known = {value.id: tuple(shape) for value, shape in zip(graph.inputs, shapes)}
    known.update((value.id, tuple(value.shape)) for value in graph.params)
    try:
        _path_shapes(graph, known, False, target)
    except _RunFailsFirst:  # (the run raises first, as eager: its error, not a later one)
        pass


class _RunFailsFirst(Exception):
    """A node outside a cond's paths whose check fails or whose rule refuses the sizes: the
    run (as eager) fails there, before any later check; `check_before_run` leaves it to the
    run rather than raise a later node's error first."""


def _rule_checked(node) -> bool:
    """Whether `node` is a `RULE_CHECKED` op reading a dim left open by `input_spec`: any
    of a reshape's, a reduced one of a max's (but one with `initial`), min's or argmax's."""
    if node.op not in RULE_CHECKED or node.attrs.get("initial") is not None:
        return False
    shape = node.inputs[0].shape
    if node.op == "reshape":  # (not one to sizes computed from x: they always fit)
        return None in shape and len(node.inputs) == 1
    if node.op == "ensure_size":
        return any(shape[a] is None for a in node.attrs["axes"])
    axis = node.attrs.get("axis")
    axes = range(len(shape)) if axis is None else axis if isinstance(axis, tuple) else (axis,)
    return any(shape[a] is None for a in axes)


def _path_shapes(graph, known: dict, in_path: bool, target: str = "") -> list:
    """The shape of each of `graph`'s outputs (None: not found), `known` holding its
    inputs' (a value's id -> shape); with `in_path` (a cond's path), its checks raise;
    without, a failing check or a refusal stops the walk (`_RunFailsFirst`)."""
    from unigraph.ops import OPS
    from unigraph.ops.base import TensorSpec
    from unigraph.ops.shape import resolved_shape

    for node in graph.nodes:
        shapes = [known.get(value.id) for value in node.inputs]
        found = None
        if node.op == "cond":
            paths = [_path_shapes(sub, dict(zip([v.id for v in sub.inputs], shapes[1:])), True,
                                  target)
                     for sub in (node.subgraphs["then"], node.subgraphs["else"])]
            found = [a if a == b else None for a, b in zip(*paths)]
        elif node.op == "while_loop":
            # Every iteration's loop variables have their first shapes (the node's inputs):
            # the condition and the body are walked once on them (the body's own checks,
            # the iterations', fail in the run first; its conds' paths and rule-checked ops
            # raise as eagerly at its first iteration).
            for sub in (node.subgraphs["cond"], node.subgraphs["body"]):
                _path_shapes(sub, dict(zip([v.id for v in sub.inputs], shapes)), False, target)
            found = shapes[:node.attrs["num_carried"]]
        elif node.op == "grad":  # (the function differentiated, on the node's inputs)
            sub = node.subgraphs["fn"]
            _path_shapes(sub, dict(zip([v.id for v in sub.inputs], shapes)), in_path, target)
        elif node.op == "reshape" and len(node.inputs) == 2:
            found = None  # (its sizes are values, known only when the program runs)
        elif node.op in OPS and None not in shapes:
            if node.op == OP:
                for shape in shapes:
                    if differs(node.attrs["shape"], shape):
                        if not in_path:  # (the run checks it, in its place)
                            raise _RunFailsFirst
                        raise shape_check_error(node.attrs["message"], shape)
            try:
                attrs = node.attrs
                if node.op == "reshape" and _rule_checked(node):  # (its -1, resolved as eagerly)
                    attrs = {"shape": resolved_shape(shapes[0], attrs["shape"])}
                specs = OPS[node.op].infer(*[TensorSpec(shape, value.dtype) for shape, value
                                             in zip(shapes, node.inputs)], **attrs)
                found = [tuple(spec.shape) for spec in
                         (specs if isinstance(specs, list | tuple) else [specs])]
            except ShapeError as error:
                if _rule_checked(node):  # eager's error
                    raise ShapeError(f"{error} (on {target} at {node.source or '?'})") from None
                if not in_path:
                    raise _RunFailsFirst from None
                found = None
            except Exception:  # noqa: BLE001 (left to the run, which fails or not)
                found = None
        for i, value in enumerate(node.outputs):
            shape = found[i] if found is not None and i < len(found) else None
            if shape is None and None not in value.shape:
                shape = tuple(value.shape)
            known[value.id] = shape
    return [known.get(value.id) for value in graph.outputs]
