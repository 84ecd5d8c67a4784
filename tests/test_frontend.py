"""The frontend: tracing, control flow, grads, caching, static arguments, loop limits,
Module state and containers, and the errors that must name their cause (in every mode;
the issue-11 tests on every target)."""

import numpy as np
import pytest
from conftest import TARGETS, run_on

import unigraph as ug
from unigraph.errors import ControlFlowError, ShapeError, TracingError

MODES = ["eager", "static"]


@ug.function
def counter(a, b):
    return ug.while_loop(lambda a, b: a < b, lambda a, b: (a + 2, b + 1), (a, b))


@pytest.mark.parametrize("mode", MODES)
def test_counter_loop(mode):
    with ug.use_backend("numpy", mode):
        a, b = counter(0, 10)
    assert (a.item(), b.item()) == (20, 20)
    assert a.dtype == "int64"


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("x,y,want", [(3.0, 2.0, 5.0), (1.0, 2.0, -1.0)])
def test_cond_takes_the_right_branch(mode, x, y, want):
    fn = ug.function(lambda x, y: ug.cond(x > y, lambda: x + y, lambda: x - y))
    with ug.use_backend("numpy", mode):
        assert fn(x, y).item() == want


def test_static_traces_once_per_signature():
    calls = []

    @ug.function
    def f(x):
        calls.append(1)
        return x * 2

    with ug.use_backend("numpy", "static"):
        for _ in range(3):
            f(np.ones(3, np.float32))
        f(np.ones(4, np.float32))
        f(np.ones(4, np.float64))
    assert len(calls) == 3


def test_operators_and_slicing():
    x = ug.tensor(np.arange(12.0).reshape(3, 4))
    np.testing.assert_array_equal(x[1:, ::2].numpy(), np.arange(12.0).reshape(3, 4)[1:, ::2])
    np.testing.assert_array_equal(x[-1].numpy(), [8, 9, 10, 11])
    np.testing.assert_array_equal(x[..., None].shape, (3, 4, 1))
    y = (-x + 1) * 2 / 4 - x ** 2
    np.testing.assert_allclose(y.numpy(), (-np.arange(12.0).reshape(3, 4) + 1) * 2 / 4
                               - np.arange(12.0).reshape(3, 4) ** 2)
    assert (x @ x.T).shape == (3, 3)
    assert (x >= 5).dtype == "bool" and (x != 5).dtype == "bool"


def test_promotion_follows_numpy_with_weak_scalars():
    f32 = ug.tensor(np.ones(2, np.float32))
    i32 = ug.tensor(np.ones(2, np.int32))
    assert (f32 + 2.0).dtype == "float32"
    assert (i32 + 2).dtype == "int32"
    assert (i32 + 2.5).dtype == "float64"
    assert (i32 + f32).dtype == "float64"  # np.result_type(int32, float32)
    assert (i32 / i32).dtype == "float64"
    assert ug.tensor(1.5).dtype == "float32" and ug.tensor(3).dtype == "int64"


@pytest.mark.parametrize("mode", MODES)
def test_grad_through_cond_and_while_matches_finite_differences(mode):
    def f(x):
        y = ug.cond(ug.sum(x) > 0, lambda: x * x, lambda: -x)
        _, y = ug.while_loop(lambda i, y: i < 3, lambda i, y: (i + 1, ug.tanh(y) * 1.5),
                             (ug.tensor(0), y))
        return ug.sum(y * np.array([1.0, 2.0, 3.0]))

    x = np.array([0.3, -0.2, 0.5])
    with ug.use_backend("numpy", mode):
        g = ug.grad(f)(x).numpy()
    eps = 1e-6
    numeric = []
    for i in range(3):
        up, down = x.copy(), x.copy()
        up[i] += eps
        down[i] -= eps
        numeric.append((f(up).item() - f(down).item()) / (2 * eps))
    np.testing.assert_allclose(g, numeric, rtol=1e-6)


