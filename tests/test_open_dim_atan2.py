"""ug.atan2 of operands that broadcast along dims `input_spec` leaves open, on all 9
targets, forward and gradient, against numpy:eager in float64.

paddle:static raised a raw InvalidArgumentError building the gradient ("The expanded size
(-1) for non-existing dimensions must be positive for expand_v2 op"): Paddle's atan2
gradient cannot reduce a broadcast over an open dim (found by the random-program tester,
seed 8002, beside a conv_transpose2d).
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS
from test_open_dim_images import _run

import unigraph as ug

RNG = np.random.default_rng(8)
A = RNG.normal(size=(4, 1, 1)).astype(np.float32)
B = RNG.normal(size=(3, 4, 1, 1)).astype(np.float32)
OPEN = {"the leading dims": ((0,), (0,)), "every dim": ((0, 1, 2), (0, 1, 2, 3)),
        "one operand's": ((), (0, 1))}


@pytest.mark.parametrize("swap", [False, True], ids=["atan2(a, b)", "atan2(b, a)"])
@pytest.mark.parametrize("opened", list(OPEN))
@pytest.mark.parametrize("target", TARGETS)
def test_atan2_broadcasting_open_dims(target, opened, swap):
    def fn(a, b):
        return ug.atan2(b, a) if swap else ug.atan2(a, b)

    _run(fn, [A, B], OPEN[opened], target)
