"""Building, loading and first-running a model (bench `build100`, issue 19 item 7) on all 9
targets: the results against a float64 forward written out by hand, and the mechanisms that
made it cheaper. numpy:static keeps a Parameter's own array (`Executable.share_param`) and
every other executable copies it; a finished trace leaves nothing to the cyclic collector;
traced nodes still name the user's line; Linear's input check still refuses bad shapes."""

from __future__ import annotations

import gc

import numpy as np
import pytest
from conftest import TARGETS, run_on

import unigraph as ug
from unigraph.config import Target
from unigraph.errors import ShapeError
from unigraph.ir import Value
from unigraph.tracing import GraphBuilder

DEPTH, WIDTH = 4, 8


def _state(seed=3):
    rng = np.random.default_rng(seed)
    state = {}
    for i in range(DEPTH):
        state[f"{i}.weight"] = (rng.standard_normal((WIDTH, WIDTH)) * 0.5).astype(np.float32)
        state[f"{i}.bias"] = (rng.standard_normal(WIDTH) * 0.1).astype(np.float32)
    return state


def _forward64(state, x):
    h = x.astype(np.float64)
    for i in range(DEPTH):
        h = np.maximum(h @ state[f"{i}.weight"].astype(np.float64)
                       + state[f"{i}.bias"].astype(np.float64), 0)
    return h


def _model(state):
    model = ug.nn.Sequential(*[ug.nn.Linear(WIDTH, WIDTH, act="relu") for _ in range(DEPTH)])
    model.load_state_dict(state)
    return model


def _x():
    return np.random.default_rng(4).standard_normal((5, WIDTH)).astype(np.float32)


def _compiled(function):
    """The one compiled graph of a static @ug.function that was called once."""
    (compiled,) = function._cache.values()
    return compiled


