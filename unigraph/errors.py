"""Errors raised by unigraph, each phrased in the user's terms."""


class UnigraphError(Exception):
    """Base class of every error unigraph raises on purpose."""


class ShapeError(UnigraphError, ValueError):
    """An op received inputs whose shapes or dtypes it cannot take."""


class TracingError(UnigraphError):
    """Python code did something with a symbolic tensor that a static graph cannot express."""


class ControlFlowError(UnigraphError):
    """A `cond` or `while_loop` was given branches or bodies that do not match."""


class ControlFlowShapeError(ControlFlowError, ShapeError):
    """A `cond`'s paths or a `while_loop`'s iterations give one value two shapes: eagerly,
    or when a static program runs and a dim left open by `input_spec` decides."""


class BackendError(UnigraphError):
    """A backend or mode is unknown, not installed, or cannot run what it was given."""


class GraphError(UnigraphError):
    """A graph is not well formed (found by `Graph.verify`)."""


class ConfigError(UnigraphError, ValueError):
    """A setting (environment variable or config file key) has a value unigraph cannot use."""


class ConfigWarning(UserWarning):
    """A config file holds something unigraph ignores (an unknown, perhaps misspelt, key)."""


class IndexOutOfRangeError(UnigraphError, IndexError):
    """An index (of `take`, integer-array indexing, a cross-entropy label) lies outside its
    axis, found when the op ran: on an eager target at the call, on a static one during
    the run. Names the op, the bad value, the axis size, the target and the user's line.

    `index`: the bad value as the user wrote it (a negative `take` index counts from the
    end); `size`: the axis size (None when the graph does not know it); `where`: the
    user's file:line of the op, or of the call that ran the graph.
    """

    def __init__(self, op: str, index: int, size, *, axis=None, target: str = "",
                 where: str = ""):
        self.op, self.index, self.size, self.axis = op, index, size, axis
        self.target, self.where = target, where
        super().__init__(_out_of_range_text(op, index, size, axis, target, where))

    def __reduce__(self):  # crosses process boundaries (the checker's isolated workers)
        return _rebuild_out_of_range, (self.op, self.index, self.size, self.axis,
                                       self.target, self.where)


def _rebuild_out_of_range(op, index, size, axis, target, where):
    return IndexOutOfRangeError(op, index, size, axis=axis, target=target, where=where)


def _out_of_range_text(op, index, size, axis, target, where) -> str:
    on = f" on {target}" if target else ""
    at = f" at {where}" if where else ""
    n = "n" if size is None else size
    if op == "sparse_softmax_cross_entropy":
        return (f"{op}{on}{at}: label {index} is out of range for {n} classes; every label "
                f"must lie in [0, {n}) (check the labels, or the logits' last dimension)")
    axis_text = "" if axis is None else f" of axis {axis}"
    return (f"{op}{on}{at}: index {index} is out of range for size {n}{axis_text}; an index "
            f"must lie in [-{n}, {n}) (a negative one counts from the end): check the "
            "indices, or clip them with ug.clip")
