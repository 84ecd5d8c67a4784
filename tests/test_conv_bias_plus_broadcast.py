"""A conv2d with a bias plus a value of another shape that broadcasts against it (a
constant or a fed value), on all 9 targets, forward and gradient, against numpy:eager in
float64, with every dim known and with the batch left open.

On tensorflow:static and tensorflow:function the forward raised a raw
InvalidArgumentError ("Must provide as many biases as the last dimension of the input
tensor") or oneDNN's "could not create a primitive descriptor": Grappler fuses Conv2D +
BiasAdd + AddV2 into one _FusedConv2D that takes the added value for a bias (found by the
random-program tester, seed 8005: `ug.conv2d(...) + ug.linspace(...)`; quirk record).
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS
from test_open_dim_images import _run

import unigraph as ug

RNG = np.random.default_rng(8005)
X = RNG.normal(size=(2, 2, 5, 5)).astype(np.float32)
W = RNG.normal(size=(3, 2, 3, 1)).astype(np.float32)
B = RNG.normal(size=(3,)).astype(np.float32)
ROWS = RNG.normal(size=(1, 1, 1, 5)).astype(np.float32)  # [1, 1, 1, W]: a constant
COLUMN = RNG.normal(size=(1, 1, 2, 1)).astype(np.float32)  # [1, 1, H, 1], fed


def _conv(x, w, b):
    return ug.conv2d(x, w, b, stride=(2, 1))


ADDENDS = {
    "a linspace": lambda x, w, b, c: _conv(x, w, b) + ug.linspace(0.0, 1.0, 5, endpoint=False,
                                                                   dtype=x.dtype),
    "a constant [1, 1, 1, W], on the left": lambda x, w, b, c: ug.cast(ROWS, x.dtype)
    + _conv(x, w, b),
    "a fed [1, 1, H, 1]": lambda x, w, b, c: _conv(x, w, b) + c,
    "a value of the same shape": lambda x, w, b, c: _conv(x, w, b) + _conv(x, w, b) * 0.5,
}
OPEN = {"no dim": ((), (), (), ()), "the batch": ((0,), (), (), ())}


@pytest.mark.parametrize("opened", list(OPEN))
@pytest.mark.parametrize("addend", list(ADDENDS))
@pytest.mark.parametrize("target", TARGETS)
def test_conv_bias_plus_a_value_that_broadcasts(target, addend, opened):
    _run(ADDENDS[addend], [X, W, B, COLUMN], OPEN[opened], target)
