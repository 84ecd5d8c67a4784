"""`TensorFlowBackend`: the TensorFlow adapter, with three targets.

* tensorflow:eager    TF2 eager, op by op; gradients with `tf.GradientTape`.
* tensorflow:static   a `tf.compat.v1.Graph` fed by a Session (`unigraph_tensorflow.static`).
* tensorflow:function the same lowering traced into a `tf.function`
                      (`unigraph_tensorflow.function`).

Nothing here imports TensorFlow until first use, and then paddle first when it is installed
(`import_after`): tensorflow 2.21 imported before paddlepaddle 3.3.1 crashes the process.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import tempfile
import threading

import numpy as np

from unigraph.backend import Backend
from unigraph.errors import BackendError
from unigraph_tensorflow.control_flow import floating, per_leaf


def _quiet_import_environment() -> None:
    # TF's C++ INFO and WARNING lines (oneDNN notices, CPU feature hints) on every import;
    # errors still print. Only a default: a user's own setting wins.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


# Lines TF 2.21 writes to stderr on every import through absl's C++ logging, which
# TF_CPP_MIN_LOG_LEVEL does not reach: an INFO notice about oneDNN and absl's preamble.
_IMPORT_NOISE = ("port.cc:", "All log messages before absl::InitializeLog()")


@contextlib.contextmanager
def _filtered_stderr():
    """Capture file descriptor 2 while TensorFlow imports, then write back every line except
    the known notices, so real errors and warnings still reach the user."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            kept = [line for line in captured.read().decode(errors="replace").splitlines(True)
                    if not any(noise in line for noise in _IMPORT_NOISE)]
            if kept:
                sys.stderr.write("".join(kept))
                sys.stderr.flush()


def _quiet_python_logger(tf) -> None:
    # TF's Python logger (deprecation notices, retracing warnings) down to errors, unless the
    # user has configured it already.
    logger = tf.get_logger()
    if logger.level == logging.NOTSET:
        logger.setLevel(logging.ERROR)


class TensorFlowBackend(Backend):
    """TensorFlow 2 eager, v1 Graph + Session, and tf.function, on TF's CPU kernels."""

    name = "tensorflow"
    modes = ("eager", "static", "function")
    framework = "tensorflow"
    distribution = "tensorflow-cpu"
    extra = "tensorflow"
    import_after = ("paddle",)

    def __init__(self):
        self._tf = None
        self.lowerings = None  # eager ops
        self.graph_lowerings = None  # tensorflow:static and tensorflow:function
        self._lock = threading.Lock()

    def load(self):
        if self._tf is None:
            with self._lock:
                if self._tf is None:
                    _quiet_import_environment()
                    with _filtered_stderr():
                        tf = super().load()
                    _quiet_python_logger(tf)
                    # Only now, with tensorflow imported after paddle: the table's module
                    # imports tensorflow at its top.
                    from unigraph_tensorflow.lowerings import GRAPH_LOWERINGS, LOWERINGS

                    self.lowerings, self.graph_lowerings = LOWERINGS, GRAPH_LOWERINGS
                    self._tf = tf
        return self._tf

    def lowering_table(self, mode: str) -> dict | None:
        """The eager table, or in the graph modes the graph table (which also lowers the
        fused `adam_update`: `unigraph_tensorflow.adam`)."""
        return self.graph_lowerings if mode in ("static", "function") else self.lowerings

    # -- eager --------------------------------------------------------------------------
    def to_native(self, array: np.ndarray):
        tf = self._tf or self.load()
        return tf.convert_to_tensor(np.asarray(array))  # keeps the dtype, bool included

    def to_numpy(self, native) -> np.ndarray:
        return np.asarray(native.numpy())

    def is_native(self, obj) -> bool:
        tf = sys.modules.get("tensorflow")  # a TF tensor implies TF is imported
        return tf is not None and isinstance(obj, (tf.Tensor, tf.Variable))

    def eager_grad(self, fn, watched: list) -> tuple[list, list]:
        tf = self._tf or self.load()
        # Distinct leaves: the same tensor watched twice must get two partial derivatives.
        # A leaf that is a float tensor already distinct from the others is used as it is.
        distinct = len({id(w) for w in watched}) == len(watched)
        from unigraph_tensorflow.taping import differentiating  # imports tensorflow

        with tf.GradientTape() as tape, differentiating():
            leaves = list(watched) if distinct else [tf.identity(w) for w in watched]
            floats = floating(leaves)
            tape.watch(floats)
            outputs = list(fn(*leaves))
        grads = tape.gradient(outputs[0], floats,
                              unconnected_gradients=tf.UnconnectedGradients.ZERO) if floats else []
        return outputs, per_leaf(tf, leaves, grads)

    def quirks(self) -> list:
        from unigraph_tensorflow.quirks import QUIRKS  # imports no tensorflow: only the pins do

        return QUIRKS

    # -- static -------------------------------------------------------------------------
    def compile(self, graph, mode: str):
        tf = self.load()
        if mode == "static":
            from unigraph_tensorflow.static import SessionExecutable

            return SessionExecutable(tf, graph, self.graph_lowerings)
        if mode == "function":
            from unigraph_tensorflow.function import FunctionExecutable

            return FunctionExecutable(tf, graph, self.graph_lowerings)
        raise BackendError(
            f"backend 'tensorflow' compiles graphs in modes 'static' and 'function', not {mode!r}"
        )
