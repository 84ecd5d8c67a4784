"""The eager while_loop of eager tensors compares each body result's (shape, dtype) with the
loop variable's at the same position (`control_flow._eager_while_tensors`): a body that
changes the second variable to the first one's dtype raises on every target, and a body
that keeps every type runs to the same values."""

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
def doubling(i, x):
    return ug.while_loop(lambda i, x: i < 3, lambda i, x: (i + 1, x * 2.0), (i, x))


@ug.function
def retyped(i, x):
    # the second variable becomes int64, the first one's dtype: not its own
    return ug.while_loop(lambda i, x: i < 3, lambda i, x: (i + 1, ug.cast(x, "int64")), (i, x))


@pytest.mark.parametrize("target", TARGETS)
def test_each_loop_variable_is_compared_with_its_own_type(target):
    with on(target):
        for _ in range(2):
            i, x = doubling(np.int64(0), np.float32(1.5))
            assert int(i.numpy()) == 3 and x.dtype == "float32"
            np.testing.assert_array_equal(x.numpy(), np.float32(12.0))
        with pytest.raises(ControlFlowError, match=r"float32\[\].*int64\[\]"):
            retyped(np.int64(0), np.float32(1.5))
