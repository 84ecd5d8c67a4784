"""Adam's eager update writes the parameter and its moments in place where nothing else holds
their memory (with fused=True also torch:static's step). Checked on all 9 targets, fused
or not: a value the user holds (a reshape of the parameter or of a moment, the parameter's
NumPy array) keeps its numbers through the next steps."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS
from optim_reference import least_squares_data
from optim_steps import least_squares_step

import unigraph as ug
from unigraph.config import Target


def _setup(fused):
    x, y, w, b = least_squares_data(seed=5, rows=7)
    params = [ug.Parameter(w, name="w"), ug.Parameter(b, name="b")]
    optimizer = ug.optim.Adam(params, lr=0.05, fused=fused)

    step = least_squares_step(x, y, params, optimizer)

    return params, optimizer, step


def _held_param_reshape(params, optimizer):
    return ug.reshape(params[0], [-1])


def _held_moment_reshape(params, optimizer):
    return ug.reshape(optimizer.state(params[0], "m"), [-1])


def _held_param_numpy(params, optimizer):
    return params[0].numpy()


HOLDERS = [_held_param_reshape, _held_moment_reshape, _held_param_numpy]


@pytest.mark.parametrize("fused", [False, True], ids=["formula", "fused"])
@pytest.mark.parametrize("hold", HOLDERS, ids=lambda f: f.__name__[len("_held_"):])
@pytest.mark.parametrize("target", TARGETS)
def test_values_the_user_holds_keep_their_numbers(target, hold, fused):
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        params, optimizer, step = _setup(fused)
        step()
        step()
        held = hold(params, optimizer)
        before = np.array(np.asarray(held.numpy() if hasattr(held, "numpy") else held))
        step()
        step()
        after = np.asarray(held.numpy() if hasattr(held, "numpy") else held)
        np.testing.assert_array_equal(after, before)
        # The parameter moved on: the held value is not what it reads now.
        assert not np.array_equal(params[0].numpy().reshape(-1), before.reshape(-1)) or \
            hold is _held_moment_reshape
