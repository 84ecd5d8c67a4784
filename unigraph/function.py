"""`@ug.function`: run op by op on an eager target, or trace once per input signature into
the IR, compile on the backend, cache, and execute on a static target."""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass

import numpy as np

from unigraph import pytree, random
from unigraph.config import Target, current_target
from unigraph.dispatch import symbolic, value_of
from unigraph.errors import TracingError
from unigraph.ir import Graph, check_dtype
from unigraph.plugins import get_backend
from unigraph.tensor import Parameter, Tensor, tensor
from unigraph.tracing import GraphBuilder, current_builder


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


class Function:
    """A function that runs on whatever target is current. See `function`."""

    def __init__(self, fn, name=None, autograph=True):
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.name = name or getattr(fn, "__name__", "function")
        self.autograph = autograph
        self._conversion = None  # autograph.Conversion, made on first call
        self._cache: dict = {}
        self._lock = threading.Lock()

    @property
    def python_function(self):
        """What runs: `fn` with its Python control flow converted (autograph), or `fn`."""
        if self._conversion is None:
            from unigraph import autograph

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
        return self._conversion.source

    def __get__(self, instance, owner):
        # A method: the instance becomes a static argument (part of the cache key).
        return self if instance is None else functools.partial(self, instance)

    def __call__(self, *args, **kwargs):
        if current_builder() is not None:
            return self.python_function(*args, **kwargs)  # inside a trace: inline
        target = current_target()
        backend = get_backend(target.backend, target.mode)
        if target.mode == "eager":
            if not kwargs and all(isinstance(a, Tensor) for a in args):
                return self.python_function(*args)  # already tensors: nothing to convert
            leaves, treedef = pytree.flatten((args, kwargs), is_array_leaf)
            args, kwargs = pytree.unflatten(treedef, [as_input_tensor(x) for x in leaves])
            return self.python_function(*args, **kwargs)
        return self._call_static(target, backend, args, kwargs)

    # -- static ---------------------------------------------------------------------------
    def _call_static(self, target: Target, backend, args, kwargs):
        if not kwargs and all(type(a) is Tensor for a in args):
            # The common call, positional tensors only: keyed without flattening.
            leaves, treedef = args, None
            key = (target, *[(a.shape, a.dtype) for a in args])
        else:
            leaves, treedef = pytree.flatten((args, kwargs), is_array_leaf)
            key = (target, treedef, tuple(leaf_spec(x) for x in leaves))
        compiled = self._cache.get(key)
        if compiled is None:
            with self._lock:
                compiled = self._cache.get(key)
                if compiled is None:
                    if treedef is None:
                        treedef = pytree.flatten((args, kwargs), is_array_leaf)[1]
                    compiled = self._compile(target, backend, treedef, leaves)
                    self._cache[key] = compiled
        return self._run(compiled, backend, leaves)

    def trace(self, *args, **kwargs) -> Graph:
        """The IR graph this function traces to for these arguments (for inspection)."""
        leaves, treedef = pytree.flatten((args, kwargs), is_array_leaf)
        return self._trace(treedef, leaves)[0]

    def _trace(self, treedef, leaves):
        builder = GraphBuilder(self.name)
        with builder:
            inputs = []
            for i, leaf in enumerate(leaves):
                shape, dtype = leaf_spec(leaf)
                inputs.append(symbolic(builder, builder.add_input(shape, dtype, f"arg{i}")))
            args, kwargs = pytree.unflatten(treedef, inputs)
            result = self.python_function(*args, **kwargs)
            out_leaves, out_treedef = pytree.flatten(result, is_array_leaf)
            builder.graph.outputs = [value_of(builder, x) for x in out_leaves]
            builder.graph.updates = list(builder.updates.items())
            builder.graph.inputs.extend(builder.random_inputs)
        return builder.graph.verify(), builder.param_objects, out_treedef, builder.random_inputs

    def _compile(self, target, backend, treedef, leaves) -> Compiled:
        graph, params, out_treedef, random_inputs = self._trace(treedef, leaves)
        executable = backend.compile(graph, target.mode)
        updated = [graph.params.index(param) for param, _ in graph.updates]
        randoms = [(v.shape, v.dtype) for v in random_inputs]
        return Compiled(graph, executable, params, [-1] * len(params), out_treedef, updated,
                        randoms)

    def _run(self, compiled: Compiled, backend, leaves):
        executable = compiled.executable
        for index, param in enumerate(compiled.params):
            if compiled.loaded[index] != param.version:
                executable.set_param(index, param.numpy())
                compiled.loaded[index] = param.version
        feeds = [x.native_for(backend) if isinstance(x, Tensor) and x._backend is backend
                 else np.asarray(x.numpy() if isinstance(x, Tensor) else x,
                                 dtype=leaf_spec(x)[1])
                 for x in leaves]
        rng = random.generator()
        feeds.extend(rng.random(shape).astype(dtype) for shape, dtype in compiled.randoms)
        outputs = executable.run(feeds)
        for index in compiled.updated:
            param = compiled.params[index]
            param._written_by(executable, index)
            compiled.loaded[index] = param.version
        wrapped = [_wrap(backend, value, out)
                   for value, out in zip(compiled.graph.outputs, outputs)]
        return pytree.unflatten(compiled.out_treedef, wrapped)


def _wrap(backend, value, out) -> Tensor:
    if isinstance(out, np.ndarray):
        return Tensor(value.shape, value.dtype, backend=backend, array=out)
    return Tensor(value.shape, value.dtype, backend=backend, native=out)


def function(fn=None, *, name=None, autograph=True):
    """Make `fn` run on the current target: op by op in eager mode, or traced once per input
    signature into a graph that the backend compiles and caches in static mode.

    With `autograph` (the default) Python `if`/`while`/`for ... in ug.range(n)` and
    `a if c else b` whose conditions are tensors become `cond`/`while_loop` in a static
    graph; conditions on Python values stay Python. `autograph=False` runs `fn` as written.

    >>> @ug.function
    ... def counter(a, b):
    ...     return ug.while_loop(lambda a, b: a < b, lambda a, b: (a + 2, b + 1), (a, b))
    >>> counter(0, 10)
    """
    if fn is None:
        return lambda f: Function(f, name, autograph)
    return Function(fn, name, autograph)


def assign(param: Parameter, value) -> None:
    """Give `param` a new value: recorded as a graph update when tracing, else immediate."""
    from unigraph.dispatch import current_backend, native

    if not isinstance(param, Parameter):
        raise TypeError(f"assign() needs a Parameter, got {type(param).__name__}")
    value = value if isinstance(value, Tensor) else tensor(np.asarray(value, dtype=param.dtype))
    if (value.shape, value.dtype) != (param.shape, param.dtype):
        raise ValueError(
            f"assign to parameter {param.name!r} ({param.dtype}{list(param.shape)}) "
            f"with a value of type {value.dtype}{list(value.shape)}"
        )
    builder = current_builder()
    if builder is not None:
        if builder.parent is not None:
            raise TracingError("assign() inside a cond/while_loop branch is not supported")
        builder.assign_param(param, value_of(builder, value))
        return
    backend = current_backend()
    param._written_eager(backend, native(value, backend))
