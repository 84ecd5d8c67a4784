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


def _elementwise(x, y):
    """Top-level elementwise ops whose operands die at once (written into), one read twice
    and one returned (neither may be written into)."""
    dead = x * 2.0 + y                  # x * 2.0 is read once: the add may write into it
    twice = x * y                       # read by two ops
    returned = twice - x                # an output, and read once more below
    last = (returned * dead - twice) / (y + 3.0)
    return last, returned, ug.maximum(dead, twice)


def _elementwise64(x, y):
    x, y = x.astype(np.float64), y.astype(np.float64)
    dead, twice = x * 2.0 + y, x * y
    returned = twice - x
    return [(returned * dead - twice) / (y + 3.0), returned, np.maximum(dead, twice)]


@pytest.mark.parametrize("target", TARGETS)
def test_ops_written_into_dead_operands_agree_with_float64(target):
    rng = np.random.default_rng(8)
    x, y = (rng.standard_normal((3, 5)).astype(np.float32) for _ in range(2))
    want = _elementwise64(x, y)
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        fn = ug.function(_elementwise)
        for _ in range(3):  # numpy:static: a walk, then the generated code writing in place
            got = fn(ug.tensor(x), ug.tensor(y))
            for one, other in zip(got, want):
                np.testing.assert_allclose(one.numpy(), other, rtol=1e-5, atol=1e-6)


def test_the_generated_run_writes_into_dead_operands_only_when_asked():
    from unigraph.reference.codegen import _reusable, generate

    rng = np.random.default_rng(8)
    x, y = (rng.standard_normal((3, 5)).astype(np.float32) for _ in range(2))
    executable = ReferenceExecutable(ug.function(_elementwise).trace(x, y))
    plan = executable.plan
    reusable = _reusable(plan, executable.keep)
    outputs = set(plan.output_slots)
    assert reusable and not reusable & outputs
    env = plan.template.copy()
    env[:2] = [x, y]
    writing, plain = generate(plan, executable.keep), generate(plan)
    in_place = writing(env.copy())
    every = plain(env.copy())  # what run_all reads: every value, none written into
    ufuncs = (np.add, np.subtract, np.multiply, np.divide, np.maximum, np.minimum)

    def written_into(run):  # the ufuncs bound for `ufunc(x, y, out=x)` lines
        return [name for name, value in run.__globals__.items()
                if name.startswith("u") and any(value is u for u in ufuncs)]

    assert written_into(writing) and not written_into(plain)
    read = {*outputs, *executable.keep}
    assert all(in_place[slot] is not None for slot in read)
    assert all(in_place[slot] is None for slot in range(plan.size) if slot not in read)
    assert all(value is not None for value in every)
    for slot in range(plan.size):
        if in_place[slot] is not None:
            np.testing.assert_array_equal(in_place[slot], every[slot])
    want = _elementwise64(x, y)
    for slot, other in zip(plan.output_slots, want):
        np.testing.assert_allclose(in_place[slot], other, rtol=1e-5, atol=1e-6)


def test_a_module_function_says_why_it_is_not_converted_only_when_asked(monkeypatch):
    """ug.function(model) calls the model as it is; the note saying so (which holds the
    model's repr, long for a deep model) is made by source(), not by every first call."""
    model = ug.nn.Sequential(ug.nn.Linear(2, 2))
    reprs = []
    original = ug.nn.Sequential.__repr__
    monkeypatch.setattr(ug.nn.Sequential, "__repr__",
                        lambda self: reprs.append(1) or original(self))
    fn = ug.function(model)
    x = np.ones((1, 2), np.float32)
    np.testing.assert_allclose(fn(x).numpy(), model(ug.tensor(x)).numpy())
    assert reprs == []
    assert fn.source().startswith("# not converted: Sequential is not a Python function")