@pytest.mark.parametrize("mode", MODES)
def test_value_and_grad_with_several_arguments(mode):
    f = lambda x, y: (ug.sum(x * y), x + y)  # noqa: E731
    with ug.use_backend("numpy", mode):
        (value, aux), (gx, gy) = ug.value_and_grad(f, argnums=(0, 1))(
            np.array([1.0, 2.0]), np.array([3.0, 4.0]))
    assert value.item() == 11.0
    np.testing.assert_array_equal(aux.numpy(), [4.0, 6.0])
    np.testing.assert_array_equal(gx.numpy(), [3.0, 4.0])
    np.testing.assert_array_equal(gy.numpy(), [1.0, 2.0])


@pytest.mark.parametrize("mode", MODES)
def test_parameters_updates_and_random_inputs(mode):
    ug.manual_seed(3)
    w = ug.Parameter(np.ones(3, np.float32), name="w")

    @ug.function
    def step(x):
        loss, (g,) = ug.value_and_grad(lambda: ug.sum(w * x * ug.random.uniform((3,))),
                                       wrt=[w])()
        ug.assign(w, w - 0.5 * g)
        return loss

    for _ in range(2):
        with ug.use_backend("numpy", mode):
            step(np.ones(3, np.float32))
    ug.manual_seed(3)
    draws = [ug.random.generator().random(3).astype(np.float32) for _ in range(2)]
    np.testing.assert_allclose(w.numpy(), 1 - 0.5 * (draws[0] + draws[1]), rtol=1e-6)


def test_bool_of_traced_tensor_names_the_line_and_the_fix():
    @ug.function(autograph=False)  # with autograph (the default) this `if` becomes a cond
    def f(x):
        if x > 0:  # the line the error must name
            return x
        return -x

    with ug.use_backend("numpy", "static"), pytest.raises(TracingError) as error:
        f(1.0)
    message = str(error.value)
    assert "test_frontend.py:" in message and "ug.cond" in message and "ug.while_loop" in message


@pytest.mark.parametrize("mode", MODES)
def test_cond_branches_must_match_in_every_mode(mode):
    fn = ug.function(lambda x: ug.cond(x > 0, lambda: x, lambda: ug.cast(x, "float64")))
    with ug.use_backend("numpy", mode), pytest.raises(ControlFlowError,
                                                      match="float32\\[\\] in .* float64"):
        fn(np.float32(1.0))
    fn2 = ug.function(lambda x: ug.cond(x > 0, lambda: (x, x), lambda: x))
    with ug.use_backend("numpy", mode), pytest.raises(ControlFlowError, match="structure"):
        fn2(np.float32(1.0))


@pytest.mark.parametrize("mode", MODES)
def test_while_body_must_keep_shape_and_dtype_in_every_mode(mode):
    grow = ug.function(lambda x: ug.while_loop(lambda x: ug.sum(x) < 10,
                                               lambda x: ug.concat([x, x]), x))
    with ug.use_backend("numpy", mode), pytest.raises(ControlFlowError,
                                                      match="float32\\[1\\] in loop_vars"):
        grow(np.ones(1, np.float32))
    widen = ug.function(lambda i: ug.while_loop(lambda i: i < 3, lambda i: i + 0.5, i))
    with ug.use_backend("numpy", mode), pytest.raises(ControlFlowError, match="int64.*float64"):
        widen(0)


def test_shape_errors_name_op_shapes_and_line():
    with pytest.raises(ShapeError) as error:
        ug.tensor(np.ones((2, 3))) @ ug.tensor(np.ones((4, 5)))
    assert "matmul" in str(error.value) and "[2, 3]" in str(error.value)
    assert "test_frontend.py:" in str(error.value)


def test_numpy_of_symbolic_tensor_is_a_clear_error():
    f = ug.function(lambda x: x.numpy())
    with ug.use_backend("numpy", "static"), pytest.raises(TracingError, match="symbolic"):
        f(1.0)


