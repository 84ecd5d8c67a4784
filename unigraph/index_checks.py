"""Out-of-range indices: one error on every target (issue 12 item 11).

The semantics, written in the op records (`take`, `sparse_softmax_cross_entropy`): a `take`
index outside [-n, n) of its axis (the frontend maps a negative one to n + i, so the op
itself takes [0, n)) and a label outside [0, C) are an `IndexOutOfRangeError` naming the op,
the bad value as the user wrote it, the axis size, the target and the user's line. Never a
wrapped read, never a framework's own error.

Where the check happens:

* eager targets and torch:static (Python code): the lowering looks at the indices before
  the native gather (`check_indices`) and raises at once; the user's line is the caller's;
* graph targets: the check is part of the native graph (TensorFlow: `tf.debugging.Assert`
  carrying `MARKER`; Paddle static and onnxruntime: the gather itself refuses, after
  negative values are moved out of the range the framework would wrap), so the run fails
  with the framework's error; `translate_run_error` turns that error into ours, with the
  line of the op in the graph that ran (`Executable.run` calls it).

>>> ug.take(ug.tensor([1.0, 2.0, 3.0]), [5])
IndexOutOfRangeError: take on numpy:eager at model.py:12: index 5 is out of range for size 3 ...
"""

from __future__ import annotations

import re

import numpy as np

from unigraph.errors import IndexOutOfRangeError

TAKE = "take"
CROSS_ENTROPY = "sparse_softmax_cross_entropy"
CHECKED_OPS = (TAKE, CROSS_ENTROPY)

# The text a graph-mode check carries in its failure (TensorFlow's Assert prints it).
MARKER = "unigraph-index-check"


def user_index(op: str, value: int, size) -> int:
    """The index as the user wrote it, from the value the op saw: a negative value reaching
    `take` was a user's index below -n that the frontend moved up by n."""
    if op == TAKE and value < 0 and size is not None:
        return int(value) - int(size)
    return int(value)


def first_bad(indices: np.ndarray, size: int):
    """The first value of `indices` outside [0, size), or None."""
    flat = np.asarray(indices).reshape(-1)
    bad = np.flatnonzero((flat < 0) | (flat >= size))
    return int(flat[bad[0]]) if bad.size else None


def refuse(op: str, value: int, size, axis=None, where: str | None = None):
    """Raise the error for `value` (as the op saw it) on the current target."""
    from unigraph.config import current_target
    from unigraph.tracing import user_source

    raise IndexOutOfRangeError(
        op, user_index(op, value, size), size, axis=axis if op == TAKE else None,
        target=str(current_target()), where=user_source() if where is None else where,
    ) from None


def check_indices(op: str, indices: np.ndarray, size: int, axis=None) -> None:
    """Raise `IndexOutOfRangeError` when `indices` (NumPy, as the op saw them) has a value
    outside [0, size). For Python-side checks: eager lowerings, the reference, torch."""
    value = first_bad(indices, size)
    if value is not None:
        refuse(op, value, size, axis)


# -- the framework's failure, translated ---------------------------------------------------
# (op, kind, pattern), pattern with groups "value" (as printed) and "size" (and "op", "axis").
# kind "seen": the value the op saw (TensorFlow's Assert prints it); kind "moved": a
# framework's own gather refusal of a value that a lowering moved out of range (every
# negative i became i - size, see MOVED_OUT), or of a value >= size.
_PATTERNS = [
    # TensorFlow: tf.debugging.Assert(ok, [f"{MARKER} op=... axis=...", size, value])
    (None, "seen", re.compile(MARKER + r" op=(?P<op>\w+) axis=(?P<axis>-?\d+)\]? "
                                       r"\[(?P<size>\d+)\] \[(?P<value>-?\d+)\]")),
    # Paddle gather (take): too large, too small
    (TAKE, "moved", re.compile(r"input dim size of axis which is (?P<size>\d+), but received "
                               r"index element which is (?P<value>-?\d+)")),
    (TAKE, "moved", re.compile(r"greater than or equal to -(?P<size>\d+), but received index "
                               r"element which is (?P<value>-?\d+)")),
    # Paddle index_select (take from an axis of unknown size: its gather checks nothing at 0)
    (TAKE, "moved", re.compile(r"OP\(index_select\) expected >= -?(?P<size>\d+) and < \d+, "
                               r"but got (?P<value>-?\d+)")),
    # Paddle take_along_axis (cross-entropy labels)
    (CROSS_ENTROPY, "moved", re.compile(r"expected >= -(?P<size>\d+) and < \d+, but got "
                                        r"(?P<value>-?\d+)")),
    # onnxruntime Gather (take; the cross-entropy labels' check is a Gather too)
    (None, "moved", re.compile(r"Gather node.*idx=(?P<value>-?\d+) must be within the "
                               r"inclusive range \[-?(?P<size>\d+),", re.S)),
]

