"""A while_loop in an `if` branch carrying a zero-size value (an empty batch), differentiated,
with the batch dim known or left open by input_spec, on all 9 targets: the result and the
gradients are those of numpy:eager. paddle:static builds such a loop inside an always-taken
`if` of its own, whose zero-size result came out with no memory, and the backward failed (a
raw InvalidArgumentError, 'Axis should be less than or equal to 0'; random tester, seed
5064: a zero-batch conv2d into a loop of tanh)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS, run_on

import unigraph as ug


@ug.function
def program(s, x):
    v = x * 2.0
    if ug.mean(s) < 0.0:
        y = v
    else:
        _, y = ug.while_loop(lambda k, a: k < 3, lambda k, a: (k + 1, ug.tanh(a) * 1.5),
                             (ug.tensor(0), v))
        y = ug.exp(y)
    return y


def loss(s, x):
    return ug.sum(ug.sin(program(s, x)))  # not a plain sum: its gradient varies


def both(s, x):
    return program(s, x), *ug.grad(loss, argnums=(0, 1))(s, x)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("rows", [0, 2])
@pytest.mark.parametrize("sign", [1.0, -1.0])
@pytest.mark.parametrize("batch", [None, "open"])
def test_a_loop_in_a_branch_over_an_empty_batch(target, rows, sign, batch):
    s = np.full(3, sign, np.float32)
    x = np.linspace(-1.0, 1.0, rows * 3, dtype=np.float32).reshape(rows, 3)
    spec = [ug.Spec((3,), "float32"), ug.Spec((None, 3), "float32")] if batch else None
    results = run_on(target, ug.function(both, input_spec=spec), s, x)
    expected = run_on("numpy:eager", ug.function(both), s.astype(np.float64),
                      x.astype(np.float64))
    for result, want in zip(results, expected, strict=True):
        assert result.shape == want.shape
        np.testing.assert_allclose(result, want, rtol=1e-5, atol=1e-6)
