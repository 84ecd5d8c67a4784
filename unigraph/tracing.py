"""Tracing: turning Python calls on symbolic tensors into an IR graph.

A `GraphBuilder` records nodes into one `Graph`. Subgraphs (branches of `cond`, bodies of
`while_loop`, the function of `grad`) get their own builder whose parent is the enclosing
one; when code inside uses a value from outside, the builder *captures* it: it becomes an
explicit input of the subgraph, and the outer value becomes an operand of the node. That
keeps every subgraph closed, which is what TF, Paddle and torch codegen all want.
"""

from __future__ import annotations

import contextvars
import os
import sys

import numpy as np

from unigraph.ir import Graph, Node, Value

_builder: contextvars.ContextVar = contextvars.ContextVar("unigraph_builder", default=None)
# The builders entered and not yet exited, in any thread: empty, no context has a builder
# set, so a @ug.function call skips reading `_builder` (one list test, not a ContextVar read
# on every static call). (A list: append and remove are atomic under the GIL.)
open_builders: list = []
# (kind, user line) of the innermost tensor cond / while_loop / grad being run or traced.
_region: contextvars.ContextVar = contextvars.ContextVar("unigraph_region", default=None)
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
_SKIP_DIRS = (_PACKAGE_DIR, os.path.dirname(contextvars.__file__))
# The built-in backends' packages: their frames (e.g. eager_grad calling back into the
# user's function) are unigraph's, not the user's.
_BACKEND_DIRS = tuple(f"{os.sep}unigraph_{name}{os.sep}"
                      for name in ("numpy", "torch", "tensorflow", "paddle", "onnxruntime"))


def current_builder():
    return _builder.get()


def user_source() -> str:
    """file:line of the innermost frame outside unigraph (the user's line)."""
    return user_frame(sys._getframe(1))[0]


def user_frame(frame=None) -> tuple[str, str]:
    """(file:line, function name) of the innermost frame outside unigraph, from `frame`
    (default: the caller's) outwards."""
    frame = _outside(frame or sys._getframe(1))
    if frame is None:
        return "", ""
    return f"{_short(frame.f_code.co_filename)}:{frame.f_lineno}", frame.f_code.co_name


def user_code(frame=None):
    """The code of the innermost frame outside unigraph from `frame` (default: the
    caller's) outwards, or None."""
    frame = _outside(frame or sys._getframe(1))
    return None if frame is None else frame.f_code


def _outside(frame, stops=None):
    """The innermost frame outside unigraph from `frame` outwards, or None; with `stops`
    (a container of frames), the first frame in it if that comes first."""
    internal = _INTERNAL_FILES
    while frame is not None:
        if stops and frame in stops:
            return frame
        filename = frame.f_code.co_filename
        skip = internal.get(filename)
        if skip is None:
            skip = _is_internal(filename)
        if not skip:
            return frame
        frame = frame.f_back
    return None


# file name -> whether its frames are unigraph's own: every traced node asks user_frame,
# which walks ~10 of them (tracing a 300-op model asked the string tests 3,000 times)
_INTERNAL_FILES: dict = {}


def _is_internal(filename: str) -> bool:
    skip = bool(filename.startswith(_SKIP_DIRS) or filename.startswith("<frozen")
                or any(part in filename for part in _BACKEND_DIRS))
    if len(_INTERNAL_FILES) > 4096:  # generated code has many names: keep the table small
        _INTERNAL_FILES.clear()
    _INTERNAL_FILES[filename] = skip
    return skip


# True while the body of a @ug.function runs eagerly: what a trace refuses (seeding the
# generator) is refused there too, so eager and static accept the same programs. (Set by
# eager_grad; an eager @ug.function call is found by its frame, `eager_body_codes`.)
_in_function: contextvars.ContextVar = contextvars.ContextVar("unigraph_in_function",
                                                              default=False)
# The code objects of the methods that run a @ug.function's body eagerly: a frame of one
# of them on the stack is a body running. Asked only by `in_function` (seeding), where a
# ContextVar set and reset around every eager call cost ~3 k instructions of each.
eager_body_codes: set = set()


