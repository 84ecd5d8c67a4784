"""The gradient of a stack of zero-size operands, one of them not differentiated, on all 9
targets: Paddle's eager stack_grad segfaulted there (`unigraph_paddle.quirks`, "stack"), so
a program the random-program tester made (seed 4001) killed the process on paddle:eager."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS, run_on

import unigraph as ug


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("target", TARGETS)
def test_gradient_of_a_stack_of_zero_size_operands(target, dtype):
    def loss(a, b, c):
        stacked = ug.stack([a, b * 2.0], axis=2) + c  # (0, 1, 2, 2, 4), c broadcast
        return ug.sum(stacked * 0.5) + ug.sum(c * 3.0)

    program = ug.function(lambda a, b, c: (ug.stack([a, b], axis=0),
                                           *ug.grad(loss, argnums=(1, 2))(a, b, c)))
    a, b = np.zeros((0, 1, 2, 4), dtype), np.zeros((0, 1, 2, 4), dtype)
    c = np.ones((2, 2, 4), dtype)
    stacked, grad_b, grad_c = run_on(target, program, a, b, c)
    assert stacked.shape == (2, 0, 1, 2, 4) and stacked.dtype == dtype
    assert grad_b.shape == (0, 1, 2, 4) and grad_b.dtype == dtype
    np.testing.assert_array_equal(grad_c, np.full((2, 2, 4), 3.0, dtype))
