"""Which check a failed run-time shape check names (unigraph/shape_checks.py), on all 9
targets and onnxruntime:static.

With several checks in one program, paddle:static and onnxruntime:static named every
check's message ("check A or check B"): Paddle's refused reshape and ONNX Runtime's failed
Reshape carried the run's shape but not which check failed, where the other targets name
the one that failed. Now Paddle's refused shape also holds the check's tag
(`shape_checks.check_tag`), and ONNX Runtime's error names the failed node, whose name
holds it. And onnxruntime:static read any Reshape that ONNX Runtime refused ("cannot be
reshaped") in a program with a check as that check: a user's own reshape that fails when
the program runs was reported as a `ControlFlowShapeError` naming the check's line.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from conftest import FORWARD_TARGETS

import unigraph as ug
from unigraph.config import Target
from unigraph.errors import ControlFlowShapeError, ShapeError

SPECS = [ug.Spec((None, 3), "float32"), ug.Spec((None, 3), "float32")]
ONE = np.ones((1, 3), np.float32)  # sum > 0
TWO = np.ones((2, 3), np.float32)
THREE = np.ones((3, 3), np.float32)
Z = np.zeros((1, 3), np.float32)


def _line(marker: str) -> int:
    with open(__file__) as source:
        return next(i for i, text in enumerate(source, 1) if text.rstrip().endswith(marker))


def two_checks(x, y):
    return (ug.ensure_shape(x, (1, None), message="check A") + 1.0,
            ug.ensure_shape(y, (1, None), message="check B") * 2.0)


def two_conds(x, y):
    z = ug.tensor(Z)
    a = ug.cond(ug.sum(x) > 0.0, lambda: x * 2.0, lambda: z - 1.0)  # first cond
    b = ug.cond(ug.sum(y) > 0.0, lambda: y * 2.0, lambda: z - 1.0)  # second cond
    return a, b


def two_loops(x, y):
    i, z = ug.tensor(np.int64(0)), ug.tensor(Z)
    _, a = ug.while_loop(lambda i, v: i < 2, lambda i, v: (i + 1, v + x), (i, z))  # first loop
    _, b = ug.while_loop(lambda i, v: i < 2, lambda i, v: (i + 1, v + y), (i, z))  # second loop
    return a, b


def _at(marker: str) -> str:
    return rf".* at .*test_open_dim_check_messages\.py:{_line(marker)}: value "


# program -> (the message of a failure in x, of one in y)
PROGRAMS = {
    "ug.ensure_shape": (two_checks, r"check A", r"check B"),
    "ug.cond": (two_conds, _at("# first cond"), _at("# second cond")),
    "ug.while_loop": (two_loops, _at("# first loop"), _at("# second loop")),
}


@pytest.mark.parametrize("program", list(PROGRAMS))
@pytest.mark.parametrize("target", FORWARD_TARGETS)
def test_several_checks_name_the_one_that_failed(target, program):
    function, in_x, in_y = PROGRAMS[program]
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        forward = ug.function(function, input_spec=SPECS)
        a, b = forward(ONE, ONE)
        assert a.shape == b.shape == (1, 3)
        for x, y, message, other, rows in [(TWO, ONE, in_x, in_y, 2),
                                           (ONE, THREE, in_y, in_x, 3)]:
            with pytest.raises(ControlFlowShapeError, match=message) as caught:
                forward(x, y)
            assert not re.search(other, str(caught.value))  # (it named both: "... or ...")
            if program == "ug.ensure_shape":  # (eagerly a cond names the other path's shape)
                assert f"when the program ran it had shape [{rows}, 3]." in str(caught.value)


def with_a_bad_reshape(x, y):
    return ug.ensure_shape(x, (1, None), message="check A") + 1.0, ug.reshape(y, (-1, 2))


@pytest.mark.parametrize("target", FORWARD_TARGETS)
def test_a_reshape_that_fails_is_not_the_check(target):
    """y of three rows cannot be [-1, 2]: eagerly a ShapeError naming reshape (the static
    targets raise their framework's error); never the check that passed."""
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        forward = ug.function(with_a_bad_reshape, input_spec=SPECS)
        a, b = forward(ONE, TWO)
        np.testing.assert_array_equal(b.numpy(), np.ones((3, 2), np.float32))
        with pytest.raises(Exception) as caught:  # noqa: B017 (the error is the framework's)
            forward(ONE, THREE)
        assert not isinstance(caught.value, ControlFlowShapeError)
        assert "check A" not in str(caught.value)
        if t.mode == "eager":
            assert isinstance(caught.value, ShapeError)
            assert "reshape" in str(caught.value)