# The rule each graph lowering applies before a framework gather that would wrap a
# negative index: value < 0 becomes value - size.
MOVED_OUT = "value < 0 -> value - size"


def translate_run_error(error: BaseException, executable) -> IndexOutOfRangeError | None:
    """The `IndexOutOfRangeError` that a failed run of `executable` means, or None when
    `error` is not an index check's. Names `executable.target` and the line of the op in
    `executable.graph` (each line, when several ops could have failed)."""
    graph = executable.graph
    if isinstance(error, IndexOutOfRangeError):
        op, value, size, axis = error.op, error.index, error.size, error.axis
    else:
        found = _parse(str(error))
        if found is None:
            return None
        op, kind, value, size, axis = found
        if op is None:  # onnxruntime: one Gather wording for both ops
            nodes = _matching(graph, TAKE, axis, size) or _matching(graph, CROSS_ENTROPY,
                                                                    axis, size)
            op = nodes[0].op if nodes else TAKE
        if kind == "seen":
            value = user_index(op, value, size)
        elif op == CROSS_ENTROPY and value < 0:
            value += size  # labels are not moved by the frontend: undo the lowering's move
    nodes = _matching(graph, op, axis, size)
    if op == TAKE:
        value = _counted_from_end(graph, nodes, value)
    lines = []
    for node in nodes:
        if node.source and node.source not in lines:
            lines.append(node.source)
    return IndexOutOfRangeError(
        op, value, size, axis=axis if op == TAKE else None,
        target=getattr(executable, "target", ""),
        where=" or ".join(lines) or getattr(error, "where", ""))


def _parse(text: str):
    for op, kind, pattern in _PATTERNS:
        match = pattern.search(text)
        if match is None:
            continue
        groups = match.groupdict()
        axis = groups.get("axis")
        return (groups.get("op") or op, kind, int(groups["value"]), int(groups["size"]),
                None if axis is None else int(axis))
    return None


def _counted_from_end(graph, takes: list, value: int) -> int:
    """The user's x[i] for `value`, the row a failed `take` read: i when every one of
    `takes` reads row `value` = -i - 1 of a slice x[i:] (how `x[i]` takes a negative i
    along a dim of unknown size n: the row exists only when -n <= i; see
    `unigraph.api.indexing._open_dim_index`), else `value` itself."""
    from unigraph.ops.indexing import TO_END

    producers = {out.id: node for node in graph.walk() for out in node.outputs}
    for node in takes:
        axis = node.attrs.get("axis")
        sliced, rows = (producers.get(operand.id) for operand in node.inputs[:2])
        if sliced is None or rows is None or (sliced.op, rows.op) != ("slice", "constant"):
            return value
        last = np.asarray(rows.attrs["value"]).reshape(-1)[-1:]
        if (last.tolist() != [value] or sliced.attrs["begin"][axis] != -value - 1
                or sliced.attrs["end"][axis] != TO_END):
            return value
    return -value - 1 if takes else value


def _matching(graph, op: str, axis, size) -> list:
    """The `op` nodes that may have failed: their axis and size agree with the failure's."""
    found = []
    for node in graph.nodes_of(op):
        node_axis = node.attrs.get("axis") if op == TAKE else len(node.inputs[0].shape) - 1
        if op == TAKE and axis is not None and node_axis != axis:
            continue
        dim = node.inputs[0].shape[node_axis]
        if size is None or dim is None or dim == size:
            found.append(node)
    return found
