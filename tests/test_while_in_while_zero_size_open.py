"""A `while_loop` nested in another one, whose loop value is empty (a batch of 0) and has a
dim `input_spec` leaves open, on all 9 targets: value and gradient are numpy:eager's, in
their shapes. paddle:static makes such a nested loop's empty result outside its `if` as
zeros of the loop value's shape, and passed paddle.zeros the traced shape with a -1 in it:
a raw ValueError while building ("All elements in shape must be positive"; random tester,
seed 10002).
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS, run_on

import unigraph as ug

SPEC = [ug.Spec((), "float32"), ug.Spec((0, None, 3), "float32")]
SCALE = np.array(0.677, np.float32)
EMPTY = np.zeros((0, 2, 3), np.float32)


def _program(scale, x):
    def outer(k, v):
        _, w = ug.while_loop(lambda m, w: m < 2, lambda m, w: (m + 1, w * scale + 1.0),
                             (ug.tensor(0), v))
        return k + 1, w

    _, v = ug.while_loop(lambda k, v: k < 2, outer, (ug.tensor(0), x))
    return v, ug.tanh(scale) * 2.0


def _loss(scale, x):
    v, t = _program(scale, x)
    return ug.sum(v) + t


@pytest.mark.parametrize("target", TARGETS)
def test_an_empty_loop_value_with_an_open_dim_in_a_nested_loop(target):
    v, t = run_on(target, ug.function(_program, input_spec=SPEC), SCALE, EMPTY)
    assert v.shape == (0, 2, 3) and v.dtype == np.float32
    np.testing.assert_allclose(t, np.tanh(0.677) * 2.0, rtol=1e-6)


@pytest.mark.parametrize("target", TARGETS)
def test_its_gradient(target):
    grad = ug.function(lambda s, x: ug.grad(_loss, argnums=(0, 1))(s, x), input_spec=SPEC)
    d_scale, d_x = run_on(target, grad, SCALE, EMPTY)
    assert d_x.shape == (0, 2, 3)
    np.testing.assert_allclose(d_scale, 2.0 * (1.0 - np.tanh(0.677) ** 2), rtol=1e-5)
