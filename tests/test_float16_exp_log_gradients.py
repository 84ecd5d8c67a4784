"""Gradients of float16 `exp` and `log` (and of what is built on them: selu,
log(exp(x) + 1)) on all 9 targets, against the float64 NumPy reference.

Paddle 3.3.1 has CPU float16 forward kernels for exp and log but no backward kernels
(`exp_grad`, `log_grad`): paddle:eager raised Paddle's RuntimeError ("kernel ... not
registered") and paddle:static its TypeError, where every other target computes. The
random-program tester found it in its first float16 sweep (a float16 `ug.selu`). The
expected values are the derivatives worked out by hand (e**x, 1/x) in float64.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS, run_on

import unigraph as ug

X = np.array([0.5, -1.25, 1.5, 0.125, -0.75], np.float16)
WEIGHTS = np.array([1.0, -0.5, 0.25, 2.0, -1.0], np.float16)
POSITIVE = np.array([0.5, 1.25, 1.5, 0.125, 3.0], np.float16)

# name -> (f, input, its derivative in float64, worked out by hand)
CASES = {
    "exp": (ug.exp, X, np.exp),
    "log": (ug.log, POSITIVE, lambda x: 1.0 / x),
    "selu": (ug.selu, X, lambda x: 1.0507009873554805 * np.where(
        x > 0, 1.0, 1.6732632423543772 * np.exp(x))),
    "log of exp": (lambda x: ug.log(ug.exp(x) + 1.0), X, lambda x: np.exp(x) / (np.exp(x) + 1)),
}


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("target", TARGETS)
def test_float16_gradient_of_exp_and_log(target, name):
    f, x, derivative = CASES[name]

    @ug.function
    def grad(x):
        return ug.grad(lambda x: ug.sum(f(x) * WEIGHTS))(x)

    got = run_on(target, grad, x)
    assert got.dtype == np.float16
    expected = derivative(x.astype(np.float64)) * WEIGHTS.astype(np.float64)
    np.testing.assert_allclose(got.astype(np.float64), expected, rtol=1e-2, atol=1e-2)
