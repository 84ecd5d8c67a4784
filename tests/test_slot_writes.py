"""Parameter updates of the slot forms (s <- s * c + d, s <- s + d, s <- d * s, ...) whose new
value the step reads again, on all 9 targets, bit for bit NumPy's: paddle:static makes them
in the parameter's own buffer where the graph makes them (`unigraph_paddle.updates.
plan_writes`) unless something else reads the old value; the value read afterwards, by
ops Paddle may itself run in place, stays the new one."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS

import unigraph as ug
from unigraph.config import Target

F32 = np.float32


def _start(size):
    return np.linspace(-1.0, 1.0, size).astype(F32)


def _run(target, size, read_old: bool):
    g = np.linspace(0.5, -0.3, size).astype(F32)
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        s = ug.Parameter(_start(size), name="s")
        count = ug.Parameter(np.zeros((), F32), name="count")

        @ug.function
        def step(g):
            old = s * 1.0 if read_old else g
            new = s * 0.9 + g  # the slot form; then read twice more, as optimizers do
            ug.assign(s, new)
            ug.assign(count, count + 1.0)
            return new * 0.5, new - g, old, count + 0.0

        outs = [[np.asarray(o.numpy()).copy() for o in step(g)] for _ in range(3)]
        return outs, np.asarray(s.numpy()).copy(), np.asarray(count.numpy()).copy(), g


@pytest.mark.parametrize("read_old", [False, True])
@pytest.mark.parametrize("size", [100, 5000])  # 0-d factor broadcast, and expanded
@pytest.mark.parametrize("target", TARGETS)
def test_slot_updates_read_again(target, size, read_old):
    outs, final, count, g = _run(target, size, read_old)
    s = _start(size)
    for i, (half, less, old, counted) in enumerate(outs):
        new = s * F32(0.9) + g
        np.testing.assert_array_equal(half, new * F32(0.5))
        np.testing.assert_array_equal(less, new - g)
        np.testing.assert_array_equal(old, s * F32(1.0) if read_old else g)
        np.testing.assert_array_equal(counted, F32(i + 1))
        s = new
    np.testing.assert_array_equal(final, s)
    assert count == F32(3)


def test_paddle_static_writes_the_slot_in_place():
    """The mechanism: multiply_ and add_ on the slot parameter itself, and no other
    full-size result for it; not when the old value is read elsewhere."""
    from unigraph.plugins import backends

    def ops(read_old):
        s = ug.Parameter(_start(5000), name="s")

        @ug.function
        def step(g):
            old = s * 1.0 if read_old else g
            new = s * 0.9 + g
            ug.assign(s, new)
            return new * 0.5, old

        graph = step.trace(np.ones(5000, F32))
        executable = backends()["paddle"].compile(graph, "static")
        return [o.name() for o in executable.program.global_block().ops], executable

    names, _ = ops(False)
    assert names.count("pd_op.multiply_") == 1 and names.count("pd_op.add_") == 1
    names, _ = ops(True)
    assert "pd_op.multiply_" not in names and "pd_op.add_" not in names
