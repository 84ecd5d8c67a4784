"""`OnnxRuntimeBackend`: one target, `onnxruntime:static`, for inference.

A graph is compiled by writing it as an ONNX model with the exporter
(`unigraph.onnx.graph_to_model`: parameters as inputs, updates as extra outputs) and opening
one `onnxruntime.InferenceSession` on it (`unigraph_onnxruntime.static`). There is no eager
mode: an op run outside `@ug.function` while this target is current (the frontend sends
those to `eager_op`) runs as a one-node model, compiled once per op, input types and attrs
(`unigraph_onnxruntime.lowerings`). Gradients are refused: ONNX Runtime's inference
sessions do not differentiate. Natives are NumPy arrays (ONNX Runtime's feeds and fetches).
Nothing here imports onnx or onnxruntime until first use.
"""

from __future__ import annotations

import importlib.util

import numpy as np

from unigraph.backend import Backend
from unigraph.errors import BackendError
from unigraph.tracing import user_source


class OnnxRuntimeBackend(Backend):
    """onnxruntime:static runs a graph as one ONNX Runtime session (see the module doc)."""

    name = "onnxruntime"
    # Not part of the Backend contract (yet): lets a checker skip gradients on this target.
    inference_only = True
    modes = ("static",)
    framework = "onnxruntime"
    native_framework = "numpy"
    distribution = "onnxruntime"
    extra = "onnxruntime"

    def __init__(self):
        self._ort = None
        self.lowerings = None

    def status(self) -> tuple[bool, str]:
        for module in ("onnxruntime", "onnx"):  # the exporter writes the models with onnx
            if importlib.util.find_spec(module) is None:
                return False, f"not installed ({module}): pip install 'unigraph[{self.extra}]'"
        return True, "available"

    def load(self):
        if self._ort is None:
            ort = super().load()
            from unigraph_onnxruntime.lowerings import LOWERINGS

            self.lowerings = LOWERINGS
            self._ort = ort
        return self._ort

    # -- natives are NumPy arrays ---------------------------------------------------------
    def to_native(self, array):
        return np.array(array, copy=True)

    def to_numpy(self, native):
        view = np.asarray(native).view()  # read-only: the frontend hands out no writable alias
        view.flags.writeable = False
        return view

    def is_native(self, obj) -> bool:
        return isinstance(obj, np.ndarray)

    def eager_grad(self, fn, watched: list):
        raise BackendError(
            f"onnxruntime:static runs inference only: the gradient at {user_source()} cannot "
            "be taken there (ONNX Runtime's inference sessions do not differentiate). Take "
            "gradients and train on another target (numpy, torch, tensorflow, paddle), then "
            "run the trained model on onnxruntime:static")

    def quirks(self) -> list:
        from unigraph_onnxruntime.quirks import QUIRKS  # imports nothing: only the pins do

        return list(QUIRKS)

    # -- static ---------------------------------------------------------------------------
    def compile(self, graph, mode: str):
        if mode != "static":
            raise BackendError(f"backend 'onnxruntime' has only the mode 'static' (inference); "
                               f"it cannot compile for {mode!r}")
        self.load()
        from unigraph_onnxruntime.static import OnnxRuntimeExecutable

        return OnnxRuntimeExecutable(graph)
