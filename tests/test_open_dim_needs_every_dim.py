"""Functions that need every dim of their input (pad(mode="reflect") along an open axis;
split and x.at[...] were such before test_open_dim_split.py and _at_any_index.py) of a
tensor whose dim input_spec leaves open, on all 9 targets: eager targets know the size and
run; a trace that does not refuses with a ShapeError naming the function, the user's line
and the fix (a size in input_spec, or ug.ensure_shape first), and with that fix the program
runs everywhere (the random tester, with flip, pad and var drawn, found the refusal naming
no fix; flip, var, full_like, tile and pad otherwise now run with open dims:
test_open_dim_flip.py, _var.py, _creation.py, _tile.py, _pad.py)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS, run_on

import unigraph as ug
from unigraph.errors import ShapeError

X = np.arange(6, dtype=np.float32).reshape(2, 3)
SPEC = [ug.Spec((None, 3), "float32")]


def mirrored(x):
    return ug.pad(x, ((1, 1), (0, 0)), mode="reflect")


def mirrored_known(x):
    return ug.pad(ug.ensure_shape(x, (2, 3)), ((1, 1), (0, 0)), mode="reflect")


WANT = np.pad(X, ((1, 1), (0, 0)), mode="reflect")  # NumPy's reflect, worked out by NumPy


@pytest.mark.parametrize("target", TARGETS)
def test_a_refusal_names_the_line_and_the_fix(target):
    program = ug.function(mirrored, input_spec=SPEC)
    try:
        out = run_on(target, program, X)
    except ShapeError as error:
        message = str(error)
        assert "pad(mode='reflect') along an open axis: the shape [None, 3]" in message
        line = mirrored.__code__.co_firstlineno + 1
        assert f"{__file__.rsplit('/', 1)[-1]}:{line}" in message  # mirrored's line
        assert "input_spec" in message and "ug.ensure_shape(x, shape)" in message
    else:
        assert target.endswith(":eager")
        np.testing.assert_array_equal(out, WANT)


@pytest.mark.parametrize("target", TARGETS)
def test_with_ensure_shape_it_runs(target):
    program = ug.function(mirrored_known, input_spec=SPEC)
    np.testing.assert_array_equal(run_on(target, program, X), WANT)
