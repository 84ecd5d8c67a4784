"""`@ug.function`: run op by op on an eager target, or trace once per input signature into
the IR, compile on the backend, cache, and execute on a static target."""

from __future__ import annotations

import contextlib
import contextvars
import copy
import functools
import inspect
import threading
import types
import warnings
import weakref
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np

from unigraph import config, plugins, pytree, random
from unigraph.config import Target, current_target
from unigraph.dispatch import backend_of, context_target, symbolic, value_of
from unigraph.errors import ShapeError, TracingError
from unigraph.ir import Graph, check_dtype
from unigraph.tensor import (
    Parameter,
    Tensor,
    as_array,
    dtype_name,
    eager_tensor,
    eager_tensor_lines,
    tensor,
)
from unigraph.tracing import (
    GraphBuilder,
    _builder,
    current_builder,
    current_region,
    eager_body_codes,
    open_builders,
    user_source,
)


def is_array_leaf(x) -> bool:
    """Arguments that become tensor inputs; everything else is a static (Python) argument."""
    return isinstance(x, Tensor | np.ndarray | np.generic | bool | int | float)


def as_input_tensor(x) -> Tensor:
    return x if isinstance(x, Tensor) else tensor(x)


def leaf_spec(x) -> tuple:
    if isinstance(x, Tensor):
        return (x.shape, x.dtype)
    if isinstance(x, np.ndarray | np.generic):
        return (x.shape, check_dtype(x.dtype))
    return ((), "bool" if isinstance(x, bool) else "int64" if isinstance(x, int) else "float32")


class RetraceWarning(UserWarning):
    """A `@ug.function` was traced again and again on one target (see `function`)."""


# A static function warns (once) when one target has traced it more than this many times,
# and keeps at most MAX_CACHED compiled graphs (least recently used dropped first).
RETRACE_WARNING = 8
MAX_CACHED = 64

# (id(Function), abstract call) of the Functions being traced right now, innermost last:
# a call that repeats one of them would trace forever.
_tracing_calls: contextvars.ContextVar = contextvars.ContextVar("unigraph_tracing_calls",
                                                                default=())


class StaticArgument:
    """A `static_argnums`/`static_argnames` value inside an argument tree: compared and
    hashed by value (so it is part of the cache key), never a tensor."""

    __slots__ = ("value", "key")

    def __init__(self, value):
        self.value = value
        self.key = (type(value), value)

    def __eq__(self, other):
        return isinstance(other, StaticArgument) and self.key == other.key

    def __hash__(self):
        return hash(self.key)

    def __repr__(self):
        return f"{self.value!r} (static)"


def _abstract_key(args, kwargs) -> tuple:
    """The call as tracing sees it: tensors by shape and dtype, anything else by value."""
    leaves, treedef = pytree.flatten(
        (args, kwargs), lambda x: isinstance(x, Tensor | np.ndarray | np.generic))
    return treedef, tuple((tuple(x.shape), str(x.dtype)) for x in leaves)


def _leaf_text(x) -> str:
    shape, dtype = leaf_spec(x)
    return f"{dtype}{list(shape)}"


def _render(tree) -> str:
    if isinstance(tree, tuple | list):
        inner = ", ".join(_render(x) for x in tree)
        return f"({inner})" if isinstance(tree, tuple) else f"[{inner}]"
    if isinstance(tree, dict):
        return "{" + ", ".join(f"{k!r}: {_render(v)}" for k, v in tree.items()) + "}"
    return tree if isinstance(tree, str) else repr(tree)


@dataclass
class Compiled:
    """One cache entry: the traced graph, its executable and bound parameters."""

    graph: Graph
    executable: object
    params: list  # Parameter objects, parallel to graph.params
    loaded: list  # the version of each parameter the executable holds (-1: none)
    out_treedef: object
    updated: list  # indices into params of the parameters the graph updates
    randoms: list  # (shape, dtype) of the random inputs fed after the arguments
    state: list = field(default_factory=list)  # (read, value): Python state the trace read
    loop_lines: list = field(default_factory=list)  # (line, limit) of each guarded loop
    key: tuple = ()  # its key in Function._cache
    # How the outputs come back: "leaf" (one tensor), "tuple" (a flat tuple of tensors), or
    # None (any other tree: pytree.unflatten).
    out_shape: str | None = None
    # (shape, dtype) of each output when none has an unknown dim, else None (see _wrap).
    out_types: list | None = None
    # Where a random input has an open dim: the run's argument leaves -> each random input's
    # (shape, dtype) for their shapes (`Function._draw_shapes`); else None.
    draw_shapes: object = None


@dataclass
class Trace:
    """What tracing a function produced (see `Function.trace_full`)."""

    graph: Graph
    params: list
    out_treedef: object
    random_inputs: list
    state: dict  # key -> (read, value, description), see tracing.note_state
    loop_flag: object  # Value: nonzero when a guarded loop ran past its limit, or None
    loop_lines: list


