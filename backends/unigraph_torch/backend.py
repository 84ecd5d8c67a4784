"""`TorchBackend`: the PyTorch adapter. Eager ops go straight to the lowering table; static
graphs are compiled by `unigraph_torch.static`. Nothing here imports torch until first use."""

from __future__ import annotations

import sys
import threading

import numpy as np

from unigraph.backend import Backend
from unigraph.errors import BackendError


class TorchBackend(Backend):
    """torch:eager runs each op as a torch op on torch tensors; torch:static compiles a graph
    once into a Python function over torch ops (see `unigraph_torch.static`)."""

    name = "torch"
    modes = ("eager", "static")
    framework = "torch"
    distribution = "torch"
    extra = "torch"

    def __init__(self):
        self._torch = None
        self.lowerings = None
        self._feed = None
        self._from_numpy = None
        self._column_major = None
        self._nesting = threading.local()  # how many eager_grad calls enclose this thread

    def load(self):
        if self._torch is None:
            torch = super().load()
            from unigraph_torch.fusions import COMPOSITES
            from unigraph_torch.lowerings import LOWERINGS
            from unigraph_torch.static import column_major, feed

            self.composites = COMPOSITES
            self.lowerings = LOWERINGS
            self._feed = feed
            self._from_numpy = torch.from_numpy
            self._column_major = column_major
            self._torch = torch
        return self._torch

    # -- eager --------------------------------------------------------------------------
    def to_native(self, array: np.ndarray):
        if self._feed is None:
            self.load()
        if type(array) is np.ndarray and array.flags.writeable and (
                not array.ndim or min(array.strides) >= 0):
            # `feed`'s own answer for such an array, without its tests (~0.4 us of ~0.8:
            # an eager call converts each NumPy argument)
            return self._from_numpy(array)
        return self._feed(array)  # shares memory where torch allows; keeps the dtype

    def to_numpy(self, native) -> np.ndarray:
        return native.detach().numpy()

    def param_layout(self, native, order: str):
        """The tensor a parameter with storage-order hint `order` keeps (see
        `ug.Parameter`): for "F", a 2-D tensor column-major, as torch's Linear keeps its
        weight (its `weight.t()`); then torch's mm backward computes the weight gradient as
        `(g.T @ x).T`, the kernel of torch's own Linear, not `x.T @ g` (4-8x slower with
        subnormal values in g). A copy only when `native` is not already laid out so."""
        if self._column_major is None:
            self.load()
        return self._column_major(native) if order == "F" else native

    def is_native(self, obj) -> bool:
        torch = sys.modules.get("torch")  # a torch tensor implies torch is imported
        return torch is not None and isinstance(obj, torch.Tensor)

    def eager_grad(self, fn, watched: list) -> tuple[list, list]:
        torch = self._torch or self.load()
        from unigraph_torch.gradients import gradients, leaf

        depth = getattr(self._nesting, "depth", 0)
        nested = depth > 0  # a gradient of a gradient: keep the inner graph differentiable
        leaves = [leaf(x, nested) for x in watched]
        self._nesting.depth = depth + 1
        try:
            with torch.enable_grad():
                outputs = list(fn(*leaves))
                grads = gradients(outputs[0], leaves, create_graph=nested)
        finally:
            self._nesting.depth = depth
        if not nested:
            outputs = [x.detach() if isinstance(x, torch.Tensor) else x for x in outputs]
        return outputs, grads

    def quirks(self) -> list:
        from unigraph_torch.quirks import QUIRKS  # imports no torch: only the pins do

        return list(QUIRKS)

    # -- static -------------------------------------------------------------------------
    def compile(self, graph, mode: str):
        if mode != "static":
            raise BackendError(f"backend 'torch' compiles graphs in mode 'static', not {mode!r}")
        self.load()
        from unigraph_torch.static import TorchExecutable

        return TorchExecutable(graph)