def in_function() -> bool:
    """True inside a `@ug.function` body, traced or running eagerly."""
    if _in_function.get() or _builder.get() is not None:
        return True
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code in eager_body_codes:
            return True
        frame = frame.f_back
    return False


def current_region():
    """(kind, file:line) of the innermost tensor `cond` branch, `while_loop` or
    differentiated function running (eagerly) or being traced, else None. Kinds: "cond",
    "while_loop", "grad". A static graph cannot assign a parameter there, so no mode may."""
    entry = _region.get()
    return None if entry is None else (entry[0], user_frame(entry[1])[0])


class region:
    """Mark the code run inside as the inside of a `kind` construct; its user line is found
    from `frame` (default: the caller's) only if an error needs it. (A class, not a
    generator: eager tensor loops enter one per iteration.)"""

    __slots__ = ("_value", "_token")

    def __init__(self, kind: str, frame=None):
        self._value = (kind, frame or sys._getframe(1))

    def __enter__(self):
        self._token = _region.set(self._value)
        return self

    def __exit__(self, *exc_info):
        _region.reset(self._token)
        return False


def note_state(key, read, value, description: str) -> None:
    """Record, in the graph being traced (if any), that the trace depends on Python state:
    `read()` returned `value`. A static function keeps one compiled graph per such state
    and retraces when `read()` returns something else (a Module's `training` flag, the
    loop-iteration limit). `key` identifies the state (one entry per key); `description`
    names it in messages, e.g. "Dropout 'drop'.training"."""
    builder = _builder.get()
    if builder is not None:
        builder.root.state.setdefault(key, (read, value, description))


def _short(filename: str, cwd: str | None = None) -> str:
    """A path relative to the working directory (`cwd`, default: os.getcwd()) when it lies
    below it."""
    cwd = os.getcwd() if cwd is None else cwd
    if filename.startswith(cwd + os.sep):
        return filename[len(cwd) + 1:]
    return filename


