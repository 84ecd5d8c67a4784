"""softmax and log_softmax along an axis that input_spec leaves open and that is empty when
the program runs (a zero-size batch), on all 9 targets: the result and its gradient are
empty arrays of x's shape. paddle:static took the shift's max along that axis, which Paddle
refuses for an empty axis (a raw InvalidArgumentError; random tester, seed 5060:
`ug.softmax(v, axis=-4)` of a pooled zero-size batch)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS, run_on

import unigraph as ug

SPEC = [ug.Spec((None, 3), "float32")]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
@pytest.mark.parametrize("rows", [0, 2])
def test_an_open_axis_empty_at_the_run(target, op, rows):
    fn = getattr(ug, op)

    def program(x):
        return fn(x, axis=0), ug.grad(lambda x: ug.sum(fn(x, axis=0) * 1.5))(x)

    x = np.linspace(-1.0, 1.0, rows * 3, dtype=np.float32).reshape(rows, 3)
    value, grad = run_on(target, ug.function(program, input_spec=SPEC), x)
    expected, expected_grad = run_on("numpy:eager", ug.function(program), x.astype(np.float64))
    assert value.shape == grad.shape == (rows, 3)
    np.testing.assert_allclose(value, expected, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(grad, expected_grad, rtol=1e-5, atol=1e-6)
