"""The frontend on the NumPy engine: tracing, control flow, grads, caching, and the errors
that must name their cause (in every mode)."""

import numpy as np
import pytest

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
