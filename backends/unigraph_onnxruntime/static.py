"""`onnxruntime:static`: an IR graph written as an ONNX model once, run by one
`onnxruntime.InferenceSession`.

The model (`unigraph.onnx.graph_to_model`) takes the graph's inputs and then its parameters
as inputs, and returns the graph's outputs and then the new value of each updated parameter.
The executable keeps the parameters as NumPy arrays between runs, feeds them with the
inputs, and stores the updates after the run. `run_all` opens a second session, on first
use, over a model that also returns every top-level value.
"""

from __future__ import annotations

import os

import numpy as np
import onnxruntime

from unigraph.backend import Executable
from unigraph.errors import BackendError
from unigraph.export.prepare import ExportError, find_node
from unigraph.ir import Graph
from unigraph.onnx.export import graph_to_model, parameter_names
from unigraph.threads import requested


def session_options() -> onnxruntime.SessionOptions:
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3  # errors only: ORT warns about unused initializers
    # ORT's threads otherwise spin between runs, taking cores from every other process.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    # ug.set_threads / UNIGRAPH_THREADS / the threads key, else this backend's own variable,
    # else ORT's default (a pool per session, one thread per core).
    threads = requested() or os.environ.get("UNIGRAPH_ONNXRUNTIME_THREADS")
    if threads:
        options.intra_op_num_threads = int(threads)
        options.inter_op_num_threads = int(threads)
    return options


def open_session(model) -> onnxruntime.InferenceSession:
    return onnxruntime.InferenceSession(model.SerializeToString(), session_options(),
                                        providers=["CPUExecutionProvider"])


def refuse_gradients(graph: Graph) -> None:
    node = find_node(graph, "grad")
    if node is not None:
        where = f" at {node.source}" if node.source else ""
        raise BackendError(
            f"onnxruntime:static runs inference only: graph {graph.name!r} takes a gradient "
            f"(ug.grad / ug.value_and_grad{where}), which ONNX Runtime's inference sessions "
            "cannot compute. Train on another target (numpy, torch, tensorflow, paddle) and "
            "run the trained model here")


class OnnxRuntimeExecutable(Executable):
    """A compiled graph; parameters live in `self.params` as NumPy arrays between runs. The
    checks and copies in and out are the `Executable` base's."""

    target = "onnxruntime:static"

    def __init__(self, graph: Graph):
        refuse_gradients(graph)
        super().__init__(graph)
        # What run_all needs later, kept now: a compiled graph never reads the IR again.
        self._snapshot = Graph(graph.name, list(graph.inputs), list(graph.params),
                               list(graph.nodes), list(graph.outputs), list(graph.updates))
        self._input_names = [f"input_{i}" for i in range(len(graph.inputs))]
        self._param_names = parameter_names(graph, self._input_names)
        self._output_count = len(graph.outputs)
        self._updated = [next(i for i, p in enumerate(graph.params) if p is param)
                         for param, _ in graph.updates]
        self.params: list = [None] * len(graph.params)
        self.session = open_session(self._model(every_value=False))
        self._every_value_session = None

    def _model(self, every_value: bool):
        outputs = [f"output_{i}" for i in range(self._output_count)]
        try:
            return graph_to_model(self._snapshot, None, self._input_names, outputs,
                                  updates_as_outputs=True, every_value=every_value)
        except ExportError as error:
            raise BackendError(f"onnxruntime:static cannot compile graph "
                               f"{self.graph.name!r}: {error}") from None

    def _feeds(self, inputs: list) -> dict:
        # order="C": ORT takes contiguous buffers (ascontiguousarray would make 0-d 1-d).
        feeds = {name: np.asarray(x, order="C") for name, x in zip(self._input_names, inputs)}
        feeds.update(zip(self._param_names, self.params))
        return feeds

    def _session_run(self, session, inputs: list) -> list:
        feeds = self._feeds(inputs)
        try:
            return session.run(None, feeds)
        except Exception as error:  # ORT's own message, after the graph's name
            raise BackendError(f"onnxruntime:static failed running graph "
                               f"{self.graph.name!r}: {error}") from None

    def _run(self, feeds: list) -> list:
        results = self._session_run(self.session, feeds)
        for index, new in zip(self._updated, results[self._output_count:]):
            self.params[index] = np.array(new, copy=True)  # never an output the caller holds
        return results[:self._output_count]

    def _run_all(self, feeds: list) -> dict:
        if self._every_value_session is None:
            self._every_value_session = open_session(self._model(every_value=True))
        results = self._session_run(self._every_value_session, feeds)
        names = [o.name for o in self._every_value_session.get_outputs()]
        return {int(name[len("_value"):]): value for name, value in zip(names, results)
                if name.startswith("_value")}

    def _set_param(self, index: int, array: np.ndarray) -> None:
        self.params[index] = array  # the base's private copy

    def _get_param(self, index: int) -> np.ndarray:
        return self.params[index]
