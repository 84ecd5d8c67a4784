"""paddle:static, running: the Executable around one built Program.

Each Executable owns a `paddle.static.Executor` and a `paddle.static.Scope` that holds its
parameters between runs. The first run goes through `Executor.run`, which compiles the
Program into an interpreter and caches it; every later run calls that interpreter
directly: set the feed variables, run, copy the fetched tensors out.

Why not `Executor.run` every time: on each call it rebuilds its cache key from
`str(program)` (the whole Program printed as text) plus the feed and fetch names, ~40 us
for a small training step and more for bigger Programs, then checks every feed again. The
one check that matters (each feed's dtype and shape: a wrong dtype would reach the kernels
as reinterpreted bytes) is the `Executable` base's, on every run; the direct path is
otherwise what `Executor.run` does.
"""

from __future__ import annotations

import contextlib
import threading

import numpy as np

from unigraph.backend import Executable
from unigraph_paddle.static import StaticMode, build_program

_SERIAL = "FLAGS_new_executor_serial_run"
_SERIAL_LOCK = threading.Lock()
_SERIAL_RUNS = 0  # runs of ours in flight, in every thread
_SERIAL_BEFORE = False  # the flag's value before the first of them


@contextlib.contextmanager
def _serial(flags):
    """Meanwhile Paddle's interpreter runs its ops on the calling thread (a few us to set
    and restore; the user's own Programs keep Paddle's default outside our runs).

    By default (3.3.1) it hands every op to a worker thread of its own and waits for it:
    with one thread per framework that is overhead (a 5-op-per-step while loop took 2.2x
    the CPU time), and the kernels run outside the thread whose floating-point flags the
    caller set (FTZ/DAZ: `ug.set_flush_denormal`). Paddle reads the flag when it builds an
    interpreter and on every run, so every run of ours sets it; the flag is process-wide,
    so it is restored only when the last of the runs in flight (several threads may run
    Executables at once) ends."""
    global _SERIAL_RUNS, _SERIAL_BEFORE
    with _SERIAL_LOCK:
        if _SERIAL_RUNS == 0:
            _SERIAL_BEFORE = flags[_SERIAL]
            flags[_SERIAL] = True
        _SERIAL_RUNS += 1
    try:
        yield
    finally:
        with _SERIAL_LOCK:
            _SERIAL_RUNS -= 1
            if _SERIAL_RUNS == 0:
                flags[_SERIAL] = _SERIAL_BEFORE


class PaddleExecutable(Executable):
    """A compiled graph: a Program, an Executor, and a Scope holding the parameters. The
    checks (each feed's dtype and shape included) and copies in and out are the
    `Executable` base's."""

    target = "paddle:static"

    def __init__(self, paddle, graph, lowerings: dict, place):
        super().__init__(graph)
        self._paddle = paddle
        self._lowerings = lowerings
        self._place = place
        built = build_program(paddle, graph, lowerings, stored_constants=True)
        self.program = built.program
        self._feed_names = built.feed_names
        self._param_names = built.param_names
        # Fetch each distinct value once; `_order` maps them back when outputs repeat.
        unique = list({id(v): v for v in built.fetch}.values())
        position = {id(v): i for i, v in enumerate(unique)}
        self._fetch = unique
        order = [position[id(v)] for v in built.fetch]
        self._order = None if order == list(range(len(unique))) else order
        self._scope = paddle.static.Scope()
        self._set_constants(built.constants)
        self._exe = paddle.static.Executor(place)
        self._core = paddle.base.core
        self._flags = paddle.base.core.globals()
        self._runner = None  # the compiled interpreter, from the first run on
        self._direct = True  # False: this Paddle lacks the internals; use Executor.run
        self._probe = None  # the run_all Program, built on first use
        # Runs share the feed variables and the parameters in the Scope: one at a time.
        self._lock = threading.Lock()

    def _native_spec(self, x):
        if isinstance(x, self._paddle.Tensor):
            return tuple(x.shape), np.dtype(self._paddle_dtype_name(x.dtype))
        return None

    def _paddle_dtype_name(self, dtype) -> str:
        # paddle.float32 prints as "paddle.float32"; "bool" and the rest match NumPy's names.
        return str(dtype).rsplit(".", 1)[-1]

    def _run(self, inputs: list) -> list:
        core, scope, place = self._core, self._scope, self._place
        with self._lock:
            runner = self._runner
            if runner is None:
                outs = self._executor_run(inputs)
            else:
                for name, value in zip(self._feed_names, inputs):
                    if type(value) is not np.ndarray:
                        value = self._feedable(value)
                    tensor = core.DenseTensor()
                    tensor.set(value, place)
                    core.set_feed_variable(scope, tensor, name, 0)
                with _serial(self._flags):
                    tensors = runner.run(self._feed_names, False)._move_to_list()
                outs = [np.array(t) for t in tensors]  # copies, made before the next run
        if self._order is not None:
            outs = [outs[i] for i in self._order]
        return outs

    def _executor_run(self, inputs: list) -> list:
        """A run through the public `Executor.run` (the first run, or every run where the
        direct path is unavailable); afterwards the cached interpreter becomes the runner."""
        feed = {name: self._feedable(v) for name, v in zip(self._feed_names, inputs)}
        exe = self._exe
        with StaticMode(self._paddle), _serial(self._flags):
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

    def _run_all(self, inputs: list) -> dict:
        with self._lock:
            if self._probe is None:
                self._probe = build_program(self._paddle, self.graph, self._lowerings,
                                            fetch_all=True, stored_constants=True)
                self._set_constants(self._probe.constants)
            probe = self._probe
            feed = {name: self._feedable(v) for name, v in zip(probe.feed_names, inputs)}
            with StaticMode(self._paddle), _serial(self._flags):
                outs = self._exe.run(
                    probe.program, feed=feed, fetch_list=list(probe.fetch.values()),
                    scope=self._scope, return_numpy=True,
                )
        return dict(zip(probe.fetch.keys(), outs))

    def _set_constants(self, constants: dict) -> None:
        """The stored constants of a Program (`build_program`), set once in the Scope."""
        for name, array in constants.items():
            self._scope.var(name).get_tensor().set(array, self._place)

    def _set_param(self, index: int, array) -> None:
        with self._lock:
            self._scope.var(self._param_names[index]).get_tensor().set(array, self._place)

    def _get_param(self, index: int) -> np.ndarray:
        with self._lock:
            tensor = self._scope.find_var(self._param_names[index]).get_tensor()
            return np.array(tensor)  # a copy, taken under the lock: a run writes this buffer

    def _feedable(self, value) -> np.ndarray:
        if isinstance(value, self._paddle.Tensor):
            return value.numpy()  # the Executor takes NumPy arrays, not eager Tensors
        return np.asarray(value)