class GraphBuilder:
    """Records nodes into `self.graph`.

    capture_eager: when True (abstract checking of an untaken eager branch), eager tensors
    from outside become subgraph inputs instead of constants.
    """

    def __init__(self, name: str, parent: GraphBuilder | None = None, capture_eager=False):
        self.graph = Graph(name)
        self.parent = parent
        self._root = None if parent is None else parent.root  # (see `root`)
        self.depth = 0 if parent is None else parent.depth + 1
        self.capture_eager = capture_eager
        self.explicit_inputs: list = []  # inputs given by the caller, before any captures
        self.captured: dict = {}  # key -> (outer Tensor or Parameter, inner Value)
        self.param_objects: list = []  # Parameter objects, parallel to graph.params
        self._params: dict = {}  # id(Parameter) -> its Value (root only)
        self.random_inputs: list = []  # inputs fed with fresh random draws, after the args
        self.updates: dict = {}  # param Value -> new Value (graph.updates when done)
        self._assigned: dict = {}  # param key -> its newest Value, after ug.assign
        # Root only: Python state the trace read, key -> (read, value, description); see
        # note_state. And the user lines of the while_loops, for the loop guard.
        self.state: dict = {}
        self.loop_lines: list = []
        # int64 scalars, nonzero when a while_loop in this graph ran past the iteration
        # limit: the number (1-based) of that loop in root.loop_lines. See control_flow.
        self.loop_flags: list = []
        self._cwd = None  # root only: the working directory, read once per trace
        # running frames of unigraph's -> the user's line beyond them (None until a node
        # asks); one table per trace, shared by its subgraphs (see mark_call)
        self._marked: dict = {} if parent is None else parent._marked

    @property
    def root(self) -> GraphBuilder:
        """The outermost builder, of the function being traced. (Not an attribute holding
        itself: that reference cycle kept every finished trace, its graph and its parameters'
        values, until the cyclic garbage collector ran, ~2,000 objects a 100-layer model.)"""
        return self if self.parent is None else self._root

    def __enter__(self):
        self._token = _builder.set(self)
        open_builders.append(self)
        return self

    def __exit__(self, *exc):
        _builder.reset(self._token)
        open_builders.remove(self)

    # -- values ---------------------------------------------------------------------------
    def add_input(self, shape, dtype, name="") -> Value:
        value = Value(shape, dtype, name)
        self.graph.inputs.append(value)
        self.explicit_inputs.append(value)
        return value

    def assign_param(self, param, value: Value) -> None:
        """Record `param <- value` (a graph update); later reads of `param` see `value`."""
        key = ("param", id(param))
        self._assigned.pop(key, None)
        self.updates[self.value_of_param(param)] = value
        self._assigned[key] = value

    def add_random_input(self, shape, dtype) -> Value:
        """An input that each run feeds with fresh uniform draws (see unigraph.random)."""
        value = Value(shape, dtype, f"random{len(self.random_inputs)}")
        self.random_inputs.append(value)
        return value

    def add_node(self, op: str, inputs: list, specs: list, attrs=None, subgraphs=None,
                 own_frames: int = 1) -> list:
        """Record op `op` of `inputs` (Values) with outputs of `specs`; returns the output
        Values. `own_frames`: how many of the innermost calls leading here are unigraph's
        own code (at least add_node's caller): the walk for the node's user line starts
        beyond them. (Each frame it looks at is a Python frame object made: ~0.25 us.)"""
        if len(specs) == 1:  # (most ops: no list comprehension's call)
            spec = specs[0]
            outputs = [Value(spec.shape, spec.dtype)]
        else:
            outputs = [Value(s.shape, s.dtype) for s in specs]
        # The user's line for the node. Every traced node asks, from ~15 frames deep (a third
        # of tracing a 100-layer model), so the walk starts beyond add_node's caller
        # (unigraph's own code), stops at the innermost running call marked by `mark_call`
        # (a layer's), whose answer is found once per call, and the working directory is
        # read once per trace (os.getcwd() took ~0.5 us a node).
        try:
            frame = sys._getframe(1 + own_frames)  # (0: here, then unigraph's own frames)
        except ValueError:  # (a caller at the bottom of the stack)
            source = ""
        else:
            source = self._user_line(frame)
            del frame
        self.graph.nodes.append(Node(op, list(inputs), outputs, dict(attrs) if attrs else {},
                                     dict(subgraphs) if subgraphs else {}, source))
        return outputs

    def _user_line(self, frame) -> str:
        marked = self._marked
        frame = _outside(frame, marked)
        if frame is None:
            return ""
        if frame in marked:
            line = marked[frame]
            if line is None:  # its first node: the walk goes on beyond it, once
                line = marked[frame] = self._user_line(frame.f_back)
            return line
        root = self.root
        if root._cwd is None:
            root._cwd = os.getcwd()
        return f"{_short(frame.f_code.co_filename, root._cwd)}:{frame.f_lineno}"

    def mark_call(self, frame) -> None:
        """Note that `frame`, a running frame of unigraph's own (`Module.__call__`), is a
        stop for the walk of `add_node`: while it runs, the frames beyond it wait in
        their calls, so the user's line beyond it is the same for every node added inside
        it. Call `unmark_call(frame)` before it returns (the table holds no finished frame).
        """
        self._marked[frame] = None

    def unmark_call(self, frame) -> None:
        self._marked.pop(frame, None)

    def constant(self, array: np.ndarray) -> Value:
        from unigraph.ops.base import TensorSpec

        spec = TensorSpec(array.shape, array.dtype.name)
        return self.add_node("constant", [], [spec], {"value": array})[0]

    def value_of_param(self, param) -> Value:
        """The value standing for Parameter `param` in this graph (captured if nested)."""
        if self.parent is None and not self.capture_eager:  # (the root captures nothing)
            if self._assigned:
                value = self._assigned.get(("param", id(param)))
                if value is not None:  # read after ug.assign: the new value, as in eager mode
                    return value
            value = self._params.get(id(param))  # (keyed by the id alone: ~2 reads a layer)
            if value is None:
                name = param.name or f"param{len(self.graph.params)}"
                value = self._params[id(param)] = Value(param.shape, param.dtype, name)
                self.graph.params.append(value)
                self.param_objects.append(param)
            return value
        key = ("param", id(param))
        if key in self.captured:
            return self.captured[key][1]
        return self._capture(key, param)

    def value_of_symbolic(self, tensor) -> Value:
        """The value standing for symbolic `tensor` (from this or an enclosing builder)."""
        if tensor._builder is self:
            return tensor._value
        key = ("value", tensor._value.id)
        if key in self.captured:
            return self.captured[key][1]
        if self.parent is None:
            raise_foreign(tensor)
        return self._capture(key, tensor)

    def value_of_eager(self, tensor) -> Value:
        if not self.capture_eager:
            return self.constant(tensor.numpy())
        key = ("eager", id(tensor))
        if key in self.captured:
            return self.captured[key][1]
        return self._capture(key, tensor)

    def _capture(self, key, outer) -> Value:
        value = Value(outer.shape, outer.dtype, "captured")
        self.captured[key] = (outer, value)
        return value

    def share_captures(self, siblings: list) -> list:
        """Give this builder and its `siblings` one common list of captured objects (each
        captures what any of them captured, in one order) and set every subgraph's inputs
        to its explicit inputs followed by those captures. Returns the outer objects."""
        union: dict = {}
        for builder in (self, *siblings):
            for key, (outer, _) in builder.captured.items():
                union.setdefault(key, outer)
        for builder in (self, *siblings):
            for key, outer in union.items():
                if key not in builder.captured:
                    builder._capture(key, outer)
            inner = [builder.captured[key][1] for key in union]
            builder.graph.inputs = builder.explicit_inputs + inner
        return list(union.values())


