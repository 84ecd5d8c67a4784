"""`numpy:static`'s executable: a `Plan` holding the parameters between runs.

Memory contract: nothing a caller holds can change what the engine holds, and nothing the
engine hands out can be written. Parameters are copied in (`set_param`); a value the graph
assigns to a parameter is copied when it shares memory with an array the caller fed (an
identity, reshape or slice of an input); outputs, fetched intermediates and `get_param` are
read-only views (the engine never writes an array in place, so a view stays valid).
"""

from __future__ import annotations

import numpy as np

from unigraph.backend import Executable
from unigraph.reference.plan import Plan


def read_only(array) -> np.ndarray:
    """A view of `array` that cannot be written (the array itself is left as it was)."""
    view = np.asarray(array).view()
    view.flags.writeable = False
    return view


def _owned(value, feeds: list):
    """`value`, copied if it may share memory with one of `feeds` (the caller's arrays)."""
    if isinstance(value, np.ndarray) and any(
            isinstance(feed, np.ndarray) and np.may_share_memory(value, feed) for feed in feeds):
        return value.copy()
    return value


class ReferenceExecutable(Executable):
    """A graph compiled for the reference engine. `ops` replaces the op table (tests build
    deliberately wrong backends this way).

    >>> executable = ReferenceExecutable(graph)
    >>> executable.set_param(0, w)
    >>> outputs = executable.run([x])
    """

    def __init__(self, graph, ops=None):
        self.graph = graph
        self.plan = Plan(graph, ops)
        self.params = [None] * len(graph.params)
        index = {v.id: i for i, v in enumerate(graph.params)}
        self.updates = [(index[p.id], self.plan.slots[v.id]) for p, v in graph.updates]

    def run(self, inputs):
        feeds = list(inputs)
        env, _ = self.plan.forward(feeds + self.params, False)
        for index, slot in self.updates:
            self.params[index] = _owned(env[slot], feeds)
        return [read_only(_owned(out, feeds)) for out in self.plan.outputs_of(env)]

    def run_all(self, inputs):
        env, _ = self.plan.forward(list(inputs) + self.params, False)
        return {value_id: read_only(env[slot]) for value_id, slot in self.plan.slots.items()
                if env[slot] is not None}

    def set_param(self, index, array):
        self.params[index] = np.array(array, copy=True)

    def get_param(self, index):
        return read_only(self.params[index])
