"""Two branches of one function over the same variables share their closure cells (`lambda:
y + x[0]`, `lambda: x + y[0]`, with casts); the eager cond's check key
(`control_flow._branches_key`) reads such cells once. What they hold must still decide it:
a variable that now holds a tensor of another shape or dtype makes the untaken branch
checked again, and a branch that would now return another type raises on every target (a
static one traces both branches anyway), on the first call that changes it."""

import numpy as np
import pytest
from conftest import TARGETS

import unigraph as ug
from unigraph.config import Target
from unigraph.errors import ControlFlowError


def on(target):
    t = Target.parse(target)
    return ug.use_backend(t.backend, t.mode)


@ug.function
def choose(x, y):
    # both branches close over x and y: the same two cells
    return ug.cond(ug.sum(x) > 0.0, lambda: y + ug.cast(x[0], y.dtype),
                   lambda: x + ug.cast(y[0], x.dtype))


@pytest.mark.parametrize("target", TARGETS)
def test_a_shared_cell_of_a_new_shape_is_checked_again(target):
    two = np.array([1.0, 2.0], np.float32)
    three = np.array([1.0, 2.0, 3.0], np.float32)
    with on(target):
        for _ in range(2):  # checked once, then remembered: the same answer
            np.testing.assert_array_equal(choose(two, two).numpy(), [2.0, 3.0])
        with pytest.raises(ControlFlowError, match=r"float32\[2\].*float32\[3\]"):
            choose(three, two)  # the other branch would return x's shape, [3]
        for _ in range(2):
            np.testing.assert_array_equal(choose(three, three).numpy(), [2.0, 3.0, 4.0])


@pytest.mark.parametrize("target", TARGETS)
def test_a_shared_cell_of_a_new_dtype_is_checked_again(target):
    x = np.array([1.0, 2.0], np.float32)
    with on(target):
        np.testing.assert_array_equal(choose(x, x).numpy(), [2.0, 3.0])
        with pytest.raises(ControlFlowError, match=r"float32\[2\].*float64\[2\]"):
            choose(x.astype(np.float64), x)  # the other branch would return x's dtype
        np.testing.assert_array_equal(choose(x, x).numpy(), [2.0, 3.0])
