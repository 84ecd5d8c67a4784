"""A static plan's first run drops each value after its last use (numpy:static), and a long
chain of ops with a parameter update computes the same numbers on its first call (the step
walk) and later ones (the generated code) on every target, against float64 NumPy."""

import numpy as np
import pytest
from conftest import TARGETS

import unigraph as ug
from unigraph.config import Target
from unigraph.reference import ReferenceExecutable

DEPTH = 12


def _weights():
    rng = np.random.default_rng(21)
    return [((rng.standard_normal((6, 6)) * 0.5).astype(np.float32),
             (rng.standard_normal(6) * 0.1).astype(np.float32)) for _ in range(DEPTH)]


def _chain(weights, seen):
    """relu(h @ w + b) DEPTH times; the 4th layer's output is assigned to `seen` and the 8th
    returned as well: a kept update and an output from the middle of the chain."""
    params = [(ug.Parameter(w), ug.Parameter(b)) for w, b in weights]

    def chain(x):
        h, middle = x, None
        for index, (w, b) in enumerate(params):
            h = ug.relu(ug.matmul(h, w) + b)
            if index == 3:
                ug.assign(seen, h)
            if index == 7:
                middle = h
        return h, middle

    return chain


def _reference(x, weights):
    h, values = x.astype(np.float64), []
    for w, b in weights:
        h = np.maximum(h @ w.astype(np.float64) + b, 0.0)
        values.append(h)
    return values


@pytest.mark.parametrize("target", TARGETS)
def test_first_and_later_calls_agree_with_float64(target):
    weights = _weights()
    x = np.random.default_rng(2).standard_normal((4, 6)).astype(np.float32)
    values = _reference(x, weights)
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        seen = ug.Parameter(np.zeros((4, 6), np.float32))
        chain = ug.function(_chain(weights, seen))
        for _ in range(3):  # the first call walks the steps, later ones run generated code
            out, middle = chain(ug.tensor(x))
            np.testing.assert_allclose(out.numpy(), values[-1], rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(middle.numpy(), values[7], rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(seen.numpy(), values[3], rtol=1e-5, atol=1e-6)
            seen.set_value(np.zeros((4, 6), np.float32))


def test_a_first_run_keeps_only_outputs_and_updates():
    weights = _weights()
    x = np.random.default_rng(2).standard_normal((4, 6)).astype(np.float32)
    seen = ug.Parameter(np.zeros((4, 6), np.float32))
    trace = ug.function(_chain(weights, seen)).trace_full(x)
    executable = ReferenceExecutable(trace.graph)
    params = [np.asarray(p.numpy()) for p in trace.params]
    plan = executable.plan
    everything, _ = plan.forward([x, *params], False)  # keep=None: every value
    plan._ran = False  # walk again, dropping
    dropped, _ = plan.forward([x, *params], False, executable.keep)
    kept = {*plan.output_slots, *executable.keep}
    assert executable.keep  # the update's slot
    for slot in kept:
        np.testing.assert_array_equal(dropped[slot], everything[slot])
    intermediates = [s for s in range(plan.size) if s not in kept]
    assert sum(dropped[s] is None for s in intermediates) >= 3 * DEPTH - 2
    assert all(everything[s] is not None for s in range(plan.size))
    values = _reference(x, weights)
    np.testing.assert_allclose(plan.outputs_of(dropped)[0], values[-1], rtol=1e-5, atol=1e-6)
