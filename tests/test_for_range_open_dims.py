"""A converted `for k in ug.range(ug.tensor(n))` (a bound not traced: the loop runs in
Python, unrolled when traced) whose state is known before the body and has a dim left open
by input_spec after it, on all 9 targets: it runs as a `while` loop with the same state does
(the sizes checked when the program runs), with `continue` too; a run whose sizes differ
is eager's `ControlFlowShapeError` on every target.

Static targets refused it while tracing ("variable 'v' is float32[2, 3] before the loop but
float32[None, 3] after the loop body") where eager targets ran it: the random-program
tester's fixed-seed open-dim batch drew one (a `for` with `continue`, s20). The expected
values are worked out by hand: v = x + 0.25 * k at the last k.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS, run_on

import unigraph as ug
from unigraph.errors import ControlFlowShapeError

SPEC = [ug.Spec((None, 3), "float32")]
X = np.array([[1.0, -2.0, 0.5], [0.25, 3.0, -1.5]], np.float32)


@ug.function(input_spec=SPEC)
def assigned(x):
    v = ug.zeros((2, 3), "float32")
    for k in ug.range(ug.tensor(3)):
        v = x + 0.25 * k
    return v


@ug.function(input_spec=SPEC)
def after_continue(x):
    v = ug.zeros((2, 3), "float32")
    for k in ug.range(ug.tensor(2)):
        if ug.sum(v) > 100.0:
            continue
        v = x + 0.25 * k
    return v


PROGRAMS = {"assigned": (assigned, 0.5), "after continue": (after_continue, 0.25)}


@pytest.mark.parametrize("name", list(PROGRAMS))
@pytest.mark.parametrize("target", TARGETS)
def test_a_for_loop_state_with_an_open_dim_runs(target, name):
    program, added = PROGRAMS[name]
    np.testing.assert_allclose(run_on(target, program, X), X + added, rtol=1e-6)


@pytest.mark.parametrize("target", TARGETS)
def test_a_run_whose_sizes_differ_is_eagers_shape_error(target):
    with pytest.raises(ControlFlowShapeError):
        run_on(target, assigned, np.ones((4, 3), np.float32))