class Function:
    """A function that runs on whatever target is current. See `function`."""

    def __init__(self, fn, name=None, autograph=True, static_argnums=(), static_argnames=(),
                 input_spec=None):
        # A function's attributes come along (functools.wraps); a callable object's (a
        # Module's parameters, children, `training`) do not: copies would go stale.
        functools.update_wrapper(self, fn, updated=functools.WRAPPER_UPDATES
                                 if isinstance(fn, types.FunctionType) else ())
        self.fn = fn
        self.name = name or getattr(fn, "__name__", "function")
        self.autograph = autograph
        self._conversion = None  # autograph.Conversion, made on first call
        # The argument names that messages use; an exporter wrapping a Module's call sets
        # them from `forward`'s signature.
        self.argument_names = parameter_names(fn)
        # (No static arguments, the usual case, checks nothing: eager training makes a
        # ug.value_and_grad Function every step.)
        none = static_argnums == () and static_argnames == ()  # (0 is argument 0: not none)
        self._static_positions, self._static_names = (frozenset(), frozenset()) if none else \
            self._static_arguments(static_argnums, static_argnames)
        self.input_spec = input_specs(input_spec)
        # (call key, Python state values) -> Compiled, least recently used first; and
        # call key -> its Compiled entries (one per state, e.g. training and eval).
        self._cache: OrderedDict = OrderedDict()
        self._variants: dict = {}
        self._traces: dict = {}  # target -> how many times it traced this function
        self._last_signature: dict = {}  # target -> description of the latest trace
        self._warned = False
        self._lock = threading.Lock()
        # The common static call, positional tensors or NumPy arrays of a signature seen
        # before: (backend, mode, (type, shape, dtype) of each argument) -> its entry's
        # generated caller (`_caller`; _ONCE after the signature's first call), found
        # without flattening or building the general key (see `_fast_key`). Only for
        # functions without static arguments or input_spec (those need the general path);
        # emptied whenever the cache changes, and the entry's Python state is still checked
        # on every call.
        self._fast: dict = {}
        # Each entry's generated callers (`_caller`), made once whatever the cache gains or
        # drops meanwhile: its key in `_cache` -> {fast key -> caller}. (Not kept in the
        # Compiled entry: a caller refers to its entry, and a cycle would keep an evicted
        # or dropped executable until the cyclic GC runs.)
        self._callers: dict = {}
        self._fast_ok = not (self._static_positions or self._static_names
                             or self.input_spec is not None)
        # The latest call a `_fast` caller answered: (target, plugins.generation, the
        # caller). A call on the same Target object (the one `use_backend`/`set_backend`
        # made; its backend is the one the caller was made for while no plugin changed)
        # runs the caller without building or hashing its key: the caller compares the
        # arguments with its key's types itself (`_caller`). Replaced whole (one
        # assignment), and forgotten with `_fast`. After an eager call of positional
        # tensors or arrays, (target, plugins.generation, None): the next such call with
        # tensors only runs without looking up the backend (the target was checked to run
        # then).
        self._recent = _NO_RECENT

    def _static_arguments(self, argnums, argnames) -> tuple[frozenset, frozenset]:
        argnums = (argnums,) if isinstance(argnums, int) else tuple(argnums or ())
        argnames = (argnames,) if isinstance(argnames, str) else tuple(argnames or ())
        for number in argnums:
            if isinstance(number, bool) or not isinstance(number, int):
                raise TypeError(f"@ug.function {self.name}: static_argnums must be ints, got "
                                f"{number!r}")
        for name in argnames:
            if not isinstance(name, str):
                raise TypeError(f"@ug.function {self.name}: static_argnames must be strings, "
                                f"got {name!r}")
        names = self.argument_names
        positions = set(argnums) | {names.index(n) for n in argnames if n in names}
        named = set(argnames) | {names[p] for p in argnums if 0 <= p < len(names)}
        return frozenset(positions), frozenset(named)

    def _argument_name(self, index: int) -> str:
        names = self.argument_names
        return names[index] if 0 <= index < len(names) else f"argument {index}"

    def _mark_static(self, args, kwargs) -> tuple[tuple, dict]:
        """`args`, `kwargs` with the static arguments wrapped in StaticArgument (which
        checks they are hashable: they become part of the cache key)."""
        def wrap(label, value):
            try:
                hash(value)
            except TypeError:
                raise TypeError(
                    f"@ug.function {self.name}: the static argument {label} is "
                    f"{type(value).__name__} {value!r}, which is not hashable; static arguments "
                    "are part of the cache key: pass a hashable value (a tuple, not a list), "
                    "or make it a tensor argument"
                ) from None
            return StaticArgument(value)

        count = len(args)
        positions = {p + count if p < 0 else p for p in self._static_positions}
        args = tuple(wrap(self._argument_name(i), a) if i in positions else a
                     for i, a in enumerate(args))
        kwargs = {k: wrap(k, v) if k in self._static_names else v for k, v in kwargs.items()}
        return args, kwargs

    @property
    def python_function(self):
        """What runs: `fn` with its Python control flow converted (autograph), or `fn`."""
        if self._conversion is None:
            from unigraph import autograph

            call = getattr(type(self.fn), "__call__", None)  # noqa: B004 (the function)
            if self.autograph and type(call) is types.FunctionType \
                    and not isinstance(self.fn, type) and not autograph.calls.is_library(call):
                # A callable object of the user's class: its `__call__` is converted.
                self._conversion = autograph.convert(types.MethodType(call, self.fn))
            elif self.autograph and not isinstance(self.fn, types.FunctionType | types.MethodType):
                # A callable object (a Module) is called as it is: its note for source()
                # is made there (convert's note holds its repr: a 100-layer model's 0.1 ms)
                self._conversion = autograph.Conversion(self.fn, None, False)
            else:
                self._conversion = autograph.convert(self.fn) if self.autograph else \
                    autograph.Conversion(self.fn, "", False)
        return self._conversion.function

    def source(self) -> str:
        """The code that runs: the autograph-converted source of the function (or the
        original, with a note saying why it was not converted), for debugging."""
        from unigraph import autograph

        if not self.autograph:
            return "# autograph=False\n" + autograph.original_source(self.fn)
        self.python_function  # noqa: B018  (converts on first use)
        if self._conversion.source is None:
            return autograph.convert(self.fn).source
        return self._conversion.source

    def __get__(self, instance, owner):
        # A method: the instance becomes a static argument (part of the cache key).
        return self if instance is None else functools.partial(self, instance)

    def __call__(self, *args, **kwargs):
        # (`open_builders` empty: no trace open anywhere, no ContextVar to read)
        if open_builders and _builder.get() is not None:
            return self._call_inline(args, kwargs)
        # The target, once (current_target()'s precedence, inline; the backend lookup also
        # refuses a target that cannot run, before any user code).
        target = context_target() or config._global_target or current_target()
        recent_target, generation, caller = self._recent
        if recent_target is target and generation == plugins.generation and not kwargs:
            # The static call just made again (see `_recent`): no key built or hashed, no
            # backend looked up; the caller answers _STALE to arguments of other types.
            if caller is not None:
                result = caller(args)
                if result is not _STALE:
                    return result
            else:  # an eager target's: positional tensors need nothing else
                for a in args:
                    if type(a) is not Tensor:
                        break
                else:
                    # `_run_eager_tensors(args)`, inline: a Python call less (this frame
                    # marks the body running too, see `eager_body_codes`)
                    result = self._conversion.function(*args)
                    return result if type(result) is Tensor else _eager_result(result)
        backend = backend_of(target)
        if target.mode == "eager":
            if not kwargs and self._fast_ok and self._conversion is not None:
                inputs = _eager_inputs(args, backend)
                if inputs is not None:
                    self._recent = (target, plugins.generation, None)
                    return self._run_eager_tensors(inputs)
            return self._run_eager(args, kwargs)
        if not kwargs and self._fast_ok:
            key = _fast_key(backend, target.mode, args)
            caller = self._fast.get(key) if key is not None else None
            if caller is not None and caller is not _ONCE:
                result = caller(args)
                if result is not _STALE:
                    self._recent = (target, plugins.generation, caller)
                    return result
            result = self._call_static(target, backend, args, kwargs)
            if key is not None:
                # The entry that call used (found or just compiled): next time, directly.
                # A signature called once is not worth generating a caller for (compiling
                # one takes ~0.1 ms): its second call makes it, kept while the entry is.
                compiled = _matching(self._variants.get(_flat_key(target, args)))
                if compiled is not None and self._cache.get(compiled.key) is compiled:
                    callers = self._callers.setdefault(compiled.key, {})
                    made = callers.get(key)
                    if made is None and caller is not None:
                        made = callers[key] = _caller(compiled, backend, self._cache, args)
                    self._fast[key] = _ONCE if made is None else made
            return result
        return self._call_static(target, backend, args, kwargs)

    # -- eager and inline -----------------------------------------------------------------
    # (The frames of `_run_eager` and `_run_eager_tensors` mark the body as running, for
    # `tracing.in_function`: see `eager_body_codes` below the class.)
    def _run_eager_tensors(self, args):
        """`_run_eager` of the common call: positional tensors, nothing to check or
        convert (no static arguments, no input_spec), the function already converted."""
        result = self._conversion.function(*args)
        # (`_eager_result`'s first test, inline: most bodies return one tensor)
        return result if type(result) is Tensor else _eager_result(result)

    def _run_eager(self, args, kwargs):
        if self.input_spec is not None:
            args = self._check_spec(args)
        if not kwargs and not self._static_positions and all(type(a) is Tensor for a in args):
            result = self.python_function(*args)  # already tensors: nothing to convert
        else:
            if self._static_positions or self._static_names:
                args, kwargs = self._mark_static(args, kwargs)
            leaves, treedef = pytree.flatten((args, kwargs), is_array_leaf)
            args, kwargs = _unmark(pytree.unflatten(treedef,
                                                    [as_input_tensor(x) for x in leaves]))
            result = self.python_function(*args, **kwargs)
        return _eager_result(result)

    def _call_inline(self, args, kwargs):
        """A call inside a trace: the function's ops join the graph being traced."""
        if self._static_positions or self._static_names:
            _unmark(self._mark_static(args, kwargs))  # the same checks as a top-level call
        token = self._enter_trace(args, kwargs)
        try:
            return self.python_function(*args, **kwargs)
        finally:
            _tracing_calls.reset(token)

    def _enter_trace(self, args, kwargs):
        """Note that this function is being traced for this call; a call that repeats one
        already being traced (the same function, argument types and Python values) would
        trace forever, so it raises instead of Python's RecursionError."""
        call = (id(self), _abstract_key(args, kwargs))
        active = _tracing_calls.get()
        if call in active:
            where = user_source()
            raise TracingError(
                f"{self.name} calls itself at {where} with the same argument types as the "
                f"call being traced ({self._describe(args, kwargs)}), so tracing it never "
                "ends: a static graph traces both branches of a cond whatever the value. Make "
                "the argument that ends the recursion static "
                f"(@ug.function(static_argnums=...)), or write the recursion as a "
                "ug.while_loop"
            )
        return _tracing_calls.set((*active, call))

    def _describe(self, args, kwargs) -> str:
        """`n: float32[], depth: 3 (static)`: a call's arguments as a trace sees them."""
        return ", ".join(f"{name}: {text}" for name, text in self._signature(args, kwargs))

    def _signature(self, args, kwargs) -> list:
        def text(tree):
            leaves, treedef = pytree.flatten(tree, is_array_leaf)
            return _render(pytree.unflatten(treedef, [_leaf_text(x) for x in leaves]))

        return ([(self._argument_name(i), text(a)) for i, a in enumerate(args)]
                + [(k, text(v)) for k, v in kwargs.items()])

    # -- input_spec -----------------------------------------------------------------------
    def _spec_offset(self) -> int:
        """1 for a method (`self` comes first and has no spec), else 0."""
        return 1 if self.argument_names[:1] == ["self"] else 0

    def _check_spec(self, args) -> tuple:
        """`args` with each argument that has a spec checked against it (Python numbers
        and lists become arrays of the spec's dtype); a mismatch raises in the user's terms."""
        from unigraph.spec import mismatch_text

        offset = self._spec_offset()
        args = list(args)
        for position, spec in enumerate(self.input_spec):
            index = position + offset
            if spec is None or index >= len(args):
                continue
            arg = args[index]
            if not isinstance(arg, Tensor | np.ndarray):
                try:
                    arg = args[index] = np.asarray(arg, dtype=spec.dtype)
                except (TypeError, ValueError) as error:
                    raise ShapeError(
                        f"@ug.function {self.name}: argument {self._argument_name(index)!r} at "
                        f"{user_source()} is {type(arg).__name__} {arg!r}, which is not a "
                        f"tensor of its input_spec {spec} ({error})") from None
            dtype = arg.dtype if isinstance(arg, Tensor) else check_dtype(arg.dtype)
            if not spec.fits(arg.shape, dtype):
                raise ShapeError(mismatch_text(self.name, self._argument_name(index), spec,
                                               arg.shape, dtype, user_source()))
        return tuple(args)

    def _leaf_types(self, args, leaves) -> tuple:
        """(shape, dtype) to trace each leaf with: its spec's where it has one."""
        by_position = {position + self._spec_offset(): spec
                       for position, spec in enumerate(self.input_spec) if spec is not None}
        types = [leaf_spec(x) for x in leaves]
        first = 0  # index in `leaves` of the first leaf of the current argument
        for index, arg in enumerate(args):
            count = 1 if is_array_leaf(arg) else len(pytree.flatten(arg, is_array_leaf)[0])
            spec = by_position.get(index)
            if spec is not None and count == 1:
                types[first] = (spec.shape, spec.dtype)
            first += count
        return tuple(types)

    # -- static ---------------------------------------------------------------------------
    def _call_static(self, target: Target, backend, args, kwargs):
        types = None  # (shape, dtype) each leaf is traced with, where a spec gives it
        if self.input_spec is not None:
            args = self._check_spec(args)
            if self._static_positions or self._static_names:
                args, kwargs = self._mark_static(args, kwargs)
            leaves, treedef = pytree.flatten((args, kwargs), is_array_leaf)
            types = self._leaf_types(args, leaves)
            key = (target, treedef, types)
        elif not kwargs and not self._static_positions and all(
                type(a) is Tensor or type(a) is np.ndarray for a in args):
            # The common call, positional tensors or arrays: keyed without flattening (one
            # key, and so one graph, for a tensor and an array of one type).
            leaves, treedef = args, None
            key = _flat_key(target, args)
        else:
            if self._static_positions or self._static_names:
                args, kwargs = self._mark_static(args, kwargs)
            leaves, treedef = pytree.flatten((args, kwargs), is_array_leaf)
            key = (target, treedef, tuple(leaf_spec(x) for x in leaves))
        compiled = _matching(self._variants.get(key))
        if compiled is None:
            with self._lock:
                compiled = _matching(self._variants.get(key))
                if compiled is None:
                    if treedef is None:
                        treedef = pytree.flatten((args, kwargs), is_array_leaf)[1]
                    compiled = self._compile(target, backend, treedef, leaves, types)
                    self._store(key, compiled)
        elif len(self._cache) > 1:
            with contextlib.suppress(KeyError):  # another thread may have evicted it
                self._cache.move_to_end(compiled.key)
        return self._run(compiled, backend, leaves)

    def _store(self, key, compiled: Compiled) -> None:
        """Cache `compiled`, keeping at most MAX_CACHED graphs (least recently used go)."""
        self._fast = {}  # rebuilt by the next calls: never an entry the cache dropped
        self._recent = _NO_RECENT
        compiled.key = (key, tuple(value for _, value in compiled.state))
        self._cache[compiled.key] = compiled
        self._variants.setdefault(key, []).append(compiled)
        while len(self._cache) > MAX_CACHED:
            (old_key, _), old = self._cache.popitem(last=False)
            self._callers.pop(old.key, None)
            variants = self._variants[old_key]
            variants.remove(old)
            if not variants:
                del self._variants[old_key]

    def trace(self, *args, **kwargs) -> Graph:
        """The IR graph this function traces to for these arguments (for inspection)."""
        return self.trace_full(*args, **kwargs).graph

    def trace_full(self, *args, **kwargs) -> Trace:
        """Everything tracing gives for these arguments: the graph, the Parameters bound to
        `graph.params`, the output structure, the random inputs, the Python state the trace
        read and the loop guard (for tools that run graphs themselves: the checker, the
        exporters). With an `input_spec`, the graph's inputs have its unknown dims."""
        if self.input_spec is not None:
            args = self._check_spec(args)
        if self._static_positions or self._static_names:
            args, kwargs = self._mark_static(args, kwargs)
        leaves, treedef = pytree.flatten((args, kwargs), is_array_leaf)
        types = self._leaf_types(args, leaves) if self.input_spec is not None else None
        return self._trace_full(treedef, leaves, types)

    def _trace_full(self, treedef, leaves, types=None) -> Trace:
        """Trace with each leaf's own (shape, dtype), or `types[i]` (from an input_spec)."""
        builder = GraphBuilder(self.name)
        with builder:
            inputs = []
            for i, leaf in enumerate(leaves):
                shape, dtype = leaf_spec(leaf) if types is None else types[i]
                inputs.append(symbolic(builder, builder.add_input(shape, dtype, f"arg{i}")))
            args, kwargs = _unmark(pytree.unflatten(treedef, inputs))
            token = self._enter_trace(args, kwargs)
            try:
                result = self.python_function(*args, **kwargs)
            finally:
                _tracing_calls.reset(token)
            out_leaves, out_treedef = pytree.flatten(result, is_array_leaf)
            builder.graph.outputs = [value_of(builder, as_input_tensor(x)) for x in out_leaves]
            builder.graph.updates = list(builder.updates.items())
            builder.graph.inputs.extend(builder.random_inputs)
            loop_flag = None
            if builder.loop_flags:
                from unigraph.control_flow import _loop_flag

                loop_flag = value_of(builder, _loop_flag(builder))
        return Trace(builder.graph.verify(), builder.param_objects, out_treedef,
                     builder.random_inputs, builder.state, loop_flag, builder.loop_lines)

    def _compile(self, target, backend, treedef, leaves, types=None) -> Compiled:
        traced = self._trace_full(treedef, leaves, types)
        self._count_trace(target, treedef, leaves, traced.state)
        graph = traced.graph
        if traced.loop_flag is not None:
            # The run also fetches the loop guard's flag (see control_flow._traced_while).
            graph = copy.copy(graph)
            graph.outputs = [*graph.outputs, traced.loop_flag]
        executable = backend.compile(graph, target.mode)
        updated = [graph.params.index(param) for param, _ in graph.updates]
        randoms = [(v.shape, v.dtype) for v in traced.random_inputs]
        draw_shapes = None
        if any(None in shape for shape, _ in randoms):
            traced_types = types or tuple(leaf_spec(x) for x in leaves)
            # (a weak reference: the function holds this entry, and a cycle would keep an
            # evicted executable until the cyclic GC runs)
            draw_shapes = functools.partial(_draw_shapes_of, weakref.ref(self), treedef,
                                            traced_types, randoms, {})
        params = traced.params
        out_treedef = traced.out_treedef
        out_shape = ("leaf" if out_treedef == ("*",) else
                     "tuple" if out_treedef[0] == "tuple" and all(
                         x == ("*",) for x in out_treedef[1]) else None)
        return Compiled(traced.graph, executable, params, [-1] * len(params),
                        out_treedef, updated, randoms,
                        [(read, value) for read, value, _ in traced.state.values()],
                        traced.loop_lines if traced.loop_flag is not None else [],
                        out_shape=out_shape, out_types=_known_types(traced.graph.outputs),
                        draw_shapes=draw_shapes)

    def _draw_shapes(self, treedef, traced_types, randoms, found: dict, leaves) -> list:
        """Each random input's (shape, dtype) for a run on `leaves`, where the graph (traced
        with `traced_types`) has draws with an open dim: the function traced again with the
        leaves' own shapes (nothing compiled; once per shapes, kept in `found`) gives the
        sizes eager draws with, in the same order, so a static run draws the same numbers."""
        sizes = tuple(tuple(x.shape) if hasattr(x, "shape") else np.shape(x) for x in leaves)
        shapes = found.get(sizes)
        if shapes is None:
            types = tuple((size, dtype) for size, (_, dtype) in zip(sizes, traced_types))
            with random.finding_sizes():
                traced = self._trace_full(treedef, leaves, types)
            shapes = [(v.shape, v.dtype) for v in traced.random_inputs]
            if [d for _, d in shapes] != [d for _, d in randoms] or any(
                    len(s) != len(t) for (s, _), (t, _) in zip(shapes, randoms)):
                raise TracingError(
                    f"{self.name}: traced with the shapes of this call's arguments it draws "
                    f"{len(shapes)} random tensors ({shapes}), where its graph with open dims "
                    f"draws {len(randoms)} ({randoms}): the draws must not depend on which "
                    "sizes are known while tracing")
            if len(found) >= MAX_CACHED:  # (another thread may have dropped it first)
                found.pop(next(iter(found), None), None)
            found[sizes] = shapes
        return shapes

    def _count_trace(self, target, treedef, leaves, state: dict) -> None:
        """Count traces per target; past RETRACE_WARNING, warn once, saying what changed."""
        signature = dict(self._signature(*pytree.unflatten(treedef, leaves)))
        signature.update({name: repr(value) for _, value, name in state.values()})
        previous = self._last_signature.get(target)
        self._last_signature[target] = signature
        self._traces[target] = count = self._traces.get(target, 0) + 1
        if count <= RETRACE_WARNING or self._warned or previous is None:
            return
        self._warned = True
        changes = [f"{name} {previous.get(name, '(absent)')} -> {value}"
                   for name, value in signature.items() if previous.get(name) != value]
        warnings.warn(
            f"@ug.function {self.name} has been traced {count} times on {target}, once per "
            f"new signature; the last call changed {'; '.join(changes) or 'nothing visible'}. "
            "Each trace builds and keeps a compiled graph (the "
            f"{MAX_CACHED} most recent are kept). Pass the same shapes and dtypes (pad or "
            "bucket batches), pass varying Python numbers as tensors, and make few-valued "
            "Python arguments static (static_argnums)",
            RetraceWarning, stacklevel=5,
        )

    def _run(self, compiled: Compiled, backend, leaves):
        return _run(compiled, backend, leaves)


