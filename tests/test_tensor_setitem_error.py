"""`y[i] = v` on a unigraph tensor (NumPy and torch users write it) is refused on every
target with a TypeError that names the user's line and the fix, `y.at[i].set(v)`, eagerly
and while a static target traces; before, it was Python's bare "'Tensor' object does not
support item assignment"."""

import numpy as np
import pytest
from conftest import TARGETS, run_on

import unigraph as ug


def assign(x):
    y = x * 2.0
    y[0] = 5.0
    return y


def add_in_place(x):
    y = x * 2.0
    y[1:] += 1.0
    return y


@pytest.mark.parametrize("body", [assign, add_in_place], ids=["set", "add"])
@pytest.mark.parametrize("target", TARGETS)
def test_item_assignment_names_the_line_and_the_at_fix(target, body):
    with pytest.raises(TypeError) as caught:
        run_on(target, ug.function(body), np.arange(3.0))
    message = str(caught.value)
    assert "test_tensor_setitem_error.py" in message
    assert ".at[index].set(value)" in message


@pytest.mark.parametrize("target", TARGETS)
def test_the_at_form_the_message_names_computes_the_assignment(target):
    got = run_on(target, ug.function(lambda x: (x * 2.0).at[0].set(5.0).at[1:].add(1.0)),
                 np.arange(3.0))
    np.testing.assert_array_equal(got, [5.0, 3.0, 5.0])
