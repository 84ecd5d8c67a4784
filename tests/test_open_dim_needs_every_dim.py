"""Functions that need every dim of their input (flip, pad, tile, flatten, split, var, ...)
of a tensor whose dim input_spec leaves open, on all 9 targets: eager targets know the size
and run; a trace that does not refuses with a ShapeError naming the function, the user's
line and the fix (a size in input_spec, or ug.ensure_shape first), and with that fix the
program runs everywhere (the random tester, with flip, pad and var drawn, found the refusal
naming no fix)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS, run_on

import unigraph as ug
from unigraph.errors import ShapeError

X = np.arange(6, dtype=np.float32).reshape(2, 3)
SPEC = [ug.Spec((None, 3), "float32")]


def flipped(x):
    return ug.flip(x, axis=0)


def flipped_known(x):
    return ug.flip(ug.ensure_shape(x, (2, 3)), axis=0)


@pytest.mark.parametrize("target", TARGETS)
def test_a_refusal_names_the_line_and_the_fix(target):
    program = ug.function(flipped, input_spec=SPEC)
    try:
        out = run_on(target, program, X)
    except ShapeError as error:
        message = str(error)
        assert "flip: the shape [None, 3]" in message
        assert f"{__file__.rsplit('/', 1)[-1]}:22" in message  # flipped's line
        assert "input_spec" in message and "ug.ensure_shape(x, shape)" in message
    else:
        np.testing.assert_array_equal(out, X[::-1])


@pytest.mark.parametrize("target", TARGETS)
def test_with_ensure_shape_it_runs(target):
    program = ug.function(flipped_known, input_spec=SPEC)
    np.testing.assert_array_equal(run_on(target, program, X), X[::-1])
