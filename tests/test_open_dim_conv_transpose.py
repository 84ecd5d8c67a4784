"""conv_transpose2d (and ug.nn.ConvTranspose2D) where `input_spec` leaves the batch, the
channels or the spatial dims open (sizes known only when the program runs), on all 9
targets, forward and gradient, against numpy:eager in float64.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS
from test_open_dim_images import _run

import unigraph as ug

CONVS = {  # x shape, w shape, attrs
    "plain": ((2, 2, 3, 4), (2, 3, 2, 2), {}),
    "strided, padded, output_padding": (
        (2, 2, 3, 4), (2, 3, 3, 2),
        {"stride": (2, 3), "padding": (1, 0), "output_padding": (1, 2)}),
    "grouped, dilated": ((2, 4, 3, 3), (4, 1, 2, 3),
                         {"stride": (1, 2), "dilation": (2, 1), "groups": 2}),
    # one input column, stride 2: the gradient w.r.t. x is a conv with one strided output
    # column, one input channel and a batch of 2 (TF's float32 CPU Conv2D quirk)
    "one input column, stride 2": ((2, 2, 4, 1), (2, 1, 1, 3),
                                   {"stride": (1, 2), "output_padding": (0, 1)}),
    "one input cell, stride 2": ((2, 1, 1, 1), (1, 1, 3, 3), {"stride": (2, 2)}),
}
OPEN = {  # which dims of (x, w, bias) the spec leaves open
    "batch": ((0,), (), ()),
    "channels": ((1,), (0,), ()),
    "height and width": ((2, 3), (), ()),
    "every dim": ((0, 1, 2, 3), (0, 1, 2, 3), (0,)),
}


@pytest.mark.parametrize("opened", list(OPEN))
@pytest.mark.parametrize("conv", list(CONVS))
@pytest.mark.parametrize("target", TARGETS)
def test_conv_transpose2d_with_open_dims(target, conv, opened):
    x_shape, w_shape, attrs = CONVS[conv]
    rng = np.random.default_rng(3)
    x = rng.normal(size=x_shape).astype(np.float32)
    w = rng.normal(size=w_shape).astype(np.float32)
    bias = rng.normal(size=(w_shape[1] * attrs.get("groups", 1),)).astype(np.float32)
    _run(lambda x, w, b: ug.conv_transpose2d(x, w, b, **attrs), [x, w, bias], OPEN[opened],
         target)


@pytest.mark.parametrize("opened", ["batch", "height and width"])
@pytest.mark.parametrize("target", TARGETS)
def test_conv_transpose_layer_with_open_dims(target, opened):
    ug.manual_seed(0)
    layer = ug.nn.ConvTranspose2D(2, 3, 3, stride=2, padding=1, output_padding=1,
                                  dtype="float64")  # numpy:eager's reference is float64
    x = np.random.default_rng(4).normal(size=(2, 2, 3, 4))
    _run(lambda x: layer(x), [x], [OPEN[opened][0]], target)
