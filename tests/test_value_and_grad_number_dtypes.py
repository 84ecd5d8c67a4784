"""Python numbers returned beside the loss by a function `ug.value_and_grad` differentiates
get the dtypes a plain `@ug.function` gives them (README "Dtype rules": a Python float is
float32, an int int64, a bool bool; a NumPy array or scalar keeps its dtype), on every
target, inside a `@ug.function` and called directly, with the gradient unchanged."""

import numpy as np
import pytest
from conftest import TARGETS, run_on

import unigraph as ug

X = np.array([1.0, -2.0, 0.5], np.float32)
# (value, dtype) of each result beside the loss: hand-written, not read from the code.
BESIDE = [(2.5, "float32"), (3, "int64"), (True, "bool"), (1.5, "float64"),
          (np.array([1.0, 2.0], np.float64), "float64")]


def loss_and_numbers(x):
    return ug.sum(x * x), 2.5, 3, True, np.float64(1.5), np.array([1.0, 2.0], np.float64)


def differentiated(x):
    (loss, *numbers), g = ug.value_and_grad(loss_and_numbers)(x)
    return [loss, *numbers, g]


def plain(x):
    return list(loss_and_numbers(x))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("wrapped", [True, False], ids=["in_function", "direct"])
def test_numbers_beside_the_loss_have_a_plain_functions_dtypes(target, wrapped):
    fn = ug.function(differentiated) if wrapped else differentiated
    loss, *numbers, g = run_on(target, fn, X)
    assert loss.dtype == np.float32 and loss == np.float32(1 + 4 + 0.25)
    assert g.dtype == np.float32
    np.testing.assert_array_equal(g, 2 * X)  # d/dx sum(x*x), exact in float32
    assert len(numbers) == len(BESIDE)
    for got, (want, dtype) in zip(numbers, BESIDE):
        assert got.dtype == np.dtype(dtype), (got.dtype, dtype)
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("target", TARGETS)
def test_the_same_dtypes_as_a_plain_function(target):
    _, *numbers, _ = run_on(target, ug.function(differentiated), X)
    _, *plain_numbers = run_on(target, ug.function(plain), X)
    assert [a.dtype for a in numbers] == [b.dtype for b in plain_numbers]
