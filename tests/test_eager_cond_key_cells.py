"""The eager cond's check key (`control_flow._branches_key`) is one flat tuple: a closed-over
tensor gives two entries (shape, dtype), anything else one (its type). Two branches over
different cells (`x` and `scale`; `x`): a scale of a new shape must still make the
untaken branch checked again, and a branch that would then return another shape raises on
every target, on the first call that changes it."""

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
def scaled(x, scale):
    # the first branch closes over `x` and `scale`, the second over `x` alone
    return ug.cond(ug.sum(x) > 0.0, lambda: x * scale, lambda: x)


@pytest.mark.parametrize("target", TARGETS)
def test_a_closed_over_tensor_of_a_new_shape_is_checked_again(target):
    x = np.array([1.0, 2.0], np.float32)
    with on(target):
        for _ in range(2):  # a scalar: both branches give float32[2]
            np.testing.assert_array_equal(scaled(x, np.float32(2.0)).numpy(), [2.0, 4.0])
        column = ug.tensor(np.array([[1.0], [3.0]], np.float32))
        with pytest.raises(ControlFlowError, match=r"float32\[2, 2\].*float32\[2\]"):
            scaled(x, column)  # the taken branch now broadcasts to [2, 2]
        np.testing.assert_array_equal(scaled(x, np.float32(3.0)).numpy(), [3.0, 6.0])
        row = ug.tensor(np.array([2.0, 2.0], np.float32))
        for _ in range(2):  # a tensor of x's shape: the same types again, accepted
            np.testing.assert_array_equal(scaled(x, row).numpy(), [2.0, 4.0])