# An eager body runs inside one of these frames (`tracing.in_function` looks for them).
# (`__call__` runs one itself, and otherwise runs no user code but a trace's, which
# `in_function` finds by its builder.)
eager_body_codes.update((Function._run_eager.__code__, Function._run_eager_tensors.__code__,
                         Function.__call__.__code__))


def _run(compiled: Compiled, backend, leaves):
    """Run `compiled` on `leaves` (the call's tensors and arrays): load the parameters it
    does not hold yet, feed, run, check the loop guard, note the updates, wrap the outputs."""
    executable = compiled.executable
    if compiled.params:
        _load_params(compiled)
    feeds = [_feed(x, backend) for x in leaves]
    if compiled.randoms:
        feeds.extend(_random_feeds(compiled, leaves))
    outputs = executable.run(feeds)
    if compiled.loop_lines:
        outputs = list(outputs)
        _check_loop_flag(backend, outputs.pop(), compiled.loop_lines)
    if compiled.updated:
        _note_updates(compiled)
    if compiled.out_types is None:
        wrapped = [_wrap(backend, value, out)
                   for value, out in zip(compiled.graph.outputs, outputs)]
    else:  # every output's shape is known: no per-output checks
        wrapped = _typed(compiled.out_types, backend, outputs)
    if compiled.out_shape == "leaf":
        return wrapped[0]
    return _packed(compiled, wrapped)


