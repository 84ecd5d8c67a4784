"""The backend lookup every eager op and every @ug.function call makes (`dispatch.backend_of`,
`dispatch.current_backend`) remembers its last answer for the Target object asked; a plugin
registered or unregistered since (`plugins.generation`) makes that answer stale, so the
objects the registry holds now are the ones that run. On all 9 targets."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS

import unigraph as ug
from unigraph.config import Target, current_target
from unigraph.dispatch import backend_of, current_backend
from unigraph.hookspecs import hookimpl
from unigraph.plugins import backends, register_plugin, unregister_plugin


class Nothing:
    """A plugin that provides no backend: registering it only rebuilds the registry."""

    @hookimpl
    def unigraph_backends(self):
        return []


@ug.function
def add_one(x):
    return x + 1.0


@pytest.mark.parametrize("target", TARGETS)
def test_a_registration_makes_the_remembered_backend_stale(target):
    t = Target.parse(target)
    x = np.array([1.5, 2.0], np.float32)
    with ug.use_backend(t.backend, t.mode):
        before = current_backend()
        assert before is backends()[t.backend] is backend_of(current_target())
        assert add_one(x)._backend is before
        plugin = Nothing()
        register_plugin(plugin, name="nothing")
        try:
            during = current_backend()
            # the built-in plugins made new backend objects: those run now
            assert during is not before and during is backends()[t.backend]
            assert backend_of(current_target()) is during
            result = add_one(x)
            assert result._backend is during
            np.testing.assert_array_equal(result.numpy(), [2.5, 3.0])
            assert (ug.tensor(x) * 2.0)._backend is during
        finally:
            unregister_plugin(plugin)
        after = current_backend()
        assert after is not during and after is backends()[t.backend]
        assert add_one(x)._backend is after


@pytest.mark.parametrize("target", TARGETS)
def test_nested_targets_each_get_their_own_backend(target):
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        outer = current_backend()
        with ug.use_backend("numpy", "eager"):
            assert current_backend() is backends()["numpy"]
            assert add_one(np.float32(1.0))._backend is backends()["numpy"]
        assert current_backend() is outer
        assert add_one(np.float32(1.0))._backend is outer
