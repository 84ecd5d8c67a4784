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
from unigraph.reference import fast_kernels
from unigraph.reference.fast_kernels import KERNELS, VJP_KERNELS
from unigraph.reference.plan import SECOND_ORDER, SecondOrderUnsupported

_tape: contextvars.ContextVar = contextvars.ContextVar("unigraph_reference_tape", default=None)


class Tape:
    """Records eager ops whose inputs depend on the watched leaves. Values are told apart
    by identity (`id`): NumPy arrays do not hash."""

    __slots__ = ("tracked", "records")

    def __init__(self, leaves):
        self.tracked = {id(x) for x in leaves}
        self.records = []  # (op record, attrs, inputs, output)

    def record(self, op, attrs, inputs, output):
        tracked = self.tracked
        for x in inputs:  # (a loop, not any(): no generator made for every op of a step)
            if id(x) in tracked:
                tracked.add(id(output))
                self.records.append((op, attrs, inputs, output))
                return

    def backward(self, output, leaves) -> list:
        tracked = self.tracked
        grads = {id(output): _ones_like(output)}
        for op, attrs, inputs, out in reversed(self.records):
            g = grads.get(id(out))
            if g is None:
                continue
            name = op.name
            vjp = VJP_KERNELS.get(name)  # `vjp_kernel`, inline
            if vjp is None or OPS.get(name) is not op:
                vjp = op.vjp
                if vjp is None:
                    continue
            if op.partial_vjp:
                needs = [id(x) in tracked for x in inputs]
                input_grads = vjp(g, inputs, out, needs=needs, **attrs)
            else:
                input_grads = vjp(g, inputs, out, **attrs)
            for x, gx in zip(inputs, input_grads):
                if gx is not None and id(x) in tracked and x.dtype.kind == "f":
                    prior = grads.get(id(x))
                    grads[id(x)] = gx if prior is None else prior + gx
        # zeros only for a leaf no gradient reached (a default argument would build
        # them for every leaf)
        return [grads[id(leaf)] if id(leaf) in grads else np.zeros_like(leaf)
                for leaf in leaves]


_ONES: dict = {}  # (shape, dtype) -> a read-only 1 of a scalar loss's shape, copied


def _ones_like(output):
    """`np.ones_like(output)`, the gradient seed: for the scalar loss of an eager training
    step a copy of a kept 1 (~0.15 us; np.ones_like runs empty_like and copyto through
    Python, ~2 us), a new array either way."""
    if type(output) is np.ndarray and (output.shape == () or output.shape == (1,)):
        key = (output.shape, output.dtype)
        one = _ONES.get(key)
        if one is None:
            one = _ONES[key] = np.ones_like(output)
            one.flags.writeable = False
        return one.copy()
    return np.ones_like(output)


def in_tape() -> bool:
    """Whether `eager_grad` is recording (an in-place write would change a taped value)."""
    return _tape.get() is not None


def eager_op(op: str, inputs: list, attrs: dict, ops=None) -> np.ndarray:
    """Apply op `op` (its record in `ops`, default every registered op) to NumPy `inputs`
    with its fast kernel where there is one (`fast_kernels`); recorded on the active tape,
    if any."""
    record = (OPS if ops is None else ops)[op]
    fast = KERNELS.get(op)  # `kernel`, inline
    if fast is None or OPS.get(op) is not record:
        fast = record.reference
    out = np.asarray(fast(*inputs, **attrs))
    tape = _tape.get()
    if tape is not None:
        for x in inputs:  # (loops, not any(): every op of an eager training step)
            if out is x:
                out = out.copy()  # the tape tells values apart by identity
                break
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


class Composite:
    """A tape record's op for a composite of op records run as one call (`COMPOSITES`):
    what `Tape.backward` reads of an op record, its name and its VJP rule (no op record
    bears the name, so the rule is always this one)."""

    __slots__ = ("name", "vjp", "partial_vjp")

    def __init__(self, name: str, vjp, partial_vjp: bool):
        self.name, self.vjp, self.partial_vjp = name, vjp, partial_vjp


_LINEAR = Composite("linear", fast_kernels.linear_vjp, True)
_CROSS_ENTROPY_MEAN = Composite("cross_entropy_mean", fast_kernels.cross_entropy_mean_vjp,
                                False)


def linear(x, w, b):
    """`ug.nn.functional.linear`'s eager call on the NumPy engine (`COMPOSITES`): the
    records' kernels (`fast_kernels.linear`), one tape record where four dispatch steps,
    records and VJP calls were two each.

    >>> out = linear(np.ones((2, 3), np.float32), np.ones((3, 4), np.float32),
    ...              np.zeros(4, np.float32))
    """
    out = fast_kernels.linear(x, w, b)
    tape = _tape.get()
    if tape is not None:
        tape.record(_LINEAR, {}, [x, w, b], out)
    return out


def cross_entropy_mean(logits, labels):
    """`ug.nn.functional.cross_entropy`'s eager call (integer labels, mean) on the NumPy
    engine: the records' kernels, one tape record whose VJP is the fused mean cross-entropy
    rule numpy:static's generated gradients call (`fast_kernels.mean_cross_entropy_vjp`).

    >>> loss = cross_entropy_mean(np.zeros((2, 3), np.float32), np.array([0, 2]))
    """
    out, loss = fast_kernels.cross_entropy_mean(logits, labels)
    tape = _tape.get()
    if tape is not None:
        tape.record(_CROSS_ENTROPY_MEAN, {"loss": loss}, [logits, labels], out)
    return out


# `Backend.composites` of the NumPy engine: the same numbers as the records' kernels run
# op by op, bit for bit (`tests/test_numpy_eager_composites.py`).
COMPOSITES = {"linear": linear, "cross_entropy_mean": cross_entropy_mean}
