"""What a backend is: the object every framework adapter subclasses.

A backend is a plain object; several live in one process at once (the checker holds all of
them). It imports its framework only on first use, through `load()`. The frontend talks to
it through two doors:

* eager: `to_native`, `to_numpy`, `eager_op` (one op on native tensors, which stay native
  between ops) and `eager_grad` (the framework's own autodiff over a Python function);
* static: `compile(graph, mode)` builds the native graph once and returns an `Executable`
  that only feeds, runs and fetches. Control-flow nodes (`cond`, `while_loop`, `grad`,
  see `unigraph.ir`) arrive with their subgraphs and become the framework's own constructs.

`lower_nodes` is the shared walk over a graph's nodes used while *building* a native graph;
each backend passes its flat lowering table and its control-flow builders.
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import importlib.util
import math
import sys
import warnings
from collections.abc import Callable

import numpy as np

from unigraph.errors import BackendError
from unigraph.ir import Graph
from unigraph.shape_checks import check_before_run, needs_check_before_run


def _unshared(outputs: list, feeds: list) -> list:
    """`outputs`, each copied where it shares memory with a fed array: a runtime that takes a
    feed without copying (torch.from_numpy, a Session's aligned feed) hands back an input, or
    a view of one, as an output, which the caller's later writes to its array would change."""
    fed = [f for f in feeds if type(f) is np.ndarray and f.size]
    if not fed:
        return outputs
    return [np.array(o) if type(o) is np.ndarray and any(np.may_share_memory(o, f) for f in fed)
            else o for o in outputs]


class Executable:
    """A compiled graph. Parameters live inside it as native variables between runs.

    The public methods are template methods: each does the bookkeeping every backend shares
    (the checks, their wording, the copies in and out) once, here, then calls the backend's
    hook, which only moves data into and out of its framework.

    run(inputs) -> list of outputs (NumPy arrays or this backend's natives); after the run
        the graph's `updates` have been applied to the parameters. Hook: `_run(feeds)`.
    set_param(index, array) / get_param(index): move one parameter's value in or out
        (index into `graph.params`), as NumPy arrays. Hooks: `_set_param(index, array)`
        (the array is a private C-ordered copy of the graph's dtype: keep it; where
        `keeps_shared_params`, that copy read-only or a read-only view from `share_param`:
        keep it as it is, never write it),
        `_get_param(index)` (may return a view of the stored value: the caller gets a copy).
    run_all(inputs) -> {value id: np.ndarray}: every intermediate value of the top-level
        graph, for localizing disagreements; does not apply updates. Hook: `_run_all(feeds)`.

    Checked before any hook runs, with one wording on every backend: the number of inputs,
    each input's dtype and shape (a `None` dim takes any size), a parameter never set
    (`set_param` was never called for it), and the shape of an array given to `set_param`;
    then, where the graph has such checks, the op records' shape rules on the run's input
    shapes (`check_before_run`: eager's error where they refuse, once per input shape).
    Feeds that are neither NumPy arrays nor this backend's natives (Python numbers, lists)
    become arrays of the input's dtype.

    >>> executable = backend.compile(graph, "static")
    >>> executable.set_param(0, w)
    >>> (y,) = executable.run([x])
    """

    graph: Graph
    target: str = "static"  # "backend:mode", the start of every message
    # True where `_run` itself never hands back an array sharing memory with a feed (then
    # `run` skips its own check, a may_share_memory per output and feed)
    outputs_unshared: bool = False
    # True where the executable never writes a parameter's array in place and keeps what
    # `_set_param` gets as it is (the reference engine): `share_param` then hands it a
    # read-only view of the caller's array instead of a copy, and `set_param` its copy
    # made read-only
    keeps_shared_params: bool = False

    def __init__(self, graph: Graph):
        self.graph = graph
        self.unset = set(range(len(graph.params)))  # indices never given a value
        # The input shapes `check_before_run` passed, or None where the graph has nothing
        # to check before a run (`shape_checks.needs_check_before_run`).
        self.checked_before_run = set() if needs_check_before_run(graph) else None
        # (dtype, shape) of each input, shape None when it has no unknown dims (compared
        # whole) or a tuple with None where any size is taken.
        self._input_specs = [
            (np.dtype(v.dtype), tuple(v.shape), None in v.shape) for v in graph.inputs
        ]

    # -- templates ----------------------------------------------------------------------
    def run(self, inputs: list) -> list:
        feeds = self.check_inputs(inputs)
        if self.checked_before_run is not None:
            self.check_before_run(feeds)
        return self._run_feeds(feeds)

    def run_known(self, feeds: list) -> list:
        """`run` for a list of feeds of exactly the types (array or native, dtype, shape) of
        feeds a `run` of this executable already accepted: a @ug.function's prebuilt caller,
        whose key fixes them. Skips `check_inputs` (it would pass again); everything else
        is `run`'s. An executable that overrides `run` itself gets its `run`."""
        if type(self).run is not Executable.run:
            return self.run(feeds)
        return self._run_feeds(feeds)

    def _run_feeds(self, feeds: list) -> list:
        """`run` after `check_inputs`: every parameter set, outputs that share no memory
        with the feeds, a failure in the user's terms."""
        if self.unset:
            self.refuse_unset()
        try:
            outputs = self._run(feeds)
            return outputs if self.outputs_unshared else _unshared(outputs, feeds)
        except Exception as error:
            raise self._run_error(error)  # noqa: B904 (its context, as `from None`)

    def run_all(self, inputs: list) -> dict:
        feeds = self.check_inputs(inputs)
        if self.checked_before_run is not None:
            self.check_before_run(feeds)
        if self.unset:
            self.refuse_unset()
        try:
            values = self._run_all(feeds)
            return dict(zip(values, _unshared(list(values.values()), feeds)))
        except Exception as error:
            raise self._run_error(error)  # noqa: B904 (its context, as `from None`)

    def _run_error(self, error: Exception) -> Exception:
        """What a run that failed with `error` raises, from its `except` block: unigraph's
        error in the user's terms where `_translated` finds one, with its context suppressed
        (`raise ... from None`'s `__cause__` and `__suppress_context__`), else `error`
        itself. The one translation of a failed run (`_run_feeds`, `run_all`, the
        backends' `run_known` and a @ug.function's generated caller raise it).

        >>> try:
        ...     outputs = self._run(feeds)
        ... except Exception as error:
        ...     raise self._run_error(error)
        """
        found = self._translated(error)
        if found is None:
            return error
        found.__cause__ = None  # (which sets __suppress_context__, as `from None` does)
        return found

    def _translated(self, error: Exception):
        """The error a failed run means in the user's terms, or None to re-raise it as it
        is: an index check's failure (a graph's Assert, a framework gather's refusal) becomes
        `IndexOutOfRangeError` with the op's line, a squeeze of an open dim that is not 1
        the `ShapeError` eager raises, a failed `ensure_shape` check (a cond's paths, a
        while_loop's iterations) the `ControlFlowShapeError` eager raises."""
        from unigraph.index_checks import translate_run_error
        from unigraph.shape_checks import translate_check_error
        from unigraph.squeeze_checks import translate_squeeze_error

        return (translate_run_error(error, self) or translate_check_error(error, self)
                or translate_squeeze_error(error, self))

    def set_param(self, index: int, array) -> None:
        value = self.graph.params[index]
        # A private copy (the caller keeps its array); order="C", not ascontiguousarray,
        # which would turn a 0-d array into a 1-d one.
        array = np.array(array, dtype=value.dtype, copy=True, order="C")
        # (the exact shape first: a model's load sets every parameter once)
        if array.shape != value.shape and not _shape_fits(array.shape, tuple(value.shape)):
            raise BackendError(
                f"{self.target}: parameter {_param_name(value, index)} of graph "
                f"{self.graph.name!r} is {_type_text(value.dtype, value.shape)}; set_param got "
                f"an array of shape {list(array.shape)}")
        if self.keeps_shared_params:
            array.setflags(write=False)  # kept as it is, as a shared view is (see there)
        self._set_param(index, array)
        self.unset.discard(index)

    def share_param(self, index: int, array) -> None:
        """`set_param` for an array that its caller never writes (a Parameter's own value):
        an executable that keeps parameters read-only (`keeps_shared_params`) keeps a
        read-only view of it instead of a copy; every other one copies, as `set_param`.

        >>> executable.share_param(0, param._host())   # what a @ug.function does
        """
        value = self.graph.params[index]
        if not (self.keeps_shared_params and type(array) is np.ndarray and array.base is None
                and array.shape == value.shape and array.dtype == value.dtype):
            self.set_param(index, array)
            return
        # (an array owning its memory only: a view's base may be written by its owner)
        view = array.view()
        view.setflags(write=False)  # (~0.2 us less than through .flags, per parameter)
        self._set_param(index, view)
        self.unset.discard(index)

    def get_param(self, index: int) -> np.ndarray:
        if index in self.unset:
            self.refuse_unset([index])
        # A copy: what the caller gets never aliases what the executable stores.
        return np.array(self._get_param(index), copy=True)

    def check_before_run(self, feeds: list) -> None:
        """Eager's error, before the run, where the op records' shape rules refuse the
        shapes of `feeds` (`shape_checks.check_before_run`: a cond's path not taken, a max
        over an open axis left empty), once per input shape. Every run of a compiled graph
        makes it (a @ug.function's call, the checker's reference and its direct runs)."""
        shapes = tuple(tuple(x.shape) for x in feeds)  # (arrays and natives, after the checks)
        if shapes not in self.checked_before_run:
            check_before_run(self.graph, list(shapes), self.target)
            self.checked_before_run.add(shapes)

    # -- the one wording of each refusal -------------------------------------------------
    def check_inputs(self, inputs) -> list:
        """`inputs` as a list of feeds, after checking their number, dtypes and shapes."""
        specs = self._input_specs
        if len(inputs) != len(specs):
            raise BackendError(
                f"{self.target}: graph {self.graph.name!r} takes {len(specs)} input"
                f"{'' if len(specs) == 1 else 's'}; run got {len(inputs)}")
        # The common run, NumPy arrays of the graph's types: one pass, no new list (this is
        # on every run's path; a tiny graph runs in ~20 us).
        for x, (dtype, shape, varies) in zip(inputs, specs):
            if type(x) is not np.ndarray or x.dtype != dtype or (
                    _shape_fits(x.shape, shape) if varies else x.shape == shape) is False:
                return self._check_each(list(inputs))
        return inputs if type(inputs) is list else list(inputs)

    def _check_each(self, feeds: list) -> list:
        for index, (x, (dtype, shape, _)) in enumerate(zip(feeds, self._input_specs)):
            if type(x) is not np.ndarray:
                spec = self._native_spec(x)
                if spec is None:  # a Python number or list: the input's dtype
                    feeds[index] = x = np.asarray(x, dtype=dtype)
                else:
                    got_shape, got_dtype = spec
                    if got_dtype != dtype or not _shape_fits(got_shape, shape):
                        self.refuse_feed(index, got_dtype, got_shape)
                    continue
            if x.dtype != dtype or not _shape_fits(x.shape, shape):
                self.refuse_feed(index, x.dtype, x.shape)
        return feeds

    def refuse_feed(self, index: int, dtype, shape) -> None:
        value = self.graph.inputs[index]
        name = f" ({value.name!r})" if value.name else ""
        raise BackendError(
            f"{self.target}: input {index}{name} of graph {self.graph.name!r} is "
            f"{_type_text(value.dtype, value.shape)}; run got {_type_text(dtype, shape)} (a "
            "compiled graph takes one signature: compile again for another, or cast the input)")

    def refuse_unset(self, indices=None) -> None:
        indices = sorted(self.unset if indices is None else indices)
        names = ", ".join(_param_name(self.graph.params[i], i) for i in indices)
        raise BackendError(
            f"{self.target}: parameter{'s' if len(indices) > 1 else ''} {names} of graph "
            f"{self.graph.name!r} {'were' if len(indices) > 1 else 'was'} never set: call "
            "set_param(index, array) before run (a @ug.function does this for you)")

    # -- hooks --------------------------------------------------------------------------
    def _native_spec(self, x):
        """(shape, np.dtype) of a feed that is this backend's native tensor, else None."""
        return None

    def _run(self, feeds: list) -> list:
        raise NotImplementedError

    def _run_all(self, feeds: list) -> dict:
        raise NotImplementedError

    def _set_param(self, index: int, array: np.ndarray) -> None:
        raise NotImplementedError

    def _get_param(self, index: int) -> np.ndarray:
        raise NotImplementedError


def _shape_fits(shape: tuple, spec: tuple) -> bool:
    """Whether a concrete `shape` fits `spec`, where a None dim takes any size."""
    return len(shape) == len(spec) and all(
        want is None or want == got for got, want in zip(shape, spec))


def _type_text(dtype, shape) -> str:
    return f"{np.dtype(dtype).name}{[d for d in shape]}"


def _param_name(value, index: int) -> str:
    return repr(value.name) if value.name else f"#{index}"


class Backend:
    """Base class of a framework adapter. Subclasses set the class attributes and override
    the methods; none of them may import the framework before `load()` is called."""

    name: str = ""
    modes: tuple = ("eager", "static")
    framework: str = ""  # importable module name, e.g. "torch"
    distribution: str = ""  # the pip distribution that provides it, e.g. "torch"
    extra: str = ""  # `pip install unigraph[extra]` installs it
    import_after: tuple = ()  # modules that must be imported before `framework`
    # The framework whose tensors are this backend's natives, where it is not `framework`
    # (onnxruntime's natives are NumPy arrays): what `ug.from_native` converts into.
    native_framework: str = ""
    # True for a backend that only runs forward passes (no gradients, no training), e.g.
    # onnxruntime: ug.check compares its outputs and says it checked no gradients there.
    inference_only: bool = False

    # -- availability -------------------------------------------------------------------
    def version(self) -> str | None:
        """The framework's installed version, without importing it; None if missing."""
        if not self.distribution:
            return None
        try:
            return importlib.metadata.version(self.distribution)
        except importlib.metadata.PackageNotFoundError:
            return None

    def status(self) -> tuple[bool, str]:
        """(available, reason) for `unigraph backends`."""
        if self.framework and importlib.util.find_spec(self.framework) is None:
            return False, f"not installed: pip install 'unigraph[{self.extra}]'"
        return True, "available"

    def load(self):
        """Import the framework (once) and return its module, honouring `import_after`."""
        available, reason = self.status()
        if not available:
            raise BackendError(f"backend {self.name!r} is {reason}")
        if self.framework not in sys.modules:
            # A framework that must come first is loaded by its own backend when there is
            # one, so that it is imported with that backend's settings (quiet logs).
            from unigraph.plugins import backends

            for other in backends().values():
                if other.framework in self.import_after and other.status()[0]:
                    other.load()
        first = self.framework not in sys.modules
        module = import_framework(self.framework, self.import_after)
        if first:  # a configured thread count reaches a framework when it is imported
            from unigraph.threads import framework_loaded

            framework_loaded(self.framework)
        return module

    # -- eager --------------------------------------------------------------------------
    def to_native(self, array: np.ndarray):
        raise NotImplementedError

    def adopt_native(self, array: np.ndarray):
        """`array` as a native tensor, where the caller gives up `array` (a parameter's
        private copy that nothing else holds): `to_native(array)`, this default. A backend
        whose `to_native` copies into natives that are NumPy arrays takes `array` itself
        (numpy): a loaded weight is then copied once (by `load_state_dict`), not twice."""
        return self.to_native(array)

    def to_numpy(self, native) -> np.ndarray:
        raise NotImplementedError

    def is_native(self, obj) -> bool:
        raise NotImplementedError

    def param_layout(self, native, order: str):
        """`native`, a parameter's value, in the memory layout of storage-order hint `order`
        ("C" row-major, "F" column-major: `ug.Parameter(order=...)`). A hint: a backend whose
        kernels do not care keeps `native` as it is (this default)."""
        return native

    # The flat lowering table, op name -> native function (STYLE rule 2); set by `load()`.
    lowerings: dict | None = None

    def lowering_table(self, mode: str) -> dict | None:
        """The lowering table of `mode`: what a graph compiled for that mode is lowered with
        ("eager": the eager ops). One table for every mode unless a backend has several
        (TensorFlow's graph modes: `graph_lowerings`). Loaded backends only."""
        return self.lowerings

    # Optional eager calls for composites of several op records (`ug.nn.functional`'s
    # "linear", "cross_entropy_mean"), name -> native function: the one kernel the framework's
    # own code runs for them. Consulted only eagerly, never while tracing; None: the records.
    composites: dict | None = None
    # Optional `truth(native) -> bool` of a one-element bool native tensor, where the
    # framework's own truth test is written in Python and slower than this (Paddle's: its
    # `.item()`); None: `bool()` reads a NumPy copy (an eager cond/while predicate asks).
    truth = None

    @functools.cached_property
    def scalars(self) -> dict:
        """This backend object's cache of Python numbers as eager tensors (`x + 2` in a loop
        converts 2 once; `unigraph.api.operands`). Per object: a plugin registered again
        makes new backend objects, and the old ones' tensors go with them."""
        return {}

    def eager_op(self, op: str, inputs: list, attrs: dict):
        """Apply op `op` to native `inputs`; return one native output."""
        lowerings = self.lowerings
        if lowerings is None:
            self.load()
            lowerings = self.lowerings
        try:
            lowering = lowerings[op]
        except KeyError:
            raise BackendError(f"no lowering for op {op!r} in backend {self.name!r}") from None
        return lowering(*inputs, **attrs)

    def eager_grad(self, fn: Callable, watched: list) -> tuple[list, list]:
        """Call `fn(*leaves)` -> list of native outputs, where `leaves` stand for the native
        tensors `watched`; return (outputs, gradients of outputs[0] with respect to each
        leaf). outputs[0] is a scalar. A leaf that does not influence it gets zeros."""
        raise NotImplementedError

    # -- static -------------------------------------------------------------------------
    def compile(self, graph: Graph, mode: str) -> Executable:
        raise NotImplementedError

    # -- documentation ------------------------------------------------------------------
    def quirks(self) -> list:
        """The framework behaviours this backend routes around, as `unigraph.quirks.Quirk`
        records; listing them must not import the framework (only their pins do)."""
        return []

    def __repr__(self):
        return f"<{type(self).__name__} {self.name!r}>"


def import_framework(module: str, import_after: tuple = ()):
    """Import `module`, importing each of `import_after` first when it is installed.

    tensorflow 2.21 imported before paddlepaddle 3.3.1 crashes the process; the TensorFlow
    backend declares `import_after = ("paddle",)` so paddle, if present, goes first.
    """
    with warnings.catch_warnings():
        # paddle warns on import that a C++ build cache is missing; it builds nothing here.
        warnings.filterwarnings("ignore", message="No ccache found", category=UserWarning)
        if module not in sys.modules:
            for earlier in import_after:
                if earlier not in sys.modules and importlib.util.find_spec(earlier) is not None:
                    importlib.import_module(earlier)
        return importlib.import_module(module)


def dims_product(dims):
    """The product of a shape's `dims`, each an int or a framework's 0-d tensor (a dim known
    only when the program runs): an int where all are ints, else the framework's tensor (the
    ints multiplied first, in Python). Backends' views of a shape of open dims use it.

    >>> dims_product([2, 3, tf.shape(x)[0]])    # 6 * that tensor
    """
    product = math.prod(d for d in dims if isinstance(d, int))
    for d in dims:
        if not isinstance(d, int):
            product = d if isinstance(product, int) and product == 1 else d * product
    return product


def lower_nodes(graph: Graph, env: dict, lowerings: dict, control_flow: dict) -> list:
    """Walk `graph.nodes` once, building native values into `env` (value id -> native).

    `env` must already hold the graph's inputs and params. `lowerings[op](*args, **attrs)`
    builds one op; `control_flow[op](node, args)` builds a cond/while_loop/grad node and
    returns its outputs. Returns the natives of `graph.outputs`.
    """
    for node in graph.nodes:
        inputs = node.inputs
        # (one or two inputs, most nodes, without a list comprehension's call: ~0.1 us a node)
        if len(inputs) == 2:
            args = [env[inputs[0].id], env[inputs[1].id]]
        elif len(inputs) == 1:
            args = [env[inputs[0].id]]
        else:
            args = [env[v.id] for v in inputs]
        build = control_flow.get(node.op)
        if build is not None:
            for value, out in zip(node.outputs, build(node, args)):
                env[value.id] = out
            continue
        try:
            lowering = lowerings[node.op]
        except KeyError:
            raise BackendError(f"no lowering for op {node.op!r} in this backend") from None
        # (an op's one output, without a list and a zip; most ops take no attrs: a node of
        # a 100-layer model's ~1.5 us of compiling went ~0.3 us on them)
        out = lowering(*args, **node.attrs) if node.attrs else lowering(*args)
        if node.outputs:
            env[node.outputs[0].id] = out
    return [env[v.id] for v in graph.outputs]
