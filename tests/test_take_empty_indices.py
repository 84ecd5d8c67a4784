"""ug.take with an empty index array of rank 2 (so the result has an empty dim between
others), of a tensor whose first dim input_spec leaves open or states, on all 9 targets and
onnxruntime:static, with its gradient (zeros: nothing was taken).

paddle:static's `take` lowering reshaped the gather to a listed shape, and Paddle's reshape
reads a listed 0 as "copy that dim of the input": along axis 1 of an open x it raised a raw
InvalidArgumentError while building. The shape of an empty result is now read from a tensor.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import FORWARD_TARGETS, TARGETS, run_on

import unigraph as ug

X = np.arange(10, dtype=np.float32).reshape(2, 5)
SPECS = {"open": ug.Spec((None, 5), "float32"), "closed": ug.Spec((2, 5), "float32")}
CASES = {"axis 0, (3, 0)": (0, (3, 0)), "axis 1, (0, 2)": (1, (0, 2))}


def _take_nothing(case):
    """(x -> ug.take of the case's empty indices along its axis, those indices, the axis)."""
    axis, index_shape = CASES[case]
    indices = np.zeros(index_shape, np.int64)
    return (lambda x: ug.take(x, indices, axis=axis)), indices, axis


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("dim", list(SPECS))
@pytest.mark.parametrize("target", FORWARD_TARGETS)
def test_take_of_no_indices_is_empty(target, dim, case):
    take, indices, axis = _take_nothing(case)
    fn = ug.function(take, input_spec=[SPECS[dim]])
    got = run_on(target, fn, X)
    assert got.shape == np.take(X, indices, axis=axis).shape


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("dim", list(SPECS))
@pytest.mark.parametrize("target", TARGETS)
def test_the_gradient_of_taking_nothing(target, dim, case):
    take = _take_nothing(case)[0]

    def loss(x):
        return ug.sum(take(x)) + ug.sum(x * x)

    grad = ug.function(lambda x: ug.grad(loss)(x), input_spec=[SPECS[dim]])
    np.testing.assert_array_equal(run_on(target, grad, X), 2 * X)
