"""A compiled function is freed with its last user, by reference counting alone.

An executable holds a target's compiled graphs, sessions and parameter buffers. One that
sits in a reference cycle (a tf.function of its own bound method did, on
tensorflow:function) outlives the @ug.function that made it until Python's cyclic GC
happens to run: a loop that makes and drops functions keeps their graphs meanwhile.
"""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest
from conftest import TARGETS

import unigraph as ug
from unigraph.config import Target


def _run_and_watch(target: str):
    """Make a @ug.function with a parameter and a gradient, run it twice on `target`, and
    return weak references to its executables and the function's own result."""
    layer = ug.nn.Linear(3, 2)

    @ug.function
    def step(x):
        loss, grads = ug.value_and_grad(lambda x: ug.sum(ug.tanh(layer(x))))(x)
        return loss, grads

    x = np.linspace(-1.0, 1.0, 6, dtype=np.float32).reshape(2, 3)
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        for _ in range(2):
            loss, _ = step(x)
    executables = [weakref.ref(c.executable) for c in step._cache.values()
                   if c.executable is not None]
    return weakref.ref(step), executables, float(loss.numpy())


@pytest.mark.parametrize("target", TARGETS)
def test_a_dropped_function_frees_its_executable_without_the_cyclic_gc(target):
    from unigraph.plugins import get_backend

    # Importing a framework leaves cyclic garbage that holds the importer's frames (TF's
    # import does): import it first, and collect that, so only the function is watched.
    get_backend(Target.parse(target).backend).load()
    gc.collect()
    gc.disable()  # only reference counting frees anything below
    try:
        function, executables, loss = _run_and_watch(target)
        assert np.isfinite(loss)
        if Target.parse(target).mode != "eager":
            assert executables, "a static target compiled nothing"
        assert function() is None
        assert [e for e in executables if e() is not None] == []
    finally:
        gc.enable()