# Why a static target cannot do what Python does with a value made in a branch or loop
# body (here and in autograph's refusal of a list grown there).
TRACES_BRANCHES = "traces both branches once, whichever runs"
TRACES_BODY = "traces the body once, whatever the number of trips"
# A subgraph builder's name -> (where its values live, why they leave it only as its
# results, what to write instead), for raise_foreign.
_BRANCH = ("a branch of a cond", TRACES_BRANCHES,
           "assign it to a variable in both branches (`y = v` / `y = other`) and use that")
_LOOP = (TRACES_BODY, "fill a tensor the loop carries "
         "(`buf = buf.at[i].set(v)`), or loop over range(n) with a Python int n, which runs as "
         "Python")
_MADE_IN = {"then": _BRANCH, "else": _BRANCH, "body": ("the body of a while loop", *_LOOP),
            "cond": ("the condition of a while loop", *_LOOP)}


def raise_foreign(tensor) -> None:
    from unigraph.errors import TracingError

    builder = tensor._builder
    region = _MADE_IN.get(builder.graph.name) if builder is not None else None
    if region is not None:
        made_in, why, fix = region
        made_at = next((f" at {node.source}" for node in builder.graph.nodes
                        if tensor._value in node.outputs and node.source), "")
        raise TracingError(
            f"a symbolic tensor ({tensor.dtype}{list(tensor.shape)}) made inside {made_in}"
            f"{made_at} (ug.cond / ug.while_loop, or a Python if / while on a tensor, which "
            f"becomes one) was used outside it, here ({user_source()}). A value leaves a loop "
            "or a branch only as a variable it assigns; one kept elsewhere (appended to a "
            f"Python list, stored on an object) cannot, because a static target {why}. "
            f"Instead, {fix}"
        )
    raise TracingError(
        f"a symbolic tensor ({tensor.dtype}{list(tensor.shape)}) from another traced function "
        f"was used here ({user_source()}); symbolic tensors only live inside the function "
        "that traced them: return it and pass it in as an argument instead"
    )
