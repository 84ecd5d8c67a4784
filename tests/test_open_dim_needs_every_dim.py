"""Functions that need every dim of their input (split; x.at[...] was one before
test_open_dim_at_any_index.py) of a tensor whose dim input_spec leaves open, on all 9
targets: eager targets know the size and run; a trace that does not refuses with a
ShapeError naming the function, the user's line and the fix (a size in input_spec, or
ug.ensure_shape first), and with that fix the program runs everywhere (the random tester,
with flip, pad and var drawn, found the refusal naming no fix; flip, var, full_like, tile
and pad now run with open dims: test_open_dim_flip.py, _var.py, _creation.py, _tile.py,
_pad.py)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS, run_on

import unigraph as ug
from unigraph.errors import ShapeError

X = np.arange(6, dtype=np.float32).reshape(2, 3)
SPEC = [ug.Spec((None, 3), "float32")]


def halves(x):
    return ug.split(x, 2, axis=0)


def halves_known(x):
    return ug.split(ug.ensure_shape(x, (2, 3)), 2, axis=0)


@pytest.mark.parametrize("target", TARGETS)
def test_a_refusal_names_the_line_and_the_fix(target):
    program = ug.function(halves, input_spec=SPEC)
    try:
        out = run_on(target, program, X)
    except ShapeError as error:
        message = str(error)
        assert "split: the shape [None, 3]" in message
        line = halves.__code__.co_firstlineno + 1
        assert f"{__file__.rsplit('/', 1)[-1]}:{line}" in message  # halves' line
        assert "input_spec" in message and "ug.ensure_shape(x, shape)" in message
    else:
        np.testing.assert_array_equal(np.stack(out), X[:, None])


@pytest.mark.parametrize("target", TARGETS)
def test_with_ensure_shape_it_runs(target):
    program = ug.function(halves_known, input_spec=SPEC)
    np.testing.assert_array_equal(np.stack(run_on(target, program, X)), X[:, None])
