"""paddle:static, running: the Executable around one built Program.

Each Executable owns a `paddle.static.Executor` and a `paddle.static.Scope` that holds its
parameters between runs. The first run goes through `Executor.run`, which compiles the
Program into an interpreter and caches it; every later run calls that interpreter
directly: set the feed variables, run, copy the fetched tensors out.

Why not `Executor.run` every time: on each call it rebuilds its cache key from
`str(program)` (the whole Program printed as text) plus the feed and fetch names, ~40 us
for a small training step and more for bigger Programs, then checks every feed again. The
direct path keeps one check that matters (each feed's dtype and shape: a wrong dtype would
reach the kernels as reinterpreted bytes) and is otherwise what `Executor.run` does.
"""

from __future__ import annotations

import threading

import numpy as np

from unigraph.backend import Executable
from unigraph.errors import BackendError
from unigraph_paddle.static import StaticMode, build_program


class PaddleExecutable(Executable):
    """A compiled graph: a Program, an Executor, and a Scope holding the parameters."""

    def __init__(self, paddle, graph, lowerings: dict, place):
        self.graph = graph
        self._paddle = paddle
        self._lowerings = lowerings
        self._place = place
        built = build_program(paddle, graph, lowerings)
        self.program = built.program
        self._feed_names = built.feed_names
        self._param_names = built.param_names
        # Fetch each distinct value once; `_order` maps them back when outputs repeat.
        unique = list({id(v): v for v in built.fetch}.values())
        position = {id(v): i for i, v in enumerate(unique)}
        self._fetch = unique
        order = [position[id(v)] for v in built.fetch]
        self._order = None if order == list(range(len(unique))) else order
        # (dtype, shape or None where a dim is unknown) of each feed, checked per run.
        self._feed_specs = [
            (np.dtype(v.dtype), None if None in v.shape else tuple(v.shape))
            for v in graph.inputs
        ]
        self._scope = paddle.static.Scope()
        self._exe = paddle.static.Executor(place)
        self._core = paddle.base.core
        self._runner = None  # the compiled interpreter, from the first run on
        self._direct = True  # False: this Paddle lacks the internals; use Executor.run
        self._probe = None  # the run_all Program, built on first use
        # Runs share the feed variables and the parameters in the Scope: one at a time.
        self._lock = threading.Lock()
        self._unset = set(range(len(graph.params)))  # never given a value by set_param

    def run(self, inputs: list) -> list:
        core, scope, place = self._core, self._scope, self._place
        with self._lock:
            runner = self._runner
            if runner is None:
                outs = self._executor_run(inputs)
            else:
                for name, value, spec in zip(self._feed_names, inputs, self._feed_specs):
                    if type(value) is not np.ndarray:
                        value = self._feedable(value)
                    if value.dtype != spec[0] or (spec[1] is not None and value.shape != spec[1]):
                        self._wrong_feed(name, value)
                    tensor = core.DenseTensor()
                    tensor.set(value, place)
                    core.set_feed_variable(scope, tensor, name, 0)
                tensors = runner.run(self._feed_names, False)._move_to_list()
                outs = [np.array(t) for t in tensors]  # copies, made before the next run
        if self._order is not None:
            outs = [outs[i] for i in self._order]
        return outs

    def _executor_run(self, inputs: list) -> list:
        """A run through the public `Executor.run` (the first run, or every run where the
        direct path is unavailable); afterwards the cached interpreter becomes the runner."""
        self._check_params_set()
        feed = {name: self._feedable(v) for name, v in zip(self._feed_names, inputs)}
        exe = self._exe
        with StaticMode(self._paddle):
            outs = exe.run(
                self.program, feed=dict(feed), fetch_list=self._fetch, scope=self._scope,
                return_numpy=True,
            )
            if self._direct:
                try:
                    _, cached, _ = exe._executor_cache.get_pir_program_and_executor(
                        self.program, feed, self._fetch, "feed", "fetch", exe.place,
                        self._scope, exe.plan,
                    )
                    self._runner = cached._new_exe
                except AttributeError:
                    self._direct = False
        return outs

    def run_all(self, inputs: list) -> dict:
        with self._lock:
            self._check_params_set()
            if self._probe is None:
                self._probe = build_program(
                    self._paddle, self.graph, self._lowerings, fetch_all=True
                )
            probe = self._probe
            feed = {name: self._feedable(v) for name, v in zip(probe.feed_names, inputs)}
            with StaticMode(self._paddle):
                outs = self._exe.run(
                    probe.program, feed=feed, fetch_list=list(probe.fetch.values()),
                    scope=self._scope, return_numpy=True,
                )
        return dict(zip(probe.fetch.keys(), outs))

    def set_param(self, index: int, array) -> None:
        value = self.graph.params[index]
        # order="C": the scope tensor takes a contiguous buffer (np.ascontiguousarray
        # would turn a 0-d array into 1-d).
        array = np.asarray(array, dtype=value.dtype, order="C")
        if array.shape != value.shape:
            raise BackendError(
                f"parameter {value.name or index!r} is {value.dtype}{list(value.shape)}; "
                f"cannot load an array of shape {list(array.shape)}"
            )
        with self._lock:
            self._scope.var(self._param_names[index]).get_tensor().set(array, self._place)
            self._unset.discard(index)

    def get_param(self, index: int) -> np.ndarray:
        with self._lock:
            tensor = self._scope.find_var(self._param_names[index]).get_tensor()
            return np.array(tensor)  # a copy: the next run writes into this buffer

    def _check_params_set(self):
        if self._unset:
            names = ", ".join(repr(self.graph.params[i].name or i) for i in sorted(self._unset))
            raise BackendError(
                f"parameter {names} of {self.graph.name!r} was never set: call set_param "
                "before the first run (Paddle never initialises a parameter here)"
            )

    def _feedable(self, value) -> np.ndarray:
        if isinstance(value, self._paddle.Tensor):
            return value.numpy()  # the Executor takes NumPy arrays, not eager Tensors
        return np.asarray(value)

    def _wrong_feed(self, name, value):
        index = self._feed_names.index(name)
        want = self.graph.inputs[index]
        raise BackendError(
            f"input {index} of the compiled graph {self.graph.name!r} is "
            f"{want.dtype}{list(want.shape)}, but it was fed {value.dtype.name}"
            f"{list(value.shape)} (a compiled graph takes one signature; compile again for "
            "another, or cast the input)"
        )