def _load_params(compiled: Compiled) -> None:
    """Hand the executable each parameter whose value it does not hold yet."""
    share, loaded = compiled.executable.share_param, compiled.loaded
    for index, param in enumerate(compiled.params):
        if loaded[index] != param.version:
            # a Parameter never writes its array: the engine may keep it (no copy)
            share(index, param._host())
            loaded[index] = param.version


def _draw_shapes_of(function_ref, *args) -> list:
    """`Function._draw_shapes` of the function `function_ref` refers to (see `_compile`)."""
    return function_ref()._draw_shapes(*args)


def _random_feeds(compiled: Compiled, leaves) -> list:
    """The random inputs of a run on `leaves`, drawn from unigraph's generator (with the
    run's sizes where a draw has an open dim)."""
    randoms = compiled.randoms if compiled.draw_shapes is None else \
        compiled.draw_shapes(leaves)
    rng = random.generator()
    return [rng.random(shape).astype(dtype) for shape, dtype in randoms]


def _note_updates(compiled: Compiled) -> None:
    """After a run: the parameters the graph updated now live in the executable."""
    for index in compiled.updated:
        param = compiled.params[index]
        param._written_by(compiled.executable, index)
        compiled.loaded[index] = param.version


def _note_updates_lines(compiled: Compiled) -> list:
    """`_note_updates(compiled)` as source lines for a generated caller, its loop unrolled
    (globals `param{index}`: the parameters, `loaded`: `compiled.loaded`, `executable`)."""
    lines = []
    for index in compiled.updated:
        lines += [f"    param{index}._written_by(executable, {index})",
                  f"    loaded[{index}] = param{index}.version"]
    return lines


