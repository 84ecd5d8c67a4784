"""The gradient of an einsum whose operand is also the first operand of an add or subtract
(`ug.var` subtracts the mean): paddle:static gave a wrong gradient for the other operand
silently (Paddle 3.3.1's Program einsum gradient; quirk "einsum (gradient)"), e.g. 0.296
off in the random tester's seed 10104, where `ug.std(v)` met `ug.einsum(..., v, w)`."""

import numpy as np
import pytest
from conftest import TARGETS

import unigraph as ug
from unigraph.config import Target

X = np.array([[[-1.06, 1.283, 0.142]], [[-1.394, -0.389, -0.078]],
              [[0.066, -1.18, 1.232]], [[1.904, 1.832, 1.477]]])
W = np.array([[0.833, 1.262, 0.66], [-0.363, 0.89, 0.488], [1.127, 0.12, 1.772]])
Y = np.array([[[0.5, -0.25, 1.5]]])
C = np.cos(np.arange(12) + 0.5).reshape(4, 1, 3)  # the weights of the einsum's result

# The other use of v, and d(sum(other use))/dv per element.
USES = {
    "v - mean(v)": (lambda v, y: v - ug.mean(v, keepdims=True), 0.0),
    "v + y": (lambda v, y: v + y, 1.0),
    "v - y": (lambda v, y: v - y, 1.0),
    "var(v)": (lambda v, y: ug.var(v), None),
}


@pytest.mark.parametrize("use", list(USES))
@pytest.mark.parametrize("target", TARGETS)
def test_the_gradient_of_an_einsum_whose_operand_is_also_added(target, use):
    other, slope = USES[use]

    def loss(x, w, y):
        v = x * 1.5
        return (ug.sum(ug.einsum("aij,jk->aik", v, w) * C)
                + 0.7 * ug.sum(other(v, y)))

    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        gx, gw, _ = ug.function(lambda x, w, y: ug.grad(loss, argnums=(0, 1, 2))(x, w, y))(
            X, W, Y)
    v = 1.5 * X
    np.testing.assert_allclose(gw.numpy(), np.einsum("aij,aik->jk", v, C), rtol=1e-12)
    dv = np.einsum("aik,jk->aij", C, W)
    dv = dv + (0.7 * slope if slope is not None else 0.7 * 2 * (v - v.mean()) / v.size)
    np.testing.assert_allclose(gx.numpy(), 1.5 * dv, rtol=1e-12, atol=1e-12)
