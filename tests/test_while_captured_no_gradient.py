"""The gradient of a program whose while_loop body returns a value `r` it reads from outside,
where `r` has no gradient of its own (a cast from an int) and a broadcasting add uses it
outside the loop too, on all 9 targets: numpy:eager's. paddle:static raised a raw TypeError
from Paddle's `call_vjp` (the None gradient that add gives `r` went to the while's vjp;
random tester, seed 5013)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS, run_on

import unigraph as ug

X = np.array([-0.192, 0.407])
Y = np.array([[-0.179, 1.809], [-1.324, 1.941]])
WEIGHTS = np.array([0.5, -1.5])


def loss_with(iterations):
    def loss(x, y):
        r = ug.cast(ug.cast(x * 4.0, "int32"), x.dtype)  # no gradient flows into r
        _, v = ug.while_loop(lambda k, v: k < iterations,
                             lambda k, v: (k + 1, v * r + 1.0), (ug.tensor(0), x))
        return ug.sum(ug.log_softmax(v, axis=0) * WEIGHTS) + ug.sum((r + y) * y)  # r [2] + y [2, 2]

    return loss


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("iterations", [0, 2])
def test_the_gradient_is_numpy_eagers(target, iterations):
    grad = ug.function(lambda x, y: ug.grad(loss_with(iterations), argnums=(0, 1))(x, y))
    expected = run_on("numpy:eager", grad, X, Y)
    got = run_on(target, grad, X, Y)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-12)