def _typed(out_types, backend, outputs) -> list:
    """Tensors of `outputs` (native, or NumPy arrays) of the known (shape, dtype)s (zip:
    an output after them, a loop's flag, is not one)."""
    return [_out_tensor(shape, dtype, backend, out)
            for (shape, dtype), out in zip(out_types, outputs)]


def _out_tensor(shape: tuple, dtype: str, backend, out) -> Tensor:
    """The tensor of a run's output `out` (native, or a NumPy array) of known type."""
    if type(out) is np.ndarray:
        return eager_tensor(shape, dtype, backend, None, out)
    return eager_tensor(shape, dtype, backend, out)


def _packed(compiled: Compiled, wrapped: list):
    """The call's result from its output tensors: a tuple, or the function's own structure."""
    if compiled.out_shape == "tuple":
        return tuple(wrapped)
    return pytree.unflatten(compiled.out_treedef, wrapped)


def input_specs(input_spec):
    """`input_spec` as a tuple of Spec or None, or None when there is none.

    >>> input_specs([ug.Spec((None, 4)), None])
    (Spec(shape=(None, 4), dtype='float32', name=None), None)
    """
    if input_spec is None:
        return None
    from unigraph.spec import as_spec

    if not isinstance(input_spec, list | tuple):
        input_spec = [input_spec]
    return tuple(None if spec is None else as_spec(spec) for spec in input_spec)


