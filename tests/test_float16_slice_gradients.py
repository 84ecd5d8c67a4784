"""Gradients of float16 slices (`x[1:]`, `x[::2]`, `x[1:4:2]`, a 2-D strided slice), with
every dim known and with the first left open by input_spec, on all 9 targets.

paddle:static raised Paddle's raw RuntimeError for every one ("op [pd_op.strided_slice_grad]
kernel output args (0) defs should equal op outputs (1)": a Program has no CPU float16
strided_slice_grad kernel), where paddle:eager and every other target compute. The
random-program tester found it in its float16 sweep (seed 14004, 9 programs). The expected
gradient of sum(x[index] * 2) is 2 where the slice reads x and 0 elsewhere, by hand.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS, run_on

import unigraph as ug

X = np.array([[0.5, -1.25, 1.5], [0.25, 2.0, -0.75], [1.0, 0.125, -2.0], [3.0, -0.5, 0.75],
              [-1.5, 0.625, 1.25]], np.float16)
INDICES = {"[1:]": np.s_[1:], "[::2]": np.s_[::2], "[1:4:2]": np.s_[1:4:2],
           "[::2, 1:]": np.s_[::2, 1:]}
SPECS = {"known": None, "open first dim": [ug.Spec((None, 3), "float16")]}


@pytest.mark.parametrize("spec", list(SPECS))
@pytest.mark.parametrize("name", list(INDICES))
@pytest.mark.parametrize("target", TARGETS)
def test_float16_slice_gradient(target, name, spec):
    index = INDICES[name]
    grad = ug.function(ug.grad(lambda x: ug.sum(x[index] * 2.0)), input_spec=SPECS[spec])
    got = run_on(target, grad, X)
    expected = np.zeros(X.shape)
    expected[index] = 2.0
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, expected)
