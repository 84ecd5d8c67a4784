"""`ug.where` keeps the sign of a zero it selects, and an array constant its -0.0s, on all
9 targets: `ug.where` with operands of different shapes (broadcast) and of one shape, known
sizes or a dim left open by input_spec. In a Program, paddle.where broadcasts operands of
different shapes by adding zeros, and -0.0 + 0.0 is +0.0: paddle:static returned +0.0 for
`ug.where(x == 0, x, 2.0)` at x = -0.0 (quirk "where"); and an array constant's -0.0 ran as
+0.0 there (`1 / ug.tensor([-0.0])` gave +inf; quirk "constant")."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS, run_on

import unigraph as ug
from unigraph.config import Target

X = np.array([[-0.0, 1.5, 0.0], [2.0, -0.0, -3.0]], np.float32)

CASES = {
    # name: (fn of x, the spec's shape on static targets or None)
    "scalar_other": (lambda x: ug.where(x == 0, x, 2.0), None),
    "scalar_x": (lambda x: ug.where(x != 0, -0.0, x), None),
    "row_other": (lambda x: ug.where(x == 0, x, ug.tensor([7.0, -0.0, 5.0])), None),
    "row_condition": (lambda x: ug.where(ug.tensor([True, False, True]), x, -x), None),
    "same_shapes": (lambda x: ug.where(x == 0, x, x * 2.0), None),
    "open_rows": (lambda x: ug.where(x == 0, x, 2.0), (None, 3)),
    "open_rows_row_other": (lambda x: ug.where(x == 0, ug.tensor([-0.0, 0.0, -0.0]), x),
                            (None, 3)),
}


def _run(target, fn, spec_shape):
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        spec = None if spec_shape is None else [ug.Spec(spec_shape, "float32")]
        program = ug.function(fn, input_spec=spec)
        return np.asarray(program(X).numpy())


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("target", TARGETS)
def test_where_keeps_the_sign_of_a_zero(target, case):
    fn, spec_shape = CASES[case]
    expected = np.asarray(run_on("numpy:eager", ug.function(fn), X.astype(np.float64)))
    got = _run(target, fn, spec_shape)
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(expected))


@pytest.mark.parametrize("target", TARGETS)
def test_where_gradient_with_broadcast_operands(target):
    def loss(x, y):
        return ug.sum(ug.where(x > 0, x * 3.0, y) * ug.tensor([1.0, 2.0, -1.0]))

    program = ug.function(lambda x, y: ug.grad(loss, argnums=(0, 1))(x, y))
    y = np.array([0.5, -0.0, 2.0], np.float32)
    expected = run_on("numpy:eager", program, X.astype(np.float64), y.astype(np.float64))
    got = run_on(target, program, X, y)
    for g, e in zip(got, expected):
        np.testing.assert_array_equal(g, e.astype(np.float32))


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("target", TARGETS)
def test_an_array_constant_keeps_its_negative_zeros(target, dtype):
    def fn(x):
        zeros = ug.tensor(np.array([-0.0, 0.0, -0.0, 2.5], dtype))
        return zeros * ug.cast(x[0, 0], dtype), 1.0 / zeros

    x = np.ones((2, 3), np.float32)
    expected = run_on("numpy:eager", ug.function(fn), x)
    got = run_on(target, ug.function(fn), x)
    for g, e in zip(got, expected):
        np.testing.assert_array_equal(g, e)
        np.testing.assert_array_equal(np.signbit(g), np.signbit(e))
    np.testing.assert_array_equal(got[1], np.array([-np.inf, np.inf, -np.inf, 0.4], dtype))