def parameter_names(fn) -> list:
    """The names of `fn`'s named parameters (none for `*args`), as messages use them.

    >>> parameter_names(lambda x, labels, *rest: x)
    ['x', 'labels']
    """
    if (type(fn) is types.FunctionType and not hasattr(fn, "__wrapped__")
            and not hasattr(fn, "__signature__")):
        # A plain function's names are its code's (inspect.signature costs ~10 us: eager
        # training builds a ug.grad of a fresh lambda every step).
        code = fn.__code__
        return list(code.co_varnames[:code.co_argcount + code.co_kwonlyargcount])
    call = getattr(type(fn), "__call__", None)  # noqa: B004 (the method itself is wanted)
    if (type(call) is types.FunctionType and call.__code__.co_argcount
            and not isinstance(fn, type) and not hasattr(call, "__wrapped__")
            and not hasattr(call, "__signature__") and not hasattr(fn, "__wrapped__")
            and not hasattr(fn, "__signature__")):
        # An object called through its class's plain `__call__` (a Module: ug.function(model)
        # on every build of a model, where inspect.signature took ~30 us): inspect's
        # signature of that method less its first parameter, from the code.
        code = call.__code__
        return list(code.co_varnames[1:code.co_argcount + code.co_kwonlyargcount])
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return []
    return [p.name for p in parameters
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]


def _unmark(call: tuple) -> tuple[tuple, dict]:
    args, kwargs = call
    return (tuple(a.value if isinstance(a, StaticArgument) else a for a in args),
            {k: v.value if isinstance(v, StaticArgument) else v for k, v in kwargs.items()})


def _eager_result(result):
    """An eager function's result, with Python numbers returned made tensors, as they are
    from a static graph."""
    if type(result) is Tensor or (type(result) is tuple and all(
            type(x) is Tensor for x in result)):
        return result
    leaves, treedef = pytree.flatten(result, is_array_leaf)
    return pytree.unflatten(treedef, [as_input_tensor(x) for x in leaves])


def _eager_inputs(args, backend):
    """The positional arguments of an eager call as tensors when each is a Tensor or a
    NumPy array (an array becomes the tensor `tensor(x)` makes of it, without flattening
    the call), else None: the general path converts them."""
    for a in args:  # (a loop, not all(): no generator made on every call)
        if type(a) is not Tensor:
            break
    else:
        return args
    inputs = []
    for a in args:
        kind = type(a)
        if kind is np.ndarray:
            array = as_array(a)  # a private copy, checked as `tensor(x)` checks it
            a = Tensor(array.shape, dtype_name(array.dtype), backend, array=array)
        elif kind is not Tensor:
            return None
        inputs.append(a)
    return tuple(inputs)


def _flat_key(target, args) -> tuple:
    """The cache key of a call with positional tensors or NumPy arrays only (no static
    arguments, no input_spec): each argument's (shape, dtype name)."""
    return (target, *[leaf_spec(a) for a in args])


def _fast_key(backend, mode: str, args):
    """The fast-path key of a call with positional arguments (see `Function._fast`), or
    None when an argument is not a Tensor or NumPy array (a Python number, a tuple). The
    backend object, not its name: a plugin registration makes new backend objects, and a
    prebuilt caller holds the one it was made for."""
    key = [backend, mode]
    for a in args:
        kind = type(a)
        if kind is not Tensor and kind is not np.ndarray:
            return None
        key.append((kind, a.shape, a.dtype))
    return tuple(key)


# `Function._recent` when there is none (no Target is None).
_NO_RECENT = (None, -1, None)

# `Function._fast`'s entry for a signature called once: no caller made yet.
_ONCE = object()

# A prebuilt caller's answer when its entry's Python state (a Module's `training` flag, the
# loop limit) no longer holds: the call takes the general path, which finds or traces the
# entry for the state now.
_STALE = object()


def _caller(compiled: Compiled, backend, cache, args):
    """The prebuilt run of `compiled` for the calls whose fast key (`_fast_key`) is that of
    `args`, kept in `Function._fast`: `_run`'s work with what depends only on the key and
    the entry decided once, here (how each argument is fed, how the outputs come back), as
    one generated function of the call's arguments. It answers _STALE to arguments of
    another count or (type, shape, dtype) than the key's (so `Function._recent` can hand it
    any call) and when the entry's Python state no longer holds; every call refreshes the
    entry's place in `cache` (least recently used). The feeds go to `run_known` (the key
    makes the executable's input checks redundant); parameters, random inputs, the loop
    guard and updates are `_run`'s helpers, each written in only where the entry has them.

    >>> call = _caller(compiled, backend, cache, (x, y))
    >>> call((x, y))            # the outputs as tensors, or _STALE
    """
    def refresh() -> None:
        with contextlib.suppress(KeyError):  # another thread may have evicted it
            cache.move_to_end(compiled.key)

    scope = {"STALE": _STALE, "refresh": refresh, "cache": cache, "backend": backend,
             "compiled": compiled, "feed": _feed, "ndarray": np.ndarray}
    names = [f"a{i}" for i in range(len(args))]
    lines = ["def call(args):", *_argument_checks(scope, names, args)]
    # The Python state the trace read, each value as `_matching` compares it; then the
    # entry's place in the cache
    for i, (read, value) in enumerate(compiled.state):
        scope[f"read{i}"], scope[f"value{i}"] = read, value
        lines += [f"    if not read{i}() == value{i}:", "        return STALE"]
    lines += ["    if len(cache) > 1:", "        refresh()"]
    lines += _run_lines(scope, compiled, names, args)
    lines += _output_lines(scope, compiled)
    return _generated(lines, scope, compiled)


