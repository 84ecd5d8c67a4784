"""`ug.where` of operands whose dims `input_spec` leaves open, so that their traced shapes
are equal ([None]) but at run time one is 1 and broadcasts, on all 9 targets (and
onnxruntime, forward): the value and gradient are numpy:eager's. paddle:static passed
such operands to paddle.where as they were (a Program's paddle.where broadcasts only
operands whose traced shapes differ), which raised a raw InvalidArgumentError when the
Program ran ("X's shape is [2], Y's shape is [1]"; random tester, seed 5045). Found beside
it: onnxruntime:static could not run a `where` of bool values at all (ONNX Runtime has no
bool Where kernel; now int32 and cast back, as its int16).
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import FORWARD_TARGETS, TARGETS, run_on

import unigraph as ug

# x, y and the condition each take their turn at the run-time size 1 that broadcasts.
CASES = {
    "y broadcasts": ([-1.59, 0.309], [-1.381], [0.5, -0.5]),
    "x broadcasts": ([0.7], [-1.381, 1.25], [0.5, -0.5]),
    "condition broadcasts": ([-1.59, 0.309], [-1.381, 1.25], [0.5]),
}


def _inputs(case, dtype):
    return [np.array(v, dtype=dtype) for v in CASES[case]]


def _spec(dtype):
    return [ug.Spec((None,), dtype)] * 3


def _selected(x, y, c):
    return ug.where(c > 0.0, x, 2 * y)


def _loss(x, y, c):
    picked = _selected(x, y, c)
    return ug.sum(picked * np.cos(np.arange(2) + 0.5).astype(picked.dtype))


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("dtype", ["float32", "int64"])
@pytest.mark.parametrize("target", FORWARD_TARGETS)
def test_where_broadcasts_a_dim_that_is_one_only_at_run_time(target, dtype, case):
    fn = ug.function(_selected, input_spec=_spec(dtype))
    x, y, c = _inputs(case, dtype)
    out = run_on(target, fn, x, y, c)
    np.testing.assert_array_equal(out, np.where(c > 0, x, 2 * y))
    assert out.dtype == dtype


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("target", TARGETS)
def test_the_gradient_is_numpy_eagers(target, case):
    grad = ug.function(lambda x, y, c: ug.grad(_loss, argnums=(0, 1))(x, y, c),
                       input_spec=_spec("float32"))
    inputs = _inputs(case, "float32")
    expected = run_on("numpy:eager", grad, *inputs)
    got = run_on(target, grad, *inputs)
    for g, e in zip(got, expected):
        assert g.shape == e.shape
        np.testing.assert_allclose(g, e, rtol=1e-6)


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("target", FORWARD_TARGETS)
def test_bool_values_broadcast_too(target, case):
    fn = ug.function(lambda x, y, c: ug.where(c > 0.0, x > 0.0, y > 0.0),
                     input_spec=_spec("float32"))
    x, y, c = _inputs(case, "float32")
    out = run_on(target, fn, x, y, c)
    np.testing.assert_array_equal(out, np.where(c > 0, x > 0, y > 0))
    assert out.dtype == np.bool_