def test_dict_loop_vars_and_nested_control_flow():
    def body(state):
        inner = ug.while_loop(lambda j: j < state["i"], lambda j: j + 1, ug.tensor(0))
        return {"i": state["i"] + 1, "total": state["total"] + inner}

    fn = ug.function(lambda: ug.while_loop(lambda s: s["i"] < 5, body,
                                           {"i": ug.tensor(0), "total": ug.tensor(0)}))
    for mode in MODES:
        with ug.use_backend("numpy", mode):
            assert fn()["total"].item() == 0 + 1 + 2 + 3 + 4


@pytest.mark.parametrize("mode", MODES)
def test_numpy_second_order_gradient_is_refused_not_wrong(mode):
    from unigraph.errors import UnigraphError

    second = ug.grad(ug.grad(lambda x: x * x * x))
    with ug.use_backend("numpy", mode), pytest.raises(UnigraphError, match="second order"):
        second(1.5)


@pytest.mark.parametrize("mode", MODES)
def test_reading_a_parameter_after_assign_sees_the_new_value(mode):
    w = ug.Parameter(np.array([1.0, 2.0], np.float32), name="w")

    @ug.function
    def step():
        ug.assign(w, w * 3.0)
        ug.assign(w, w + 1.0)
        return w * 1.0

    with ug.use_backend("numpy", mode):
        out = step()
    np.testing.assert_array_equal(out.numpy(), [4.0, 7.0])
    np.testing.assert_array_equal(w.numpy(), [4.0, 7.0])


# -- issue 11: one program, one meaning on every target -----------------------------------
def _static(target: str) -> bool:
    return not target.endswith(":eager")


@pytest.mark.parametrize("target", TARGETS)
def test_eval_after_a_compiled_call_traces_again_and_train_reuses_the_first_graph(target):
    layer = ug.nn.Dropout(0.5)
    f = ug.function(lambda x: layer(x))
    x = np.ones((4, 8), np.float32)
    ug.manual_seed(0)
    first = run_on(target, f, x)
    layer.eval()
    np.testing.assert_array_equal(run_on(target, f, x), x)  # identity, not a dropped copy
    layer.train()
    again = run_on(target, f, x)
    rng = np.random.default_rng(0)
    masks = [rng.random((4, 8)) >= 0.5 for _ in range(2)]
    np.testing.assert_array_equal(first, np.where(masks[0], 2.0, 0.0))
    np.testing.assert_array_equal(again, np.where(masks[1], 2.0, 0.0))
    assert len(f._cache) == (2 if _static(target) else 0)  # one graph per mode


@pytest.mark.parametrize("target", TARGETS)
def test_batch_norm_statistics_update_after_train_on_a_graph_compiled_in_eval(target):
    layer = ug.nn.BatchNorm2D(1).eval()
    f = ug.function(lambda x: layer(x))
    x = np.arange(8, dtype=np.float32).reshape(2, 1, 2, 2)
    run_on(target, f, x)
    np.testing.assert_array_equal(layer.running_mean.numpy(), [0.0])
    layer.train()
    run_on(target, f, x)
    np.testing.assert_allclose(layer.running_mean.numpy(), [0.1 * 3.5], rtol=1e-6)


