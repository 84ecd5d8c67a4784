"""The eager reference engine: one op at a time with the op records' NumPy references, and
a VJP tape for gradients of a Python function.

>>> out = eager_op("tanh", [np.array([0.5])], {})
>>> outputs, grads = eager_grad(lambda x: [eager_op("sum", [x], {"axis": None,
...                                                               "keepdims": False})],
...                             [np.ones(3)])
"""

from __future__ import annotations

import contextvars

import numpy as np

from unigraph.ops import OPS
from unigraph.reference.fast_kernels import kernel, vjp_kernel
from unigraph.reference.plan import SECOND_ORDER, SecondOrderUnsupported

_tape: contextvars.ContextVar = contextvars.ContextVar("unigraph_reference_tape", default=None)


class Tape:
    """Records eager ops whose inputs depend on the watched leaves."""

    def __init__(self, leaves):
        self.tracked = {id(x) for x in leaves}
        self.records = []  # (op record, attrs, inputs, output)

    def record(self, op, attrs, inputs, output):
        if any(id(x) in self.tracked for x in inputs):
            self.tracked.add(id(output))
            self.records.append((op, attrs, inputs, output))

    def backward(self, output, leaves) -> list:
        grads = {id(output): np.ones_like(output)}
        for op, attrs, inputs, out in reversed(self.records):
            g = grads.get(id(out))
            vjp = vjp_kernel(op.name, op) or op.vjp
            if g is None or vjp is None:
                continue
            needs = [id(x) in self.tracked for x in inputs]
            extra = {"needs": needs} if op.partial_vjp else {}
            for x, gx, need in zip(inputs, vjp(g, inputs, out, **extra, **attrs), needs):
                if need and gx is not None and x.dtype.kind == "f":
                    grads[id(x)] = grads[id(x)] + gx if id(x) in grads else gx
        # zeros only for a leaf no gradient reached (a default argument would build
        # them for every leaf)
        return [grads[id(leaf)] if id(leaf) in grads else np.zeros_like(leaf)
                for leaf in leaves]


def in_tape() -> bool:
    """Whether `eager_grad` is recording (an in-place write would change a taped value)."""
    return _tape.get() is not None


def eager_op(op: str, inputs: list, attrs: dict, ops=None) -> np.ndarray:
    """Apply op `op` (its record in `ops`, default every registered op) to NumPy `inputs`
    with its fast kernel where there is one (`fast_kernels`); recorded on the active tape,
    if any."""
    record = (OPS if ops is None else ops)[op]
    out = np.asarray((kernel(op, record) or record.reference)(*inputs, **attrs))
    tape = _tape.get()
    if tape is not None:
        if any(out is x for x in inputs):
            out = out.copy()  # the tape tells values apart by identity
        tape.record(record, attrs, inputs, out)
    return out


def eager_grad(fn, watched: list) -> tuple[list, list]:
    """`Backend.eager_grad` for NumPy arrays: call `fn(*leaves)` with the tape recording,
    then apply the recorded ops' VJP rules backwards from `outputs[0]`."""
    if _tape.get() is not None:
        raise SecondOrderUnsupported(SECOND_ORDER)
    leaves = [np.asarray(w).view() for w in watched]  # distinct objects, shared memory
    tape = Tape(leaves)
    token = _tape.set(tape)
    try:
        outputs = fn(*leaves)
    finally:
        _tape.reset(token)
    return outputs, tape.backward(outputs[0], leaves)