def _argument_checks(scope: dict, names: list, args) -> list:
    """A generated caller's first lines: STALE unless the call's arguments have the count
    and each the type, shape and dtype of `args` (those `_fast_key` makes the key of),
    each argument then in its local of `names`."""
    if not args:
        return ["    if args:", "        return STALE"]
    tests = []
    for name, a in zip(names, args):
        scope[f"K_{name}"], scope[f"S_{name}"], scope[f"D_{name}"] = type(a), a.shape, a.dtype
        tests.append(f"type({name}) is not K_{name} or {name}.shape != S_{name} "
                     f"or {name}.dtype != D_{name}")
    # (the unpacking tests the count: no len() call)
    return ["    try:", f"        {', '.join(names)}, = args", "    except ValueError:",
            "        return STALE",
            "    if (" + "\n            or ".join(tests) + "):", "        return STALE"]


def _run_lines(scope: dict, compiled: Compiled, names: list, args) -> list:
    """A generated caller's run of `compiled`, to `outputs`: `_run`'s steps written in only
    where the entry has them (parameters to load, random inputs, the loop guard, updates).
    The key guarantees feeds of the types the entry's first run accepted, so they go to
    `run_known`; it fixed each argument's type (Tensor or ndarray) and dtype: a native-order
    array is fed as it is, a Tensor of this backend as its native (anything else as `_run`
    feeds it). Where the executable offers its compiled function (`_direct_lines`), feeds
    that are all its natives go straight to that."""
    lines = []
    if compiled.params:
        # `_load_params` only where a parameter's version is not the one loaded (a test
        # per parameter, written in: no loop run on every call)
        scope.update(load_params=_load_params, loaded=compiled.loaded)
        scope.update({f"param{i}": param for i, param in enumerate(compiled.params)})
        stale = " or ".join(f"loaded[{i}] != param{i}.version"
                            for i in range(len(compiled.params)))
        lines += [f"    if {stale}:", "        load_params(compiled)"]
    executable = compiled.executable
    scope["run"] = getattr(executable, "run_known", executable.run)
    feeds = []
    natives = []  # the test that every feed is this backend's native, one per Tensor
    for name, a in zip(names, args):
        if type(a) is np.ndarray and a.dtype.isnative:
            feeds.append(name)
            continue
        feeds.append(f"f_{name}")
        if type(a) is Tensor:
            lines.append(f"    f_{name} = {name}._native if {name}._backend is backend else None")
            natives.append(f"f_{name} is not None")
    fed = [f"    if f_{name} is None:\n        f_{name} = feed({name}, backend)"
           if type(a) is Tensor else f"    f_{name} = feed({name}, backend)"
           for name, a, f in zip(names, args, feeds) if f != name]
    if compiled.randoms:
        scope["random_feeds"] = _random_feeds
        feeds.append("*random_feeds(compiled, args)")
    known = [*fed, f"    outputs = run([{''.join(f + ', ' for f in feeds)}])"]
    direct = _direct_lines(scope, compiled, names, args, feeds, natives)
    if direct is None:
        lines += known
    elif natives:  # each Tensor's native known only when the call runs
        lines += [f"    if {' and '.join(natives)}:", *["    " + x for x in direct],
                  "    else:", *["    " + x for x in "\n".join(known).split("\n")]]
    else:
        lines += direct
    if compiled.loop_lines:  # the loop guard's flag, last: `_check_loop_flag`'s usual case
        scope.update(check_loop_flag=_check_loop_flag, loop_lines=compiled.loop_lines)
        lines += ["    flag = outputs[-1]",
                  "    if not (type(flag) is ndarray and flag.shape == () and not flag):",
                  "        check_loop_flag(backend, flag, loop_lines)"]
    if compiled.updated:
        scope["executable"] = executable
        lines += _note_updates_lines(compiled)
    return lines


def _direct_lines(scope: dict, compiled: Compiled, names: list, args, feeds: list,
                  natives: list) -> list | None:
    """A generated caller's run of `compiled` by the executable's own compiled function
    (its `direct_run()`: `(function, params, takes_arrays)` or None: `function(*feeds)`,
    or `function(params, *feeds)` where params is not None), without `run_known`'s
    call and tests, a failure raised as `run_known` raises it (`Executable._run_error`:
    unigraph's error where the framework's has one). Only for feeds that are all the
    backend's natives (an array the call feeds as it is counts where `takes_arrays`); None
    where the executable has no such function (yet) or a feed cannot be one."""
    direct_run = getattr(compiled.executable, "direct_run", None)
    found = direct_run() if direct_run is not None else None
    if found is None:
        return None
    function, params, takes_arrays = found
    arrays = [name for name, a, f in zip(names, args, feeds) if f == name]
    if compiled.randoms or (arrays and not takes_arrays):
        return None  # a random input, or an argument's array, is no native of its own
    if len(natives) + len(arrays) != len(args):
        return None  # an argument fed converted (a byte-swapped array)
    scope.update(direct=function, P=params, run_error=compiled.executable._run_error)
    call = (f"direct({''.join(f + ', ' for f in feeds)})" if params is None else
            f"direct(P, {''.join(f + ', ' for f in feeds)})")
    return ["    try:",
            f"        outputs = {call}",
            "    except Exception as error:",
            "        raise run_error(error)"]


def _output_lines(scope: dict, compiled: Compiled) -> list:
    """A generated caller's last lines: `outputs` as tensors, in the function's structure
    (each of a known type made as `_out_tensor` makes it, written in: `eager_tensor_lines`)."""
    lines, tensors = [], []
    if compiled.out_types is None:  # a dim the graph left unknown: each run's own
        scope["wrap"] = _wrap
        for i, value in enumerate(compiled.graph.outputs):
            scope[f"V{i}"] = value
            tensors.append(f"wrap(backend, V{i}, outputs[{i}])")
    else:
        scope.update(new=object.__new__, Tensor=Tensor)
        for i, (shape, dtype) in enumerate(compiled.out_types):
            scope[f"S{i}"], scope[f"D{i}"] = shape, dtype
            lines += [f"    o{i} = outputs[{i}]",
                      *eager_tensor_lines(f"t{i}", f"S{i}", f"D{i}", "backend", f"o{i}")]
            tensors.append(f"t{i}")
    if compiled.out_shape == "leaf":
        return [*lines, f"    return {tensors[0]}"]
    if compiled.out_shape == "tuple":
        return [*lines, f"    return ({''.join(t + ', ' for t in tensors)})"]
    scope.update(unflatten=pytree.unflatten, out_treedef=compiled.out_treedef)
    return [*lines, f"    return unflatten(out_treedef, [{', '.join(tensors)}])"]


