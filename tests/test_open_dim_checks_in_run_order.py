"""A static call's check before the run raises no later error than the one the program
meets first, on all 9 targets and onnxruntime:static.

The check before the run (`shape_checks.check_before_run`) raises a cond's path not taken
(eagerly traced), a max over an open axis a run leaves empty and a reshape whose -1 does
not divide. It walked the whole graph first: where an earlier node fails for the call's
shapes (a `ug.ensure_shape`, a squeeze of an open dim that is not 1), eagerly that node's
error is raised, and the static targets raised the later cond's instead, naming a line
the user had not reached. Now the walk stops at a node outside a cond's paths whose check
or shape rule fails, and the run raises that node's error, as eagerly.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import FORWARD_TARGETS

import unigraph as ug
from unigraph.config import Target
from unigraph.errors import ControlFlowShapeError, ShapeError

SPECS = [ug.Spec((None, 3), "float32"), ug.Spec((None, 3), "float32")]
ONE = -np.ones((1, 3), np.float32)  # sum < 0: the cond's known path
TWO = -np.ones((2, 3), np.float32)
W = np.array([[0.5, -1.0, 2.0]], np.float32)


def _cond(y):
    z = ug.tensor(W)
    return ug.cond(ug.sum(y) > 0.0, lambda: y * 2.0, lambda: z - 1.0)  # the later cond


def checked_first(x, y):
    return ug.ensure_shape(x, (1, None), message="check A") + _cond(y)


def squeezed_first(x, y):
    return ug.squeeze(x, 0) + _cond(y)


# program -> (the error class, a pattern of its message)
PROGRAMS = {"ug.ensure_shape": (checked_first, ControlFlowShapeError, r"^check A; "),
            "ug.squeeze": (squeezed_first, ShapeError, r"squeeze")}


@pytest.mark.parametrize("program", list(PROGRAMS))
@pytest.mark.parametrize("target", FORWARD_TARGETS)
def test_the_first_failing_node_is_the_error(target, program):
    function, error, message = PROGRAMS[program]
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        f = ug.function(function, input_spec=SPECS)
        np.testing.assert_allclose(f(ONE, ONE).numpy(), (ONE[0] + W - 1.0), rtol=1e-6)
        with pytest.raises(error, match=message) as caught:
            f(TWO, TWO)
        assert "cond at" not in str(caught.value)
        with pytest.raises(ControlFlowShapeError, match=r"cond at .*test_open_dim_checks_in_"
                                                        r"run_order\.py"):
            f(ONE, TWO)  # (the cond alone: its path not taken)
