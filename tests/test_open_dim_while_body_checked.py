"""A `ug.cond` inside a `ug.while_loop` body whose path not taken gives another shape, and a
max in a body over an open axis a run leaves empty, on all 9 targets and
onnxruntime:static.

Eagerly the body's cond traces the branch not taken at each iteration and raises
`ControlFlowShapeError` naming the cond's line; a max over nothing raises `ShapeError`. A
static call's check before the run (`shape_checks.check_before_run`) skipped while_loop
bodies: the static targets returned the taken path's value, and the max gave -inf or the
framework's error. The loop variables keep their first shapes at every iteration, so the
walk now checks the condition and the body on them (a loop that a run never enters is
checked all the same).
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import FORWARD_TARGETS

import unigraph as ug
from unigraph.config import Target
from unigraph.errors import ControlFlowError, ShapeError

SPECS = [ug.Spec((None, 3), "float32")]
ONE = -np.ones((1, 3), np.float32)  # sum < 0: the known path
TWO = -np.ones((2, 3), np.float32)
W = np.array([[0.5, -1.0, 2.0]], np.float32)


def _line(marker: str) -> int:
    with open(__file__) as source:
        return next(i for i, text in enumerate(source, 1) if text.rstrip().endswith(marker))


def cond_in_a_body(x):
    z = ug.tensor(W)

    def body(i, v):
        return i + 1, v + ug.cond(ug.sum(x) > 0.0, lambda: x * 2.0, lambda: z - 1.0)  # cond

    start = (ug.tensor(0), ug.tensor(np.zeros((1, 3), np.float32)))
    return ug.while_loop(lambda i, v: i < 2, body, start)[1]


def max_in_a_body(x):
    def body(i, v):
        return i + 1, v + ug.max(x, axis=0)  # max

    start = (ug.tensor(0), ug.tensor(np.zeros(3, np.float32)))
    return ug.while_loop(lambda i, v: i < 2, body, start)[1]


@pytest.mark.parametrize("target", FORWARD_TARGETS)
def test_a_cond_in_a_loop_body_checks_its_path_not_taken(target):
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        f = ug.function(cond_in_a_body, input_spec=SPECS)
        np.testing.assert_allclose(f(ONE).numpy(), (W - 1.0) * 2.0, rtol=1e-6)
        line = rf"cond at .*test_open_dim_while_body_checked\.py:{_line('# cond')}: value 0 "
        with pytest.raises(ShapeError, match=line) as caught:
            f(TWO)
        assert isinstance(caught.value, ControlFlowError)
        np.testing.assert_allclose(f(ONE).numpy(), (W - 1.0) * 2.0, rtol=1e-6)


@pytest.mark.parametrize("target", FORWARD_TARGETS)
def test_a_max_in_a_loop_body_over_an_open_axis_that_is_empty(target):
    t = Target.parse(target)
    x = np.array([[1.0, 5.0, -2.0], [4.0, 0.5, 3.0]], np.float32)
    with ug.use_backend(t.backend, t.mode):
        f = ug.function(max_in_a_body, input_spec=SPECS)
        np.testing.assert_allclose(f(x).numpy(), x.max(0) * 2.0, rtol=1e-6)
        where = "" if t.mode == "eager" else rf" \(on {target} at .*test_open_dim_while_body_" \
            rf"checked\.py:{_line('# max')}\)"
        with pytest.raises(ShapeError, match=r"max: reducing float32\[0, 3\] over axis \(0,\) "
                                             r"has no elements to compare" + where):
            f(np.zeros((0, 3), np.float32))