@pytest.mark.parametrize("target", TARGETS)
def test_built_loaded_model_runs_once_then_again_after_set_value(target):
    state, x = _state(), _x()
    model = _model(state)
    function = ug.function(model)
    np.testing.assert_allclose(run_on(target, function, x), _forward64(state, x),
                               rtol=1e-5, atol=1e-6)
    # a new value reaches the compiled graph (no stale copy, no stale shared array)
    state["2.weight"] = -state["2.weight"]
    model[2].weight.set_value(state["2.weight"])
    for _ in range(2):  # the first run walks a plan's steps, the next runs generated code
        np.testing.assert_allclose(run_on(target, function, x), _forward64(state, x),
                                   rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("target", TARGETS)
def test_only_numpy_static_keeps_the_parameter_array(target):
    state, x = _state(), _x()
    model = _model(state)
    function = ug.function(model)
    run_on(target, function, x)
    weight = model[0].weight
    array = weight._host()
    if Target.parse(target).mode == "eager":
        assert function._cache == {}  # (nothing compiled to hold parameters)
        return
    executable = _compiled(function).executable
    index = _compiled(function).params.index(weight)
    if target == "numpy:static":
        kept = executable.params[index]
        assert np.shares_memory(kept, array) and not kept.flags.writeable
        assert array.flags.writeable  # the Parameter's own array is left as it was
        # a view may be written through its base: copied, as is another dtype
        view = np.array(array)[:, :]
        executable.share_param(index, view)
        assert not np.shares_memory(executable.params[index], view)
        executable.share_param(index, array.astype(np.float64))
        assert executable.params[index].dtype == np.float32
        # every kept array is read-only: a copy as a shared view (no write through a
        # parameter handed out, e.g. as an output)
        assert not executable.params[index].flags.writeable
        executable.set_param(index, view)
        assert not executable.params[index].flags.writeable
        assert executable.get_param(index).flags.writeable  # (a copy)
        return
    assert not executable.keeps_shared_params
    copy = np.array(array)
    executable.share_param(index, copy)
    copy[...] = 7.0  # (the contract says never; a copying executable does not see it)
    np.testing.assert_array_equal(executable.get_param(index), array)


@pytest.mark.parametrize("target", TARGETS)
def test_a_finished_trace_leaves_no_cycle(target):
    state, x = _state(), _x()
    run_on(target, ug.function(_model(state)), x)  # (warm: first imports and caches)
    gc.collect()
    gc.disable()
    try:
        np.testing.assert_allclose(run_on(target, ug.function(_model(state)), x),
                                   _forward64(state, x), rtol=1e-5, atol=1e-6)
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        ours = (GraphBuilder, ug.Parameter, ug.nn.Linear, ug.nn.Sequential)
        left = {type(o).__name__ for o in gc.garbage if type(o) in ours}
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    # the trace's builder and the model (its layers, its Parameters and their arrays) are
    # freed by reference counting as soon as the function and the model are dropped. (On
    # tensorflow:function the compiled executable and its graph are a cycle of their own:
    # the tf.function it holds calls one of its methods.)
    assert left == set()


class Residual(ug.nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = ug.nn.Linear(WIDTH, WIDTH, act="relu")

    def forward(self, x):
        return x + self.inner(x)  # RESIDUAL LINE


def _line_of(marker: str) -> int:
    with open(__file__) as source:
        return next(i for i, line in enumerate(source, 1) if marker in line)


def _scaled(x):
    return x * 2.0  # CALLBACK LINE


@pytest.mark.parametrize("target", TARGETS)
def test_traced_nodes_name_the_users_line(target):
    t = Target.parse(target)
    here = __file__.rsplit("/", 1)[-1]
    with ug.use_backend(t.backend, t.mode):
        model = _model(_state())
        graph = ug.function(model).trace(_x())  # TRACE CALL
        sources = {node.source for node in graph.nodes}
        residual = ug.function(Residual()).trace(_x())
        # the user's code called back from inside layers: an activation, a user's module
        mixed = ug.nn.Sequential(ug.nn.Linear(WIDTH, WIDTH, act=_scaled), Residual())
        nested = ug.function(mixed).trace(_x())  # NESTED CALL
    (source,) = sources  # one line: the call of the model, whatever the layers inside
    assert source.endswith(f"{here}:{_line_of('# TRACE' + ' CALL')}")
    line = _line_of("# RESIDUAL" + " LINE")
    assert len(residual.nodes) == 4
    assert all(node.source.endswith(f"{here}:{line}") for node in residual.nodes)
    call, callback = _line_of("# NESTED" + " CALL"), _line_of("# CALLBACK" + " LINE")
    lines = [int(node.source.rsplit(":", 1)[1]) for node in nested.nodes]
    assert [node.op for node in nested.nodes] == ["matmul", "add", "constant", "mul",
                                                  "matmul", "add", "relu", "add"]
    assert lines == [call, call, callback, callback, line, line, line, line]
    assert all(here in node.source for node in nested.nodes)


@pytest.mark.parametrize("target", TARGETS)
def test_linear_still_refuses_a_wrong_input_width(target):
    model = _model(_state())
    bad = np.zeros((5, WIDTH + 1), np.float32)
    with pytest.raises(ShapeError, match=r"Linear '0'.*in_features = 8.*\[5, 9\]"):
        run_on(target, ug.function(model), bad)
    with pytest.raises(ShapeError, match=r"in_features = 8.*\[\]"):
        run_on(target, ug.function(model), np.float32(1.0))


def test_value_checks_its_dtype_and_keeps_its_shape_as_a_tuple():
    value = Value([2, 3], np.dtype("float32"), "x")
    assert (value.shape, value.dtype, value.name) == ((2, 3), "float32", "x")
    assert Value((1,), "int64", id=-1).id == -1
    assert Value((), "bool").id != Value((), "bool").id
    with pytest.raises(TypeError, match="complex64.*is not supported"):
        Value((1,), "complex64")


def test_an_initial_value_draws_with_the_fields_it_was_built_with():
    class Own(ug.init.Initializer):  # a user's initializer: copied the generic way
        __slots__ = ("low",)

        def __init__(self):
            self.low = 1.0

        def draw(self, shape, fan_in, fan_out):
            return np.full(shape, self.low)

        def words(self, shape):
            return 0

    for initializer, want in ((ug.init.uniform(2.0, 2.5), None), (Own(), 1.0)):
        ug.manual_seed(11)
        layer = ug.nn.Linear(3, 2, weight_init=initializer)
        ug.manual_seed(11)
        expected = initializer((3, 2), "float32", 3, 2)
        initializer.low = -100.0  # after the build: the layer's value is unchanged
        got = layer.weight.numpy()
        np.testing.assert_array_equal(got, expected)
        if want is not None:
            assert (got == want).all()
        else:
            assert ((got >= 2.0) & (got < 2.5)).all()
