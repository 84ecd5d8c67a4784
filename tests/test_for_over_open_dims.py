"""A converted `for row in x` over a dim that `input_spec` leaves open, on all 9 targets.

Autograph unrolls a `for` over a tensor's rows while tracing, so a static trace needs the
number of rows. Eager targets know it (they only check the call against the spec) and run
the loop; static targets refuse it with `ShapeError` naming the user's line, the open dim
and the fix (give the dim a size in input_spec). Before, they raised a bare
`TypeError: cannot iterate over a tensor of shape [None, 3]` naming no line (the
random-program tester's `for` draws over an input with an open first dim).
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest
from conftest import TARGETS, run_on

import unigraph as ug
from unigraph.config import Target
from unigraph.errors import ShapeError

X = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75], [3.0, 1.0, 0.5]], np.float32)


def _sum_rows(x):
    total = x[0] * 0.0
    for row in x:  # the line the refusal names
        total = total * 0.5 + row
    return total


def _expected(x):
    total = np.zeros(x.shape[1:], np.float64)
    for row in x.astype(np.float64):
        total = total * 0.5 + row
    return total


@pytest.mark.parametrize("target", TARGETS)
def test_for_over_rows_of_an_open_dim_runs_eagerly_and_is_refused_with_the_line(target):
    program = ug.function(_sum_rows, input_spec=[ug.Spec((None, 3), "float32")])
    if Target.parse(target).mode == "eager":
        np.testing.assert_allclose(run_on(target, program, X), _expected(X), rtol=1e-6)
        return
    line = inspect.getsourcelines(_sum_rows)[1] + 2
    with pytest.raises(ShapeError) as error:
        run_on(target, program, X)
    message = str(error.value)
    assert f"test_for_over_open_dims.py:{line}" in message, message
    assert "left open by input_spec" in message and "give that dim a size" in message


@pytest.mark.parametrize("target", TARGETS)
def test_for_over_rows_of_a_known_dim_runs_everywhere(target):
    program = ug.function(_sum_rows, input_spec=[ug.Spec((3, 3), "float32")])
    np.testing.assert_allclose(run_on(target, program, X), _expected(X), rtol=1e-6)
