"""ug.prod over dims holding one element, at a zero, on all 9 targets: the product is the
element itself and its gradient is the incoming one (the product of no others is 1).

Paddle's prod_grad divides the product by each element, so at a zero it gave NaN (0/0):
the route around it (quirk "prod") handed slices of one element back to Paddle's prod.
Found by the random-program tester (seed 5004): ug.prod of a one-row cross-entropy loss,
which is 0 for one class. Also with the reduced dim left open by input_spec (its size,
1, known only when the program runs).
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS

import unigraph as ug
from unigraph.config import Target

CASES = {  # name: (x, axis, keepdims)
    "[1, 1] axis 0": (np.array([[0.0]]), (0,), True),
    "[1, 3] axis 0": (np.array([[0.0, -0.0, 2.0]]), (0,), False),
    "[3, 1] axis 1, keepdims": (np.array([[1.5], [0.0], [-0.0]]), (1,), True),
    "[1] all": (np.array([0.0]), None, False),
    "[1, 1] all, keepdims": (np.array([[-0.0]]), None, True),
}
WEIGHT = 0.75


@pytest.mark.parametrize("open_dims", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("target", TARGETS)
def test_prod_over_one_element_at_a_zero(target, case, dtype, open_dims):
    x, axis, keepdims = CASES[case]
    x = x.astype(dtype)
    spec = [ug.Spec((None,) * x.ndim, dtype)] if open_dims else None
    expected = np.prod(x, axis=axis, keepdims=keepdims)

    def product(x):
        return ug.prod(x * 1.0, axis=axis, keepdims=keepdims)

    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        forward = ug.function(product, input_spec=spec)
        grad = ug.function(lambda x: ug.grad(lambda x: ug.sum(product(x) * WEIGHT))(x),
                           input_spec=spec)
        out = forward(x).numpy()
        g = grad(x).numpy()
    assert out.shape == expected.shape and out.dtype == expected.dtype
    np.testing.assert_array_equal(out, expected)
    np.testing.assert_array_equal(np.signbit(out), np.signbit(expected))  # -0.0 stays
    # d prod / d x_i is the product of the others: 1 for a slice of one element
    np.testing.assert_array_equal(g, np.full_like(x, WEIGHT))
