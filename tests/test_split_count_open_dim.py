"""`ug.split(x, n)` by a count along a dim that `input_spec` leaves open, on all 9 targets:
where n divides the run's size it runs as eagerly; where it does not, the error names
split, the user's line and the fix, as eager's does. Before, the static targets raised
"reshape: cannot reshape [5] into [2, -1]" (the split's inner reshape of the positions).
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS, run_on

import unigraph as ug

X = np.arange(30, dtype=np.float32).reshape(5, 6)


def _halves(x):
    a, b = ug.split(x, 2, axis=0)
    return a * 2.0 + b


@pytest.mark.parametrize("target", TARGETS)
def test_a_count_that_divides_the_run_size_splits(target):
    program = ug.function(_halves, input_spec=[ug.Spec((None, 6), "float32")])
    got = run_on(target, program, X[:4])
    np.testing.assert_array_equal(got, X[:2] * 2.0 + X[2:4])


@pytest.mark.parametrize("target", TARGETS)
def test_a_count_that_does_not_divide_names_split_and_the_fix(target):
    program = ug.function(_halves, input_spec=[ug.Spec((None, 6), "float32")])
    with pytest.raises(ug.ShapeError) as caught:
        run_on(target, program, X)
    message = str(caught.value)
    assert message.startswith("split: axis 0"), message
    assert "does not split into 2 equal pieces" in message
    assert "test_split_count_open_dim.py:19" in message
    assert "split points as a list" in message
