"""A nested list of numbers passed to `ug.grad` / `ug.value_and_grad` is one tensor argument
on every target, as a NumPy array is (static targets used to trace it into scalar inputs
and fail with "`.numpy()` on a symbolic tensor"); `ug.function` keeps its documented
pytree meaning (a list argument is a list of tensors) on every target."""

import numpy as np
import pytest
from conftest import TARGETS, run_on

import unigraph as ug

MATRIX = [[1.0, 2.0], [3.0, 4.0]]


def square_sum(x):
    return ug.sum(x * x)


@pytest.mark.parametrize("target", TARGETS)
def test_grad_of_a_nested_list(target):
    got = run_on(target, lambda: ug.grad(square_sum)(MATRIX))
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, [[2.0, 4.0], [6.0, 8.0]])  # d/dx sum(x*x) = 2x


@pytest.mark.parametrize("target", TARGETS)
def test_value_and_grad_of_a_nested_list_beside_an_array(target):
    def weighted(x, w):
        return ug.sum(x * w)

    y = np.array([[0.5, -1.0], [2.0, 0.25]], np.float32)
    value, gx, gw = run_on(
        target, lambda: (lambda v, g: (v, *g))(
            *ug.value_and_grad(weighted, argnums=(0, 1))(MATRIX, [[0.5, -1.0], [2.0, 0.25]])))
    assert value == pytest.approx(0.5 - 2.0 + 6.0 + 1.0)
    np.testing.assert_array_equal(gx, y)  # d/dx sum(x*w) = w
    np.testing.assert_array_equal(gw, MATRIX)


@pytest.mark.parametrize("target", TARGETS)
def test_grad_of_a_list_inside_a_function(target):
    @ug.function
    def step(scale):
        return ug.grad(lambda x: ug.sum(x * x * scale))([1.0, -3.0])

    np.testing.assert_array_equal(run_on(target, step, np.float32(0.5)), [1.0, -3.0])


@pytest.mark.parametrize("target", TARGETS)
def test_grad_of_a_list_of_tensors_inside_a_function(target):
    # the list [a, 2a] is one tensor (ug.tensor's stacking): d/dv sum(v*v) = 2v = [3, 6]
    got = run_on(target, ug.function(lambda a: ug.grad(square_sum)([a, 2 * a])),
                 np.float32(1.5))
    np.testing.assert_array_equal(got, [3.0, 6.0])


@pytest.mark.parametrize("target", TARGETS)
def test_grad_of_a_ragged_list_names_the_argument_and_line(target):
    t = ug.config.Target.parse(target)
    with ug.use_backend(t.backend, t.mode), pytest.raises(ValueError) as caught:
        ug.grad(square_sum)([[1.0, 2.0], [3.0]])
    message = str(caught.value)
    assert message.startswith("grad(square_sum) argument 0 at tests/test_grad_list_arguments.py:")
    assert "the nested lists are ragged (row [1] has 1 item, row [0] has 2 items)" in message


@pytest.mark.parametrize("target", TARGETS)
def test_function_list_argument_is_a_list_of_tensors(target):
    @ug.function
    def corner_sum(rows):
        return rows[0][1] * 2.0 + rows[1][0]

    assert run_on(target, corner_sum, MATRIX) == pytest.approx(2.0 * 2.0 + 3.0)
