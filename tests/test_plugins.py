"""Plugins: every built-in backend loads through the entry points; a third-party backend
can be registered at run time; `import unigraph` imports no framework."""

import subprocess
import sys

import numpy as np
import pytest

import unigraph as ug
from unigraph.hookspecs import hookimpl
from unigraph.plugins import backends, load_errors, register_plugin, unregister_plugin

BUILT_IN = {"numpy", "torch", "tensorflow", "paddle", "onnxruntime"}


def test_every_built_in_backend_is_registered_and_available():
    """CI installs every framework: a backend that is missing or broken fails the run."""
    assert not load_errors, f"plugins failed to load: {load_errors}"
    found = backends()
    assert BUILT_IN <= set(found), f"missing backends: {BUILT_IN - set(found)}"
    for name in BUILT_IN:
        available, reason = found[name].status()
        assert available, f"backend {name} is not available: {reason}"
        assert found[name].version(), f"backend {name} reports no framework version"


def test_import_unigraph_imports_no_framework():
    code = ("import sys, unigraph, unigraph.nn; "
            "print(sorted(m for m in ('torch', 'tensorflow', 'paddle') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_backend_listing_does_not_import_frameworks():
    code = ("import sys; from unigraph.cli import main; main(['backends']); "
            "print(sorted(m for m in ('torch', 'tensorflow', 'paddle') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip().endswith("[]"), out.stdout + out.stderr
    for target in ("numpy:static", "torch:eager", "tensorflow:function", "paddle:static"):
        assert target in out.stdout


class TinyBackend:
    """A third-party backend: NumPy underneath, counting the ops it runs."""

    @staticmethod
    def make():
        from unigraph_numpy.backend import NumpyBackend

        class Tiny(NumpyBackend):
            name = "tiny"
            ops_run = []

            def eager_op(self, op, inputs, attrs):
                self.ops_run.append(op)
                return super().eager_op(op, inputs, attrs)

            def compile(self, graph, mode):
                self.ops_run.append(f"compile:{graph.name}")
                return super().compile(graph, mode)

        return Tiny()


class TinyPlugin:
    backend = TinyBackend.make()

    @hookimpl
    def unigraph_backends(self):
        return [self.backend]


@pytest.fixture
def tiny():
    plugin = TinyPlugin()
    register_plugin(plugin, name="tiny")
    yield plugin.backend
    unregister_plugin(plugin)


def test_runtime_plugin_runs_a_graph(tiny):
    @ug.function
    def f(x):
        return ug.tanh(x) * 2

    with ug.use_backend("tiny", "eager"):
        eager = f(np.array([0.5])).numpy()
    with ug.use_backend("tiny", "static"):
        static = f(np.array([0.5])).numpy()
    np.testing.assert_allclose(eager, np.tanh([0.5]) * 2)
    np.testing.assert_allclose(static, eager)
    assert "tanh" in tiny.ops_run and "compile:f" in tiny.ops_run


def test_unigraph_plugins_env_restricts_loading():
    code = ("from unigraph.plugins import backends; print(sorted(backends()))")
    env = {**__import__("os").environ, "UNIGRAPH_PLUGINS": "numpy"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         check=True)
    assert out.stdout.strip() == "['numpy']"


# -- the NumPy backend's memory contract (issue 11 item 4, NumPy part) --------------------
def _try_to_write(array) -> None:
    """Write into an array the library handed out: refused (read-only) or without effect."""
    try:
        array[...] = 7
    except ValueError:
        pass


@pytest.mark.parametrize("mode", ["eager", "static"])
def test_numpy_backend_copies_in_and_hands_out_nothing_writable(mode):
    param = ug.Parameter(np.zeros(3, np.float32), name="stored")

    @ug.function
    def store(x):
        ug.assign(param, x)  # the value the static engine used to keep without a copy
        return x, param * 1.0

    fed = np.array([1.0, 2.0, 3.0], np.float32)
    with ug.use_backend("numpy", mode):
        out, doubled = store(fed)
        fed[:] = 9.0  # the caller reuses its buffer
        for handed in (out.numpy(), doubled.numpy(), param.numpy()):
            np.testing.assert_array_equal(handed, [1.0, 2.0, 3.0])
            _try_to_write(handed)
        np.testing.assert_array_equal(param.numpy(), [1.0, 2.0, 3.0])
        np.testing.assert_array_equal(out.numpy(), [1.0, 2.0, 3.0])
        again, _ = store(np.array([4.0, 5.0, 6.0], np.float32))  # the engine's own state
        np.testing.assert_array_equal(param.numpy(), [4.0, 5.0, 6.0])
        np.testing.assert_array_equal(again.numpy(), [4.0, 5.0, 6.0])


def test_numpy_backend_object_never_aliases_its_caller():
    from unigraph.plugins import get_backend

    backend = get_backend("numpy", "eager")
    array = np.ones(3)
    native = backend.to_native(array)
    array[:] = 5.0
    np.testing.assert_array_equal(native, np.ones(3))
    handed = backend.to_numpy(native)
    _try_to_write(handed)
    np.testing.assert_array_equal(native, np.ones(3))

    @ug.function
    def bump(x):
        ug.assign(param, ug.reshape(x, (3,)))  # a view of the feed, stored as a parameter
        return param

    param = ug.Parameter(np.zeros(3), name="p")
    executable = backend.compile(bump.trace(np.zeros((1, 3))), "static")
    weights = np.full(3, 2.0)
    executable.set_param(0, weights)
    weights[:] = 0.0
    np.testing.assert_array_equal(executable.get_param(0), np.full(3, 2.0))
    feed = np.arange(3.0).reshape(1, 3)
    (out,) = executable.run([feed])
    feed[:] = -1.0
    np.testing.assert_array_equal(executable.get_param(0), [0.0, 1.0, 2.0])
    np.testing.assert_array_equal(out, [0.0, 1.0, 2.0])
    for handed in (out, executable.get_param(0)):
        _try_to_write(handed)
    np.testing.assert_array_equal(executable.get_param(0), [0.0, 1.0, 2.0])
