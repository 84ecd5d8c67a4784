"""The NumPy backend: `numpy:eager` and `numpy:static`, a thin adapter over the reference
engine in the core (`unigraph.reference`): its natives are NumPy arrays, its ops the op
records' references, its gradients their VJP rules.

Memory: `to_native` copies the caller's array in and `to_numpy` hands out a read-only view,
so no write on either side reaches the other (the engine never writes an array in place).
"""

from __future__ import annotations

import numpy as np

from unigraph import reference
from unigraph.backend import Backend
from unigraph.errors import BackendError
from unigraph.ops import OPS


class NumpyBackend(Backend):
    name = "numpy"
    modes = ("eager", "static")
    framework = "numpy"
    distribution = "numpy"
    extra = ""
    # The op table the engine runs: a subclass may swap a record (the checker's tests build
    # deliberately wrong backends this way).
    ops: dict = OPS

    @property
    def lowerings(self) -> dict:
        """The flat lowering table: each op's NumPy reference is its own lowering."""
        return {name: record.reference for name, record in self.ops.items()}

    def to_native(self, array):
        return np.array(array, copy=True)

    def to_numpy(self, native):
        return reference.read_only(native)

    def is_native(self, obj):
        return isinstance(obj, np.ndarray)

    def eager_op(self, op, inputs, attrs):
        return reference.eager_op(op, inputs, attrs, self.ops)

    def eager_grad(self, fn, watched):
        return reference.eager_grad(fn, watched)

    def compile(self, graph, mode):
        if mode != "static":
            raise BackendError(f"numpy: no compiled mode {mode!r}; compile for 'static' (eager "
                               "mode runs op by op through eager_op)")
        return reference.ReferenceExecutable(graph, self.ops)
