"""The gradient of prod where a kept axis has size 0, on all 9 targets: no slices, so the
value is empty and the gradient is an empty array of x's shape. The record's gradient rule
(`_prod_vjp`, which numpy:eager and numpy:static run) reshaped the slices with -1, which
NumPy cannot infer for zero elements: a raw ValueError "cannot reshape array of size 0"
(random tester, seed 5057: `ug.prod(v, axis=3)` of a zero-size batch)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS, run_on

import unigraph as ug

CASES = {
    # name: (shape, axis, keepdims)
    "kept_empty": ((0, 3), 1, False),
    "batch_of_images": ((0, 2, 3, 6), 3, False),
    "kept_empty_in_the_middle": ((2, 0, 3), (0, 2), True),
    "reduced_empty": ((3, 0), 1, False),  # one empty slice per row: product 1, no gradient
    "all_empty": ((0, 3), None, False),
}


def _program(axis, keepdims, spec=None):
    def loss(x):
        return ug.sum(ug.prod(x, axis=axis, keepdims=keepdims) * 1.5)

    def program(x):
        return ug.prod(x, axis=axis, keepdims=keepdims), ug.grad(loss)(x)

    return ug.function(program, input_spec=spec) if spec else ug.function(program)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("open_dims", [False, True], ids=["known", "open"])
def test_prod_of_a_zero_size_tensor_and_its_gradient(target, case, open_dims):
    shape, axis, keepdims = CASES[case]
    x = np.zeros(shape, np.float32)
    spec = [ug.Spec((None,) * len(shape), "float32")] if open_dims else None
    value, grad = run_on(target, _program(axis, keepdims, spec), x)
    expected = np.prod(x, axis=axis, keepdims=keepdims)
    assert value.shape == expected.shape and value.dtype == np.float32
    np.testing.assert_array_equal(value, expected)
    assert grad.shape == shape and grad.dtype == np.float32
