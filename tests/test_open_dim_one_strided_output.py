"""Pools with a stride above 1 along an axis that has one output, and global average
pooling, where `input_spec` leaves the spatial dims open, on all 9 targets, forward and
gradient, against numpy:eager in float64 (conv2d's own cases, TF's quirk there:
tests/test_conv_one_strided_output.py)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TARGETS
from test_conv_one_strided_output import OPEN
from test_open_dim_images import _run

import unigraph as ug
from unigraph.config import Target

POOLS = {  # x shape, kernel, attrs: one output along a strided axis
    "stride (1, 2), one column": ((2, 1, 4, 4), (1, 3), {"stride": (1, 2)}),
    "stride (2, 2), one output, padded": ((3, 2, 3, 3), (3, 3), {"stride": (2, 2),
                                                                "padding": (1, 1)}),
    "stride (2, 1), one row, dilated": ((2, 1, 5, 4), (2, 2), {"stride": (2, 1),
                                                              "dilation": (3, 1)}),
}


# avg_pool2d takes no dilation
POOL_CASES = [(op, case) for op in ("max_pool2d", "avg_pool2d") for case in POOLS
              if op == "max_pool2d" or "dilation" not in POOLS[case][2]]


@pytest.mark.parametrize("opened", list(OPEN))
@pytest.mark.parametrize("op, case", POOL_CASES)
@pytest.mark.parametrize("target", TARGETS)
def test_pools_with_one_strided_output_open(target, op, case, opened):
    x_shape, kernel, attrs = POOLS[case]
    x = np.random.default_rng(8).normal(size=x_shape).astype(np.float32)
    pool = getattr(ug, op)
    _run(lambda x: pool(x, kernel, **attrs), [x], [OPEN[opened]], target)


@pytest.mark.parametrize("opened", list(OPEN))
@pytest.mark.parametrize("target", TARGETS)
def test_global_average_pooling_with_open_dims(target, opened):
    """AdaptiveAvgPool2D(1) (a mean over H and W) of open H and W: every static target
    refused it with a ShapeError while eager targets ran it."""
    x = np.random.default_rng(9).normal(size=(2, 3, 3, 5)).astype(np.float32)
    _run(lambda x: ug.nn.AdaptiveAvgPool2D(1)(x), [x], [OPEN[opened]], target)


@pytest.mark.parametrize("target", TARGETS)
def test_adaptive_pooling_to_more_than_one_cell_needs_known_spatial_dims(target):
    """Its windows depend on H and W: refused while tracing, naming the line, where they
    are open (eager targets know them and run it)."""
    x = np.random.default_rng(9).normal(size=(2, 3, 4, 6)).astype(np.float32)
    t = Target.parse(target)
    with ug.use_backend(t.backend, t.mode):
        run = ug.function(lambda x: ug.nn.AdaptiveAvgPool2D((2, 3))(x),
                          input_spec=[ug.Spec((2, 3, None, None), "float32")])
        if t.mode == "eager":
            assert run(x).numpy().shape == (2, 3, 2, 3)
            return
        with pytest.raises(ug.ShapeError, match="test_open_dim_one_strided_output.py:.*input_spec"):
            run(x)
