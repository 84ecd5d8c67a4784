"""`ug.sort` along (and across) dims that `input_spec` leaves open, on all 9 targets, as
eagerly. Before, every static target refused it while tracing ("this function needs every
dim"), where `ug.argsort` and the eager targets ran it.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS, run_on

import unigraph as ug

X = np.array([[3.0, np.nan, 1.0, -0.5], [2.0, -1.0, 2.0, 7.0], [0.0, 5.0, -3.0, 1.0]],
             np.float32)


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("spec", [(None, 4), (3, None), (None, None)], ids=str)
@pytest.mark.parametrize("target", TARGETS)
def test_sort_along_an_open_dim_runs_as_eagerly(target, spec, axis):
    program = ug.function(lambda x: ug.sort(x, axis=axis),
                          input_spec=[ug.Spec(spec, "float32")])
    got = run_on(target, program, X)
    np.testing.assert_array_equal(got, np.sort(X, axis=axis, kind="stable"))


@pytest.mark.parametrize("target", TARGETS)
def test_sort_of_an_open_dim_sends_its_gradient_back_to_each_place(target):
    weights = np.arange(12, dtype=np.float32).reshape(3, 4)

    def loss(x):
        return ug.sum(ug.sort(x, axis=1) * weights)

    program = ug.function(ug.grad(loss), input_spec=[ug.Spec((None, None), "float32")])
    x = np.nan_to_num(X, nan=9.0)
    got = run_on(target, program, x)
    want = np.empty_like(x)
    np.put_along_axis(want, np.argsort(x, axis=1, kind="stable"), weights, axis=1)
    np.testing.assert_array_equal(got, want)
