"""A `ug.cond` whose path not taken gives a value of another shape, where a dim
`input_spec` leaves open decides, on all 9 targets and onnxruntime:static.

Eagerly `ug.cond` traces the branch not taken and raises `ControlFlowShapeError` when its
value's shape differs ("every path gives a value one shape"). A static run takes one path:
where the path taken knows the dim ([1, 3]) and the other leaves it open (x * 2 of x
[None, 3]), the open path's check did not run and the static targets returned the taken
value for two rows. Every shape is a function of the inputs' shapes, so now each static
call checks the conds' paths against the op records' shape rules for its inputs' shapes
before it runs (once per input shape: `shape_checks.check_before_run`), and raises eager's error
class with the cond's line. Conds nested in a path are checked too, as eagerly (the path
not taken is traced, its conds with it).
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import FORWARD_TARGETS, INFERENCE_TARGETS

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


def known_path_taken(x):
    z = ug.tensor(W)
    return ug.cond(ug.sum(x) > 0.0, lambda: x * 2.0, lambda: z - 1.0) * 3.0  # cond


def nested_in_the_path_taken(x):
    z = ug.tensor(W)
    return ug.cond(ug.sum(x) > 0.0, lambda: z - 1.0,
                   lambda: ug.cond(ug.sum(x) < -100.0, lambda: x * 2.0,  # taken's inner
                                   lambda: z * 2.0)) * 3.0


def nested_in_the_path_not_taken(x):
    z = ug.tensor(W)
    return ug.cond(ug.sum(x) > 0.0,
                   lambda: ug.cond(ug.sum(x) > 100.0, lambda: x * 2.0,  # untaken's inner
                                   lambda: z * 2.0),
                   lambda: z - 1.0) * 3.0


# program -> (the marker of the line its error names, its value for one row)
PROGRAMS = {"cond": (known_path_taken, "# cond", (W - 1.0) * 3.0),
            "in the path taken": (nested_in_the_path_taken, "# taken's inner", W * 6.0),
            "in the path not taken": (nested_in_the_path_not_taken, "# untaken's inner",
                                      (W - 1.0) * 3.0)}


@pytest.mark.parametrize("program", list(PROGRAMS))
@pytest.mark.parametrize("target", FORWARD_TARGETS)
def test_the_open_path_not_taken_is_checked(target, program):
    function, marker, want = PROGRAMS[program]
    t = Target.parse(target)
    line = rf"cond at .*test_open_dim_cond_untaken\.py:{_line(marker)}: value 0 "
    with ug.use_backend(t.backend, t.mode):
        forward = ug.function(function, input_spec=SPECS)
        got = forward(ONE)
        assert got.shape == (1, 3)
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-6)
        for _ in range(3):  # (a static call's later runs take a faster path)
            with pytest.raises(ShapeError, match=line) as caught:
                forward(TWO)
            assert isinstance(caught.value, ControlFlowError)
        np.testing.assert_allclose(forward(ONE).numpy(), want, rtol=1e-6)
        if target in INFERENCE_TARGETS:  # no gradients
            return
        both = ug.function(ug.value_and_grad(lambda x: ug.sum(function(x) * W)),
                           input_spec=SPECS)
        value, grad = both(ONE)
        np.testing.assert_allclose(value.numpy(), np.sum(want * W), rtol=1e-6)
        with pytest.raises(ShapeError, match=line):
            both(TWO)