class _Blocks(ug.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = [ug.nn.Linear(2, 2), ug.nn.Linear(2, 2)]
        self.extra = {"scale": ug.Parameter(np.array([2.0], np.float32))}
        self.heads = ug.nn.ModuleDict({"out": ug.nn.Linear(2, 1, bias=False)})
        self.stack = ug.nn.ModuleList([ug.nn.Dropout(0.5)])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        for drop in self.stack:
            x = drop(x)
        return self.heads["out"](x) * self.extra["scale"]


def test_containers_register_with_dotted_names_and_follow_state_dict():
    model = _Blocks()
    names = [name for name, _ in model.named_parameters()]
    assert names == ["extra.scale",  # the module's own first, then its children's
                     "layers.0.weight", "layers.0.bias", "layers.1.weight", "layers.1.bias",
                     "heads.out.weight"]
    assert [p.name for p in model.parameters()] == names
    model.layers.append(ug.nn.Linear(2, 2))  # appended later: registered all the same
    assert "layers.2.weight" in dict(model.named_parameters())
    model.eval()
    assert not model.stack[0].training and not model.layers[2].training
    state = model.state_dict()
    other = _Blocks()
    other.layers.append(ug.nn.Linear(2, 2))
    other.load_state_dict(state)
    for key, value in other.state_dict().items():
        np.testing.assert_array_equal(value, state[key])
    incomplete = {k: v for k, v in state.items() if k != "layers.2.weight"}
    with pytest.raises(KeyError, match="missing keys: layers.2.weight"):
        other.load_state_dict(incomplete)
    listing = repr(model)
    assert "(layers.0): Linear" in listing and "(heads): ModuleDict" in listing


def test_module_list_and_dict_check_what_they_hold():
    with pytest.raises(TypeError, match="item 0 is a int"):
        ug.nn.ModuleList([3])
    with pytest.raises(KeyError, match="without '.'"):
        ug.nn.ModuleDict({"a.b": ug.nn.ReLU()})
    blocks = ug.nn.ModuleList([ug.nn.ReLU(), ug.nn.Tanh()])
    blocks.insert(0, ug.nn.Sigmoid())
    del blocks[1]
    assert [type(m).__name__ for m in blocks] == ["Sigmoid", "Tanh"]
    assert [name for name, _ in blocks.named_modules()] == ["", "0", "1"]
    heads = ug.nn.ModuleDict({"train": ug.nn.ReLU()})  # a key cannot hide a method
    assert callable(heads.train) and isinstance(heads["train"], ug.nn.ReLU)


@pytest.mark.parametrize("target", TARGETS)
def test_container_model_runs_and_trains_every_parameter(target):
    model = _Blocks().eval()
    x = np.array([[0.5, -1.0]], np.float32)
    params = model.parameters()
    grads = run_on(target, ug.function(ug.grad(lambda x: ug.sum(model(x)), wrt=params)), x)
    weights = {name: p.numpy().astype(np.float64) for name, p in model.named_parameters()}
    h0 = x @ weights["layers.0.weight"] + weights["layers.0.bias"]
    h1 = h0 @ weights["layers.1.weight"] + weights["layers.1.bias"]
    out = h1 @ weights["heads.out.weight"] * weights["extra.scale"]
    np.testing.assert_allclose(run_on(target, ug.function(model), x), out, rtol=1e-5)
    assert len(grads) == 6 and all(np.any(g != 0) for g in grads)
    by_name = dict(zip(weights, grads))
    np.testing.assert_allclose(by_name["extra.scale"], out.sum() / weights["extra.scale"],
                               rtol=1e-5)


@pytest.mark.parametrize("target", TARGETS)
def test_static_arguments_stay_python_and_key_the_cache(target):
    seen = []

    @ug.function(static_argnums=1, static_argnames=("scale",))
    def f(x, n, scale=1.0):
        seen.append((type(n), type(scale)))
        return x * n * scale

    x = np.array([1.0, 2.0], np.float32)
    np.testing.assert_array_equal(run_on(target, f, x, 3), [3.0, 6.0])
    np.testing.assert_array_equal(run_on(target, f, x, 3), [3.0, 6.0])
    np.testing.assert_array_equal(run_on(target, lambda x: f(x, 2, scale=0.5), x), [1.0, 2.0])
    assert set(seen) == {(int, float)}
    assert len(seen) == (2 if _static(target) else 3)  # a static graph traced once per value
    with pytest.raises(TypeError, match="static argument n is list"):
        run_on(target, f, x, [1])


@pytest.mark.parametrize("target", TARGETS)
def test_retraces_warn_once_naming_the_change_and_the_cache_is_bounded(target, monkeypatch):
    import importlib
    import warnings

    function_module = importlib.import_module("unigraph.function")  # (ug.function: the function)
    monkeypatch.setattr(function_module, "RETRACE_WARNING", 3)
    monkeypatch.setattr(function_module, "MAX_CACHED", 2)
    f = ug.function(lambda x: x * 2.0, name="double")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for size in range(1, 7):
            np.testing.assert_array_equal(run_on(target, f, np.ones(size, np.float32)),
                                          np.full(size, 2.0))
    retraces = [w for w in caught if issubclass(w.category, function_module.RetraceWarning)]
    if not _static(target):
        assert retraces == [] and len(f._cache) == 0  # eager never traces
        return
    assert len(retraces) == 1
    message = str(retraces[0].message)
    assert "double has been traced 4 times" in message and "float32[3] -> float32[4]" in message
    assert "static_argnums" in message
    assert len(f._cache) == 2  # the two most recent signatures


@pytest.mark.parametrize("target", TARGETS)
def test_maximum_iterations_may_be_a_traced_tensor(target):
    f = ug.function(lambda i, n: ug.while_loop(lambda i: i < 100, lambda i: i + 2, i,
                                               maximum_iterations=n))
    assert run_on(target, f, 1, 4) == 9
    with pytest.raises(ControlFlowError, match="maximum_iterations must be a whole number"):
        run_on(target, lambda: ug.while_loop(lambda i: i < 3, lambda i: i + 1, 0,
                                             maximum_iterations=-1))


@pytest.mark.parametrize("target", TARGETS)
def test_loop_limit_comes_from_the_environment_and_a_new_limit_retraces(target, monkeypatch):
    from unigraph import config
    from unigraph.control_flow import loop_limit

    f = ug.function(lambda i: ug.while_loop(lambda i: i < 30, lambda i: i + 1, i))
    monkeypatch.setenv("UNIGRAPH_MAX_LOOP_ITERATIONS", "20")
    config.reload()
    try:
        with pytest.raises(ControlFlowError, match=r"test_frontend\.py:\d+ ran more than 20 "):
            run_on(target, f, 0)
        with loop_limit(40):  # overrides the environment; the graph is traced again
            assert run_on(target, f, 0) == 30
        with loop_limit(None):
            assert run_on(target, f, 0) == 30
    finally:
        monkeypatch.delenv("UNIGRAPH_MAX_LOOP_ITERATIONS")
        config.reload()
    assert run_on(target, f, 0) == 30


@pytest.mark.parametrize("target", TARGETS)
def test_a_refused_assign_writes_nothing(target):
    w = ug.Parameter(np.array([1.0], np.float32), name="w")
    f = ug.function(lambda x: ug.cond(x > 0, lambda: (ug.assign(w, w * 5.0), x)[1],
                                      lambda: x))
    with pytest.raises(TracingError, match="ug.assign to 'w'"):
        run_on(target, f, 1.0)
    np.testing.assert_array_equal(w.numpy(), [1.0])


VIEWS_OF_THE_INPUT = {
    "itself": lambda x: x,
    "reshape": lambda x: ug.reshape(x, (3, 1)),
    "slice": lambda x: x[1:],
    "same-dtype cast": lambda x: ug.cast(x, "float32"),
    "transpose": lambda x: ug.transpose(ug.reshape(x, (1, 3))),
    "cond branch": lambda x: ug.cond(ug.sum(x) > 0, lambda: x, lambda: x * 2),
}


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("view", list(VIEWS_OF_THE_INPUT))
def test_an_output_never_shares_the_callers_array(target, view):
    """Writing to the array a function was called with leaves its earlier result alone."""
    x = np.ones(3, np.float32)

    def call():
        out = ug.function(VIEWS_OF_THE_INPUT[view])(x)
        x[:] = 7.0
        return out

    out = run_on(target, call)
    np.testing.assert_array_equal(np.asarray(out).ravel(), [1.0, 1.0, 1.0][: out.size])
