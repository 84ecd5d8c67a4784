"""The NumPy backend: `numpy:eager` and `numpy:static`, a thin adapter over the reference
engine in the core (`unigraph.reference`): its natives are NumPy arrays, its ops the op
records' references, its gradients their VJP rules.

Memory: `to_native` copies the caller's array in and `to_numpy` hands out a read-only view,
so no write on either side reaches the other. The engine writes an array in place only in
`sub_`, the eager optimizers' update, on a parameter's array that nothing else holds.
"""

from __future__ import annotations

import numpy as np

from unigraph import reference
from unigraph.backend import Backend
from unigraph.errors import BackendError
from unigraph.ops import OPS
from unigraph.reference.eager import in_tape


def sub_(param, delta):
    """`param - delta`, written into `param`: the eager optimizers' update, as hand-written
    NumPy does it (`w -= lr * g`, no new parameter array per step). Not an op record:
    `unigraph.optim` looks it up by name, and calls it only on a parameter's array that no
    other Python object holds; a NumPy view holds its base, so that also means no views.
    Here: only an array that owns its writeable memory, of the delta's dtype and shape,
    outside a gradient tape; otherwise a new array, as the `sub` op.

    >>> w = np.ones(3, np.float32)
    >>> sub_(w, np.full(3, 0.5, np.float32)) is w
    True
    """
    if (type(param) is np.ndarray and param.base is None and param.flags.writeable
            and type(delta) is np.ndarray and delta.dtype == param.dtype
            and delta.shape == param.shape and not in_tape()):
        return np.subtract(param, delta, out=param)  # the same rounding as `param - delta`
    return OPS["sub"].reference(param, delta)


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
        """The flat lowering table: each op's NumPy reference is its own lowering, and
        `sub_` (in-place parameter updates, see there). Built once per op table (the
        optimizers ask for `sub_` every step); eager ops run the records themselves."""
        cached = self.__dict__.get("_lowerings")
        if cached is None or cached[0] is not self.ops:
            table = {name: record.reference for name, record in self.ops.items()}
            table["sub_"] = sub_
            cached = self.__dict__["_lowerings"] = (self.ops, table)
        return cached[1]

    def to_native(self, array):
        return np.array(array, copy=True)

    def to_numpy(self, native):
        return reference.read_only(native)

    def is_native(self, obj):
        return isinstance(obj, np.ndarray)

    def eager_op(self, op, inputs, attrs):
        if op == "sub_":  # not an op record: the table's entry (a test may replace it)
            return self.lowerings["sub_"](*inputs)
        return reference.eager_op(op, inputs, attrs, self.ops)

    def eager_grad(self, fn, watched):
        return reference.eager_grad(fn, watched)

    def compile(self, graph, mode):
        if mode != "static":
            raise BackendError(f"numpy: no compiled mode {mode!r}; compile for 'static' (eager "
                               "mode runs op by op through eager_op)")
        return reference.ReferenceExecutable(graph, self.ops)
