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
  carrying `MARKER` and the message; Paddle: a reshape to -2 - each size, ONNX: a Reshape
  to each size + 1, where the run's sizes differ), so the run fails with the framework's
  error, and `translate_check_error` turns that into ours (`Executable._translated` calls
  it).

>>> v = ug.while_loop(lambda i, v: i < 2, lambda i, v: (i + 1, v + x), (i, v))  # x [None, 3]
ControlFlowShapeError: while_loop at model.py:7: value 1 is float32[1, 3] in loop_vars but
float32[None, 3] in the body, a dim left open by input_spec; when the program ran it had
shape [2, 3]. ...
"""

from __future__ import annotations

import re

from unigraph.errors import ControlFlowShapeError

OP = "ensure_shape"

# The text a graph-mode check carries in its failure (TensorFlow's Assert prints it).
MARKER = "unigraph-shape-check"


def differs(expected: tuple, actual: tuple) -> bool:
    """Whether a run's shape `actual` breaks `expected` (None: any size there)."""
    return len(expected) != len(actual) or any(
        want is not None and want != got for want, got in zip(expected, actual))


def shape_check_error(message: str, actual=None) -> ControlFlowShapeError:
    """The error of a failed check: the trace's `message`, and the shape the run gave
    (`actual`; None where the framework did not say)."""
    ran = "another shape" if actual is None else f"shape {[int(d) for d in actual]}"
    return ControlFlowShapeError(
        f"{message}; when the program ran it had {ran}. Static graphs need the same shape "
        "and dtype on every path and iteration, as eagerly (cast or reshape so they match)")


def check(x, *others, shape: tuple, message: str):
    """The `ensure_shape` op run in Python (its reference, torch's lowering, the eager
    lowerings): `x`, or the error when its shape or one of `others`' breaks `shape`."""
    for value in (x, *others):
        actual = tuple(value.shape)
        if differs(tuple(shape), actual):
            raise shape_check_error(message, actual)
    return x


# -- the framework's failure, translated ---------------------------------------------------
_FAILURES = re.compile(
    re.escape(MARKER)  # TensorFlow's Assert
    + r"|ReshapeOp must not be negative"  # Paddle's reshape to -2 - each size
    + r"|Reshape.*cannot be reshaped", re.S)  # ONNX Runtime's Reshape to each size + 1
_SHAPES_AFTER = re.compile(r"(?:\s*\]?\s*\[[\d ]*\])+")
_SHAPE = re.compile(r"\[([\d ]*)\]")
_NEGATED_SHAPE = re.compile(r"ReshapeOp must not be negative.*?received\s+shape = \[([-\d, ]*)\]",
                            re.S)
_RESHAPED = re.compile(r"cannot be reshaped.*?Input shape:\{([\d,]*)\}", re.S)


def translate_check_error(error: BaseException, executable) -> ControlFlowShapeError | None:
    """The `ControlFlowShapeError` a failed run of `executable` means when one of its
    `ensure_shape` nodes failed, or None. Names the failed node's message where the
    framework's text holds it (TensorFlow), else every check's, and the shape the run gave
    where the text holds it."""
    checks = executable.graph.nodes_of(OP)
    if not checks or isinstance(error, ControlFlowShapeError):
        return None
    text = str(error)
    if not _FAILURES.search(text):
        return None
    for node in checks:
        message = node.attrs["message"]
        at = text.find(f"{MARKER} {message}")
        if at >= 0:  # the Assert's data: the message, then each checked value's shape
            found = _SHAPES_AFTER.match(text, at + len(MARKER) + 1 + len(message))
            shapes = [tuple(int(d) for d in dims.split())
                      for dims in _SHAPE.findall(found.group(0) if found else "")]
            bad = [shape for shape in shapes if differs(node.attrs["shape"], shape)]
            return shape_check_error(message, bad[0] if bad else None)
    messages = []
    for node in checks:
        if node.attrs["message"] not in messages:
            messages.append(node.attrs["message"])
    negated = _NEGATED_SHAPE.search(text)  # Paddle's: -2 - each size
    reshaped = _RESHAPED.search(text)  # ONNX Runtime's
    actual = ([-2 - int(d) for d in negated.group(1).split(",")] if negated else
              [int(d) for d in reshaped.group(1).split(",")] if reshaped else None)
    return shape_check_error(" or ".join(messages), actual)