def _generated(lines: list, scope: dict, compiled: Compiled):
    """The function `call` that `lines` define, with the names of `scope`."""
    code = compile("\n".join(lines), f"<unigraph caller of {compiled.graph.name}>", "exec")
    exec(code, scope)
    return scope.pop("call")  # (kept in its own globals, it would be a reference cycle)


def _feed(x, backend):
    """What a run feeds for argument `x`: an array the call's key already typed as it is
    (its dtype is the input's; a byte-swapped one is converted); a Tensor of this backend
    as its native; anything else as an array of its type."""
    if type(x) is np.ndarray and x.dtype.isnative:
        return x
    if isinstance(x, Tensor) and x._backend is backend:
        return x.native_for(backend)
    return np.asarray(x._host() if isinstance(x, Tensor) else x, dtype=leaf_spec(x)[1])


def _matching(entries):
    """The entry whose recorded Python state still holds, if any."""
    for compiled in entries or ():
        if all(read() == value for read, value in compiled.state):
            return compiled
    return None


def _check_loop_flag(backend, flag, loop_lines) -> None:
    if type(flag) is np.ndarray and flag.shape == () and not flag:
        return  # the usual run: no loop ran past its limit (no conversion, no import)
    from unigraph.control_flow import loop_error

    number = int(np.asarray(flag if isinstance(flag, np.ndarray) else backend.to_numpy(flag)))
    if number:
        line, limit = loop_lines[number - 1]
        raise loop_error(line, limit)


def _known_types(values) -> list | None:
    """[(shape, dtype)] of `values`, or None when a dim is unknown (fixed by each run)."""
    types = [(tuple(v.shape), v.dtype) for v in values]
    return None if any(None in shape for shape, _ in types) else types


def _wrap(backend, value, out) -> Tensor:
    shape = value.shape
    if None in shape:  # a dim the graph left unknown (input_spec): the run's own size
        shape = tuple(int(d) for d in out.shape)
    if isinstance(out, np.ndarray):
        return Tensor(shape, value.dtype, backend=backend, array=out)
    return Tensor(shape, value.dtype, backend=backend, native=out)


def function(fn=None, *, name=None, autograph=True, static_argnums=(), static_argnames=(),
             input_spec=None):
    """Make `fn` run on the current target: op by op in eager mode, or traced once per input
    signature into a graph that the backend compiles and caches in static mode.

    With `autograph` (the default) Python `if`/`while`/`for ... in ug.range(n)` and
    `a if c else b` whose conditions are tensors become `cond`/`while_loop` in a static
    graph; conditions on Python values stay Python. `autograph=False` runs `fn` as written.

    Arguments become tensors (Python floats float32, ints int64), except the static ones:
    `static_argnums` (positions) and `static_argnames` (names) stay Python values in every
    mode, are baked into the trace, and are part of the cache key (so they must be
    hashable; each new value traces again). A static graph is also keyed by the Python
    state its trace read (each Module's `training` flag, the loop limit): `module.eval()`
    after a call traces again instead of reusing the training graph. A function traced
    more than 8 times on one target warns once (RetraceWarning); at most 64 compiled graphs
    are kept, least recently used dropped first.

    `input_spec`, a list with a `ug.Spec` (or None) per positional argument (after `self`
    for a method), traces ONE graph whose inputs have the spec's shapes: a `None` dim takes
    any size, so a model serving varying batches compiles once on every static target.
    Every call, eager ones included, is checked against the spec; a mismatch names the
    argument, the dim and the spec. Inside the function such a dim reads `None`
    (`x.shape[0] is None` while tracing).

    >>> @ug.function
    ... def counter(a, b):
    ...     return ug.while_loop(lambda a, b: a < b, lambda a, b: (a + 2, b + 1), (a, b))
    >>> counter(0, 10)
    >>> @ug.function(input_spec=[ug.Spec((None, 784), "float32")])
    ... def predict(x):                 # one graph for batch 1, 32, 1000 ...
    ...     return ug.nn.functional.softmax(x @ w)
    >>> @ug.function(static_argnums=1)
    ... def power(x, n):                # n: a Python int, unrolled when traced
    ...     return x if n == 1 else x * power(x, n - 1)
    """
    if fn is None:
        return lambda f: Function(f, name, autograph, static_argnums, static_argnames,
                                  input_spec)
    return Function(fn, name, autograph, static_argnums, static_argnames, input_spec)


def assign(param: Parameter, value) -> None:
    """Give `param` a new value: recorded as a graph update when tracing, else immediate.

    >>> count = ug.Parameter(np.zeros((), np.float32))
    >>> ug.assign(count, count + 1)
    """
    from unigraph.dispatch import current_backend, native

    if not isinstance(param, Parameter):
        raise TypeError(f"assign() needs a Parameter, got {type(param).__name__}")
    value = value if isinstance(value, Tensor) else tensor(np.asarray(value, dtype=param.dtype))
    if (value.shape, value.dtype) != (param.shape, param.dtype):
        raise ValueError(
            f"assign to parameter {param.name!r} ({param.dtype}{list(param.shape)}) "
            f"with a value of type {value.dtype}{list(value.shape)}"
        )
    inside = current_region()
    if inside is not None:
        kind, line = inside
        after = ("return the new value from the differentiated function and assign it after "
                 "ug.value_and_grad" if kind == "grad" else
                 f"compute the new value with ug.cond/ug.where and assign it after the {kind}")
        raise TracingError(
            f"ug.assign to {param.name or 'a parameter'!r} at {user_source()} is inside the "
            f"{'differentiated function' if kind == 'grad' else kind} at {line}, where a "
            f"static graph cannot assign a parameter (so no target does, eager included): "
            f"{after}"
        )
    builder = current_builder()
    if builder is not None:
        if builder.parent is not None:
            raise TracingError(f"ug.assign at {user_source()} inside a traced subgraph: a "
                               "static graph assigns parameters only at its top level")
        builder.assign_param(param, value_of(builder, value))
        return
    backend = current_backend()
    param._written_eager(backend, native(value, backend))
