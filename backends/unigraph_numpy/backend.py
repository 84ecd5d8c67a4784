"""The NumPy backend object: eager ops straight from the op records' reference functions,
a VJP tape for eager gradients, and `Plan`s for the static mode."""

from __future__ import annotations

import contextvars

import numpy as np

from unigraph.backend import Backend, Executable
from unigraph.errors import UnigraphError
from unigraph.ops import OPS
from unigraph_numpy.plan import Plan

_tape: contextvars.ContextVar = contextvars.ContextVar("unigraph_numpy_tape", default=None)


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
            if g is None or op.vjp is None:
                continue
            needs = [id(x) in self.tracked for x in inputs]
            extra = {"needs": needs} if op.partial_vjp else {}
            for x, gx, need in zip(inputs, op.vjp(g, inputs, out, **extra, **attrs), needs):
                if need and gx is not None and x.dtype.kind == "f":
                    grads[id(x)] = grads[id(x)] + gx if id(x) in grads else gx
        return [grads.get(id(leaf), np.zeros_like(leaf)) for leaf in leaves]


class NumpyBackend(Backend):
    name = "numpy"
    modes = ("eager", "static")
    framework = "numpy"
    distribution = "numpy"
    extra = ""

    def to_native(self, array):
        return np.asarray(array)

    def to_numpy(self, native):
        return native

    def is_native(self, obj):
        return isinstance(obj, np.ndarray)

    def eager_op(self, op, inputs, attrs):
        record = OPS[op]
        out = np.asarray(record.reference(*inputs, **attrs))
        tape = _tape.get()
        if tape is not None:
            if any(out is x for x in inputs):
                out = out.copy()  # the tape tells values apart by identity
            tape.record(record, attrs, inputs, out)
        return out

    def eager_grad(self, fn, watched):
        if _tape.get() is not None:
            raise UnigraphError("numpy: gradients of gradients (second order) are not supported; "
                                "use the torch backend for higher-order derivatives")
        leaves = [np.asarray(w).view() for w in watched]  # distinct objects, shared memory
        tape = Tape(leaves)
        token = _tape.set(tape)
        try:
            outputs = fn(*leaves)
        finally:
            _tape.reset(token)
        return outputs, tape.backward(outputs[0], leaves)

    def compile(self, graph, mode):
        return NumpyExecutable(graph)


class NumpyExecutable(Executable):
    def __init__(self, graph):
        self.graph = graph
        self.plan = Plan(graph)
        self.params = [None] * len(graph.params)
        index = {v.id: i for i, v in enumerate(graph.params)}
        self.updates = [(index[p.id], self.plan.slots[v.id]) for p, v in graph.updates]

    def run(self, inputs):
        env, _ = self.plan.forward(list(inputs) + self.params, False)
        for index, slot in self.updates:
            self.params[index] = env[slot]
        return self.plan.outputs_of(env)

    def run_all(self, inputs):
        env, _ = self.plan.forward(list(inputs) + self.params, False)
        return {value_id: env[slot] for value_id, slot in self.plan.slots.items()}

    def set_param(self, index, array):
        self.params[index] = np.array(array, copy=True)

    def get_param(self, index):
        return self.params[index]
